// Command-line options of `sieve launch`.
//
// Contract: ParseLaunchArgs() consumes the launcher's own flags (see kLaunchUsage), written
// `--name=value` or `--name value`, anywhere among the arguments; every other word is kept, in
// order, in pass_through for flag routing. Everything after a bare `--` is pass-through as is.
// Out-of-range or malformed values are InvalidArgument errors naming the flag. `--help`/`-h`
// sets help and nothing else is checked.
#ifndef SIEVE_DEPLOY_LOCAL_LAUNCH_OPTIONS_H_
#define SIEVE_DEPLOY_LOCAL_LAUNCH_OPTIONS_H_

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "base/shell_words.h"
#include "base/status.h"

namespace sieve {

extern const char kLaunchUsage[];

struct LaunchOptions {
  int num_servers = 1;
  int num_workers = 1;
  int port = 0;  // 0: the scheduler picks one and reports it
  std::string bin_dir;
  std::string log_dir;
  // How long to wait for the scheduler's port file.
  std::chrono::milliseconds listen_timeout{30000};
  // How long servers and workers may keep running once the scheduler has exited 0.
  std::chrono::milliseconds finish_grace{10000};
  // SIGTERM → SIGKILL interval when stopping everything.
  std::chrono::milliseconds stop_timeout{5000};
  // Abnormal exits of servers and workers restarted (under the same --rank) per job; 0: any
  // daemon's death stops the job.
  int max_restarts = 0;
  // The job's progress display: auto (a live line when out_fd is a terminal, else periodic
  // lines), live, lines or off.
  enum class Progress { kAuto, kLive, kLines, kOff };
  Progress progress = Progress::kAuto;
  // --worker_cmd: the command each worker runs instead of sieve-worker, split into words (POSIX
  // shell quoting, no expansions); empty = sieve-worker. Its argv is these words only: the job
  // reaches it in the SIEVE_* environment (worker_env.h).
  std::vector<std::string> worker_cmd;
  bool help = false;
  std::vector<std::string> pass_through;
};

StatusOr<LaunchOptions> ParseLaunchArgs(const std::vector<std::string>& args);

// SplitCommandWords (--worker_cmd's words): base/shell_words.h.

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_LAUNCH_OPTIONS_H_
