//===- JsonImporter.cpp - Imports graphs in Loom's JSON format ------------===//
//
// Reads a model written in Loom's JSON graph format (docs/json-format.md) and
// builds `func.func @forward` in the loom dialect: inputs, then parameters,
// then (if a dropout needs it) the RNG seed as arguments; one loom op per
// node; the named outputs as results. Parameter values (zeros, ones, a
// constant, seeded random draws, or a tensor of a safetensors file) go to the
// ParameterStore, never into the IR.
//
// The import runs in phases so that one run reports every independent problem:
//   1. read and parse the text, and index where each entry starts so that
//      diagnostics point at `file:line:col`;
//   2. check the structure of every entry (fields, JSON types, dtypes, shapes,
//      known ops and attributes, arities), reporting all problems;
//   3. resolve value names (each defined once, every use defined) and order
//      the nodes topologically (the file may list them in any order);
//   4. build the ops in that order, checking shapes; a failed node poisons its
//      outputs so that its users stay quiet instead of cascading;
//   5. verify the module, then materialize the parameter values.
//
// Diagnostics about a node carry its location (NameLoc of the node id around
// the node's file position) and start with "node '<id>': <op>: "; errors that
// come from op type inference or the verifier are captured and re-emitted with
// that prefix, so every message names the node.
//
// nlohmann::json throws; this file is compiled with exceptions and no
// exception leaves importJsonGraph.
//
//===----------------------------------------------------------------------===//

#include "loom/Import/Import.h"

#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Import/GraphBuilder.h"
#include "loomrt/DType.h"
#include "loomrt/Safetensors.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <queue>

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

using namespace mlir;
using namespace loom;
using json = nlohmann::json;

namespace {

//===----------------------------------------------------------------------===//
// Limits and small helpers
//===----------------------------------------------------------------------===//

/// Largest accepted dimension: far above any real model, small enough that
/// products of a dimension with a window attribute cannot overflow int64.
constexpr int64_t kMaxDim = int64_t(1) << 40;
/// Largest accepted kernel, stride, dilation, padding or group count.
constexpr int64_t kMaxWindow = int64_t(1) << 20;
/// Deepest accepted nesting of a constant's value (its rank) and largest rank.
constexpr size_t kMaxRank = 64;

constexpr llvm::StringLiteral kFormatName = "loom-graph";
constexpr int64_t kFormatVersion = 1;

/// A number as a user would write it: 0.02, -1, 1e+300.
std::string fmtNum(double v) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format("%.10g", v);
  return s;
}

/// How a JSON value is described in "expected X, got Y" messages: scalars
/// by their text (strings shortened), containers by their kind.
std::string describe(const json &j) {
  switch (j.type()) {
  case json::value_t::array:
    return "a list";
  case json::value_t::object:
    return "an object";
  case json::value_t::string: {
    const std::string &s = j.get_ref<const std::string &>();
    if (s.size() <= 40)
      return "the string " + j.dump();
    return "the string " + json(s.substr(0, 37) + "...").dump();
  }
  case json::value_t::binary:
  case json::value_t::discarded:
    return "an unsupported value";
  default:
    return j.dump(); // null, true, false, a number.
  }
}

/// An integer JSON value (an integral float such as 2.0 counts), or nullopt.
std::optional<int64_t> asInt(const json &j) {
  if (j.is_number_unsigned()) {
    uint64_t v = j.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return std::nullopt;
    return static_cast<int64_t>(v);
  }
  if (j.is_number_integer())
    return j.get<int64_t>();
  if (j.is_number_float()) {
    double d = j.get<double>();
    if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) < 9.0e18)
      return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

/// A finite number, or nullopt.
std::optional<double> asNumber(const json &j) {
  if (!j.is_number())
    return std::nullopt;
  double d = j.get<double>();
  if (!std::isfinite(d))
    return std::nullopt;
  return d;
}

/// The element type named by a dtype string, or null.
Type parseDtype(MLIRContext *ctx, StringRef name) {
  if (name == "f32")
    return Float32Type::get(ctx);
  if (name == "f16")
    return Float16Type::get(ctx);
  if (name == "bf16")
    return BFloat16Type::get(ctx);
  if (name == "f64")
    return Float64Type::get(ctx);
  if (name == "i64")
    return IntegerType::get(ctx, 64);
  if (name == "i32")
    return IntegerType::get(ctx, 32);
  if (name == "i1")
    return IntegerType::get(ctx, 1);
  return {};
}

constexpr llvm::StringLiteral kDtypeList =
    "\"f32\", \"f16\", \"bf16\", \"f64\", \"i64\", \"i32\" or \"i1\"";

/// The closest of `candidates` to `word`, if it is close enough to be a typo.
std::optional<StringRef> closest(StringRef word,
                                 ArrayRef<StringRef> candidates) {
  std::optional<StringRef> best;
  unsigned bestDist = std::max<unsigned>(2, word.size() / 3) + 1;
  for (StringRef c : candidates) {
    unsigned d = word.edit_distance(c, /*AllowReplacements=*/true, bestDist);
    if (d < bestDist) {
      bestDist = d;
      best = c;
    }
  }
  return best;
}

std::string joinQuoted(ArrayRef<StringRef> names) {
  std::string s;
  for (auto [i, n] : llvm::enumerate(names)) {
    if (i)
      s += ", ";
    s += n.str();
  }
  return s;
}

//===----------------------------------------------------------------------===//
// Element kinds
//===----------------------------------------------------------------------===//

enum class EltKind { Float, Numeric, Index, Bool, Any };

bool matchesKind(Type elt, EltKind kind) {
  switch (kind) {
  case EltKind::Float:
    return isa<FloatType>(elt);
  case EltKind::Numeric:
    return isa<FloatType>(elt) || elt.isInteger(64) || elt.isInteger(32) ||
           elt.isInteger(8);
  case EltKind::Index:
    return elt.isInteger(64) || elt.isInteger(32);
  case EltKind::Bool:
    return elt.isInteger(1);
  case EltKind::Any:
    return true;
  }
  return false;
}

StringRef kindText(EltKind kind) {
  switch (kind) {
  case EltKind::Float:
    return "a floating-point tensor (f16, bf16, f32 or f64)";
  case EltKind::Numeric:
    return "a numeric tensor (a float type, i32 or i64)";
  case EltKind::Index:
    return "an integer tensor (i32 or i64)";
  case EltKind::Bool:
    return "a boolean tensor (i1)";
  case EltKind::Any:
    return "a tensor";
  }
  return "a tensor";
}

//===----------------------------------------------------------------------===//
// Reproducible random numbers
//===----------------------------------------------------------------------===//
//
// Random initializers must give the same bits on every machine and with every
// standard library, so nothing here uses <random> distributions or libm's
// log/sin/cos (whose last bit differs between implementations): the generator
// is splitmix64 and the transcendental functions are fixed polynomials built
// from IEEE +, -, *, / and frexp, with floating-point contraction disabled so
// that no compiler fuses them into FMAs. docs/json-format.md gives the exact
// algorithm so that other tools can reproduce it.

#if defined(__GNUC__) && !defined(__clang__)
#define LOOM_NO_FP_CONTRACT __attribute__((optimize("fp-contract=off")))
#else
#define LOOM_NO_FP_CONTRACT
#endif

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

uint64_t splitmixFinalize(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t fnv1a64(StringRef bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

class SplitMix64 {
public:
  /// The stream of parameter `name` under the graph's global `seed`.
  SplitMix64(uint64_t seed, StringRef name)
      : state(fnv1a64(name) ^ splitmixFinalize(seed + kGolden)) {}
  uint64_t next() {
    state += kGolden;
    return splitmixFinalize(state);
  }
  /// Uniform in [0, 1), a multiple of 2^-53.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

private:
  uint64_t state;
};

/// Natural logarithm of x in (0, 1], to about 1 ulp, identical everywhere.
LOOM_NO_FP_CONTRACT double deterministicLog(double x) {
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
  int e = 0;
  double m = std::frexp(x, &e); // x = m * 2^e, m in [0.5, 1): exact.
  if (m < 0.70710678118654752440) {
    m *= 2.0;
    e -= 1;
  }
  // log(m) = 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...), |s| < 0.1716.
  double s = (m - 1.0) / (m + 1.0);
  double s2 = s * s;
  double poly = 1.0 / 25.0;
  for (int k = 11; k >= 0; --k)
    poly = poly * s2 + 1.0 / static_cast<double>(2 * k + 1);
  return static_cast<double>(e) * 0.69314718055994530942 + 2.0 * s * poly;
}

/// sin(2 pi u) and cos(2 pi u) for u in [0, 1), identical everywhere.
LOOM_NO_FP_CONTRACT void deterministicSinCos2Pi(double u, double &sinOut,
                                                double &cosOut) {
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
  // Quarter turns: u * 4 = q + f exactly, then |f| <= 1/2 so |x| <= pi/4.
  double t = u * 4.0;
  int q = static_cast<int>(t);
  double f = t - static_cast<double>(q);
  if (f >= 0.5) {
    f -= 1.0;
    q += 1;
  }
  q &= 3;
  double x = f * 1.57079632679489661923;
  double x2 = x * x;
  // Taylor series, Horner form: sin to x^17, cos to x^18 (error < 1e-19).
  double sp = 0.0, cp = 0.0;
  for (int k = 8; k >= 0; --k) {
    double sinCoef = 1.0, cosCoef = 1.0;
    for (int i = 2; i <= 2 * k + 1; ++i)
      sinCoef /= static_cast<double>(i);
    for (int i = 2; i <= 2 * k; ++i)
      cosCoef /= static_cast<double>(i);
    if (k % 2) {
      sinCoef = -sinCoef;
      cosCoef = -cosCoef;
    }
    sp = sp * x2 + sinCoef;
    cp = cp * x2 + cosCoef;
  }
  double sx = x * sp, cx = cp;
  switch (q) {
  case 0:
    sinOut = sx;
    cosOut = cx;
    break;
  case 1:
    sinOut = cx;
    cosOut = -sx;
    break;
  case 2:
    sinOut = -sx;
    cosOut = -cx;
    break;
  default:
    sinOut = -cx;
    cosOut = sx;
    break;
  }
}

LOOM_NO_FP_CONTRACT double affine(double a, double scale, double v) {
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
  return a + scale * v;
}

//===----------------------------------------------------------------------===//
// Source positions
//===----------------------------------------------------------------------===//

/// Where values start in the JSON text, by JSON pointer ("/nodes/3/attrs"),
/// found by a scan of text that nlohmann has already accepted. nlohmann keeps
/// no positions, and diagnostics should say `file:line:col`. Only the shallow
/// part of the document is indexed (the bulk of a big file is the numbers of
/// constants), and keys given twice in an object are remembered: JSON allows
/// them, but a silently dropped value is a bug in the model file.
class SourceIndex {
public:
  void build(StringRef text);

  /// 1-based line and column of a byte offset.
  std::pair<unsigned, unsigned> lineCol(size_t offset) const {
    auto it = std::upper_bound(lineStarts.begin(), lineStarts.end(), offset);
    size_t line = it - lineStarts.begin(); // >= 1
    return {static_cast<unsigned>(line),
            static_cast<unsigned>(offset - lineStarts[line - 1] + 1)};
  }

  /// Offset of the value at `pointer` or of its nearest indexed ancestor.
  size_t find(StringRef pointer) const {
    while (true) {
      auto it = offsets.find(pointer);
      if (it != offsets.end())
        return it->second;
      if (pointer.empty())
        return 0;
      pointer = pointer.substr(0, pointer.rfind('/'));
    }
  }

  struct Duplicate {
    std::string objectPointer;
    std::string key;
    size_t offset;
  };
  ArrayRef<Duplicate> duplicates() const { return dups; }

private:
  std::vector<size_t> lineStarts;
  llvm::StringMap<size_t> offsets;
  std::vector<Duplicate> dups;
};

void SourceIndex::build(StringRef text) {
  lineStarts.assign(1, 0);
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n')
      lineStarts.push_back(i + 1);

  struct Frame {
    bool isObject;
    bool expectKey;
    bool indexed; // Its children's pointers are recorded.
    size_t index = 0;
    std::string pointer;
    std::string key;
    llvm::StringSet<> keys;
  };
  std::vector<Frame> stack;
  size_t i = 0, n = text.size();
  if (text.starts_with("\xEF\xBB\xBF"))
    i = 3;

  auto skipString = [&]() -> StringRef { // At the opening quote.
    size_t start = ++i;
    while (i < n && text[i] != '"')
      i += text[i] == '\\' ? 2 : 1;
    StringRef s = text.slice(start, std::min(i, n));
    ++i;
    return s;
  };
  // Records the value starting at `at`; returns its pointer and whether its
  // own children are indexed.
  auto recordValue = [&](size_t at) -> std::pair<std::string, bool> {
    if (stack.empty()) {
      offsets[""] = at;
      return {"", true};
    }
    Frame &top = stack.back();
    if (!top.indexed)
      return {"", false};
    size_t depth = stack.size();
    // Elements of lists below the top level (shapes, constant values) are not
    // worth an entry each.
    if (!top.isObject && depth >= 3)
      return {"", false};
    std::string ptr = top.pointer + "/" +
                      (top.isObject ? top.key : std::to_string(top.index));
    offsets[ptr] = at;
    return {ptr, depth < 4};
  };

  while (i < n) {
    char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++i;
      continue;
    }
    if (c == '/' && i + 1 < n && text[i + 1] == '/') {
      while (i < n && text[i] != '\n')
        ++i;
      continue;
    }
    if (c == '/' && i + 1 < n && text[i + 1] == '*') {
      size_t end = text.find("*/", i + 2);
      i = end == StringRef::npos ? n : end + 2;
      continue;
    }
    if (c == ',') {
      if (!stack.empty()) {
        if (stack.back().isObject)
          stack.back().expectKey = true;
        else
          ++stack.back().index;
      }
      ++i;
      continue;
    }
    if (c == ':') {
      if (!stack.empty())
        stack.back().expectKey = false;
      ++i;
      continue;
    }
    if (c == '}' || c == ']') {
      if (!stack.empty())
        stack.pop_back();
      ++i;
      continue;
    }
    if (!stack.empty() && stack.back().isObject && stack.back().expectKey &&
        c == '"') {
      size_t at = i;
      Frame &top = stack.back();
      top.key = skipString().str();
      if (!top.keys.insert(top.key).second)
        dups.push_back({top.pointer, top.key, at});
      continue;
    }
    auto [ptr, indexed] = recordValue(i);
    if (c == '{' || c == '[') {
      Frame f;
      f.isObject = c == '{';
      f.expectKey = f.isObject;
      f.indexed = indexed;
      f.pointer = std::move(ptr);
      stack.push_back(std::move(f));
      ++i;
    } else if (c == '"') {
      skipString();
    } else {
      // A number or a literal. The text may be invalid JSON (the index is
      // also built to place parse errors), so always make progress.
      ++i;
      while (i < n && !StringRef(",:[]{}\" \t\r\n/").contains(text[i]))
        ++i;
    }
  }
}

//===----------------------------------------------------------------------===//
// Declarations read from the file
//===----------------------------------------------------------------------===//

struct ParamInit {
  enum class Kind { Zeros, Ones, Constant, Normal, Uniform, File };
  Kind kind = Kind::Zeros;
  double a = 0.0; // constant value | normal mean | uniform low
  double b = 0.0; // normal std | uniform high
  const loomrt::TensorView *view = nullptr; // Kind::File
};

/// An input or a parameter.
struct TensorDecl {
  std::string name;
  RankedTensorType type;
  std::string pointer;
  bool isParam = false;
  ParamInit init;
};

/// One entry of a node's "inputs": a value name, or a number (a scalar
/// operand of an elementwise op).
struct InputRef {
  std::string name;
  std::optional<double> literal;
};

class Importer;
struct NodeDecl;

/// What a node builds: its operands (null where a literal was given), its
/// results, its location.
struct NodeContext {
  const NodeDecl &node;
  Location loc;
  SmallVector<Value> operands;
  SmallVector<Value> results;
};

using BuildFn = LogicalResult (Importer::*)(NodeContext &);

/// How a JSON op name maps to a loom op.
struct OpSpec {
  StringRef name;
  unsigned minInputs, maxInputs;
  unsigned numResults;
  std::vector<StringRef> attrs;
  BuildFn build;
  /// Bit i set: input i may be a number instead of a value name.
  unsigned literalMask = 0;
};

struct NodeDecl {
  size_t index = 0;
  std::string id;
  std::string op;
  const OpSpec *spec = nullptr;
  std::vector<InputRef> inputs;
  std::vector<std::string> outputs;
  const json *attrs = nullptr; // An object, or null.
  std::string pointer;         // "/nodes/<index>"
  bool checkpoint = false;     // recomputed in the backward (loom-remat)
  std::string tp;              // "split" or "whole" (loom-tensor-parallel)
  bool stageStart = false;     // a pipeline stage starts here (--pp)
};

/// A diagnostic held back to be re-emitted with the node's name in front.
struct CapturedDiag {
  Location loc;
  DiagnosticSeverity severity;
  std::string message;
  std::vector<std::pair<Location, std::string>> notes;
};

//===----------------------------------------------------------------------===//
// The importer
//===----------------------------------------------------------------------===//

class Importer {
public:
  Importer(StringRef path, MLIRContext &ctx, ParameterStore &params)
      : path(path.str()), ctx(ctx), params(params), b(&ctx) {}

  OwningOpRef<ModuleOp> run();

private:
  // Locations and diagnostics.
  Location fileLoc(size_t offset) {
    auto [line, col] = index.lineCol(offset);
    return FileLineColLoc::get(&ctx, path, line, col);
  }
  Location locAt(StringRef pointer) { return fileLoc(index.find(pointer)); }
  /// The location of an entry named `name` (a node id or a value name), or
  /// just its position when it has no valid name.
  Location namedLoc(StringRef name, StringRef pointer) {
    if (name.empty())
      return locAt(pointer);
    return NameLoc::get(StringAttr::get(&ctx, name), locAt(pointer));
  }
  InFlightDiagnostic error(Location loc) {
    hadError = true;
    return emitError(loc);
  }
  InFlightDiagnostic error(StringRef pointer) { return error(locAt(pointer)); }
  void suggest(InFlightDiagnostic &diag, StringRef word,
               ArrayRef<StringRef> candidates) {
    if (auto c = closest(word, candidates))
      diag << " (did you mean '" << *c << "'?)";
  }
  /// Reports every key of `object` not in `allowed`; false if there was one.
  bool checkKeys(const json &object, StringRef pointer, StringRef what,
                 ArrayRef<StringRef> allowed);
  void reemit(const CapturedDiag &diag, StringRef prefix);
  template <typename Fn>
  LogicalResult capture(std::vector<CapturedDiag> &out, Fn &&fn);

  // Phase 1.
  bool loadAndParse();
  // Phase 2.
  void checkHeader();
  void readTensorDecls(bool isParam);
  bool readShape(const json &j, StringRef pointer, StringRef what,
                 SmallVectorImpl<int64_t> &shape);
  void readParamInit(TensorDecl &decl, const json &j, StringRef pointer);
  void resolveInitFile(TensorDecl &decl, const json &j, StringRef pointer);
  void readNodes();
  void readOutputs();
  // Phase 3.
  void resolveNames();
  void sortNodes();
  // Phase 4.
  OwningOpRef<ModuleOp> buildModule();
  void buildNode(const NodeDecl &node);
  void markCheckpoint(NodeContext &c);
  Value getRngSeed();
  // Phase 5.
  bool materializeParameters(std::vector<ParameterTensor> &out);
  bool fillParameter(const TensorDecl &decl, std::vector<uint8_t> &bytes);

  // Helpers for the op builders. On failure they have emitted a diagnostic.
  Location attrLoc(const NodeContext &c, StringRef name) {
    return namedLoc(c.node.id, c.node.pointer + "/attrs/" + name.str());
  }
  const json *findAttr(const NodeContext &c, StringRef name);
  bool getBool(NodeContext &c, StringRef name, bool dflt, bool &out);
  bool getInt(NodeContext &c, StringRef name, std::optional<int64_t> dflt,
              int64_t &out);
  bool getFloat(NodeContext &c, StringRef name, std::optional<double> dflt,
                double &out);
  bool getInts(NodeContext &c, StringRef name,
               std::optional<SmallVector<int64_t>> dflt,
               SmallVectorImpl<int64_t> &out, int64_t bound = kMaxDim);
  bool getString(NodeContext &c, StringRef name, std::optional<StringRef> dflt,
                 std::string &out);
  bool getEnum(NodeContext &c, StringRef name, std::optional<StringRef> dflt,
               ArrayRef<StringRef> choices, std::string &out);
  bool normalizeAxis(NodeContext &c, StringRef name, int64_t &axis,
                     int64_t rank);
  bool checkKind(NodeContext &c, unsigned i, EltKind kind);
  bool checkSameElementType(NodeContext &c, ArrayRef<unsigned> indices);
  RankedTensorType typeOf(NodeContext &c, unsigned i) {
    return cast<RankedTensorType>(c.operands[i].getType());
  }
  std::string describeOperand(NodeContext &c, unsigned i);
  Value materializeLiteral(NodeContext &c, unsigned i, Type elementType);
  bool checkWindowAttr(NodeContext &c, StringRef name,
                       SmallVectorImpl<int64_t> &values, size_t count,
                       int64_t minValue);
  bool readPadding(NodeContext &c, SmallVectorImpl<int64_t> &pads);

  // Op builders (one per JSON op, or per family).
  template <typename OpTy> LogicalResult buildUnary(NodeContext &c);
  template <typename OpTy> LogicalResult buildBinary(NodeContext &c);
  template <typename OpTy> LogicalResult buildReduce(NodeContext &c);
  template <typename OpTy> LogicalResult buildSoftmax(NodeContext &c);
  LogicalResult buildAttention(NodeContext &c);
  template <typename OpTy> LogicalResult buildPool(NodeContext &c);
  LogicalResult buildGelu(NodeContext &c);
  LogicalResult buildSelect(NodeContext &c);
  LogicalResult buildCompare(NodeContext &c);
  LogicalResult buildCast(NodeContext &c);
  LogicalResult buildMatmul(NodeContext &c);
  LogicalResult buildConv2D(NodeContext &c);
  LogicalResult buildBroadcastInDim(NodeContext &c);
  LogicalResult buildReshape(NodeContext &c);
  LogicalResult buildTranspose(NodeContext &c);
  LogicalResult buildSlice(NodeContext &c);
  LogicalResult buildConcat(NodeContext &c);
  LogicalResult buildGather(NodeContext &c);
  LogicalResult buildLayerNorm(NodeContext &c);
  LogicalResult buildRmsNorm(NodeContext &c);
  LogicalResult buildBatchNorm(NodeContext &c);
  LogicalResult buildBatchNormStats(NodeContext &c);
  LogicalResult buildDropout(NodeContext &c);
  LogicalResult buildCrossEntropy(NodeContext &c);
  LogicalResult buildMse(NodeContext &c);
  LogicalResult buildConstant(NodeContext &c);

  static const llvm::StringMap<OpSpec> &opTable();

  std::string path;
  std::string baseDir; // Canonical folder of the JSON file.
  MLIRContext &ctx;
  ParameterStore &params;
  OpBuilder b;
  bool hadError = false;

  std::unique_ptr<llvm::MemoryBuffer> buffer;
  json root;
  SourceIndex index;
  uint64_t seed = 0;

  std::vector<TensorDecl> inputs, parameters;
  std::vector<NodeDecl> nodes;
  std::vector<std::string> outputNames;
  std::vector<size_t> order; // Nodes in topological order.

  /// Who defines each value: "input 'x'", "parameter 'w'", "node 'fc1'".
  llvm::StringMap<std::string> definedBy;
  /// Index of the node that defines a value (absent for arguments).
  llvm::StringMap<size_t> producer;
  /// Built values; null where the producing node failed.
  llvm::StringMap<Value> values;

  llvm::StringMap<std::unique_ptr<loomrt::SafetensorsFile>> openFiles;

  func::FuncOp func;
  Block *entry = nullptr;
  Value rngSeed;
  int64_t nextDropoutStream = 0;
};

//===----------------------------------------------------------------------===//
// Op table
//===----------------------------------------------------------------------===//

const llvm::StringMap<OpSpec> &Importer::opTable() {
  static const llvm::StringMap<OpSpec> table = [] {
    using I = Importer;
    std::vector<OpSpec> specs = {
        // Elementwise binary (numpy broadcasting, numbers allowed).
        {"add", 2, 2, 1, {}, &I::buildBinary<AddOp>, 0b11},
        {"sub", 2, 2, 1, {}, &I::buildBinary<SubOp>, 0b11},
        {"mul", 2, 2, 1, {}, &I::buildBinary<MulOp>, 0b11},
        {"div", 2, 2, 1, {}, &I::buildBinary<DivOp>, 0b11},
        {"pow", 2, 2, 1, {}, &I::buildBinary<PowOp>, 0b11},
        {"max", 2, 2, 1, {}, &I::buildBinary<MaxOp>, 0b11},
        {"min", 2, 2, 1, {}, &I::buildBinary<MinOp>, 0b11},
        // Elementwise unary.
        {"neg", 1, 1, 1, {}, &I::buildUnary<NegOp>},
        {"abs", 1, 1, 1, {}, &I::buildUnary<AbsOp>},
        {"exp", 1, 1, 1, {}, &I::buildUnary<ExpOp>},
        {"log", 1, 1, 1, {}, &I::buildUnary<LogOp>},
        {"tanh", 1, 1, 1, {}, &I::buildUnary<TanhOp>},
        {"sigmoid", 1, 1, 1, {}, &I::buildUnary<SigmoidOp>},
        {"relu", 1, 1, 1, {}, &I::buildUnary<ReluOp>},
        {"erf", 1, 1, 1, {}, &I::buildUnary<ErfOp>},
        {"sqrt", 1, 1, 1, {}, &I::buildUnary<SqrtOp>},
        {"rsqrt", 1, 1, 1, {}, &I::buildUnary<RsqrtOp>},
        {"floor", 1, 1, 1, {}, &I::buildUnary<FloorOp>},
        {"cos", 1, 1, 1, {}, &I::buildUnary<CosOp>},
        {"sin", 1, 1, 1, {}, &I::buildUnary<SinOp>},
        {"stop_gradient", 1, 1, 1, {}, &I::buildUnary<StopGradientOp>},
        {"gelu", 1, 1, 1, {"approximate"}, &I::buildGelu},
        {"select", 3, 3, 1, {}, &I::buildSelect, 0b110},
        {"compare", 2, 2, 1, {"predicate"}, &I::buildCompare, 0b11},
        {"cast", 1, 1, 1, {"to"}, &I::buildCast},
        // Contractions.
        {"matmul", 2, 2, 1, {"transpose_a", "transpose_b"}, &I::buildMatmul},
        {"conv2d",
         2,
         3,
         1,
         {"strides", "padding", "dilations", "groups"},
         &I::buildConv2D},
        // Reductions.
        {"reduce_sum",
         1,
         1,
         1,
         {"dims", "keep_dims"},
         &I::buildReduce<ReduceSumOp>},
        {"reduce_max",
         1,
         1,
         1,
         {"dims", "keep_dims"},
         &I::buildReduce<ReduceMaxOp>},
        {"reduce_min",
         1,
         1,
         1,
         {"dims", "keep_dims"},
         &I::buildReduce<ReduceMinOp>},
        {"reduce_mean",
         1,
         1,
         1,
         {"dims", "keep_dims"},
         &I::buildReduce<ReduceMeanOp>},
        // Data movement.
        {"broadcast_in_dim",
         1,
         1,
         1,
         {"shape", "dims"},
         &I::buildBroadcastInDim},
        {"reshape", 1, 1, 1, {"shape"}, &I::buildReshape},
        {"transpose", 1, 1, 1, {"perm"}, &I::buildTranspose},
        {"slice",
         1,
         1,
         1,
         {"start", "limit", "stride", "axes"},
         &I::buildSlice},
        {"concat", 1, ~0u, 1, {"dim"}, &I::buildConcat},
        {"gather", 2, 2, 1, {"axis"}, &I::buildGather},
        // Composite ops.
        {"softmax", 1, 1, 1, {"axis"}, &I::buildSoftmax<SoftmaxOp>},
        {"log_softmax", 1, 1, 1, {"axis"}, &I::buildSoftmax<LogSoftmaxOp>},
        {"attention",
         3,
         4,
         1,
         {"scale", "causal", "window"},
         &I::buildAttention},
        {"layer_norm", 2, 3, 1, {"axis", "epsilon"}, &I::buildLayerNorm},
        {"rms_norm", 2, 2, 1, {"axis", "epsilon"}, &I::buildRmsNorm},
        {"batch_norm", 5, 5, 1, {"epsilon"}, &I::buildBatchNorm},
        {"batch_norm_stats", 1, 1, 2, {}, &I::buildBatchNormStats},
        {"max_pool2d",
         1,
         1,
         1,
         {"kernel", "strides", "padding"},
         &I::buildPool<MaxPool2DOp>},
        {"avg_pool2d",
         1,
         1,
         1,
         {"kernel", "strides", "padding", "count_include_pad"},
         &I::buildPool<AvgPool2DOp>},
        {"dropout", 1, 1, 1, {"ratio"}, &I::buildDropout},
        // Losses.
        {"cross_entropy",
         2,
         2,
         1,
         {"reduction", "ignore_index"},
         &I::buildCrossEntropy},
        {"mse", 2, 2, 1, {"reduction"}, &I::buildMse},
        // Constants.
        {"constant", 0, 0, 1, {"value", "dtype", "shape"}, &I::buildConstant},
    };
    llvm::StringMap<OpSpec> map;
    for (OpSpec &s : specs)
      map.try_emplace(s.name, std::move(s));
    return map;
  }();
  return table;
}

//===----------------------------------------------------------------------===//
// Diagnostics plumbing
//===----------------------------------------------------------------------===//

bool Importer::checkKeys(const json &object, StringRef pointer, StringRef what,
                         ArrayRef<StringRef> allowed) {
  bool ok = true;
  for (auto it = object.begin(); it != object.end(); ++it) {
    const std::string &key = it.key();
    if (llvm::is_contained(allowed, StringRef(key)))
      continue;
    ok = false;
    auto diag = error(pointer.str() + "/" + key);
    if (what.empty())
      diag << "unknown top-level field '" << key << "'";
    else
      diag << what << ": unknown field '" << key << "'";
    suggest(diag, key, allowed);
    diag << "; expected " << joinQuoted(allowed);
  }
  return ok;
}

void Importer::reemit(const CapturedDiag &d, StringRef prefix) {
  InFlightDiagnostic diag = [&] {
    switch (d.severity) {
    case DiagnosticSeverity::Warning:
      return emitWarning(d.loc);
    case DiagnosticSeverity::Remark:
      return emitRemark(d.loc);
    default:
      hadError = true;
      return emitError(d.loc);
    }
  }();
  diag << prefix << d.message;
  for (const auto &[loc, message] : d.notes)
    diag.attachNote(loc) << message;
}

template <typename Fn>
LogicalResult Importer::capture(std::vector<CapturedDiag> &out, Fn &&fn) {
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
    CapturedDiag c{diag.getLocation(), diag.getSeverity(), diag.str(), {}};
    for (Diagnostic &note : diag.getNotes())
      c.notes.emplace_back(note.getLocation(), note.str());
    out.push_back(std::move(c));
    return success();
  });
  return fn();
}

//===----------------------------------------------------------------------===//
// Phase 1: read and parse
//===----------------------------------------------------------------------===//

bool Importer::loadAndParse() {
  auto fileOrErr = llvm::MemoryBuffer::getFileOrSTDIN(path, /*IsText=*/true);
  if (!fileOrErr) {
    error(FileLineColLoc::get(&ctx, path, 0, 0))
        << "cannot read '" << path << "': " << fileOrErr.getError().message();
    return false;
  }
  buffer = std::move(*fileOrErr);
  StringRef text = buffer->getBuffer();
  index.build(text); // Needed for the position of parse errors too.

  SmallString<256> dir(path == "-" ? StringRef(".")
                                   : llvm::sys::path::parent_path(path));
  if (dir.empty())
    dir = ".";
  SmallString<256> real;
  if (llvm::sys::fs::real_path(dir, real))
    baseDir = std::string(dir);
  else
    baseDir = std::string(real);

  try {
    root = json::parse(text.begin(), text.end(), /*cb=*/nullptr,
                       /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const json::parse_error &e) {
    // `byte` counts the characters read, the offending one included.
    size_t offset = e.byte == 0 ? 0 : e.byte - 1;
    offset = std::min<size_t>(offset, text.size());
    StringRef message(e.what());
    // Drop nlohmann's "[json.exception.parse_error.101] parse error at line
    // 1, column 2: " prefix: the location says it better.
    size_t colon = message.find("column");
    if (colon != StringRef::npos) {
      size_t after = message.find(": ", colon);
      if (after != StringRef::npos)
        message = message.substr(after + 2);
    }
    error(fileLoc(offset)) << "invalid JSON: " << message;
    return false;
  } catch (const json::exception &e) {
    StringRef message(e.what());
    if (message.starts_with("[json.exception."))
      message = message.substr(message.find(']') + 1).ltrim();
    error(fileLoc(0)) << "invalid JSON: " << message;
    return false;
  }

  for (const SourceIndex::Duplicate &d : index.duplicates()) {
    StringRef where = d.objectPointer.empty()
                          ? StringRef("the top-level object")
                          : StringRef(d.objectPointer);
    error(fileLoc(d.offset)) << "field '" << d.key << "' appears twice in "
                             << where << " (only the last value would count)";
  }
  return !hadError;
}

//===----------------------------------------------------------------------===//
// Phase 2: structure
//===----------------------------------------------------------------------===//

void Importer::checkHeader() {
  static const StringRef kTopKeys[] = {"format",     "version", "name",
                                       "doc",        "seed",    "inputs",
                                       "parameters", "nodes",   "outputs"};
  checkKeys(root, "", "", kTopKeys);

  auto format = root.find("format");
  if (format == root.end()) {
    error(StringRef("")) << "missing field 'format' (expected \"" << kFormatName
                         << "\")";
  } else if (!format->is_string() ||
             format->get_ref<const std::string &>() != kFormatName.str()) {
    auto diag = error(StringRef("/format"))
                << "field 'format': expected \"" << kFormatName << "\", got ";
    if (format->is_string())
      diag << "\"" << format->get_ref<const std::string &>() << "\"";
    else
      diag << describe(*format);
  }

  auto version = root.find("version");
  if (version == root.end()) {
    error(StringRef("")) << "missing field 'version' (expected "
                         << kFormatVersion << ")";
  } else if (auto v = asInt(*version); !v) {
    error(StringRef("/version"))
        << "field 'version': expected an integer, got " << describe(*version);
  } else if (*v != kFormatVersion) {
    error(StringRef("/version"))
        << "unsupported version " << *v << ": this Loom reads version "
        << kFormatVersion;
  }

  for (StringRef key : {"name", "doc"}) {
    auto it = root.find(key.str());
    if (it != root.end() && !it->is_string())
      error("/" + key.str())
          << "field '" << key << "': expected a string, got " << describe(*it);
  }

  if (auto it = root.find("seed"); it != root.end()) {
    if (it->is_number_unsigned())
      seed = it->get<uint64_t>();
    else if (auto v = asInt(*it); v && *v >= 0)
      seed = static_cast<uint64_t>(*v);
    else
      error(StringRef("/seed"))
          << "field 'seed': expected a non-negative integer, got "
          << describe(*it);
  }
}

bool Importer::readShape(const json &j, StringRef pointer, StringRef what,
                         SmallVectorImpl<int64_t> &shape) {
  if (!j.is_array()) {
    error(pointer) << what
                   << ": field 'shape': expected a list of integers, got "
                   << describe(j);
    return false;
  }
  if (j.size() > kMaxRank) {
    error(pointer) << what << ": field 'shape': rank " << j.size()
                   << " is above the limit of " << kMaxRank;
    return false;
  }
  for (auto [i, d] : llvm::enumerate(j)) {
    auto v = asInt(d);
    if (!v) {
      error(pointer) << what << ": field 'shape': dimension " << i
                     << " must be an integer, got " << describe(d);
      return false;
    }
    if (*v < 0) {
      error(pointer) << what << ": field 'shape': dimension " << i << " is "
                     << *v << "; dimensions must be non-negative (shapes are "
                     << "static)";
      return false;
    }
    if (*v > kMaxDim) {
      error(pointer) << what << ": field 'shape': dimension " << i << " (" << *v
                     << ") is too large";
      return false;
    }
    shape.push_back(*v);
  }
  if (!loomrt::checkedNumElements(
          std::vector<int64_t>(shape.begin(), shape.end()))) {
    error(pointer) << what << ": field 'shape': " << formatShape(shape)
                   << " has too many elements";
    return false;
  }
  return true;
}

void Importer::readTensorDecls(bool isParam) {
  StringRef key = isParam ? "parameters" : "inputs";
  auto it = root.find(key.str());
  if (it == root.end())
    return;
  std::string listPtr = "/" + key.str();
  if (!it->is_array()) {
    error(listPtr) << "field '" << key << "': expected a list, got "
                   << describe(*it);
    return;
  }
  static const StringRef kInputKeys[] = {"name", "shape", "dtype", "doc"};
  static const StringRef kParamKeys[] = {"name", "shape", "dtype", "init",
                                         "doc"};
  for (auto [i, entry] : llvm::enumerate(*it)) {
    std::string ptr = listPtr + "/" + std::to_string(i);
    std::string what = key.str() + "[" + std::to_string(i) + "]";
    if (!entry.is_object()) {
      error(ptr) << what << ": expected an object, got " << describe(entry);
      continue;
    }
    TensorDecl decl;
    decl.pointer = ptr;
    decl.isParam = isParam;
    bool ok = true;
    auto name = entry.find("name");
    if (name == entry.end()) {
      error(ptr) << what << ": missing field 'name'";
      ok = false;
    } else if (!name->is_string() ||
               name->get_ref<const std::string &>().empty()) {
      error(ptr + "/name")
          << what << ": field 'name': expected a non-empty string, got "
          << describe(*name);
      ok = false;
    } else {
      decl.name = name->get<std::string>();
      what = (isParam ? "parameter '" : "input '") + decl.name + "'";
    }
    checkKeys(entry, ptr, what,
              isParam ? ArrayRef<StringRef>(kParamKeys)
                      : ArrayRef<StringRef>(kInputKeys));

    SmallVector<int64_t> shape;
    auto shapeIt = entry.find("shape");
    if (shapeIt == entry.end()) {
      error(ptr) << what << ": missing field 'shape'";
      ok = false;
    } else if (!readShape(*shapeIt, ptr + "/shape", what, shape)) {
      ok = false;
    }

    Type elt;
    auto dtype = entry.find("dtype");
    if (dtype == entry.end()) {
      error(ptr) << what << ": missing field 'dtype' (" << kDtypeList << ")";
      ok = false;
    } else if (!dtype->is_string()) {
      error(ptr + "/dtype")
          << what << ": field 'dtype': expected a string, got "
          << describe(*dtype);
      ok = false;
    } else if (!(elt =
                     parseDtype(&ctx, dtype->get_ref<const std::string &>()))) {
      error(ptr + "/dtype") << what << ": field 'dtype': unknown dtype \""
                            << dtype->get_ref<const std::string &>()
                            << "\"; expected " << kDtypeList;
      ok = false;
    } else if (isParam && !isa<FloatType>(elt)) {
      error(ptr + "/dtype")
          << what << ": field 'dtype': \""
          << dtype->get_ref<const std::string &>()
          << "\" is not allowed for a parameter: parameters are trained, so "
             "they need a floating-point dtype (f32, f16, bf16 or f64)";
      ok = false;
    }
    if (!ok)
      continue;
    decl.type = RankedTensorType::get(shape, elt);

    if (isParam) {
      auto init = entry.find("init");
      if (init == entry.end()) {
        error(ptr) << what
                   << ": missing field 'init' (\"zeros\", \"ones\", "
                      "{\"constant\": v}, {\"normal\": {\"std\": s}}, "
                      "{\"uniform\": {\"low\": a, \"high\": b}} or "
                      "{\"file\": \"f.safetensors\", \"tensor\": \"name\"})";
        continue;
      }
      bool hadErrorBefore = hadError;
      hadError = false;
      readParamInit(decl, *init, ptr + "/init");
      bool initFailed = hadError;
      hadError = hadError || hadErrorBefore;
      if (initFailed)
        continue;
    }
    (isParam ? parameters : inputs).push_back(std::move(decl));
  }
}

void Importer::readParamInit(TensorDecl &decl, const json &j,
                             StringRef pointer) {
  std::string what = "parameter '" + decl.name + "': init";
  if (j.is_string()) {
    const std::string &s = j.get_ref<const std::string &>();
    if (s == "zeros") {
      decl.init.kind = ParamInit::Kind::Zeros;
    } else if (s == "ones") {
      decl.init.kind = ParamInit::Kind::Ones;
    } else {
      auto diag = error(pointer)
                  << what << ": unknown initializer \"" << s << "\"";
      suggest(diag, s, {"zeros", "ones", "normal", "uniform", "constant"});
      diag << "; expected \"zeros\", \"ones\" or an object with one of "
              "'normal', 'uniform', 'constant' or 'file'";
    }
    return;
  }
  if (!j.is_object()) {
    error(pointer) << what << ": expected a string or an object, got "
                   << describe(j);
    return;
  }
  if (j.contains("file")) {
    if (checkKeys(j, pointer, what, {"file", "tensor"}))
      resolveInitFile(decl, j, pointer);
    return;
  }
  if (j.size() != 1) {
    error(pointer) << what << ": expected exactly one of 'normal', 'uniform', "
                   << "'constant' or 'file', got " << j.size() << " fields";
    return;
  }
  const std::string &kind = j.begin().key();
  const json &body = j.begin().value();
  std::string bodyPtr = pointer.str() + "/" + kind;
  std::string bodyWhat = what + "." + kind;

  auto number = [&](const json &obj, StringRef field,
                    std::optional<double> dflt) -> std::optional<double> {
    auto it = obj.find(field.str());
    if (it == obj.end()) {
      if (!dflt)
        error(bodyPtr) << bodyWhat << ": missing field '" << field << "'";
      return dflt;
    }
    auto v = asNumber(*it);
    if (!v)
      error(bodyPtr) << bodyWhat << ": field '" << field
                     << "': expected a number, got " << describe(*it);
    return v;
  };

  if (kind == "constant") {
    auto v = asNumber(body);
    if (!v) {
      error(bodyPtr) << bodyWhat << ": expected a number, got "
                     << describe(body);
      return;
    }
    decl.init.kind = ParamInit::Kind::Constant;
    decl.init.a = *v;
    return;
  }
  if (kind != "normal" && kind != "uniform") {
    auto diag = error(bodyPtr)
                << what << ": unknown initializer '" << kind << "'";
    suggest(diag, kind, {"normal", "uniform", "constant", "file"});
    diag << "; expected one of 'normal', 'uniform', 'constant' or 'file'";
    return;
  }
  if (!body.is_object()) {
    error(bodyPtr) << bodyWhat << ": expected an object, got "
                   << describe(body);
    return;
  }
  if (kind == "normal") {
    checkKeys(body, bodyPtr, bodyWhat, {"mean", "std"});
    auto mean = number(body, "mean", 0.0);
    auto stdDev = number(body, "std", std::nullopt);
    if (!mean || !stdDev)
      return;
    if (*stdDev < 0) {
      error(bodyPtr) << bodyWhat << ": 'std' must be non-negative, got "
                     << fmtNum(*stdDev);
      return;
    }
    decl.init.kind = ParamInit::Kind::Normal;
    decl.init.a = *mean;
    decl.init.b = *stdDev;
    return;
  }
  checkKeys(body, bodyPtr, bodyWhat, {"low", "high"});
  auto low = number(body, "low", std::nullopt);
  auto high = number(body, "high", std::nullopt);
  if (!low || !high)
    return;
  if (*low > *high) {
    error(bodyPtr) << bodyWhat << ": 'low' (" << fmtNum(*low)
                   << ") is above 'high' (" << fmtNum(*high) << ")";
    return;
  }
  decl.init.kind = ParamInit::Kind::Uniform;
  decl.init.a = *low;
  decl.init.b = *high;
}

void Importer::resolveInitFile(TensorDecl &decl, const json &j,
                               StringRef pointer) {
  std::string what = "parameter '" + decl.name + "': init";
  const json &file = j.at("file");
  std::string filePtr = pointer.str() + "/file";
  if (!file.is_string() || file.get_ref<const std::string &>().empty()) {
    error(filePtr) << what
                   << ": field 'file': expected a non-empty string, got "
                   << describe(file);
    return;
  }
  std::string tensorName = decl.name;
  if (auto t = j.find("tensor"); t != j.end()) {
    if (!t->is_string()) {
      error(pointer.str() + "/tensor")
          << what << ": field 'tensor': expected a string, got "
          << describe(*t);
      return;
    }
    tensorName = t->get<std::string>();
  }

  // The file must lie inside the model's folder: a model file must not make
  // the compiler read (and copy into an artifact) anything else on the disk.
  StringRef rel = file.get_ref<const std::string &>();
  if (llvm::sys::path::is_absolute(rel) ||
      llvm::sys::path::has_root_name(rel) || rel.starts_with("/") ||
      rel.starts_with("\\")) {
    error(filePtr) << what << ": file '" << rel
                   << "' is an absolute path; parameter files must lie "
                      "inside the model's folder (give a relative path)";
    return;
  }
  for (auto it = llvm::sys::path::begin(rel), e = llvm::sys::path::end(rel);
       it != e; ++it) {
    if (*it == "..") {
      error(filePtr) << what << ": file '" << rel
                     << "' leaves the model's folder ('..' is not allowed)";
      return;
    }
  }
  SmallString<256> full(baseDir);
  llvm::sys::path::append(full, rel);
  SmallString<256> real;
  if (std::error_code ec = llvm::sys::fs::real_path(full, real)) {
    error(filePtr) << what << ": cannot open '" << rel << "': " << ec.message();
    return;
  }
  if (!llvm::sys::fs::is_regular_file(real)) {
    error(filePtr) << what << ": '" << rel << "' is not a regular file";
    return;
  }
  std::string prefix = baseDir;
  if (!StringRef(prefix).ends_with(llvm::sys::path::get_separator()))
    prefix += llvm::sys::path::get_separator().str();
  if (!StringRef(real).starts_with(prefix)) {
    error(filePtr) << what << ": file '" << rel << "' resolves to '"
                   << StringRef(real) << "', outside the model's folder '"
                   << baseDir << "' (through a symbolic link)";
    return;
  }

  std::string key(real);
  auto cached = openFiles.find(key);
  if (cached == openFiles.end()) {
    std::string err;
    auto opened = loomrt::SafetensorsFile::open(key, &err);
    if (!opened) {
      error(filePtr) << what << ": cannot read '" << rel << "': " << err;
      // Remember the failure so that other parameters stay quiet.
      openFiles[key] = nullptr;
      return;
    }
    cached = openFiles.try_emplace(key, std::move(opened)).first;
  }
  if (!cached->second) {
    hadError = true;
    return;
  }
  const loomrt::TensorView *view = cached->second->find(tensorName);
  if (!view) {
    auto diag = error(filePtr)
                << what << ": '" << rel << "' has no tensor named '"
                << tensorName << "'";
    std::vector<StringRef> names;
    for (const loomrt::TensorView &t : cached->second->tensors())
      names.push_back(t.name);
    if (auto c = closest(tensorName, names))
      diag << " (did you mean '" << *c << "'?)";
    else if (!names.empty() && names.size() <= 8)
      diag << "; it holds " << joinQuoted(names);
    return;
  }
  StringRef fileDtype = loomrt::dtypeToShortName(view->dtype);
  std::string wantDtype = formatType(decl.type.getElementType());
  if (fileDtype != wantDtype) {
    error(filePtr) << what << ": tensor '" << tensorName << "' in '" << rel
                   << "' has dtype " << fileDtype << ", the parameter is "
                   << wantDtype;
    return;
  }
  if (ArrayRef<int64_t>(view->shape) != decl.type.getShape()) {
    error(filePtr) << what << ": tensor '" << tensorName << "' in '" << rel
                   << "' has shape " << formatShape(view->shape)
                   << ", the parameter has shape "
                   << formatShape(decl.type.getShape());
    return;
  }
  decl.init.kind = ParamInit::Kind::File;
  decl.init.view = view;
}

void Importer::readNodes() {
  auto it = root.find("nodes");
  if (it == root.end()) {
    error(StringRef("")) << "missing field 'nodes'";
    return;
  }
  if (!it->is_array()) {
    error(StringRef("/nodes"))
        << "field 'nodes': expected a list, got " << describe(*it);
    return;
  }
  static const StringRef kNodeKeys[] = {"id",    "op",  "inputs",    "outputs",
                                        "attrs", "doc", "checkpoint", "tp",
                                        "pp_stage_start"};
  std::vector<StringRef> opNames;
  for (const auto &entry : opTable())
    opNames.push_back(entry.getKey());
  llvm::sort(opNames);
  llvm::StringMap<size_t> ids;

  for (auto [i, entry] : llvm::enumerate(*it)) {
    NodeDecl node;
    node.index = i;
    node.pointer = "/nodes/" + std::to_string(i);
    const std::string &ptr = node.pointer;
    std::string what = "nodes[" + std::to_string(i) + "]";
    if (!entry.is_object()) {
      error(ptr) << what << ": expected an object, got " << describe(entry);
      continue;
    }
    bool ok = true;
    auto id = entry.find("id");
    if (id == entry.end()) {
      error(ptr) << what << ": missing field 'id'";
      ok = false;
    } else if (!id->is_string() || id->get_ref<const std::string &>().empty()) {
      error(ptr + "/id") << what
                         << ": field 'id': expected a non-empty string, "
                         << "got " << describe(*id);
      ok = false;
    } else {
      node.id = id->get<std::string>();
      what = "node '" + node.id + "'";
      auto [prev, inserted] = ids.try_emplace(node.id, i);
      if (!inserted) {
        error(namedLoc(node.id, ptr + "/id"))
            << what << ": the id is already used by nodes[" << prev->second
            << "]; node ids must be unique";
        ok = false;
      }
    }
    Location loc = namedLoc(node.id, ptr);
    checkKeys(entry, ptr, what, kNodeKeys);

    auto op = entry.find("op");
    if (op == entry.end()) {
      error(loc) << what << ": missing field 'op'";
      ok = false;
    } else if (!op->is_string()) {
      error(namedLoc(node.id, ptr + "/op"))
          << what << ": field 'op': expected a string, got " << describe(*op);
      ok = false;
    } else {
      node.op = op->get<std::string>();
      auto spec = opTable().find(node.op);
      if (spec == opTable().end()) {
        auto diag = error(namedLoc(node.id, ptr + "/op"))
                    << what << ": unknown op '" << node.op << "'";
        suggest(diag, node.op, opNames);
        ok = false;
      } else {
        node.spec = &spec->second;
        what += ": " + node.op;
      }
    }

    // inputs
    bool inputsValid = true, outputsValid = !node.id.empty();
    if (auto ins = entry.find("inputs"); ins != entry.end()) {
      if (!ins->is_array()) {
        inputsValid = false;
        error(namedLoc(node.id, ptr + "/inputs"))
            << what << ": field 'inputs': expected a list of value names, got "
            << describe(*ins);
        ok = false;
      } else {
        for (auto [k, in] : llvm::enumerate(*ins)) {
          InputRef ref;
          if (in.is_string() && !in.get_ref<const std::string &>().empty()) {
            ref.name = in.get<std::string>();
          } else if (auto v = asNumber(in)) {
            ref.literal = *v;
            if (node.spec && !(node.spec->literalMask & (1u << k))) {
              auto diag = error(namedLoc(node.id, ptr + "/inputs"))
                          << what << ": input " << k << " is a number; ";
              if (node.spec->literalMask)
                diag << "only the data inputs of " << node.op << " may be";
              else
                diag << node.op << " takes only value names (use a "
                     << "'constant' node)";
              ok = false;
            }
          } else {
            error(namedLoc(node.id, ptr + "/inputs"))
                << what << ": input " << k
                << " must be a value name (a non-empty string), got "
                << describe(in);
            ok = false;
            inputsValid = false;
          }
          node.inputs.push_back(std::move(ref));
        }
      }
    }

    // outputs
    if (auto outs = entry.find("outputs"); outs != entry.end()) {
      outputsValid = true;
      if (!outs->is_array()) {
        outputsValid = false;
        error(namedLoc(node.id, ptr + "/outputs"))
            << what << ": field 'outputs': expected a list of value names, got "
            << describe(*outs);
        ok = false;
      } else {
        for (auto [k, out] : llvm::enumerate(*outs)) {
          if (!out.is_string() || out.get_ref<const std::string &>().empty()) {
            error(namedLoc(node.id, ptr + "/outputs"))
                << what << ": output " << k
                << " must be a value name (a non-empty string), got "
                << describe(out);
            ok = false;
            outputsValid = false;
            continue;
          }
          node.outputs.push_back(out.get<std::string>());
        }
      }
    } else if (!node.id.empty()) {
      node.outputs.push_back(node.id);
    }

    if (auto cp = entry.find("checkpoint"); cp != entry.end()) {
      if (!cp->is_boolean()) {
        error(namedLoc(node.id, ptr + "/checkpoint"))
            << what << ": field 'checkpoint': expected true or false, got "
            << describe(*cp);
        ok = false;
      } else {
        node.checkpoint = cp->get<bool>();
      }
    }

    if (auto tp = entry.find("tp"); tp != entry.end()) {
      if (!tp->is_string() || (tp->get<std::string>() != "split" &&
                               tp->get<std::string>() != "whole")) {
        error(namedLoc(node.id, ptr + "/tp"))
            << what << ": field 'tp': expected \"split\" or \"whole\", got "
            << describe(*tp);
        ok = false;
      } else {
        node.tp = tp->get<std::string>();
      }
    }

    if (auto pp = entry.find("pp_stage_start"); pp != entry.end()) {
      if (!pp->is_boolean()) {
        error(namedLoc(node.id, ptr + "/pp_stage_start"))
            << what << ": field 'pp_stage_start': expected true or false, got "
            << describe(*pp);
        ok = false;
      } else {
        node.stageStart = pp->get<bool>();
      }
    }

    // attrs
    if (auto attrs = entry.find("attrs"); attrs != entry.end()) {
      if (!attrs->is_object()) {
        error(namedLoc(node.id, ptr + "/attrs"))
            << what << ": field 'attrs': expected an object, got "
            << describe(*attrs);
        ok = false;
      } else {
        node.attrs = &*attrs;
      }
    }

    if (node.spec) {
      const OpSpec &spec = *node.spec;
      size_t n = node.inputs.size();
      if (!inputsValid) {
        // Already reported.
      } else if (n < spec.minInputs || n > spec.maxInputs) {
        auto diag = error(namedLoc(node.id, ptr + "/inputs"))
                    << what << ": expected ";
        if (spec.maxInputs == ~0u)
          diag << "at least " << spec.minInputs;
        else if (spec.minInputs == spec.maxInputs)
          diag << spec.minInputs;
        else
          diag << spec.minInputs << " to " << spec.maxInputs;
        diag << " input" << (spec.maxInputs == 1 ? "" : "s") << ", got " << n;
        ok = false;
      } else if (spec.literalMask &&
                 llvm::none_of(llvm::enumerate(node.inputs), [&](auto p) {
                   return (spec.literalMask & (1u << p.index())) &&
                          !p.value().literal;
                 })) {
        error(namedLoc(node.id, ptr + "/inputs"))
            << what
            << ": at least one data input must be a value, not a "
               "number (the value gives the element type)";
        ok = false;
      }
      if (outputsValid && node.outputs.size() != spec.numResults) {
        auto diag = error(namedLoc(node.id, ptr + "/outputs"))
                    << what << ": " << node.op << " has " << spec.numResults
                    << " result" << (spec.numResults == 1 ? "" : "s")
                    << " but 'outputs' names " << node.outputs.size();
        if (spec.numResults > 1 && !entry.contains("outputs"))
          diag << " (list the names of its results in 'outputs')";
        ok = false;
      }
      if (node.attrs) {
        for (auto a = node.attrs->begin(); a != node.attrs->end(); ++a) {
          if (llvm::is_contained(spec.attrs, StringRef(a.key())))
            continue;
          auto diag = error(namedLoc(node.id, ptr + "/attrs/" + a.key()))
                      << what << ": unknown attribute '" << a.key() << "'";
          suggest(diag, a.key(), spec.attrs);
          if (spec.attrs.empty())
            diag << "; " << node.op << " takes no attributes";
          else
            diag << "; " << node.op << " takes " << joinQuoted(spec.attrs);
          ok = false;
        }
      }
    }
    if (ok)
      nodes.push_back(std::move(node));
    else
      hadError = true;
  }
}

void Importer::readOutputs() {
  auto it = root.find("outputs");
  if (it == root.end()) {
    error(StringRef("")) << "missing field 'outputs' (the names of the values "
                            "@forward returns)";
    return;
  }
  if (!it->is_array() || it->empty()) {
    error(StringRef("/outputs"))
        << "field 'outputs': expected a non-empty list of value names, got "
        << (it->is_array() ? "an empty list" : describe(*it));
    return;
  }
  llvm::StringSet<> seen;
  for (auto [i, out] : llvm::enumerate(*it)) {
    std::string ptr = "/outputs/" + std::to_string(i);
    if (!out.is_string() || out.get_ref<const std::string &>().empty()) {
      error(StringRef("/outputs"))
          << "outputs[" << i << "]: expected a value name, got "
          << describe(out);
      continue;
    }
    const std::string &name = out.get_ref<const std::string &>();
    if (!seen.insert(name).second) {
      error(StringRef("/outputs"))
          << "outputs[" << i << "]: '" << name << "' is listed twice";
      continue;
    }
    outputNames.push_back(name);
  }
}

//===----------------------------------------------------------------------===//
// Phase 3: names and order
//===----------------------------------------------------------------------===//

void Importer::resolveNames() {
  auto define = [&](StringRef name, std::string by, Location loc,
                    std::optional<size_t> node) {
    auto [it, inserted] = definedBy.try_emplace(name, by);
    if (!inserted) {
      error(loc) << "value '" << name << "' is defined twice: by " << it->second
                 << " and by " << by;
      return;
    }
    if (node)
      producer[name] = *node;
  };
  for (const TensorDecl &d : inputs)
    define(d.name, "input '" + d.name + "'", locAt(d.pointer), std::nullopt);
  for (const TensorDecl &d : parameters)
    define(d.name, "parameter '" + d.name + "'", locAt(d.pointer),
           std::nullopt);
  for (auto [k, node] : llvm::enumerate(nodes))
    for (const std::string &out : node.outputs)
      define(out, "node '" + node.id + "'",
             namedLoc(node.id, node.pointer + "/outputs"), k);

  // Every use must be defined (by an input, a parameter or any node: the
  // nodes may come in any order). Suggestions prefer the first name in
  // sorted order, so that they do not depend on hashing.
  std::vector<StringRef> names;
  for (const auto &e : definedBy)
    names.push_back(e.getKey());
  llvm::sort(names);
  for (NodeDecl &node : nodes) {
    for (auto [k, in] : llvm::enumerate(node.inputs)) {
      if (in.literal || definedBy.count(in.name))
        continue;
      auto diag = error(namedLoc(node.id, node.pointer + "/inputs"))
                  << "node '" << node.id << "': " << node.op << ": input " << k
                  << " '" << in.name
                  << "' is not defined by any input, parameter or node";
      suggest(diag, in.name, names);
    }
  }
  auto outs = root.find("outputs");
  for (auto [i, name] : llvm::enumerate(outputNames)) {
    if (definedBy.count(name))
      continue;
    // Find the entry's position for the location.
    size_t pos = 0;
    if (outs != root.end())
      for (size_t k = 0; k < outs->size(); ++k)
        if ((*outs)[k].is_string() &&
            (*outs)[k].get_ref<const std::string &>() == name)
          pos = k;
    auto diag = error("/outputs/" + std::to_string(pos))
                << "outputs[" << pos << "]: '" << name
                << "' is not defined by any input, parameter or node";
    suggest(diag, name, names);
  }
}

void Importer::sortNodes() {
  // Kahn's algorithm, always taking the earliest ready node in file order, so
  // a file already in order keeps its order.
  size_t n = nodes.size();
  std::vector<size_t> pending(n, 0);
  std::vector<std::vector<size_t>> users(n);
  for (auto [k, node] : llvm::enumerate(nodes)) {
    for (const InputRef &in : node.inputs) {
      if (in.literal)
        continue;
      auto p = producer.find(in.name);
      if (p == producer.end())
        continue;
      ++pending[k];
      users[p->second].push_back(k);
    }
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>> ready;
  for (size_t k = 0; k < n; ++k)
    if (pending[k] == 0)
      ready.push(k);
  while (!ready.empty()) {
    size_t k = ready.top();
    ready.pop();
    order.push_back(k);
    for (size_t u : users[k])
      if (--pending[u] == 0)
        ready.push(u);
  }
  if (order.size() == n)
    return;

  // Some nodes wait on a cycle. Walk back from the first of them through
  // waiting producers until a node repeats: that is a cycle to show.
  size_t start = 0;
  while (pending[start] == 0)
    ++start;
  std::vector<size_t> path;
  std::vector<int> seenAt(n, -1);
  size_t cur = start;
  while (seenAt[cur] < 0) {
    seenAt[cur] = static_cast<int>(path.size());
    path.push_back(cur);
    size_t next = cur;
    for (const InputRef &in : nodes[cur].inputs) {
      auto p = producer.find(in.name);
      if (!in.literal && p != producer.end() && pending[p->second] > 0) {
        next = p->second;
        break;
      }
    }
    cur = next;
  }
  // `path` runs against the data flow (each node's producer comes next);
  // show the cycle in data-flow order.
  std::string cycle = "'" + nodes[cur].id + "'";
  for (size_t k = path.size(); k-- > static_cast<size_t>(seenAt[cur]);)
    cycle += " -> '" + nodes[path[k]].id + "'";
  const NodeDecl &node = nodes[cur];
  error(namedLoc(node.id, node.pointer))
      << "node '" << node.id << "': " << node.op
      << ": the nodes form a cycle (each feeds the next): " << cycle;
}

//===----------------------------------------------------------------------===//
// Phase 4: build
//===----------------------------------------------------------------------===//

Value Importer::getRngSeed() {
  if (!rngSeed)
    rngSeed = entry->addArgument(RankedTensorType::get({}, b.getI64Type()),
                                 func.getLoc());
  return rngSeed;
}

OwningOpRef<ModuleOp> Importer::buildModule() {
  Location topLoc = fileLoc(0);
  OwningOpRef<ModuleOp> module = ModuleOp::create(topLoc);
  b.setInsertionPointToEnd(module->getBody());

  SmallVector<Type> argTypes;
  for (const TensorDecl &d : inputs)
    argTypes.push_back(d.type);
  for (const TensorDecl &d : parameters)
    argTypes.push_back(d.type);
  func = func::FuncOp::create(b, topLoc, "forward",
                              b.getFunctionType(argTypes, {}));
  entry = func.addEntryBlock();
  unsigned argIndex = 0;
  for (const std::vector<TensorDecl> *list : {&inputs, &parameters}) {
    for (const TensorDecl &d : *list) {
      BlockArgument arg = entry->getArgument(argIndex++);
      arg.setLoc(namedLoc(d.name, d.pointer));
      values[d.name] = arg;
    }
  }

  b.setInsertionPointToEnd(entry);
  for (size_t k : order)
    buildNode(nodes[k]);

  SmallVector<Value> results;
  for (const std::string &name : outputNames) {
    Value v = values.lookup(name);
    if (!v)
      return nullptr; // Its node failed and said why.
    results.push_back(v);
  }
  if (hadError)
    return nullptr;
  func::ReturnOp::create(b, topLoc, results);

  // The signature is final only now: a dropout may have added the seed.
  SmallVector<Type> resultTypes;
  for (Value v : results)
    resultTypes.push_back(v.getType());
  func.setType(b.getFunctionType(entry->getArgumentTypes(), resultTypes));
  argIndex = 0;
  for (const TensorDecl &d : inputs)
    func.setArgAttr(argIndex++, kInputAttr, b.getStringAttr(d.name));
  for (const TensorDecl &d : parameters)
    func.setArgAttr(argIndex++, kParamAttr, b.getStringAttr(d.name));
  if (rngSeed)
    func.setArgAttr(argIndex++, kRngSeedAttr, b.getUnitAttr());
  for (auto [i, name] : llvm::enumerate(outputNames))
    func.setResultAttr(i, kOutputAttr, b.getStringAttr(name));
  return module;
}

void Importer::buildNode(const NodeDecl &node) {
  NodeContext c{node, namedLoc(node.id, node.pointer), {}, {}};
  for (const InputRef &in : node.inputs) {
    if (in.literal) {
      c.operands.push_back(Value());
      continue;
    }
    Value v = values.lookup(in.name);
    if (!v) {
      // A producer failed and reported it; stay quiet, poison our outputs.
      for (const std::string &out : node.outputs)
        values[out] = Value();
      return;
    }
    c.operands.push_back(v);
  }

  std::vector<CapturedDiag> diags;
  LogicalResult result =
      capture(diags, [&] { return (this->*node.spec->build)(c); });
  std::string prefix = "node '" + node.id + "': " + node.op + ": ";
  for (const CapturedDiag &d : diags)
    reemit(d, prefix);
  if (failed(result) || c.results.size() != node.outputs.size()) {
    if (diags.empty())
      error(c.loc) << prefix << "could not be built";
    hadError = true;
    for (const std::string &out : node.outputs)
      values[out] = Value();
    return;
  }
  for (auto [name, v] : llvm::zip_equal(node.outputs, c.results))
    values[name] = v;
  if (node.checkpoint)
    markCheckpoint(c);
  // Tensor parallelism's choice for the node's layer (its results' ops).
  if (!node.tp.empty())
    for (Value v : c.results)
      if (Operation *op = v.getDefiningOp())
        op->setAttr(kTensorParallelChoiceAttr,
                    StringAttr::get(op->getContext(), node.tp));
  if (node.stageStart)
    for (Value v : c.results)
      if (Operation *op = v.getDefiningOp())
        op->setAttr(kPipelineStageStartAttr, UnitAttr::get(op->getContext()));
}

/// Sets loom.checkpoint (loom-remat recomputes it in the backward) on the
/// ops the node made: those of its results and the ops at its location
/// they are computed from.
void Importer::markCheckpoint(NodeContext &c) {
  SmallVector<Operation *> worklist;
  for (Value v : c.results)
    if (Operation *op = v.getDefiningOp())
      worklist.push_back(op);
  llvm::SmallPtrSet<Operation *, 8> seen;
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (!seen.insert(op).second)
      continue;
    op->setAttr("loom.checkpoint", UnitAttr::get(op->getContext()));
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp(); def && def->getLoc() == c.loc)
        worklist.push_back(def);
  }
}

//===----------------------------------------------------------------------===//
// Attribute and operand helpers
//===----------------------------------------------------------------------===//

const json *Importer::findAttr(const NodeContext &c, StringRef name) {
  if (!c.node.attrs)
    return nullptr;
  auto it = c.node.attrs->find(name.str());
  return it == c.node.attrs->end() ? nullptr : &*it;
}

bool Importer::getBool(NodeContext &c, StringRef name, bool dflt, bool &out) {
  const json *j = findAttr(c, name);
  if (!j) {
    out = dflt;
    return true;
  }
  if (!j->is_boolean()) {
    emitError(attrLoc(c, name))
        << "attribute '" << name << "': expected true or false, got "
        << describe(*j);
    return false;
  }
  out = j->get<bool>();
  return true;
}

bool Importer::getInt(NodeContext &c, StringRef name,
                      std::optional<int64_t> dflt, int64_t &out) {
  const json *j = findAttr(c, name);
  if (!j) {
    if (!dflt) {
      emitError(c.loc) << "missing attribute '" << name << "'";
      return false;
    }
    out = *dflt;
    return true;
  }
  auto v = asInt(*j);
  if (!v) {
    emitError(attrLoc(c, name))
        << "attribute '" << name << "': expected an integer, got "
        << describe(*j);
    return false;
  }
  out = *v;
  return true;
}

bool Importer::getFloat(NodeContext &c, StringRef name,
                        std::optional<double> dflt, double &out) {
  const json *j = findAttr(c, name);
  if (!j) {
    if (!dflt) {
      emitError(c.loc) << "missing attribute '" << name << "'";
      return false;
    }
    out = *dflt;
    return true;
  }
  auto v = asNumber(*j);
  if (!v) {
    emitError(attrLoc(c, name)) << "attribute '" << name
                                << "': expected a number, got " << describe(*j);
    return false;
  }
  out = *v;
  return true;
}

bool Importer::getInts(NodeContext &c, StringRef name,
                       std::optional<SmallVector<int64_t>> dflt,
                       SmallVectorImpl<int64_t> &out, int64_t bound) {
  out.clear();
  const json *j = findAttr(c, name);
  if (!j) {
    if (!dflt) {
      emitError(c.loc) << "missing attribute '" << name << "'";
      return false;
    }
    out.append(dflt->begin(), dflt->end());
    return true;
  }
  if (!j->is_array()) {
    emitError(attrLoc(c, name))
        << "attribute '" << name << "': expected a list of integers, got "
        << describe(*j);
    return false;
  }
  if (j->size() > kMaxRank) {
    emitError(attrLoc(c, name)) << "attribute '" << name << "': " << j->size()
                                << " entries is more than any rank allows";
    return false;
  }
  for (auto [i, e] : llvm::enumerate(*j)) {
    auto v = asInt(e);
    if (!v) {
      emitError(attrLoc(c, name)) << "attribute '" << name << "': entry " << i
                                  << " must be an integer, got " << describe(e);
      return false;
    }
    if (*v > bound || *v < -bound) {
      emitError(attrLoc(c, name)) << "attribute '" << name << "': entry " << i
                                  << " (" << *v << ") is out of range";
      return false;
    }
    out.push_back(*v);
  }
  return true;
}

bool Importer::getString(NodeContext &c, StringRef name,
                         std::optional<StringRef> dflt, std::string &out) {
  const json *j = findAttr(c, name);
  if (!j) {
    if (!dflt) {
      emitError(c.loc) << "missing attribute '" << name << "'";
      return false;
    }
    out = dflt->str();
    return true;
  }
  if (!j->is_string()) {
    emitError(attrLoc(c, name)) << "attribute '" << name
                                << "': expected a string, got " << describe(*j);
    return false;
  }
  out = j->get<std::string>();
  return true;
}

bool Importer::getEnum(NodeContext &c, StringRef name,
                       std::optional<StringRef> dflt,
                       ArrayRef<StringRef> choices, std::string &out) {
  if (!getString(c, name, dflt, out))
    return false;
  if (llvm::is_contained(choices, StringRef(out)))
    return true;
  emitError(attrLoc(c, name)) << "attribute '" << name << "': \"" << out
                              << "\" is not one of " << joinQuoted(choices);
  return false;
}

bool Importer::normalizeAxis(NodeContext &c, StringRef name, int64_t &axis,
                             int64_t rank) {
  std::optional<int64_t> normalized = loom::normalizeAxis(axis, rank);
  if (!normalized) {
    emitError(findAttr(c, name) ? attrLoc(c, name) : c.loc)
        << "attribute '" << name << "' (" << axis
        << ") is out of range for rank " << rank;
    return false;
  }
  axis = *normalized;
  return true;
}

std::string Importer::describeOperand(NodeContext &c, unsigned i) {
  const InputRef &ref = c.node.inputs[i];
  std::string s = "input " + std::to_string(i);
  if (!ref.literal)
    s += " ('" + ref.name + "')";
  if (i < c.operands.size() && c.operands[i])
    s += " of type " + formatType(c.operands[i].getType());
  return s;
}

bool Importer::checkKind(NodeContext &c, unsigned i, EltKind kind) {
  if (i >= c.operands.size() || !c.operands[i])
    return true;
  Type elt = typeOf(c, i).getElementType();
  if (matchesKind(elt, kind))
    return true;
  emitError(c.loc) << describeOperand(c, i) << " must be " << kindText(kind);
  return false;
}

bool Importer::checkSameElementType(NodeContext &c,
                                    ArrayRef<unsigned> indices) {
  std::optional<unsigned> first;
  for (unsigned i : indices) {
    if (i >= c.operands.size() || !c.operands[i])
      continue;
    if (!first) {
      first = i;
      continue;
    }
    if (typeOf(c, i).getElementType() != typeOf(c, *first).getElementType()) {
      emitError(c.loc) << describeOperand(c, *first) << " and "
                       << describeOperand(c, i)
                       << " have different element types (insert a 'cast')";
      return false;
    }
  }
  return true;
}

Value Importer::materializeLiteral(NodeContext &c, unsigned i,
                                   Type elementType) {
  double v = *c.node.inputs[i].literal;
  if (isa<IntegerType>(elementType)) {
    if (v != std::trunc(v) ||
        (elementType.isInteger(1) && v != 0.0 && v != 1.0) ||
        std::fabs(v) > 9.0e18) {
      emitError(c.loc) << "input " << i << " (" << fmtNum(v)
                       << ") is not a valid " << elementType << " value";
      return {};
    }
  }
  return splatConstant(b, c.loc, RankedTensorType::get({}, elementType), v);
}

bool Importer::checkWindowAttr(NodeContext &c, StringRef name,
                               SmallVectorImpl<int64_t> &values, size_t count,
                               int64_t minValue) {
  if (values.size() != count) {
    emitError(findAttr(c, name) ? attrLoc(c, name) : c.loc)
        << "attribute '" << name << "' needs " << count << " entries, got "
        << values.size();
    return false;
  }
  for (int64_t v : values) {
    if (v < minValue || v > kMaxWindow) {
      emitError(attrLoc(c, name))
          << "attribute '" << name << "': " << formatShape(values) << " must have "
          << (minValue > 0 ? "positive" : "non-negative") << " entries";
      return false;
    }
  }
  return true;
}

bool Importer::readPadding(NodeContext &c, SmallVectorImpl<int64_t> &pads) {
  if (!getInts(c, "padding", SmallVector<int64_t>{0, 0, 0, 0}, pads))
    return false;
  // [ph, pw] is shorthand for [ph, pw, ph, pw].
  if (pads.size() == 2)
    pads.append({pads[0], pads[1]});
  if (pads.size() != 4) {
    emitError(attrLoc(c, "padding"))
        << "attribute 'padding' needs 4 entries [top, left, bottom, right] "
           "(or 2, [height, width]), got "
        << pads.size();
    return false;
  }
  return checkWindowAttr(c, "padding", pads, 4, 0);
}

//===----------------------------------------------------------------------===//
// Op builders
//===----------------------------------------------------------------------===//

template <typename OpTy> LogicalResult Importer::buildUnary(NodeContext &c) {
  EltKind kind = EltKind::Float;
  if constexpr (std::is_same_v<OpTy, NegOp> || std::is_same_v<OpTy, AbsOp>)
    kind = EltKind::Numeric;
  if constexpr (std::is_same_v<OpTy, StopGradientOp>)
    kind = EltKind::Any;
  if (!checkKind(c, 0, kind))
    return failure();
  c.results.push_back(OpTy::create(b, c.loc, c.operands[0]).getResult());
  return success();
}

template <typename OpTy> LogicalResult Importer::buildBinary(NodeContext &c) {
  EltKind kind =
      std::is_same_v<OpTy, PowOp> ? EltKind::Float : EltKind::Numeric;
  if (!checkKind(c, 0, kind) || !checkKind(c, 1, kind) ||
      !checkSameElementType(c, {0, 1}))
    return failure();
  Value lhs = c.operands[0], rhs = c.operands[1];
  if (!lhs)
    lhs = materializeLiteral(c, 0, getElementTypeOrSelf(rhs.getType()));
  if (!rhs)
    rhs = materializeLiteral(c, 1, getElementTypeOrSelf(lhs.getType()));
  if (!lhs || !rhs)
    return failure();
  auto result = createBroadcastBinary<OpTy>(b, c.loc, lhs, rhs);
  if (failed(result))
    return failure();
  c.results.push_back(*result);
  return success();
}

LogicalResult Importer::buildGelu(NodeContext &c) {
  std::string approx;
  if (!checkKind(c, 0, EltKind::Float) ||
      !getEnum(c, "approximate", StringRef("none"), {"none", "tanh"}, approx))
    return failure();
  auto mode = symbolizeGeluApproximation(approx);
  c.results.push_back(GeluOp::create(b, c.loc, c.operands[0], *mode));
  return success();
}

LogicalResult Importer::buildSelect(NodeContext &c) {
  if (!checkKind(c, 0, EltKind::Bool) || !checkSameElementType(c, {1, 2}))
    return failure();
  Value cond = c.operands[0], onTrue = c.operands[1], onFalse = c.operands[2];
  if (!onTrue)
    onTrue = materializeLiteral(c, 1, getElementTypeOrSelf(onFalse.getType()));
  if (!onFalse)
    onFalse = materializeLiteral(c, 2, getElementTypeOrSelf(onTrue.getType()));
  if (!onTrue || !onFalse)
    return failure();
  auto shapeOf = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  };
  auto shape = broadcastShapes(shapeOf(cond), shapeOf(onTrue));
  if (shape)
    shape = broadcastShapes(*shape, shapeOf(onFalse));
  if (!shape) {
    emitError(c.loc) << "shapes " << formatShape(shapeOf(cond)) << ", "
                     << formatShape(shapeOf(onTrue)) << " and "
                     << formatShape(shapeOf(onFalse))
                     << " are not broadcast-compatible";
    return failure();
  }
  cond = broadcastTo(b, c.loc, cond, *shape);
  onTrue = broadcastTo(b, c.loc, onTrue, *shape);
  onFalse = broadcastTo(b, c.loc, onFalse, *shape);
  c.results.push_back(SelectOp::create(b, c.loc, cond, onTrue, onFalse));
  return success();
}

LogicalResult Importer::buildCompare(NodeContext &c) {
  std::string pred;
  if (!getEnum(c, "predicate", std::nullopt,
               {"eq", "ne", "lt", "le", "gt", "ge"}, pred) ||
      !checkSameElementType(c, {0, 1}))
    return failure();
  Value lhs = c.operands[0], rhs = c.operands[1];
  if (!lhs)
    lhs = materializeLiteral(c, 0, getElementTypeOrSelf(rhs.getType()));
  if (!rhs)
    rhs = materializeLiteral(c, 1, getElementTypeOrSelf(lhs.getType()));
  if (!lhs || !rhs || failed(broadcastPair(b, c.loc, lhs, rhs)))
    return failure();
  auto type = RankedTensorType::get(
      cast<RankedTensorType>(lhs.getType()).getShape(), b.getI1Type());
  c.results.push_back(CompareOp::create(
      b, c.loc, type, *symbolizeComparePredicate(pred), lhs, rhs));
  return success();
}

LogicalResult Importer::buildCast(NodeContext &c) {
  std::string to;
  if (!getString(c, "to", std::nullopt, to))
    return failure();
  Type elt = parseDtype(&ctx, to);
  if (!elt) {
    emitError(attrLoc(c, "to")) << "attribute 'to': unknown dtype \"" << to
                                << "\"; expected " << kDtypeList;
    return failure();
  }
  auto type = RankedTensorType::get(typeOf(c, 0).getShape(), elt);
  c.results.push_back(CastOp::create(b, c.loc, type, c.operands[0]));
  return success();
}

LogicalResult Importer::buildMatmul(NodeContext &c) {
  bool ta = false, tb = false;
  if (!checkKind(c, 0, EltKind::Float) || !checkKind(c, 1, EltKind::Float) ||
      !checkSameElementType(c, {0, 1}) ||
      !getBool(c, "transpose_a", false, ta) ||
      !getBool(c, "transpose_b", false, tb))
    return failure();
  auto op = createInferred<MatmulOp>(b, c.loc, c.operands[0], c.operands[1],
                                     Value(),
                                     ta ? b.getUnitAttr() : UnitAttr(),
                                     tb ? b.getUnitAttr() : UnitAttr());
  if (failed(op))
    return failure();
  c.results.push_back(op->getResult());
  return success();
}

LogicalResult Importer::buildConv2D(NodeContext &c) {
  SmallVector<int64_t> strides, pads, dilations;
  int64_t groups = 1;
  if (!checkKind(c, 0, EltKind::Float) || !checkKind(c, 1, EltKind::Float) ||
      !checkKind(c, 2, EltKind::Float) || !checkSameElementType(c, {0, 1, 2}) ||
      !getInts(c, "strides", SmallVector<int64_t>{1, 1}, strides) ||
      !checkWindowAttr(c, "strides", strides, 2, 1) || !readPadding(c, pads) ||
      !getInts(c, "dilations", SmallVector<int64_t>{1, 1}, dilations) ||
      !checkWindowAttr(c, "dilations", dilations, 2, 1) ||
      !getInt(c, "groups", 1, groups))
    return failure();
  if (groups < 1 || groups > kMaxWindow) {
    emitError(attrLoc(c, "groups"))
        << "attribute 'groups' must be positive, got " << groups;
    return failure();
  }
  auto op = createInferred<Conv2DOp>(
      b, c.loc, c.operands[0], c.operands[1], b.getDenseI64ArrayAttr(strides),
      b.getDenseI64ArrayAttr(pads), b.getDenseI64ArrayAttr(dilations),
      b.getI64IntegerAttr(groups));
  if (failed(op))
    return failure();
  Value result = op->getResult();
  if (c.operands.size() == 3) {
    // The optional bias: one value per output channel, added on dimension 1.
    auto outType = cast<RankedTensorType>(result.getType());
    auto biasType = typeOf(c, 2);
    if (biasType.getRank() != 1 ||
        biasType.getDimSize(0) != outType.getDimSize(1)) {
      emitError(c.loc) << describeOperand(c, 2)
                       << " must be the bias, 1-D with one entry per output "
                          "channel ("
                       << outType.getDimSize(1) << ")";
      return failure();
    }
    Value bias = BroadcastInDimOp::create(b, c.loc, outType, c.operands[2],
                                          b.getDenseI64ArrayAttr({1}));
    result = AddOp::create(b, c.loc, result, bias);
  }
  c.results.push_back(result);
  return success();
}

template <typename OpTy> LogicalResult Importer::buildReduce(NodeContext &c) {
  if (!checkKind(c, 0, EltKind::Numeric))
    return failure();
  int64_t rank = typeOf(c, 0).getRank();
  SmallVector<int64_t> all = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  SmallVector<int64_t> dims;
  bool keep = false;
  if (!getInts(c, "dims", all, dims) || !getBool(c, "keep_dims", false, keep))
    return failure();
  for (int64_t &d : dims)
    if (!normalizeAxis(c, "dims", d, rank))
      return failure();
  llvm::sort(dims);
  if (std::adjacent_find(dims.begin(), dims.end()) != dims.end()) {
    emitError(attrLoc(c, "dims")) << "attribute 'dims' names a dimension twice";
    return failure();
  }
  auto op = createInferred<OpTy>(b, c.loc, c.operands[0],
                                 b.getDenseI64ArrayAttr(dims),
                                 keep ? b.getUnitAttr() : UnitAttr());
  if (failed(op))
    return failure();
  c.results.push_back(op->getResult());
  return success();
}

LogicalResult Importer::buildBroadcastInDim(NodeContext &c) {
  auto xType = typeOf(c, 0);
  SmallVector<int64_t> shape, dims;
  if (!getInts(c, "shape", std::nullopt, shape))
    return failure();
  int64_t rank = static_cast<int64_t>(shape.size());
  for (int64_t d : shape) {
    if (d < 0) {
      emitError(attrLoc(c, "shape")) << "attribute 'shape': " << formatShape(shape)
                                     << " has a negative dimension";
      return failure();
    }
  }
  if (rank < xType.getRank()) {
    emitError(attrLoc(c, "shape"))
        << "attribute 'shape': " << formatShape(shape) << " has rank " << rank
        << ", below the rank of " << describeOperand(c, 0);
    return failure();
  }
  // Default: numpy broadcasting, trailing dimensions aligned.
  SmallVector<int64_t> dflt =
      llvm::to_vector(llvm::seq<int64_t>(rank - xType.getRank(), rank));
  if (!getInts(c, "dims", dflt, dims))
    return failure();
  if (static_cast<int64_t>(dims.size()) != xType.getRank()) {
    emitError(attrLoc(c, "dims"))
        << "attribute 'dims' needs one entry per dimension of "
        << describeOperand(c, 0) << ", got " << dims.size();
    return failure();
  }
  int64_t prev = -1;
  for (auto [i, d] : llvm::enumerate(dims)) {
    if (!normalizeAxis(c, "dims", d, rank))
      return failure();
    if (d <= prev) {
      emitError(attrLoc(c, "dims"))
          << "attribute 'dims' must be strictly increasing";
      return failure();
    }
    prev = d;
    int64_t size = xType.getDimSize(i);
    if (size != 1 && size != shape[d]) {
      emitError(c.loc) << "cannot broadcast " << describeOperand(c, 0) << " to "
                       << formatShape(shape) << ": dimension " << i << " (size "
                       << size << ") maps to dimension " << d << " (size "
                       << shape[d] << ")";
      return failure();
    }
  }
  auto type = RankedTensorType::get(shape, xType.getElementType());
  c.results.push_back(BroadcastInDimOp::create(b, c.loc, type, c.operands[0],
                                               b.getDenseI64ArrayAttr(dims)));
  return success();
}

LogicalResult Importer::buildReshape(NodeContext &c) {
  auto xType = typeOf(c, 0);
  SmallVector<int64_t> shape;
  if (!getInts(c, "shape", std::nullopt, shape))
    return failure();
  // One -1 entry stands for whatever size makes the element counts agree.
  std::optional<size_t> inferred;
  int64_t known = 1;
  for (auto [i, d] : llvm::enumerate(shape)) {
    if (d == -1 && !inferred) {
      inferred = i;
      continue;
    }
    if (d < 0) {
      emitError(attrLoc(c, "shape"))
          << "attribute 'shape': " << formatShape(shape)
          << " may hold one -1 and otherwise non-negative sizes";
      return failure();
    }
    known *= d;
  }
  int64_t count = xType.getNumElements();
  if (inferred) {
    if (known == 0) {
      emitError(attrLoc(c, "shape"))
          << "attribute 'shape': cannot infer the -1 in " << formatShape(shape)
          << ": the other sizes multiply to 0";
      return failure();
    }
    if (count % known != 0) {
      emitError(c.loc) << "cannot reshape " << describeOperand(c, 0) << " ("
                       << count << " elements) to " << formatShape(shape);
      return failure();
    }
    shape[*inferred] = count / known;
    known = count;
  }
  if (known != count) {
    emitError(c.loc) << "cannot reshape " << describeOperand(c, 0) << " ("
                     << count << " elements) to " << formatShape(shape) << " ("
                     << known << " elements)";
    return failure();
  }
  auto type = RankedTensorType::get(shape, xType.getElementType());
  c.results.push_back(ReshapeOp::create(b, c.loc, type, c.operands[0]));
  return success();
}

LogicalResult Importer::buildTranspose(NodeContext &c) {
  int64_t rank = typeOf(c, 0).getRank();
  SmallVector<int64_t> perm;
  if (!getInts(c, "perm",
               llvm::to_vector(llvm::reverse(llvm::seq<int64_t>(0, rank))),
               perm))
    return failure();
  for (int64_t &p : perm)
    if (p < 0 && p >= -rank)
      p += rank;
  auto op = createInferred<TransposeOp>(b, c.loc, c.operands[0],
                                        b.getDenseI64ArrayAttr(perm));
  if (failed(op))
    return failure();
  c.results.push_back(op->getResult());
  return success();
}

LogicalResult Importer::buildSlice(NodeContext &c) {
  auto xType = typeOf(c, 0);
  int64_t rank = xType.getRank();
  SmallVector<int64_t> axes, start, limit, stride;
  if (!getInts(c, "axes", llvm::to_vector(llvm::seq<int64_t>(0, rank)), axes))
    return failure();
  size_t n = axes.size();
  for (int64_t &a : axes)
    if (!normalizeAxis(c, "axes", a, rank))
      return failure();
  SmallVector<int64_t> zeros(n, 0), ones(n, 1), dims;
  for (int64_t a : axes)
    dims.push_back(xType.getDimSize(a));
  if (!getInts(c, "start", zeros, start) || !getInts(c, "limit", dims, limit) ||
      !getInts(c, "stride", ones, stride))
    return failure();
  std::pair<StringRef, SmallVector<int64_t> *> lists[] = {
      {"start", &start}, {"limit", &limit}, {"stride", &stride}};
  for (auto [name, list] : lists) {
    if (list->size() != n) {
      emitError(attrLoc(c, name))
          << "attribute '" << name << "' has " << list->size()
          << " entries but there are " << n
          << (findAttr(c, "axes") ? " axes" : " dimensions");
      return failure();
    }
  }
  // Full-range slices on the dimensions not named in 'axes'.
  SmallVector<int64_t> fullStart(rank, 0), fullLimit(xType.getShape()),
      fullStride(rank, 1);
  llvm::SmallBitVector seen(rank);
  for (size_t i = 0; i < n; ++i) {
    int64_t a = axes[i], size = xType.getDimSize(a);
    if (seen.test(a)) {
      emitError(attrLoc(c, "axes"))
          << "attribute 'axes' names dimension " << a << " twice";
      return failure();
    }
    seen.set(a);
    // Negative positions count from the end, as in numpy.
    fullStart[a] = start[i] < 0 ? start[i] + size : start[i];
    fullLimit[a] = limit[i] < 0 ? limit[i] + size : limit[i];
    fullStride[a] = stride[i];
  }
  auto op = createInferred<SliceOp>(
      b, c.loc, c.operands[0], b.getDenseI64ArrayAttr(fullStart),
      b.getDenseI64ArrayAttr(fullLimit), b.getDenseI64ArrayAttr(fullStride));
  if (failed(op))
    return failure();
  c.results.push_back(op->getResult());
  return success();
}

LogicalResult Importer::buildConcat(NodeContext &c) {
  int64_t dim = 0;
  if (!getInt(c, "dim", std::nullopt, dim) ||
      !normalizeAxis(c, "dim", dim, typeOf(c, 0).getRank()))
    return failure();
  auto op = createInferred<ConcatOp>(b, c.loc, ValueRange(c.operands),
                                     b.getI64IntegerAttr(dim));
  if (failed(op))
    return failure();
  c.results.push_back(op->getResult());
  return success();
}

LogicalResult Importer::buildGather(NodeContext &c) {
  int64_t axis = 0;
  if (!checkKind(c, 1, EltKind::Index) || !getInt(c, "axis", 0, axis) ||
      !normalizeAxis(c, "axis", axis, typeOf(c, 0).getRank()))
    return failure();
  auto op = createInferred<GatherOp>(b, c.loc, c.operands[0], c.operands[1],
                                     b.getI64IntegerAttr(axis));
  if (failed(op))
    return failure();
  c.results.push_back(op->getResult());
  return success();
}

template <typename OpTy> LogicalResult Importer::buildSoftmax(NodeContext &c) {
  int64_t axis = -1;
  if (!checkKind(c, 0, EltKind::Float) || !getInt(c, "axis", -1, axis) ||
      !normalizeAxis(c, "axis", axis, typeOf(c, 0).getRank()))
    return failure();
  c.results.push_back(
      OpTy::create(b, c.loc, c.operands[0], b.getI64IntegerAttr(axis)));
  return success();
}

/// Fused scaled-dot-product attention: q [B, Hq, T, D], k [B, Hkv, S, D],
/// v [B, Hkv, S, Dv]; the op's verifier names what is wrong with them.
LogicalResult Importer::buildAttention(NodeContext &c) {
  if (!checkKind(c, 0, EltKind::Float) || !checkKind(c, 1, EltKind::Float) ||
      !checkKind(c, 2, EltKind::Float) || !checkKind(c, 3, EltKind::Index) ||
      !checkSameElementType(c, {0, 1, 2}))
    return failure();
  auto q = typeOf(c, 0), v = typeOf(c, 2);
  // The optional fourth input: document ids [B, T] of packed sequences.
  Value segments = c.operands.size() > 3 ? c.operands[3] : Value();
  for (unsigned i = 0; i < 3; ++i)
    if (typeOf(c, i).getRank() != 4) {
      emitError(c.loc) << describeOperand(c, i)
                       << " must have rank 4 ([batch, heads, sequence, "
                          "head dim])";
      return failure();
    }
  double scale = 1.0 / std::sqrt(double(q.getDimSize(3)));
  bool causal = false;
  int64_t window = 0;
  if (!getFloat(c, "scale", scale, scale) ||
      !getBool(c, "causal", false, causal) || !getInt(c, "window", 0, window))
    return failure();
  auto outType = RankedTensorType::get(
      {q.getDimSize(0), q.getDimSize(1), q.getDimSize(2), v.getDimSize(3)},
      q.getElementType());
  auto lseType = RankedTensorType::get(
      {q.getDimSize(0), q.getDimSize(1), q.getDimSize(2)}, b.getF32Type());
  auto op = AttentionOp::create(
      b, c.loc, outType, lseType, c.operands[0], c.operands[1],
      c.operands[2], Value(), Value(), segments, Value(),
      b.getF64FloatAttr(scale), causal ? b.getUnitAttr() : UnitAttr(),
      b.getI64IntegerAttr(window), b.getF32FloatAttr(0.0f),
      b.getI64IntegerAttr(0));
  if (failed(verify(op))) {
    op->erase();
    return failure();
  }
  c.results.push_back(op.getOut());
  return success();
}

/// Shared by layer_norm and rms_norm: the operands, axis and epsilon.
static bool checkNormalizedShape(Location loc, StringRef what,
                                 RankedTensorType x, RankedTensorType param,
                                 int64_t axis) {
  ArrayRef<int64_t> expected = x.getShape().drop_front(axis);
  if (param.getShape() == expected)
    return true;
  emitError(loc) << what << " has shape " << formatShape(param.getShape())
                 << " but the normalized shape (dimensions " << axis << ".. of "
                 << formatShape(x.getShape()) << ") is " << formatShape(expected);
  return false;
}

LogicalResult Importer::buildLayerNorm(NodeContext &c) {
  int64_t axis = -1;
  double eps = 1e-5;
  if (!checkKind(c, 0, EltKind::Float) || !checkKind(c, 1, EltKind::Float) ||
      !checkKind(c, 2, EltKind::Float) || !checkSameElementType(c, {0, 1, 2}) ||
      !getInt(c, "axis", -1, axis) ||
      !normalizeAxis(c, "axis", axis, typeOf(c, 0).getRank()) ||
      !getFloat(c, "epsilon", 1e-5, eps))
    return failure();
  if (!(eps > 0)) {
    emitError(attrLoc(c, "epsilon"))
        << "attribute 'epsilon' must be positive, got " << fmtNum(eps);
    return failure();
  }
  auto x = typeOf(c, 0);
  if (!checkNormalizedShape(c.loc, "the scale (" + describeOperand(c, 1) + ")",
                            x, typeOf(c, 1), axis))
    return failure();
  Value bias;
  if (c.operands.size() == 3) {
    if (!checkNormalizedShape(c.loc, "the bias (" + describeOperand(c, 2) + ")",
                              x, typeOf(c, 2), axis))
      return failure();
    bias = c.operands[2];
  } else {
    bias = splatConstant(b, c.loc, typeOf(c, 1), 0.0);
  }
  c.results.push_back(
      LayerNormOp::create(b, c.loc, c.operands[0], c.operands[1], bias,
                          b.getI64IntegerAttr(axis), b.getF32FloatAttr(eps)));
  return success();
}

LogicalResult Importer::buildRmsNorm(NodeContext &c) {
  int64_t axis = -1;
  double eps = 1e-6;
  if (!checkKind(c, 0, EltKind::Float) || !checkKind(c, 1, EltKind::Float) ||
      !checkSameElementType(c, {0, 1}) || !getInt(c, "axis", -1, axis) ||
      !normalizeAxis(c, "axis", axis, typeOf(c, 0).getRank()) ||
      !getFloat(c, "epsilon", 1e-6, eps))
    return failure();
  if (!(eps > 0)) {
    emitError(attrLoc(c, "epsilon"))
        << "attribute 'epsilon' must be positive, got " << fmtNum(eps);
    return failure();
  }
  if (!checkNormalizedShape(c.loc, "the scale (" + describeOperand(c, 1) + ")",
                            typeOf(c, 0), typeOf(c, 1), axis))
    return failure();
  c.results.push_back(RmsNormOp::create(b, c.loc, c.operands[0], c.operands[1],
                                        b.getI64IntegerAttr(axis),
                                        b.getF32FloatAttr(eps)));
  return success();
}

LogicalResult Importer::buildBatchNorm(NodeContext &c) {
  double eps = 1e-5;
  for (unsigned i = 0; i < 5; ++i)
    if (!checkKind(c, i, EltKind::Float))
      return failure();
  if (!checkSameElementType(c, {0, 1, 2, 3, 4}) ||
      !getFloat(c, "epsilon", 1e-5, eps))
    return failure();
  if (!(eps > 0)) {
    emitError(attrLoc(c, "epsilon"))
        << "attribute 'epsilon' must be positive, got " << fmtNum(eps);
    return failure();
  }
  auto x = typeOf(c, 0);
  if (x.getRank() < 2) {
    emitError(c.loc) << describeOperand(c, 0)
                     << " must have rank >= 2 (channels on dimension 1)";
    return failure();
  }
  static const char *kNames[] = {"", "scale", "bias", "mean", "variance"};
  for (unsigned i = 1; i < 5; ++i) {
    auto t = typeOf(c, i);
    if (t.getRank() != 1 || t.getDimSize(0) != x.getDimSize(1)) {
      emitError(c.loc) << "the " << kNames[i] << " (" << describeOperand(c, i)
                       << ") must be 1-D with one entry per channel ("
                       << x.getDimSize(1) << ")";
      return failure();
    }
  }
  c.results.push_back(BatchNormOp::create(
      b, c.loc, c.operands[0], c.operands[1], c.operands[2], c.operands[3],
      c.operands[4], b.getF32FloatAttr(eps), FloatAttr()));
  return success();
}

LogicalResult Importer::buildBatchNormStats(NodeContext &c) {
  if (!checkKind(c, 0, EltKind::Float))
    return failure();
  auto op = createInferred<BatchNormStatsOp>(b, c.loc, c.operands[0]);
  if (failed(op))
    return failure();
  c.results.push_back(op->getMean());
  c.results.push_back(op->getVariance());
  return success();
}

template <typename OpTy> LogicalResult Importer::buildPool(NodeContext &c) {
  SmallVector<int64_t> kernel, strides, pads;
  bool countPad = false;
  if (!checkKind(c, 0, EltKind::Float) ||
      !getInts(c, "kernel", std::nullopt, kernel) ||
      !checkWindowAttr(c, "kernel", kernel, 2, 1) ||
      !getInts(c, "strides", kernel, strides) ||
      !checkWindowAttr(c, "strides", strides, 2, 1) || !readPadding(c, pads) ||
      !getBool(c, "count_include_pad", false, countPad))
    return failure();
  auto op = createInferred<OpTy>(
      b, c.loc, c.operands[0], b.getDenseI64ArrayAttr(kernel),
      b.getDenseI64ArrayAttr(strides), b.getDenseI64ArrayAttr(pads),
      countPad ? b.getUnitAttr() : UnitAttr());
  if (failed(op))
    return failure();
  c.results.push_back(op->getResult());
  return success();
}

LogicalResult Importer::buildDropout(NodeContext &c) {
  double ratio = 0.5;
  if (!checkKind(c, 0, EltKind::Float) || !getFloat(c, "ratio", 0.5, ratio))
    return failure();
  if (!(ratio >= 0.0 && ratio < 1.0)) {
    emitError(attrLoc(c, "ratio"))
        << "attribute 'ratio' must be in [0, 1), got " << fmtNum(ratio);
    return failure();
  }
  c.results.push_back(DropoutOp::create(
      b, c.loc, c.operands[0], getRngSeed(), b.getF32FloatAttr(ratio),
      b.getI64IntegerAttr(nextDropoutStream++)));
  return success();
}

LogicalResult Importer::buildCrossEntropy(NodeContext &c) {
  std::string reduction;
  if (!checkKind(c, 0, EltKind::Float) || !checkKind(c, 1, EltKind::Index) ||
      !getEnum(c, "reduction", StringRef("mean"), {"mean", "sum", "none"},
               reduction))
    return failure();
  IntegerAttr ignore;
  if (findAttr(c, "ignore_index")) {
    int64_t v = 0;
    if (!getInt(c, "ignore_index", std::nullopt, v))
      return failure();
    ignore = b.getI64IntegerAttr(v);
  }
  auto op = createInferred<CrossEntropyOp>(
      b, c.loc, c.operands[0], c.operands[1],
      ReductionAttr::get(&ctx, *symbolizeReduction(reduction)), ignore);
  if (failed(op))
    return failure();
  c.results.push_back(op->getResult());
  return success();
}

LogicalResult Importer::buildMse(NodeContext &c) {
  std::string reduction;
  if (!checkKind(c, 0, EltKind::Float) || !checkKind(c, 1, EltKind::Float) ||
      !getEnum(c, "reduction", StringRef("mean"), {"mean", "sum", "none"},
               reduction))
    return failure();
  auto op = createInferred<MseOp>(
      b, c.loc, c.operands[0], c.operands[1],
      ReductionAttr::get(&ctx, *symbolizeReduction(reduction)));
  if (failed(op))
    return failure();
  c.results.push_back(op->getResult());
  return success();
}

LogicalResult Importer::buildConstant(NodeContext &c) {
  std::string dtype;
  if (!getString(c, "dtype", StringRef("f32"), dtype))
    return failure();
  Type elt = parseDtype(&ctx, dtype);
  if (!elt) {
    emitError(attrLoc(c, "dtype")) << "attribute 'dtype': unknown dtype \""
                                   << dtype << "\"; expected " << kDtypeList;
    return failure();
  }
  const json *value = findAttr(c, "value");
  if (!value) {
    emitError(c.loc) << "missing attribute 'value' (a number or a nested list)";
    return failure();
  }

  // Flatten the nested lists, checking that they are rectangular.
  SmallVector<int64_t> nestedShape;
  std::vector<const json *> scalars;
  {
    std::vector<const json *> level{value};
    while (level.front()->is_array()) {
      if (nestedShape.size() >= kMaxRank) {
        emitError(attrLoc(c, "value"))
            << "attribute 'value' is nested deeper than " << kMaxRank;
        return failure();
      }
      size_t width = level.front()->size();
      std::vector<const json *> next;
      for (const json *j : level) {
        if (!j->is_array() || j->size() != width) {
          emitError(attrLoc(c, "value"))
              << "attribute 'value': nested lists must be rectangular (all "
                 "lists at depth "
              << nestedShape.size() << " of length " << width << ")";
          return failure();
        }
        for (const json &e : *j)
          next.push_back(&e);
      }
      nestedShape.push_back(static_cast<int64_t>(width));
      level = std::move(next);
      if (level.empty())
        break;
    }
    scalars = std::move(level);
  }
  int64_t count = static_cast<int64_t>(scalars.size());

  // A single number with a 'shape' is a splat (DenseElementsAttr::get takes
  // one value for all elements).
  SmallVector<int64_t> shape;
  if (findAttr(c, "shape")) {
    if (!getInts(c, "shape", std::nullopt, shape))
      return failure();
    std::optional<int64_t> n = loomrt::checkedNumElements(
        std::vector<int64_t>(shape.begin(), shape.end()));
    if (!n) {
      emitError(attrLoc(c, "shape"))
          << "attribute 'shape': " << formatShape(shape)
          << " has a negative dimension or too many elements";
      return failure();
    }
    if (value->is_array() && *n != count) {
      emitError(attrLoc(c, "shape"))
          << "attribute 'shape' is " << formatShape(shape) << " (" << *n
          << " elements) but 'value' has shape " << formatShape(nestedShape)
          << " (" << count << " elements)";
      return failure();
    }
  } else {
    shape = nestedShape;
  }
  auto type = RankedTensorType::get(shape, elt);

  // Convert the scalars to the element type.
  auto bad = [&](const json &j, const Twine &why) {
    auto diag = emitError(attrLoc(c, "value")) << "attribute 'value': ";
    if (j.is_primitive()) // dump() of a scalar is short and safe.
      diag << j.dump();
    else
      diag << describe(j);
    diag << " " << why.str();
    return failure();
  };
  DenseElementsAttr attr;
  if (auto ft = dyn_cast<FloatType>(elt)) {
    SmallVector<APFloat> values;
    values.reserve(scalars.size());
    for (const json *j : scalars) {
      auto v = asNumber(*j);
      if (!v)
        return bad(*j, "is not a number");
      APFloat f(*v);
      bool lost = false;
      APFloat::opStatus st = f.convert(ft.getFloatSemantics(),
                                       APFloat::rmNearestTiesToEven, &lost);
      if (st & APFloat::opOverflow)
        return bad(*j, "is too large for " + dtype);
      values.push_back(f);
    }
    attr = DenseElementsAttr::get(type, values);
  } else if (elt.isInteger(1)) {
    SmallVector<bool> values;
    for (const json *j : scalars) {
      if (j->is_boolean())
        values.push_back(j->get<bool>());
      else if (auto v = asInt(*j); v && (*v == 0 || *v == 1))
        values.push_back(*v == 1);
      else
        return bad(*j, "is not true, false, 0 or 1 (dtype i1)");
    }
    attr = DenseElementsAttr::get(type, values);
  } else {
    unsigned width = elt.getIntOrFloatBitWidth();
    SmallVector<APInt> values;
    for (const json *j : scalars) {
      auto v = asInt(*j);
      if (!v)
        return bad(*j, "is not an integer (dtype " + dtype + ")");
      if (width == 32 && (*v < std::numeric_limits<int32_t>::min() ||
                          *v > std::numeric_limits<int32_t>::max()))
        return bad(*j, "is out of range for " + dtype);
      values.push_back(APInt(width, static_cast<uint64_t>(*v),
                             /*isSigned=*/true));
    }
    attr = DenseElementsAttr::get(type, values);
  }
  c.results.push_back(ConstantOp::create(b, c.loc, attr));
  return success();
}

//===----------------------------------------------------------------------===//
// Phase 5: parameter values
//===----------------------------------------------------------------------===//

/// Writes `v`, rounded to nearest even, as one element of `elt`.
void storeElement(double v, Type elt, uint8_t *dst) {
  if (elt.isF64()) {
    llvm::support::endian::write64le(dst, llvm::bit_cast<uint64_t>(v));
    return;
  }
  if (elt.isF32()) {
    llvm::support::endian::write32le(
        dst, llvm::bit_cast<uint32_t>(static_cast<float>(v)));
    return;
  }
  APFloat f(v);
  bool lost = false;
  f.convert(cast<FloatType>(elt).getFloatSemantics(),
            APFloat::rmNearestTiesToEven, &lost);
  llvm::support::endian::write16le(
      dst, static_cast<uint16_t>(f.bitcastToAPInt().getZExtValue()));
}

bool Importer::fillParameter(const TensorDecl &decl,
                             std::vector<uint8_t> &bytes) {
  Type elt = decl.type.getElementType();
  size_t eltSize = elt.getIntOrFloatBitWidth() / 8;
  size_t count = static_cast<size_t>(decl.type.getNumElements());
  const ParamInit &init = decl.init;
  if (init.kind == ParamInit::Kind::File) {
    bytes.assign(init.view->data, init.view->data + init.view->nbytes);
    return true;
  }
  bytes.resize(count * eltSize);
  switch (init.kind) {
  case ParamInit::Kind::Zeros:
  case ParamInit::Kind::Ones:
  case ParamInit::Kind::Constant: {
    double v = init.kind == ParamInit::Kind::Zeros  ? 0.0
               : init.kind == ParamInit::Kind::Ones ? 1.0
                                                    : init.a;
    uint8_t one[8];
    storeElement(v, elt, one);
    for (size_t i = 0; i < count; ++i)
      std::memcpy(bytes.data() + i * eltSize, one, eltSize);
    return true;
  }
  case ParamInit::Kind::Uniform: {
    SplitMix64 rng(seed, decl.name);
    double width = init.b - init.a;
    for (size_t i = 0; i < count; ++i)
      storeElement(affine(init.a, width, rng.uniform()), elt,
                   bytes.data() + i * eltSize);
    return true;
  }
  case ParamInit::Kind::Normal: {
    SplitMix64 rng(seed, decl.name);
    for (size_t i = 0; i < count; i += 2) {
      double u1 = 1.0 - rng.uniform(); // (0, 1]: log is finite.
      double u2 = rng.uniform();
      double r = std::sqrt(-2.0 * deterministicLog(u1));
      double s, co;
      deterministicSinCos2Pi(u2, s, co);
      storeElement(affine(init.a, init.b, r * co), elt,
                   bytes.data() + i * eltSize);
      if (i + 1 < count)
        storeElement(affine(init.a, init.b, r * s), elt,
                     bytes.data() + (i + 1) * eltSize);
    }
    return true;
  }
  case ParamInit::Kind::File:
    break;
  }
  return true;
}

bool Importer::materializeParameters(std::vector<ParameterTensor> &out) {
  // Refuse, rather than die in the allocator, when the parameters cannot fit
  // in this machine's memory.
  uint64_t total = 0;
  for (const TensorDecl &d : parameters) {
    // Saturating: a hostile shape must not wrap around to a small size.
    uint64_t count = static_cast<uint64_t>(d.type.getNumElements());
    uint64_t eltBytes = d.type.getElementTypeBitWidth() / 8;
    uint64_t bytes =
        count > UINT64_MAX / eltBytes ? UINT64_MAX : count * eltBytes;
    total = bytes > UINT64_MAX - total ? UINT64_MAX : total + bytes;
  }
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  if (pages > 0 && pageSize > 0) {
    uint64_t physical =
        static_cast<uint64_t>(pages) * static_cast<uint64_t>(pageSize);
    if (total > physical) {
      error(StringRef("/parameters"))
          << "the parameters need " << total << " bytes, more than this "
          << "machine's memory (" << physical << " bytes)";
      return false;
    }
  }
#endif
  for (const TensorDecl &d : parameters) {
    ParameterTensor t{d.name, d.type, {}};
    try {
      fillParameter(d, t.data);
    } catch (const std::bad_alloc &) {
      error(d.pointer) << "parameter '" << d.name << "': out of memory for "
                       << formatType(d.type);
      return false;
    }
    out.push_back(std::move(t));
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

OwningOpRef<ModuleOp> Importer::run() {
  ctx.loadDialect<LoomDialect, func::FuncDialect>();
  if (!loadAndParse())
    return nullptr;
  if (!root.is_object()) {
    error(StringRef("")) << "expected a JSON object at the top level, got "
                         << describe(root);
    return nullptr;
  }
  checkHeader();
  readTensorDecls(/*isParam=*/false);
  readTensorDecls(/*isParam=*/true);
  readNodes();
  readOutputs();
  if (hadError)
    return nullptr;
  resolveNames();
  if (hadError)
    return nullptr;
  sortNodes();
  if (hadError)
    return nullptr;

  OwningOpRef<ModuleOp> module = buildModule();
  if (!module || hadError)
    return nullptr;

  // Verify, naming the node of every failing op.
  std::vector<CapturedDiag> diags;
  LogicalResult verified =
      capture(diags, [&] { return verify(module->getOperation()); });
  llvm::StringMap<std::string> opOfNode;
  for (const NodeDecl &n : nodes)
    opOfNode[n.id] = n.op;
  for (const CapturedDiag &d : diags) {
    std::string prefix;
    if (auto name = dyn_cast<NameLoc>(d.loc)) {
      auto op = opOfNode.find(name.getName().getValue());
      if (op != opOfNode.end())
        prefix = "node '" + op->getKey().str() + "': " + op->second + ": ";
    }
    reemit(d, prefix);
  }
  if (failed(verified) || hadError)
    return nullptr;

  std::vector<ParameterTensor> tensors;
  if (!materializeParameters(tensors))
    return nullptr;
  for (ParameterTensor &t : tensors)
    params.add(std::move(t));
  return module;
}

} // namespace

OwningOpRef<ModuleOp> loom::importJsonGraph(StringRef path,
                                            MLIRContext &context,
                                            ParameterStore &params) {
  Location fallback = FileLineColLoc::get(&context, path, 0, 0);
  try {
    Importer importer(path, context, params);
    return importer.run();
  } catch (const std::bad_alloc &) {
    emitError(fallback) << "out of memory while importing the graph";
  } catch (const std::exception &e) {
    emitError(fallback) << "internal error while importing the graph: "
                        << e.what();
  } catch (...) {
    emitError(fallback) << "internal error while importing the graph";
  }
  return nullptr;
}
