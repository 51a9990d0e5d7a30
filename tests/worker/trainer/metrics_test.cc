#include "worker/trainer/metrics.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <limits>

#include "worker/trainer/progress.h"
#include "worker/trainer/summary.h"

namespace sieve {
namespace {

// The text of `"key":value` in a one-line JSON object (value up to the next ',' or '}').
std::string ValueOf(const std::string& json, const std::string& key) {
  const std::string needle = "\"" + key + "\":";
  size_t pos = json.find(needle);
  if (pos == std::string::npos) return "<absent>";
  pos += needle.size();
  return json.substr(pos, json.find_first_of(",}", pos) - pos);
}

TEST(WorkerTrainerMetrics, JsonLineHasEveryKeyAndParsesBack) {
  RoundMetrics m;
  m.round = 12;
  m.epoch = 1;
  m.loss = 0.25;
  m.test_acc = 0.875;
  m.selected = 199;
  m.k = 199;
  m.density = 0.001;
  m.threshold = 0.0125f;
  m.iterations = 2;
  m.bytes_up = 1700;
  m.bytes_down = 3000;
  m.dense_bytes = 796840;
  m.t_compute = 0.002;
  m.t_select = 0.0005;
  m.t_comm = 0.001;
  m.t_wall = 12.5;
  m.t_straggle = 0.001;
  const std::string line = FormatMetricsJson(m);
  EXPECT_EQ(line.front(), '{');
  EXPECT_EQ(line.back(), '}');
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(ValueOf(line, "round"), "12");
  EXPECT_EQ(ValueOf(line, "epoch"), "1");
  EXPECT_DOUBLE_EQ(std::stod(ValueOf(line, "loss")), 0.25);
  EXPECT_EQ(ValueOf(line, "train_acc"), "null");
  EXPECT_DOUBLE_EQ(std::stod(ValueOf(line, "test_acc")), 0.875);
  EXPECT_EQ(ValueOf(line, "selected"), "199");
  EXPECT_EQ(ValueOf(line, "k"), "199");
  EXPECT_DOUBLE_EQ(std::stod(ValueOf(line, "density")), 0.001);
  EXPECT_NEAR(std::stod(ValueOf(line, "threshold")), 0.0125, 1e-9);
  EXPECT_EQ(ValueOf(line, "iterations"), "2");
  EXPECT_EQ(ValueOf(line, "bytes_up"), "1700");
  EXPECT_EQ(ValueOf(line, "bytes_down"), "3000");
  EXPECT_EQ(ValueOf(line, "dense_bytes"), "796840");
  EXPECT_DOUBLE_EQ(std::stod(ValueOf(line, "t_compute")), 0.002);
  EXPECT_DOUBLE_EQ(std::stod(ValueOf(line, "t_select")), 0.0005);
  EXPECT_DOUBLE_EQ(std::stod(ValueOf(line, "t_comm")), 0.001);
  EXPECT_DOUBLE_EQ(std::stod(ValueOf(line, "t_wall")), 12.5);
  EXPECT_DOUBLE_EQ(std::stod(ValueOf(line, "t_straggle")), 0.001);
  EXPECT_EQ(ValueOf(line, "contraction"), "<absent>");
  EXPECT_EQ(ValueOf(line, "hist"), "<absent>");
}

TEST(WorkerTrainerMetrics, HistogramIsAJsonArrayOfCounts) {
  RoundMetrics m;
  m.histogram_width = 0.25;
  m.histogram = {0, 3, 17, 4, 1};
  const std::string line = FormatMetricsJson(m);
  EXPECT_DOUBLE_EQ(std::stod(ValueOf(line, "hist_width")), 0.25);
  const size_t at = line.find("\"hist\":[");
  ASSERT_NE(at, std::string::npos) << line;
  EXPECT_EQ(line.substr(at + 7, line.find(']', at) - at - 6), "[0,3,17,4,1]");
  EXPECT_EQ(line.back(), '}');
}

TEST(WorkerTrainerMetrics, ContractionAndNonFiniteValues) {
  RoundMetrics m;
  m.threshold = std::numeric_limits<float>::quiet_NaN();
  m.has_contraction = true;
  m.contraction = 0.99;
  m.bound_1 = 0.999;
  m.bound_2 = 0.998001;
  const std::string line = FormatMetricsJson(m);
  EXPECT_EQ(ValueOf(line, "threshold"), "null");
  EXPECT_DOUBLE_EQ(std::stod(ValueOf(line, "contraction")), 0.99);
  EXPECT_DOUBLE_EQ(std::stod(ValueOf(line, "bound_1")), 0.999);
  EXPECT_DOUBLE_EQ(std::stod(ValueOf(line, "bound_2")), 0.998001);
  EXPECT_EQ(line.find("nan"), std::string::npos);
  EXPECT_EQ(line.find("inf"), std::string::npos);
}

TEST(WorkerTrainerMetrics, WriterWritesOneLinePerRound) {
  const std::string path =
      ::testing::TempDir() + "/metrics_" + std::to_string(getpid()) + "_{rank}.jsonl";
  const std::string real = ExpandRankPattern(path, 3);
  EXPECT_EQ(real.find("{rank}"), std::string::npos);
  EXPECT_NE(real.find("_3.jsonl"), std::string::npos);
  {
    MetricsWriter w;
    ASSERT_TRUE(w.Open(real).ok());
    RoundMetrics m;
    for (uint64_t r = 0; r < 3; ++r) {
      m.round = r;
      ASSERT_TRUE(w.Write(m).ok());
    }
    ASSERT_TRUE(w.Close().ok());
  }
  std::ifstream in(real);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) EXPECT_EQ(ValueOf(line, "round"), std::to_string(n++));
  EXPECT_EQ(n, 3);
  std::remove(real.c_str());
  MetricsWriter bad;
  EXPECT_EQ(bad.Open("/nonexistent-dir/x.jsonl").code(), StatusCode::kUnavailable);
}

TEST(WorkerTrainerSummary, LineIsKeyValueParsable) {
  TrainSummary s;
  s.rank = 0;
  s.rounds = 100;
  s.epochs = 2;
  s.test_acc = 0.88126;
  s.loss = 0.31;
  s.bytes_up = 1000;
  s.bytes_down = 4000;
  s.dense_bytes = 800000;
  s.seconds = 5.0;
  const std::string line = FormatSummaryLine(s);
  EXPECT_EQ(line.rfind(kSummaryPrefix, 0), 0u);
  EXPECT_NE(line.find(" rounds=100 "), std::string::npos);
  EXPECT_NE(line.find(" test_acc=0.8813 "), std::string::npos) << line;
  EXPECT_NE(line.find(" bytes_up=1000 "), std::string::npos);
  EXPECT_NE(line.find(" dense_bytes=800000 "), std::string::npos);
  EXPECT_NE(line.find(" ratio=0.00125 "), std::string::npos) << line;
  EXPECT_NE(line.find(" mean_round_s=0.05 "), std::string::npos) << line;
  EXPECT_EQ(line.find("near_chance"), std::string::npos);
  s.test_acc = 0.1002;
  EXPECT_NE(FormatSummaryLine(s).find(" test_acc=0.1002 near_chance=1 "), std::string::npos);
  s.test_acc.reset();
  EXPECT_EQ(FormatSummaryLine(s).find("test_acc"), std::string::npos);
  EXPECT_EQ(FormatSummaryLine(s).find("straggle"), std::string::npos);
  s.straggler = "delay:5ms";
  s.straggle_seconds = 0.5;
  EXPECT_NE(FormatSummaryLine(s).find(" straggler=delay:5ms straggle_s=0.500"), std::string::npos)
      << FormatSummaryLine(s);
}

TEST(WorkerTrainerProgress, FormatsDurations) {
  EXPECT_EQ(FormatDuration(7.2), "7s");
  EXPECT_EQ(FormatDuration(245), "4m05s");
  EXPECT_EQ(FormatDuration(3723), "1h02m03s");
  EXPECT_EQ(FormatDuration(-1), "0s");
}

}  // namespace
}  // namespace sieve
