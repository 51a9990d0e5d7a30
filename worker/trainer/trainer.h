// Trainer: one worker's training loop (DESIGN.md, "Data flow of one round"). Per round t:
//   1. g = ∇L(w; batch) + wd·w          (synthetic: see synthetic_gradient.h)
//   2.–3. m = μ·m + g;  r += η_t·m      (ErrorFeedback::Accumulate)
//   4.–5. S = select(r) with k = KForDensity(ρ_epoch, D); r[S] = m[S] = 0 (none: dense, m kept)
//   6. PsClient::PushPull(t, S, w): w[i] = the servers' new values
// Schedules (rounds per epoch, batch order, η_t, ρ_epoch) are those of schedule.h, so a
// single-process reference reproduces them. Rounds are numbered from 0 across epochs.
//
// Start-up: the replica starts from InitParams(layout, seed), is then replaced by a dense pull of
// the servers' weights (authoritative; a mismatch is logged as a warning: different seeds), and the
// workers meet in a barrier. Rank 0 evaluates test (and local-partition train) accuracy on its
// replica every eval_every epochs and after the last one. Metrics lines go to metrics_out (only
// rank 0 writes, unless the path contains "{rank}"); the replica is written to dump_weights at the
// end. The trainer does not call Finish / WaitShutdown: the daemon does.
//
// Ownership: the Trainer borrows the PsClient (it must outlive Run). Thread-safety: one thread.
#ifndef SIEVE_WORKER_TRAINER_TRAINER_H_
#define SIEVE_WORKER_TRAINER_TRAINER_H_

#include <memory>
#include <optional>
#include <vector>

#include "base/status.h"
#include "kernels/device.h"
#include "kernels/model/model_layout.h"
#include "worker/client/ps_client.h"
#include "worker/data/dataset.h"
#include "worker/model/model.h"
#include "worker/trainer/summary.h"
#include "worker/trainer/trainer_options.h"

namespace sieve {

class ErrorFeedback;

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

  // The replica (length D).
  const std::vector<float>& weights() const { return w_; }

 private:
  Trainer(const TrainerOptions& options, Device device, PsClient* client, ModelLayout layout);
  Status Load();
  // Pulls the servers' weights; a worker admitted into a running job (a restart) then joins at
  // a round boundary. *first_round: the round to push first (0 for a worker of the job's start).
  Status InitWeights(uint64_t* first_round);
  // Fills grad_ for `round`; returns the loss to report (synthetic: only when `want_loss`).
  float ComputeGradient(uint64_t round, const float* x, const uint8_t* labels, bool want_loss);
  // Rank 0: test accuracy (and local train accuracy) of the replica.
  void Evaluate(std::optional<double>* test_acc, std::optional<double>* train_acc);
  Status DumpWeights() const;

  const TrainerOptions options_;
  const Device device_;
  PsClient* client_;
  const ModelLayout layout_;
  const uint64_t d_;
  const int rank_;
  const int world_;
  bool synthetic_;
  std::unique_ptr<Model> model_;
  Dataset train_;  // this rank's partition only
  int64_t train_lo_ = 0;
  int64_t train_total_ = 0;  // examples in the whole training set
  Dataset test_;             // rank 0 only
  int64_t steps_per_epoch_ = 0;
  std::vector<float> w_;
  std::vector<float> grad_;
  std::unique_ptr<ErrorFeedback> ef_;
};

}  // namespace sieve

#endif  // SIEVE_WORKER_TRAINER_TRAINER_H_
