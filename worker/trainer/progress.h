// Progress reporting of a training run. On a terminal (tty = true) a single self-overwriting line
// on stdout: a bar, rounds done / total, the running loss and an ETA extrapolated from the mean
// round time so far, redrawn at most 10 times a second. Otherwise a progress line on stdout
// (proto/progress_line.h: epoch, round, loss, bytes pushed), flushed, at most once a second and
// after the last round: `sieve launch` reads these to show the job's progress. In both modes
// EndEpoch prints one line per epoch ("epoch E/N:", counted from 1; mean loss, test accuracy when
// evaluated, bytes pushed so far, mean pairs selected per round): to stdout after the bar on a
// terminal, else via glog INFO. Thread-safety: one thread per reporter.
#ifndef SIEVE_WORKER_TRAINER_PROGRESS_H_
#define SIEVE_WORKER_TRAINER_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "proto/progress_line.h"  // FormatDuration

namespace sieve {

class ProgressReporter {
 public:
  ProgressReporter(bool tty, uint64_t total_rounds, uint64_t rounds_per_epoch);

  // After round `rounds_done - 1` finished; `bytes_up` pushed so far.
  void Round(uint64_t rounds_done, double loss, uint64_t bytes_up);
  void EndEpoch(uint64_t epoch, double mean_loss, std::optional<double> test_acc,
                uint64_t bytes_up_total, double selected_per_round);
  // Terminates the bar line (terminal mode).
  void Finish();

 private:
  using Clock = std::chrono::steady_clock;
  bool tty_;
  uint64_t total_;
  uint64_t per_epoch_;
  Clock::time_point start_;
  Clock::time_point last_draw_;
  bool drawn_ = false;
};

}  // namespace sieve

#endif  // SIEVE_WORKER_TRAINER_PROGRESS_H_
