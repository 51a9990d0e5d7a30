// ParseNumber<T> (base/parse_number.h): the whole text or nothing, in T's range.
#include "base/parse_number.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>

namespace sieve {
namespace {

TEST(ParseNumberTest, TakesAWholeNumberOfTheType) {
  EXPECT_EQ(ParseNumber<uint64_t>("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(ParseNumber<int>("-7"), -7);
  EXPECT_EQ(ParseNumber<long>("0"), 0L);
  EXPECT_EQ(ParseNumber<double>("2.5e-3"), 2.5e-3);
  EXPECT_EQ(ParseNumber<double>("-1"), -1.0);
}

TEST(ParseNumberTest, RefusesPartsEmptinessAndOverflow) {
  EXPECT_EQ(ParseNumber<int>(""), std::nullopt);
  EXPECT_EQ(ParseNumber<int>("12x"), std::nullopt);
  EXPECT_EQ(ParseNumber<int>(" 12"), std::nullopt);
  EXPECT_EQ(ParseNumber<int>("+12"), std::nullopt);
  EXPECT_EQ(ParseNumber<uint64_t>("-1"), std::nullopt);
  EXPECT_EQ(ParseNumber<int>("2147483648"), std::nullopt);
  EXPECT_EQ(ParseNumber<double>("1.5 "), std::nullopt);
  EXPECT_EQ(ParseNumber<double>("."), std::nullopt);
}

}  // namespace
}  // namespace sieve
