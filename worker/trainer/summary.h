// The end-of-run summary every worker gives, one record (base/summary_record.h) in two forms:
//   a line for people, `sieve-worker summary: rank=R rounds=N epochs=E [test_acc=0.xxxx] loss=L
//       ... seconds=S` followed by the fields that are not zero;
//   with --summary_out=PATH, a JSON object of every field, for programs (docs/protocol.md,
//       "Run summaries"). Programs read the file, never the line.
// Fields: rank; rounds (the job's round count the worker reached); first_round (0, or the join
// round of a worker that rejoined a running job); epochs; test_acc (only when the worker
// evaluated: rank 0 on a real model) and near_chance=1 under twice chance (0.2 for 10 classes:
// the model did not learn); loss (mean training loss of the last epoch); bytes_up, bytes_down
// (totals); dense_bytes = 4·D·rounds (what dense fp32 pushes would have sent); ratio = bytes_up /
// dense_bytes; mean_round_s; max_pushpull_s (the longest push-to-last-UPDATE wait of a round: a
// server failover's stall shows there); seconds (wall time of the training loop); pushed_sum (Σ of
// every value pushed, fp64, for conservation checks); with backup workers skipped_rounds,
// missed_slices, returned_sum (TrainSummary); with --barrier_probe barrier_probes,
// barrier_p50_ms, barrier_p99_ms, barrier_probe_s (barrier_probe.h); with --straggler straggler
// (the spec as written) and straggle_s (the seconds it added); then a Python script's record()
// metrics by their names. Thread-safety: pure.
#ifndef SIEVE_WORKER_TRAINER_SUMMARY_H_
#define SIEVE_WORKER_TRAINER_SUMMARY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/summary_record.h"
#include "worker/client/worker_progress.h"

namespace sieve {

inline constexpr char kSummaryPrefix[] = "sieve-worker summary:";

struct TrainSummary {
  int rank = 0;
  uint64_t rounds = 0;       // rounds of the job completed when this worker stopped
  uint64_t first_round = 0;  // 0, or the join round after a rejoin
  uint64_t epochs = 0;
  std::optional<double> test_acc;
  double loss = 0.0;  // mean training loss of the last epoch
  uint64_t bytes_up = 0;
  uint64_t bytes_down = 0;
  uint64_t dense_bytes = 0;
  double seconds = 0.0;           // wall time of the training loop
  double max_pushpull_s = 0.0;    // the longest round's push/pull (push sent -> last UPDATE in)
  double pushed_sum = 0.0;        // Σ of every value pushed (fp64), for conservation checks
  std::string straggler;          // this worker's --straggler spec; "" = none
  double straggle_seconds = 0.0;  // added by the straggler, in all
  // BSP with backup workers: rounds that closed without this worker and that it skipped, the
  // shard slices of its pushes that no server applied, and the Σ of their values (fp64), which
  // went back into its residual: Σ pushed_sum - returned_sum over the workers = Σ of the servers'
  // pushed_sum. Printed as skipped_rounds= missed_slices= returned_sum= when either count is > 0.
  uint64_t skipped_rounds = 0;
  uint64_t missed_slices = 0;
  double returned_sum = 0.0;
  // --barrier_probe: the barriers timed after the start, their p50 / p99 latency and the probe's
  // wall time (before the training loop's clock starts). Printed when barrier_probes > 0.
  uint64_t barrier_probes = 0;
  double barrier_p50_ms = 0.0;
  double barrier_p99_ms = 0.0;
  double barrier_probe_s = 0.0;
  // ERRORs a peer could have caused (a corrupted or forged copy of a request) that the client
  // answered by sending the request again (PsClient::errors_retried). Printed when > 0.
  uint64_t errors_retried = 0;
  // A Python script's own metrics (sieve.torch record()): the last value of each, in order.
  std::vector<std::pair<std::string, double>> metrics;
  // Under twice the chance accuracy of 10 classes.
  bool near_chance() const { return test_acc.has_value() && *test_acc < 0.2; }
  double mean_round_s() const {
    return rounds > first_round ? seconds / static_cast<double>(rounds - first_round) : 0.0;
  }
};

SummaryRecord WorkerSummaryRecord(const TrainSummary& s);
// WorkerSummaryRecord(s).Line(kSummaryPrefix).
std::string FormatSummaryLine(const TrainSummary& s);

// This worker's part of the job's status (PsClient::Report): `rounds_done` of `total_rounds`, in
// epoch `epoch` (from 0) of s.epochs, the last round's loss, and the summary's totals so far.
WorkerProgress WorkerProgressOf(const TrainSummary& s, uint64_t rounds_done, uint64_t total_rounds,
                                uint64_t epoch, std::optional<double> loss);

}  // namespace sieve

#endif  // SIEVE_WORKER_TRAINER_SUMMARY_H_
