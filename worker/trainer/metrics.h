// Per-round training metrics and their JSON-lines form (--metrics_out).
//
// FormatMetricsJson renders one RoundMetrics as one JSON object on one line (no trailing
// newline), keys in this order: round, epoch, loss, train_acc, test_acc, selected, k, density,
// threshold, iterations, bytes_up, bytes_down, dense_bytes, t_compute, t_select, t_comm, t_wall,
// t_straggle, and — only when has_contraction — contraction, bound_1 (1 − k/d), bound_2 ((1 −
// k/d)²), and — only when histogram is non-empty — hist_width (bin width in σ) and hist (counts of
// the residual in bins of that width centred on its mean; the first/last bins hold everything
// beyond). Absent optional values and non-finite numbers (e.g. the threshold of `none`) are written
// as null. Times are seconds (t_wall: since training started, evaluation included unless deferred
// (--eval_deferred: the line of a deferred evaluation is written after the last round, out of round
// order); t_straggle: the part of t_compute an emulated straggler added, see straggler.h); bytes
// are this round's payload bytes.
//
// MetricsWriter appends lines to a file it owns; it flushes every line (a crash loses at most the
// line being written). Thread-safety: one thread per writer; FormatMetricsJson is pure.
#ifndef SIEVE_WORKER_TRAINER_METRICS_H_
#define SIEVE_WORKER_TRAINER_METRICS_H_

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "base/rank_pattern.h"  // ExpandRankPattern, for the {rank} in metrics_out
#include "base/status.h"

namespace sieve {

struct RoundMetrics {
  uint64_t round = 0;
  uint64_t epoch = 0;
  double loss = 0.0;
  std::optional<double> train_acc;
  std::optional<double> test_acc;
  uint64_t selected = 0;  // pairs this worker pushed
  uint64_t k = 0;         // the target count
  double density = 0.0;   // ρ of this epoch
  double threshold = 0.0;
  int iterations = 0;
  uint64_t bytes_up = 0;
  uint64_t bytes_down = 0;
  uint64_t dense_bytes = 0;  // 4·D: what a dense fp32 push would have sent
  double t_compute = 0.0;    // gradient (+ weight decay)
  double t_select = 0.0;     // momentum / error-feedback accumulate + selection
  double t_comm = 0.0;       // push, wait and apply the UPDATEs
  double t_wall = 0.0;       // wall-clock seconds since training started, at the end of the round
  double t_straggle = 0.0;   // of t_compute: the straggler's added time (--straggler)
  bool has_contraction = false;
  double contraction = 0.0;  // ‖r − sel(r)‖² / ‖r‖²
  double bound_1 = 0.0;
  double bound_2 = 0.0;
  double histogram_width = 0.0;     // in σ
  std::vector<uint64_t> histogram;  // empty = none this round

  // has_contraction, contraction = ContractionRatio(sumsq_total, sumsq_selected) (the round's
  // Σr² over D and over the k selected entries, kernels/selection.h), bound_1 = 1 − k/d and
  // bound_2 = bound_1². Both workers (sieve-worker, sieve.torch) fill them with this. d > 0.
  void SetContraction(double sumsq_total, double sumsq_selected, uint64_t k, uint64_t d);
};

std::string FormatMetricsJson(const RoundMetrics& m);

class MetricsWriter {
 public:
  MetricsWriter() = default;
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  // Creates/truncates `path`. Errors: Unavailable naming the path and errno text.
  Status Open(const std::string& path);
  bool is_open() const { return file_ != nullptr; }
  // Appends the line + '\n' and flushes. Errors: DataLoss on a write failure.
  Status Write(const RoundMetrics& m);
  // Flushes and closes (also done by the destructor). Errors: DataLoss.
  Status Close();

 private:
  std::FILE* file_ = nullptr;
  std::string path_;
};

}  // namespace sieve

#endif  // SIEVE_WORKER_TRAINER_METRICS_H_
