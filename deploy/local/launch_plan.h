// MakeLaunchPlan(): step 1 of Launch() (launcher.h), before anything is started: find the three
// daemons and ask each for its flags, read the pass-through flags the launcher handles itself,
// route the rest to the roles that define them, and write every process's command line and the
// workers' job (worker_env.h).
//
// Contract: a usage error (a flag no daemon defines, one the launcher sets itself such as
// --scheduler or --rank, a reporting flag such as --help, a bad --min_workers or --metrics_port,
// a worker flag a --worker_cmd does not implement) is an InvalidArgument error naming the flag;
// a daemon that cannot be found or asked is another error. Either way nothing was started and no
// file was written. Side effects: it runs each daemon (and a --worker_cmd, when flags are passed)
// once with --helpxml and looks at the file system (the daemon search, key files). Thread-
// compatible.
#ifndef SIEVE_DEPLOY_LOCAL_LAUNCH_PLAN_H_
#define SIEVE_DEPLOY_LOCAL_LAUNCH_PLAN_H_

#include <cstddef>
#include <string>
#include <vector>

#include "base/status.h"
#include "deploy/local/launch_options.h"
#include "deploy/local/supervisor.h"
#include "deploy/local/worker_env.h"

namespace sieve {

// The roles of a local job, in start order: index 0 scheduler, 1 servers, 2 workers.
struct LaunchRole {
  const char* name;     // "server": used in prefixes, log names and routing
  const char* program;  // "sieve-server"
};
inline constexpr LaunchRole kLaunchRoles[] = {
    {"scheduler", "sieve-scheduler"}, {"server", "sieve-server"}, {"worker", "sieve-worker"}};

struct LaunchPlan {
  // Per role (kLaunchRoles order), one spec per process: the scheduler, servers 0..S-1, workers
  // 0..W-1 by rank.
  std::vector<ChildSpec> scheduler_servers_workers[3];
  // Per role, the words of the program before its arguments: --scheduler is inserted there once
  // the port is known (not for a --worker_cmd: the job reaches it in its environment only).
  size_t program_words[3] = {1, 1, 1};
  bool scheduler_on_argv[3] = {false, true, true};
  // The workers' environment (worker_env.h); Launch fills in the scheduler and the token file.
  WorkerJob worker_job;
  // The token Launch writes to a private file for SIEVE_JOB_TOKEN_FILE; "" when the user's
  // --job_token_file already names one.
  std::string token;
  int min_workers = 0;        // the scheduler's --min_workers; 0: every worker must finish
  int replication = 0;        // the scheduler's --replication: a dead server's shards fail over
  std::string metrics_ports;  // "scheduler :P, server 0 :P+1, ..." with --metrics_port
};

StatusOr<LaunchPlan> MakeLaunchPlan(const LaunchOptions& options);

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_LAUNCH_PLAN_H_
