// The start and end every sieve daemon shares (sieve-scheduler, sieve-server, sieve-worker): the
// command line and logging, the exit codes, error lines on stderr, the metrics endpoint, the stop
// on SIGINT/SIGTERM and the summary line on stdout. A daemon's main() is then
//   if (auto code = StartDaemon(program, argc, argv)) return *code;   // flags set, glog on
//   auto options = FlagsTo<Daemon>Options();                           // its own flags file
//   if (!options.ok()) return ExitWith(kExitUsage, name, options.status().message());
//   return Run<Daemon>(*options);
//
// Exit codes: kExitSuccess (0) the job ended well; kExitFailure (1) it failed, or the daemon could
// not join it; kExitUsage (2) a bad flag value, reported before connecting.
//
// Thread-safety: StartDaemon, ExitWith, StartMetrics and PrintSummaryLine are for main()'s thread;
// StopOnSignal's SetTarget may be called from any thread.
#ifndef SIEVE_DAEMON_DAEMON_MAIN_H_
#define SIEVE_DAEMON_DAEMON_MAIN_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/flags.h"
#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "metrics/daemon_metrics.h"
#include "net/signal_watcher.h"

namespace sieve {

inline constexpr int kExitSuccess = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Parses the command line (base/flags.h's ParseCommandLine: --help, --version, usage errors),
// then sends glog to stderr and raises the descriptor limit to the hard one (every peer
// connection costs a descriptor; a failure is a logged warning). Returns the exit code main()
// must return at once, or nullopt: the flags are set and the daemon runs.
std::optional<int> StartDaemon(const ProgramInfo& program, int argc, char** argv);

// Prints "<daemon>: <message>\n" to stderr and returns `exit_code`.
int ExitWith(int exit_code, std::string_view daemon, std::string_view message);

// DaemonMetrics::Start(options); on an error prints "<daemon>: <status>" to stderr and returns
// nullptr (the daemon then exits kExitFailure). The caller owns the endpoint.
std::unique_ptr<DaemonMetrics> StartMetrics(std::string_view daemon,
                                            const DaemonMetricsOptions& options);

// Prints `line` and a newline to stdout and flushes it: the `<daemon> summary:` lines for people
// (programs read --summary_out's JSON) and the "listening on" line.
void PrintSummaryLine(const std::string& line);

// SIGINT/SIGTERM stop the daemon's current target (a Scheduler, Node or PsClient, which exists
// for part of main() only) with the reason "stopped by signal <name>", whichever thread the
// kernel delivers the signal to (also a library's threads started before main()). Construct it in
// main() before the daemon's own threads, so that they are never interrupted by the signals
// (net/signal_watcher.h); a signal before it exists, or after it is destroyed, gets the default
// action. The callbacks run on the watcher's thread, under the object's lock, so
// SetTarget(nullptr) returns only once no call of the old target is in flight. At most one per
// process. Not copyable.
class StopOnSignal {
 public:
  using StopFn = std::function<void(const std::string& reason)>;
  // `no_target(signo, reason)`: what a signal does while no target is set (default: nothing).
  explicit StopOnSignal(std::function<void(int signo, const std::string& reason)> no_target = {});
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;

  // `stop(reason)` stops the target; empty = no target. Call with an empty one before the
  // target is destroyed.
  void SetTarget(StopFn stop) EXCLUDES(mu_);

 private:
  void OnSignal(int signo) EXCLUDES(mu_);

  const std::function<void(int, const std::string&)> no_target_;
  Mutex mu_;
  StopFn stop_ GUARDED_BY(mu_);
  SignalWatcher watcher_;  // last: it starts after, and stops before, what it reads
};

}  // namespace sieve

#endif  // SIEVE_DAEMON_DAEMON_MAIN_H_
