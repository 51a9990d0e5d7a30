// TrainerOptions: everything that shapes a worker's training run (model, data, optimizer,
// compressor and their schedules, metrics). A plain value; sieve-worker fills it from its flags
// and ValidateTrainerOptions checks it before anything connects.
//
// Units: learning rates are per round (one minibatch step); epochs count passes over the rank's
// data partition (synthetic: `rounds_per_epoch` rounds); densities are fractions of D in (0, 1].
// Thread-safety: plain data.
#ifndef SIEVE_WORKER_TRAINER_TRAINER_OPTIONS_H_
#define SIEVE_WORKER_TRAINER_TRAINER_OPTIONS_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kernels/compressor.h"
#include "kernels/device.h"
#include "trace/trace_rounds.h"
#include "worker/data/dataset.h"
#include "worker/trainer/straggler.h"

namespace sieve {

struct RoundStats;  // worker/client/ps_client.h

enum class GradDist { kGaussian, kLaplace };

// Accepts exactly "gaussian" or "laplace".
StatusOr<GradDist> ParseGradDist(std::string_view name);

// Where the synthetic gradient's noise comes from (synthetic_gradient.h states both contracts):
// kHash draws every coordinate exactly each round; kPool reads a once-drawn table at per-round
// offsets (one streaming pass).
enum class SyntheticNoiseSource { kHash, kPool };

// Accepts exactly "hash" or "pool".
StatusOr<SyntheticNoiseSource> ParseSyntheticNoiseSource(std::string_view name);

struct TrainerOptions {
  // softmax | fnn3 | cnn (Fashion-MNIST) or synthetic (no data; see synthetic_gradient.h).
  std::string model = "fnn3";
  uint64_t num_params = 0;  // D of the synthetic model; ignored otherwise
  GradDist grad_dist = GradDist::kGaussian;
  double synthetic_scale = 1.0;  // standard deviation of the synthetic gradient noise
  double synthetic_pull = 0.01;  // λ of the synthetic objective 0.5·λ·‖w‖²
  // pool: cheap, for systems benchmarks (the default; why: synthetic_gradient.h); hash: exact.
  SyntheticNoiseSource synthetic_noise = SyntheticNoiseSource::kPool;
  std::string data_dir = std::string(kFashionMnistDir);

  int batch_size = 32;  // per worker
  int epochs = 1;
  // When > 0: stop after this many rounds of the job (counted from round 0), even mid-epoch; the
  // schedules still follow `epochs`, and rank 0 evaluates at the stop.
  int64_t max_rounds = 0;
  int rounds_per_epoch = 100;  // synthetic model only (real data: from the partition size)

  double lr = 0.05;
  double momentum = 0.9;
  // Zero m where r was selected (momentum-factor masking; SelectOptions::mask_momentum).
  bool momentum_masking = true;
  double weight_decay = 0.0;
  // Linear warm-up over the first lr_warmup_epochs epochs (may be fractional): round t gets
  // lr·(t+1)/T with T = round(lr_warmup_epochs·steps_per_epoch), then the step schedule.
  double lr_warmup_epochs = 0.0;
  std::vector<int> lr_steps;  // ascending epochs e: from the start of epoch e on, lr *= lr_gamma
  double lr_gamma = 0.1;

  // Selection operator. Default topk: exact, the baseline the paper's approximations are
  // measured against (gaussiank is the fast approximation; choose it with --compressor).
  Compressor compressor = Compressor::kTopk;
  double density = 0.001;              // ρ after the warm-up
  std::vector<double> density_warmup;  // ρ of epochs 0, 1, ... before `density` applies
  std::string device = "auto";         // auto | cpu | cuda (error feedback + selection)
  uint64_t seed = 1;                   // initial weights (as the servers), shuffling, randomk
  // The pushes' precision is the client's (PsClientOptions::push_values): the trainer rounds the
  // selected values to it, keeping the rounding error in the residual.
  // Emulated slow workers (straggler.h): this worker's rank picks its spec; a rank beyond the job's
  // workers fails Trainer::Create.
  StragglerPlan straggler;

  int eval_every = 1;  // rank 0: test accuracy every n epochs (0 = only at the end)
  // Rank 0: test accuracy also after every n-th round (0 = off), for time-to-accuracy curves
  // finer than an epoch; each evaluation's time counts in the round's.
  uint64_t eval_every_rounds = 0;
  // Rank 0: an evaluation before the run's last round copies the replica to host memory (4 B per
  // parameter a copy, held until the end) instead of evaluating it; after the last round the
  // copies are evaluated in round order and their metrics lines written then, each with its own
  // round's t_wall (the file is then not in round order). The evaluations' time stays off the
  // training path: under BSP the other workers no longer wait for it, under backup workers rank
  // 0 is no longer the worker left behind. The last round's evaluation is done at once.
  bool eval_deferred = false;
  std::string metrics_out;    // JSON lines; "" = none; "{rank}" in the path is replaced
  int metrics_every = 1;      // write one metrics line every n rounds (plus eval rounds)
  int contraction_every = 0;  // add the contraction ratio every n rounds (0 = never)
  // Rounds (ascending) at which the metrics line carries a histogram of the residual r (after
  // accumulating the round's gradient, before selection) in bins of kHistogramWidthSigma·σ.
  std::vector<int> histogram_rounds;
  // Raw little-endian fp32 of the final replica (D values, no header); "" = none; "{rank}" in
  // the path is replaced (every worker writes; give each rank its own path).
  std::string dump_weights;
  // A timeline of the rounds in trace_rounds (docs/tracing.md): a Chrome trace-event file; "" =
  // none; "{rank}" in the path becomes the rank and "{role}" becomes "worker".
  std::string trace_out;
  TraceRounds trace_rounds;   // begin < end; the default records rounds 0..99
  bool progress_bar = false;  // single-line bar with ETA (a TTY) instead of per-epoch log lines
  std::chrono::milliseconds round_timeout{120000};  // each wait of the start and a round; >= 1 ms
  // Workers' barriers timed right after the start barrier (barrier_probe.h; the scale harness's
  // latency percentiles); 0 = none. Every worker of the job must use the same count.
  int barrier_probe = 0;
  // Called after every round's push/pull with the round, k, the pairs selected and the
  // round's traffic (the daemon's Prometheus metrics); empty = none.
  std::function<void(uint64_t round, uint64_t k, uint64_t selected, const RoundStats& stats)>
      on_round;
};

// Parses a comma-separated list ("" → empty). Errors: InvalidArgument naming the bad item.
StatusOr<std::vector<double>> ParseDoubleList(std::string_view text);
StatusOr<std::vector<int>> ParseIntList(std::string_view text);

// The learning rate of a run whose --lr is not given. 0.05 for every compressor but randomk.
// Random selection sends each residual entry about once per 1/ρ rounds, whatever its size, so an
// entry is applied as ~1/ρ rounds of momentum at once: a stable step shrinks with ρ. randomk gets
// 0.025·√ρ (at most 0.05): 7.9e-4 at ρ = 0.001, which reaches ~74 % on FNN-3 in one epoch where
// 0.05 diverges within 150 rounds (measured in docs/results.md, "Defaults that train").
double DefaultLearningRate(Compressor compressor, double density);

// Checks every field's range and names: InvalidArgument with a message naming the flag.
// Does not look at the filesystem or the GPU (ParseDevice does that separately).
Status ValidateTrainerOptions(const TrainerOptions& options);

}  // namespace sieve

#endif  // SIEVE_WORKER_TRAINER_TRAINER_OPTIONS_H_
