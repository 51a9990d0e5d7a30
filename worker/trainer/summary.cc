#include "worker/trainer/summary.h"

#include <cstdio>

namespace sieve {

std::string FormatSummaryLine(const TrainSummary& s) {
  char buf[512];
  std::string out = kSummaryPrefix;
  std::snprintf(buf, sizeof(buf), " rank=%d rounds=%llu first_round=%llu epochs=%llu", s.rank,
                static_cast<unsigned long long>(s.rounds),
                static_cast<unsigned long long>(s.first_round),
                static_cast<unsigned long long>(s.epochs));
  out += buf;
  if (s.test_acc) {
    std::snprintf(buf, sizeof(buf), " test_acc=%.4f", *s.test_acc);
    out += buf;
    if (s.near_chance()) out += " near_chance=1";
  }
  const double ratio =
      s.dense_bytes ? static_cast<double>(s.bytes_up) / static_cast<double>(s.dense_bytes) : 0.0;
  std::snprintf(buf, sizeof(buf),
                " loss=%.6g bytes_up=%llu bytes_down=%llu dense_bytes=%llu ratio=%.6g"
                " mean_round_s=%.6g max_pushpull_s=%.6g seconds=%.3f pushed_sum=%.9g",
                s.loss, static_cast<unsigned long long>(s.bytes_up),
                static_cast<unsigned long long>(s.bytes_down),
                static_cast<unsigned long long>(s.dense_bytes), ratio, s.mean_round_s(),
                s.max_pushpull_s, s.seconds, s.pushed_sum);
  out += buf;
  if (s.skipped_rounds > 0 || s.missed_slices > 0) {
    std::snprintf(buf, sizeof(buf), " skipped_rounds=%llu missed_slices=%llu returned_sum=%.9g",
                  static_cast<unsigned long long>(s.skipped_rounds),
                  static_cast<unsigned long long>(s.missed_slices), s.returned_sum);
    out += buf;
  }
  if (s.barrier_probes > 0) {
    std::snprintf(buf, sizeof(buf),
                  " barrier_probes=%llu barrier_p50_ms=%.4g barrier_p99_ms=%.4g"
                  " barrier_probe_s=%.3f",
                  static_cast<unsigned long long>(s.barrier_probes), s.barrier_p50_ms,
                  s.barrier_p99_ms, s.barrier_probe_s);
    out += buf;
  }
  if (!s.straggler.empty()) {
    std::snprintf(buf, sizeof(buf), " straggle_s=%.3f", s.straggle_seconds);
    out += " straggler=" + s.straggler + buf;
  }
  return out;
}

}  // namespace sieve
