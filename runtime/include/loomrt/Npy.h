//===- Npy.h - Read and write NumPy .npy and .npz files -------------------===//
//
// Test inputs, reference outputs and datasets often come from NumPy: a .npy
// file (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html)
// is a magic string, a Python-literal header ("{'descr': '<f4',
// 'fortran_order': False, 'shape': (2, 3), }") and the raw bytes; an .npz
// file is a zip archive of .npy members, as np.savez and np.savez_compressed
// write it.
//
// Nothing here throws: every failure comes back as std::nullopt/false plus a
// message that names the file (and the archive member), as in Safetensors.h.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_NPY_H
#define LOOMRT_NPY_H

#include "loomrt/DType.h"
#include "loomrt/ErrorCode.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace loomrt {

/// Largest .npy header accepted (NumPy's own reader stops at 10000 bytes by
/// default); a bound on what a hostile file can make us parse.
inline constexpr uint64_t kNpyMaxHeaderSize = 1u << 20;

/// A dense array: `data` holds product(shape) * dtypeSize(dtype) bytes in C
/// (row-major) order, little-endian, whatever the file stored. Bool is one
/// byte per element (NumPy's '|b1'); its bytes are passed through unchanged.
struct NpyArray {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

/// The .npy dtype string for `dtype`: "<f8", "<f4", "<f2", "|V2", "<i8",
/// "<i4", "<i2", "|i1", "|u1", "|b1". NumPy has no bfloat16: BF16 is a
/// two-byte void element, as ml_dtypes' bfloat16 arrays are saved ("<V2";
/// both spellings are read; `np.load(f).view(ml_dtypes.bfloat16)` reads one
/// back). "" for an invalid enumerator.
std::string npyDescr(DType dtype) noexcept;

/// Reads a .npy file: format versions 1.0, 2.0 and 3.0, the dtypes listed at
/// npyDescr in either byte order ('>' data is byte-swapped; '|' and '=' mean
/// this machine's order), C or Fortran order (Fortran data is transposed to C
/// order). Validates the magic, the header (exactly the keys 'descr',
/// 'fortran_order' and 'shape'), the shape and that the data size matches it
/// exactly (trailing bytes are an error).
///
/// On failure returns std::nullopt and, if non-null, sets `*error` (starting
/// "<path>: ") and `*code`: IO when the file cannot be read, Format when it is
/// malformed, Unsupported for a well-formed file Loom cannot represent (a
/// dtype such as '<u2', '<c8' or a structured dtype, format version 4.0).
std::optional<NpyArray> readNpy(const std::string &path, std::string *error,
                                ErrorCode *code = nullptr) noexcept;

/// Like readNpy, for `size` bytes in memory; messages start "<what>: ".
std::optional<NpyArray> parseNpy(const uint8_t *bytes, size_t size,
                                 const std::string &what, std::string *error,
                                 ErrorCode *code = nullptr) noexcept;

/// The bytes of a .npy file holding `array`: identical to what np.save writes
/// for it (format 1.0, or 2.0 when the header needs more than 64 KiB; the
/// data starts 64-byte aligned). On failure (invalid dtype, a negative
/// dimension, data size not matching the shape) returns std::nullopt and sets
/// `*error`/`*code` (InvalidArgument).
std::optional<std::vector<uint8_t>>
encodeNpy(const NpyArray &array, std::string *error,
          ErrorCode *code = nullptr) noexcept;

/// Writes `array` as a .npy file, atomically like SafetensorsWriter::write:
/// "<path>.tmp.<pid>", fsync, rename over `path`, fsync the directory; a
/// failure leaves no temporary file behind. Errors as for encodeNpy, plus IO.
bool writeNpy(const std::string &path, const NpyArray &array,
              std::string *error, ErrorCode *code = nullptr) noexcept;

/// Reads an .npz archive (np.savez: stored members; np.savez_compressed:
/// deflated members; zip64 records accepted). Returns the arrays keyed by
/// member name without the ".npy" suffix ("dir/w.npy" gives "dir/w"; names are
/// keys only and never touch the filesystem). Every member must be a .npy
/// file; the central directory is checked (offsets and sizes inside the file,
/// no overlapping members, no duplicate names, local headers agreeing with
/// it) and every member's CRC-32 is verified. Encrypted members, compression
/// other than deflate, multi-disk archives and data prepended to the archive
/// are Unsupported. Names not flagged UTF-8 are kept as raw bytes (not
/// decoded as CP437). Errors as for readNpy, naming the member:
/// "<path>: member 'w.npy': ...".
std::optional<std::map<std::string, NpyArray>>
readNpz(const std::string &path, std::string *error,
        ErrorCode *code = nullptr) noexcept;

/// Writes `arrays` as an .npz archive with stored (uncompressed) members named
/// "<key>.npy", atomically as writeNpy does; np.load reads it. Keys must be
/// valid UTF-8 without NUL bytes and at most 65531 bytes long. Zip64 records
/// are used only where sizes or offsets need them. Member timestamps are fixed
/// (1980-01-01), so equal input gives byte-identical files.
bool writeNpz(const std::string &path,
              const std::map<std::string, NpyArray> &arrays, std::string *error,
              ErrorCode *code = nullptr) noexcept;

} // namespace loomrt

#endif // LOOMRT_NPY_H
