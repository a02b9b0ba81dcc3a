//===- DTypeTest.cpp - Element type names, sizes and checked sizes --------===//

#include "loomrt/DType.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <iterator>
#include <limits>
#include <string>

using namespace loomrt;

TEST(DType, SizesAndNames) {
  struct Expected {
    DType dtype;
    size_t size;
    const char *safetensors;
    const char *shortName;
  };
  const Expected table[] = {
      {DType::F64, 8, "F64", "f64"}, {DType::F32, 4, "F32", "f32"},
      {DType::F16, 2, "F16", "f16"}, {DType::BF16, 2, "BF16", "bf16"},
      {DType::I64, 8, "I64", "i64"}, {DType::I32, 4, "I32", "i32"},
      {DType::I16, 2, "I16", "i16"}, {DType::I8, 1, "I8", "i8"},
      {DType::U8, 1, "U8", "ui8"},   {DType::Bool, 1, "BOOL", "i1"},
  };
  ASSERT_EQ(std::size(table), std::size(kAllDTypes));
  for (size_t i = 0; i < std::size(table); ++i) {
    const Expected &e = table[i];
    SCOPED_TRACE(e.safetensors);
    EXPECT_EQ(kAllDTypes[i], e.dtype);
    EXPECT_TRUE(isValidDType(e.dtype));
    EXPECT_EQ(dtypeSize(e.dtype), e.size);
    EXPECT_EQ(dtypeToSafetensors(e.dtype), e.safetensors);
    EXPECT_EQ(dtypeToShortName(e.dtype), e.shortName);
    EXPECT_EQ(dtypeFromSafetensors(e.safetensors), e.dtype);
    EXPECT_EQ(dtypeFromShortName(e.shortName), e.dtype);
  }
}

TEST(DType, UnknownNames) {
  EXPECT_EQ(dtypeFromSafetensors("f32"), std::nullopt); // Case matters.
  EXPECT_EQ(dtypeFromSafetensors("Bool"), std::nullopt);
  EXPECT_EQ(dtypeFromSafetensors("F8_E4M3"), std::nullopt);
  EXPECT_EQ(dtypeFromSafetensors(""), std::nullopt);
  EXPECT_EQ(dtypeFromShortName("F32"), std::nullopt);
  EXPECT_EQ(dtypeFromShortName("u8"), DType::U8);
  EXPECT_EQ(dtypeFromShortName("bool"), DType::Bool);
}

TEST(DType, InvalidEnumerator) {
  auto bogus = static_cast<DType>(200);
  EXPECT_FALSE(isValidDType(bogus));
  EXPECT_EQ(dtypeSize(bogus), 0u);
  EXPECT_EQ(dtypeToSafetensors(bogus), "");
  EXPECT_EQ(dtypeToShortName(bogus), "");
  EXPECT_EQ(checkedByteSize(bogus, {2}), std::nullopt);
}

TEST(DType, CheckedSizes) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(checkedNumElements({}), 1);
  EXPECT_EQ(checkedNumElements({2, 3, 4}), 24);
  EXPECT_EQ(checkedNumElements({0}), 0);
  EXPECT_EQ(checkedNumElements({kMax, kMax, 0}), 0);
  EXPECT_EQ(checkedNumElements({kMax}), kMax);
  EXPECT_EQ(checkedNumElements({-1}), std::nullopt);
  EXPECT_EQ(checkedNumElements({0, -1}), std::nullopt);
  EXPECT_EQ(checkedNumElements({int64_t(1) << 32, int64_t(1) << 31}),
            std::nullopt);
  EXPECT_EQ(checkedByteSize(DType::F32, {}), 4u);
  EXPECT_EQ(checkedByteSize(DType::BF16, {3, 5}), 30u);
  EXPECT_EQ(checkedByteSize(DType::F64, {0, kMax}), 0u);
  // 2^62 elements fit int64, but 2^62 * 8 bytes overflow uint64.
  EXPECT_EQ(checkedByteSize(DType::F64, {int64_t(1) << 62}), std::nullopt);
  EXPECT_EQ(checkedByteSize(DType::I8, {int64_t(1) << 62}), uint64_t(1) << 62);
}
