#include "deploy/local/launcher.h"

#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/parse_number.h"
#include "deploy/local/child_process.h"
#include "deploy/local/job_progress.h"
#include "deploy/local/job_result.h"
#include "deploy/local/launch_plan.h"
#include "deploy/local/private_dir.h"
#include "deploy/local/restart_backoff.h"
#include "deploy/local/supervisor.h"
#include "deploy/local/worker_env.h"
#include "proto/job_status_text.h"
#include "proto/progress_line.h"

namespace sieve {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr milliseconds kIdlePoll{1000};
// How often --progress=lines prints the job's progress.
constexpr std::chrono::seconds kProgressLineEvery{10};
// How often the scheduler's status file is read while the job runs.
constexpr milliseconds kStatusEvery{1000};

// Launcher messages on the err fd; through the supervisor once there is one (so they keep clear of
// its status line).
class Reporter {
 public:
  explicit Reporter(int fd) : fd_(fd) {}
  void set_supervisor(Supervisor* sup) { sup_ = sup; }
  void Say(const std::string& message) const {
    std::string line = "sieve launch: " + message + "\n";
    if (sup_ != nullptr) return sup_->Print(/*to_stderr=*/true, line);
    (void)!write(fd_, line.data(), line.size());
  }

 private:
  int fd_;
  Supervisor* sup_ = nullptr;
};

// The width a status line may take on terminal `fd` without wrapping (80 when unknown).
size_t StatusWidth(int fd) {
  winsize ws{};
  if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1) return ws.ws_col - 1;
  return 79;
}

// A whole file's content, or nullopt when it cannot be read (not written yet).
std::optional<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

// The port in the scheduler's port file ("HOST:PORT\n"), or nullopt (not written yet).
std::optional<int> PortFromFile(const std::string& path) {
  std::optional<std::string> content = ReadWholeFile(path);
  if (!content) return std::nullopt;
  std::string_view address = *content;
  while (!address.empty() && (address.back() == '\n' || address.back() == '\r')) {
    address.remove_suffix(1);
  }
  size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const std::optional<int> port = ParseNumber<int>(address.substr(colon + 1));
  if (!port || *port <= 0 || *port > 65535) return std::nullopt;
  return port;
}

// mkdir -p `dir` (0755). Errors: Unavailable naming the prefix that could not be made.
Status MakeDirs(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    std::string prefix = dir.substr(0, pos);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return UnavailableError("cannot create " + prefix + ": " + std::strerror(errno));
    }
  }
  return Status::Ok();
}

// Milliseconds from now to `t`, 0 once past.
int MillisUntil(Clock::time_point t) {
  auto left = std::chrono::duration_cast<milliseconds>(t - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

bool Failed(int wait_status) { return !WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0; }

// Whether a server with command line `argv` restores its shard when restarted: its last
// --checkpoint_dir is not empty (flag files are already expanded into `argv`: flag_routing.h).
bool ServerCanRestore(const std::vector<std::string>& argv) {
  constexpr std::string_view kDir = "--checkpoint_dir=";
  bool dir = false;
  for (const std::string& a : argv) {
    if (a.starts_with(kDir)) dir = a.size() > kDir.size();
  }
  return dir;
}

// A daemon exits 2 on a usage error (a bad flag or flag file, base/flags.h): the launch is a usage
// error too (exit 2), and restarting that daemon would fail the same way.
bool UsageExit(int wait_status) {
  return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == kExitUsage;
}
int FailureCode(int wait_status) { return UsageExit(wait_status) ? kExitUsage : kExitFailure; }

// The ends of a started job are exit codes: std::nullopt while it goes on.
using JobEnd = std::optional<int>;

// A planned job once its supervisor is up: starts the scheduler, then the servers and workers
// (steps 2-3 of launcher.h), supervises them to the end (step 4) and shows its progress (step 5).
class LaunchedJob {
 public:
  LaunchedJob(const LaunchOptions& o, int out_fd, LaunchPlan* plan, Supervisor* sup, Reporter* say,
              PrivateDir* dir)
      : o_(o),
        dir_(*dir),
        out_fd_(out_fd),
        plan_(*plan),
        sup_(*sup),
        say_(*say),
        live_(o.progress == Progress::kLive ||
              (o.progress == Progress::kAuto && isatty(out_fd) != 0)),
        lines_(o.progress == Progress::kLines || (o.progress == Progress::kAuto && !live_)),
        job_start_(Clock::now()),
        result_(o.num_workers) {}

  // The launcher's exit code.
  int Run() {
    ObserveLines();
    next_progress_line_ = Clock::now() + kProgressLineEvery;
    if (JobEnd end = StartScheduler()) return *end;
    if (JobEnd end = StartNodes()) return *end;
    return Supervise();
  }

 private:
  using Progress = LaunchOptions::Progress;
  // A restart decided and counted, waiting for its backoff.
  struct PendingRestart {
    size_t child;        // the failed process
    int status;          // its wait status
    int rank_if_worker;  // -1 for a server
    int number;          // 1 for the job's first restart
    Clock::time_point at;
  };

  // Every line is relayed but a worker's progress lines while the launcher shows the job's
  // progress (from the scheduler's status, which says the same for the whole job).
  void ObserveLines() {
    sup_.set_line_observer([this](size_t child, bool is_stderr, std::string_view line) {
      if (child == 0 || is_stderr || o_.progress == Progress::kOff) return true;
      if (worker_rank_.find(child) == worker_rank_.end()) return true;
      return !ParseProgressLine(line).has_value();
    });
  }

  // The scheduler's status file, read again when `force` or kStatusEvery passed; the last one that
  // parsed is kept (the file is replaced atomically, so a read sees a whole one).
  const pb::JobStatus* ReadStatus(bool force) {
    if (!force && Clock::now() < next_status_read_) return status_ ? &*status_ : nullptr;
    next_status_read_ = Clock::now() + kStatusEvery;
    if (std::optional<std::string> json = ReadWholeFile(status_path_)) {
      if (auto st = JobStatusFromJson(*json); st.ok()) status_ = std::move(st).value();
    }
    return status_ ? &*status_ : nullptr;
  }

  Status Start(const ChildSpec& spec, int rank_if_worker) {
    SIEVE_ASSIGN_OR_RETURN(auto index, sup_.Start(spec));
    started_at_[index] = Clock::now();
    if (rank_if_worker >= 0) {
      worker_rank_[index] = rank_if_worker;
      latest_[rank_if_worker] = index;
    }
    return Status::Ok();
  }

  void ShowProgress() {
    const pb::JobStatus* status = ReadStatus(/*force=*/false);
    std::string text = status != nullptr ? JobProgressText(*status) : "";
    if (live_) {
      const size_t width = StatusWidth(out_fd_);
      if (text.size() > width) text.resize(width);
      sup_.SetStatusLine(text);
    } else if (lines_ && !text.empty() && Clock::now() >= next_progress_line_) {
      say_.Say(text);
      next_progress_line_ = Clock::now() + kProgressLineEvery;
    }
  }

  // Every end of a started job: stop what runs, then the job's one result line.
  int Fail(int code, const std::string& reason) {
    sup_.StopAll(o_.stop_timeout);
    say_.Say(result_.Failed(reason, ReadStatus(/*force=*/true)));
    return code;
  }
  bool Interrupted() {
    int sig = sup_.received_signal();
    if (sig == 0) return false;
    say_.Say(std::string("received ") + strsignal(sig) + "; stopping all processes");
    return true;
  }
  int Interrupt() {
    const int sig = sup_.received_signal();
    return Fail(128 + sig, std::string("interrupted by ") + strsignal(sig));
  }
  std::string Failure(size_t i) {
    return sup_.name(i) + " (pid " + std::to_string(sup_.pid(i)) +
           ") failed: " + DescribeWaitStatus(sup_.wait_status(i));
  }
  void ReportFailure(size_t i) { say_.Say(Failure(i) + "; stopping all processes"); }

  // Step 2: the scheduler, then its port.
  JobEnd StartScheduler() {
    ChildSpec spec = plan_.scheduler_servers_workers[0][0];
    const std::string port_path = dir_.Path("scheduler.port");
    spec.argv.push_back("--port_file=" + port_path);
    status_path_ = dir_.Path("status.json");
    constexpr std::string_view kStatusFlag = "--status_file=";
    for (const std::string& a : spec.argv) {  // the user's own status file (flags are expanded)
      if (a.starts_with(kStatusFlag) && a.size() > kStatusFlag.size())
        status_path_ = a.substr(kStatusFlag.size());
    }
    if (status_path_ == dir_.Path("status.json"))
      spec.argv.push_back("--status_file=" + status_path_);
    if (auto s = sup_.Start(spec); !s.ok()) {
      say_.Say(s.status().message());
      return Fail(kExitFailure, "the scheduler could not be started");
    }
    const auto listen_deadline = Clock::now() + o_.listen_timeout;
    while (!(port_ = PortFromFile(port_path))) {
      if (Interrupted()) return Interrupt();
      if (!sup_.running(0)) {
        const std::string how =
            "scheduler " + DescribeWaitStatus(sup_.wait_status(0)) + " before reporting its port";
        say_.Say(how);
        return Fail(FailureCode(sup_.wait_status(0)), how);
      }
      int left = MillisUntil(listen_deadline);
      if (left == 0) {
        say_.Say("scheduler did not write its port file " + port_path + " within " +
                 std::to_string(o_.listen_timeout.count()) + " ms");
        return Fail(kExitFailure, "the scheduler did not report its port");
      }
      sup_.Pump(milliseconds(std::min(left, 20)));
    }
    const std::string scheduler_address = "127.0.0.1:" + std::to_string(*port_);
    plan_.worker_job.scheduler = scheduler_address;
    if (!plan_.metrics_ports.empty()) say_.Say("metrics on " + plan_.metrics_ports);
    return std::nullopt;
  }

  // Step 3: the servers and workers, told the scheduler's address.
  JobEnd StartNodes() {
    const std::string scheduler_flag = "--scheduler=" + plan_.worker_job.scheduler;
    for (int r = 1; r < 3; ++r) {
      int rank = 0;
      for (ChildSpec spec : plan_.scheduler_servers_workers[r]) {
        if (plan_.scheduler_on_argv[r]) {
          spec.argv.insert(spec.argv.begin() + static_cast<std::ptrdiff_t>(plan_.program_words[r]),
                           scheduler_flag);
        }
        if (r == 2) spec.env = WorkerEnvironment(plan_.worker_job, rank);
        if (Status s = Start(spec, r == 2 ? rank : -1); !s.ok()) {
          say_.Say(s.message());
          return Fail(kExitFailure, s.message());
        }
        ++rank;
      }
    }
    return std::nullopt;
  }

  // Step 4: exits judged as they come, until every process has exited.
  int Supervise() {
    for (;;) {
      if (Interrupted()) return Interrupt();
      // Exits in the order they happened.
      while (exits_seen_ < sup_.exit_order().size()) {
        if (JobEnd end = HandleExit(sup_.exit_order()[exits_seen_++])) return *end;
      }
      if (JobEnd end = StartDueRestarts()) return *end;
      if (!sup_.AnyRunning()) return Finished();
      int timeout = static_cast<int>(kIdlePoll.count());
      if (!pending_.empty()) timeout = std::min(timeout, MillisUntil(pending_.front().at));
      if (JobEnd end = AwaitFinishGrace(&timeout)) return *end;
      sup_.Pump(milliseconds(timeout));
      ShowProgress();
    }
  }

  // Workers whose latest process runs or exited 0: those the job can still finish with.
  int WorkersLeft() const {
    int left = 0;
    for (const auto& [rank, index] : latest_) {
      left += sup_.running(index) || !Failed(sup_.wait_status(index)) || RestartPending(rank);
    }
    return left;
  }
  bool RestartPending(int rank) const {
    return std::any_of(pending_.begin(), pending_.end(),
                       [rank](const PendingRestart& p) { return p.rank_if_worker == rank; });
  }

  // Child i exited: a failed server or worker is restarted while the job runs and restarts are
  // left; a worker the scheduler's --min_workers can do without is let go; any other failure
  // stops the job.
  JobEnd HandleExit(size_t i) {
    const int status = sup_.wait_status(i);
    auto rank = worker_rank_.find(i);
    const bool worker = rank != worker_rank_.end();
    if (!Failed(status)) return std::nullopt;
    if (i == 0) {
      ReportFailure(i);
      if (o_.max_restarts > 0) say_.Say("the scheduler cannot be restarted; the job is lost");
      return Fail(FailureCode(status), Failure(i));
    }
    // With --replication a dead server's shards fail over to their backups: the scheduler goes
    // on (or, when a shard has no live backup left, decides the job's fate). With restarts left
    // the server is started again: the shards' primaries rebuild its copies (in every mode; BSP
    // replicated by pushes at a round's end).
    if (!worker && plan_.replication > 0 && sup_.running(0) && !UsageExit(status)) {
      if (restarts_ < o_.max_restarts) {
        say_.Say("lost " + sup_.name(i) + " (" + DescribeWaitStatus(status) +
                 "); its shards fail over to their backups (--replication=" +
                 std::to_string(plan_.replication) + ") and a replacement is rebuilt from them");
        return Restart(i, status, -1);
      }
      say_.Say("lost " + sup_.name(i) + " (" + DescribeWaitStatus(status) +
               "); its shards fail over to their backups (--replication=" +
               std::to_string(plan_.replication) + ")" +
               (o_.max_restarts > 0 ? ", no restarts left" : ", it is not restarted"));
      return std::nullopt;
    }
    // A server without a checkpoint would come back without its shard: the job cannot go on.
    const bool lost_shard = !worker && !ServerCanRestore(sup_.spec(i).argv);
    const bool restartable = restarts_ < o_.max_restarts && !lost_shard;
    // (Also when the scheduler's exit was seen first: it already decided, counting this worker
    // out or in; exits seen in one pass are in child order, not in the order they happened.)
    if (!UsageExit(status) && (!restartable || !sup_.running(0)) && worker &&
        plan_.min_workers > 0 && WorkersLeft() >= plan_.min_workers) {
      LetWorkerGo(i, rank->second, status, restartable);
      return std::nullopt;
    }
    if (!sup_.running(0) || !restartable || UsageExit(status)) {
      return StopOnFailure(i, status, worker, lost_shard);
    }
    return Restart(i, status, worker ? rank->second : -1);
  }

  // The scheduler drops the dead worker and decides the job's fate by --min_workers.
  void LetWorkerGo(size_t i, int rank, int status, bool restartable) {
    result_.WorkerLost(rank, DescribeWaitStatus(status));
    say_.Say("lost " + sup_.name(i) + " (" + DescribeWaitStatus(status) + ")" +
             (o_.max_restarts > 0 && !restartable ? ", no restarts left" : "") + "; " +
             std::to_string(WorkersLeft()) + " of " + std::to_string(o_.num_workers) +
             " workers left, the scheduler's --min_workers=" + std::to_string(plan_.min_workers) +
             " decides the job");
  }

  // A failure the job cannot go on after: why it was not restarted, then the job's end.
  int StopOnFailure(size_t i, int status, bool worker, bool lost_shard) {
    ReportFailure(i);
    if (o_.max_restarts > restarts_ && sup_.running(0) && lost_shard) {
      say_.Say(sup_.name(i) +
               " is not restarted: it has no --checkpoint_dir to restore its shard from");
    } else if (o_.max_restarts > 0 && sup_.running(0) && !UsageExit(status)) {
      say_.Say("no restarts left (" + std::to_string(o_.max_restarts) + " used)");
    }
    if (plan_.min_workers > 0 && worker && sup_.running(0) && !UsageExit(status)) {
      say_.Say("only " + std::to_string(WorkersLeft()) + " of " + std::to_string(o_.num_workers) +
               " workers left, fewer than --min_workers=" + std::to_string(plan_.min_workers));
    }
    return Fail(FailureCode(status), Failure(i));
  }

  // The same command line again (rank_if_worker: the worker's rank, -1 for a server), at once
  // or, when it failed soon after it started, after the backoff (restart_backoff.h). The restart
  // is counted now.
  JobEnd Restart(size_t i, int status, int rank_if_worker) {
    PendingRestart p{i, status, rank_if_worker, ++restarts_, Clock::now()};
    const auto ran_for = std::chrono::duration_cast<milliseconds>(Clock::now() - started_at_[i]);
    const milliseconds delay = backoff_.Failed(sup_.name(i), ran_for);
    if (delay.count() == 0) return StartRestart(p);
    p.at += delay;
    char ran[32];
    std::snprintf(ran, sizeof(ran), "%.1f", static_cast<double>(ran_for.count()) / 1000);
    say_.Say(sup_.name(i) + " failed " + ran + " s after it started; restarting it in " +
             std::to_string(delay.count()) + " ms");
    pending_.push_back(p);
    std::stable_sort(pending_.begin(), pending_.end(),
                     [](const PendingRestart& a, const PendingRestart& b) { return a.at < b.at; });
    return std::nullopt;
  }
  JobEnd StartRestart(const PendingRestart& p) {
    say_.Say("restarting " + sup_.name(p.child) + " (" + DescribeWaitStatus(p.status) +
             "), restart " + std::to_string(p.number) + " of " + std::to_string(o_.max_restarts));
    if (Status s = Start(sup_.spec(p.child), p.rank_if_worker); !s.ok()) {
      say_.Say(s.message());
      return Fail(kExitFailure, s.message());
    }
    return std::nullopt;
  }
  // Restarts whose backoff has passed. Once the scheduler has exited nothing is restarted: the
  // scheduler decided the job without the process (its exit is the job's).
  JobEnd StartDueRestarts() {
    while (!pending_.empty() && (!sup_.running(0) || Clock::now() >= pending_.front().at)) {
      const PendingRestart p = pending_.front();
      pending_.erase(pending_.begin());
      if (!sup_.running(0)) {
        say_.Say(sup_.name(p.child) + " is not restarted: the scheduler has exited");
        continue;
      }
      if (JobEnd end = StartRestart(p)) return end;
    }
    return std::nullopt;
  }

  // Every process has exited (and none was a failure that stops the job).
  int Finished() {
    sup_.StopAll(milliseconds(0));  // drains the last output
    const double seconds = std::chrono::duration<double>(Clock::now() - job_start_).count();
    say_.Say(result_.Finished(seconds, ReadStatus(/*force=*/true)));
    return 0;
  }

  // Once the scheduler has exited, the others have finish_grace to follow: *timeout is cut to
  // what is left of it, and at its end the job fails.
  JobEnd AwaitFinishGrace(int* timeout) {
    if (!sup_.running(0) && !finish_deadline_) finish_deadline_ = Clock::now() + o_.finish_grace;
    if (!finish_deadline_) return std::nullopt;
    *timeout = MillisUntil(*finish_deadline_);
    if (*timeout != 0) return std::nullopt;
    std::string left;
    for (size_t i = 0; i < sup_.size(); ++i) {
      if (sup_.running(i)) left += (left.empty() ? "" : ", ") + sup_.name(i);
    }
    say_.Say("scheduler exited 0 but " + left + " still running after " +
             std::to_string(o_.finish_grace.count()) + " ms; stopping them");
    return Fail(kExitFailure, left + " did not finish after the scheduler did");
  }

  const LaunchOptions& o_;
  PrivateDir& dir_;
  const int out_fd_;
  LaunchPlan& plan_;
  Supervisor& sup_;
  Reporter& say_;
  const bool live_;   // a status line redrawn in place
  const bool lines_;  // a progress message every kProgressLineEvery
  const Clock::time_point job_start_;
  JobResult result_;
  std::string status_path_;              // the scheduler's --status_file
  std::optional<pb::JobStatus> status_;  // its last content that parsed
  Clock::time_point next_status_read_;
  std::map<size_t, int> worker_rank_;  // child index -> rank, for workers
  std::map<int, size_t> latest_;       // rank -> child index of its latest process
  std::optional<int> port_;            // the scheduler's, once it said
  Clock::time_point next_progress_line_;
  std::optional<Clock::time_point> finish_deadline_;
  size_t exits_seen_ = 0;
  int restarts_ = 0;
  std::map<size_t, Clock::time_point> started_at_;  // child index -> when it was started
  RestartBackoff backoff_;
  std::vector<PendingRestart> pending_;  // by `at`
};

// Step 1's files: the log directory and the private directory (removed when *dir goes) with,
// unless the user names one, the job token's file for the workers' SIEVE_JOB_TOKEN_FILE.
Status PrepareFiles(const LaunchOptions& o, LaunchPlan* plan, std::unique_ptr<PrivateDir>* dir) {
  if (!o.log_dir.empty()) SIEVE_RETURN_IF_ERROR(MakeDirs(o.log_dir));
  SIEVE_ASSIGN_OR_RETURN(*dir, PrivateDir::Create());
  if (plan->worker_job.job_token_file.empty()) {
    SIEVE_ASSIGN_OR_RETURN(plan->worker_job.job_token_file,
                           (*dir)->Write("job_token", plan->token + "\n"));
  }
  return Status::Ok();
}

}  // namespace

int Launch(const LaunchOptions& o, int out_fd, int err_fd) {
  Reporter say(err_fd);
  auto plan = MakeLaunchPlan(o);
  if (!plan.ok()) {
    say.Say(plan.status().message());
    return plan.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
  }
  std::unique_ptr<PrivateDir> dir;
  if (Status s = PrepareFiles(o, &*plan, &dir); !s.ok()) {
    say.Say(s.message());
    return kExitFailure;
  }
  Supervisor sup({o.log_dir, out_fd, err_fd});
  if (Status s = sup.Init(); !s.ok()) {
    say.Say(s.message());
    return kExitFailure;
  }
  say.set_supervisor(&sup);
  return LaunchedJob(o, out_fd, &*plan, &sup, &say, dir.get()).Run();
}

}  // namespace sieve
