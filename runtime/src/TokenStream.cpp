//===- TokenStream.cpp - Flat token files as training data ----------------===//

#include "TokenStream.h"

#include "TrainerSupport.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace loomrt::training {

const char *tokenFormatName(TokenFormat format) {
  switch (format) {
  case TokenFormat::U16:
    return "uint16";
  case TokenFormat::U32:
    return "uint32";
  case TokenFormat::Megatron:
    return "megatron";
  case TokenFormat::None:
    break;
  }
  return nullptr;
}

namespace {

/// `n` bytes of `fd` at `offset` into `out`; fails naming `path` (what the
/// bytes are: `what`) on an error or a short file.
void readExactly(int fd, const std::string &path, uint64_t offset,
                 uint64_t n, uint8_t *out, const std::string &what) {
  uint64_t done = 0;
  while (done < n) {
    ssize_t got = pread(fd, out + done, n - done,
                        static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      fail(path + ": reading " + what + " failed: " +
               (got < 0 ? std::string(std::strerror(errno))
                        : std::string("the file ended (it shrank while "
                                      "training?)")),
           ErrorCode::IO);
    done += static_cast<uint64_t>(got);
  }
}

/// Opens `path` for reading as a regular file; its size in `bytes`.
int openRegular(const std::string &path, const char *what, uint64_t &bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fail(path + ": cannot open the " + what + ": " + std::strerror(errno),
         ErrorCode::IO);
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path + ": the " + what + " is not a regular file", ErrorCode::IO);
  }
  bytes = static_cast<uint64_t>(st.st_size);
  return fd;
}

uint64_t little(const uint8_t *b, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i)
    v = v << 8 | b[i];
  return v;
}

} // namespace

std::shared_ptr<const TokenStream> TokenStream::open(const std::string &path,
                                                     TokenFormat format) {
  std::shared_ptr<TokenStream> s(new TokenStream());
  s->format_ = format;
  if (format == TokenFormat::Megatron) {
    s->openMegatron(path);
    return s;
  }
  s->path_ = path;
  s->width = format == TokenFormat::U32 ? 4 : 2;
  uint64_t bytes = 0;
  s->fd = openRegular(path, "token file", bytes); // closed by ~TokenStream
  if (bytes == 0 || bytes % s->width != 0)
    fail(path + ": " + std::to_string(bytes) + " bytes is not a whole, "
             "non-zero number of " + tokenFormatName(format) +
             " tokens (a truncated file, or the wrong --tokens)",
         ErrorCode::Format);
  // Windows are read in a shuffled order: no read-ahead of the whole file.
  posix_fadvise(s->fd, 0, 0, POSIX_FADV_RANDOM);
  s->count = bytes / s->width;
  return s;
}

/// Megatron-LM's indexed dataset (megatron/core/datasets/indexed_dataset.py,
/// "MMIDIDX" version 1): the .idx holds a 9-byte magic, the version (u64),
/// the dtype code (u8: 8 uint16, 4 int32), the sequence count S and the
/// document count D (u64 each), then the sequences' lengths (i32 [S]),
/// their byte offsets in the .bin (i64 [S]) and the sequence index where
/// each document starts (i64 [D], from 0, the last one S).
void TokenStream::openMegatron(const std::string &given) {
  std::string prefix = given;
  for (const char *ext : {".bin", ".idx"})
    if (prefix.size() > 4 && prefix.compare(prefix.size() - 4, 4, ext) == 0)
      prefix.resize(prefix.size() - 4);
  const std::string idxPath = prefix + ".idx";
  path_ = prefix + ".bin";
  uint64_t idxBytes = 0, binBytes = 0;
  int idx = openRegular(idxPath, "Megatron index", idxBytes);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closeIdx{idx};
  auto bad = [&](const std::string &why) {
    fail(idxPath + ": not a Megatron indexed dataset's index: " + why,
         ErrorCode::Format);
  };
  uint8_t header[34];
  if (idxBytes < sizeof header)
    bad("it has " + std::to_string(idxBytes) + " bytes, fewer than its "
        "34-byte header");
  readExactly(idx, idxPath, 0, sizeof header, header, "the header");
  if (std::memcmp(header, "MMIDIDX\0\0", 9) != 0)
    bad("it does not start with MMIDIDX");
  if (little(header + 9, 8) != 1)
    bad("version " + std::to_string(little(header + 9, 8)) +
        ", only version 1 is read");
  const unsigned code = header[17];
  if (code != 8 && code != 4)
    fail(idxPath + ": the tokens are of dtype code " + std::to_string(code) +
             "; Loom reads uint16 (8) and int32 (4) token ids",
         ErrorCode::Unsupported);
  width = code == 8 ? 2 : 4;
  const uint64_t sequences = little(header + 18, 8),
                 documents = little(header + 26, 8);
  // The arrays must fit in the file: hostile counts are refused before any
  // allocation.
  if (sequences > (idxBytes - 34) / 12 || documents < 1 ||
      documents > (idxBytes - 34 - 12 * sequences) / 8)
    bad(std::to_string(sequences) + " sequences and " +
        std::to_string(documents) + " document entries do not fit in its " +
        std::to_string(idxBytes) + " bytes");
  // The document starts (sequence indices), then one pass over the
  // lengths and offsets: the sequences must be contiguous from 0, and
  // each document's first token is recorded.
  std::vector<uint8_t> buf(documents * 8);
  readExactly(idx, idxPath, 34 + 12 * sequences, buf.size(), buf.data(),
              "the document indices");
  std::vector<uint64_t> firstSequence(documents);
  for (uint64_t d = 0; d < documents; ++d) {
    firstSequence[d] = little(buf.data() + 8 * d, 8);
    if (firstSequence[d] > sequences ||
        (d > 0 && firstSequence[d] < firstSequence[d - 1]))
      bad("document index " + std::to_string(d) + " is " +
          std::to_string(firstSequence[d]) + ", not ascending within the " +
          std::to_string(sequences) + " sequences");
  }
  documentStarts.reserve(documents);
  uint64_t tokens = 0, next = 0;
  const uint64_t chunk = 1 << 16;
  std::vector<uint8_t> lengths, offsets;
  for (uint64_t first = 0; first < sequences; first += chunk) {
    const uint64_t n = std::min(chunk, sequences - first);
    lengths.resize(4 * n), offsets.resize(8 * n);
    readExactly(idx, idxPath, 34 + 4 * first, lengths.size(), lengths.data(),
                "the sequence lengths");
    readExactly(idx, idxPath, 34 + 4 * sequences + 8 * first, offsets.size(),
                offsets.data(), "the sequence offsets");
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t q = first + i;
      if (little(offsets.data() + 8 * i, 8) != tokens * width)
        bad("sequence " + std::to_string(q) + " does not follow the one "
            "before it in the .bin");
      while (next < documents && firstSequence[next] == q) {
        if (documentStarts.empty() || documentStarts.back() != tokens)
          documentStarts.push_back(tokens);
        ++next;
      }
      const uint64_t length = little(lengths.data() + 4 * i, 4);
      if (length > 0x7fffffff)
        bad("sequence " + std::to_string(q) + " has a negative length");
      tokens += length;
    }
  }
  fd = openRegular(path_, "Megatron data file", binBytes);
  if (tokens == 0 || binBytes != tokens * width)
    fail(path_ + ": " + std::to_string(binBytes) + " bytes, but its index " +
             idxPath + " describes " + std::to_string(tokens) + " tokens of " +
             std::to_string(width) + " bytes",
         ErrorCode::Format);
  posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
  count = tokens;
}

void TokenStream::window(uint64_t sample, int64_t window, int64_t separator,
                         TokenWindow &w) const {
  // The caller checked (sample + 1) * T < count.
  const uint64_t T = static_cast<uint64_t>(window), n = T + 1;
  const uint64_t first = sample * T;
  thread_local std::vector<uint8_t> bytes;
  bytes.resize(n * width);
  readExactly(fd, path_, first * width, bytes.size(), bytes.data(),
              "tokens " + std::to_string(first) + " to " +
                  std::to_string(first + n));
  w.tokens.resize(n);
  for (uint64_t i = 0; i < n; ++i)
    w.tokens[i] = static_cast<uint32_t>(little(bytes.data() + i * width,
                                               static_cast<int>(width)));
  w.starts.assign(T, 0);
  if (hasDocuments()) {
    auto it = std::upper_bound(documentStarts.begin(), documentStarts.end(),
                               first);
    for (; it != documentStarts.end() && *it < first + T; ++it)
      w.starts[*it - first] = 1;
  } else if (separator >= 0) {
    for (uint64_t i = 1; i < T; ++i)
      w.starts[i] = int64_t(w.tokens[i - 1]) == separator;
  }
}

TokenStream::~TokenStream() {
  if (fd >= 0)
    ::close(fd);
}

void TokenStream::fill(TokenRole role, const TokenWindow &w, DType dtype,
                       uint8_t *out) {
  const uint64_t T = w.starts.size();
  auto put = [&](uint64_t i, int64_t v) {
    if (dtype == DType::I64)
      reinterpret_cast<int64_t *>(out)[i] = v;
    else
      reinterpret_cast<int32_t *>(out)[i] = static_cast<int32_t>(v);
  };
  if (role == TokenRole::Tokens || role == TokenRole::Labels) {
    uint64_t from = role == TokenRole::Labels ? 1 : 0;
    for (uint64_t i = 0; i < T; ++i)
      put(i, w.tokens[from + i]);
    return;
  }
  int64_t doc = 0, start = 0;
  for (uint64_t i = 0; i < T; ++i) {
    if (w.starts[i])
      ++doc, start = int64_t(i);
    put(i, role == TokenRole::Documents ? doc : int64_t(i) - start);
  }
}

WindowOrder::WindowOrder(uint64_t n, uint64_t seed, uint64_t epoch) : n(n) {
  // 2 * half bits cover [0, n): at most 4n values, so a walk is short.
  while (half < 32 && (uint64_t(1) << (2 * half)) < n)
    ++half;
  mask = (uint64_t(1) << half) - 1;
  uint64_t key = splitmix64(seed) ^ splitmix64(~epoch);
  for (uint64_t r = 0; r < 4; ++r)
    keys[r] = splitmix64(key + r);
}

uint64_t WindowOrder::at(uint64_t k) const {
  uint64_t x = k;
  do {
    uint64_t left = x >> half, right = x & mask;
    for (uint64_t key : keys) {
      uint64_t f = splitmix64(right ^ key) & mask;
      uint64_t next = left ^ f;
      left = right;
      right = next;
    }
    x = (left << half) | right;
  } while (x >= n);
  return x;
}

} // namespace loomrt::training

namespace loomrt::training {

void loadTokenStream(const DataSource &source,
                     const std::vector<DataInput> &inputs,
                     const std::string &entryName, Dataset &out) {
  const TokenStreamOptions &o = *source.tokens;
  if (source.arrays || source.path.empty())
    fail("a token stream (--tokens) is read from a file, not from arrays in "
         "memory",
         ErrorCode::Unsupported);
  out.path = source.path;
  // Each input's role, by name; exactly one gets the tokens themselves.
  std::vector<std::string> tokenInputs;
  for (const DataInput &d : inputs) {
    TokenRole role = d.name == o.labels           ? TokenRole::Labels
                     : d.name == o.documentsInput ? TokenRole::Documents
                     : d.name == o.positionsInput ? TokenRole::Positions
                                                  : TokenRole::Tokens;
    if (role == TokenRole::Tokens)
      tokenInputs.push_back(quoteName(d.name));
    if ((d.dtype != DType::I64 && d.dtype != DType::I32) ||
        d.sampleShape.size() != 1)
      fail(out.path + ": a token stream fills i64 or i32 [batch, T] inputs; "
               "entry " + quoteName(entryName) + " takes input " +
               quoteName(d.name) + " as " +
               describe(d.dtype, [&] {
                 std::vector<int64_t> s = {d.batch};
                 s.insert(s.end(), d.sampleShape.begin(), d.sampleShape.end());
                 return s;
               }()),
           ErrorCode::Unsupported);
    if (out.window == 0)
      out.window = d.sampleShape[0];
    else if (out.window != d.sampleShape[0])
      fail(out.path + ": entry " + quoteName(entryName) +
               "'s data inputs have different sequence lengths (" +
               std::to_string(out.window) + " and " +
               std::to_string(d.sampleShape[0]) + " for " +
               quoteName(d.name) + "); a token stream needs one",
           ErrorCode::Unsupported);
    out.roles[d.name] = role;
  }
  if (tokenInputs.size() > 1) {
    std::string list;
    for (const std::string &n : tokenInputs)
      list += (list.empty() ? "" : ", ") + n;
    fail("entry " + quoteName(entryName) + " takes " +
             std::to_string(tokenInputs.size()) + " data inputs (" + list +
             ") the token stream would fill with tokens: it fills one with "
             "tokens, the labels input (--labels-input, now " +
             quoteName(o.labels) + ") with the next tokens, and with "
             "--doc-separator the --documents-input and --positions-input",
         ErrorCode::Unsupported);
  }
  if (out.window < 1)
    fail(out.path + ": the data inputs have sequence length " +
             std::to_string(out.window) + "; a token stream needs at least 1",
         ErrorCode::Unsupported);
  out.separator = o.docSeparator;
  out.stream = TokenStream::open(out.path, o.format);
  uint64_t T = static_cast<uint64_t>(out.window);
  if (out.stream->size() < T + 1)
    fail(out.path + ": " + std::to_string(out.stream->size()) +
             " tokens, fewer than one window of T + 1 = " +
             std::to_string(T + 1),
         ErrorCode::Format);
  out.samples = (out.stream->size() - 1) / T;
  if (!source.materialize)
    return;
  // Evaluation reads arrays: the windows copied out, within a bound.
  uint64_t bytes = 0;
  for (const DataInput &d : inputs)
    bytes += out.samples * T * dtypeSize(d.dtype);
  if (bytes > (uint64_t(1) << 30))
    fail(out.path + ": " + std::to_string(out.samples) + " windows of " +
             std::to_string(T) + " tokens make " + std::to_string(bytes) +
             " bytes of evaluation arrays, more than 1 GiB; evaluate on a "
             "smaller held-out file",
         ErrorCode::Unsupported);
  for (const DataInput &d : inputs) {
    NpyArray &a = out.owned[d.name];
    a.dtype = d.dtype;
    a.shape = {static_cast<int64_t>(out.samples), out.window};
    a.data.resize(out.samples * T * dtypeSize(d.dtype));
  }
  TokenWindow w;
  for (uint64_t s = 0; s < out.samples; ++s) {
    out.stream->window(s, out.window, out.separator, w);
    for (const DataInput &d : inputs)
      TokenStream::fill(out.roles.at(d.name), w, d.dtype,
                        out.owned[d.name].data.data() +
                            s * T * dtypeSize(d.dtype));
  }
  for (const auto &[name, a] : out.owned)
    out.arrays.emplace(name, viewOf(a));
}

} // namespace loomrt::training
