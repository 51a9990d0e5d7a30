// sieve-scheduler: the job coordinator daemon. Start it first; every server and worker needs only
// its address. Prints "sieve-scheduler listening on HOST:PORT" once bound (port 0 = any free one;
// --port_file tells a program). Its metrics port also serves the job's status (GET /v1/job) and
// the sieve_job_* series; --status_file and --termination_message_file keep it on disk.
// Its flags and their options: scheduler/scheduler_flags.h; start, signals, metrics and exit
// codes: daemon/daemon_main.h.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "base/atomic_file.h"
#include "daemon/daemon_main.h"
#include "net/listen_flags.h"
#include "proto/job_status_text.h"
#include "scheduler/scheduler.h"
#include "scheduler/scheduler_flags.h"
#include "scheduler/status_files.h"

namespace sieve {
namespace {

constexpr char kName[] = "sieve-scheduler";

// The daemon from the scheduler's creation on; `signals` (constructed before any of its threads)
// stops the scheduler once it runs.
int RunScheduler(const SchedulerDaemonOptions& options, StopOnSignal& signals) {
  StatusFiles files(options.status_file, options.termination_message_file,
                    options.status_file_interval);
  SchedulerOptions so = options.scheduler;
  so.on_status = [&files](const pb::JobStatus& status) { files.Take(status); };
  auto scheduler = Scheduler::Create(so);
  if (!scheduler.ok()) {
    // Bad flag values are usage errors (2); a socket that cannot be bound is a failure (1).
    return ExitWith(
        scheduler.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure,
        kName, scheduler.status().ToString());
  }
  Scheduler* s = scheduler->get();
  const std::string address = s->host() + ":" + std::to_string(s->port());
  if (Status st = files.Check(s->status()); !st.ok())
    return ExitWith(kExitFailure, kName, st.ToString());
  if (!options.port_file.empty()) {
    if (Status st = WriteFileAtomically(options.port_file, address + "\n"); !st.ok())
      return ExitWith(kExitFailure, kName, st.ToString());
  }
  DaemonMetricsOptions mo = options.metrics;
  mo.more_paths["/v1/job"] = [s] {
    HttpResponse r;
    r.content_type = "application/json";
    r.body = JobStatusToJson(s->status());
    return r;
  };
  mo.more_series = [s] { return JobStatusSeries(s->status()); };
  auto metrics = StartMetrics(kName, mo);
  if (metrics == nullptr) return kExitFailure;
  metrics->SetDeadNodesSource([s] { return static_cast<double>(s->nodes_declared_dead()); });
  signals.SetTarget([s](const std::string& reason) { s->Stop(reason); });
  PrintSummaryLine(std::string(kName) + " listening on " + address);
  Status st = s->Run();
  if (metrics->enabled() && options.status_linger.count() > 0) {
    // The final status stays served a moment: a `sieve status --watch` sees how the job ended.
    std::this_thread::sleep_for(options.status_linger);
  }
  // The job is over: a signal now changes nothing (and no longer reaches `s`).
  signals.SetTarget([](const std::string&) {});
  if (!st.ok()) return ExitWith(kExitFailure, kName, "job failed: " + st.ToString());
  PrintSummaryLine(std::string(kName) +
                   ": job finished (heartbeats=" + std::to_string(s->heartbeats_received()) +
                   " foreign=" + std::to_string(s->foreign_messages()) +
                   " impostors=" + std::to_string(s->impostor_messages()) + ")");
  return kExitSuccess;
}

int Run(const SchedulerDaemonOptions& options) {
  // Before the scheduler's and the metrics endpoint's threads: they inherit the blocked signals.
  // Until the scheduler runs, a signal ends the daemon as the default action would.
  StopOnSignal signals([](int signo, const std::string& reason) {
    std::fprintf(stderr, "%s: %s before the job started\n", kName, reason.c_str());
    std::_Exit(128 + signo);
  });
  return RunScheduler(options, signals);
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
