#include "deploy/local/line_prefixer.h"

#include <gtest/gtest.h>

namespace sieve {
namespace {

using Lines = std::vector<std::string>;

TEST(LauncherLinePrefixer, KeepsPartialLinesUntilTheirNewline) {
  LinePrefixer p("[worker 1] ");
  EXPECT_EQ(p.Append("hel"), Lines{});
  EXPECT_EQ(p.Append("lo\nwor"), Lines{"hello"});
  EXPECT_EQ(p.Append("ld\n\nx\n"), (Lines{"world", "", "x"}));
  EXPECT_EQ(p.Flush(), Lines{});
}

TEST(LauncherLinePrefixer, FlushReturnsTheUnterminatedTail) {
  LinePrefixer p("[scheduler] ");
  EXPECT_EQ(p.Append("a\nno newline"), Lines{"a"});
  EXPECT_EQ(p.Flush(), Lines{"no newline"});
  EXPECT_EQ(p.Flush(), Lines{});
}

TEST(LauncherLinePrefixer, SplitsOverlongLines) {
  LinePrefixer p("", 4);
  EXPECT_EQ(p.Append("abcdefghij\n"), (Lines{"abcd", "efgh", "ij"}));
  EXPECT_EQ(p.Append("ab"), Lines{});
  EXPECT_EQ(p.Append("cd\n"), Lines{"abcd"});
  EXPECT_EQ(p.Append("abcd"), Lines{"abcd"});
  EXPECT_EQ(p.Flush(), Lines{});
}

TEST(LauncherLinePrefixer, DecorateAddsPrefixAndNewline) {
  LinePrefixer p("[server 0] ");
  EXPECT_EQ(p.Decorate("up"), "[server 0] up\n");
}

}  // namespace
}  // namespace sieve
