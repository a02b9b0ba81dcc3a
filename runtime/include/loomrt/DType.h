//===- DType.h - Element types of runtime tensors -------------------------===//
//
// The closed set of element types libloomrt moves around, and their spellings
// in safetensors headers ("F32") and in Loom's own text ("f32", MLIR style).
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_DTYPE_H
#define LOOMRT_DTYPE_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace loomrt {

/// Element type of a tensor. The numbering is not part of any file format
/// (files always spell the type by name), so it may grow.
enum class DType : uint8_t { F64, F32, F16, BF16, I64, I32, I16, I8, U8, Bool };

/// Every DType, in declaration order; handy for tables and tests.
inline constexpr DType kAllDTypes[] = {
    DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64,
    DType::I32, DType::I16, DType::I8,  DType::U8,   DType::Bool};

/// True if `dtype` holds one of the enumerators (guards casts from integers).
bool isValidDType(DType dtype) noexcept;

/// Bytes per element (Bool is stored as one byte, as in safetensors and
/// PyTorch). Returns 0 for an invalid enumerator.
size_t dtypeSize(DType dtype) noexcept;

/// Safetensors header spelling: "F64", "F32", "F16", "BF16", "I64", "I32",
/// "I16", "I8", "U8", "BOOL". Returns "" for an invalid enumerator.
std::string_view dtypeToSafetensors(DType dtype) noexcept;

/// Inverse of dtypeToSafetensors (exact, case-sensitive match, as the format
/// requires). Types safetensors knows but Loom does not ("F8_E4M3", "U16", ...)
/// yield std::nullopt.
std::optional<DType> dtypeFromSafetensors(std::string_view name) noexcept;

/// Short MLIR-style name: "f64", "f32", "f16", "bf16", "i64", "i32", "i16",
/// "i8", "ui8", "i1". Returns "" for an invalid enumerator.
std::string_view dtypeToShortName(DType dtype) noexcept;

/// Inverse of dtypeToShortName; also accepts "u8" and "bool" as aliases.
std::optional<DType> dtypeFromShortName(std::string_view name) noexcept;

/// Number of elements of `shape` (1 for a scalar, shape []), or std::nullopt if
/// a dimension is negative or the product overflows int64_t. A zero dimension
/// makes the product 0 whatever the other dimensions are.
std::optional<int64_t>
checkedNumElements(const std::vector<int64_t> &shape) noexcept;

/// Byte size of a dense tensor of `dtype` and `shape`, or std::nullopt if the
/// shape is invalid, the dtype is invalid, or the size overflows uint64_t.
std::optional<uint64_t>
checkedByteSize(DType dtype, const std::vector<int64_t> &shape) noexcept;

} // namespace loomrt

#endif // LOOMRT_DTYPE_H
