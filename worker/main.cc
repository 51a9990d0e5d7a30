// sieve-worker: the worker daemon. Registers with the scheduler, trains its data partition with
// sparse push/pull (worker/trainer/trainer.h), prints a `sieve-worker summary:` line and exits 0
// after the scheduler's shutdown; any failure exits 1 with a message on stderr, a bad flag value
// exits 2 before connecting, and --device=cuda without a usable GPU exits 75
// (kExitDeviceUnavailable: retryable, unlike 2). Flags and their options: worker/worker_flags.h;
// the run: worker/worker_daemon.h; start, exit codes, signals and metrics: daemon/daemon_main.h.
#include <string>
#include <vector>

#include "daemon/daemon_main.h"
#include "net/node_environment.h"
#include "worker/worker_daemon.h"
#include "worker/worker_flags.h"

int main(int argc, char** argv) {
  // SIEVE_WORKER_FLAGS / SIEVE_HELPXML, for a sieve-worker run as a `sieve launch --worker_cmd`.
  auto words = sieve::WorkerCommandLine(argc, argv);
  if (!words.ok())
    return sieve::ExitWith(sieve::kExitUsage, "sieve-worker", words.status().message());
  std::vector<char*> args;
  for (std::string& w : *words) args.push_back(w.data());
  args.push_back(nullptr);
  if (auto code = sieve::StartDaemon(sieve::WorkerProgram(), static_cast<int>(words->size()),
                                     args.data())) {
    return *code;
  }
  auto options = sieve::FlagsToWorkerOptions();
  if (!options.ok() && options.status().code() == sieve::StatusCode::kUnavailable) {
    return sieve::ExitWith(sieve::kExitDeviceUnavailable, "sieve-worker",
                           options.status().message());
  }
  if (!options.ok()) {
    return sieve::ExitWith(sieve::kExitUsage, "sieve-worker",
                           options.status().message() + " (see --help)");
  }
  return sieve::RunWorker(std::move(*options));
}
