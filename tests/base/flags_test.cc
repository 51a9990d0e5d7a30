// HelpText and ReadableDefault (base/flags.h) against flags defined here: the program's groups
// first, in table order, readable defaults, ungrouped flags of this file under "Other", the
// gflags library's own flags only with --helpfull.
#include "base/flags.h"

#include <gflags/gflags.h>
#include <gtest/gtest.h>

#include "base/version.h"

DEFINE_double(test_rate, 0.1, "Rate of the test");
DEFINE_string(test_name, "", "Name of the test");
DEFINE_int32(test_count, 3, "How many");
DEFINE_bool(test_loose, false, "In no group");

namespace sieve {
namespace {

ProgramInfo Program() {
  return {"flags-test",
          "tests the help text.",
          "flags-test [--test_rate=R]",
          {{"Training", {"test_rate", "test_count"}}, {"Naming", {"test_name"}}}};
}

TEST(ReadableDefault, DoublesAreShortestRoundTrip) {
  EXPECT_EQ(ReadableDefault("double", "0.10000000000000001"), "0.1");
  EXPECT_EQ(ReadableDefault("double", "0.001"), "0.001");
  EXPECT_EQ(ReadableDefault("double", "1"), "1");
  EXPECT_EQ(ReadableDefault("double", "0.015625"), "0.015625");
  EXPECT_EQ(ReadableDefault("double", "1e-05"), "1e-05");
  EXPECT_EQ(ReadableDefault("string", ""), "\"\"");
  EXPECT_EQ(ReadableDefault("string", "0.10000000000000001"), "0.10000000000000001");
  EXPECT_EQ(ReadableDefault("int32", "3"), "3");
}

TEST(HelpText, GroupsFirstThenOtherWithoutLibraryFlags) {
  const std::string help = HelpText(Program(), /*full=*/false);
  EXPECT_EQ(help.rfind(std::string("flags-test ") + kVersion + ": tests the help text.\n", 0), 0u)
      << help;
  const size_t usage = help.find("usage: flags-test [--test_rate=R]\n");
  const size_t training = help.find("\nTraining:\n  --test_rate=0.1 ");
  const size_t count = help.find("\n  --test_count=3 ");
  const size_t naming = help.find("\nNaming:\n  --test_name=\"\" ");
  const size_t other = help.find("\nOther:\n  --test_loose=false ");
  ASSERT_NE(usage, std::string::npos) << help;
  ASSERT_NE(training, std::string::npos) << help;
  ASSERT_NE(count, std::string::npos) << help;
  ASSERT_NE(naming, std::string::npos) << help;
  ASSERT_NE(other, std::string::npos) << help;
  EXPECT_LT(usage, training);
  EXPECT_LT(training, count);
  EXPECT_LT(count, naming);
  EXPECT_LT(naming, other);
  EXPECT_NE(help.find("Rate of the test"), std::string::npos);
  // gflags' own flags (defined in gflags' sources) are not the program's.
  for (const char* library : {"--flagfile=", "--helpxml=", "--fromenv="}) {
    EXPECT_EQ(help.find(library), std::string::npos) << library << "\n" << help;
  }
  EXPECT_EQ(help.find("0.10000000000000001"), std::string::npos);
}

TEST(HelpText, FullAddsTheLibraryFlags) {
  const std::string full = HelpText(Program(), /*full=*/true);
  const size_t other = full.find("\nOther:\n");
  const size_t flagfile = full.find("\n  --flagfile=\"\" ");
  ASSERT_NE(other, std::string::npos) << full;
  ASSERT_NE(flagfile, std::string::npos) << full;
  EXPECT_LT(other, flagfile);
}

TEST(HelpText, LongLinesAreWrapped) {
  for (const std::string& text : {HelpText(Program(), false), HelpText(Program(), true)}) {
    size_t start = 0;
    for (size_t nl = text.find('\n'); nl != std::string::npos; nl = text.find('\n', start)) {
      const std::string line = text.substr(start, nl - start);
      // A single word longer than the width (a long default) may overflow; nothing else.
      if (line.find(' ', line.find_first_not_of(' ')) != std::string::npos) {
        EXPECT_LE(line.size(), 100u) << line;
      }
      start = nl + 1;
    }
  }
}

}  // namespace
}  // namespace sieve
