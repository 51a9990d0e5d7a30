// EnumName tables (base/enum_names.h): a value's name, a name's value, the list of names for an
// error message, and the fallbacks for what the table lacks.
#include "base/enum_names.h"

#include <gtest/gtest.h>

#include <optional>

namespace sieve {
namespace {

enum class Shade { kLight, kDark, kDim };

constexpr EnumName<Shade> kShadeNames[] = {
    {Shade::kLight, "light"}, {Shade::kDark, "dark"}, {Shade::kDim, "dim"}};

TEST(EnumNamesTest, NamesAndValuesRoundTrip) {
  for (const EnumName<Shade>& n : kShadeNames) {
    EXPECT_EQ(EnumNameOf(kShadeNames, n.value, "?"), n.name);
    EXPECT_EQ(EnumValueOf(kShadeNames, n.name), n.value);
  }
  static_assert(EnumNameOf(kShadeNames, Shade::kDark, "?") == "dark");
}

TEST(EnumNamesTest, WhatTheTableLacksFallsBack) {
  EXPECT_EQ(EnumNameOf(kShadeNames, static_cast<Shade>(7), "?"), "?");
  EXPECT_EQ(EnumValueOf(kShadeNames, "Dark"), std::nullopt);  // case-sensitive
  EXPECT_EQ(EnumValueOf(kShadeNames, ""), std::nullopt);
  EXPECT_EQ(EnumValueOf(kShadeNames, "dark "), std::nullopt);
}

TEST(EnumNamesTest, NameListReadsAsProse) {
  EXPECT_EQ(EnumNameList(kShadeNames), "light, dark or dim");
  constexpr EnumName<Shade> kTwo[] = {{Shade::kLight, "light"}, {Shade::kDark, "dark"}};
  EXPECT_EQ(EnumNameList(kTwo), "light or dark");
  constexpr EnumName<Shade> kOne[] = {{Shade::kDim, "dim"}};
  EXPECT_EQ(EnumNameList(kOne), "dim");
}

TEST(EnumNamesTest, ParseNamesTheKindAndTheAcceptedNames) {
  StatusOr<Shade> dim = ParseEnumName(kShadeNames, "dim", "shade");
  ASSERT_TRUE(dim.ok());
  EXPECT_EQ(*dim, Shade::kDim);
  StatusOr<Shade> bad = ParseEnumName(kShadeNames, "pale", "shade");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "unknown shade 'pale' (expected light, dark or dim)");
}

}  // namespace
}  // namespace sieve
