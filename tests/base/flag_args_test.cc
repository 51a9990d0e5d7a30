// ParseFlagWords (base/flag_args.h): the gflags forms, flag files read line by line with every
// line checked (gflags ignores unknown flags there), and the "did you mean" suggestions.
#include "base/flag_args.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "tests/base/temp_dir.h"

namespace sieve {
namespace {

class FlagArgs : public ::testing::Test {
 protected:
  std::string File(const std::string& name, const std::string& text) {
    const std::string path = (dir_.path() / name).string();
    std::ofstream(path) << text;
    return path;
  }

  StatusOr<std::vector<FlagAssignment>> Parse(const std::vector<std::string>& words) {
    return ParseFlagWords(
        words,
        [this](const std::string& name) {
          auto it = kinds_.find(name);
          return it == kinds_.end() ? FlagKind::kUnknown : it->second;
        },
        names_);
  }

  std::map<std::string, FlagKind> kinds_ = {{"density", FlagKind::kValued},
                                            {"lr", FlagKind::kValued},
                                            {"fast", FlagKind::kBool},
                                            {"num_workers", FlagKind::kValued},
                                            {"both", FlagKind::kConflicting}};
  std::vector<std::string> names_ = {"density", "lr", "fast", "num_workers", "both"};
  sieve::testing::TempDir dir_{"sieve-flag-args"};
};

TEST_F(FlagArgs, AcceptsTheGflagsForms) {
  auto got = Parse({"--density=0.5", "-lr=0.1", "--lr", "0.2", "--fast", "--nofast", "--fast=no",
                    "--num_workers", "-3"});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const std::vector<FlagAssignment> want = {
      {"density", "0.5", ""}, {"lr", "0.1", ""},  {"lr", "0.2", ""},        {"fast", "true", ""},
      {"fast", "false", ""},  {"fast", "no", ""}, {"num_workers", "-3", ""}};
  EXPECT_EQ(*got, want);
}

TEST_F(FlagArgs, UnknownFlagIsNamedWithASuggestion) {
  auto got = Parse({"--lr=1", "--desnity=0.5"});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(got.status().message(), "unknown flag --desnity (did you mean --density?)");
  auto far = Parse({"--bogus"});
  EXPECT_EQ(far.status().message(), "unknown flag --bogus");
  EXPECT_EQ(Parse({"--noslow"}).status().message(), "unknown flag --noslow");
  EXPECT_EQ(Parse({"--nolr"}).status().message(),
            "unknown flag --nolr (--lr is not a plain bool flag: write --lr=VALUE)");
  EXPECT_NE(Parse({"--nofast=1"}).status().message().find("write --fast=VALUE"), std::string::npos);
}

TEST_F(FlagArgs, OtherErrorsNameTheWord) {
  EXPECT_NE(Parse({"stray"}).status().message().find("'stray'"), std::string::npos);
  EXPECT_NE(Parse({"--"}).status().message().find("'--'"), std::string::npos);
  EXPECT_EQ(Parse({"--lr"}).status().message(), "flag --lr needs a value");
  EXPECT_NE(Parse({"--both"}).status().message().find("--both=VALUE"), std::string::npos);
  EXPECT_TRUE(Parse({"--both=1"}).ok());
  EXPECT_NE(Parse({"--=3"}).status().message().find("malformed"), std::string::npos);
}

TEST_F(FlagArgs, FlagFilesAreExpandedInPlace) {
  const std::string inner = File("inner.flags", "--density=0.25\n");
  const std::string outer =
      File("outer.flags", "# a comment\n\n  --lr=0.05  \n--flagfile=" + inner +
                              "\n--fast\n--nofast\n--num_workers=a b\n");
  auto got = Parse({"--lr=1", "--flagfile=" + outer, "--density", "0.5"});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const std::vector<FlagAssignment> want = {{"lr", "1", ""},
                                            {"lr", "0.05", outer + ":3"},
                                            {"density", "0.25", inner + ":1"},
                                            {"fast", "true", outer + ":5"},
                                            {"fast", "false", outer + ":6"},
                                            {"num_workers", "a b", outer + ":7"},
                                            {"density", "0.5", ""}};
  EXPECT_EQ(*got, want);
  // `--flagfile F` and a comma-separated list, as gflags takes them.
  auto listed = Parse({"--flagfile", inner + "," + inner});
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(listed->size(), 2u);
}

TEST_F(FlagArgs, ATypoInAFlagFileIsAnErrorNamingFileAndLine) {
  const std::string path = File("typo.flags", "--lr=0.1\n# ok\n--desnity=0.5\n");
  auto got = Parse({"--flagfile=" + path});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(), path + ":3: unknown flag --desnity (did you mean --density?)");
  // Nested: the line of the file that holds the typo.
  const std::string outer = File("outer.flags", "--flagfile=" + path + "\n");
  EXPECT_EQ(Parse({"--flagfile=" + outer}).status().message(),
            path + ":3: unknown flag --desnity (did you mean --density?)");
}

TEST_F(FlagArgs, WhatGflagsSilentlyIgnoresInFlagFilesIsAnError) {
  const std::string no_value = File("no_value.flags", "--lr\n");
  EXPECT_EQ(Parse({"--flagfile=" + no_value}).status().message(),
            no_value + ":1: flag --lr needs a value");
  const std::string section = File("section.flags", "sieve-worker\n--lr=1\n");
  EXPECT_NE(Parse({"--flagfile=" + section}).status().message().find(section + ":1: "),
            std::string::npos);
  const std::string self = (dir_.path() / "self.flags").string();
  File("self.flags", "--flagfile=" + self + "\n");
  EXPECT_NE(Parse({"--flagfile=" + self}).status().message().find("includes itself"),
            std::string::npos);
  auto missing = Parse({"--flagfile=" + (dir_.path() / "missing.flags").string()});
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("cannot read flag file"), std::string::npos);
  EXPECT_EQ(Parse({"--flagfile"}).status().message(), "flag --flagfile needs a file name");
}

TEST(FlagSuggestions, NearestNamesWithinTwoEdits) {
  const std::vector<std::string> names = {
      "density", "density_warmup", "num_workers", "num_servers", "lr", "v", "seed"};
  EXPECT_EQ(SuggestFlags("desnity", names), std::vector<std::string>{"density"});  // transposed
  EXPECT_EQ(SuggestFlags("densty", names), std::vector<std::string>{"density"});   // dropped
  EXPECT_EQ(SuggestFlags("num_worker", names), std::vector<std::string>{"num_workers"});
  // Equal distance: both, in the given order; nearer ones first.
  EXPECT_EQ(SuggestFlags("num_xorkers", names), std::vector<std::string>{"num_workers"});
  EXPECT_EQ(SuggestFlags("num_servrs", names), std::vector<std::string>{"num_servers"});
  EXPECT_TRUE(SuggestFlags("compressor", names).empty());
  // Short names allow one edit only: "x" is one edit from "v", "sed" one from "seed".
  EXPECT_EQ(SuggestFlags("x", names), std::vector<std::string>{"v"});
  EXPECT_TRUE(SuggestFlags("lxyz", names).empty());
  EXPECT_EQ(DidYouMean("lrr", names), " (did you mean --lr?)");
  EXPECT_EQ(DidYouMean("sed", {"seed", "sea", "set", "sex"}),
            " (did you mean --seed, --sea or --set?)");
  EXPECT_EQ(DidYouMean("compressor", names), "");
}

}  // namespace
}  // namespace sieve
