//===- TestUtil.h - Temporary directories and raw files for runtime tests -===//

#ifndef LOOMRT_TESTS_TESTUTIL_H
#define LOOMRT_TESTS_TESTUTIL_H

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace loomrt::test {

/// Sets an environment variable for the scope (unsets it when `value` is
/// null); restores it after.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name(name) {
    if (const char *old = std::getenv(name)) {
      had = true;
      previous = old;
    }
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ScopedEnv(const char *name, const std::string &value)
      : ScopedEnv(name, value.c_str()) {}
  ScopedEnv(const ScopedEnv &) = delete;
  ScopedEnv &operator=(const ScopedEnv &) = delete;
  ~ScopedEnv() {
    if (had)
      ::setenv(name, previous.c_str(), 1);
    else
      ::unsetenv(name);
  }

private:
  const char *name;
  bool had = false;
  std::string previous;
};

/// A fresh directory under $TMPDIR (or /tmp), removed with its contents.
class TempDir {
public:
  TempDir() {
    const char *base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base && *base ? base : "/tmp") + "/loomrt-test-XXXXXX";
    if (char *made = ::mkdtemp(pattern.data()))
      dir = made;
  }
  ~TempDir() {
    std::error_code ec;
    if (!dir.empty())
      std::filesystem::remove_all(dir, ec);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;

  bool ok() const { return !dir.empty(); }
  const std::string &path() const { return dir; }
  std::string file(const std::string &name) const { return dir + "/" + name; }

  /// Names of the entries in the directory, sorted.
  std::vector<std::string> list() const {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto &entry : std::filesystem::directory_iterator(dir, ec))
      names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

private:
  std::string dir;
};

inline void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// The 8-byte little-endian length prefix of a safetensors file.
inline std::string lengthPrefix(uint64_t size) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>(size >> (8 * i));
  return out;
}

/// A safetensors file built by hand: the prefix, `header` verbatim, `data`.
inline std::string rawFile(const std::string &header, const std::string &data) {
  return lengthPrefix(header.size()) + header + data;
}

/// The interpreter the NumPy interoperability tests use: the system one, so
/// that a virtual environment on PATH cannot change what they see.
inline constexpr const char *kPython = "/usr/bin/python3";

/// True if kPython exists and can import numpy (checked once).
inline bool haveNumpy() {
  static const bool have =
      ::access(kPython, X_OK) == 0 &&
      std::system((std::string(kPython) + " -c 'import numpy' >/dev/null 2>&1")
                      .c_str()) == 0;
  return have;
}

/// Writes `script` to `dir`/name and runs it with kPython, passing `dir` as
/// its argument. Returns the exit status (-1 if it did not exit normally) and
/// sets `output` to its stdout and stderr.
inline int runPython(const std::string &dir, const std::string &name,
                     const std::string &script, std::string &output) {
  std::string path = dir + "/" + name;
  writeBytes(path, script);
  std::string command =
      std::string(kPython) + " '" + path + "' '" + dir + "' 2>&1";
  output.clear();
  FILE *pipe = ::popen(command.c_str(), "r");
  if (!pipe)
    return -1;
  char buffer[4096];
  size_t got;
  while ((got = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    output.append(buffer, got);
  int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

} // namespace loomrt::test

#endif // LOOMRT_TESTS_TESTUTIL_H
