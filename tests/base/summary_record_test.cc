// SummaryRecord's two forms against independent readers: the line split into words by hand, the
// JSON parsed by protobuf's JSON parser (google.protobuf.Struct), and WriteSummaryFile's path
// patterns and errors.
#include "base/summary_record.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "tests/base/temp_dir.h"

namespace sieve {
namespace {

using Show = SummaryRecord::Show;

google::protobuf::Struct Parse(const std::string& json) {
  google::protobuf::Struct out;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &out);
  EXPECT_TRUE(status.ok()) << status.ToString() << " in " << json;
  return out;
}

std::vector<std::string> Words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

SummaryRecord Sample() {
  SummaryRecord r;
  r.Int("rank", 3, Show::kAlways)
      .Uint("rounds", 0, Show::kAlways)
      .Uint("applied", 0)
      .Uint("bytes_up", 18446744073709551615ull)
      .Int("restored_round", -1, Show::kHidden)
      .Real("loss", 0.123456789012)
      .Real("pushed_sum", -1.0 / 3.0, 9)
      .Fixed("seconds", 2.5, 3, Show::kAlways)
      .Real("ratio", 0.0)
      .Text("late_workers", "")
      .Text("straggler", "1:3x slow")
      .Text("checksum", "00ab\"cd", Show::kAlways);
  return r;
}

TEST(SummaryRecordTest, LineShowsAlwaysFieldsAndNonZeroOnes) {
  EXPECT_EQ(Words(Sample().Line("sieve-x summary:")),
            (std::vector<std::string>{"sieve-x", "summary:", "rank=3", "rounds=0",
                                      "bytes_up=18446744073709551615", "loss=0.123457",
                                      "pushed_sum=-0.333333333", "seconds=2.500",
                                      "straggler=1:3x_slow", "checksum=00ab\"cd"}));
}

TEST(SummaryRecordTest, JsonHasEveryFieldExactly) {
  const std::string json = Sample().Json();
  const auto parsed = Parse(json);
  const auto& f = parsed.fields();
  ASSERT_EQ(f.size(), 12u) << json;
  EXPECT_EQ(f.at("rank").number_value(), 3);
  EXPECT_EQ(f.at("rounds").number_value(), 0);
  EXPECT_EQ(f.at("applied").number_value(), 0);
  EXPECT_EQ(f.at("restored_round").number_value(), -1);
  EXPECT_EQ(f.at("loss").number_value(), 0.123456789012);  // every digit, not the line's 6
  EXPECT_EQ(f.at("pushed_sum").number_value(), -1.0 / 3.0);
  EXPECT_EQ(f.at("seconds").number_value(), 2.5);
  EXPECT_EQ(f.at("late_workers").string_value(), "");
  EXPECT_EQ(f.at("straggler").string_value(), "1:3x slow");
  EXPECT_EQ(f.at("checksum").string_value(), "00ab\"cd");
  // A uint64 beyond 2^53 is written exactly (a double reader rounds it; the text keeps it).
  EXPECT_NE(json.find("\"bytes_up\":18446744073709551615"), std::string::npos) << json;
  // The fields keep their order.
  EXPECT_LT(json.find("\"rank\""), json.find("\"rounds\""));
  EXPECT_LT(json.find("\"straggler\""), json.find("\"checksum\""));
}

TEST(SummaryRecordTest, NonFiniteRealsAreNullInJson) {
  SummaryRecord r;
  r.Real("loss", std::nan(""), 6, Show::kAlways)
      .Real("inf", std::numeric_limits<double>::infinity());
  const auto parsed = Parse(r.Json());
  EXPECT_TRUE(parsed.fields().at("loss").has_null_value());
  EXPECT_TRUE(parsed.fields().at("inf").has_null_value());
  EXPECT_EQ(Words(r.Line("p")), (std::vector<std::string>{"p", "loss=nan", "inf=inf"}));
}

TEST(SummaryRecordTest, ListsAreArraysOfObjectsAndStayOffTheLine) {
  SummaryRecord shard;
  shard.Int("shard", 2, Show::kAlways).Uint("applied", 7);
  SummaryRecord r;
  r.Int("rank", 0, Show::kAlways).List("shards", {shard, shard}).List("none", {});
  EXPECT_EQ(r.Line("p"), "p rank=0");
  const auto parsed = Parse(r.Json());
  const auto& shards = parsed.fields().at("shards").list_value();
  ASSERT_EQ(shards.values_size(), 2);
  EXPECT_EQ(shards.values(1).struct_value().fields().at("shard").number_value(), 2);
  EXPECT_EQ(shards.values(1).struct_value().fields().at("applied").number_value(), 7);
  EXPECT_EQ(parsed.fields().at("none").list_value().values_size(), 0);
}

TEST(SummaryRecordDeathTest, AKeyTwiceOrABadKeyIsOurBug) {
  EXPECT_DEATH(SummaryRecord().Uint("a", 1).Uint("a", 2), "");
  EXPECT_DEATH(SummaryRecord().Uint("Bad-Key", 1), "");
}

TEST(WriteSummaryFileTest, ExpandsRoleAndRankAndWritesTheJson) {
  testing::TempDir dir;
  SummaryRecord r;
  r.Int("rank", 4, Show::kAlways);
  ASSERT_TRUE(WriteSummaryFile((dir.path() / "{role}-{rank}.json").string(), "server", 4, r).ok());
  std::ifstream in(dir.path() / "server-4.json");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), r.Json() + "\n");
}

TEST(WriteSummaryFileTest, AnUnwritablePathIsUnavailableNamingTheFlag) {
  testing::TempDir dir;
  const Status s =
      WriteSummaryFile((dir.path() / "missing" / "x.json").string(), "worker", 0, SummaryRecord());
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("--summary_out"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("missing"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace sieve
