#include "deploy/local/flag_routing.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace sieve {
namespace {

constexpr char kXml[] = R"(<?xml version="1.0"?>
<AllFlags>
<program>sieve-worker</program>
<usage>trains</usage>
<flag><file>w.cc</file><name>lr</name><meaning>rate &lt;x&gt;</meaning><default>0.1</default><current>0.1</current><type>double</type></flag>
<flag><file>w.cc</file><name>fast</name><meaning>go</meaning><default>false</default><current>false</current><type>bool</type></flag>
</AllFlags>
)";

DaemonFlags Flags(std::map<std::string, std::string> types) { return {"p", std::move(types)}; }

TEST(LauncherFlagRouting, ParsesGflagsHelpXml) {
  auto flags = ParseGflagsHelpXml(kXml);
  ASSERT_TRUE(flags.ok()) << flags.status().ToString();
  EXPECT_EQ(flags->program, "sieve-worker");
  EXPECT_EQ(flags->types, (std::map<std::string, std::string>{{"lr", "double"}, {"fast", "bool"}}));
}

TEST(LauncherFlagRouting, RejectsOutputThatIsNotGflagsXml) {
  EXPECT_EQ(ParseGflagsHelpXml("usage: foo [-h]\n").status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(ParseGflagsHelpXml("<AllFlags><flag><name>x</name>").ok());
}

class LauncherFlagParse : public ::testing::Test {
 protected:
  DaemonFlags server_ = Flags({{"consistency", "string"}, {"fast", "bool"}, {"shared", "int32"}});
  DaemonFlags worker_ = Flags({{"lr", "double"}, {"fast", "bool"}, {"shared", "int32"}});
  DaemonFlags odd_ = Flags({{"fast", "int32"}});
  std::vector<const DaemonFlags*> daemons_ = {&server_, &worker_};

  StatusOr<std::vector<PassThroughFlag>> Parse(const std::vector<std::string>& words) {
    return ParsePassThrough(words, [&](const std::string& n) { return KindAcross(daemons_, n); });
  }
};

TEST_F(LauncherFlagParse, AcceptsAllGflagsForms) {
  auto flags = Parse({"--lr=0.5", "--consistency", "ssp", "--fast", "--nofast", "-shared=3", "--lr",
                      "-1e-3", "--consistency="});
  ASSERT_TRUE(flags.ok()) << flags.status().ToString();
  EXPECT_EQ(*flags, (std::vector<PassThroughFlag>{{"lr", "0.5"},
                                                  {"consistency", "ssp"},
                                                  {"fast", "true"},
                                                  {"fast", "false"},
                                                  {"shared", "3"},
                                                  {"lr", "-1e-3"},
                                                  {"consistency", ""}}));
}

TEST_F(LauncherFlagParse, ErrorsNameTheOffendingWord) {
  auto unknown = Parse({"--lr=1", "--bogus=2"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("--bogus"), std::string::npos);
  auto bare_unknown = Parse({"--nolr"});
  ASSERT_FALSE(bare_unknown.ok());
  EXPECT_NE(bare_unknown.status().message().find("--nolr"), std::string::npos);
  auto positional = Parse({"stray"});
  ASSERT_FALSE(positional.ok());
  EXPECT_NE(positional.status().message().find("'stray'"), std::string::npos);
  auto missing = Parse({"--lr"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("needs a value"), std::string::npos);
}

TEST_F(LauncherFlagParse, ConflictingTypesNeedAnExplicitValue) {
  daemons_.push_back(&odd_);
  EXPECT_FALSE(Parse({"--fast"}).ok());
  EXPECT_TRUE(Parse({"--fast=1"}).ok());
}

// --flagfile is read by the launcher (so every line is checked before anything starts) and its
// flags are routed one by one; a typo names the file, the line and the nearest flag.
TEST_F(LauncherFlagParse, FlagFilesAreReadAndChecked) {
  const std::string path =
      ::testing::TempDir() + "launcher_flag_routing_" + std::to_string(getpid()) + ".flags";
  std::ofstream(path) << "# training\n--lr=0.5\n--consistency=ssp\n";
  auto flags = Parse({"--fast", "--flagfile=" + path});
  ASSERT_TRUE(flags.ok()) << flags.status().ToString();
  EXPECT_EQ(*flags, (std::vector<PassThroughFlag>{
                        {"fast", "true"}, {"lr", "0.5"}, {"consistency", "ssp"}}));
  std::ofstream(path) << "--lr=0.5\n--consistncy=ssp\n";
  auto typo = ParsePassThrough({"--flagfile=" + path},
                               [&](const std::string& n) { return KindAcross(daemons_, n); },
                               {"lr", "fast", "shared", "consistency"});
  ASSERT_FALSE(typo.ok());
  EXPECT_EQ(typo.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(typo.status().message(),
            path + ":2: unknown flag --consistncy (did you mean --consistency?)");
  std::remove(path.c_str());
}

TEST(LauncherFlagRouting, RoutesEachFlagToExactlyItsDefiners) {
  DaemonFlags sched = Flags({{"port", "int32"}, {"num_params", "int64"}});
  DaemonFlags server = Flags({{"consistency", "string"}, {"num_params", "int64"}});
  DaemonFlags worker = Flags({{"lr", "double"}, {"num_params", "int64"}});
  auto routed = RouteFlags({{"lr", "0.1"}, {"num_params", "9"}, {"consistency", "bsp"}},
                           {"scheduler", "server", "worker"}, {&sched, &server, &worker});
  ASSERT_TRUE(routed.ok()) << routed.status().ToString();
  using Args = std::vector<std::string>;
  EXPECT_EQ((*routed)["scheduler"], Args{"--num_params=9"});
  EXPECT_EQ((*routed)["server"], (Args{"--num_params=9", "--consistency=bsp"}));
  EXPECT_EQ((*routed)["worker"], (Args{"--lr=0.1", "--num_params=9"}));

  auto unknown = RouteFlags({{"nope", "1"}}, {"scheduler"}, {&sched});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("--nope"), std::string::npos);
}

}  // namespace
}  // namespace sieve
