// worker_loop: one worker of a sieve job written against the installed C++ client
// (docs/worker-api.md). It minimizes a toy objective, f(w) = ½·mean((w − t)²) with a fixed target
// t, so the gradient is w − t: every round it accumulates the gradient into its error feedback,
// selects the Top-k (or another compressor's) entries of the residual, pushes them and takes the
// servers' new values into its replica. A real trainer computes g from a model and a batch
// instead (sieve-worker: worker/trainer/).
//
//   sieve-scheduler --num_servers=1 --num_workers=1 --port=9310 &
//   sieve-server --scheduler=127.0.0.1:9310 --model=synthetic --num_params=100000 &
//   worker_loop --scheduler=127.0.0.1:9310 --num_params=100000 --rounds=200
//
// It prints the loss before and after (0.00125 -> 2.4e-05 with these flags and sieve-server's
// synthetic initial weights) and exits 0 when the job ended normally, 1 on a failure and 2 on a
// usage error.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sieve/base/status.h"
#include "sieve/base/version.h"
#include "sieve/kernels/compressor.h"
#include "sieve/kernels/selection.h"
#include "sieve/worker/client/ps_client.h"
#include "sieve/worker/client/worker_start.h"

namespace {

constexpr std::chrono::milliseconds kTimeout{60000};

struct Args {
  sieve::PsClientOptions client;
  uint64_t rounds = 100;
  double density = 0.01;
  sieve::Compressor compressor = sieve::Compressor::kTopk;
  // Top-k sends an entry of the residual about once per 1/ρ rounds, carrying what momentum piled up
  // meanwhile: the step is kept small enough for that (lr·(1/ρ)/(1 − μ) = 2 here).
  float lr = 0.002f;
  float momentum = 0.9f;
};

constexpr char kUsage[] =
    "usage: worker_loop --scheduler=HOST:PORT [--num_params=D] [--rounds=N] [--density=RHO]\n"
    "                   [--compressor=topk|gaussiank|...] [--lr=ETA] [--momentum=MU]\n"
    "                   [--bind=HOST] [--version] [--help]\n";

// The target the toy objective pulls each weight towards.
float Target(uint64_t i) { return 0.01f * static_cast<float>(static_cast<int>(i % 17) - 8); }

double Loss(std::span<const float> w) {
  double sum = 0;
  for (uint64_t i = 0; i < w.size(); ++i) {
    const double d = w[i] - Target(i);
    sum += d * d;
  }
  return w.empty() ? 0.0 : 0.5 * sum / static_cast<double>(w.size());
}

// Parses --name=value arguments into *args; an error message, or "" when they are fine.
// *exit_now is set for --help and --version (printed here).
std::string Parse(int argc, char** argv, Args* args, bool* exit_now) {
  for (int a = 1; a < argc; ++a) {
    const std::string_view arg = argv[a];
    if (arg == "--help") {
      std::fputs(kUsage, stdout);
      *exit_now = true;
      return "";
    }
    if (arg == "--version") {
      std::printf("worker_loop (sieve %s)\n", sieve::kVersion);
      *exit_now = true;
      return "";
    }
    const size_t eq = arg.find('=');
    if (arg.substr(0, 2) != "--" || eq == std::string_view::npos) {
      return "expected --name=value, got " + std::string(arg);
    }
    const std::string name(arg.substr(2, eq - 2));
    const std::string value(arg.substr(eq + 1));
    char* end = nullptr;
    if (name == "scheduler") {
      args->client.scheduler = value;
    } else if (name == "bind") {
      args->client.bind_host = value;
    } else if (name == "compressor") {
      auto c = sieve::ParseCompressor(value);
      if (!c.ok()) return "--compressor: " + c.status().ToString();
      args->compressor = *c;
      continue;
    } else if (name == "num_params" || name == "rounds") {
      const unsigned long long v = std::strtoull(value.c_str(), &end, 10);
      (name == "rounds" ? args->rounds : args->client.num_params) = v;
    } else if (name == "density" || name == "lr" || name == "momentum") {
      const double v = std::strtod(value.c_str(), &end);
      if (name == "density") args->density = v;
      if (name == "lr") args->lr = static_cast<float>(v);
      if (name == "momentum") args->momentum = static_cast<float>(v);
    } else {
      return "unknown flag --" + name;
    }
    if (end != nullptr && (end == value.c_str() || *end != '\0')) {
      return "--" + name + ": not a number: " + value;
    }
  }
  if (args->client.scheduler.empty()) return "--scheduler is required";
  if (!(args->density >= 0 && args->density <= 1)) return "--density must lie in [0, 1]";
  return "";
}

int Fail(const std::string& what, const sieve::Status& status) {
  std::fprintf(stderr, "worker_loop: %s: %s\n", what.c_str(), status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  bool exit_now = false;
  if (const std::string error = Parse(argc, argv, &args, &exit_now); !error.empty()) {
    std::fprintf(stderr, "worker_loop: %s\n%s", error.c_str(), kUsage);
    return 2;
  }
  if (exit_now) return 0;

  // Registers with the scheduler and waits until the job formed (every server and worker in).
  auto client_or = sieve::PsClient::Connect(args.client);
  if (!client_or.ok()) return Fail("cannot join the job", client_or.status());
  sieve::PsClient& client = **client_or;
  const uint64_t d = client.num_params();
  std::printf("worker_loop: worker %d of %u, %u servers, D = %llu\n", client.rank(),
              client.num_workers(), client.num_servers(), static_cast<unsigned long long>(d));

  // Enters the job (worker/client/worker_start.h): worker 0 offers its own initial weights (here
  // zeros; servers started without a model take them), the start barrier, then w holds the
  // servers' weights. A restarted worker rejoins the running job instead.
  std::vector<float> w(d, 0.0f);
  auto start_or = sieve::StartWorker(&client, w, kTimeout);
  if (!start_or.ok()) return Fail("start", start_or.status());
  const double loss_before = Loss(w);

  auto ef_or = sieve::ErrorFeedback::Create(sieve::Device::kCpu, d);
  if (!ef_or.ok()) return Fail("error feedback", ef_or.status());
  sieve::ErrorFeedback& ef = **ef_or;
  const uint64_t k = sieve::KForDensity(args.density, d);
  std::vector<float> grad(d);
  sieve::Selection sel;
  uint64_t pairs_up = 0;
  for (uint64_t round = start_or->first_round; round < args.rounds;) {
    for (uint64_t i = 0; i < d; ++i) grad[i] = w[i] - Target(i);  // ∇f, yours to compute
    // m = μ·m + g; r += η·m; then the k largest |r| leave the residual as (index, value) pairs.
    if (sieve::Status s = ef.Accumulate(grad, args.momentum, args.lr); !s.ok()) {
      return Fail("accumulate", s);
    }
    sieve::SelectOptions select_options;
    select_options.seed = round;  // randomk's generator
    if (sieve::Status s = ef.Select(args.compressor, k, select_options, &sel); !s.ok()) {
      return Fail("select", s);
    }
    sieve::RoundStats stats;
    // Pushes the pairs to their servers and writes the servers' new values into w.
    if (sieve::Status s = client.PushPull(round, &sel, w, &stats, kTimeout); !s.ok()) {
      return Fail("round " + std::to_string(round), s);
    }
    pairs_up += stats.pairs_up;
    // Backup workers (sieve-server --backup_workers): pairs of a round that closed without this
    // push go back into the residual, and rounds that closed without this worker are skipped.
    if (sieve::Status s = ef.ReturnUnapplied(stats.missed_indices, stats.missed_values); !s.ok()) {
      return Fail("return unapplied pairs", s);
    }
    round += 1 + stats.rounds_skipped;
  }
  const double loss_after = Loss(w);

  // This worker is done; the job ends (and WaitShutdown returns OK) once every worker is.
  if (sieve::Status s = client.Finish(); !s.ok()) return Fail("finish", s);
  if (sieve::Status s = client.WaitShutdown(kTimeout); !s.ok()) return Fail("shutdown", s);
  std::printf("worker_loop: %llu rounds, k = %llu, pushed %llu pairs, loss %.6g -> %.6g\n",
              static_cast<unsigned long long>(args.rounds), static_cast<unsigned long long>(k),
              static_cast<unsigned long long>(pairs_up), loss_before, loss_after);
  return 0;
}
