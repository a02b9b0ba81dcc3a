//===- Zip.h - Minimal validating zip reader and stored-zip writer --------===//
//
// Just enough of the zip format for .npz archives: reading stored and
// deflated members (zip64 included) with every offset, size and CRC-32
// checked, and laying out an archive of stored members. Internal to the
// runtime; the unit tests include it to reach the zip64 writer path.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_ZIP_H
#define LOOMRT_SRC_ZIP_H

#include "Support.h"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

namespace loomrt::detail {

/// Called once per member, in central directory order, with the member's name
/// and its verified, uncompressed bytes (which it may take). Returns false to
/// stop reading, having reported the reason through the sink.
using ZipMemberFn =
    std::function<bool(const std::string &name, std::vector<uint8_t> &data)>;

/// Validates the whole central directory of the zip archive in `bytes`, then
/// extracts each member and hands it to `onMember`. Messages start
/// "<what>: ". Returns false after reporting Format, Unsupported or
/// OutOfMemory through `sink`. May throw std::bad_alloc.
bool readZip(const uint8_t *bytes, size_t size, const std::string &what,
             const ErrorSink &sink, const ZipMemberFn &onMember);

/// One member to store: its name and its content as consecutive spans.
struct ZipInput {
  std::string name;
  std::vector<ByteSpan> content;
};

/// A laid-out archive: the file is the concatenation of `pieces`, which point
/// into `owned` (the headers) and into the callers' content spans.
struct ZipImage {
  std::deque<std::vector<uint8_t>> owned;
  std::vector<ByteSpan> pieces;
};

/// Lays out an archive of stored members. Zip64 extra fields and end records
/// are written where a size, offset or count needs them, or everywhere when
/// `forceZip64` is set. Names must be at most 65535 bytes (not checked here).
/// May throw std::bad_alloc.
ZipImage buildStoredZip(const std::vector<ZipInput> &members,
                        bool forceZip64 = false);

} // namespace loomrt::detail

#endif // LOOMRT_SRC_ZIP_H
