// sieve-scheduler: the job coordinator daemon. Start it first; every server and worker needs only
// its address. Prints "sieve-scheduler listening on HOST:PORT" once bound (port 0 = any free one).
// Its flags and their options: scheduler/scheduler_flags.h; start, signals, metrics and exit
// codes: daemon/daemon_main.h.
#include <cstdio>
#include <string>

#include "daemon/daemon_main.h"
#include "net/listen_flags.h"
#include "scheduler/scheduler.h"
#include "scheduler/scheduler_flags.h"

namespace sieve {
namespace {

constexpr char kName[] = "sieve-scheduler";

int Run(const SchedulerDaemonOptions& options) {
  auto scheduler = Scheduler::Create(options.scheduler);
  if (!scheduler.ok()) {
    // Bad flag values are usage errors (2); a socket that cannot be bound is a failure (1).
    return ExitWith(
        scheduler.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure,
        kName, scheduler.status().ToString());
  }
  Scheduler* s = scheduler->get();
  auto metrics = StartMetrics(kName, options.metrics);
  if (metrics == nullptr) return kExitFailure;
  metrics->SetDeadNodesSource([s] { return static_cast<double>(s->nodes_declared_dead()); });
  StopOnSignal signals;
  signals.SetTarget([s](const std::string& reason) { s->Stop(reason); });
  PrintSummaryLine(std::string(kName) + " listening on " + s->host() + ":" +
                   std::to_string(s->port()));
  Status st = s->Run();
  if (!st.ok()) return ExitWith(kExitFailure, kName, "job failed: " + st.ToString());
  PrintSummaryLine(std::string(kName) +
                   ": job finished (heartbeats=" + std::to_string(s->heartbeats_received()) +
                   " foreign=" + std::to_string(s->foreign_messages()) +
                   " impostors=" + std::to_string(s->impostor_messages()) + ")");
  return kExitSuccess;
}

}  // namespace
}  // namespace sieve

int main(int argc, char** argv) {
  sieve::SetDefaultPort(sieve::kSchedulerDefaultPort);
  if (auto code = sieve::StartDaemon(sieve::SchedulerProgram(), argc, argv)) return *code;
  auto options = sieve::FlagsToSchedulerOptions();
  if (!options.ok())
    return sieve::ExitWith(sieve::kExitUsage, sieve::kName, options.status().message());
  return sieve::Run(*options);
}
