#include "worker/trainer/summary.h"

#include <algorithm>
#include <cmath>
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

WorkerProgress WorkerProgressOf(const TrainSummary& s, uint64_t rounds_done, uint64_t total_rounds,
                                uint64_t epoch, std::optional<double> loss) {
  WorkerProgress p;
  p.round = std::min(rounds_done, total_rounds);
  p.total_rounds = total_rounds;
  p.epoch = static_cast<uint32_t>(std::min<uint64_t>(epoch + 1, s.epochs));
  p.epochs = static_cast<uint32_t>(s.epochs);
  if (loss && std::isfinite(*loss) && *loss >= 0) p.loss = loss;
  if (s.test_acc) p.test_accuracy = std::clamp(*s.test_acc, 0.0, 1.0);
  p.bytes_pushed = s.bytes_up;
  p.bytes_pulled = s.bytes_down;
  p.skipped_rounds = s.skipped_rounds;
  p.missed_slices = s.missed_slices;
  p.straggle_seconds = s.straggle_seconds;
  return p;
}

}  // namespace sieve
