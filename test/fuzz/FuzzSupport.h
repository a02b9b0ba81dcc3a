//===- FuzzSupport.h - What every Loom fuzz harness shares ------*- C++ -*-===//
//
// The readers under test take paths, so each harness owns one private
// directory (mkdtemp, mode 0700) for the whole process and writes the input
// there; nothing is written anywhere else. Every run removes what it wrote,
// so no run sees another's files, and the directory goes at exit.
//
// A harness also checks that a run leaks no file descriptor (the lowest free
// descriptor is the same before and after it) and leaves no file behind.
//
// Plain POSIX and the C++ standard library only: the runtime harnesses share
// this header and must not see MLIR or LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_FUZZ_FUZZSUPPORT_H
#define LOOM_TEST_FUZZ_FUZZSUPPORT_H

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace loomfuzz {

/// Stops the process with a message: a broken invariant is a finding.
[[noreturn]] inline void fail(const char *what) {
  std::fprintf(stderr, "loom-fuzz: %s\n", what);
  std::fflush(stderr);
  std::abort();
}

/// The harness's private directory.
class TempDir {
public:
  /// The process's directory, made on first use under $TMPDIR (or /tmp).
  static TempDir &get() {
    static TempDir *dir = new TempDir();
    return *dir;
  }

  const std::string &path() const { return root; }

  /// Writes `size` bytes to `<dir>/<name>` (replacing it) and returns the
  /// path. `name` is a fixed plain name chosen by the harness.
  std::string write(const char *name, const uint8_t *data, size_t size) {
    std::string file = root + "/" + name;
    int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
                                      O_NOFOLLOW,
                    0600);
    if (fd < 0)
      fail("cannot create the input file in the temporary directory");
    while (size > 0) {
      ssize_t n = ::write(fd, data, size);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        fail("cannot write the input file");
      data += n;
      size -= static_cast<size_t>(n);
    }
    ::close(fd);
    return file;
  }

  /// Removes the input file `name` written by write(). The readers create
  /// nothing, so any other file in the directory but those in `keep` (set up
  /// once by the harness) is a finding.
  void removeInput(const char *name, const std::vector<std::string> &keep = {}) {
    std::string file = root + "/" + name;
    if (::unlink(file.c_str()) != 0)
      fail("cannot remove the input file");
    DIR *d = ::opendir(root.c_str());
    if (!d)
      fail("cannot list the temporary directory");
    bool stray = false;
    while (struct dirent *e = ::readdir(d)) {
      std::string entry = e->d_name;
      bool known = entry == "." || entry == "..";
      for (const std::string &k : keep)
        known = known || k == entry;
      stray = stray || !known;
    }
    ::closedir(d);
    if (stray)
      fail("the code under test left a file in the temporary directory");
  }

private:
  TempDir() {
    const char *base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base && *base ? base : "/tmp") + "/loom-fuzz-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data()))
      fail("cannot create a temporary directory (set TMPDIR)");
    root = buf.data();
    std::atexit([] { TempDir::get().removeAll(); });
  }

  void removeAll() {
    if (DIR *d = ::opendir(root.c_str())) {
      std::vector<std::string> names;
      while (struct dirent *e = ::readdir(d))
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
          names.push_back(root + "/" + e->d_name);
      ::closedir(d);
      for (const std::string &name : names)
        ::unlink(name.c_str());
    }
    ::rmdir(root.c_str());
  }

  std::string root;
};

/// The lowest free file descriptor (what the next open() would get).
inline int lowestFreeFd() {
  int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fail("cannot open /dev/null");
  ::close(fd);
  return fd;
}

/// Fails if the lowest free descriptor is not `before` (taken with
/// lowestFreeFd() when the run began): the code under test kept one open.
inline void checkNoFdLeak(int before) {
  if (lowestFreeFd() != before)
    fail("a file descriptor leaked during the run");
}

} // namespace loomfuzz

#endif // LOOM_TEST_FUZZ_FUZZSUPPORT_H
