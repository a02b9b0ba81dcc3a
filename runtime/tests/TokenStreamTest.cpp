//===- TokenStreamTest.cpp - Windows of a token stream --------------------===//
//
// What each data input gets from a window of a token file: the tokens, the
// next tokens, and with a document separator each position's document
// index and position within its document, worked out by hand for a file
// with separators inside, at the end and twice in a row.
//
//===----------------------------------------------------------------------===//

#include "TokenStream.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

using namespace loomrt;
using namespace loomrt::training;
using namespace loomrt::test;

namespace {

// Separator 2; T = 4: window 0 is tokens [0, 5), window 1 tokens [4, 9).
const std::vector<uint32_t> kTokens = {5, 1, 9, 2, 7, 2, 2, 8, 3};

template <typename Word>
std::string writeTokens(const TempDir &dir, const char *name) {
  std::vector<Word> words(kTokens.begin(), kTokens.end());
  std::string path = dir.file(name);
  std::FILE *f = std::fopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  std::fwrite(words.data(), sizeof(Word), words.size(), f);
  std::fclose(f);
  return path;
}

std::vector<int64_t> window(const TokenStream &s, TokenRole role,
                            uint64_t sample, DType dtype = DType::I64) {
  TokenWindow w;
  s.window(sample, 4, /*separator=*/2, w);
  EXPECT_EQ(w.tokens.size(), 5u);
  std::vector<uint8_t> bytes(4 * dtypeSize(dtype));
  TokenStream::fill(role, w, dtype, bytes.data());
  std::vector<int64_t> out;
  for (int i = 0; i < 4; ++i)
    out.push_back(dtype == DType::I64
                      ? reinterpret_cast<const int64_t *>(bytes.data())[i]
                      : reinterpret_cast<const int32_t *>(bytes.data())[i]);
  return out;
}

using V = std::vector<int64_t>;

TEST(TokenStream, WindowsTokensAndLabels) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  auto s = TokenStream::open(writeTokens<uint16_t>(dir, "t.bin"),
                             TokenFormat::U16);
  EXPECT_EQ(s->size(), 9u);
  EXPECT_EQ(window(*s, TokenRole::Tokens, 0), (V{5, 1, 9, 2}));
  EXPECT_EQ(window(*s, TokenRole::Labels, 0), (V{1, 9, 2, 7}));
  EXPECT_EQ(window(*s, TokenRole::Tokens, 1), (V{7, 2, 2, 8}));
  EXPECT_EQ(window(*s, TokenRole::Labels, 1, DType::I32), (V{2, 2, 8, 3}));
}

TEST(TokenStream, DocumentsAndPositions) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  auto s = TokenStream::open(writeTokens<uint32_t>(dir, "t32.bin"),
                             TokenFormat::U32);
  // Window 0: 5 1 9 [2]: one document, the separator its last token.
  EXPECT_EQ(window(*s, TokenRole::Documents, 0), (V{0, 0, 0, 0}));
  EXPECT_EQ(window(*s, TokenRole::Positions, 0), (V{0, 1, 2, 3}));
  // Window 1: 7 [2] | [2] | 8: three documents, the middle one empty but
  // for its separator.
  EXPECT_EQ(window(*s, TokenRole::Documents, 1), (V{0, 0, 1, 2}));
  EXPECT_EQ(window(*s, TokenRole::Positions, 1, DType::I32), (V{0, 1, 0, 0}));
}

} // namespace

namespace {

// The keyed window order is a permutation of [0, n) for every n (a Feistel
// network walked down from the next even power of two), and another seed
// or epoch gives another one.
TEST(TokenStream, WindowOrderIsAPermutation) {
  for (uint64_t n : {1ull, 2ull, 3ull, 5ull, 17ull, 1000ull, 4097ull}) {
    WindowOrder order(n, /*seed=*/0, /*epoch=*/0);
    std::vector<bool> seen(n, false);
    for (uint64_t k = 0; k < n; ++k) {
      uint64_t s = order.at(k);
      ASSERT_LT(s, n);
      EXPECT_FALSE(seen[s]) << "n " << n << ": sample " << s << " twice";
      seen[s] = true;
    }
  }
  auto first = [](uint64_t seed, uint64_t epoch) {
    WindowOrder order(1000, seed, epoch);
    std::vector<uint64_t> v;
    for (uint64_t k = 0; k < 8; ++k)
      v.push_back(order.at(k));
    return v;
  };
  EXPECT_EQ(first(0, 0), first(0, 0));
  EXPECT_NE(first(0, 0), first(0, 1));
  EXPECT_NE(first(0, 0), first(1, 0));
}

} // namespace
