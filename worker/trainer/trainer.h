// Trainer: one worker's training loop (docs/architecture.md, "One round (worker w, round t)").
// Per round t:
//   1. g = ∇L(w; batch) + wd·w          (synthetic: see synthetic_gradient.h)
//   2.–3. m = μ·m + g;  r += η_t·m      (ErrorFeedback::Accumulate)
//   4.–5. S = select(r) with k = KForDensity(ρ_epoch, D); r[S] = m[S] = 0 (none: dense, m kept)
//   6. PsClient::PushPull(t, S): w[i] = the servers' new values
// Schedules (rounds per epoch, batch order, η_t, ρ_epoch) are those of schedule.h, so a
// single-process reference reproduces them. Rounds are numbered from 0 across epochs.
//
// Device residency (docs/architecture.md, "Where a worker's buffers live"): the replica w, the
// gradient, the error-feedback state (m, r), the model's activations and the training partition
// (staged once) live in the memory of `device`; mini-batches are gathered there. Per round only
// the selected (index, value) pairs come to the host (Selection) and only the UPDATE's pairs go
// back, scattered into w on the device. A training partition that does not fit in GPU memory is
// kept on the host and each batch is copied up instead (logged once). On the CPU device all of
// this is host memory and no copy is made.
//
// Start-up: the replica starts from InitParams(layout, seed), is then replaced by a dense pull of
// the servers' weights (authoritative; a mismatch is logged as a warning: different seeds), and the
// workers meet in a barrier. Rank 0 evaluates test (and local-partition train) accuracy on its
// replica every eval_every epochs and after the last one (with eval_deferred, on host copies of
// the replica after the last round, see trainer_options.h). Metrics lines go to metrics_out (only
// rank 0 writes, unless the path contains "{rank}"); the replica is written to dump_weights at the
// end. The trainer does not call Finish / WaitShutdown: the daemon does.
//
// Timeline (options.trace_out, docs/tracing.md): a Chrome trace-event file of this worker's rounds
// in options.trace_rounds (trace/trace_writer.h), opened before the worker enters the job, its zero
// the moment it left the start barriers (or, for a worker that joined a running job, the moment
// it joined). Each recorded round is a "round" span on the training thread holding the spans of
// its phases: compute (the batch, forward and backward pass or the synthetic gradient, weight
// decay, an emulated straggler's stall), select (error feedback and selection), push (the
// client's split by shard, 16-bit packing and sends), wait (until every server's UPDATE of the
// round is in, including staging their pairs), apply (the scatter into the replica) and, in
// evaluation rounds, evaluate; args give the round, bytes up and down. Written at the end of Run,
// and also when the Trainer is destroyed after a failed Run (marked incomplete).
//
// Divergence: a non-finite loss, or a selection that meets non-finite residual entries, stops the
// run with FailedPrecondition naming the round, the learning rate and what to try.
//
// Ownership: the Trainer borrows the PsClient (it must outlive Run). Thread-safety: one thread.
#ifndef SIEVE_WORKER_TRAINER_TRAINER_H_
#define SIEVE_WORKER_TRAINER_TRAINER_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "kernels/device.h"
#include "kernels/model/model_layout.h"
#include "kernels/nn/device_buffer.h"
#include "kernels/nn/nn_ops.h"
#include "trace/trace_writer.h"
#include "worker/client/ps_client.h"
#include "worker/data/dataset.h"
#include "worker/model/model.h"
#include "worker/trainer/summary.h"
#include "worker/trainer/synthetic_gradient.h"
#include "worker/trainer/trainer_options.h"

namespace sieve {

class ErrorFeedback;
class MetricsWriter;
struct RoundMetrics;

class Trainer {
 public:
  // Loads this rank's data partition (and the test set on rank 0), builds the model and the
  // error-feedback state. `options` must have passed ValidateTrainerOptions; client->num_params()
  // must equal the layout's D. Errors: data loading, device, FailedPrecondition when a partition
  // holds less than one batch.
  static StatusOr<std::unique_ptr<Trainer>> Create(const TrainerOptions& options, Device device,
                                                   PsClient* client);
  ~Trainer();

  int64_t steps_per_epoch() const { return steps_per_epoch_; }

  // Trains for options.epochs epochs. Errors: those of PsClient (a stopped job is Aborted),
  // selection, metrics or dump files.
  StatusOr<TrainSummary> Run();

  // A host copy of the replica (length D).
  Status ReadWeights(std::vector<float>* out) const;

 private:
  Trainer(const TrainerOptions& options, Device device, PsClient* client, ModelLayout layout);
  Status Load();
  // Stages the training partition (and rank 0's test set) in device memory when it fits.
  Status StageData();
  // Enters the job (worker/client/worker_start.h: worker 0 offers InitParams' weights, the start
  // barrier, the servers' weights; or the rejoin of a restarted worker) and uploads the servers'
  // weights into the replica. *first_round: the round to push first.
  Status InitWeights(uint64_t* first_round);
  // Host copy of w into the device replica.
  Status UploadWeights(const std::vector<float>& w);
  // Puts batch `step` of `order` (local example indices) into batch_x_ and labels_.
  Status GatherBatch(const std::vector<int64_t>& order, uint64_t step);
  SyntheticGradientSpec SyntheticSpec() const;
  // Fills grad_ for `round` from the batch in batch_x_ / labels_; *loss gets the loss to report
  // (synthetic: only when `want_loss`).
  Status ComputeGradient(uint64_t round, bool want_loss, float* loss);
  // The round's push/pull, with the UPDATE's pairs scattered into the device replica.
  // *updates_in: when the client returned with every UPDATE (before the scatter).
  Status PushPull(uint64_t round, Selection* sel, RoundStats* stats,
                  std::chrono::steady_clock::time_point* updates_in);
  // Accuracy of the replica on `data` (x_dev: its staged copy, or null to copy chunks up).
  Status EvaluateOn(const Dataset& data, const float* x_dev, double* accuracy);
  // Rank 0: test accuracy (and local train accuracy) of the replica.
  Status Evaluate(std::optional<double>* test_acc, std::optional<double>* train_acc);
  Status DumpWeights() const;
  // The error for a run that diverged at `round`.
  Status Diverged(uint64_t round, double lr, const std::string& what) const;

  // Run's steps: start-up (OpenMetrics, RunState), each epoch (StartEpoch: its batch order and
  // density; RunEpoch), each round (PlanRound: what it does besides training; ComputeRound: the
  // gradient; SelectRound: error feedback and selection; PushPull; RecordRound: totals,
  // evaluation, FillMetrics, progress), the epoch's end (EndEpoch) and the finish (FinishRun).
  struct RunState;
  struct EpochState;
  struct RoundPlan;
  struct RoundResult;
  struct DeferredEval;
  // Opens options.metrics_out when this rank writes metrics.
  Status OpenMetrics(MetricsWriter* metrics) const;
  // Opens options.trace_out (trace_ stays null without it).
  Status OpenTrace();
  // The spans of a finished round (see the file comment); `end`: after its evaluation and
  // metrics line.
  void TraceRound(uint64_t round, const EpochState& ep, const RoundPlan& plan, const RoundResult& r,
                  std::chrono::steady_clock::time_point end) const;
  Status StartEpoch(uint64_t epoch, uint64_t first_step, EpochState* ep) const;
  Status RunEpoch(uint64_t epoch, RunState* run);
  // What round `round` (step `step` of ep) does besides training.
  RoundPlan PlanRound(const RunState& run, const EpochState& ep, uint64_t step,
                      uint64_t round) const;
  Status RunRound(uint64_t step, EpochState* ep, RunState* run);
  // Backup workers: the pairs no server applied back into the residual, and the rounds that
  // closed without this worker skipped (run->skip; the plan then also does what the last skipped
  // round of this epoch would have done: its evaluation, metrics, the epoch's end).
  Status AfterMissedRounds(uint64_t step, const EpochState& ep, RunState* run, RoundPlan* plan,
                           RoundResult* r);
  Status ComputeRound(const RunState& run, const EpochState& ep, uint64_t step,
                      const RoundPlan& plan, RoundResult* r);
  Status SelectRound(const EpochState& ep, const RoundPlan& plan, RunState* run, RoundResult* r);
  Status RecordRound(const RoundPlan& plan, EpochState* ep, RunState* run, RoundResult* r);
  // The round's metrics line, without the accuracies (the evaluation fills them).
  void FillMetrics(const EpochState& ep, const RoundPlan& plan, const RunState& run,
                   const RoundResult& r, RoundMetrics* m) const;
  // --eval_deferred: evaluates the replica copies in round order, writes their metrics lines and
  // puts the final replica back.
  Status EvaluateDeferred(RunState* run);
  static void EndEpoch(const EpochState& ep, std::optional<double> test_acc, RunState* run);
  StatusOr<TrainSummary> FinishRun(RunState* run);

  const TrainerOptions options_;
  const Device device_;
  PsClient* client_;
  const ModelLayout layout_;
  const uint64_t d_;
  const int rank_;
  const int world_;
  bool synthetic_;
  std::unique_ptr<Model> model_;    // null for synthetic
  std::unique_ptr<NnOps> own_ops_;  // synthetic: ops on a context of their own
  NnOps* nn_ = nullptr;             // model_'s ops or own_ops_
  Dataset train_;                   // this rank's partition only
  int64_t train_lo_ = 0;
  int64_t train_total_ = 0;  // examples in the whole training set
  Dataset test_;             // rank 0 only
  int64_t steps_per_epoch_ = 0;
  // Device memory (see the file comment). The staged data sets are null when not staged (then
  // batches are copied up); on the CPU they point at the host data sets.
  std::optional<DeviceBuffer> w_, grad_, batch_x_, train_x_stage_, test_x_stage_;
  const float* train_x_ = nullptr;
  const float* test_x_ = nullptr;
  std::vector<uint8_t> labels_;             // the current batch's labels (host)
  std::vector<float> host_batch_;           // a batch gathered on the host (unstaged data)
  std::vector<float> host_w_, host_grad_;   // hash-noise synthetic gradients off the CPU device
  std::optional<DeviceBuffer> noise_pool_;  // pool-noise synthetic: the pool, in device memory
  std::vector<uint64_t> pool_offsets_;      // pool-noise synthetic: the round's block offsets
  std::vector<uint32_t> update_idx_;        // the round's UPDATE pairs, staged for the scatter
  std::vector<float> update_vals_;
  std::unique_ptr<ErrorFeedback> ef_;
  std::unique_ptr<TraceWriter> trace_;  // --trace_out; null without it
};

}  // namespace sieve

#endif  // SIEVE_WORKER_TRAINER_TRAINER_H_
