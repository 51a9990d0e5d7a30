#include "worker/trainer/summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sieve {

SummaryRecord WorkerSummaryRecord(const TrainSummary& s) {
  using Show = SummaryRecord::Show;
  const double ratio =
      s.dense_bytes ? static_cast<double>(s.bytes_up) / static_cast<double>(s.dense_bytes) : 0.0;
  SummaryRecord r;
  r.Int("rank", s.rank, Show::kAlways)
      .Uint("rounds", s.rounds, Show::kAlways)
      .Uint("first_round", s.first_round)
      .Uint("epochs", s.epochs, Show::kAlways);
  if (s.test_acc) {
    r.Fixed("test_acc", *s.test_acc, 4, Show::kAlways);
    if (s.near_chance()) r.Uint("near_chance", 1);
  }
  r.Real("loss", s.loss, 6, Show::kAlways)
      .Uint("bytes_up", s.bytes_up)
      .Uint("bytes_down", s.bytes_down)
      .Uint("dense_bytes", s.dense_bytes)
      .Real("ratio", ratio)
      .Real("mean_round_s", s.mean_round_s())
      .Real("max_pushpull_s", s.max_pushpull_s)
      .Fixed("seconds", s.seconds, 3, Show::kAlways)
      .Real("pushed_sum", s.pushed_sum, 9)
      .Uint("skipped_rounds", s.skipped_rounds)
      .Uint("missed_slices", s.missed_slices)
      .Real("returned_sum", s.returned_sum, 9)
      .Uint("barrier_probes", s.barrier_probes)
      .Real("barrier_p50_ms", s.barrier_p50_ms, 4)
      .Real("barrier_p99_ms", s.barrier_p99_ms, 4)
      .Fixed("barrier_probe_s", s.barrier_probe_s, 3)
      .Text("straggler", s.straggler)
      .Fixed("straggle_s", s.straggle_seconds, 3)
      .Uint("errors_retried", s.errors_retried);
  for (const auto& [name, value] : s.metrics) r.Real(name, value);
  return r;
}

std::string FormatSummaryLine(const TrainSummary& s) {
  return WorkerSummaryRecord(s).Line(kSummaryPrefix);
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
