// sieve-worker: the worker daemon. Registers with the scheduler, trains its data partition with
// sparse push/pull (worker/trainer/trainer.h), prints a `sieve-worker summary:` line and exits 0
// after the scheduler's shutdown; any failure exits 1 with a message on stderr, a bad flag value
// exits 2 before connecting.
#include <cblas.h>
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <omp.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "base/fd_limit.h"
#include "base/flags.h"
#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "kernels/model/model_layout.h"
#include "metrics/daemon_metrics.h"
#include "net/node_environment.h"
#include "net/node_flags.h"
#include "net/signal_watcher.h"
#include "proto/codec.h"
#include "worker/client/ps_client.h"
#include "worker/data/dataset.h"
#include "worker/trainer/summary.h"
#include "worker/trainer/trainer.h"
#include "worker/trainer/trainer_options.h"

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
DEFINE_string(progress, "auto", "Progress display: bar, log, or auto (bar when stdout is a TTY)");
// Cluster: --scheduler, --rank, --bind, --host, --port, --curve_dir, --job_token(_file),
// heartbeats and --metrics_port are net/node_flags.h's.
DEFINE_int32(round_timeout_ms, 120000, "Longest wait for one round's replies / a barrier / a pull");
DEFINE_int32(shutdown_timeout_ms, 600000,
             "After training, longest wait for the other workers and the scheduler's shutdown");
DEFINE_int32(blas_threads, 1, "OpenBLAS threads (several workers often share few cores)");
DEFINE_int32(
    kernel_threads, 1,
    "OpenMP threads of the CPU selection kernels (1 suits several workers sharing few cores; "
    "spinning OpenMP teams on oversubscribed cores are many times slower)");

namespace {

// --help lists the flags above in these groups (base/flags.h); a flag in none is under "Other".
sieve::ProgramInfo WorkerProgram() {
  return {"sieve-worker",
          "the sieve worker: trains a data partition with sparse push/pull.",
          "sieve-worker --scheduler=HOST:PORT [--model=fnn3] [--compressor=topk] "
          "[--density=0.001] [--epochs=1] ...",
          {{"Cluster", {"scheduler", "rank", "port", "bind", "host", "curve_dir", "curve_key"}},
           {"Job identity", {"job_token_file", "job_token"}},
           {"Model and data",
            {"model", "data_dir", "seed", "num_params", "grad_dist", "synthetic_noise",
             "synthetic_scale", "synthetic_pull"}},
           {"Training",
            {"epochs", "max_rounds", "batch_size", "lr", "momentum", "weight_decay",
             "lr_warmup_epochs", "lr_steps", "lr_gamma", "rounds_per_epoch", "straggler"}},
           {"Compression",
            {"compressor", "density", "density_warmup", "wire_values", "wire", "fp16", "checksum"}},
           {"Compute", {"device", "blas_threads", "kernel_threads"}},
           {"Failure handling",
            {"heartbeat_interval_ms", "heartbeat_timeout_ms", "round_timeout_ms",
             "shutdown_timeout_ms"}},
           {"Output and metrics",
            {"progress", "eval_every", "metrics_out", "metrics_every", "contraction_every",
             "histogram_rounds", "dump_weights", "metrics_port"}}}};
}

constexpr int kExitUsage = 2;

int Usage(const std::string& message) {
  std::cerr << "sieve-worker: " << message << " (see --help)\n";
  return kExitUsage;
}

// The client the signal callback stops; guarded because the callback runs on its own thread.
sieve::Mutex g_client_mu;
sieve::PsClient* g_client GUARDED_BY(g_client_mu) = nullptr;

void SetClient(sieve::PsClient* client) {
  sieve::MutexLock lock(&g_client_mu);
  g_client = client;
}

}  // namespace

int main(int argc, char** argv) {
  // SIEVE_WORKER_FLAGS / SIEVE_HELPXML, for a sieve-worker run as a `sieve launch --worker_cmd`.
  auto words = sieve::WorkerCommandLine(argc, argv);
  if (!words.ok()) {
    std::cerr << "sieve-worker: " << words.status().message() << "\n";
    return 2;
  }
  std::vector<char*> args;
  for (std::string& w : *words) args.push_back(w.data());
  args.push_back(nullptr);
  int args_count = static_cast<int>(words->size());
  argv = args.data();
  argc = args_count;
  if (auto exit_code = sieve::ParseCommandLine(WorkerProgram(), argc, argv)) return *exit_code;
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  // Every peer connection costs a descriptor: start with all this process may have.
  if (auto fds = sieve::RaiseFdLimit(); !fds.ok()) LOG(WARNING) << fds.status().ToString();

  sieve::TrainerOptions o;
  o.model = FLAGS_model;
  o.num_params = FLAGS_num_params;
  auto dist = sieve::ParseGradDist(FLAGS_grad_dist);
  if (!dist.ok()) return Usage("--grad_dist: " + dist.status().message());
  o.grad_dist = *dist;
  auto noise = sieve::ParseSyntheticNoiseSource(FLAGS_synthetic_noise);
  if (!noise.ok()) return Usage("--synthetic_noise: " + noise.status().message());
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
  o.weight_decay = FLAGS_weight_decay;
  o.lr_warmup_epochs = FLAGS_lr_warmup_epochs;
  auto steps = sieve::ParseIntList(FLAGS_lr_steps);
  if (!steps.ok()) return Usage("--lr_steps: " + steps.status().message());
  o.lr_steps = *steps;
  o.lr_gamma = FLAGS_lr_gamma;
  auto compressor = sieve::ParseCompressor(FLAGS_compressor);
  if (!compressor.ok()) return Usage("--compressor: " + compressor.status().message());
  o.compressor = *compressor;
  o.density = FLAGS_density;
  auto warmup = sieve::ParseDoubleList(FLAGS_density_warmup);
  if (!warmup.ok()) return Usage("--density_warmup: " + warmup.status().message());
  o.density_warmup = *warmup;
  if (gflags::GetCommandLineFlagInfoOrDie("lr").is_default) {
    o.lr = sieve::DefaultLearningRate(o.compressor, o.density);
    if (o.lr != FLAGS_lr) {
      LOG(INFO) << "--lr not given: " << FLAGS_compressor << " at density " << o.density
                << " uses lr " << o.lr << " (0.025·√ρ)";
    }
  }
  o.device = FLAGS_device;
  o.seed = FLAGS_seed;
  auto straggler = sieve::ParseStragglerPlan(FLAGS_straggler);
  if (!straggler.ok()) return Usage("--straggler: " + straggler.status().message());
  o.straggler = *straggler;
  o.eval_every = FLAGS_eval_every;
  o.metrics_out = FLAGS_metrics_out;
  o.metrics_every = FLAGS_metrics_every;
  o.contraction_every = FLAGS_contraction_every;
  auto hist_rounds = sieve::ParseIntList(FLAGS_histogram_rounds);
  if (!hist_rounds.ok()) return Usage("--histogram_rounds: " + hist_rounds.status().message());
  o.histogram_rounds = *hist_rounds;
  o.dump_weights = FLAGS_dump_weights;
  o.round_timeout_ms = FLAGS_round_timeout_ms;
  if (FLAGS_progress == "auto") {
    o.progress_bar = isatty(STDOUT_FILENO) != 0;
  } else if (FLAGS_progress == "bar" || FLAGS_progress == "log") {
    o.progress_bar = FLAGS_progress == "bar";
  } else {
    return Usage("--progress must be auto, bar or log");
  }
  if (sieve::Status s = sieve::ValidateTrainerOptions(o); !s.ok()) return Usage(s.message());
  // The job as `sieve launch` / the manifests export it (SIEVE_SCHEDULER, ...): defaults only.
  if (sieve::Status s = sieve::ApplyNodeEnvironment(); !s.ok()) return Usage(s.message());
  auto node_flags = sieve::ReadNodeFlags("worker");
  if (!node_flags.ok()) return Usage(node_flags.status().message());
  const sieve::NodeFlags& nf = *node_flags;
  sieve::ValueType push_values = nf.wire_values;
  if (FLAGS_fp16) {
    if (!gflags::GetCommandLineFlagInfoOrDie("wire_values").is_default &&
        push_values != sieve::ValueType::kFp16) {
      return Usage("--fp16 (deprecated: --wire_values=fp16) conflicts with --wire_values=" +
                   FLAGS_wire_values);
    }
    push_values = sieve::ValueType::kFp16;
  }
  if (FLAGS_shutdown_timeout_ms < 1) return Usage("--shutdown_timeout_ms must be >= 1");
  if (FLAGS_blas_threads < 1) return Usage("--blas_threads must be >= 1");
  if (FLAGS_kernel_threads < 1) return Usage("--kernel_threads must be >= 1");
  auto device = sieve::ParseDevice(o.device);
  if (!device.ok()) return Usage("--device: " + device.status().message());
  auto layout = sieve::MakeModelLayout(o.model, o.num_params);
  if (!layout.ok()) return Usage("--model: " + layout.status().message());
  openblas_set_num_threads(FLAGS_blas_threads);
  omp_set_num_threads(FLAGS_kernel_threads);

  sieve::SignalWatcher signals([](int signo) {
    sieve::MutexLock lock(&g_client_mu);
    std::string reason = std::string("stopped by signal ") + strsignal(signo);
    if (g_client != nullptr) {
      g_client->RequestStop(reason);
    } else {
      std::fprintf(stderr, "sieve-worker: %s before joining the job\n", reason.c_str());
      std::_Exit(128 + signo);
    }
  });

  // Serving /healthz before joining lets the Kubernetes probes pass while the job forms.
  auto metrics = sieve::DaemonMetrics::Start({"worker", nf.bind, nf.metrics_port});
  if (!metrics.ok()) {
    std::cerr << "sieve-worker: " << metrics.status().ToString() << "\n";
    return 1;
  }

  sieve::PsClientOptions copt;
  copt.rank = nf.rank;
  copt.scheduler = nf.scheduler;
  copt.bind_host = nf.bind;
  copt.port = nf.port;
  copt.advertise_host = nf.host;
  copt.curve_dir = nf.curve_dir;  // its keys were checked by ReadNodeFlags
  copt.curve_key = nf.curve_key;
  copt.job_token = nf.job_token;         // and the token file
  copt.num_params = layout->num_params;  // max_message_bytes: the default, 4·D + 1 MiB
  copt.heartbeat_interval_ms = nf.heartbeat_interval_ms;
  copt.heartbeat_timeout_ms = nf.heartbeat_timeout_ms;
  // The trainer rounds the selected values to this precision, keeping the error in the residual.
  copt.push_values = push_values;
  copt.compact_indices = nf.compact_indices;
  copt.checksum = FLAGS_checksum;
  auto client = sieve::PsClient::Connect(copt);
  if (!client.ok()) {
    std::cerr << "sieve-worker: cannot join the job: " << client.status().ToString() << "\n";
    return 1;
  }
  SetClient(client->get());
  sieve::PsClient& c = **client;
  (*metrics)->SetRank(c.rank());
  o.on_round = [m = metrics->get(), &c](uint64_t, uint64_t k, uint64_t selected,
                                        const sieve::RoundStats& stats) {
    m->AddRounds(1);
    m->AddBytes(stats.bytes_down, stats.bytes_up);
    m->ObservePushLatency(stats.push_seconds);
    m->ObserveUpdateLatency(stats.wait_seconds);
    m->SetSelectedK(selected, k);
    m->SetDeadNodes(c.dead_nodes());
  };
  LOG(INFO) << "worker " << c.rank() << " of " << c.num_workers() << ", " << c.num_servers()
            << " servers, D = " << c.num_params() << ", model " << o.model << ", compressor "
            << FLAGS_compressor << ", device " << sieve::DeviceName(*device) << ", wire "
            << FLAGS_wire << " " << sieve::ValueTypeName(push_values);

  int code = 0;
  auto trainer = sieve::Trainer::Create(o, *device, &c);
  if (!trainer.ok()) {
    std::cerr << "sieve-worker: " << trainer.status().ToString() << "\n";
    code = 1;
  } else {
    auto summary = (*trainer)->Run();
    if (!summary.ok()) {
      std::cerr << "sieve-worker: training failed: " << summary.status().ToString() << "\n";
      code = 1;
    } else {
      std::printf("%s\n", sieve::FormatSummaryLine(*summary).c_str());
      std::fflush(stdout);
      if (summary->near_chance()) {
        std::fprintf(stderr,
                     "sieve-worker: warning: test accuracy %.4f is near chance (0.10 for 10 "
                     "classes): the model did not learn. Try a smaller --lr (now %g) or more "
                     "epochs.\n",
                     *summary->test_acc, o.lr);
      }
    }
  }
  if (code == 0) {
    sieve::Status s = c.Finish();
    if (s.ok()) s = c.WaitShutdown(FLAGS_shutdown_timeout_ms);
    if (!s.ok()) {
      std::cerr << "sieve-worker: job did not end cleanly: " << s.ToString() << "\n";
      code = 1;
    }
  } else {
    c.RequestStop("training failed");
  }
  SetClient(nullptr);
  client->reset();
  return code;
}
