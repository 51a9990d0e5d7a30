// The job a worker belongs to, as `sieve launch` and the Kubernetes manifests export it in the
// environment (docs/worker-api.md, "Environment variables"): SIEVE_SCHEDULER, SIEVE_RANK,
// SIEVE_BIND, SIEVE_HOST, SIEVE_JOB_TOKEN_FILE, SIEVE_CURVE_DIR, SIEVE_CURVE_KEY and
// SIEVE_METRICS_PORT set the flags of the same meaning (--scheduler, --rank, ...) that the
// command line and flag files left at their defaults; a flag given explicitly always wins
// (SIEVE_JOB_TOKEN_FILE is also ignored when --job_token was given). sieve-worker and the Python
// module (sieve.worker.ENVIRONMENT, the same table) read the same variables.
//
// ApplyNodeEnvironment: call after the command line is parsed and before ReadNodeFlags, from
// main()'s thread (it sets gflags values). Errors: InvalidArgument naming the variable and the
// flag when a value does not parse (e.g. SIEVE_RANK=two); nothing is set then for that variable.
#ifndef SIEVE_NET_NODE_ENVIRONMENT_H_
#define SIEVE_NET_NODE_ENVIRONMENT_H_

#include <string>
#include <vector>

#include "base/status.h"

namespace sieve {

// One variable and the flag it sets.
struct EnvironmentFlag {
  const char* variable;
  const char* flag;
};
inline constexpr EnvironmentFlag kNodeEnvironment[] = {{"SIEVE_SCHEDULER", "scheduler"},
                                                       {"SIEVE_RANK", "rank"},
                                                       {"SIEVE_BIND", "bind"},
                                                       {"SIEVE_HOST", "host"},
                                                       {"SIEVE_JOB_TOKEN_FILE", "job_token_file"},
                                                       {"SIEVE_CURVE_DIR", "curve_dir"},
                                                       {"SIEVE_CURVE_KEY", "curve_key"},
                                                       {"SIEVE_METRICS_PORT", "metrics_port"}};

Status ApplyNodeEnvironment();

// The command line a worker parses: argv[0], then "--helpxml" when SIEVE_HELPXML is set (how
// `sieve launch` asks a --worker_cmd which flags it implements), then the words of
// SIEVE_WORKER_FLAGS (the worker flags it routes to a --worker_cmd, base/shell_words.h), then
// argv[1..] (so the command line wins). For a sieve-worker run as, or behind, a --worker_cmd
// (e.g. `--worker_cmd="taskset -c 1 build/worker/sieve-worker"`). Errors: InvalidArgument
// naming SIEVE_WORKER_FLAGS when it does not split (an unterminated quote).
StatusOr<std::vector<std::string>> WorkerCommandLine(int argc, char** argv);

}  // namespace sieve

#endif  // SIEVE_NET_NODE_ENVIRONMENT_H_
