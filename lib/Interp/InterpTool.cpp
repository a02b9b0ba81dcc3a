//===- InterpTool.cpp - The loom-interp command line ----------------------===//
//
// Parses a .mlir file, binds the arguments of one function (inputs from .npy
// files, parameters and optimizer state from a safetensors file, the dropout
// seed from --seed), runs the reference interpreter and writes every result
// as DIR/<name>.npy. Every mismatch between what the IR expects and what the
// user gave is an error naming the argument, the expected and the given type.
//
//===----------------------------------------------------------------------===//

#include "loom/Import/Import.h"
#include "loom/Interp/InterpTool.h"

#include "loom/InitAll.h"
#include "loom/Interp/Interpreter.h"
#include "loomrt/Npy.h"
#include "loomrt/Safetensors.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

#include <cstring>
#include <map>
#include <optional>

using namespace mlir;
namespace cl = llvm::cl;
using loom::interp::Tensor;
using loomrt::DType;
using loom::kBufferAttr;
using loom::kGradAttr;
using loom::kInputAttr;
using loom::kOptStateAttr;
using loom::kOutputAttr;
using loom::kParamAttr;
using loom::kParamsFileAttr;
using loom::kRngSeedAttr;

namespace {

struct ToolOptions {
  cl::OptionCategory category{"loom-interp options"};
  cl::opt<std::string> input{cl::Positional, cl::desc("<file.mlir>"),
                             cl::Required, cl::cat(category)};
  cl::opt<std::string> entry{"entry", cl::desc("Function to run"),
                             cl::value_desc("name"), cl::init("forward"),
                             cl::cat(category)};
  cl::list<std::string> inputs{
      "input",
      cl::desc("Binds an argument to a .npy file: NAME is the argument's "
               "loom.input name, or its position in the function's argument "
               "list (repeatable)"),
      cl::value_desc("name=file.npy"), cl::cat(category)};
  cl::opt<std::string> outputDir{
      "output-dir",
      cl::desc("Directory the results are written to (created "
               "if missing)"),
      cl::value_desc("dir"), cl::Required, cl::cat(category)};
  cl::opt<std::string> params{
      "params",
      cl::desc("Safetensors file holding the loom.param and loom.opt_state "
               "arguments. Default: the module's loom.params_file, relative "
               "to the .mlir file's directory"),
      cl::value_desc("file.safetensors"), cl::cat(category)};
  cl::opt<long long> seed{"seed",
                          cl::desc("Value of the loom.rng_seed argument"),
                          cl::init(0), cl::cat(category)};
  cl::opt<bool> f64{"f64",
                    cl::desc("Keep every float in double precision; float "
                             "results are written as float64"),
                    cl::cat(category)};
};

//===----------------------------------------------------------------------===//
// Element types and bytes
//===----------------------------------------------------------------------===//

std::optional<Type> mlirType(DType dtype, MLIRContext *ctx) {
  Builder b(ctx);
  switch (dtype) {
  case DType::F64:
    return b.getF64Type();
  case DType::F32:
    return b.getF32Type();
  case DType::F16:
    return b.getF16Type();
  case DType::BF16:
    return b.getBF16Type();
  case DType::I64:
    return b.getI64Type();
  case DType::I32:
    return b.getI32Type();
  case DType::I16:
    return b.getIntegerType(16);
  case DType::I8:
    return b.getI8Type();
  case DType::U8:
    return b.getIntegerType(8, /*isSigned=*/false);
  case DType::Bool:
    return b.getI1Type();
  }
  return std::nullopt;
}

/// The dtype a result of element type `type` is written as. bf16 has no
/// NumPy type and is widened (exactly) to f32; with --f64 every float is
/// written as f64.
DType npyDTypeFor(Type type, bool f64) {
  if (isa<FloatType>(type) && f64)
    return DType::F64;
  if (type.isF64())
    return DType::F64;
  if (type.isF16())
    return DType::F16;
  if (type.isF32() || type.isBF16())
    return DType::F32;
  if (type.isInteger(1))
    return DType::Bool;
  if (type.isInteger(8))
    return DType::I8;
  if (type.isInteger(16))
    return DType::I16;
  if (type.isInteger(32))
    return DType::I32;
  return DType::I64;
}

double halfToDouble(uint16_t bits, const llvm::fltSemantics &sem) {
  llvm::APFloat f(sem, llvm::APInt(16, bits));
  bool losesInfo = false;
  f.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven,
            &losesInfo);
  return f.convertToDouble();
}

uint16_t doubleToHalf(double v, const llvm::fltSemantics &sem) {
  llvm::APFloat f(v);
  bool losesInfo = false;
  f.convert(sem, llvm::APFloat::rmNearestTiesToEven, &losesInfo);
  return static_cast<uint16_t>(f.bitcastToAPInt().getZExtValue());
}

template <typename T> T load(const uint8_t *p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T> void store(uint8_t *p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

std::vector<double> decode(DType dtype, const uint8_t *bytes, size_t count) {
  std::vector<double> out(count);
  size_t size = loomrt::dtypeSize(dtype);
  for (size_t i = 0; i < count; ++i) {
    const uint8_t *p = bytes + i * size;
    switch (dtype) {
    case DType::F64:
      out[i] = load<double>(p);
      break;
    case DType::F32:
      out[i] = load<float>(p);
      break;
    case DType::F16:
      out[i] = halfToDouble(load<uint16_t>(p), llvm::APFloat::IEEEhalf());
      break;
    case DType::BF16:
      out[i] = halfToDouble(load<uint16_t>(p), llvm::APFloat::BFloat());
      break;
    case DType::I64:
      out[i] = static_cast<double>(load<int64_t>(p));
      break;
    case DType::I32:
      out[i] = load<int32_t>(p);
      break;
    case DType::I16:
      out[i] = load<int16_t>(p);
      break;
    case DType::I8:
      out[i] = load<int8_t>(p);
      break;
    case DType::U8:
      out[i] = load<uint8_t>(p);
      break;
    case DType::Bool:
      out[i] = load<uint8_t>(p) != 0 ? 1 : 0;
      break;
    }
  }
  return out;
}

loomrt::NpyArray encode(const Tensor &t, DType dtype) {
  loomrt::NpyArray array;
  array.dtype = dtype;
  array.shape.assign(t.type.getShape().begin(), t.type.getShape().end());
  size_t size = loomrt::dtypeSize(dtype);
  array.data.resize(t.data.size() * size);
  for (size_t i = 0; i < t.data.size(); ++i) {
    uint8_t *p = array.data.data() + i * size;
    double v = t.data[i];
    switch (dtype) {
    case DType::F64:
      store<double>(p, v);
      break;
    case DType::F32:
      store<float>(p, static_cast<float>(v));
      break;
    case DType::F16:
      store<uint16_t>(p, doubleToHalf(v, llvm::APFloat::IEEEhalf()));
      break;
    case DType::BF16:
      store<uint16_t>(p, doubleToHalf(v, llvm::APFloat::BFloat()));
      break;
    case DType::I64:
      store<int64_t>(p, static_cast<int64_t>(v));
      break;
    case DType::I32:
      store<int32_t>(p, static_cast<int32_t>(v));
      break;
    case DType::I16:
      store<int16_t>(p, static_cast<int16_t>(v));
      break;
    case DType::I8:
      store<int8_t>(p, static_cast<int8_t>(v));
      break;
    case DType::U8:
      store<uint8_t>(p, static_cast<uint8_t>(v));
      break;
    case DType::Bool:
      store<uint8_t>(p, v != 0 ? 1 : 0);
      break;
    }
  }
  return array;
}

std::string typeString(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << type;
  return s;
}

/// The tensor type a file's array has, spelled like the IR's types.
std::string givenTypeString(DType dtype, llvm::ArrayRef<int64_t> shape,
                            MLIRContext *ctx) {
  std::optional<Type> element = mlirType(dtype, ctx);
  if (!element)
    return "an array of an unknown dtype";
  return typeString(RankedTensorType::get(shape, *element));
}

/// Replaces every character but [A-Za-z0-9._-] with '_' ("/fc1/out" gives
/// "_fc1_out"), so an output name is always one file name inside DIR.
std::string sanitize(llvm::StringRef name) {
  std::string s;
  for (char c : name)
    s += (llvm::isAlnum(c) || c == '.' || c == '_' || c == '-') ? c : '_';
  if (s.empty() || s == "." || s == "..")
    s = "_" + s;
  return s;
}

//===----------------------------------------------------------------------===//
// The tool
//===----------------------------------------------------------------------===//

class InterpTool {
public:
  InterpTool(ToolOptions &opts, MLIRContext &ctx) : opts(opts), ctx(ctx) {}
  int run();

private:
  /// Prints "loom-interp: error: MSG" and returns 1.
  int fail(const llvm::Twine &message) {
    llvm::errs() << "loom-interp: error: " << message << "\n";
    return 1;
  }
  /// How argument `i` is called in messages: "argument 0 'x' (loom.input)".
  std::string describeArg(unsigned i);
  /// Checks `dtype`/`shape` against argument `i` and converts. `from` names
  /// the source in messages.
  std::optional<Tensor> bindArray(unsigned i, DType dtype,
                                  llvm::ArrayRef<int64_t> shape,
                                  const uint8_t *bytes, size_t nbytes,
                                  const std::string &from);
  int bindParams(std::vector<std::optional<Tensor>> &args);
  int writeResults(const std::vector<Tensor> &results, const std::string &dir);
  /// Argument `i`'s type, or for a rank's shard (loom.shard), the whole
  /// tensor's: values are bound whole and each rank takes its block.
  RankedTensorType wholeType(unsigned i);
  /// Rank `rank`'s value of argument `i` from the value bound to it.
  Tensor rankValue(unsigned i, int64_t rank, const Tensor &whole);

  ToolOptions &opts;
  MLIRContext &ctx;
  OwningOpRef<ModuleOp> module;
  func::FuncOp func;
};

std::string InterpTool::describeArg(unsigned i) {
  std::string s = "argument " + std::to_string(i);
  for (llvm::StringRef attr :
       {kInputAttr, kParamAttr, kBufferAttr, kOptStateAttr})
    if (auto name = func.getArgAttrOfType<StringAttr>(i, attr))
      return s + " '" + name.getValue().str() + "' (" + attr.str() + ")";
  if (func.getArgAttr(i, kRngSeedAttr))
    return s + " (" + kRngSeedAttr.str() + ")";
  return s;
}

RankedTensorType InterpTool::wholeType(unsigned i) {
  auto type = cast<RankedTensorType>(func.getArgument(i).getType());
  if (auto shard = func.getArgAttrOfType<DictionaryAttr>(i, loom::kShardAttr))
    if (auto shape = shard.getAs<DenseI64ArrayAttr>("shape"))
      return RankedTensorType::get(shape.asArrayRef(), type.getElementType());
  return type;
}

Tensor InterpTool::rankValue(unsigned i, int64_t rank, const Tensor &whole) {
  auto type = cast<RankedTensorType>(func.getArgument(i).getType());
  auto shard = func.getArgAttrOfType<DictionaryAttr>(i, loom::kShardAttr);
  auto axis = shard ? shard.getAs<StringAttr>("axis") : StringAttr();
  if (!axis || whole.type == type)
    return whole;
  int64_t coord = loom::interp::meshCoordinate(func, rank, axis.getValue());
  if (auto dim = shard.getAs<IntegerAttr>("dim")) {
    // Along `dim`: block `coord` of each of `groups` groups (tensor
    // parallelism's split).
    auto groupsAttr = shard.getAs<IntegerAttr>("groups");
    int64_t groups = groupsAttr ? groupsAttr.getInt() : 1;
    int64_t d = dim.getInt();
    ArrayRef<int64_t> full = whole.type.getShape();
    int64_t outer = 1, inner = 1;
    for (int64_t k = 0; k < d; ++k)
      outer *= full[k];
    for (int64_t k = d + 1; k < static_cast<int64_t>(full.size()); ++k)
      inner *= full[k];
    int64_t local = type.getDimSize(d), perGroup = local / groups;
    int64_t groupSize = full[d] / groups;
    Tensor t{type, std::vector<double>(type.getNumElements(), 0.0)};
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < local; ++j) {
        int64_t src = (j / perGroup) * groupSize + coord * perGroup +
                      j % perGroup;
        for (int64_t k = 0; k < inner; ++k)
          t.data[(o * local + j) * inner + k] =
              whole.data[(o * full[d] + src) * inner + k];
      }
    return t;
  }
  // Block r of the whole tensor flattened and zero-padded (loom.shard).
  size_t block = static_cast<size_t>(type.getNumElements());
  size_t begin = block * coord;
  Tensor t{type, std::vector<double>(block, 0.0)};
  for (size_t k = 0; k < block && begin + k < whole.data.size(); ++k)
    t.data[k] = whole.data[begin + k];
  return t;
}

std::optional<Tensor> InterpTool::bindArray(unsigned i, DType dtype,
                                            llvm::ArrayRef<int64_t> shape,
                                            const uint8_t *bytes, size_t nbytes,
                                            const std::string &from) {
  auto expected = wholeType(i);
  std::optional<Type> given = mlirType(dtype, &ctx);
  bool typeOk =
      given &&
      (*given == expected.getElementType() ||
       (isa<FloatType>(*given) && isa<FloatType>(expected.getElementType())));
  if (!typeOk || shape != expected.getShape()) {
    fail(describeArg(i) + " of @" + func.getSymName() + " expects " +
         typeString(expected) + ", given " +
         givenTypeString(dtype, shape, &ctx) + " from " + from);
    return std::nullopt;
  }
  size_t count = static_cast<size_t>(expected.getNumElements());
  if (nbytes != count * loomrt::dtypeSize(dtype)) {
    fail(from + ": holds " + std::to_string(nbytes) + " bytes, expected " +
         std::to_string(count * loomrt::dtypeSize(dtype)));
    return std::nullopt;
  }
  return Tensor{expected, decode(dtype, bytes, count)};
}

int InterpTool::bindParams(std::vector<std::optional<Tensor>> &args) {
  SmallVector<unsigned> wanted;
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (!args[i] &&
        (func.getArgAttr(i, kParamAttr) || func.getArgAttr(i, kBufferAttr) ||
         func.getArgAttr(i, kOptStateAttr)))
      wanted.push_back(i);
  if (wanted.empty())
    return 0;

  std::string path = opts.params;
  if (path.empty()) {
    auto attr = (*module)->getAttrOfType<StringAttr>(kParamsFileAttr);
    if (!attr)
      return fail(describeArg(wanted.front()) + " of @" + func.getSymName() +
                  " has no value: the module names no parameter file (" +
                  kParamsFileAttr + "); pass --params FILE");
    llvm::SmallString<256> p(llvm::sys::path::parent_path(opts.input));
    llvm::sys::path::append(p, attr.getValue());
    path = std::string(p);
  }
  std::string error;
  std::unique_ptr<loomrt::SafetensorsFile> file =
      loomrt::SafetensorsFile::open(path, &error);
  if (!file)
    return fail("cannot read the parameter file: " + error);
  for (unsigned i : wanted) {
    StringAttr name;
    for (llvm::StringRef attr : {kParamAttr, kBufferAttr, kOptStateAttr})
      if (!name)
        name = func.getArgAttrOfType<StringAttr>(i, attr);
    if (!name)
      return fail(describeArg(i) + " of @" + func.getSymName() +
                  ": its loom.param/loom.buffer/loom.opt_state attribute is "
                  "not a string");
    const loomrt::TensorView *view = file->find(name.getValue());
    if (!view)
      return fail(describeArg(i) + " of @" + func.getSymName() +
                  " has no value: " + path + " holds no tensor '" +
                  name.getValue().str() + "'");
    args[i] = bindArray(i, view->dtype, view->shape, view->data, view->nbytes,
                        path + " tensor '" + view->name + "'");
    if (!args[i])
      return 1;
  }
  return 0;
}

int InterpTool::writeResults(const std::vector<Tensor> &results,
                             const std::string &dir) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return fail("cannot create the output directory '" + dir +
                "': " + ec.message());
  llvm::StringSet<> used;
  for (auto [i, result] : llvm::enumerate(results)) {
    std::string name;
    if (auto attr = func.getResultAttrOfType<StringAttr>(i, kOutputAttr))
      name = sanitize(attr.getValue());
    else if (auto attr = func.getResultAttrOfType<StringAttr>(i, kGradAttr))
      name = sanitize(attr.getValue());
    else if (auto attr = func.getResultAttrOfType<StringAttr>(i, kBufferAttr))
      name = sanitize(attr.getValue());
    else
      name = "result" + std::to_string(i);
    // Two names that sanitize alike must not overwrite each other.
    if (!used.insert(name).second)
      name += "_" + std::to_string(i);
    used.insert(name);
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, name + ".npy");
    loomrt::NpyArray array =
        encode(result, npyDTypeFor(result.type.getElementType(), opts.f64));
    std::string error;
    if (!loomrt::writeNpy(std::string(path), array, &error))
      return fail("cannot write result " + std::to_string(i) + ": " + error);
  }
  return 0;
}

int InterpTool::run() {
  // Parse with the file's own source manager so diagnostics, including the
  // interpreter's, point at lines of the .mlir file.
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &ctx);
  auto buffer = llvm::MemoryBuffer::getFileOrSTDIN(opts.input);
  if (!buffer)
    return fail("cannot read '" + opts.input +
                "': " + buffer.getError().message());
  sourceMgr.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
  module = parseSourceFile<ModuleOp>(sourceMgr, &ctx);
  if (!module)
    return fail("cannot parse '" + opts.input + "'");

  func = module->lookupSymbol<func::FuncOp>(opts.entry);
  if (!func || func.isExternal()) {
    std::string names;
    for (auto f : module->getOps<func::FuncOp>())
      if (!f.isExternal())
        names += (names.empty() ? "@" : ", @") + f.getSymName().str();
    return fail("no function @" + opts.entry + " in '" + opts.input +
                "' (functions: " + (names.empty() ? "none" : names) + ")");
  }
  unsigned numArgs = func.getNumArguments();
  for (unsigned i = 0; i < numArgs; ++i) {
    auto type = dyn_cast<RankedTensorType>(func.getArgument(i).getType());
    if (!type || !type.hasStaticShape())
      return fail(describeArg(i) + " of @" + func.getSymName() + " has type " +
                  typeString(func.getArgument(i).getType()) +
                  ": only statically shaped tensors can be bound");
  }

  // --input NAME=FILE: by loom.input name, else by argument position.
  std::vector<std::optional<Tensor>> args(numArgs);
  llvm::StringMap<unsigned> inputIndex;
  for (unsigned i = 0; i < numArgs; ++i)
    if (auto name = func.getArgAttrOfType<StringAttr>(i, kInputAttr))
      inputIndex.try_emplace(name.getValue(), i);
  // NAME@R=FILE binds rank R's argument only (a mesh of several ranks).
  int64_t numRanks = loom::interp::meshSize(func);
  std::map<std::pair<int64_t, unsigned>, Tensor> rankArgs;
  for (const std::string &binding : opts.inputs) {
    auto [name, path] = llvm::StringRef(binding).split('=');
    std::optional<int64_t> forRank;
    if (auto [base, r] = name.rsplit('@'); !r.empty() && r != name) {
      int64_t rank = -1;
      if (r.getAsInteger(10, rank) || rank < 0 || rank >= numRanks)
        return fail("--input " + binding + ": '" + r.str() +
                    "' is not a rank of the module's mesh (0 to " +
                    std::to_string(numRanks - 1) + ")");
      forRank = rank;
      name = base;
    }
    if (name.empty() || path.empty()) {
      llvm::errs() << "loom-interp: error: --input expects NAME=FILE.npy, got '"
                   << binding << "'\n";
      return 2;
    }
    unsigned index;
    auto it = inputIndex.find(name);
    if (it != inputIndex.end()) {
      index = it->second;
    } else if (!name.getAsInteger(10, index)) {
      if (index >= numArgs)
        return fail("--input " + binding + ": @" + func.getSymName() + " has " +
                    std::to_string(numArgs) + " arguments");
    } else {
      std::string names;
      for (unsigned i = 0; i < numArgs; ++i)
        if (auto n = func.getArgAttrOfType<StringAttr>(i, kInputAttr))
          names += (names.empty() ? "'" : ", '") + n.getValue().str() + "'";
      return fail("--input " + binding + ": @" + func.getSymName() +
                  " has no argument marked loom.input = \"" + name.str() +
                  "\" (inputs: " + (names.empty() ? "none" : names) + ")");
    }
    bool bound = forRank ? rankArgs.count({*forRank, index}) != 0
                         : args[index].has_value();
    if (bound)
      return fail("--input " + binding + ": " + describeArg(index) +
                  " is bound twice");
    std::string error;
    std::optional<loomrt::NpyArray> array = loomrt::readNpy(path.str(), &error);
    if (!array)
      return fail("cannot read input for " + describeArg(index) + ": " + error);
    std::optional<Tensor> t =
        bindArray(index, array->dtype, array->shape, array->data.data(),
                  array->data.size(), path.str());
    if (!t)
      return 1;
    if (forRank)
      rankArgs[{*forRank, index}] = std::move(*t);
    else
      args[index] = std::move(*t);
  }

  // The dropout seed.
  for (unsigned i = 0; i < numArgs; ++i) {
    if (args[i] || !func.getArgAttr(i, kRngSeedAttr))
      continue;
    auto type = cast<RankedTensorType>(func.getArgument(i).getType());
    if (type.getRank() != 0 || !type.getElementType().isInteger(64))
      return fail(describeArg(i) + " of @" + func.getSymName() + " has type " +
                  typeString(type) + ", expected tensor<i64>");
    args[i] = Tensor{type, {static_cast<double>(opts.seed.getValue())}};
  }

  // An argument every rank binds for itself needs nothing else.
  for (unsigned i = 0; i < numArgs; ++i) {
    bool everyRank = true;
    for (int64_t r = 0; r < numRanks && everyRank; ++r)
      everyRank = rankArgs.count({r, i}) != 0;
    if (!args[i] && everyRank)
      args[i] = rankArgs[{0, i}];
  }
  if (int rc = bindParams(args))
    return rc;
  std::vector<std::vector<Tensor>> bound(numRanks);
  for (int64_t r = 0; r < numRanks; ++r)
    for (unsigned i = 0; i < numArgs; ++i) {
      auto own = rankArgs.find({r, i});
      if (own != rankArgs.end()) {
        bound[r].push_back(own->second);
        continue;
      }
      if (!args[i]) {
        std::string how = func.getArgAttr(i, kInputAttr)
                              ? "pass --input NAME=FILE.npy"
                              : "pass --input " + std::to_string(i) +
                                    "=FILE.npy";
        return fail(describeArg(i) + " of @" + func.getSymName() +
                    " has no value" +
                    (numRanks > 1 ? " on rank " + std::to_string(r) : "") +
                    " (" + how + ")");
      }
      bound[r].push_back(rankValue(i, r, *args[i]));
    }

  loom::interp::Options options;
  options.f64 = opts.f64;
  if (numRanks == 1) {
    FailureOr<std::vector<Tensor>> results =
        loom::interp::run(func, bound[0], options);
    if (failed(results))
      return fail("running @" + func.getSymName() + " failed");
    return writeResults(*results, opts.outputDir);
  }
  FailureOr<std::vector<std::vector<Tensor>>> results =
      loom::interp::runRanks(func, bound, options);
  if (failed(results))
    return fail("running @" + func.getSymName() + " on " +
                std::to_string(numRanks) + " ranks failed");
  for (int64_t r = 0; r < numRanks; ++r) {
    llvm::SmallString<256> dir(opts.outputDir);
    llvm::sys::path::append(dir, "rank" + std::to_string(r));
    if (int rc = writeResults((*results)[r], std::string(dir)))
      return rc;
  }
  return 0;
}

} // namespace

int loom::interp::interpMain(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  ToolOptions opts;
  mlir::registerMLIRContextCLOptions();
  mlir::registerAsmPrinterCLOptions();
  cl::HideUnrelatedOptions({&opts.category});
  cl::ParseCommandLineOptions(
      argc, argv,
      "loom-interp: the reference interpreter of the loom dialect\n\n"
      "  loom-interp FILE.mlir [--entry=NAME] --input NAME=FILE.npy ...\n"
      "              --output-dir DIR [--params FILE.safetensors] [--seed N]\n"
      "              [--f64]\n\n"
      "A module with a mesh (loom.mesh_axes, loom.mesh_shape: loomc --dp)\n"
      "runs every rank, each on a thread, the collectives combining their\n"
      "values; --input NAME@R=FILE.npy binds rank R's argument only, and\n"
      "rank R's results go to DIR/rankR/.\n\n"
      "Runs one function with plain loops and writes each result to\n"
      "DIR/<name>.npy, <name> being the result's loom.output, loom.grad\n"
      "or loom.buffer name (characters other than [A-Za-z0-9._-] become\n"
      "'_'), else result<i>. Arguments: loom.input ones from --input;\n"
      "loom.param, loom.buffer and loom.opt_state ones from the safetensors\n"
      "file; loom.rng_seed from --seed. Float arrays of another float\n"
      "dtype are converted; bf16 results are written as float32 (NumPy has\n"
      "no bf16).\n");

  DialectRegistry registry;
  loom::registerAllDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // The location and the op's source line say which op failed; the generic
  // form of the op would only repeat it.
  context.printOpOnDiagnostic(false);
  InterpTool tool(opts, context);
  return tool.run();
}
