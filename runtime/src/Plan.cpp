//===- Plan.cpp - Parse and validate plan.json ----------------------------===//
//
// Validation happens here, once, so that executing a plan needs no checks:
// every field is type-checked (a string where a number belongs, 1.5, -3 or
// 1e300 is an error, never a crash), every size is overflow-checked, every
// buffer id, offset, GEMM extent and copy size is proven to stay inside the
// arena. Errors are thrown internally as PlanError and turned into the
// caller's message at the API boundary.
//
//===----------------------------------------------------------------------===//

#include "loomrt/Plan.h"

#include "GradCompression.h"
#include "PlanPipeline.h"
#include "Support.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <sys/stat.h>

namespace loomrt {

std::string detail::fieldWhere(const std::string &where, const char *key) {
  return where + ": field '" + key + "'";
}

const char *detail::typeName(const nlohmann::json &value) {
  if (value.is_number_integer())
    return "integer";
  if (value.is_number_float())
    return "non-integer number";
  return value.type_name();
}

using detail::ErrorSink;
using detail::fieldWhere;
using detail::typeName;
using detail::quoteName;
using json = nlohmann::json;

namespace {

struct PlanError {
  ErrorCode code;
  std::string message;
};

[[noreturn]] void fail(const std::string &where, const std::string &message,
                       ErrorCode code = ErrorCode::Format) {
  throw PlanError{code, where + ": " + message};
}

const json &requireObject(const json &value, const std::string &where) {
  if (!value.is_object())
    fail(where, std::string("expected an object, got ") + typeName(value));
  return value;
}

/// The member `key` of the object `obj`; missing is an error.
const json &member(const json &obj, const char *key, const std::string &where) {
  auto it = obj.find(key);
  if (it == obj.end())
    fail(where, std::string("missing field '") + key + "'");
  return *it;
}

/// A non-negative integer no larger than `max`. Floats (even 2.0), negative
/// numbers and numbers too large for uint64 (parsed as floats) are refused.
uint64_t getUint(const json &obj, const char *key, const std::string &where,
                 uint64_t max = std::numeric_limits<uint64_t>::max()) {
  const json &value = member(obj, key, where);
  std::string at = fieldWhere(where, key);
  if (!value.is_number_integer())
    fail(at, std::string("expected a non-negative integer, got ") +
                 typeName(value));
  uint64_t result;
  if (value.is_number_unsigned()) {
    result = value.get<uint64_t>();
  } else {
    int64_t signedValue = value.get<int64_t>();
    if (signedValue < 0)
      fail(at, "expected a non-negative integer, got " +
                   std::to_string(signedValue));
    result = static_cast<uint64_t>(signedValue);
  }
  if (result > max)
    fail(at,
         std::to_string(result) + " exceeds the limit " + std::to_string(max));
  return result;
}

/// An integer (possibly negative) that fits int64.
int64_t getInt(const json &obj, const char *key, const std::string &where) {
  const json &value = member(obj, key, where);
  std::string at = fieldWhere(where, key);
  if (!value.is_number_integer())
    fail(at, std::string("expected an integer, got ") + typeName(value));
  if (value.is_number_unsigned()) {
    uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(at, std::to_string(u) + " is too large");
    return static_cast<int64_t>(u);
  }
  return value.get<int64_t>();
}

const std::string &getString(const json &obj, const char *key,
                             const std::string &where) {
  const json &value = member(obj, key, where);
  if (!value.is_string())
    fail(fieldWhere(where, key),
         std::string("expected a string, got ") + typeName(value));
  return value.get_ref<const std::string &>();
}

bool getBool(const json &obj, const char *key, const std::string &where) {
  const json &value = member(obj, key, where);
  if (!value.is_boolean())
    fail(fieldWhere(where, key),
         std::string("expected true or false, got ") + typeName(value));
  return value.get<bool>();
}

/// A string, or "" when the field is null (or absent, if `optional`).
std::string getFileName(const json &obj, const char *key,
                        const std::string &where, bool optional) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (optional)
      return std::string();
    fail(where, std::string("missing field '") + key + "'");
  }
  if (it->is_null())
    return std::string();
  if (!it->is_string())
    fail(fieldWhere(where, key),
         std::string("expected a file name or null, got ") + typeName(*it));
  const std::string &name = it->get_ref<const std::string &>();
  if (!isPlainFileName(name))
    fail(fieldWhere(where, key),
         quoteName(name) + " is not a plain file name inside the artifact "
                           "directory (no '/', no '..', no control bytes)");
  return name;
}

bool isSymbolName(const std::string &name) {
  if (name.empty() || name.size() > 1024)
    return false;
  auto alpha = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  };
  if (!alpha(name[0]))
    return false;
  return std::all_of(name.begin(), name.end(), [&](char c) {
    return alpha(c) || (c >= '0' && c <= '9');
  });
}

/// Valid UTF-8 without control bytes: names end up in messages, metrics and
/// file names.
bool isCleanName(const std::string &name) {
  if (name.empty() || name.size() > 4096 || !detail::isValidUtf8(name))
    return false;
  return std::none_of(name.begin(), name.end(), [](char c) {
    auto byte = static_cast<unsigned char>(c);
    return byte < 0x20 || byte == 0x7f;
  });
}

uint32_t getBufferId(const json &obj, const char *key, const std::string &where,
                     const PlanEntry &entry) {
  uint64_t id = getUint(obj, key, where);
  if (id >= entry.buffers.size())
    fail(fieldWhere(where, key), "buffer id " + std::to_string(id) +
                                     " is out of range (the entry has " +
                                     std::to_string(entry.buffers.size()) +
                                     " buffers)");
  return static_cast<uint32_t>(id);
}

bool overlaps(const PlanBuffer &x, const PlanBuffer &y) {
  if (x.bytes == 0 || y.bytes == 0)
    return false;
  return x.offset < y.offset + y.bytes && y.offset < x.offset + x.bytes;
}

std::string describe(DType dtype, const std::vector<int64_t> &shape) {
  return std::string(dtypeToShortName(dtype)) + " " +
         detail::formatShape(shape);
}

/// A dimension list: at most 64 non-negative integers that fit int64.
std::vector<int64_t> getShape(const json &value, const char *key,
                              const std::string &where) {
  const json &shape = member(value, key, where);
  if (!shape.is_array())
    fail(fieldWhere(where, key),
         std::string("expected an array of dimensions, got ") +
             typeName(shape));
  if (shape.size() > 64)
    fail(fieldWhere(where, key),
         "rank " + std::to_string(shape.size()) + " exceeds 64");
  std::vector<int64_t> dims;
  for (size_t i = 0; i < shape.size(); ++i) {
    const json &dim = shape[i];
    if (!dim.is_number_integer() ||
        (!dim.is_number_unsigned() && dim.get<int64_t>() < 0) ||
        (dim.is_number_unsigned() &&
         dim.get<uint64_t>() >
             static_cast<uint64_t>(std::numeric_limits<int64_t>::max())))
      fail(fieldWhere(where, key),
           "dimension " + std::to_string(i) +
               " is not a non-negative integer that fits int64");
    dims.push_back(dim.get<int64_t>());
  }
  return dims;
}

PlanBuffer parseBuffer(const json &value, const std::string &where,
                       uint64_t arenaBytes) {
  requireObject(value, where);
  PlanBuffer buffer;
  buffer.offset = getUint(value, "offset", where);
  if (buffer.offset % kBufferAlignment != 0)
    fail(fieldWhere(where, "offset"), std::to_string(buffer.offset) +
                                          " is not a multiple of " +
                                          std::to_string(kBufferAlignment));
  const std::string &dtypeName = getString(value, "dtype", where);
  std::optional<DType> dtype = dtypeFromShortName(dtypeName);
  if (!dtype)
    fail(fieldWhere(where, "dtype"),
         "unknown dtype " + quoteName(dtypeName) +
             " (expected f64, f32, f16, bf16, i64, i32, i16, i8, ui8 or bool)");
  buffer.dtype = *dtype;
  buffer.shape = getShape(value, "shape", where);
  std::optional<uint64_t> bytes = checkedByteSize(buffer.dtype, buffer.shape);
  std::optional<int64_t> elements = checkedNumElements(buffer.shape);
  if (!bytes || !elements)
    fail(fieldWhere(where, "shape"),
         detail::formatShape(buffer.shape) + " overflows a 64-bit byte size");
  buffer.bytes = *bytes;
  buffer.elements = static_cast<uint64_t>(*elements);
  if (buffer.bytes > arenaBytes || buffer.offset > arenaBytes - buffer.bytes)
    fail(where, "bytes [" + std::to_string(buffer.offset) + ", " +
                    (buffer.offset >
                             std::numeric_limits<uint64_t>::max() - buffer.bytes
                         ? std::string("overflow")
                         : std::to_string(buffer.offset + buffer.bytes)) +
                    ") exceed arena_bytes " + std::to_string(arenaBytes));
  return buffer;
}

/// The mesh axis `key` of `value` names (collective steps, shards).
uint32_t getAxis(const json &value, const char *key, const std::string &where,
                 const Plan &plan, const char *user) {
  const std::string &axis = getString(value, key, where);
  if (!plan.mesh)
    fail(fieldWhere(where, key), std::string(user) + " over axis " +
                                     quoteName(axis) +
                                     ", but the plan has no mesh");
  int index = plan.mesh->axisIndex(axis);
  if (index < 0) {
    std::string axes;
    for (const std::string &a : plan.mesh->axes)
      axes += (axes.empty() ? "" : ", ") + a;
    fail(fieldWhere(where, key),
         quoteName(axis) + " is not an axis of the mesh (" + axes + ")");
  }
  return static_cast<uint32_t>(index);
}

/// A binding's optional `shard`: the buffer is this rank's [k] slice of a
/// tensor of `shape`, k = ceil(product(shape) / ranks); or, with `dim`
/// (and `groups`), the rank's blocks along that dimension.
std::optional<BindingShard> parseShard(const json &value,
                                       const std::string &where,
                                       const Binding &binding,
                                       const Plan &plan) {
  auto it = value.find("shard");
  if (it == value.end() || it->is_null())
    return std::nullopt;
  requireObject(*it, fieldWhere(where, "shard"));
  std::string at = where + ": shard";
  BindingShard shard;
  shard.axisIndex = getAxis(*it, "axis", at, plan, "a shard");
  shard.axis = plan.mesh->axes[shard.axisIndex];
  shard.ranks = plan.mesh->shape[shard.axisIndex];
  shard.shape = getShape(*it, "shape", at);
  std::optional<uint64_t> bytes = checkedByteSize(binding.dtype, shard.shape);
  if (!bytes)
    fail(fieldWhere(at, "shape"),
         detail::formatShape(shard.shape) + " overflows a 64-bit byte size");
  shard.elements = static_cast<uint64_t>(*checkedNumElements(shard.shape));
  uint64_t n = static_cast<uint64_t>(shard.ranks);
  auto present = [&](const char *key) {
    auto field = it->find(key);
    return field != it->end() && !field->is_null();
  };
  if (present("groups") && !present("dim"))
    fail(fieldWhere(at, "groups"),
         "groups without 'dim': only a shard along a dimension has groups");
  if (present("dim")) {
    shard.dim = getInt(*it, "dim", at);
    int64_t rank = static_cast<int64_t>(shard.shape.size());
    if (shard.dim < 0 || shard.dim >= rank)
      fail(fieldWhere(at, "dim"),
           std::to_string(shard.dim) + " is not a dimension of " +
               detail::formatShape(shard.shape) +
               (rank == 0
                    ? std::string(" (a 0-D tensor has none)")
                    : " (expected 0 to " + std::to_string(rank - 1) + ")"));
    if (present("groups")) {
      shard.groups = getInt(*it, "groups", at);
      if (shard.groups < 1)
        fail(fieldWhere(at, "groups"),
             "expected at least 1 group, got " + std::to_string(shard.groups));
    }
    // groups * ranks divides D: groups divides D, and ranks D / groups
    // (no product that could overflow).
    int64_t size = shard.shape[static_cast<size_t>(shard.dim)];
    if (size % shard.groups != 0 || (size / shard.groups) % shard.ranks != 0)
      fail(fieldWhere(at, "dim"),
           "dimension " + std::to_string(shard.dim) + " of " +
               detail::formatShape(shard.shape) + " (" + std::to_string(size) +
               ") does not split into " + std::to_string(shard.groups) +
               (shard.groups == 1 ? " group" : " groups") + " of " +
               std::to_string(n) + " equal blocks (one per rank of " +
               shard.axis + ")");
    std::vector<int64_t> local = shard.shape;
    local[static_cast<size_t>(shard.dim)] = size / shard.ranks;
    if (binding.shape != local)
      fail(fieldWhere(where, "shard"),
           quoteName(binding.name) + " is " +
               describe(binding.dtype, binding.shape) + ", but a shard of " +
               detail::formatShape(shard.shape) + " along dim " +
               std::to_string(shard.dim) + " over " + shard.axis + " (" +
               std::to_string(n) + " ranks) is " + detail::formatShape(local));
    return shard;
  }
  uint64_t k = shard.elements / n + (shard.elements % n != 0);
  if (binding.shape != std::vector<int64_t>{static_cast<int64_t>(k)})
    fail(fieldWhere(where, "shard"),
         quoteName(binding.name) + " is " +
             describe(binding.dtype, binding.shape) + ", but a shard of " +
             detail::formatShape(shard.shape) + " over " + shard.axis + " (" +
             std::to_string(n) + " ranks) is [" + std::to_string(k) +
             "] (ceil(" + std::to_string(shard.elements) + " / " +
             std::to_string(n) + "))");
  return shard;
}

bool sameShard(const std::optional<BindingShard> &a,
               const std::optional<BindingShard> &b) {
  if (!a || !b)
    return !a && !b;
  return a->axisIndex == b->axisIndex && a->shape == b->shape &&
         a->dim == b->dim && a->groups == b->groups;
}

bool isIntegerDType(DType d) {
  return d == DType::I64 || d == DType::I32 || d == DType::I16 ||
         d == DType::I8 || d == DType::U8;
}

/// An input's optional `checks`: [{min, max, ignore?, op}], only on an
/// integer input, min < max.
std::vector<InputCheck> parseInputChecks(const json &value,
                                         const std::string &where,
                                         const Binding &binding) {
  std::vector<InputCheck> checks;
  auto it = value.find("checks");
  if (it == value.end() || it->is_null())
    return checks;
  std::string at = fieldWhere(where, "checks");
  if (!it->is_array())
    fail(at, std::string("expected an array, got ") + it->type_name());
  if (binding.kind != BindingKind::Input || !isIntegerDType(binding.dtype))
    fail(at, "only an integer input has checks, not " +
                 describe(binding.dtype, binding.shape));
  for (size_t i = 0; i < it->size(); ++i) {
    const json &c = (*it)[i];
    std::string cat = at + "[" + std::to_string(i) + "]";
    requireObject(c, cat);
    InputCheck check;
    check.min = getInt(c, "min", cat);
    check.max = getInt(c, "max", cat);
    if (check.min >= check.max)
      fail(cat, "min " + std::to_string(check.min) + " is not below max " +
                    std::to_string(check.max));
    if (c.contains("ignore"))
      check.ignore = getInt(c, "ignore", cat);
    check.op = getString(c, "op", cat);
    checks.push_back(std::move(check));
  }
  return checks;
}

Binding parseBinding(const json &value, const std::string &where,
                     const PlanEntry &entry, const Plan &plan, bool isInput) {
  requireObject(value, where);
  Binding binding;
  binding.name = getString(value, "name", where);
  if (!isCleanName(binding.name))
    fail(fieldWhere(where, "name"),
         quoteName(binding.name) +
             " is not a valid name (non-empty UTF-8 without control bytes)");
  const std::string &kind = getString(value, "kind", where);
  if (isInput) {
    if (kind == "param")
      binding.kind = BindingKind::Param;
    else if (kind == "state")
      binding.kind = BindingKind::State;
    else if (kind == "buffer")
      binding.kind = BindingKind::Buffer;
    else if (kind == "input")
      binding.kind = BindingKind::Input;
    else
      fail(fieldWhere(where, "kind"),
           "unknown input kind " + quoteName(kind) +
               " (expected param, buffer, state or input)");
  } else {
    if (kind == "output")
      binding.kind = BindingKind::Output;
    else if (kind == "grad")
      binding.kind = BindingKind::Grad;
    else
      fail(fieldWhere(where, "kind"), "unknown output kind " + quoteName(kind) +
                                          " (expected output or grad)");
  }
  binding.buffer = getBufferId(value, "buffer", where, entry);
  const PlanBuffer &buffer = entry.buffers[binding.buffer];
  binding.dtype = buffer.dtype;
  binding.shape = buffer.shape;
  binding.bytes = buffer.bytes;
  binding.shard = parseShard(value, where, binding, plan);
  if (isInput)
    binding.checks = parseInputChecks(value, where, binding);
  return binding;
}

void checkScalarI64(const Binding &binding, const std::string &where) {
  if (binding.dtype != DType::I64 || !binding.shape.empty())
    fail(where, quoteName(binding.name) +
                    " must be a 0-D i64 (training convention), got " +
                    describe(binding.dtype, binding.shape));
}

/// `grid`, `block` and `shared_bytes` of a CUDA kernel step: the limits every
/// CUDA device since sm_30 has (grid x < 2^31, y and z <= 65535; block x and y
/// <= 1024, z <= 64, at most 1024 threads).
KernelLaunchDims parseLaunchDims(const json &value, const std::string &where) {
  KernelLaunchDims dims;
  auto triple = [&](const char *key, uint32_t *out, const uint64_t *max) {
    const json &list = member(value, key, where);
    std::string at = fieldWhere(where, key);
    if (!list.is_array() || list.size() != 3)
      fail(at,
           std::string("expected an array of 3 integers, got ") +
               (list.is_array() ? "an array of " + std::to_string(list.size())
                                : std::string(typeName(list))));
    static const char *axis[3] = {"x", "y", "z"};
    for (size_t i = 0; i < 3; ++i) {
      const json &v = list[i];
      if (!v.is_number_integer() ||
          (!v.is_number_unsigned() && v.get<int64_t>() < 0))
        fail(at, std::string(axis[i]) + ": expected a positive integer, got " +
                     typeName(v));
      uint64_t n = v.get<uint64_t>();
      if (n == 0 || n > max[i])
        fail(at, std::string(axis[i]) + " = " + std::to_string(n) +
                     " is outside [1, " + std::to_string(max[i]) + "]");
      out[i] = static_cast<uint32_t>(n);
    }
  };
  static const uint64_t gridMax[3] = {2147483647, 65535, 65535};
  static const uint64_t blockMax[3] = {1024, 1024, 64};
  triple("grid", dims.grid, gridMax);
  triple("block", dims.block, blockMax);
  uint64_t threads = uint64_t(dims.block[0]) * dims.block[1] * dims.block[2];
  if (threads > 1024)
    fail(fieldWhere(where, "block"),
         std::to_string(dims.block[0]) + " x " + std::to_string(dims.block[1]) +
             " x " + std::to_string(dims.block[2]) + " = " +
             std::to_string(threads) +
             " threads per block, more than the 1024 CUDA allows");
  dims.sharedBytes = static_cast<uint32_t>(
      getUint(value, "shared_bytes", where, kMaxSharedBytes));
  return dims;
}

/// `count` integers of `key`, each at least `min`.
void getInts(const json &value, const char *key, const std::string &where,
             size_t count, int64_t min, int64_t *out) {
  const json &list = member(value, key, where);
  std::string at = fieldWhere(where, key);
  if (!list.is_array() || list.size() != count)
    fail(at, "expected an array of " + std::to_string(count) +
                 " integers, got " +
                 (list.is_array() ? "an array of " + std::to_string(list.size())
                                  : std::string(typeName(list))));
  for (size_t i = 0; i < count; ++i) {
    // Bounded so that every product below fits in 64 bits.
    if (!list[i].is_number_integer() || list[i].get<int64_t>() < min ||
        list[i].get<int64_t>() > (int64_t(1) << 24))
      fail(at, "element " + std::to_string(i) + ": expected an integer in [" +
                   std::to_string(min) + ", 2^24]");
    out[i] = list[i].get<int64_t>();
  }
}

/// A conv step: the three buffers are dense f32 NCHW (or, with layout
/// nhwc, NHWC) / OIHW tensors whose shapes agree with the geometry, and the one written overlaps neither
/// operand.
void parseConvStep(const json &value, const std::string &where,
                   const PlanEntry &entry, const Plan &plan, ConvStep &c) {
  if (plan.target != "cpu")
    fail(fieldWhere(where, "kind"),
         "conv steps run on the CPU target only (this plan's target is " +
             quoteName(plan.target) + ")");
  const std::string &direction = getString(value, "direction", where);
  static const ConvDirection all[] = {ConvDirection::Forward,
                                      ConvDirection::BackwardData,
                                      ConvDirection::BackwardWeights};
  bool known = false;
  for (ConvDirection d : all)
    if (direction == convDirectionName(d)) {
      c.direction = d;
      known = true;
    }
  if (!known)
    fail(fieldWhere(where, "direction"),
         "unknown direction " + quoteName(direction) +
             " (expected forward, backward_data or backward_weights)");
  c.x = getBufferId(value, "x", where, entry);
  c.w = getBufferId(value, "w", where, entry);
  c.y = getBufferId(value, "y", where, entry);
  getInts(value, "strides", where, 2, 1, c.strides);
  getInts(value, "padding", where, 4, 0, c.padding);
  getInts(value, "dilations", where, 2, 1, c.dilations);
  c.groups = static_cast<int64_t>(
      getUint(value, "groups", where, uint64_t(1) << 24));
  if (c.groups == 0)
    fail(fieldWhere(where, "groups"), "must be at least 1");
  if (value.contains("layout")) {
    const std::string &layout = getString(value, "layout", where);
    if (layout != "nchw" && layout != "nhwc")
      fail(fieldWhere(where, "layout"),
           "unknown layout " + quoteName(layout) + " (expected nchw or nhwc)");
    c.channelsLast = layout == "nhwc";
    if (c.channelsLast && c.groups != 1)
      fail(fieldWhere(where, "layout"),
           "an nhwc conv step has one group, this one " +
               std::to_string(c.groups));
  }
  const char *names[3] = {"x", "w", "y"};
  const PlanBuffer *bufs[3] = {&entry.buffers[c.x], &entry.buffers[c.w],
                               &entry.buffers[c.y]};
  uint32_t ids[3] = {c.x, c.w, c.y};
  for (int i = 0; i < 3; ++i) {
    if (bufs[i]->dtype != DType::F32 || bufs[i]->shape.size() != 4)
      fail(fieldWhere(where, names[i]),
           "buffer " + std::to_string(ids[i]) + " is " +
               describe(bufs[i]->dtype, bufs[i]->shape) +
               "; conv steps take rank-4 f32 tensors");
  }
  // x and y as NCHW whatever their layout.
  auto nchw = [&](const std::vector<int64_t> &s) {
    return c.channelsLast ? std::vector<int64_t>{s[0], s[3], s[1], s[2]} : s;
  };
  const std::vector<int64_t> x = nchw(bufs[0]->shape), &w = bufs[1]->shape,
                             y = nchw(bufs[2]->shape);
  auto mismatch = [&](const char *key, const std::string &why) {
    fail(fieldWhere(where, key),
         "shapes " + describe(DType::F32, x) + " (x), " +
             describe(DType::F32, w) + " (w) and " + describe(DType::F32, y) +
             " (y) do not agree: " + why);
  };
  if (y[0] != x[0])
    mismatch("y", "the batch sizes differ");
  if (w[0] != y[1])
    mismatch("w", "w has " + std::to_string(w[0]) +
                      " output channels, y has " + std::to_string(y[1]));
  if (x[1] % c.groups != 0 || w[0] % c.groups != 0 ||
      w[1] != x[1] / c.groups)
    mismatch("groups", "with " + std::to_string(c.groups) +
                           " groups, w's dimension 1 must be x's channels / "
                           "groups, and both channel counts divisible by it");
  for (int d = 0; d < 2; ++d) {
    int64_t span = (w[2 + d] - 1) * c.dilations[d] + 1;
    int64_t padded = x[2 + d] + c.padding[d] + c.padding[d + 2];
    int64_t out = padded < span ? 0 : (padded - span) / c.strides[d] + 1;
    if (out != y[2 + d])
      mismatch("y", std::string(d ? "width" : "height") + " " +
                        std::to_string(y[2 + d]) + ", the geometry gives " +
                        std::to_string(out));
  }
  const PlanBuffer &written =
      *bufs[c.direction == ConvDirection::Forward        ? 2
             : c.direction == ConvDirection::BackwardData ? 0
                                                          : 1];
  for (int i = 0; i < 3; ++i)
    if (bufs[i] != &written && overlaps(*bufs[i], written))
      fail(fieldWhere(where, names[i]),
           "buffer " + std::to_string(ids[i]) +
               " overlaps the buffer the step writes");
}

/// A fused step's `direction` (attention, linear_cross_entropy): true for
/// "backward", false for "forward", an error naming the field otherwise.
bool parseBackwardDirection(const json &value, const std::string &where) {
  const std::string &direction = getString(value, "direction", where);
  if (direction != "forward" && direction != "backward")
    fail(fieldWhere(where, "direction"), "unknown direction " +
                                             quoteName(direction) +
                                             " (expected forward or backward)");
  return direction == "backward";
}

/// Whether `key` is given and not null.
bool hasField(const json &value, const char *key) {
  auto it = value.find(key);
  return it != value.end() && !it->is_null();
}

/// An attention step (docs/plan-format.md, `attention`): q [B, Hq, T, D],
/// k [B, Hkv, S, D], v [B, Hkv, S, Dv], out [B, Hq, T, Dv] and lse
/// [B, Hq, T] agree, Hkv divides Hq, the optional mask and bias broadcast
/// to [B, Hq, T, S], the backward's gradients have their tensors' shapes,
/// and no buffer the step writes overlaps another it touches.
void parseAttentionStep(const json &value, const std::string &where,
                        const PlanEntry &entry, AttentionStep &a) {
  const bool backward = parseBackwardDirection(value, where);
  a.direction = backward ? AttentionDirection::Backward
                         : AttentionDirection::Forward;
  auto present = [&](const char *key) { return hasField(value, key); };
  a.q = getBufferId(value, "q", where, entry);
  a.k = getBufferId(value, "k", where, entry);
  a.v = getBufferId(value, "v", where, entry);
  a.out = getBufferId(value, "out", where, entry);
  a.lse = getBufferId(value, "lse", where, entry);
  struct Grad {
    const char *key;
    uint32_t *id;
  };
  for (Grad g : {Grad{"dout", &a.dout}, Grad{"dq", &a.dq}, Grad{"dk", &a.dk},
                 Grad{"dv", &a.dv}}) {
    if (backward)
      *g.id = getBufferId(value, g.key, where, entry);
    else if (present(g.key))
      fail(fieldWhere(where, g.key),
           "given, but only a backward attention step has it");
  }
  if (present("mask"))
    a.mask = getBufferId(value, "mask", where, entry);
  if (present("bias"))
    a.bias = getBufferId(value, "bias", where, entry);
  if (present("segments"))
    a.segments = getBufferId(value, "segments", where, entry);
  if (present("seed"))
    a.seed = getBufferId(value, "seed", where, entry);
  if (present("dropout")) {
    const json &d = member(value, "dropout", where);
    if (!d.is_number())
      fail(fieldWhere(where, "dropout"),
           std::string("expected a number, got ") + typeName(d));
    a.dropout = d.get<float>();
  }
  if (present("stream"))
    a.stream = getInt(value, "stream", where);
  if (present("dbias")) {
    if (!backward)
      fail(fieldWhere(where, "dbias"),
           "given, but only a backward attention step has it");
    if (!a.bias)
      fail(fieldWhere(where, "dbias"),
           "given, but the step has no 'bias' to differentiate");
    a.dbias = getBufferId(value, "dbias", where, entry);
  }
  const json &scale = member(value, "scale", where);
  if (!scale.is_number() || !std::isfinite(scale.get<double>()))
    fail(fieldWhere(where, "scale"),
         std::string("expected a finite number, got ") +
             (scale.is_number() ? scale.dump() : typeName(scale)));
  a.scale = scale.get<double>();
  a.causal = getBool(value, "causal", where);
  a.window = getInt(value, "window", where);
  if (a.window < 0)
    fail(fieldWhere(where, "window"),
         "expected 0 (no window) or a positive number of keys, got " +
             std::to_string(a.window));
  if (a.window > 0 && !a.causal)
    fail(fieldWhere(where, "window"),
         "a window of " + std::to_string(a.window) +
             " keys needs a causal step ('causal': true)");

  auto buffer = [&](uint32_t id) -> const PlanBuffer & {
    return entry.buffers[id];
  };
  auto text = [&](uint32_t id) {
    return "buffer " + std::to_string(id) + " is " +
           describe(buffer(id).dtype, buffer(id).shape);
  };
  // The float tensors: one dtype, f32 for now (a bf16 step, f32 inside,
  // would accept bf16 here and compare every tensor with q's dtype).
  std::vector<std::pair<const char *, uint32_t>> floats = {
      {"q", a.q}, {"k", a.k}, {"v", a.v}, {"out", a.out}};
  if (backward)
    for (auto g : {std::make_pair("dout", a.dout), std::make_pair("dq", a.dq),
                   std::make_pair("dk", a.dk), std::make_pair("dv", a.dv)})
      floats.push_back(g);
  if (a.bias)
    floats.push_back({"bias", *a.bias});
  if (a.dbias)
    floats.push_back({"dbias", *a.dbias});
  for (const auto &[key, id] : floats)
    if (buffer(id).dtype != DType::F32)
      fail(fieldWhere(where, key),
           text(id) + "; attention steps take f32 tensors in this runtime");
  // Ranks, then the sizes they name.
  auto rank = [&](const char *key, uint32_t id, size_t want,
                  const char *layout) {
    if (buffer(id).shape.size() != want)
      fail(fieldWhere(where, key), text(id) + "; an attention step's " + key +
                                       " is rank " + std::to_string(want) +
                                       " " + layout);
  };
  rank("q", a.q, 4, "[B, Hq, T, D]");
  rank("k", a.k, 4, "[B, Hkv, S, D]");
  rank("v", a.v, 4, "[B, Hkv, S, Dv]");
  rank("out", a.out, 4, "[B, Hq, T, Dv]");
  const std::vector<int64_t> &q = buffer(a.q).shape, &k = buffer(a.k).shape,
                             &v = buffer(a.v).shape;
  const int64_t B = q[0], Hq = q[1], T = q[2], D = q[3];
  const int64_t Hkv = k[1], S = k[2], Dv = v[3];
  auto disagree = [&](const char *key, uint32_t id, const std::string &why) {
    fail(fieldWhere(where, key),
         text(id) + ", q is " + describe(buffer(a.q).dtype, q) + ": " + why);
  };
  if (k[0] != B)
    disagree("k", a.k, "the batch sizes differ");
  if (Hkv < 1)
    disagree("k", a.k, "no key/value heads");
  if (Hq % Hkv != 0)
    disagree("k", a.k,
             std::to_string(Hkv) + " key/value heads do not divide " +
                 std::to_string(Hq) +
                 " query heads (each key/value head serves Hq / Hkv query "
                 "heads)");
  if (k[3] != D)
    disagree("k", a.k,
             "k's head size " + std::to_string(k[3]) + " is not q's " +
                 std::to_string(D));
  if (v[0] != B || v[1] != Hkv || v[2] != S)
    fail(fieldWhere(where, "v"),
         text(a.v) + ", k is " + describe(buffer(a.k).dtype, k) +
             ": v must be [B, Hkv, S, Dv] = [" + std::to_string(B) + ", " +
             std::to_string(Hkv) + ", " + std::to_string(S) + ", Dv]");
  auto exactly = [&](const char *key, uint32_t id,
                     const std::vector<int64_t> &shape, const char *what) {
    if (buffer(id).shape != shape)
      fail(fieldWhere(where, key), text(id) + "; expected " +
                                       detail::formatShape(shape) + " (" +
                                       what + ")");
  };
  exactly("out", a.out, {B, Hq, T, Dv}, "[B, Hq, T, Dv]");
  if (buffer(a.lse).dtype != DType::F32)
    fail(fieldWhere(where, "lse"),
         text(a.lse) + "; an attention step's lse is f32 [B, Hq, T] "
                       "(whatever the tensors' dtype)");
  exactly("lse", a.lse, {B, Hq, T}, "[B, Hq, T]");
  if (backward) {
    exactly("dout", a.dout, buffer(a.out).shape, "out's shape");
    exactly("dq", a.dq, q, "q's shape");
    exactly("dk", a.dk, k, "k's shape");
    exactly("dv", a.dv, v, "v's shape");
  }
  // mask and bias: rank 4, each dimension 1 or [B, Hq, T, S]'s.
  const int64_t scores[4] = {B, Hq, T, S};
  auto broadcasts = [&](const char *key, uint32_t id) {
    const std::vector<int64_t> &shape = buffer(id).shape;
    bool ok = shape.size() == 4;
    for (size_t d = 0; ok && d < 4; ++d)
      ok = shape[d] == 1 || shape[d] == scores[d];
    if (!ok)
      fail(fieldWhere(where, key),
           text(id) +
               "; expected rank 4 broadcasting to the scores [B, Hq, "
               "T, S] = " +
               detail::formatShape({B, Hq, T, S}) +
               " (each dimension 1 or the scores')");
  };
  if (a.mask) {
    if (buffer(*a.mask).dtype != DType::Bool)
      fail(fieldWhere(where, "mask"),
           text(*a.mask) + "; an attention mask is bool (true: may attend)");
    broadcasts("mask", *a.mask);
  }
  if (a.bias)
    broadcasts("bias", *a.bias);
  if (a.dbias)
    exactly("dbias", *a.dbias, buffer(*a.bias).shape, "bias's shape");
  if (a.segments) {
    DType st = buffer(*a.segments).dtype;
    if (st != DType::I64 && st != DType::I32)
      fail(fieldWhere(where, "segments"),
           text(*a.segments) + "; document ids are i64 or i32");
    exactly("segments", *a.segments, {B, T}, "[B, T]");
    if (T != S)
      fail(fieldWhere(where, "segments"),
           "document ids need as many queries as keys, q has T = " +
               std::to_string(T) + " and k S = " + std::to_string(S));
  }
  if (a.causal && T != S)
    fail(fieldWhere(where, "causal"),
         "a causal step needs as many queries as keys, q has T = " +
             std::to_string(T) + " and k S = " + std::to_string(S));
  if (a.seed) {
    if (buffer(*a.seed).dtype != DType::I64 || !buffer(*a.seed).shape.empty())
      fail(fieldWhere(where, "seed"),
           text(*a.seed) + "; a dropout seed is i64 []");
    if (!(a.dropout > 0.0f && a.dropout < 1.0f))
      fail(fieldWhere(where, "dropout"),
           "expected a ratio in (0, 1) with a seed, got " +
               std::to_string(a.dropout));
  } else if (a.dropout != 0.0f) {
    fail(fieldWhere(where, "dropout"),
         "a dropout ratio needs a 'seed' buffer to draw its mask from");
  }

  // What the step writes overlaps nothing else it touches (not even
  // another of its outputs).
  std::vector<std::pair<const char *, uint32_t>> writes,
      touched = {
          {"q", a.q}, {"k", a.k}, {"v", a.v}, {"out", a.out}, {"lse", a.lse}};
  if (backward) {
    writes = {{"dq", a.dq}, {"dk", a.dk}, {"dv", a.dv}};
    if (a.dbias)
      writes.push_back({"dbias", *a.dbias});
    touched.push_back({"dout", a.dout});
  } else {
    writes = {{"out", a.out}, {"lse", a.lse}};
  }
  if (a.mask)
    touched.push_back({"mask", *a.mask});
  if (a.bias)
    touched.push_back({"bias", *a.bias});
  if (a.segments)
    touched.push_back({"segments", *a.segments});
  touched.insert(touched.end(), writes.begin(), writes.end());
  for (const auto &[wkey, wid] : writes)
    for (const auto &[key, id] : touched) {
      if (key == wkey)
        continue;
      if (overlaps(buffer(id), buffer(wid)))
        fail(fieldWhere(where, key), "buffer " + std::to_string(id) +
                                         " overlaps buffer " +
                                         std::to_string(wid) + " ('" + wkey +
                                         "'), which the step writes");
    }
}

/// A linear_cross_entropy step (docs/plan-format.md,
/// `linear_cross_entropy`): x [N, C], w [V, C] (transpose_w) or [C, V],
/// labels [N] (i64 or i32), lse [N], the loss [] or [N] as the reduction
/// says, the backward's gradients of x's and w's shapes; everything but
/// the labels f32; nothing the step writes overlapping another buffer it
/// names. `where` names the step and its node.
void parseLinearCrossEntropyStep(const json &value, const std::string &where,
                                 const PlanEntry &entry,
                                 LinearCrossEntropyStep &l) {
  using Direction = LinearCrossEntropyDirection;
  using Reduction = LinearCrossEntropyReduction;
  const bool backward = parseBackwardDirection(value, where);
  l.direction = backward ? Direction::Backward : Direction::Forward;
  auto present = [&](const char *key) { return hasField(value, key); };
  l.x = getBufferId(value, "x", where, entry);
  l.w = getBufferId(value, "w", where, entry);
  l.labels = getBufferId(value, "labels", where, entry);
  l.lse = getBufferId(value, "lse", where, entry);
  struct Field {
    const char *key;
    uint32_t *id;
    bool wanted;
  };
  for (Field f :
       {Field{"loss", &l.loss, !backward}, Field{"dloss", &l.dloss, backward},
        Field{"dx", &l.dx, backward}, Field{"dw", &l.dw, backward}}) {
    if (f.wanted)
      *f.id = getBufferId(value, f.key, where, entry);
    else if (present(f.key))
      fail(fieldWhere(where, f.key), std::string("given, but only a ") +
                                         (backward ? "forward" : "backward") +
                                         " linear_cross_entropy step has it");
  }
  l.transposeW = getBool(value, "transpose_w", where);
  const std::string &reduction = getString(value, "reduction", where);
  bool known = false;
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None})
    if (reduction == linearCrossEntropyReductionName(r)) {
      l.reduction = r;
      known = true;
    }
  if (!known)
    fail(fieldWhere(where, "reduction"), "unknown reduction " +
                                             quoteName(reduction) +
                                             " (expected mean, sum or none)");
  if (present("ignore_index"))
    l.ignoreIndex = getInt(value, "ignore_index", where);

  auto buffer = [&](uint32_t id) -> const PlanBuffer & {
    return entry.buffers[id];
  };
  auto text = [&](uint32_t id) {
    return "buffer " + std::to_string(id) + " is " +
           describe(buffer(id).dtype, buffer(id).shape);
  };
  std::vector<std::pair<const char *, uint32_t>> floats = {
      {"x", l.x}, {"w", l.w}, {"lse", l.lse}};
  if (backward)
    floats.insert(floats.end(),
                  {{"dloss", l.dloss}, {"dx", l.dx}, {"dw", l.dw}});
  else
    floats.push_back({"loss", l.loss});
  for (const auto &[key, id] : floats)
    if (buffer(id).dtype != DType::F32)
      fail(fieldWhere(where, key),
           text(id) +
               "; linear_cross_entropy steps take f32 tensors in this runtime");
  const PlanBuffer &labels = buffer(l.labels);
  if (labels.dtype != DType::I64 && labels.dtype != DType::I32)
    fail(fieldWhere(where, "labels"),
         text(l.labels) + "; the labels are i64 or i32 class indices");
  const std::vector<int64_t> &x = buffer(l.x).shape, &w = buffer(l.w).shape;
  if (x.size() != 2)
    fail(fieldWhere(where, "x"),
         text(l.x) + "; a linear_cross_entropy step's x is rank 2 [N, C]");
  const char *wLayout =
      l.transposeW ? "[V, C] (transpose_w)" : "[C, V] (transpose_w false)";
  const int64_t N = x[0], C = x[1];
  if (w.size() != 2 || (l.transposeW ? w[1] : w[0]) != C)
    fail(fieldWhere(where, "w"),
         text(l.w) + ", x is " + describe(buffer(l.x).dtype, x) +
             ": expected w " + wLayout + " with C = " + std::to_string(C));
  const int64_t V = l.transposeW ? w[0] : w[1];
  // The GEMMs take int dimensions and leading dimensions (CBLAS).
  const int64_t intMax = std::numeric_limits<int32_t>::max();
  if (C < 1 || V < 1)
    fail(fieldWhere(where, C < 1 ? "x" : "w"),
         text(C < 1 ? l.x : l.w) + "; a linear_cross_entropy step needs " +
             (C < 1 ? "at least one feature (C)" : "at least one class (V)"));
  if (N > intMax || C > intMax || V > intMax)
    fail(fieldWhere(where, N > intMax ? "x" : "w"),
         text(N > intMax ? l.x : l.w) +
             "; N, C and V must each fit a 32-bit int (the GEMMs')");
  auto exactly = [&](const char *key, uint32_t id,
                     const std::vector<int64_t> &shape,
                     const std::string &what) {
    if (buffer(id).shape != shape)
      fail(fieldWhere(where, key), text(id) + "; expected " +
                                       detail::formatShape(shape) + " (" +
                                       what + ")");
  };
  exactly("labels", l.labels, {N}, "[N], one label per row of x");
  exactly("lse", l.lse, {N}, "[N], one per row of x");
  const bool perRow = l.reduction == Reduction::None;
  const std::vector<int64_t> lossShape =
      perRow ? std::vector<int64_t>{N} : std::vector<int64_t>{};
  const std::string lossWhat = std::string("reduction ") +
                               linearCrossEntropyReductionName(l.reduction) +
                               (perRow ? ": one loss per row" : ": one scalar");
  if (backward) {
    exactly("dloss", l.dloss, lossShape, lossWhat);
    exactly("dx", l.dx, x, "x's shape");
    exactly("dw", l.dw, w, "w's shape");
  } else {
    exactly("loss", l.loss, lossShape, lossWhat);
  }

  // What the step writes overlaps nothing else it names (not even its
  // other output).
  std::vector<std::pair<const char *, uint32_t>> writes,
      touched = {{"x", l.x}, {"w", l.w}, {"labels", l.labels}};
  if (backward) {
    writes = {{"dx", l.dx}, {"dw", l.dw}};
    touched.insert(touched.end(), {{"lse", l.lse}, {"dloss", l.dloss}});
  } else {
    writes = {{"loss", l.loss}, {"lse", l.lse}};
  }
  touched.insert(touched.end(), writes.begin(), writes.end());
  for (const auto &[wkey, wid] : writes)
    for (const auto &[key, id] : touched) {
      if (key == wkey)
        continue;
      if (overlaps(buffer(id), buffer(wid)))
        fail(fieldWhere(where, key), "buffer " + std::to_string(id) +
                                         " overlaps buffer " +
                                         std::to_string(wid) + " ('" + wkey +
                                         "'), which the step writes");
    }
}

/// A step's optional `node` (gemm, conv): the model node of what it writes.
std::string getNode(const json &value, const char *key,
                    const std::string &where) {
  auto it = value.find(key);
  if (it == value.end() || it->is_null())
    return std::string();
  if (!it->is_string())
    fail(fieldWhere(where, key),
         std::string("expected a node name, got ") + typeName(*it));
  return it->get<std::string>();
}

/// A kernel step's optional `writes` (buffer ids among its `buffers`) and
/// `nodes` (one name per written buffer).
void parseWrites(const json &value, const std::string &where,
                 PlanStep &step) {
  auto w = value.find("writes");
  if (w == value.end() || w->is_null())
    return;
  if (!w->is_array())
    fail(fieldWhere(where, "writes"),
         std::string("expected an array of buffer ids, got ") + typeName(*w));
  for (size_t i = 0; i < w->size(); ++i) {
    const json &id = (*w)[i];
    std::string at =
        fieldWhere(where, "writes") + ": element " + std::to_string(i);
    if (!id.is_number_unsigned() ||
        std::find(step.buffers.begin(), step.buffers.end(),
                  id.get<uint64_t>()) == step.buffers.end())
      fail(at, "expected one of the step's buffers, got " + id.dump());
    step.writes.push_back(static_cast<uint32_t>(id.get<uint64_t>()));
  }
  auto n = value.find("nodes");
  if (n == value.end() || n->is_null()) {
    step.nodes.assign(step.writes.size(), std::string());
    return;
  }
  if (!n->is_array() || n->size() != step.writes.size())
    fail(fieldWhere(where, "nodes"),
         "expected an array of " + std::to_string(step.writes.size()) +
             " node names (one per written buffer)");
  for (const json &name : *n) {
    if (!name.is_string())
      fail(fieldWhere(where, "nodes"),
           std::string("expected node names, got ") + typeName(name));
    step.nodes.push_back(name.get<std::string>());
  }
}

/// A collective step: its op, reduction, axis, and two buffers whose
/// dtypes, element counts and bytes fit the op.
void parseCollectiveStep(const json &value, const std::string &where,
                         const PlanEntry &entry, const Plan &plan,
                         CollectiveStep &c) {
  const std::string &op = getString(value, "op", where);
  static const CollectiveOp ops[] = {
      CollectiveOp::AllReduce, CollectiveOp::ReduceScatter,
      CollectiveOp::AllGather, CollectiveOp::RankSlice};
  bool known = false;
  for (CollectiveOp o : ops)
    if (op == collectiveOpName(o)) {
      c.op = o;
      known = true;
    }
  if (!known)
    fail(fieldWhere(where, "op"),
         "unknown op " + quoteName(op) +
             " (expected all_reduce, reduce_scatter, all_gather or "
             "rank_slice)");
  const char *name = collectiveOpName(c.op);
  bool reduces =
      c.op == CollectiveOp::AllReduce || c.op == CollectiveOp::ReduceScatter;
  auto reduce = value.find("reduce");
  if (reduces) {
    const std::string &how = getString(value, "reduce", where);
    static const CollectiveReduce all[] = {
        CollectiveReduce::Sum, CollectiveReduce::Max, CollectiveReduce::Mean};
    for (CollectiveReduce r : all)
      if (how == collectiveReduceName(r))
        c.reduce = r;
    if (c.reduce == CollectiveReduce::None)
      fail(fieldWhere(where, "reduce"), "unknown reduction " + quoteName(how) +
                                            " (expected sum, max or mean)");
    if (c.op == CollectiveOp::ReduceScatter &&
        c.reduce == CollectiveReduce::Max)
      fail(fieldWhere(where, "reduce"),
           "reduce_scatter reduces by sum or mean, not max");
  } else if (reduce != value.end() && !reduce->is_null()) {
    fail(fieldWhere(where, "reduce"),
         std::string("given, but ") + name + " does not reduce");
  }
  c.axis = getAxis(value, "axis", where, plan, "a collective step");
  c.ranks = plan.mesh->shape[c.axis];
  if (auto grad = value.find("grad"); grad != value.end() && !grad->is_null()) {
    if (!grad->is_string())
      fail(fieldWhere(where, "grad"),
           std::string("expected a string, got ") + typeName(*grad));
    c.grad = grad->get<std::string>();
    if (c.grad.empty())
      fail(fieldWhere(where, "grad"),
           "empty (it names the parameter whose gradient the step reduces)");
    // Compression replaces a mean over the ranks, nothing else.
    if (!reduces || c.reduce != CollectiveReduce::Mean)
      fail(fieldWhere(where, "grad"),
           std::string("given on ") + (reduces ? "an " : "a ") + name +
               (reduces ? std::string(" ") + collectiveReduceName(c.reduce)
                        : std::string()) +
               "; only a mean all_reduce or reduce_scatter (a gradient's "
               "data-parallel reduction) names a gradient");
  }
  c.src = getBufferId(value, "src", where, entry);
  c.dst = getBufferId(value, "dst", where, entry);
  const PlanBuffer &src = entry.buffers[c.src];
  const PlanBuffer &dst = entry.buffers[c.dst];
  std::string srcText = "src buffer " + std::to_string(c.src);
  std::string dstText = "buffer " + std::to_string(c.dst);
  if (dst.dtype != src.dtype)
    fail(fieldWhere(where, "dst"),
         dstText + " has dtype " + std::string(dtypeToShortName(dst.dtype)) +
             ", " + srcText + " has " +
             std::string(dtypeToShortName(src.dtype)));
  bool isFloat = src.dtype == DType::F32 || src.dtype == DType::F64 ||
                 src.dtype == DType::F16 || src.dtype == DType::BF16;
  if (reduces && !isFloat)
    fail(fieldWhere(where, "src"),
         "buffer " + std::to_string(c.src) + " has dtype " +
             std::string(dtypeToShortName(src.dtype)) + "; " + name +
             " reduces f32, f64, f16 and bf16");
  // Element counts: n blocks of the smaller buffer make the larger one.
  uint64_t n = static_cast<uint64_t>(c.ranks);
  uint64_t small =
      c.op == CollectiveOp::AllGather ? src.elements : dst.elements;
  uint64_t large =
      c.op == CollectiveOp::AllGather ? dst.elements : src.elements;
  uint64_t expected = 0;
  bool overflow = c.op != CollectiveOp::AllReduce &&
                  __builtin_mul_overflow(small, n, &expected);
  if (c.op == CollectiveOp::AllReduce)
    expected = small;
  if (overflow || large != expected) {
    std::string rule =
        c.op == CollectiveOp::AllReduce
            ? "as many elements as src (" + std::to_string(src.elements) + ")"
        : c.op == CollectiveOp::AllGather
            ? std::to_string(n) + " (ranks of " + plan.mesh->axes[c.axis] +
                  ") * " + std::to_string(src.elements) + " (src) elements"
            : "1 / " + std::to_string(n) + " (ranks of " +
                  plan.mesh->axes[c.axis] + ") of src's " +
                  std::to_string(src.elements) + " elements";
    fail(fieldWhere(where, "dst"), dstText + " holds " +
                                       std::to_string(dst.elements) +
                                       " elements; " + name + " needs " + rule);
  }
  bool sameBytes = src.offset == dst.offset && src.bytes == dst.bytes;
  if (overlaps(src, dst) && !(c.op == CollectiveOp::AllReduce && sameBytes))
    fail(fieldWhere(where, "dst"),
         dstText + " overlaps " + srcText +
             (c.op == CollectiveOp::AllReduce
                  ? " without being the same bytes (an all_reduce runs in "
                    "place on one buffer, or between disjoint ones)"
                  : std::string(" (") + name + " needs disjoint buffers)"));
}

PlanStep parseStep(const json &value, const std::string &entryWhere,
                   size_t index, const PlanEntry &entry,
                   std::map<std::string, uint32_t> &symbols, Plan &plan) {
  std::string where = entryWhere + ": step " + std::to_string(index);
  requireObject(value, where);
  const std::string &kind = getString(value, "kind", where);
  PlanStep step;
  if (kind == "kernel") {
    where += " (kernel)";
    step.kind = PlanStep::Kind::Kernel;
    step.kernel = getString(value, "name", where);
    if (!isSymbolName(step.kernel))
      fail(fieldWhere(where, "name"),
           quoteName(step.kernel) + " is not a C identifier");
    const json &buffers = member(value, "buffers", where);
    if (!buffers.is_array())
      fail(fieldWhere(where, "buffers"),
           std::string("expected an array of buffer ids, got ") +
               typeName(buffers));
    if (buffers.size() > 65536)
      fail(fieldWhere(where, "buffers"), "more than 65536 buffers");
    for (size_t i = 0; i < buffers.size(); ++i) {
      const json &id = buffers[i];
      std::string at =
          fieldWhere(where, "buffers") + ": element " + std::to_string(i);
      if (!id.is_number_integer() ||
          (!id.is_number_unsigned() && id.get<int64_t>() < 0))
        fail(at, std::string("expected a buffer id, got ") + typeName(id));
      uint64_t raw = id.get<uint64_t>();
      if (raw >= entry.buffers.size())
        fail(at, "buffer id " + std::to_string(raw) +
                     " is out of range (the entry has " +
                     std::to_string(entry.buffers.size()) + " buffers)");
      step.buffers.push_back(static_cast<uint32_t>(raw));
    }
    parseWrites(value, where, step);
    if (plan.target == "cuda")
      step.launch = parseLaunchDims(value, where);
    auto [it, inserted] = symbols.emplace(
        step.kernel, static_cast<uint32_t>(plan.kernelSymbols.size()));
    if (inserted)
      plan.kernelSymbols.push_back(step.kernel);
    step.kernelIndex = it->second;
    return step;
  }
  if (kind == "gemm") {
    where += " (gemm)";
    step.kind = PlanStep::Kind::Gemm;
    GemmStep &g = step.gemm;
    g.a = getBufferId(value, "a", where, entry);
    g.b = getBufferId(value, "b", where, entry);
    g.c = getBufferId(value, "c", where, entry);
    // BLAS takes 32-bit dimensions and leading dimensions.
    constexpr uint64_t kMaxDim = std::numeric_limits<int32_t>::max();
    auto dim = [&](const char *key) {
      uint64_t v = getUint(value, key, where, kMaxDim);
      if (v == 0)
        fail(fieldWhere(where, key), "must be at least 1");
      return static_cast<int64_t>(v);
    };
    g.batch = dim("batch");
    g.m = dim("m");
    g.n = dim("n");
    g.k = dim("k");
    g.transA = getBool(value, "trans_a", where);
    g.transB = getBool(value, "trans_b", where);
    g.strideA = getUint(value, "stride_a", where);
    g.strideB = getUint(value, "stride_b", where);
    g.strideC = getUint(value, "stride_c", where);
    const PlanBuffer &a = entry.buffers[g.a];
    const PlanBuffer &b = entry.buffers[g.b];
    const PlanBuffer &c = entry.buffers[g.c];
    bool half = a.dtype == DType::BF16 || a.dtype == DType::F16;
    if (a.dtype != DType::F32 && a.dtype != DType::F64 && !half)
      fail(fieldWhere(where, "a"),
           "buffer " + std::to_string(g.a) + " has dtype " +
               std::string(dtypeToShortName(a.dtype)) +
               "; gemm supports f32, f64, bf16 and f16");
    if (b.dtype != a.dtype)
      fail(fieldWhere(where, "b"),
           "buffer " + std::to_string(g.b) + " has dtype " +
               std::string(dtypeToShortName(b.dtype)) + ", operand a has " +
               std::string(dtypeToShortName(a.dtype)));
    if (c.dtype != a.dtype)
      fail(fieldWhere(where, "c"),
           "buffer " + std::to_string(g.c) + " has dtype " +
               std::string(dtypeToShortName(c.dtype)) + ", operand a has " +
               std::string(dtypeToShortName(a.dtype)));
    // Elements the batch touches: stride * (batch - 1) + rows * cols.
    auto checkExtent = [&](const char *operand, const char *strideKey,
                           uint64_t stride, uint64_t rows, uint64_t cols,
                           const PlanBuffer &buffer, uint32_t id) {
      uint64_t span, last, total;
      bool overflow =
          __builtin_mul_overflow(stride, uint64_t(g.batch - 1), &span) ||
          __builtin_mul_overflow(rows, cols, &last) ||
          __builtin_add_overflow(span, last, &total);
      if (overflow || total > buffer.elements)
        fail(fieldWhere(where, g.batch > 1 ? strideKey : operand),
             std::string("operand ") + operand + " needs " +
                 (overflow ? std::string("more than 2^64")
                           : std::to_string(total)) +
                 " elements (" + strideKey + " " + std::to_string(stride) +
                 " * (batch " + std::to_string(g.batch) + " - 1) + " +
                 std::to_string(rows) + " * " + std::to_string(cols) +
                 ") but buffer " + std::to_string(id) + " holds " +
                 std::to_string(buffer.elements));
    };
    uint64_t m = g.m, n = g.n, k = g.k;
    checkExtent("a", "stride_a", g.strideA, m, k, a, g.a);
    checkExtent("b", "stride_b", g.strideB, k, n, b, g.b);
    checkExtent("c", "stride_c", g.strideC, m, n, c, g.c);
    // Each C_i must be written once: distinct, non-overlapping matrices.
    if (g.batch > 1 && g.strideC < m * n)
      fail(fieldWhere(where, "stride_c"),
           std::to_string(g.strideC) +
               " is less than m * n = " + std::to_string(m * n) +
               ": the batch's result matrices would overlap");
    if (overlaps(c, a) || overlaps(c, b))
      fail(fieldWhere(where, "c"),
           "buffer " + std::to_string(g.c) +
               " overlaps an operand (BLAS does not allow in-place gemm)");
    if (auto it = value.find("epilogue");
        half && it != value.end() && !it->is_null() &&
        !(it->is_string() && it->get<std::string>() == "none"))
      fail(fieldWhere(where, "epilogue"),
           std::string(dtypeToShortName(a.dtype)) +
               " gemm steps take no epilogue");
    if (auto it = value.find("epilogue"); it != value.end() && !it->is_null()) {
      if (!it->is_string())
        fail(fieldWhere(where, "epilogue"),
             std::string("expected a string, got ") + typeName(*it));
      const std::string &name = it->get_ref<const std::string &>();
      static const GemmEpilogue all[] = {
          GemmEpilogue::None, GemmEpilogue::Bias,     GemmEpilogue::Relu,
          GemmEpilogue::Gelu, GemmEpilogue::BiasRelu, GemmEpilogue::BiasGelu};
      bool known = false;
      for (GemmEpilogue e : all)
        if (name == gemmEpilogueName(e)) {
          g.epilogue = e;
          known = true;
        }
      if (!known)
        fail(fieldWhere(where, "epilogue"),
             "unknown epilogue " + quoteName(name) +
                 " (expected none, bias, relu, gelu, bias_relu or "
                 "bias_gelu)");
    }
    if (gemmEpilogueHasBias(g.epilogue)) {
      g.bias = getBufferId(value, "bias", where, entry);
      const PlanBuffer &bias = entry.buffers[g.bias];
      if (bias.dtype != a.dtype || bias.elements != n)
        fail(fieldWhere(where, "bias"),
             "buffer " + std::to_string(g.bias) + " is " +
                 describe(bias.dtype, bias.shape) + "; epilogue " +
                 quoteName(gemmEpilogueName(g.epilogue)) + " needs " +
                 std::to_string(n) + " " +
                 std::string(dtypeToShortName(a.dtype)) + " elements (n)");
      if (overlaps(bias, c))
        fail(fieldWhere(where, "bias"),
             "buffer " + std::to_string(g.bias) + " overlaps the result c");
    } else if (value.contains("bias") && !value["bias"].is_null()) {
      fail(fieldWhere(where, "bias"),
           "given, but epilogue " + quoteName(gemmEpilogueName(g.epilogue)) +
               " adds no bias");
    }
    step.writes = {g.c};
    step.nodes = {getNode(value, "node", where)};
    return step;
  }
  if (kind == "copy") {
    where += " (copy)";
    step.kind = PlanStep::Kind::Copy;
    step.src = getBufferId(value, "src", where, entry);
    step.dst = getBufferId(value, "dst", where, entry);
    const PlanBuffer &src = entry.buffers[step.src];
    const PlanBuffer &dst = entry.buffers[step.dst];
    if (src.bytes != dst.bytes)
      fail(fieldWhere(where, "dst"),
           "buffer " + std::to_string(step.dst) + " has " +
               std::to_string(dst.bytes) + " bytes, src buffer " +
               std::to_string(step.src) + " has " + std::to_string(src.bytes));
    if (src.offset != dst.offset && overlaps(src, dst))
      fail(fieldWhere(where, "dst"), "buffer " + std::to_string(step.dst) +
                                         " partially overlaps src buffer " +
                                         std::to_string(step.src));
    return step;
  }
  if (kind == "collective") {
    where += " (collective)";
    step.kind = PlanStep::Kind::Collective;
    parseCollectiveStep(value, where, entry, plan, step.collective);
    step.writes = {step.collective.dst};
    step.nodes = {getNode(value, "node", where)};
    return step;
  }
  if (kind == "conv") {
    where += " (conv)";
    step.kind = PlanStep::Kind::Conv;
    parseConvStep(value, where, entry, plan, step.conv);
    const ConvStep &c = step.conv;
    step.writes = {c.direction == ConvDirection::Forward        ? c.y
                   : c.direction == ConvDirection::BackwardData ? c.x
                                                                : c.w};
    step.nodes = {getNode(value, "node", where)};
    return step;
  }
  if (kind == "attention") {
    where += " (attention)";
    step.kind = PlanStep::Kind::Attention;
    parseAttentionStep(value, where, entry, step.attention);
    const AttentionStep &a = step.attention;
    if (a.direction == AttentionDirection::Forward) {
      step.writes = {a.out, a.lse};
    } else {
      step.writes = {a.dq, a.dk, a.dv};
      if (a.dbias)
        step.writes.push_back(*a.dbias);
    }
    step.nodes.assign(step.writes.size(), getNode(value, "node", where));
    return step;
  }
  if (kind == "linear_cross_entropy") {
    // Errors name the model node too: a model has several heads.
    std::string node =
        getNode(value, "node", where + " (linear_cross_entropy)");
    where += " (linear_cross_entropy" +
             (node.empty() ? std::string() : ", node " + quoteName(node)) + ")";
    step.kind = PlanStep::Kind::LinearCrossEntropy;
    LinearCrossEntropyStep &l = step.linearCrossEntropy;
    parseLinearCrossEntropyStep(value, where, entry, l);
    l.node = node;
    const std::vector<uint32_t> outputs =
        l.direction == LinearCrossEntropyDirection::Forward
            ? std::vector<uint32_t>{l.loss, l.lse}
            : std::vector<uint32_t>{l.dx, l.dw};
    // `writes` (optional): which of them --check-numerics checks.
    auto w = value.find("writes");
    if (w == value.end() || w->is_null()) {
      step.writes = outputs;
    } else {
      if (!w->is_array())
        fail(fieldWhere(where, "writes"),
             std::string("expected an array of buffer ids, got ") +
                 typeName(*w));
      for (size_t i = 0; i < w->size(); ++i) {
        const json &id = (*w)[i];
        if (!id.is_number_unsigned() ||
            std::find(outputs.begin(), outputs.end(), id.get<uint64_t>()) ==
                outputs.end())
          fail(fieldWhere(where, "writes") + ": element " + std::to_string(i),
               "expected a buffer the step writes (" +
                   std::to_string(outputs[0]) + " or " +
                   std::to_string(outputs[1]) + "), got " + id.dump());
        step.writes.push_back(static_cast<uint32_t>(id.get<uint64_t>()));
      }
    }
    step.nodes.assign(step.writes.size(), node);
    return step;
  }
  fail(fieldWhere(where, "kind"),
       "unknown step kind " + quoteName(kind) +
           " (expected kernel, gemm, copy, conv, attention, "
           "linear_cross_entropy or collective)");
}

PlanEntry parseEntry(const json &value, size_t index,
                     std::map<std::string, uint32_t> &symbols, Plan &plan,
                     const std::string &what) {
  std::string where = what + ": entry " + std::to_string(index);
  requireObject(value, where);
  PlanEntry entry;
  entry.name = getString(value, "name", where);
  if (!isCleanName(entry.name))
    fail(fieldWhere(where, "name"),
         quoteName(entry.name) + " is not a valid entry name");
  where = what + ": entry " + quoteName(entry.name);
  entry.arenaBytes = getUint(value, "arena_bytes", where);

  const json &buffers = member(value, "buffers", where);
  if (!buffers.is_array())
    fail(fieldWhere(where, "buffers"),
         std::string("expected an array, got ") + typeName(buffers));
  if (buffers.size() > (size_t(1) << 24))
    fail(fieldWhere(where, "buffers"), "more than 2^24 buffers");
  for (size_t i = 0; i < buffers.size(); ++i)
    entry.buffers.push_back(parseBuffer(
        buffers[i], where + ": buffer " + std::to_string(i), entry.arenaBytes));

  for (bool isInput : {true, false}) {
    const char *key = isInput ? "inputs" : "outputs";
    const json &list = member(value, key, where);
    if (!list.is_array())
      fail(fieldWhere(where, key),
           std::string("expected an array, got ") + typeName(list));
    std::vector<Binding> &bindings = isInput ? entry.inputs : entry.outputs;
    std::set<std::string> names;
    for (size_t i = 0; i < list.size(); ++i) {
      std::string at =
          where + ": " + (isInput ? "input " : "output ") + std::to_string(i);
      Binding binding = parseBinding(list[i], at, entry, plan, isInput);
      if (!names.insert(binding.name).second)
        fail(fieldWhere(at, "name"),
             "duplicate " + std::string(isInput ? "input" : "output") +
                 " name " + quoteName(binding.name));
      bindings.push_back(std::move(binding));
    }
  }

  // Inputs are all live when the entry starts, so no two may share bytes
  // (one would overwrite the other as they are uploaded).
  for (size_t i = 0; i < entry.inputs.size(); ++i)
    for (size_t j = i + 1; j < entry.inputs.size(); ++j)
      if (overlaps(entry.buffers[entry.inputs[i].buffer],
                   entry.buffers[entry.inputs[j].buffer]))
        fail(where + ": input " + std::to_string(j),
             quoteName(entry.inputs[j].name) + " (buffer " +
                 std::to_string(entry.inputs[j].buffer) + ") overlaps input " +
                 quoteName(entry.inputs[i].name) + " (buffer " +
                 std::to_string(entry.inputs[i].buffer) + ")");

  // The names the training loop relies on (docs/plan-format.md, training
  // convention): checked here so that a plan either follows them or fails.
  for (size_t i = 0; i < entry.inputs.size(); ++i) {
    const Binding &in = entry.inputs[i];
    std::string at = where + ": input " + std::to_string(i);
    if (in.name == "step" || in.name == "seed") {
      if (in.kind != BindingKind::Input)
        fail(at, quoteName(in.name) + " is reserved for an input of kind "
                                      "'input'");
      checkScalarI64(in, at);
    }
  }
  for (size_t i = 0; i < entry.outputs.size(); ++i) {
    const Binding &out = entry.outputs[i];
    std::string at = where + ": output " + std::to_string(i);
    if (out.name == "step")
      checkScalarI64(out, at);
    const Binding *in = entry.findInput(out.name);
    if (out.kind == BindingKind::Grad) {
      if (!in || in->kind != BindingKind::Param)
        fail(at, "grad output " + quoteName(out.name) +
                     " names no param input of this entry");
    }
    if (!in || (out.kind != BindingKind::Grad &&
                in->kind == BindingKind::Input && out.name != "step"))
      continue;
    // A new value of a tensor has its type and its sharding; a gradient
    // has its whole type (it may be sharded where the param is not).
    bool mismatch =
        in->dtype != out.dtype ||
        (out.kind == BindingKind::Grad
             ? in->wholeShape() != out.wholeShape()
             : in->shape != out.shape || !sameShard(in->shard, out.shard));
    if (mismatch)
      fail(at, quoteName(out.name) + " is " + describeBinding(out) +
                   " but the input of that name is " + describeBinding(*in));
  }

  const json &steps = member(value, "steps", where);
  if (!steps.is_array())
    fail(fieldWhere(where, "steps"),
         std::string("expected an array, got ") + typeName(steps));
  for (size_t i = 0; i < steps.size(); ++i)
    entry.steps.push_back(parseStep(steps[i], where, i, entry, symbols, plan));
  return entry;
}

/// The top-level `mesh`: 1 to 4 named axes, each of size >= 1, at most
/// 65536 ranks in all.
PlanMesh parseMesh(const json &value, const std::string &what) {
  requireObject(value, fieldWhere(what, "mesh"));
  std::string where = what + ": mesh";
  PlanMesh mesh;
  const json &axes = member(value, "axes", where);
  if (!axes.is_array() || axes.empty() || axes.size() > 4)
    fail(fieldWhere(where, "axes"),
         "expected an array of 1 to 4 axis names, got " +
             (axes.is_array() ? "an array of " + std::to_string(axes.size())
                              : std::string(typeName(axes))));
  for (size_t i = 0; i < axes.size(); ++i) {
    const json &name = axes[i];
    std::string at =
        fieldWhere(where, "axes") + ": element " + std::to_string(i);
    if (!name.is_string())
      fail(at, std::string("expected an axis name, got ") + typeName(name));
    const std::string &text = name.get_ref<const std::string &>();
    bool plain = !text.empty() && text.size() <= 64 &&
                 std::all_of(text.begin(), text.end(), [](char c) {
                   return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                          (c >= '0' && c <= '9') || c == '_';
                 });
    if (!plain)
      fail(at,
           quoteName(text) + " is not an axis name (1 to 64 of A-Z a-z 0-9 _)");
    if (std::find(mesh.axes.begin(), mesh.axes.end(), text) != mesh.axes.end())
      fail(at, "duplicate axis " + quoteName(text));
    mesh.axes.push_back(text);
  }
  const json &shape = member(value, "shape", where);
  if (!shape.is_array() || shape.size() != axes.size())
    fail(fieldWhere(where, "shape"),
         "expected " + std::to_string(axes.size()) +
             " sizes (one per axis), got " +
             (shape.is_array() ? "an array of " + std::to_string(shape.size())
                               : std::string(typeName(shape))));
  constexpr int64_t kMaxRanks = 65536;
  int64_t total = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    const json &size = shape[i];
    std::string at =
        fieldWhere(where, "shape") + ": element " + std::to_string(i);
    bool inRange = size.is_number_unsigned()
                       ? size.get<uint64_t>() >= 1 &&
                             size.get<uint64_t>() <= uint64_t(kMaxRanks)
                       : size.is_number_integer() && size.get<int64_t>() >= 1 &&
                             size.get<int64_t>() <= kMaxRanks;
    if (!inRange)
      fail(at, "axis " + quoteName(mesh.axes[i]) +
                   ": expected a size from 1 to 65536, got " + size.dump());
    mesh.shape.push_back(size.get<int64_t>());
    total *= mesh.shape.back();
    if (total > kMaxRanks)
      fail(fieldWhere(where, "shape"),
           "more than 65536 ranks in all (the sizes' product)");
  }
  return mesh;
}

Plan parse(std::string_view text, const std::string &what) {
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::exception &e) {
    fail(what, std::string("not valid JSON: ") + e.what());
  }
  requireObject(root, what);
  Plan plan;
  const std::string &format = getString(root, "format", what);
  if (format != "loom-plan")
    fail(fieldWhere(what, "format"),
         "expected \"loom-plan\", got " + quoteName(format));
  plan.version = getInt(root, "version", what);
  if (plan.version > kPlanVersion)
    fail(what,
         "plan version " + std::to_string(plan.version) +
             " is newer than this runtime supports (" +
             std::to_string(kPlanVersion) + "); use a newer loom-run/libloomrt",
         ErrorCode::Unsupported);
  if (plan.version < 1)
    fail(fieldWhere(what, "version"),
         "invalid version " + std::to_string(plan.version));
  plan.target = getString(root, "target", what);
  if (plan.target != "cpu" && plan.target != "cuda")
    fail(fieldWhere(what, "target"),
         "target " + quoteName(plan.target) +
             " is not supported by this runtime (supported: cpu, cuda)",
         ErrorCode::Unsupported);
  plan.kernelAbi = getInt(root, "kernel_abi", what);
  if (plan.kernelAbi != kKernelAbiVersion)
    fail(fieldWhere(what, "kernel_abi"),
         "kernel ABI " + std::to_string(plan.kernelAbi) +
             " is not supported (this runtime implements " +
             std::to_string(kKernelAbiVersion) + ")",
         plan.kernelAbi > kKernelAbiVersion ? ErrorCode::Unsupported
                                            : ErrorCode::Format);
  plan.kernels = getFileName(root, "kernels", what, /*optional=*/false);
  plan.params = getFileName(root, "params", what, /*optional=*/false);
  if (plan.target == "cuda") {
    // sm_50 (Maxwell) .. sm_999: major * 10 + minor, as nvcc's -arch names.
    int64_t sm = getInt(root, "sm", what);
    if (sm < 50 || sm > 999)
      fail(fieldWhere(what, "sm"),
           std::to_string(sm) +
               " is not a CUDA architecture (expected major * 10 + minor, "
               "e.g. 90 for sm_90)");
    plan.sm = sm;
    plan.ptx = getFileName(root, "ptx", what, /*optional=*/false);
  }
  if (auto it = root.find("source_model"); it != root.end() && !it->is_null()) {
    if (!it->is_string())
      fail(fieldWhere(what, "source_model"),
           std::string("expected a string, got ") + typeName(*it));
    plan.sourceModel = it->get<std::string>();
  }

  if (auto it = root.find("mesh"); it != root.end() && !it->is_null())
    plan.mesh = parseMesh(*it, what);
  if (auto it = root.find("grad_compression");
      it != root.end() && !it->is_null()) {
    if (!it->is_string())
      fail(fieldWhere(what, "grad_compression"),
           std::string("expected a string, got ") + typeName(*it));
    std::string why;
    if (!parseGradCompression(it->get<std::string>(), nullptr, &why))
      fail(fieldWhere(what, "grad_compression"), why);
    plan.gradCompression = it->get<std::string>();
  }

  const json &entries = member(root, "entries", what);
  if (!entries.is_array())
    fail(fieldWhere(what, "entries"),
         std::string("expected an array, got ") + typeName(entries));
  if (entries.empty())
    fail(fieldWhere(what, "entries"), "the plan has no entry points");
  std::map<std::string, uint32_t> symbols;
  std::set<std::string> names;
  for (size_t i = 0; i < entries.size(); ++i) {
    PlanEntry entry = parseEntry(entries[i], i, symbols, plan, what);
    if (!names.insert(entry.name).second)
      fail(what + ": entry " + std::to_string(i),
           "duplicate entry name " + quoteName(entry.name));
    plan.entries.push_back(std::move(entry));
  }
  if (!plan.kernelSymbols.empty() && plan.kernels.empty() && plan.ptx.empty())
    fail(fieldWhere(what, "kernels"),
         std::string(plan.target == "cuda" ? "and 'ptx' are both null"
                                           : "is null") +
             ", but entries have kernel steps (first: " +
             quoteName(plan.kernelSymbols.front()) + ")");

  // A param or state tensor is one tensor of the model, whichever entry
  // uses it: its type must agree everywhere.
  std::map<std::string, const Binding *> seen;
  for (const PlanEntry &entry : plan.entries)
    for (const Binding &in : entry.inputs) {
      if (!isStateKind(in.kind))
        continue;
      auto [it, inserted] = seen.emplace(in.name, &in);
      if (!inserted &&
          (it->second->dtype != in.dtype || it->second->shape != in.shape ||
           it->second->kind != in.kind ||
           !sameShard(it->second->shard, in.shard)))
        fail(what + ": entry " + quoteName(entry.name),
             std::string(bindingKindName(in.kind)) + " " + quoteName(in.name) +
                 " is " + describeBinding(in) +
                 " but another entry has it as " +
                 bindingKindName(it->second->kind) + " " +
                 describeBinding(*it->second));
    }
  if (auto it = root.find("pipeline"); it != root.end() && !it->is_null()) {
    std::string message;
    ErrorCode code = ErrorCode::Format;
    if (!detail::parsePipeline(*it, plan, what, &message, &code))
      throw PlanError{code, message};
  }
  return plan;
}

} // namespace

const char *gemmEpilogueName(GemmEpilogue epilogue) noexcept {
  switch (epilogue) {
  case GemmEpilogue::None:
    return "none";
  case GemmEpilogue::Bias:
    return "bias";
  case GemmEpilogue::Relu:
    return "relu";
  case GemmEpilogue::Gelu:
    return "gelu";
  case GemmEpilogue::BiasRelu:
    return "bias_relu";
  case GemmEpilogue::BiasGelu:
    return "bias_gelu";
  }
  return "?";
}

const char *stepKindName(PlanStep::Kind kind) noexcept {
  switch (kind) {
  case PlanStep::Kind::Kernel:
    return "kernel";
  case PlanStep::Kind::Gemm:
    return "gemm";
  case PlanStep::Kind::Copy:
    return "copy";
  case PlanStep::Kind::Conv:
    return "conv";
  case PlanStep::Kind::Attention:
    return "attention";
  case PlanStep::Kind::LinearCrossEntropy:
    return "linear_cross_entropy";
  case PlanStep::Kind::Collective:
    return "collective";
  }
  return "?";
}

const char *collectiveOpName(CollectiveOp op) noexcept {
  switch (op) {
  case CollectiveOp::AllReduce:
    return "all_reduce";
  case CollectiveOp::ReduceScatter:
    return "reduce_scatter";
  case CollectiveOp::AllGather:
    return "all_gather";
  case CollectiveOp::RankSlice:
    return "rank_slice";
  }
  return "?";
}

const char *collectiveReduceName(CollectiveReduce reduce) noexcept {
  switch (reduce) {
  case CollectiveReduce::None:
    return "none";
  case CollectiveReduce::Sum:
    return "sum";
  case CollectiveReduce::Max:
    return "max";
  case CollectiveReduce::Mean:
    return "mean";
  }
  return "?";
}

std::vector<uint32_t> stepBuffers(const PlanStep &step) {
  switch (step.kind) {
  case PlanStep::Kind::Kernel:
    return step.buffers;
  case PlanStep::Kind::Gemm:
    if (gemmEpilogueHasBias(step.gemm.epilogue))
      return {step.gemm.a, step.gemm.b, step.gemm.c, step.gemm.bias};
    return {step.gemm.a, step.gemm.b, step.gemm.c};
  case PlanStep::Kind::Conv:
    return {step.conv.x, step.conv.w, step.conv.y};
  case PlanStep::Kind::Attention: {
    const AttentionStep &a = step.attention;
    std::vector<uint32_t> ids = {a.q, a.k, a.v, a.out, a.lse};
    if (a.direction == AttentionDirection::Backward)
      ids.insert(ids.end(), {a.dout, a.dq, a.dk, a.dv});
    for (const std::optional<uint32_t> &id :
         {a.mask, a.bias, a.dbias, a.segments, a.seed})
      if (id)
        ids.push_back(*id);
    return ids;
  }
  case PlanStep::Kind::LinearCrossEntropy: {
    const LinearCrossEntropyStep &l = step.linearCrossEntropy;
    if (l.direction == LinearCrossEntropyDirection::Forward)
      return {l.x, l.w, l.labels, l.lse, l.loss};
    return {l.x, l.w, l.labels, l.lse, l.dloss, l.dx, l.dw};
  }
  case PlanStep::Kind::Copy:
    return {step.src, step.dst};
  case PlanStep::Kind::Collective:
    return {step.collective.src, step.collective.dst};
  }
  return {};
}

int64_t PlanMesh::size() const noexcept {
  int64_t total = 1;
  for (int64_t n : shape)
    total *= n;
  return total;
}

int PlanMesh::axisIndex(std::string_view name) const noexcept {
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] == name)
      return static_cast<int>(i);
  return -1;
}

int PlanMesh::axesLargerThanOne() const noexcept {
  return static_cast<int>(std::count_if(shape.begin(), shape.end(),
                                        [](int64_t n) { return n > 1; }));
}

int64_t PlanMesh::stride(uint32_t axis) const noexcept {
  int64_t product = 1;
  for (size_t i = size_t(axis) + 1; i < shape.size(); ++i)
    product *= shape[i];
  return product;
}

int64_t PlanMesh::coordinate(int64_t rank, uint32_t axis) const noexcept {
  if (axis >= shape.size() || shape[axis] < 1 || rank < 0)
    return 0;
  return (rank / stride(axis)) % shape[axis];
}

std::string PlanMesh::describe() const {
  std::string text;
  for (size_t i = 0; i < axes.size(); ++i)
    text += (i ? ", " : "") + axes[i] + "=" + std::to_string(shape[i]);
  return text;
}

const char *convDirectionName(ConvDirection direction) noexcept {
  switch (direction) {
  case ConvDirection::Forward:
    return "forward";
  case ConvDirection::BackwardData:
    return "backward_data";
  case ConvDirection::BackwardWeights:
    return "backward_weights";
  }
  return "?";
}

const char *fusedDirectionName(FusedDirection direction) noexcept {
  switch (direction) {
  case FusedDirection::Forward:
    return "forward";
  case FusedDirection::Backward:
    return "backward";
  }
  return "?";
}

const char *linearCrossEntropyReductionName(
    LinearCrossEntropyReduction reduction) noexcept {
  switch (reduction) {
  case LinearCrossEntropyReduction::Mean:
    return "mean";
  case LinearCrossEntropyReduction::Sum:
    return "sum";
  case LinearCrossEntropyReduction::None:
    return "none";
  }
  return "?";
}

const char *bindingKindName(BindingKind kind) noexcept {
  switch (kind) {
  case BindingKind::Param:
    return "param";
  case BindingKind::State:
    return "state";
  case BindingKind::Input:
    return "input";
  case BindingKind::Output:
    return "output";
  case BindingKind::Grad:
    return "grad";
  case BindingKind::Buffer:
    return "buffer";
  }
  return "?";
}

const Binding *PlanEntry::findInput(std::string_view name) const noexcept {
  for (const Binding &b : inputs)
    if (b.name == name)
      return &b;
  return nullptr;
}

const Binding *PlanEntry::findOutput(std::string_view name) const noexcept {
  for (const Binding &b : outputs)
    if (b.name == name)
      return &b;
  return nullptr;
}

std::string describeBinding(const Binding &b) {
  std::string text = describe(b.dtype, b.shape);
  if (b.shard) {
    text += " (shard of " + detail::formatShape(b.shard->shape) + " over " +
            b.shard->axis;
    if (b.shard->alongDim())
      text += ", dim " + std::to_string(b.shard->dim);
    if (b.shard->groups > 1)
      text += ", " + std::to_string(b.shard->groups) + " groups";
    text += ")";
  }
  return text;
}

std::map<std::string, const Binding *> stateBindings(const Plan &plan) {
  std::map<std::string, const Binding *> result;
  for (const PlanEntry &entry : plan.entries)
    for (const Binding &in : entry.inputs)
      if (isStateKind(in.kind))
        result.emplace(in.name, &in);
  return result;
}

const PlanEntry *Plan::findEntry(std::string_view name) const noexcept {
  for (const PlanEntry &e : entries)
    if (e.name == name)
      return &e;
  return nullptr;
}

bool isPlainFileName(std::string_view name) noexcept {
  if (name.empty() || name == "." || name == ".." || name.size() > 255)
    return false;
  for (char c : name) {
    auto byte = static_cast<unsigned char>(c);
    if (c == '/' || c == '\\' || byte < 0x20 || byte == 0x7f)
      return false;
  }
  return true;
}

std::optional<Plan> parsePlan(std::string_view text, const std::string &what,
                              std::string *error, ErrorCode *code) noexcept {
  ErrorSink sink{error, code};
  try {
    Plan plan = parse(text, what);
    sink.ok();
    return plan;
  } catch (const PlanError &e) {
    sink.set(e.code, e.message);
  } catch (const std::bad_alloc &) {
    sink.outOfMemory(what);
  } catch (const std::exception &e) {
    sink.set(ErrorCode::Format, what + ": " + e.what());
  } catch (...) {
    sink.set(ErrorCode::Format, what + ": unexpected error");
  }
  return std::nullopt;
}

std::optional<Plan> readPlan(const std::string &path, std::string *error,
                             ErrorCode *code,
                             const std::string &what) noexcept {
  ErrorSink sink{error, code};
  try {
    std::string name = what.empty() ? path : what;
    // Refuse an oversized file before reading it into memory.
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        static_cast<uint64_t>(st.st_size) > kPlanMaxFileSize) {
      sink.set(ErrorCode::Format, name + ": " + std::to_string(st.st_size) +
                                      " bytes exceed the limit of " +
                                      std::to_string(kPlanMaxFileSize));
      return std::nullopt;
    }
    std::vector<uint8_t> bytes;
    if (!detail::readWholeFile(path, bytes, sink))
      return std::nullopt;
    if (bytes.size() > kPlanMaxFileSize) {
      sink.set(ErrorCode::Format, name + ": " + std::to_string(bytes.size()) +
                                      " bytes exceed the limit of " +
                                      std::to_string(kPlanMaxFileSize));
      return std::nullopt;
    }
    return parsePlan(
        std::string_view(reinterpret_cast<const char *>(bytes.data()),
                         bytes.size()),
        name, error, code);
  } catch (...) {
    sink.outOfMemory(path);
  }
  return std::nullopt;
}

} // namespace loomrt
