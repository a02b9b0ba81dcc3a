//===- Safetensors.cpp - Validating safetensors reader and atomic writer --===//
//
// Exceptions stop here: nlohmann::json and the standard library may throw
// inside this file, and every public function catches everything, because the
// callers build with -fno-exceptions.
//
//===----------------------------------------------------------------------===//

#include "loomrt/Safetensors.h"

#include "Support.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <new>
#include <set>
#include <sys/mman.h>
#include <sys/stat.h>
#include <tuple>
#include <unistd.h>
#include <utility>

namespace loomrt {

using detail::ByteSpan;
using detail::errnoText;
using detail::ErrorSink;
using detail::escape;
using detail::FdGuard;
using detail::formatShape;
using detail::isValidUtf8;
using detail::quoteName;

namespace {

// Keeps the header's key order, so tensors that share an offset (zero-sized
// ones) keep the order they were written in.
using Json = nlohmann::ordered_json;

constexpr std::string_view kMetadataKey = "__metadata__";

std::string formatRange(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

std::string supportedDTypes() {
  std::string out;
  for (DType dtype : kAllDTypes) {
    if (!out.empty())
      out += ", ";
    out += dtypeToSafetensors(dtype);
  }
  return out;
}

/// Dtypes the safetensors format defines but Loom does not handle; reported
/// as Unsupported rather than Format, since such a file is not broken.
bool isKnownSafetensorsDType(std::string_view name) {
  static constexpr std::string_view kOthers[] = {
      "U16",     "U32",     "U64", "F8_E4M3", "F8_E5M2",     "F8_E8M0",
      "F6_E2M3", "F6_E3M2", "F4",  "C64",     "F8_E4M3FNUZ", "F8_E5M2FNUZ"};
  return std::find(std::begin(kOthers), std::end(kOthers), name) !=
         std::end(kOthers);
}

} // namespace

//===----------------------------------------------------------------------===//
// SafetensorsWriter
//===----------------------------------------------------------------------===//

void SafetensorsWriter::fail(ErrorCode code, std::string message) noexcept {
  if (deferredCode != ErrorCode::Ok)
    return; // The first problem is the one worth reporting.
  deferredCode = code;
  try {
    deferredError = std::move(message);
  } catch (...) {
    deferredCode = ErrorCode::OutOfMemory;
  }
}

void SafetensorsWriter::addEntry(std::string &name, DType dtype,
                                 std::vector<int64_t> &shape, const void *data,
                                 size_t nbytes, bool copy, bool zeros) noexcept {
  try {
    std::string where = "tensor " + quoteName(name) + ": ";
    if (name == kMetadataKey)
      return fail(ErrorCode::InvalidArgument,
                  where + "the name is reserved by the safetensors format");
    if (!isValidUtf8(name))
      return fail(ErrorCode::InvalidArgument,
                  where + "the name is not valid UTF-8");
    if (!isValidDType(dtype))
      return fail(ErrorCode::InvalidArgument,
                  where + "invalid dtype value " +
                      std::to_string(static_cast<int>(dtype)));
    for (int64_t dim : shape)
      if (dim < 0)
        return fail(ErrorCode::InvalidArgument,
                    where + "shape " + formatShape(shape) +
                        " has a negative dimension");
    std::optional<uint64_t> expected = checkedByteSize(dtype, shape);
    if (!expected)
      return fail(ErrorCode::InvalidArgument,
                  where + "shape " + formatShape(shape) + " of " +
                      std::string(dtypeToShortName(dtype)) +
                      " has a byte size that overflows 64 bits");
    if (*expected != nbytes)
      return fail(ErrorCode::InvalidArgument,
                  where + std::to_string(nbytes) + " bytes given, but shape " +
                      formatShape(shape) + " of " +
                      std::string(dtypeToShortName(dtype)) + " needs " +
                      std::to_string(*expected));
    if (!data && nbytes > 0 && !zeros)
      return fail(ErrorCode::InvalidArgument, where + "data is null");

    Entry entry;
    entry.name = std::move(name);
    entry.dtype = dtype;
    entry.shape = std::move(shape);
    entry.nbytes = nbytes;
    entry.borrowed = nullptr;
    entry.zeros = zeros;
    if (zeros) {
      // No bytes: a hole in the file.
    } else if (copy && nbytes > 0) {
      const auto *bytes = static_cast<const uint8_t *>(data);
      entry.owned.assign(bytes, bytes + nbytes);
    } else if (!copy) {
      entry.borrowed = static_cast<const uint8_t *>(data);
    }
    entries.push_back(std::move(entry));
  } catch (const std::bad_alloc &) {
    fail(ErrorCode::OutOfMemory, "out of memory adding a tensor");
  } catch (...) {
    fail(ErrorCode::InvalidArgument, "unexpected error adding a tensor");
  }
}

void SafetensorsWriter::add(std::string name, DType dtype,
                            std::vector<int64_t> shape, const void *data,
                            size_t nbytes) noexcept {
  addEntry(name, dtype, shape, data, nbytes, /*copy=*/true);
}

void SafetensorsWriter::addBorrowed(std::string name, DType dtype,
                                    std::vector<int64_t> shape,
                                    const void *data, size_t nbytes) noexcept {
  addEntry(name, dtype, shape, data, nbytes, /*copy=*/false);
}

void SafetensorsWriter::addZeros(std::string name, DType dtype,
                                 std::vector<int64_t> shape) noexcept {
  std::optional<uint64_t> bytes =
      isValidDType(dtype) ? checkedByteSize(dtype, shape) : std::optional<uint64_t>(0);
  addEntry(name, dtype, shape, nullptr, bytes ? *bytes : 0, /*copy=*/false,
           /*zeros=*/true);
}

void SafetensorsWriter::setMetadata(std::string key,
                                    std::string value) noexcept {
  try {
    if (!isValidUtf8(key) || !isValidUtf8(value))
      return fail(ErrorCode::InvalidArgument,
                  "metadata " + quoteName(key) +
                      ": key and value must be UTF-8");
    meta[std::move(key)] = std::move(value);
  } catch (const std::bad_alloc &) {
    fail(ErrorCode::OutOfMemory, "out of memory setting metadata");
  } catch (...) {
    fail(ErrorCode::InvalidArgument, "unexpected error setting metadata");
  }
}

bool SafetensorsWriter::write(const std::string &path, std::string *error,
                              ErrorCode *code) const noexcept {
  ErrorSink sink{error, code};
  try {
    if (path.empty()) {
      sink.set(ErrorCode::InvalidArgument, "safetensors writer: empty path");
      return false;
    }
    if (deferredCode != ErrorCode::Ok) {
      sink.set(deferredCode, path + ": " + deferredError);
      return false;
    }

    // Duplicate names: sort pointers instead of keeping a set during add(),
    // so add() stays cheap and this stays O(n log n).
    std::vector<const Entry *> byName;
    byName.reserve(entries.size());
    for (const Entry &entry : entries)
      byName.push_back(&entry);
    std::sort(byName.begin(), byName.end(),
              [](const Entry *a, const Entry *b) { return a->name < b->name; });
    for (size_t i = 1; i < byName.size(); ++i) {
      if (byName[i]->name == byName[i - 1]->name) {
        sink.set(ErrorCode::InvalidArgument, path + ": tensor " +
                                                 quoteName(byName[i]->name) +
                                                 " was added twice");
        return false;
      }
    }

    Json header = Json::object();
    if (!meta.empty()) {
      Json &metaJson = header[std::string(kMetadataKey)];
      metaJson = Json::object();
      for (const auto &[key, value] : meta)
        metaJson[key] = value;
    }
    uint64_t offset = 0;
    for (const Entry &entry : entries) {
      uint64_t end = offset + entry.nbytes;
      if (end < offset) {
        sink.set(ErrorCode::InvalidArgument,
                 path + ": total tensor size overflows 64 bits");
        return false;
      }
      Json info = Json::object();
      info["dtype"] = std::string(dtypeToSafetensors(entry.dtype));
      info["shape"] = entry.shape;
      info["data_offsets"] = Json::array({offset, end});
      header[entry.name] = std::move(info);
      offset = end;
    }
    std::string text = header.dump();
    // Spaces after the JSON are allowed by the format; they make the data
    // start 8-byte aligned in the file (and in a mapping of it).
    text.append((8 - text.size() % 8) % 8, ' ');
    uint8_t length[8];
    for (int i = 0; i < 8; ++i)
      length[i] = static_cast<uint8_t>(uint64_t(text.size()) >> (8 * i));

    std::vector<ByteSpan> pieces;
    pieces.reserve(2 + entries.size());
    pieces.push_back({length, sizeof(length)});
    pieces.push_back(
        {reinterpret_cast<const uint8_t *>(text.data()), text.size()});
    for (const Entry &entry : entries)
      pieces.push_back(
          {entry.zeros           ? nullptr
           : entry.owned.empty() ? entry.borrowed
                                 : entry.owned.data(),
           entry.nbytes});
    // Leaves no temporary file behind, also when an exception escapes it.
    if (!detail::writeFileAtomically(path, pieces, sink))
      return false;
    sink.ok();
    return true;
  } catch (const std::bad_alloc &) {
    sink.outOfMemory(path);
  } catch (const std::exception &e) {
    try {
      sink.set(ErrorCode::InvalidArgument, path + ": " + e.what());
    } catch (...) {
      sink.outOfMemory(path);
    }
  } catch (...) {
    sink.set(ErrorCode::InvalidArgument, std::string());
  }
  return false;
}

//===----------------------------------------------------------------------===//
// SafetensorsFile
//===----------------------------------------------------------------------===//

struct SafetensorsFile::Impl {
  std::string path;
  // The whole file: a read-only mapping, or `copy` where mmap is refused.
  const uint8_t *bytes = nullptr;
  uint64_t size = 0;
  void *mapping = nullptr;
  size_t mappingSize = 0;
  std::vector<uint8_t> copy;

  std::vector<TensorView> tensors;
  std::map<std::string, size_t, std::less<>> index;
  std::map<std::string, std::string> metadata;

  ~Impl() {
    if (mapping)
      ::munmap(mapping, mappingSize);
  }

  bool load(const ErrorSink &sink);
  bool parse(const ErrorSink &sink);
};

bool SafetensorsFile::Impl::load(const ErrorSink &sink) {
  // O_NONBLOCK keeps open() from hanging on a FIFO; we reject those below.
  FdGuard fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (fd.fd < 0) {
    int err = errno;
    sink.set(ErrorCode::IO, path + ": cannot open: " + errnoText(err));
    return false;
  }
  struct stat st;
  if (::fstat(fd.fd, &st) != 0) {
    int err = errno;
    sink.set(ErrorCode::IO, path + ": cannot stat: " + errnoText(err));
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    sink.set(ErrorCode::IO, path + ": not a regular file");
    return false;
  }
  size = static_cast<uint64_t>(st.st_size);
  if (size < 8) {
    sink.set(ErrorCode::Format,
             path + ": file is " + std::to_string(size) +
                 " bytes, too small for the 8-byte header length "
                 "(truncated or not a safetensors file)");
    return false;
  }
  if (size > std::numeric_limits<size_t>::max()) {
    sink.set(ErrorCode::Unsupported,
             path + ": file too large for this address space");
    return false;
  }
  void *mapped = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ,
                        MAP_PRIVATE, fd.fd, 0);
  if (mapped != MAP_FAILED) {
    mapping = mapped;
    mappingSize = static_cast<size_t>(size);
    bytes = static_cast<const uint8_t *>(mapped);
    return true;
  }
  // Some filesystems cannot be mapped; reading the file is slower but fine.
  copy.resize(static_cast<size_t>(size));
  size_t done = 0;
  while (done < copy.size()) {
    ssize_t got = ::pread(fd.fd, copy.data() + done, copy.size() - done,
                          static_cast<off_t>(done));
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      int err = errno;
      sink.set(ErrorCode::IO, path + ": cannot read: " + errnoText(err));
      return false;
    }
    if (got == 0) {
      sink.set(ErrorCode::IO, path + ": file shrank while being read");
      return false;
    }
    done += static_cast<size_t>(got);
  }
  bytes = copy.data();
  return true;
}

bool SafetensorsFile::Impl::parse(const ErrorSink &sink) {
  auto formatError = [&](std::string message) {
    sink.set(ErrorCode::Format, path + ": " + std::move(message));
    return false;
  };

  uint64_t headerSize = 0;
  for (int i = 7; i >= 0; --i)
    headerSize = (headerSize << 8) | bytes[i];
  uint64_t available = size - 8;
  if (headerSize > available)
    return formatError("header size " + std::to_string(headerSize) +
                       " exceeds the " + std::to_string(available) +
                       " bytes after the 8-byte length (truncated or not a "
                       "safetensors file)");
  if (headerSize > kSafetensorsMaxHeaderSize)
    return formatError("header size " + std::to_string(headerSize) +
                       " exceeds the limit of " +
                       std::to_string(kSafetensorsMaxHeaderSize) + " bytes");
  if (headerSize == 0 || bytes[8] != '{')
    return formatError("header does not start with '{' (not a safetensors "
                       "file?)");

  // Duplicate keys would silently shadow one another in a JSON object; the
  // callback sees every key while parsing, so reject them there.
  std::vector<std::set<std::string>> openObjects;
  std::string duplicate;
  bool duplicateIsTensor = false;
  Json::parser_callback_t callback =
      [&](int /*depth*/, Json::parse_event_t event, Json &parsed) {
        if (event == Json::parse_event_t::object_start) {
          openObjects.emplace_back();
        } else if (event == Json::parse_event_t::object_end) {
          openObjects.pop_back();
        } else if (event == Json::parse_event_t::key && duplicate.empty() &&
                   !openObjects.empty() && parsed.is_string()) {
          const auto &key = parsed.get_ref<const std::string &>();
          if (!openObjects.back().insert(key).second) {
            duplicate = key;
            duplicateIsTensor = openObjects.size() == 1;
          }
        }
        return true;
      };

  const char *text = reinterpret_cast<const char *>(bytes + 8);
  // nlohmann's lexer reads a NUL as the end of input, which would let bytes
  // after it hide in the header unparsed. JSON never needs a raw NUL.
  if (const void *nul = std::memchr(text, '\0', headerSize))
    return formatError("header contains a NUL byte at offset " +
                       std::to_string(static_cast<const char *>(nul) - text));
  Json header;
  try {
    header = Json::parse(text, text + headerSize, callback);
  } catch (const Json::parse_error &e) {
    // Drop nlohmann's "[json.exception.parse_error.101] " tag.
    std::string what = e.what();
    size_t tag = what.find("] ");
    if (what.rfind("[json.exception.", 0) == 0 && tag != std::string::npos)
      what = what.substr(tag + 2);
    return formatError("header is not valid JSON: " + what);
  }
  if (!duplicate.empty())
    return formatError(
        duplicateIsTensor
            ? "tensor " + quoteName(duplicate) + " appears twice in the header"
            : "duplicate key " + quoteName(duplicate) + " in the header");
  if (!header.is_object())
    return formatError("header is not a JSON object");

  uint64_t bufferSize = available - headerSize;
  const uint8_t *buffer = bytes + 8 + headerSize;

  struct Pending {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    uint64_t begin, end;
    size_t headerIndex; // Breaks ties so zero-sized tensors keep file order.
  };
  std::vector<Pending> pending;
  pending.reserve(header.size());

  for (const auto &item : header.items()) {
    const std::string &key = item.key();
    const Json &value = item.value();
    if (key == kMetadataKey) {
      if (!value.is_object())
        return formatError("__metadata__ must be an object of strings, got " +
                           std::string(value.type_name()));
      for (const auto &entry : value.items()) {
        if (!entry.value().is_string())
          return formatError("__metadata__ entry " + quoteName(entry.key()) +
                             " must be a string, got " +
                             std::string(entry.value().type_name()));
        metadata[entry.key()] = entry.value().get<std::string>();
      }
      continue;
    }

    auto tensorError = [&](std::string message) {
      return formatError("tensor " + quoteName(key) + ": " +
                         std::move(message));
    };
    if (!value.is_object())
      return tensorError("entry must be an object, got " +
                         std::string(value.type_name()));

    Pending p;
    p.name = key;
    p.headerIndex = pending.size();
    auto dtypeIt = value.find("dtype");
    if (dtypeIt == value.end())
      return tensorError("missing 'dtype'");
    if (!dtypeIt->is_string())
      return tensorError("'dtype' must be a string, got " +
                         std::string(dtypeIt->type_name()));
    const auto &dtypeName = dtypeIt->get_ref<const std::string &>();
    std::optional<DType> dtype = dtypeFromSafetensors(dtypeName);
    if (!dtype) {
      bool known = isKnownSafetensorsDType(dtypeName);
      sink.set(known ? ErrorCode::Unsupported : ErrorCode::Format,
               path + ": tensor " + quoteName(key) + ": " +
                   (known ? "unsupported" : "unknown") + " dtype " +
                   quoteName(dtypeName) + " (supported: " + supportedDTypes() +
                   ")");
      return false;
    }
    p.dtype = *dtype;

    auto shapeIt = value.find("shape");
    if (shapeIt == value.end())
      return tensorError("missing 'shape'");
    if (!shapeIt->is_array())
      return tensorError("'shape' must be an array, got " +
                         std::string(shapeIt->type_name()));
    for (size_t i = 0; i < shapeIt->size(); ++i) {
      const Json &dim = (*shapeIt)[i];
      bool valid =
          (dim.is_number_unsigned() &&
           dim.get<uint64_t>() <=
               static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) ||
          (dim.is_number_integer() && dim.get<int64_t>() >= 0);
      if (!valid)
        return tensorError("shape[" + std::to_string(i) + "] is " + dim.dump() +
                           "; dimensions must be non-negative 64-bit integers");
      p.shape.push_back(dim.get<int64_t>());
    }

    auto offsetsIt = value.find("data_offsets");
    if (offsetsIt == value.end())
      return tensorError("missing 'data_offsets'");
    if (!offsetsIt->is_array() || offsetsIt->size() != 2 ||
        !(*offsetsIt)[0].is_number_unsigned() ||
        !(*offsetsIt)[1].is_number_unsigned())
      return tensorError("'data_offsets' must be [begin, end] with "
                         "non-negative integers, got " +
                         offsetsIt->dump());
    p.begin = (*offsetsIt)[0].get<uint64_t>();
    p.end = (*offsetsIt)[1].get<uint64_t>();
    std::string range = "data_offsets " + formatRange(p.begin, p.end);
    if (p.begin > p.end)
      return tensorError(range + " end before they begin");
    if (p.end > bufferSize)
      return tensorError(range + " exceed buffer of " +
                         std::to_string(bufferSize) + " bytes");

    std::string typeText = "shape " + formatShape(p.shape) + " of " +
                           std::string(dtypeToShortName(p.dtype));
    std::optional<uint64_t> expected = checkedByteSize(p.dtype, p.shape);
    if (!expected)
      return tensorError(typeText + " has a byte size that overflows 64 bits");
    if (p.end - p.begin != *expected)
      return tensorError(range + " hold " + std::to_string(p.end - p.begin) +
                         " bytes, but " + typeText + " needs " +
                         std::to_string(*expected));
    pending.push_back(std::move(p));
  }

  // The format requires the tensors to tile the buffer exactly: no overlap
  // (two tensors aliasing one another) and no holes (room for a hidden
  // payload). Sort by range, then header order among zero-sized tensors at
  // one offset.
  std::sort(pending.begin(), pending.end(),
            [](const Pending &a, const Pending &b) {
              return std::tie(a.begin, a.end, a.headerIndex) <
                     std::tie(b.begin, b.end, b.headerIndex);
            });
  uint64_t cursor = 0;
  const Pending *previous = nullptr;
  for (const Pending &p : pending) {
    if (p.begin < cursor)
      return formatError("tensor " + quoteName(p.name) + ": data_offsets " +
                         formatRange(p.begin, p.end) + " overlap tensor " +
                         quoteName(previous->name) + " at " +
                         formatRange(previous->begin, previous->end));
    if (p.begin > cursor)
      return formatError("bytes " + formatRange(cursor, p.begin) +
                         " of the buffer belong to no tensor (before tensor " +
                         quoteName(p.name) + ")");
    cursor = p.end;
    previous = &p;
  }
  if (cursor != bufferSize)
    return formatError("bytes " + formatRange(cursor, bufferSize) +
                       " at the end of the buffer belong to no tensor");

  tensors.reserve(pending.size());
  for (Pending &p : pending) {
    TensorView view;
    view.name = std::move(p.name);
    view.dtype = p.dtype;
    view.shape = std::move(p.shape);
    view.data = buffer + p.begin;
    view.nbytes = static_cast<size_t>(p.end - p.begin);
    tensors.push_back(std::move(view));
  }
  for (size_t i = 0; i < tensors.size(); ++i)
    index.emplace(tensors[i].name, i);
  return true;
}

SafetensorsFile::SafetensorsFile() noexcept = default;
SafetensorsFile::~SafetensorsFile() = default;

std::unique_ptr<SafetensorsFile>
SafetensorsFile::open(const std::string &path, std::string *error,
                      ErrorCode *code) noexcept {
  ErrorSink sink{error, code};
  try {
    std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
    file->impl = std::make_unique<Impl>();
    file->impl->path = path;
    if (!file->impl->load(sink) || !file->impl->parse(sink))
      return nullptr;
    sink.ok();
    return file;
  } catch (const std::bad_alloc &) {
    sink.outOfMemory(path);
  } catch (const std::exception &e) {
    // Only a bug could get here; still report rather than terminate.
    try {
      sink.set(ErrorCode::Format, path + ": " + e.what());
    } catch (...) {
      sink.outOfMemory(path);
    }
  } catch (...) {
    sink.set(ErrorCode::Format, std::string());
  }
  return nullptr;
}

const std::vector<TensorView> &SafetensorsFile::tensors() const noexcept {
  return impl->tensors;
}

const TensorView *SafetensorsFile::find(std::string_view name) const noexcept {
  auto it = impl->index.find(name);
  return it == impl->index.end() ? nullptr : &impl->tensors[it->second];
}

const std::map<std::string, std::string> &
SafetensorsFile::metadata() const noexcept {
  return impl->metadata;
}

const std::string &SafetensorsFile::path() const noexcept { return impl->path; }

uint64_t SafetensorsFile::fileSize() const noexcept { return impl->size; }

std::string formatSafetensorsSummary(const SafetensorsFile &file) noexcept {
  try {
    std::string out;
    for (const TensorView &t : file.tensors()) {
      out += escape(t.name);
      out += ' ';
      out += dtypeToShortName(t.dtype);
      out += ' ';
      out += formatShape(t.shape);
      out += ' ';
      out += std::to_string(t.nbytes);
      out += '\n';
    }
    for (const auto &[key, value] : file.metadata())
      out += "__metadata__ " + escape(key) + "=" + escape(value) + "\n";
    return out;
  } catch (...) {
    return std::string();
  }
}

} // namespace loomrt
