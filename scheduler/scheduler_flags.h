// sieve-scheduler's command line: its flags (defined in scheduler_flags.cc, plus the listening
// flags of net/listen_flags.h), its --help groups and their conversion to the scheduler's options.
//
// Contract: call SetDefaultPort(kSchedulerDefaultPort) and parse the command line
// (daemon/daemon_main.h's StartDaemon with SchedulerProgram()) before FlagsToSchedulerOptions(),
// all on main()'s thread. FlagsToSchedulerOptions reads the parsed flags and changes nothing; an
// error is a usage error (exit 2) whose message names the flag, as the daemon prints it after
// "sieve-scheduler: ".
#ifndef SIEVE_SCHEDULER_SCHEDULER_FLAGS_H_
#define SIEVE_SCHEDULER_SCHEDULER_FLAGS_H_

#include <gflags/gflags.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "base/flags.h"
#include "base/status.h"
#include "metrics/daemon_metrics.h"
#include "scheduler/scheduler.h"

DECLARE_uint32(num_workers);
DECLARE_uint32(num_servers);
DECLARE_uint32(min_workers);
DECLARE_uint64(num_params);
DECLARE_bool(allow_unbound_keys);
DECLARE_int32(heartbeat_timeout_ms);
DECLARE_int32(startup_timeout_ms);
DECLARE_uint32(replication);
DECLARE_string(server_failure);
DECLARE_int32(server_restart_timeout_ms);
DECLARE_string(job_name);
DECLARE_string(status_file);
DECLARE_int32(status_file_interval_ms);
DECLARE_string(termination_message_file);
DECLARE_string(port_file);
DECLARE_int32(status_linger_ms);

namespace sieve {

// The well-known port nodes' --scheduler defaults to: --port's default for the scheduler.
inline constexpr uint16_t kSchedulerDefaultPort = 9310;

struct SchedulerDaemonOptions {
  SchedulerOptions scheduler;
  DaemonMetricsOptions metrics;  // role "scheduler" on --bind:--metrics_port
  // The job status's files (scheduler/status_files.h) and the port file ("" = none): the
  // scheduler's HOST:PORT and a newline, written atomically once it is bound.
  std::string status_file;
  std::string termination_message_file;
  std::string port_file;
  // With metrics: how long the final status stays served after the job's end.
  std::chrono::milliseconds status_linger{2000};
  std::chrono::milliseconds status_file_interval{1000};  // --status_file_interval_ms
};

// sieve-scheduler's name, summary, usage and --help groups (base/flags.h).
ProgramInfo SchedulerProgram();

// The options of the parsed flags. Errors: --server_failure neither wait nor fail, or what
// ReadListenFlags("scheduler.key") reports (ports, CURVE keys, job token).
StatusOr<SchedulerDaemonOptions> FlagsToSchedulerOptions();

}  // namespace sieve

#endif  // SIEVE_SCHEDULER_SCHEDULER_FLAGS_H_
