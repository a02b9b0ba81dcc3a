//===- DType.cpp - Element type names and sizes ---------------------------===//

#include "loomrt/DType.h"

namespace loomrt {

namespace {
struct DTypeInfo {
  DType dtype;
  size_t size;
  std::string_view safetensors;
  std::string_view shortName;
};

// One table so the three spellings and the size can never drift apart.
constexpr DTypeInfo kInfo[] = {
    {DType::F64, 8, "F64", "f64"}, {DType::F32, 4, "F32", "f32"},
    {DType::F16, 2, "F16", "f16"}, {DType::BF16, 2, "BF16", "bf16"},
    {DType::I64, 8, "I64", "i64"}, {DType::I32, 4, "I32", "i32"},
    {DType::I16, 2, "I16", "i16"}, {DType::I8, 1, "I8", "i8"},
    {DType::U8, 1, "U8", "ui8"},   {DType::Bool, 1, "BOOL", "i1"},
};

const DTypeInfo *lookup(DType dtype) noexcept {
  for (const DTypeInfo &info : kInfo)
    if (info.dtype == dtype)
      return &info;
  return nullptr;
}
} // namespace

bool isValidDType(DType dtype) noexcept { return lookup(dtype) != nullptr; }

size_t dtypeSize(DType dtype) noexcept {
  const DTypeInfo *info = lookup(dtype);
  return info ? info->size : 0;
}

std::string_view dtypeToSafetensors(DType dtype) noexcept {
  const DTypeInfo *info = lookup(dtype);
  return info ? info->safetensors : std::string_view();
}

std::optional<DType> dtypeFromSafetensors(std::string_view name) noexcept {
  for (const DTypeInfo &info : kInfo)
    if (info.safetensors == name)
      return info.dtype;
  return std::nullopt;
}

std::string_view dtypeToShortName(DType dtype) noexcept {
  const DTypeInfo *info = lookup(dtype);
  return info ? info->shortName : std::string_view();
}

std::optional<DType> dtypeFromShortName(std::string_view name) noexcept {
  for (const DTypeInfo &info : kInfo)
    if (info.shortName == name)
      return info.dtype;
  if (name == "u8")
    return DType::U8;
  if (name == "bool")
    return DType::Bool;
  return std::nullopt;
}

std::optional<int64_t>
checkedNumElements(const std::vector<int64_t> &shape) noexcept {
  // Check signs and zeros first: [0, 2^62, 2^62] has 0 elements and must not be
  // rejected for an overflow that only the order of multiplication creates.
  for (int64_t dim : shape)
    if (dim < 0)
      return std::nullopt;
  for (int64_t dim : shape)
    if (dim == 0)
      return 0;
  int64_t count = 1;
  for (int64_t dim : shape)
    if (__builtin_mul_overflow(count, dim, &count))
      return std::nullopt;
  return count;
}

std::optional<uint64_t>
checkedByteSize(DType dtype, const std::vector<int64_t> &shape) noexcept {
  size_t size = dtypeSize(dtype);
  if (size == 0)
    return std::nullopt;
  std::optional<int64_t> count = checkedNumElements(shape);
  if (!count)
    return std::nullopt;
  uint64_t bytes;
  if (__builtin_mul_overflow(static_cast<uint64_t>(*count),
                             static_cast<uint64_t>(size), &bytes))
    return std::nullopt;
  return bytes;
}

} // namespace loomrt
