//===- Zip.cpp - Minimal validating zip reader and stored-zip writer ------===//
//
// Layout from PKWARE's APPNOTE.TXT (6.3.x): local file headers followed by
// member data, then the central directory, then (optionally) the zip64 end
// record and its locator, then the end-of-central-directory record. The
// central directory is authoritative; local headers are only cross-checked.
//
//===----------------------------------------------------------------------===//

#include "Zip.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string_view>

namespace loomrt::detail {

namespace {

constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kEnd64Sig = 0x06064b50;
constexpr uint32_t kLocator64Sig = 0x07064b50;
constexpr size_t kLocalSize = 30;
constexpr size_t kCentralSize = 46;
constexpr size_t kEndSize = 22;
constexpr size_t kEnd64Size = 56;
constexpr size_t kLocatorSize = 20;
constexpr size_t kMaxComment = 0xffff;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint16_t kFlagEncrypted = 1u << 0;
constexpr uint16_t kFlagStrongEncryption = 1u << 6;
constexpr uint16_t kFlagUtf8 = 1u << 11;
constexpr uint16_t kMethodStored = 0;
constexpr uint16_t kMethodDeflate = 8;
// The DOS date of 1980-01-01 (the epoch of the format) at 00:00.
constexpr uint16_t kDosDate = (0u << 9) | (1u << 5) | 1u;
// Python's zipfile switches to zip64 past 2^31 - 1 (some readers treat the
// 32-bit fields as signed); so do we.
constexpr uint64_t kZip32Limit = 0x7fffffff;
// Deflate cannot expand more than 1032:1; a member that claims more is lying
// (or a bomb), and is refused before anything is allocated for it.
constexpr uint64_t kMaxInflateRatio = 1032;
constexpr size_t kZlibChunk = size_t(1) << 30;

uint16_t rd16(const uint8_t *p) { return uint16_t(p[0] | (p[1] << 8)); }
uint32_t rd32(const uint8_t *p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) |
         (uint32_t(p[3]) << 24);
}
uint64_t rd64(const uint8_t *p) {
  return uint64_t(rd32(p)) | (uint64_t(rd32(p + 4)) << 32);
}

void put16(std::vector<uint8_t> &out, uint64_t value) {
  for (int i = 0; i < 2; ++i)
    out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}
void put32(std::vector<uint8_t> &out, uint64_t value) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}
void put64(std::vector<uint8_t> &out, uint64_t value) {
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}
void putBytes(std::vector<uint8_t> &out, std::string_view bytes) {
  out.insert(out.end(), bytes.begin(), bytes.end());
}

uint32_t crc32Of(const uint8_t *data, size_t size, uint32_t crc) {
  uLong value = crc;
  while (size > 0) {
    size_t chunk = std::min(size, kZlibChunk);
    value = ::crc32(value, data, static_cast<uInt>(chunk));
    data += chunk;
    size -= chunk;
  }
  return static_cast<uint32_t>(value);
}

std::string hex32(uint32_t value) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "0x";
  for (int shift = 28; shift >= 0; shift -= 4)
    out += kHex[(value >> shift) & 15];
  return out;
}

std::string range(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

bool startsWithNpyMagic(const uint8_t *bytes, size_t size) {
  return size >= 6 && std::memcmp(bytes, "\x93NUMPY", 6) == 0;
}

/// A central directory entry after validation.
struct Entry {
  std::string name;
  uint16_t method;
  uint32_t crc;
  uint64_t compressedSize;
  uint64_t size;
  uint64_t localOffset;
  uint64_t dataOffset;
};

/// Frees a zlib inflate state on scope exit.
struct InflateGuard {
  z_stream *stream;
  ~InflateGuard() { ::inflateEnd(stream); }
};

/// Inflates the raw deflate stream of `entry` into `out`, which ends up
/// exactly entry.size bytes long. `fail` reports Format problems.
template <typename Fail>
bool inflateMember(const uint8_t *bytes, const Entry &entry,
                   std::vector<uint8_t> &out, const Fail &fail,
                   const std::function<void()> &outOfMemory) {
  // Grow the output as the data arrives instead of trusting the recorded
  // size with one big allocation up front.
  uint64_t firstSize =
      std::max<uint64_t>(entry.compressedSize * 4, uint64_t(1) << 16);
  out.resize(static_cast<size_t>(std::min(entry.size, firstSize)));

  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  int rc = ::inflateInit2(&zs, -MAX_WBITS); // Raw deflate, no zlib header.
  if (rc == Z_MEM_ERROR) {
    outOfMemory();
    return false;
  }
  if (rc != Z_OK)
    return fail("cannot start inflating (zlib error " + std::to_string(rc) +
                ")");
  InflateGuard guard{&zs};

  const uint8_t *in = bytes + entry.dataOffset;
  uint64_t inLeft = entry.compressedSize;
  size_t outDone = 0;
  uint8_t scratch = 0;
  for (;;) {
    if (zs.avail_in == 0 && inLeft > 0) {
      size_t chunk =
          static_cast<size_t>(std::min<uint64_t>(inLeft, kZlibChunk));
      zs.next_in = const_cast<Bytef *>(in);
      zs.avail_in = static_cast<uInt>(chunk);
      in += chunk;
      inLeft -= chunk;
    }
    if (outDone == out.size() && out.size() < entry.size)
      out.resize(static_cast<size_t>(
          std::min<uint64_t>(entry.size, uint64_t(out.size()) * 2)));
    // With the recorded size reached, offer one spare byte: the stream may
    // still hold its end marker, but must not produce more data.
    bool full = outDone == out.size();
    if (full) {
      zs.next_out = &scratch;
      zs.avail_out = 1;
    } else {
      zs.next_out = out.data() + outDone;
      zs.avail_out =
          static_cast<uInt>(std::min(out.size() - outDone, kZlibChunk));
    }
    uInt availBefore = zs.avail_out;
    rc = ::inflate(&zs, Z_NO_FLUSH);
    size_t produced = availBefore - zs.avail_out;
    if (full && produced > 0)
      return fail("inflates to more than the " + std::to_string(entry.size) +
                  " bytes the central directory records");
    if (!full)
      outDone += produced;
    if (rc == Z_STREAM_END)
      break;
    if (rc == Z_OK)
      continue;
    if (rc == Z_MEM_ERROR) {
      outOfMemory();
      return false;
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && inLeft == 0)
      return fail("deflate data ends before the end of its stream (truncated)");
    return fail(std::string("corrupt deflate data: ") +
                (zs.msg ? zs.msg : "zlib error " + std::to_string(rc)));
  }
  uint64_t unused = zs.avail_in + inLeft;
  if (unused > 0)
    return fail(std::to_string(unused) +
                " bytes follow the end of the deflate stream");
  if (outDone != entry.size)
    return fail("inflates to " + std::to_string(outDone) + " bytes, but the " +
                "central directory records " + std::to_string(entry.size));
  return true;
}

} // namespace

bool readZip(const uint8_t *bytes, size_t size, const std::string &what,
             const ErrorSink &sink, const ZipMemberFn &onMember) {
  auto formatError = [&](const std::string &message) {
    sink.set(ErrorCode::Format, what + ": " + message);
    return false;
  };
  auto unsupported = [&](const std::string &message) {
    sink.set(ErrorCode::Unsupported, what + ": " + message);
    return false;
  };
  if (startsWithNpyMagic(bytes, size))
    return formatError("not a zip archive: it starts with the .npy magic (a "
                       ".npy file, not an .npz?)");
  if (size < kEndSize)
    return formatError(std::to_string(size) +
                       " bytes, too few for a zip archive (truncated or not "
                       "an .npz file)");

  // The end record is the last 22 bytes plus a comment of up to 64 KiB whose
  // length it states; search backwards for a record whose comment ends the
  // file exactly.
  size_t lowest =
      size - kEndSize > kMaxComment ? size - kEndSize - kMaxComment : 0;
  size_t endPos = std::numeric_limits<size_t>::max();
  for (size_t pos = size - kEndSize + 1; pos-- > lowest;) {
    if (rd32(bytes + pos) == kEndSig &&
        pos + kEndSize + rd16(bytes + pos + 20) == size) {
      endPos = pos;
      break;
    }
  }
  if (endPos == std::numeric_limits<size_t>::max())
    return formatError("no zip end-of-central-directory record (truncated or "
                       "not a zip archive)");
  const uint8_t *end = bytes + endPos;
  uint64_t disk = rd16(end + 4), cdDisk = rd16(end + 6);
  uint64_t diskEntries = rd16(end + 8), entries = rd16(end + 10);
  uint64_t cdSize = rd32(end + 12), cdOffset = rd32(end + 16);
  uint64_t cdLimit = endPos; // Where the central directory must end.

  if (endPos >= kLocatorSize &&
      rd32(bytes + endPos - kLocatorSize) == kLocator64Sig) {
    const uint8_t *locator = bytes + endPos - kLocatorSize;
    uint64_t locatorPos = endPos - kLocatorSize;
    uint64_t recordPos = rd64(locator + 8);
    if (rd32(locator + 4) != 0 || rd32(locator + 16) > 1)
      return unsupported("multi-disk zip archives are not supported");
    if (recordPos > locatorPos || locatorPos - recordPos < kEnd64Size)
      return formatError("zip64 end record offset " +
                         std::to_string(recordPos) +
                         " leaves no room for the record before its locator "
                         "at " +
                         std::to_string(locatorPos));
    const uint8_t *record = bytes + recordPos;
    if (rd32(record) != kEnd64Sig)
      return formatError("no zip64 end record at offset " +
                         std::to_string(recordPos));
    uint64_t recordSize = rd64(record + 4);
    if (recordSize < kEnd64Size - 12 ||
        recordSize != locatorPos - recordPos - 12)
      return formatError("zip64 end record at offset " +
                         std::to_string(recordPos) + " states size " +
                         std::to_string(recordSize) + ", but its locator is " +
                         std::to_string(locatorPos - recordPos - 12) +
                         " bytes after its fixed part");
    disk = rd32(record + 16);
    cdDisk = rd32(record + 20);
    diskEntries = rd64(record + 24);
    entries = rd64(record + 32);
    cdSize = rd64(record + 40);
    cdOffset = rd64(record + 48);
    cdLimit = recordPos;
  }
  if (disk != 0 || cdDisk != 0 || diskEntries != entries)
    return unsupported("multi-disk zip archives are not supported");
  if (cdOffset > cdLimit || cdSize > cdLimit - cdOffset)
    return formatError("central directory of " + std::to_string(cdSize) +
                       " bytes at offset " + std::to_string(cdOffset) +
                       " extends past the end records at offset " +
                       std::to_string(cdLimit));
  if (cdOffset + cdSize != cdLimit)
    return unsupported("central directory " +
                       range(cdOffset, cdOffset + cdSize) +
                       " does not end where the end records begin (" +
                       std::to_string(cdLimit) +
                       "); archives with data before them are not supported");
  if (entries > cdSize / kCentralSize)
    return formatError(std::to_string(entries) +
                       " entries cannot fit in a central directory of " +
                       std::to_string(cdSize) + " bytes");

  std::vector<Entry> list;
  list.reserve(static_cast<size_t>(entries));
  uint64_t pos = cdOffset;
  for (uint64_t index = 0; index < entries; ++index) {
    std::string where = "central directory entry " + std::to_string(index);
    if (cdLimit - pos < kCentralSize)
      return formatError(where + " at offset " + std::to_string(pos) +
                         " is truncated");
    const uint8_t *p = bytes + pos;
    if (rd32(p) != kCentralSig)
      return formatError(where + " at offset " + std::to_string(pos) +
                         " has a bad signature");
    uint16_t flags = rd16(p + 8);
    Entry entry;
    entry.method = rd16(p + 10);
    entry.crc = rd32(p + 16);
    entry.compressedSize = rd32(p + 20);
    entry.size = rd32(p + 24);
    uint64_t nameLen = rd16(p + 28), extraLen = rd16(p + 30);
    uint64_t commentLen = rd16(p + 32);
    uint64_t diskStart = rd16(p + 34);
    entry.localOffset = rd32(p + 42);
    if (cdLimit - pos - kCentralSize < nameLen + extraLen + commentLen)
      return formatError(where + " runs past the end of the central "
                                 "directory");
    entry.name.assign(reinterpret_cast<const char *>(p + kCentralSize),
                      static_cast<size_t>(nameLen));
    std::string member = "member " + quoteName(entry.name);

    // Extra fields: (id, size, data) records that must tile the field. The
    // zip64 one holds, in this order, the 64-bit values of whichever fields
    // above are saturated.
    const uint8_t *extra = p + kCentralSize + nameLen;
    for (uint64_t at = 0; at < extraLen;) {
      if (extraLen - at < 4 || extraLen - at - 4 < rd16(extra + at + 2))
        return formatError(member + ": malformed extra field");
      uint16_t id = rd16(extra + at);
      uint64_t fieldSize = rd16(extra + at + 2);
      if (id == kZip64ExtraId) {
        const uint8_t *field = extra + at + 4;
        uint64_t used = 0;
        auto take = [&](uint64_t &value, uint64_t width) {
          if (fieldSize - used < width)
            return false;
          value = width == 8 ? rd64(field + used) : rd32(field + used);
          used += width;
          return true;
        };
        if ((entry.size == 0xffffffff && !take(entry.size, 8)) ||
            (entry.compressedSize == 0xffffffff &&
             !take(entry.compressedSize, 8)) ||
            (entry.localOffset == 0xffffffff && !take(entry.localOffset, 8)) ||
            (diskStart == 0xffff && !take(diskStart, 4)))
          return formatError(member + ": zip64 extra field too short");
      }
      at += 4 + fieldSize;
    }

    if (diskStart != 0)
      return unsupported("multi-disk zip archives are not supported");
    if (flags & (kFlagEncrypted | kFlagStrongEncryption))
      return unsupported(member + ": encrypted members are not supported");
    if (entry.method != kMethodStored && entry.method != kMethodDeflate)
      return unsupported(member + ": compression method " +
                         std::to_string(entry.method) +
                         " is not supported (only stored and deflate)");
    if (entry.name.find('\0') != std::string::npos)
      return formatError(member + ": the name contains a NUL byte");
    if (entry.method == kMethodStored && entry.compressedSize != entry.size)
      return formatError(member + ": stored, but its compressed size " +
                         std::to_string(entry.compressedSize) +
                         " differs from its size " +
                         std::to_string(entry.size));

    // The local header, then the data, must lie before the central directory.
    if (entry.localOffset > cdOffset ||
        cdOffset - entry.localOffset < kLocalSize)
      return formatError(member + ": local header offset " +
                         std::to_string(entry.localOffset) +
                         " leaves no room for it before the central directory "
                         "at " +
                         std::to_string(cdOffset));
    const uint8_t *local = bytes + entry.localOffset;
    if (rd32(local) != kLocalSig)
      return formatError(member + ": no local header at offset " +
                         std::to_string(entry.localOffset));
    uint64_t localNameLen = rd16(local + 26), localExtraLen = rd16(local + 28);
    entry.dataOffset =
        entry.localOffset + kLocalSize + localNameLen + localExtraLen;
    if (entry.dataOffset > cdOffset ||
        entry.compressedSize > cdOffset - entry.dataOffset)
      return formatError(
          member + ": data " +
          range(entry.dataOffset, entry.dataOffset + entry.compressedSize) +
          " runs past the start of the central directory at " +
          std::to_string(cdOffset));
    std::string_view localName(reinterpret_cast<const char *>(local) +
                                   kLocalSize,
                               static_cast<size_t>(localNameLen));
    if (localName != entry.name)
      return formatError(member + ": its local header names it " +
                         quoteName(localName));
    if (entry.method == kMethodDeflate &&
        entry.compressedSize <
            std::numeric_limits<uint64_t>::max() / kMaxInflateRatio - 1 &&
        entry.size > (entry.compressedSize + 1) * kMaxInflateRatio)
      return formatError(member + ": records " + std::to_string(entry.size) +
                         " bytes inflated from " +
                         std::to_string(entry.compressedSize) +
                         ", more than deflate can expand to");
    if (entry.size > std::numeric_limits<size_t>::max())
      return unsupported(member + ": too large for this address space");
    list.push_back(std::move(entry));
    pos += kCentralSize + nameLen + extraLen + commentLen;
  }
  if (pos != cdLimit)
    return formatError(
        std::to_string(cdLimit - pos) + " bytes follow the last of the " +
        std::to_string(entries) + " entries of the central directory");

  // No name twice (the second would silently shadow the first), and no two
  // members sharing bytes (a classic zip-bomb amplifier).
  std::vector<const Entry *> sorted;
  sorted.reserve(list.size());
  for (const Entry &entry : list)
    sorted.push_back(&entry);
  std::sort(sorted.begin(), sorted.end(),
            [](const Entry *a, const Entry *b) { return a->name < b->name; });
  for (size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i]->name == sorted[i - 1]->name)
      return formatError("member " + quoteName(sorted[i]->name) +
                         " appears twice");
  std::sort(sorted.begin(), sorted.end(), [](const Entry *a, const Entry *b) {
    return a->localOffset < b->localOffset;
  });
  for (size_t i = 1; i < sorted.size(); ++i) {
    const Entry &prev = *sorted[i - 1];
    if (sorted[i]->localOffset < prev.dataOffset + prev.compressedSize)
      return formatError(
          "member " + quoteName(sorted[i]->name) + " at offset " +
          std::to_string(sorted[i]->localOffset) + " overlaps member " +
          quoteName(prev.name) + " at " +
          range(prev.localOffset, prev.dataOffset + prev.compressedSize));
  }

  for (const Entry &entry : list) {
    std::string member = "member " + quoteName(entry.name);
    auto memberError = [&](const std::string &message) {
      return formatError(member + ": " + message);
    };
    std::vector<uint8_t> data;
    if (entry.method == kMethodStored) {
      data.assign(bytes + entry.dataOffset,
                  bytes + entry.dataOffset + entry.compressedSize);
    } else {
      bool outOfMemory = false;
      std::function<void()> onOutOfMemory = [&] { outOfMemory = true; };
      if (!inflateMember(bytes, entry, data, memberError, onOutOfMemory)) {
        if (outOfMemory)
          sink.outOfMemory(what + ": " + member);
        return false;
      }
    }
    uint32_t crc = crc32Of(data.data(), data.size(), 0);
    if (crc != entry.crc)
      return memberError("CRC-32 mismatch: the central directory records " +
                         hex32(entry.crc) + ", the data has " + hex32(crc));
    if (!onMember(entry.name, data))
      return false;
  }
  return true;
}

ZipImage buildStoredZip(const std::vector<ZipInput> &members, bool forceZip64) {
  ZipImage image;
  std::vector<uint8_t> central;
  uint64_t offset = 0;
  for (const ZipInput &member : members) {
    uint64_t size = 0;
    uint32_t crc = 0;
    for (const ByteSpan &span : member.content) {
      size += span.size;
      crc = crc32Of(span.data, span.size, crc);
    }
    bool bigSize = forceZip64 || size > kZip32Limit;
    bool bigOffset = forceZip64 || offset > kZip32Limit;
    uint16_t version = bigSize || bigOffset ? 45 : 20;
    uint16_t flags = 0;
    for (char ch : member.name)
      if (static_cast<unsigned char>(ch) >= 0x80)
        flags = kFlagUtf8;

    std::vector<uint8_t> &local = image.owned.emplace_back();
    put32(local, kLocalSig);
    put16(local, version);
    put16(local, flags);
    put16(local, kMethodStored);
    put16(local, 0); // Time 00:00:00.
    put16(local, kDosDate);
    put32(local, crc);
    put32(local, bigSize ? 0xffffffff : size); // Compressed size.
    put32(local, bigSize ? 0xffffffff : size); // Size.
    put16(local, member.name.size());
    put16(local, bigSize ? 20 : 0);
    putBytes(local, member.name);
    if (bigSize) { // A local zip64 field holds both sizes.
      put16(local, kZip64ExtraId);
      put16(local, 16);
      put64(local, size);
      put64(local, size);
    }
    image.pieces.push_back({local.data(), local.size()});
    for (const ByteSpan &span : member.content)
      image.pieces.push_back(span);

    put32(central, kCentralSig);
    put16(central, (3u << 8) | version); // Made by: Unix.
    put16(central, version);
    put16(central, flags);
    put16(central, kMethodStored);
    put16(central, 0);
    put16(central, kDosDate);
    put32(central, crc);
    put32(central, bigSize ? 0xffffffff : size);
    put32(central, bigSize ? 0xffffffff : size);
    put16(central, member.name.size());
    uint64_t zip64Payload = (bigSize ? 16 : 0) + (bigOffset ? 8 : 0);
    put16(central, zip64Payload ? 4 + zip64Payload : 0);
    put16(central, 0);                       // Comment length.
    put16(central, 0);                       // Disk.
    put16(central, 0);                       // Internal attributes.
    put32(central, uint64_t(0100644) << 16); // A regular file, rw-r--r--.
    put32(central, bigOffset ? 0xffffffff : offset);
    putBytes(central, member.name);
    if (bigSize || bigOffset) {
      put16(central, kZip64ExtraId);
      put16(central, zip64Payload);
      if (bigSize) {
        put64(central, size);
        put64(central, size);
      }
      if (bigOffset)
        put64(central, offset);
    }
    offset += local.size() + size;
  }

  uint64_t cdOffset = offset, cdSize = central.size();
  uint64_t count = members.size();
  bool end64 = forceZip64 || count >= 0xffff || cdOffset > kZip32Limit ||
               cdSize > kZip32Limit;
  std::vector<uint8_t> &tail = image.owned.emplace_back(std::move(central));
  if (end64) {
    uint64_t recordPos = cdOffset + cdSize;
    put32(tail, kEnd64Sig);
    put64(tail, kEnd64Size - 12);
    put16(tail, (3u << 8) | 45);
    put16(tail, 45);
    put32(tail, 0); // This disk.
    put32(tail, 0); // Disk of the central directory.
    put64(tail, count);
    put64(tail, count);
    put64(tail, cdSize);
    put64(tail, cdOffset);
    put32(tail, kLocator64Sig);
    put32(tail, 0);
    put64(tail, recordPos);
    put32(tail, 1); // Total disks.
  }
  put32(tail, kEndSig);
  put16(tail, 0);
  put16(tail, 0);
  put16(tail, end64 ? 0xffff : count);
  put16(tail, end64 ? 0xffff : count);
  put32(tail, end64 ? 0xffffffff : cdSize);
  put32(tail, end64 ? 0xffffffff : cdOffset);
  put16(tail, 0); // Comment length.
  image.pieces.push_back({tail.data(), tail.size()});
  return image;
}

} // namespace loomrt::detail
