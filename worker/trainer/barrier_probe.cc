#include "worker/trainer/barrier_probe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

namespace sieve {

double NearestRankPercentile(std::vector<double> samples, double q) {
  if (samples.empty()) return 0.0;
  const size_t n = samples.size();
  // The rank ceil(q·n), within 1..n (q·n computed in fp64: exact for the q and n used here).
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(n)));
  rank = std::clamp<size_t>(rank, 1, n);
  std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(rank - 1),
                   samples.end());
  return samples[rank - 1];
}

BarrierProbeStats SummarizeBarrierLatencies(const std::vector<double>& latencies_ms) {
  BarrierProbeStats s;
  s.probes = latencies_ms.size();
  s.p50_ms = NearestRankPercentile(latencies_ms, 0.50);
  s.p99_ms = NearestRankPercentile(latencies_ms, 0.99);
  return s;
}

StatusOr<BarrierProbeStats> RunBarrierProbe(int n, const std::function<Status()>& barrier) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> ms;
  ms.reserve(static_cast<size_t>(std::max(n, 0)));
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < n; ++i) {
    const Clock::time_point t = Clock::now();
    Status s = barrier();
    if (!s.ok()) {
      return Status(s.code(), "barrier probe " + std::to_string(i + 1) + " of " +
                                  std::to_string(n) + ": " + s.message());
    }
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count());
  }
  BarrierProbeStats stats = SummarizeBarrierLatencies(ms);
  stats.total_s = std::chrono::duration<double>(Clock::now() - start).count();
  return stats;
}

}  // namespace sieve
