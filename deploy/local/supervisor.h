// Supervisor: runs a set of child processes, relays their output as prefixed lines, reaps them,
// and stops them all on request.
//
// Contract:
// - Init() installs handlers for SIGINT, SIGTERM, SIGHUP and SIGCHLD (self-pipe), and ignores
//   SIGPIPE, for the lifetime of the process; call it once before Start(). received_signal()
//   reports the last SIGINT/SIGTERM/SIGHUP seen (0 if none).
// - Start() spawns a child in its own process group (see child_process.h). Every complete line
//   it writes is printed to the supervisor's out fd (child stdout) or err fd (child stderr) as
//   "[<name>] <line>" with one write() per line, so lines from different children never mix
//   mid-line. With a log dir, the raw lines (stdout and stderr) also go to
//   <log_dir>/<log_name>.log (truncated by the first Start() of that log name, appended to by
//   later ones: a restarted process continues its predecessor's log). The observer, if set, sees
//   every line before it is printed and returns whether to print it (false: the line goes only to
//   the log file).
// - Print() writes launcher text the same way (one write, whole lines). SetStatusLine() shows a
//   status line on the out fd, meant for a terminal: it is erased ("\r\033[K") before anything
//   else is printed and redrawn after, so it always stays the last line; "" removes it. StopAll()
//   removes it.
// - Pump(t) waits at most t for output, a child exit or a signal, and handles whatever arrived;
//   exits are reaped (no zombies) and recorded in exit_order() in the order they were seen.
// - StopAll(grace) sends SIGTERM to the process group of every running child, waits up to `grace`
//   for them to exit (a second SIGINT/SIGTERM cuts the wait short), SIGKILLs the groups of what is
//   left, reaps everything and drains the remaining output (bounded). The destructor does the same
//   with no grace, so nothing outlives the supervisor.
// Single-threaded: all methods from one thread.
#ifndef SIEVE_DEPLOY_LOCAL_SUPERVISOR_H_
#define SIEVE_DEPLOY_LOCAL_SUPERVISOR_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "deploy/local/line_prefixer.h"

namespace sieve {

struct ChildSpec {
  std::string name;      // shown in prefixes and messages: "worker 2"
  std::string log_name;  // log file stem: "worker-2"
  std::vector<std::string> argv;
  // Changes to the launcher's environment: "NAME=value" sets, a bare "NAME" removes (SpawnChild).
  std::vector<std::string> env;
};

struct SupervisorOptions {
  std::string log_dir;  // empty: no log files
  int out_fd = 1;
  int err_fd = 2;
};

class Supervisor {
 public:
  using LineObserver = std::function<bool(size_t child, bool is_stderr, std::string_view line)>;

  explicit Supervisor(SupervisorOptions options);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  Status Init();
  // Index of the new child.
  StatusOr<size_t> Start(const ChildSpec& spec);
  void set_line_observer(LineObserver observer) { observer_ = std::move(observer); }
  void Print(bool to_stderr, std::string_view text);
  void SetStatusLine(std::string text);

  void Pump(std::chrono::milliseconds timeout);
  void StopAll(std::chrono::milliseconds grace);

  size_t size() const { return children_.size(); }
  const ChildSpec& spec(size_t i) const;
  const std::string& name(size_t i) const;
  pid_t pid(size_t i) const;
  bool running(size_t i) const;
  int wait_status(size_t i) const;
  bool AnyRunning() const;
  const std::vector<size_t>& exit_order() const { return exit_order_; }
  int received_signal() const;

 private:
  struct Child;

  void ReadFrom(Child& c, bool is_stderr);
  void Emit(Child& c, bool is_stderr, const std::vector<std::string>& lines);
  void ReapExited();
  void DrainOutput(std::chrono::milliseconds limit);
  void SignalRunning(int sig);
  void Write(int fd, std::string_view text);

  SupervisorOptions options_;
  std::vector<std::unique_ptr<Child>> children_;
  std::vector<size_t> exit_order_;
  std::set<std::string> logs_opened_;
  bool stopped_ = false;
  LineObserver observer_;
  std::string status_;  // shown after the last printed line when not empty
};

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_SUPERVISOR_H_
