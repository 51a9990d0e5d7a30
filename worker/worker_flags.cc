#include "worker/worker_flags.h"

#include <glog/logging.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <utility>

#include "kernels/device.h"
#include "kernels/model/model_layout.h"
#include "net/node_environment.h"
#include "trace/trace_rounds.h"
#include "worker/data/dataset.h"

// Model and data.
DEFINE_string(model, "fnn3",
              "Model: softmax, fnn3, cnn, cnn_large (Fashion-MNIST) or synthetic (no data)");
DEFINE_uint64(num_params, 0, "D of --model=synthetic (1 .. 2^40); ignored by the other models");
DEFINE_string(grad_dist, "gaussian",
              "Synthetic gradient noise: gaussian (bell-shaped) or laplace (heavy-tailed)");
DEFINE_string(synthetic_noise, "pool",
              "Synthetic gradient noise source: pool (a once-drawn table read at per-round "
              "offsets; cheap, for systems benchmarks) or hash (exact independent draws)");
DEFINE_double(synthetic_scale, 1.0, "Standard deviation of the synthetic gradient noise (>= 0)");
DEFINE_double(synthetic_pull, 0.01,
              "λ of the synthetic objective 0.5·λ·|w|² (gradient λ·w + noise; >= 0)");
DEFINE_string(data_dir, std::string(sieve::kFashionMnistDir).c_str(),
              "Directory with the Fashion-MNIST IDX files (train-*, t10k-*)");
// Optimizer.
DEFINE_int32(batch_size, 32, "Minibatch size per worker (>= 1)");
DEFINE_int32(epochs, 1, "Passes over the data partition (>= 1)");
DEFINE_int64(max_rounds, 0,
             "Stop after this many rounds of the job, even mid-epoch (0 = run every epoch); the "
             "learning-rate and density schedules still follow --epochs");
DEFINE_int32(rounds_per_epoch, 100, "Rounds per epoch of --model=synthetic (>= 1)");
DEFINE_string(straggler, "",
              "Emulated slow workers: comma-separated SPEC (every worker) or RANK:SPEC items, SPEC "
              "= none, delay:T (T more compute per round), xF (compute F times slower) or exp:T "
              "(exponential extra time with mean T, seeded by --seed, rank and round); T like "
              "5ms, 200us, 1s. E.g. --straggler=3:x3 slows worker 3 only");
DEFINE_double(lr, 0.05,
              "Learning rate (>= 0); the step is lr·m with momentum m, averaged over the workers. "
              "Not given: 0.05, except randomk: 0.025·√ρ (random selection needs a smaller step)");
DEFINE_double(momentum, 0.9, "Momentum μ in [0, 1) (momentum correction: m = μm + g)");
DEFINE_bool(momentum_masking, true,
            "Zero the momentum m where the residual was selected (momentum-factor masking, Deep "
            "Gradient Compression's rule). false keeps m: error feedback on the momentum-SGD step");
DEFINE_double(weight_decay, 0.0, "L2 weight decay added to the gradient: g += wd·w (>= 0)");
DEFINE_double(lr_warmup_epochs, 0.0,
              "Linear learning-rate warm-up over this many epochs: round t gets lr·(t+1)/T");
DEFINE_string(lr_steps, "", "Comma-separated ascending epochs at which lr *= lr_gamma, e.g. 30,60");
DEFINE_double(lr_gamma, 0.1, "Factor of each --lr_steps step (> 0)");
// Compression.
DEFINE_string(compressor, "topk",
              "Selection: none, topk, gaussiank, gaussiank_paper, dgc, randomk");
DEFINE_double(density, 0.001, "Density ρ in (0, 1]: k = round(ρ·D) pairs pushed per round");
DEFINE_string(
    density_warmup, "",
    "Comma-separated densities of the first epochs, e.g. 0.015625,0.004 (then --density)");
DEFINE_string(device, "auto",
              "Where the worker computes (model, gradient, error feedback, selection): auto (cuda "
              "when a GPU is visible), cpu or cuda");
DEFINE_bool(fp16, false,
            "Deprecated: --wire_values=fp16 (push values as binary16); an explicit other "
            "--wire_values is a usage error");
DEFINE_bool(checksum, true, "Checksum pushed payloads");
DEFINE_uint64(seed, 1, "Seed of the initial weights (must match the servers'), shuffling, randomk");
// Output.
DEFINE_int32(eval_every, 1, "Rank 0: test accuracy every n epochs and at the end (0 = end only)");
DEFINE_uint64(eval_every_rounds, 0,
              "Rank 0: test accuracy also after every n-th round (0 = off; for time-to-accuracy "
              "finer than an epoch, the evaluation's time counts in the round)");
DEFINE_bool(eval_deferred, false,
            "Rank 0: at an evaluation round before the last, copy the replica to host memory (4 B "
            "per parameter each) and keep training; the copies are evaluated after the last round "
            "(each metrics line keeps its own round's t_wall, written then: out of round order)");
DEFINE_string(metrics_out, "",
              "JSON-lines metrics file (rank 0 only, unless the path contains {rank})");
DEFINE_int32(metrics_every, 1, "Write a metrics line every n rounds (>= 1)");
DEFINE_int32(contraction_every, 0,
             "Add the contraction ratio and its bounds every n rounds (0 = never)");
DEFINE_string(histogram_rounds, "",
              "Comma-separated rounds at which the metrics line carries a histogram of the "
              "error-feedback residual in 0.25-sigma bins (e.g. 0,100,1000)");
DEFINE_string(dump_weights, "",
              "After training, write the replica as D raw little-endian float32 values "
              "({rank} in the path is replaced by the worker rank)");
DEFINE_string(summary_out, "",
              "Write this worker's end-of-run summary here as JSON (every field of the "
              "`sieve-worker summary:` line; docs/protocol.md, \"Run summaries\"); {rank} "
              "becomes the rank, {role} becomes worker (one path for servers and workers: "
              "DIR/{role}-{rank}.json); empty = none");
DEFINE_string(trace_out, "",
              "Write a timeline of this worker's rounds here at the end: Chrome trace-event JSON "
              "for Perfetto / chrome://tracing; {rank} becomes the rank, {role} becomes worker "
              "(give servers and workers one path, e.g. DIR/{role}-{rank}.json, then run `sieve "
              "trace merge DIR`; docs/tracing.md); empty = none");
DEFINE_string(trace_rounds, "0:100",
              "Rounds A:B (A to B-1) that --trace_out records, so the file stays small");
DEFINE_string(progress, "auto", "Progress display: bar, log, or auto (bar when stdout is a TTY)");
// Cluster: --scheduler, --rank, --bind, --host, --port, --curve_dir, --job_token(_file),
// heartbeats and --metrics_port are net/node_flags.h's.
DEFINE_int32(round_timeout_ms, 120000, "Longest wait for one round's replies / a barrier / a pull");
DEFINE_int32(shutdown_timeout_ms, 600000,
             "After training, longest wait for the other workers and the scheduler's shutdown");
DEFINE_int32(barrier_probe, 0,
             "Benchmarks (the scale harness): time this many workers' barriers right after the "
             "start barrier and print their p50 / p99 latency in the summary line (0 = none; "
             "every worker of the job must give the same count)");
DEFINE_int32(blas_threads, 1, "OpenBLAS threads (several workers often share few cores)");
DEFINE_int32(
    kernel_threads, 1,
    "OpenMP threads of the CPU selection kernels (1 suits several workers sharing few cores; "
    "spinning OpenMP teams on oversubscribed cores are many times slower)");

namespace sieve {
namespace {

// The trainer's flags, in the order a bad one is reported: model, schedule and compression.
StatusOr<TrainerOptions> FlagsToModelAndSchedule() {
  TrainerOptions o;
  o.model = FLAGS_model;
  o.num_params = FLAGS_num_params;
  auto dist = ParseGradDist(FLAGS_grad_dist);
  if (!dist.ok()) return InvalidArgumentError("--grad_dist: " + dist.status().message());
  o.grad_dist = *dist;
  auto noise = ParseSyntheticNoiseSource(FLAGS_synthetic_noise);
  if (!noise.ok()) return InvalidArgumentError("--synthetic_noise: " + noise.status().message());
  o.synthetic_noise = *noise;
  o.synthetic_scale = FLAGS_synthetic_scale;
  o.synthetic_pull = FLAGS_synthetic_pull;
  o.data_dir = FLAGS_data_dir;
  o.batch_size = FLAGS_batch_size;
  o.epochs = FLAGS_epochs;
  o.max_rounds = FLAGS_max_rounds;
  o.rounds_per_epoch = FLAGS_rounds_per_epoch;
  o.lr = FLAGS_lr;
  o.momentum = FLAGS_momentum;
  o.momentum_masking = FLAGS_momentum_masking;
  o.weight_decay = FLAGS_weight_decay;
  o.lr_warmup_epochs = FLAGS_lr_warmup_epochs;
  auto steps = ParseIntList(FLAGS_lr_steps);
  if (!steps.ok()) return InvalidArgumentError("--lr_steps: " + steps.status().message());
  o.lr_steps = *steps;
  o.lr_gamma = FLAGS_lr_gamma;
  auto compressor = ParseCompressor(FLAGS_compressor);
  if (!compressor.ok()) {
    return InvalidArgumentError("--compressor: " + compressor.status().message());
  }
  o.compressor = *compressor;
  o.density = FLAGS_density;
  auto warmup = ParseDoubleList(FLAGS_density_warmup);
  if (!warmup.ok()) return InvalidArgumentError("--density_warmup: " + warmup.status().message());
  o.density_warmup = *warmup;
  if (gflags::GetCommandLineFlagInfoOrDie("lr").is_default) {
    o.lr = DefaultLearningRate(o.compressor, o.density);
    if (o.lr != FLAGS_lr) {
      LOG(INFO) << "--lr not given: " << FLAGS_compressor << " at density " << o.density
                << " uses lr " << o.lr << " (0.025·√ρ)";
    }
  }
  return o;
}

// The rest of the trainer's flags (device name, stragglers, output), then the whole validated.
Status FlagsToRunAndOutput(TrainerOptions* o) {
  o->device = FLAGS_device;
  o->seed = FLAGS_seed;
  auto straggler = ParseStragglerPlan(FLAGS_straggler);
  if (!straggler.ok()) return InvalidArgumentError("--straggler: " + straggler.status().message());
  o->straggler = *straggler;
  o->eval_every = FLAGS_eval_every;
  o->eval_every_rounds = FLAGS_eval_every_rounds;
  o->eval_deferred = FLAGS_eval_deferred;
  o->metrics_out = FLAGS_metrics_out;
  o->metrics_every = FLAGS_metrics_every;
  o->contraction_every = FLAGS_contraction_every;
  auto hist_rounds = ParseIntList(FLAGS_histogram_rounds);
  if (!hist_rounds.ok()) {
    return InvalidArgumentError("--histogram_rounds: " + hist_rounds.status().message());
  }
  o->histogram_rounds = *hist_rounds;
  o->dump_weights = FLAGS_dump_weights;
  o->trace_out = FLAGS_trace_out;
  auto trace_rounds = ParseTraceRounds(FLAGS_trace_rounds);
  if (!trace_rounds.ok()) {
    return InvalidArgumentError("--trace_rounds: " + trace_rounds.status().message());
  }
  o->trace_rounds = *trace_rounds;
  o->round_timeout = std::chrono::milliseconds(FLAGS_round_timeout_ms);
  o->barrier_probe = FLAGS_barrier_probe;
  if (FLAGS_progress == "auto") {
    o->progress_bar = isatty(STDOUT_FILENO) != 0;
  } else if (FLAGS_progress == "bar" || FLAGS_progress == "log") {
    o->progress_bar = FLAGS_progress == "bar";
  } else {
    return InvalidArgumentError("--progress must be auto, bar or log");
  }
  return ValidateTrainerOptions(*o);
}

// The cluster side: the job's environment, the node flags and the push values (--fp16).
Status FlagsToCluster(WorkerDaemonOptions* d) {
  // The job as `sieve launch` / the manifests export it (SIEVE_SCHEDULER, ...): defaults only.
  if (Status s = ApplyNodeEnvironment(); !s.ok()) return s;
  auto node_flags = ReadNodeFlags("worker");
  if (!node_flags.ok()) return node_flags.status();
  d->node = std::move(*node_flags);
  d->push_values = d->node.wire_values;
  if (FLAGS_fp16) {
    if (!gflags::GetCommandLineFlagInfoOrDie("wire_values").is_default &&
        d->push_values != ValueType::kFp16) {
      return InvalidArgumentError(
          "--fp16 (deprecated: --wire_values=fp16) conflicts with --wire_values=" +
          FLAGS_wire_values);
    }
    d->push_values = ValueType::kFp16;
  }
  return Status::Ok();
}

// Everything but the device's availability.
StatusOr<WorkerDaemonOptions> FlagsToOptionsButDevice() {
  WorkerDaemonOptions d;
  auto trainer = FlagsToModelAndSchedule();
  if (!trainer.ok()) return trainer.status();
  d.trainer = std::move(*trainer);
  if (Status s = FlagsToRunAndOutput(&d.trainer); !s.ok()) return s;
  if (Status s = FlagsToCluster(&d); !s.ok()) return s;
  if (FLAGS_shutdown_timeout_ms < 1)
    return InvalidArgumentError("--shutdown_timeout_ms must be >= 1");
  if (FLAGS_blas_threads < 1) return InvalidArgumentError("--blas_threads must be >= 1");
  if (FLAGS_kernel_threads < 1) return InvalidArgumentError("--kernel_threads must be >= 1");
  // The device's name was checked with the trainer's options.
  if (d.trainer.device == "cuda" && !CudaBackendCompiled()) {
    // This binary can never run on a GPU: retrying elsewhere cannot help.
    return InvalidArgumentError("--device: " + ParseDevice("cuda").status().message());
  }
  auto layout = MakeModelLayout(d.trainer.model, d.trainer.num_params);
  if (!layout.ok()) return InvalidArgumentError("--model: " + layout.status().message());
  d.num_params = layout->num_params;
  d.checksum = FLAGS_checksum;
  d.shutdown_timeout = std::chrono::milliseconds(FLAGS_shutdown_timeout_ms);
  d.blas_threads = FLAGS_blas_threads;
  d.kernel_threads = FLAGS_kernel_threads;
  d.summary_out = FLAGS_summary_out;
  return d;
}

}  // namespace

// --help lists the flags above in these groups (base/flags.h); a flag in none is under "Other".
ProgramInfo WorkerProgram() {
  return {
      "sieve-worker",
      "the sieve worker: trains a data partition with sparse push/pull.",
      "sieve-worker --scheduler=HOST:PORT [--model=fnn3] [--compressor=topk] "
      "[--density=0.001] [--epochs=1] ...",
      {{"Cluster", {"scheduler", "rank", "port", "bind", "host", "curve_dir", "curve_key"}},
       {"Job identity", {"job_token_file", "job_token"}},
       {"Model and data",
        {"model", "data_dir", "seed", "num_params", "grad_dist", "synthetic_noise",
         "synthetic_scale", "synthetic_pull"}},
       {"Training",
        {"epochs", "max_rounds", "batch_size", "lr", "momentum", "momentum_masking", "weight_decay",
         "lr_warmup_epochs", "lr_steps", "lr_gamma", "rounds_per_epoch", "straggler"}},
       {"Compression",
        {"compressor", "density", "density_warmup", "wire_values", "wire", "fp16", "checksum"}},
       {"Compute", {"device", "blas_threads", "kernel_threads"}},
       {"Failure handling",
        {"heartbeat_interval_ms", "heartbeat_timeout_ms", "round_timeout_ms",
         "shutdown_timeout_ms"}},
       {"Output and metrics",
        {"progress", "eval_every", "eval_every_rounds", "eval_deferred", "metrics_out",
         "metrics_every", "contraction_every", "histogram_rounds", "dump_weights", "summary_out",
         "trace_out", "trace_rounds", "metrics_port", "barrier_probe"}}}};
}

StatusOr<WorkerDaemonOptions> FlagsToWorkerOptions() {
  auto d = FlagsToOptionsButDevice();
  // A flag file or key that cannot be read is the command line's fault too (exit 2), whatever
  // status code told it: kUnavailable is kept for the device below.
  if (!d.ok()) return InvalidArgumentError(d.status().message());
  auto device = ParseDevice(d->trainer.device);
  if (!device.ok()) {
    // A CUDA build that sees no GPU (or whose runtime cannot reach one): the machine's fault.
    return UnavailableError("--device: " + device.status().message());
  }
  d->device = *device;
  return d;
}

}  // namespace sieve
