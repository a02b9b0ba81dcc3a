//===- TokenStream.h - Flat token files as training data -------*- C++ -*-===//
//
// A language-model corpus tokenized once into a flat file of token ids
// (nanoGPT's train.bin: little-endian uint16 or uint32, no header),
// read window by window, never whole. With window length T (the data
// inputs' sample shape [T]), sample s is the T + 1 tokens starting at
// s * T: the token input gets its first T, the labels its last T; so
// there are floor((tokens - 1) / T) samples, and consecutive windows share
// one token. With a document separator, two more inputs can be filled: the
// document index of each position (0 for the window's first document, +1
// after each separator; the separator belongs to the document it ends) and
// the position within its document (0 at each document's first token).
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_TOKENSTREAM_H
#define LOOMRT_SRC_TOKENSTREAM_H

#include "loomrt/DType.h"
#include "loomrt/Trainer.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace loomrt::training {

/// What a data input receives from a window.
enum class TokenRole : uint8_t { Tokens, Labels, Documents, Positions };

/// One window: its T + 1 tokens and, for each of its first T positions,
/// whether a document starts there (never at position 0: the window's
/// first document is its document 0, wherever it began).
struct TokenWindow {
  std::vector<uint32_t> tokens;
  std::vector<uint8_t> starts;
};

/// A token file, open for reading. Windows are read with pread as the
/// batches are assembled (the page cache keeps what is hot): the file is
/// never read whole nor mapped, so the process's memory does not grow with
/// the windows it has read, and a file that shrinks during training is an
/// error naming it, not a SIGBUS. A Megatron indexed dataset (PREFIX.bin
/// and PREFIX.idx) is its .bin read the same way, its documents' first
/// tokens taken from the .idx (8 bytes per document kept in memory).
class TokenStream {
public:
  /// Opens `path` as tokens of `format` (for Megatron: PREFIX, PREFIX.bin
  /// or PREFIX.idx); fails (ErrorCode::IO or Format) naming the file when
  /// it cannot be read, is not a whole number of tokens, or its index does
  /// not describe its .bin.
  static std::shared_ptr<const TokenStream> open(const std::string &path,
                                                 TokenFormat format);
  ~TokenStream();
  TokenStream(const TokenStream &) = delete;
  TokenStream &operator=(const TokenStream &) = delete;

  uint64_t size() const { return count; }
  /// Whether the file itself says where documents start (Megatron).
  bool hasDocuments() const { return format_ == TokenFormat::Megatron; }

  /// Window `sample` (T = `window` positions, T + 1 tokens) into `w`;
  /// documents start after each `separator` token (>= 0) or where the
  /// index says. Fails naming the file if the read comes back short.
  void window(uint64_t sample, int64_t window, int64_t separator,
              TokenWindow &w) const;

  /// Writes input `role`'s T values of `w` as `dtype` (I64 or I32) to
  /// `out`.
  static void fill(TokenRole role, const TokenWindow &w, DType dtype,
                   uint8_t *out);

private:
  TokenStream() = default;
  void openMegatron(const std::string &path);
  std::string path_;
  TokenFormat format_ = TokenFormat::None;
  int fd = -1;
  uint64_t count = 0;
  unsigned width = 2;
  std::vector<uint64_t> documentStarts; ///< token offsets, ascending
};

/// Epoch `epoch`'s order of `n` samples without a table: position k of the
/// epoch reads sample `at(k)`, a bijection of [0, n) keyed by (seed,
/// epoch): a four-round Feistel network over the smallest even power of
/// two >= n, walked until it lands below n. O(1) memory whatever n (a
/// table of 2^31 windows would take 16 GiB).
class WindowOrder {
public:
  WindowOrder(uint64_t n, uint64_t seed, uint64_t epoch);
  uint64_t at(uint64_t k) const;

private:
  uint64_t n, half = 1, mask = 1;
  uint64_t keys[4];
};

/// "uint16", "uint32", "megatron" (loom-run --tokens), or null for None.
const char *tokenFormatName(TokenFormat format);

} // namespace loomrt::training

#endif // LOOMRT_SRC_TOKENSTREAM_H
