//===- TestUtil.h - Temporary directories and raw files for runtime tests -===//

#ifndef LOOMRT_TESTS_TESTUTIL_H
#define LOOMRT_TESTS_TESTUTIL_H

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace loomrt::test {

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

} // namespace loomrt::test

#endif // LOOMRT_TESTS_TESTUTIL_H
