// The per-round bookkeeping every worker does around its selection and push/pull, written once for
// sieve-worker's training loop (worker/trainer/trainer.cc) and the Python worker (sieve.torch,
// through the module's `_core.ThresholdHints` / `_core.RoundLedger`):
//
//   ThresholdHints: the warm-start hints of a selection (SelectOptions::prev_threshold and
//     older_threshold): the last two thresholds that were finite and > 0, the latest first. A
//     NaN, ±inf, 0 or negative threshold (a dense or empty round, an operator without one) leaves
//     them as they are.
//   RoundLedger: a worker's running totals of what it pushed and what its rounds came to —
//     pushed_sum (Σ of every value pushed, fp64, value by value in selection order), bytes_up /
//     bytes_down (payload bytes, RoundStats), pairs_up ((index, value) pairs pushed), and with
//     backup workers skipped_rounds (rounds that closed without this worker), missed_slices
//     (shards whose round closed without this push) and returned_sum (Σ of the pairs those
//     shards never applied, back in the residual: fp64, value by value in RoundStats order), and
//     rounds (how far the worker advanced: 1 + the rounds skipped, per push/pull).
//
// The sums are the same fp64 additions in the same order in both workers, so both report
// bit-identical totals for the same pushes. Thread-safety: neither is thread-safe; one per worker
// (ThresholdHints: one per selection stream), driven by its training thread.
#ifndef SIEVE_WORKER_TRAINER_ROUND_LEDGER_H_
#define SIEVE_WORKER_TRAINER_ROUND_LEDGER_H_

#include <cstdint>
#include <limits>

#include "kernels/selection.h"
#include "worker/client/ps_client.h"

namespace sieve {

class ThresholdHints {
 public:
  // Keeps `threshold` as the latest hint (the previous one becomes older()) when it is finite and
  // > 0; ignores it otherwise.
  void Observe(float threshold);
  // Restores both hints as they were (a checkpoint's), unchecked.
  void Set(float prev, float older) {
    prev_ = prev;
    older_ = older;
  }
  float prev() const { return prev_; }    // the last threshold kept (0: none yet)
  float older() const { return older_; }  // the one before it (0: none yet)
  // Writes the hints into a selection's options (prev_threshold, older_threshold).
  void Fill(SelectOptions* so) const;

 private:
  float prev_ = 0.0f;
  float older_ = 0.0f;
};

class RoundLedger {
 public:
  // The selection about to be pushed: its values are added to pushed_sum one by one.
  void AfterSelect(const Selection& sel);
  // The push/pull's outcome: counts its bytes, pairs, missed shards and their values, and the
  // rounds skipped — at most max_skip of them (the caller's cap, e.g. the rounds left in its run).
  // Returns how many rounds the worker advances: 1 + the rounds skipped (as capped).
  uint64_t AfterPushPull(const RoundStats& st,
                         uint64_t max_skip = std::numeric_limits<uint64_t>::max());
  // Bytes sent and received outside push/pull (the Python worker's collectives).
  void AddTransfer(uint64_t up, uint64_t down) {
    bytes_up_ += up;
    bytes_down_ += down;
  }

  uint64_t rounds() const { return rounds_; }  // rounds advanced by AfterPushPull in all
  uint64_t skipped_rounds() const { return skipped_rounds_; }
  uint64_t missed_slices() const { return missed_slices_; }
  double returned_sum() const { return returned_sum_; }
  uint64_t bytes_up() const { return bytes_up_; }
  uint64_t bytes_down() const { return bytes_down_; }
  uint64_t pairs_up() const { return pairs_up_; }
  double pushed_sum() const { return pushed_sum_; }

 private:
  uint64_t rounds_ = 0;
  uint64_t skipped_rounds_ = 0;
  uint64_t missed_slices_ = 0;
  double returned_sum_ = 0.0;
  uint64_t bytes_up_ = 0;
  uint64_t bytes_down_ = 0;
  uint64_t pairs_up_ = 0;
  double pushed_sum_ = 0.0;
};

}  // namespace sieve

#endif  // SIEVE_WORKER_TRAINER_ROUND_LEDGER_H_
