//===- Support.cpp - Internal helpers shared by the runtime's file formats ===//

#include "Support.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <sys/stat.h>

namespace loomrt::detail {

// Assigning the message may itself throw bad_alloc, hence the catches.
void ErrorSink::set(ErrorCode c, std::string message) const noexcept {
  if (code)
    *code = c;
  if (error) {
    try {
      *error = std::move(message);
    } catch (...) {
    }
  }
}

void ErrorSink::outOfMemory(const std::string &path) const noexcept {
  try {
    set(ErrorCode::OutOfMemory, path + ": out of memory");
  } catch (...) {
    set(ErrorCode::OutOfMemory, std::string());
  }
}

std::string escape(std::string_view text) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    auto byte = static_cast<unsigned char>(ch);
    if (ch == '\\') {
      out += "\\\\";
    } else if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (ch == '\r') {
      out += "\\r";
    } else if (byte < 0x20 || byte == 0x7f) {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    } else {
      out += ch;
    }
  }
  return out;
}

std::string quoteName(std::string_view text) {
  return "'" + escape(text) + "'";
}

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

bool isValidUtf8(std::string_view text) {
  size_t i = 0, n = text.size();
  while (i < n) {
    auto c = static_cast<unsigned char>(text[i]);
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (n - i < len)
      return false;
    for (size_t k = 1; k < len; ++k) {
      auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xc0) != 0x80)
        return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    // Reject overlong forms, surrogates and values past U+10FFFF.
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += len;
  }
  return true;
}

std::string joinPath(const std::string &dir, const std::string &name) {
  if (dir.empty())
    return name;
  if (dir.back() == '/')
    return dir + name;
  return dir + "/" + name;
}

std::string errnoText(int err) { return std::strerror(err); }

namespace {

/// Writes all of `data`, retrying short writes and EINTR. Returns errno or 0.
int writeAll(int fd, const uint8_t *data, size_t size) {
  while (size > 0) {
    // Linux transfers at most ~2 GiB per call; ask for less than that.
    size_t chunk = std::min<size_t>(size, size_t(1) << 30);
    ssize_t written = ::write(fd, data, chunk);
    if (written < 0) {
      if (errno == EINTR)
        continue;
      return errno;
    }
    data += written;
    size -= static_cast<size_t>(written);
  }
  return 0;
}

std::string parentDirectory(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  if (slash == 0)
    return "/";
  return path.substr(0, slash);
}

/// Owns the temporary file of an atomic write until the rename: closes it and
/// unlinks it on scope exit, exceptions included.
struct TempFile {
  std::string path; // Empty when there is nothing of ours to unlink.
  int fd = -1;
  bool renamed = false;
  ~TempFile() {
    if (fd >= 0)
      ::close(fd);
    if (!renamed && !path.empty())
      ::unlink(path.c_str());
  }
};

} // namespace

bool readWholeFile(const std::string &path, std::vector<uint8_t> &out,
                   const ErrorSink &sink) {
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
  auto size = static_cast<uint64_t>(st.st_size);
  if (size > std::numeric_limits<size_t>::max()) {
    sink.set(ErrorCode::Unsupported,
             path + ": file too large for this address space");
    return false;
  }
  out.resize(static_cast<size_t>(size));
  size_t done = 0;
  while (done < out.size()) {
    ssize_t got = ::pread(fd.fd, out.data() + done, out.size() - done,
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
  return true;
}

bool writeFileAtomically(const std::string &path,
                         const std::vector<ByteSpan> &pieces,
                         const ErrorSink &sink) {
  TempFile tmp;
  tmp.path = path + ".tmp." + std::to_string(::getpid());
  const std::string &tmpPath = tmp.path;
  // O_NOFOLLOW: never write through a symlink planted at the temp name.
  tmp.fd = ::open(tmpPath.c_str(),
                  O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (tmp.fd < 0) {
    int err = errno;
    tmp.path.clear(); // Not ours to unlink.
    sink.set(ErrorCode::IO,
             path + ": cannot create temporary file: " + errnoText(err));
    return false;
  }
  auto ioFail = [&](const char *what, int err) {
    sink.set(ErrorCode::IO, path + ": " + what + " " + quoteName(tmpPath) +
                                ": " + errnoText(err));
    return false;
  };
  off_t end = 0;
  for (const ByteSpan &piece : pieces) {
    end += static_cast<off_t>(piece.size);
    if (!piece.data && piece.size > 0) {
      // Zeros: skipped, a hole the final size below covers.
      if (::lseek(tmp.fd, static_cast<off_t>(piece.size), SEEK_CUR) < 0) {
        int err = errno;
        return ioFail("cannot seek in", err);
      }
      continue;
    }
    if (int err = writeAll(tmp.fd, piece.data, piece.size))
      return ioFail("cannot write", err);
  }
  if (::ftruncate(tmp.fd, end) != 0) {
    int err = errno;
    return ioFail("cannot size", err);
  }
  // The data must be on disk before the rename makes it visible, or a crash
  // could leave a complete-looking file full of zeros.
  if (::fsync(tmp.fd) != 0) {
    int err = errno;
    return ioFail("cannot fsync", err);
  }
  int closeResult = ::close(tmp.fd);
  int closeErr = errno;
  tmp.fd = -1;
  if (closeResult != 0)
    return ioFail("cannot close", closeErr);
  if (::rename(tmpPath.c_str(), path.c_str()) != 0) {
    int err = errno;
    return ioFail("cannot rename", err);
  }
  tmp.renamed = true;

  // Persist the directory entry too; filesystems that cannot fsync a
  // directory say EINVAL, and there is nothing more to do on those.
  std::string dir = parentDirectory(path);
  FdGuard dirFd{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  int dirErr = dirFd.fd < 0 ? errno : 0;
  if (dirFd.fd >= 0 && ::fsync(dirFd.fd) != 0 && errno != EINVAL &&
      errno != ENOTSUP && errno != EROFS)
    dirErr = errno;
  if (dirErr) {
    sink.set(ErrorCode::IO, path + ": written, but cannot fsync directory " +
                                quoteName(dir) + ": " + errnoText(dirErr));
    return false;
  }
  return true;
}

} // namespace loomrt::detail
