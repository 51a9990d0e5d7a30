// The environment `sieve launch` gives every worker process (sieve-worker and a --worker_cmd
// alike), in the style of torchrun's env:// start: the job is described by SIEVE_* variables, so
// a worker command's argv is exactly what the user wrote (docs/worker-api.md, "Environment
// variables", is the table of these names).
//
// Contract:
// - WorkerEnvironment(job, rank) returns "NAME=value" entries for the variables that apply and a
//   bare "NAME" (unset: child_process.h's SpawnChild) for every other name of kWorkerEnvNames, so
//   a value inherited from the launcher's own environment never describes another job; and
//   PYTHONPATH when job.python_path is set.
// - ShellQuote() quotes one word for a POSIX shell ('...' when it holds anything but
//   [A-Za-z0-9_@%+=:,./-], with embedded ' written '\''); JoinShellWords() quotes and joins with
//   single spaces. SplitCommandWords (base/shell_words.h) reads the result back word for word.
// Pure; thread-compatible.
#ifndef SIEVE_DEPLOY_LOCAL_WORKER_ENV_H_
#define SIEVE_DEPLOY_LOCAL_WORKER_ENV_H_

#include <string>
#include <string_view>
#include <vector>

namespace sieve {

// Every variable of the table, whether or not a job sets it.
extern const char* const kWorkerEnvNames[11];

struct WorkerJob {
  std::string scheduler;  // HOST:PORT
  int num_workers = 0;
  int num_servers = 0;
  std::string bind;            // the address workers bind
  std::string host;            // the address workers advertise
  std::string job_token_file;  // a file holding the job token
  std::string curve_dir;       // "" without CURVE
  // Per rank: the worker's own key file (CURVE); empty, or one per worker.
  std::vector<std::string> curve_keys;
  // Per rank: its --metrics_port; empty without --metrics_port.
  std::vector<int> metrics_ports;
  // The worker flags routed to workers, each rendered --name=value.
  std::vector<std::string> worker_flags;
  // PYTHONPATH for the workers ("" = inherited as is): the build's Python module first, so that
  // `--worker_cmd="/usr/bin/python3 train.py"` imports sieve from a fresh build.
  std::string python_path;
};

std::vector<std::string> WorkerEnvironment(const WorkerJob& job, int rank);

std::string ShellQuote(std::string_view word);
std::string JoinShellWords(const std::vector<std::string>& words);

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_WORKER_ENV_H_
