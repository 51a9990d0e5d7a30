// Finding the sieve daemons (sieve-scheduler, sieve-server, sieve-worker) and the flags they
// define.
//
// Contract:
// - ExecutableDir() is the directory of the running program (from /proc/self/exe), or "" when
//   it cannot be read.
// - FindDaemon(program, bin_dir) returns the first executable regular file named `program` in:
//   bin_dir alone when it is not empty; otherwise the directory of the running `sieve` binary,
//   its ../scheduler, ../server and ../worker (the build tree layout), then each directory of
//   $PATH. NotFound lists the places searched.
// - QueryDaemonFlags(path) runs `path --helpxml` (bounded wait; gflags exits non-zero after
//   printing, so the exit code is ignored) and parses the XML. Errors name the program.
// - QueryWorkerCommandFlags(argv) asks a --worker_cmd which worker flags it implements: it runs
//   `argv` once with SIEVE_HELPXML=1 in its environment and none of the job's SIEVE_* variables
//   (worker_env.h; so no SIEVE_SCHEDULER), stdin /dev/null, bounded by `timeout`; the command
//   prints gflags' --helpxml XML on stdout (as `sieve-worker --helpxml` does; sieve.torch exits 0,
//   gflags itself 1: a list that parses counts either way). No XML (naming a failed exit) or the
//   timeout is an error saying which.
#ifndef SIEVE_DEPLOY_LOCAL_DAEMON_LOCATOR_H_
#define SIEVE_DEPLOY_LOCAL_DAEMON_LOCATOR_H_

#include <chrono>
#include <string>
#include <vector>

#include "base/status.h"
#include "deploy/local/flag_routing.h"

namespace sieve {

std::string ExecutableDir();

StatusOr<std::string> FindDaemon(const std::string& program, const std::string& bin_dir);

StatusOr<DaemonFlags> QueryDaemonFlags(const std::string& path, std::chrono::milliseconds timeout);

StatusOr<DaemonFlags> QueryWorkerCommandFlags(const std::vector<std::string>& argv,
                                              const std::vector<std::string>& extra_env,
                                              std::chrono::milliseconds timeout);

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_DAEMON_LOCATOR_H_
