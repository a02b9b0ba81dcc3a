//===- LoomTokens.cpp - loom-tokens: text files into a token stream -------===//
//
// Writes the flat token file `loom-run --tokens` trains from, for demos and
// tests: each input file is one document, its bytes (token = byte value) or
// its characters through a small vocabulary (a JSON file {"chars": [...],
// "unknown_id": N}, as examples/charlm/vocab.json), optionally followed by
// a separator token. Real tokenizers (BPE, SentencePiece) stay outside:
// their ids written as little-endian uint16/uint32 make the same file.
// Exit status: 0 written, 1 an input could not be read or encoded, 2 the
// command line is wrong.
//
//===----------------------------------------------------------------------===//

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr const char *kUsage =
    "usage: loom-tokens -o OUT.bin [--vocab VOCAB.json] [--separator ID]\n"
    "                   [--format=uint16|uint32] FILE...\n"
    "\n"
    "Writes FILE... as one stream of token ids for `loom-run --train --data\n"
    "OUT.bin --tokens=FORMAT` (docs/loom-run.md, \"Token streams\"): each\n"
    "file is one document, in the order given.\n"
    "\n"
    "  -o OUT.bin           the token file to write (little-endian, no header)\n"
    "  --vocab VOCAB.json   characters (UTF-8) to ids: {\"chars\": [c0, c1,\n"
    "                       ...], \"unknown_id\": N}; character ci is id i, any\n"
    "                       other character (or a byte that is not UTF-8) is\n"
    "                       N, or an error without \"unknown_id\". Without\n"
    "                       --vocab every byte is its own id (0-255)\n"
    "  --separator ID       append ID after each file (the document separator\n"
    "                       of loom-run --doc-separator)\n"
    "  --format=F           uint16 (default) or uint32\n"
    "  --help               print this help\n"
    "\n"
    "Prints how many tokens and documents it wrote. Exit status: 0 written,\n"
    "1 a file could not be read or encoded, 2 the command line is wrong.\n";

struct Options {
  std::string out, vocab;
  std::vector<std::string> inputs;
  int64_t separator = -1;
  bool wide = false;
};

[[noreturn]] void usage(const std::string &why) {
  std::fprintf(stderr, "loom-tokens: error: %s\n%s", why.c_str(), kUsage);
  std::exit(2);
}

[[noreturn]] void fail(const std::string &why) {
  std::fprintf(stderr, "loom-tokens: error: %s\n", why.c_str());
  std::exit(1);
}

int64_t parseId(const std::string &flag, const std::string &v) {
  char *end = nullptr;
  errno = 0;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end || errno || x < 0)
    usage(flag + " expects a non-negative integer, got '" + v + "'");
  return x;
}

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const std::string &flag) -> std::string {
      if (a.size() > flag.size() && a.compare(0, flag.size() + 1,
                                              flag + "=") == 0)
        return a.substr(flag.size() + 1);
      if (i + 1 >= argc)
        usage(flag + " needs a value");
      return argv[++i];
    };
    auto is = [&](const std::string &flag) {
      return a == flag || a.rfind(flag + "=", 0) == 0;
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (is("-o")) {
      o.out = value("-o");
    } else if (is("--vocab")) {
      o.vocab = value("--vocab");
    } else if (is("--separator")) {
      o.separator = parseId("--separator", value("--separator"));
    } else if (is("--format")) {
      std::string f = value("--format");
      if (f != "uint16" && f != "uint32")
        usage("--format expects uint16 or uint32, got '" + f + "'");
      o.wide = f == "uint32";
    } else if (a.size() > 1 && a[0] == '-') {
      usage("unknown option '" + a + "'");
    } else {
      o.inputs.push_back(a);
    }
  }
  if (o.out.empty())
    usage("-o OUT.bin is required");
  if (o.inputs.empty())
    usage("no input files");
  return o;
}

/// A vocabulary of characters (UTF-8 strings of one code point).
struct Vocab {
  std::map<std::string, int64_t> ids;
  int64_t unknown = -1, size = 0;
};

Vocab loadVocab(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    fail(path + ": cannot read the vocabulary: " + std::strerror(errno));
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("chars") ||
      !j["chars"].is_array())
    fail(path + ": not a vocabulary: a JSON object with a \"chars\" array is "
                "expected");
  Vocab v;
  if (j.contains("unknown_id")) {
    if (!j["unknown_id"].is_number_integer())
      fail(path + ": \"unknown_id\" must be an integer");
    v.unknown = j["unknown_id"].get<int64_t>();
  }
  const auto &chars = j["chars"];
  v.size = static_cast<int64_t>(chars.size());
  for (int64_t i = 0; i < v.size; ++i) {
    if (!chars[i].is_string())
      fail(path + ": \"chars\"[" + std::to_string(i) + "] is not a string");
    if (i != v.unknown)
      v.ids.emplace(chars[i].get<std::string>(), i);
  }
  if (v.unknown >= v.size || v.unknown < -1)
    fail(path + ": \"unknown_id\" " + std::to_string(v.unknown) +
         " is outside the " + std::to_string(v.size) + " characters");
  return v;
}

/// The length of the UTF-8 sequence starting at `s[i]`, or 0 if invalid.
size_t utf8Length(const std::string &s, size_t i) {
  auto b = static_cast<unsigned char>(s[i]);
  size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3
                                         : (b >> 3) == 30   ? 4
                                                            : 0;
  if (n == 0 || i + n > s.size())
    return 0;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2)
      return 0;
  return n;
}

/// Appends the ids of `text` (from `path`, for errors).
void encode(const std::string &path, const std::string &text,
            const Vocab *vocab, std::vector<uint32_t> &out) {
  if (!vocab) {
    for (char c : text)
      out.push_back(static_cast<unsigned char>(c));
    return;
  }
  int64_t line = 1;
  for (size_t i = 0; i < text.size();) {
    size_t n = utf8Length(text, i);
    std::string ch = text.substr(i, n ? n : 1);
    auto it = n ? vocab->ids.find(ch) : vocab->ids.end();
    if (it != vocab->ids.end()) {
      out.push_back(static_cast<uint32_t>(it->second));
    } else if (vocab->unknown >= 0) {
      out.push_back(static_cast<uint32_t>(vocab->unknown));
    } else {
      fail(path + ":" + std::to_string(line) + ": " +
           (n ? "character '" + ch + "' is not in the vocabulary"
              : std::string("a byte that is not UTF-8")) +
           " (and it has no \"unknown_id\")");
    }
    line += ch == "\n";
    i += n ? n : 1;
  }
}

} // namespace

int main(int argc, char **argv) {
  Options o = parse(argc, argv);
  std::optional<Vocab> vocab;
  if (!o.vocab.empty())
    vocab = loadVocab(o.vocab);
  int64_t most = o.wide ? int64_t(0xffffffff) : int64_t(0xffff);
  int64_t largest = vocab ? vocab->size - 1 : 255;
  if (o.separator > most)
    usage("--separator " + std::to_string(o.separator) + " does not fit in " +
          (o.wide ? "uint32" : "uint16"));
  if (largest > most)
    fail(o.vocab + ": " + std::to_string(vocab->size) +
         " characters do not fit in uint16 ids; use --format=uint32");
  std::vector<uint32_t> ids;
  for (const std::string &path : o.inputs) {
    std::ifstream in(path, std::ios::binary);
    if (!in)
      fail(path + ": cannot read: " + std::strerror(errno));
    std::stringstream buf;
    buf << in.rdbuf();
    encode(path, buf.str(), vocab ? &*vocab : nullptr, ids);
    if (o.separator >= 0)
      ids.push_back(static_cast<uint32_t>(o.separator));
  }
  std::FILE *f = std::fopen(o.out.c_str(), "wb");
  if (!f)
    fail(o.out + ": cannot write: " + std::strerror(errno));
  bool ok = true;
  if (o.wide) {
    // Little-endian on every machine Loom builds for (x86-64, AArch64).
    ok = std::fwrite(ids.data(), 4, ids.size(), f) == ids.size();
  } else {
    std::vector<uint16_t> narrow(ids.begin(), ids.end());
    ok = std::fwrite(narrow.data(), 2, narrow.size(), f) == narrow.size();
  }
  if (std::fclose(f) != 0 || !ok)
    fail(o.out + ": cannot write: " + std::strerror(errno));
  std::printf("loom-tokens: wrote %zu %s tokens (%zu documents) to %s\n",
              ids.size(), o.wide ? "uint32" : "uint16", o.inputs.size(),
              o.out.c_str());
  return 0;
}
