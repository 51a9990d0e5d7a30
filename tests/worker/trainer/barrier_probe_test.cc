// The barrier probe of sieve-worker --barrier_probe (worker/trainer/barrier_probe.h): the
// nearest-rank percentiles against their definition, the timing of each call against a fake
// barrier of known minimum durations, the first error stopping the probe, and the summary line's
// fields.
#include "worker/trainer/barrier_probe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "worker/trainer/summary.h"

namespace sieve {
namespace {

// The definition, by counting: x is the q-quantile when at least ceil(q·n) samples are <= x and
// fewer than ceil(q·n) are < x.
void ExpectIsNearestRank(const std::vector<double>& v, double q, double x) {
  const auto need = static_cast<long>(std::ceil(q * static_cast<double>(v.size())));
  const long le = std::count_if(v.begin(), v.end(), [x](double y) { return y <= x; });
  const long lt = std::count_if(v.begin(), v.end(), [x](double y) { return y < x; });
  EXPECT_GE(le, std::max(need, 1L)) << "q=" << q << " n=" << v.size();
  EXPECT_LT(lt, std::max(need, 1L)) << "q=" << q << " n=" << v.size();
  EXPECT_NE(std::find(v.begin(), v.end(), x), v.end()) << "not a sample";
}

TEST(WorkerBarrierProbe, NearestRankPercentileClosedForms) {
  std::vector<double> v(100);
  for (int i = 0; i < 100; ++i) v[i] = i + 1;  // 1..100
  std::mt19937 rng(7);
  std::shuffle(v.begin(), v.end(), rng);
  EXPECT_EQ(NearestRankPercentile(v, 0.50), 50);
  EXPECT_EQ(NearestRankPercentile(v, 0.99), 99);
  EXPECT_EQ(NearestRankPercentile(v, 1.0), 100);
  EXPECT_EQ(NearestRankPercentile(v, 0.001), 1);
  // 20 samples: ceil(0.99·20) = 20, the maximum; ceil(0.5·20) = 10.
  std::vector<double> twenty(v.begin(), v.begin() + 20);
  std::vector<double> sorted = twenty;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(NearestRankPercentile(twenty, 0.99), sorted[19]);
  EXPECT_EQ(NearestRankPercentile(twenty, 0.50), sorted[9]);
  EXPECT_EQ(NearestRankPercentile({4.5}, 0.5), 4.5);
  EXPECT_EQ(NearestRankPercentile({}, 0.5), 0.0);
}

TEST(WorkerBarrierProbe, NearestRankPercentileMatchesTheDefinition) {
  std::mt19937 rng(11);
  std::exponential_distribution<double> latency(0.2);
  for (int n : {1, 2, 3, 7, 50, 101, 1000}) {
    std::vector<double> v(static_cast<size_t>(n));
    for (double& x : v) x = std::round(latency(rng) * 4) / 4;  // ties on purpose
    for (double q : {0.01, 0.25, 0.5, 0.9, 0.99, 1.0}) {
      ExpectIsNearestRank(v, q, NearestRankPercentile(v, q));
    }
    const BarrierProbeStats s = SummarizeBarrierLatencies(v);
    EXPECT_EQ(s.probes, static_cast<uint64_t>(n));
    EXPECT_EQ(s.p50_ms, NearestRankPercentile(v, 0.5));
    EXPECT_EQ(s.p99_ms, NearestRankPercentile(v, 0.99));
    EXPECT_LE(s.p50_ms, s.p99_ms);
  }
}

TEST(WorkerBarrierProbe, TimesEachCall) {
  // Ten barriers of at least 2 ms, the last of at least 40 ms: with ten samples p99 is the largest
  // (ceil(9.9) = 10), p50 the fifth. Only lower bounds: a loaded machine makes every sleep longer.
  int calls = 0;
  auto barrier = [&calls] {
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(calls == 10 ? 40 : 2));
    return Status::Ok();
  };
  auto stats = RunBarrierProbe(10, barrier);
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_EQ(calls, 10);
  EXPECT_EQ(stats->probes, 10u);
  EXPECT_GE(stats->p50_ms, 2.0);
  EXPECT_GE(stats->p99_ms, 40.0);
  EXPECT_GE(stats->total_s, (9 * 2 + 40) * 1e-3);
  EXPECT_GE(stats->total_s * 1e3, stats->p99_ms);
}

TEST(WorkerBarrierProbe, NoneAndTheFirstErrorStops) {
  int calls = 0;
  auto none = RunBarrierProbe(0, [&calls] {
    ++calls;
    return Status::Ok();
  });
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(none->probes, 0u);
  auto failing = RunBarrierProbe(
      5, [&calls] { return ++calls == 3 ? DeadlineExceededError("no release") : Status::Ok(); });
  ASSERT_FALSE(failing.ok());
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(failing.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(failing.status().message().find("barrier probe 3 of 5: no release"), std::string::npos)
      << failing.status().message();
}

TEST(WorkerBarrierProbe, SummaryLineFields) {
  TrainSummary s;
  s.rounds = 10;
  s.seconds = 1.0;
  EXPECT_EQ(FormatSummaryLine(s).find("barrier_"), std::string::npos);  // not probed: no fields
  std::vector<double> ms;
  for (int i = 1; i <= 100; ++i) ms.push_back(0.25 * i);  // 0.25 .. 25 ms
  const BarrierProbeStats p = SummarizeBarrierLatencies(ms);
  s.barrier_probes = p.probes;
  s.barrier_p50_ms = p.p50_ms;
  s.barrier_p99_ms = p.p99_ms;
  s.barrier_probe_s = 1.25;
  const std::string line = FormatSummaryLine(s);
  EXPECT_NE(line.find(" barrier_probes=100 barrier_p50_ms=12.5 barrier_p99_ms=24.75 "
                      "barrier_probe_s=1.250"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find(" seconds=1.000 "), std::string::npos) << line;
}

}  // namespace
}  // namespace sieve
