#include "deploy/local/launcher.h"

#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/progress_line.h"
#include "deploy/local/child_process.h"
#include "deploy/local/daemon_locator.h"
#include "deploy/local/flag_routing.h"
#include "deploy/local/job_progress.h"
#include "deploy/local/job_result.h"
#include "deploy/local/private_file.h"
#include "deploy/local/supervisor.h"
#include "deploy/local/worker_env.h"
#include "net/curve.h"

namespace sieve {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr milliseconds kHelpXmlTimeout{10000};
// A --worker_cmd asked for its flags may first import torch.
constexpr milliseconds kWorkerCmdHelpXmlTimeout{60000};
constexpr milliseconds kIdlePoll{1000};
// How often --progress=lines prints the job's progress.
constexpr std::chrono::seconds kProgressLineEvery{10};
const char kListeningMarker[] = "sieve-scheduler listening on ";

struct Role {
  const char* name;     // "server": used in prefixes, log names and routing
  const char* program;  // "sieve-server"
};
constexpr Role kRoles[] = {
    {"scheduler", "sieve-scheduler"}, {"server", "sieve-server"}, {"worker", "sieve-worker"}};

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

// The port in "...sieve-scheduler listening on HOST:PORT", or nullopt.
std::optional<int> ListeningPort(std::string_view line) {
  size_t at = line.find(kListeningMarker);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view address = line.substr(at + sizeof(kListeningMarker) - 1);
  while (!address.empty() && (address.back() == ' ' || address.back() == '\r')) {
    address.remove_suffix(1);
  }
  size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  std::string_view digits = address.substr(colon + 1);
  int port = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (ec != std::errc() || end != digits.data() + digits.size() || port <= 0 || port > 65535) {
    return std::nullopt;
  }
  return port;
}

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

// Command lines of every process, or a usage error.
struct Plan {
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
  std::string metrics_ports;  // "scheduler :P, server 0 :P+1, ..." with --metrics_port
};

// `word` when it names a path (has a '/'), else the first executable file of that name in $PATH
// (execve does not search it). Errors: InvalidArgument naming the program.
StatusOr<std::string> ResolveProgram(const std::string& word) {
  if (word.find('/') != std::string::npos) {
    if (access(word.c_str(), X_OK) != 0) {
      return InvalidArgumentError("--worker_cmd: cannot execute " + word + ": " +
                                  std::strerror(errno));
    }
    return word;
  }
  const char* path = std::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "/usr/bin:/bin";
  while (true) {
    const size_t colon = dirs.find(':');
    std::string_view dir = dirs.substr(0, colon);
    if (dir.empty()) dir = ".";
    std::string candidate;
    candidate.append(dir).append(1, '/').append(word);
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    if (colon == std::string_view::npos) break;
    dirs.remove_prefix(colon + 1);
  }
  return InvalidArgumentError("--worker_cmd: program '" + word + "' not found in PATH");
}

// A fresh job token (docs/security.md): 128 random bits as 32 hex digits, so that two jobs
// launched on one machine or network never take each other's messages.
std::string NewJobToken() {
  std::random_device rd;
  std::string token;
  for (int i = 0; i < 4; ++i) {
    char word[9];
    std::snprintf(word, sizeof(word), "%08x", static_cast<unsigned>(rd()));
    token += word;
  }
  return token;
}

// DIR/<role>-0.key .. DIR/<role>-<n-1>.key when all of them exist, else none.
std::vector<std::string> NodeKeyFiles(const std::string& dir, const std::string& role, int n) {
  std::vector<std::string> files;
  if (dir.empty()) return files;
  for (int i = 0; i < n; ++i) {
    files.push_back(dir + "/" + NodeKeyName(role, i));
    struct stat st {};
    if (stat(files.back().c_str(), &st) != 0) return {};
  }
  return files;
}

// A non-negative integer flag value, or a usage error naming the flag.
StatusOr<int> IntFlag(const PassThroughFlag& f, int max) {
  int value = 0;
  auto [end, ec] = std::from_chars(f.value.data(), f.value.data() + f.value.size(), value);
  if (ec != std::errc() || end != f.value.data() + f.value.size() || value < 0 || value > max) {
    return InvalidArgumentError("--" + f.name + " must be an integer in [0, " +
                                std::to_string(max) + "], got '" + f.value + "'");
  }
  return value;
}

// The worker flags a --worker_cmd gets (SIEVE_WORKER_FLAGS) of those routed to workers: asks the
// command which flags it implements (QueryWorkerCommandFlags). A flag only sieve-worker defines
// that the command does not implement is a usage error naming it; a flag other daemons define too
// (--v, --model, ...) still reaches them and goes to the command only if it implements it.
// `implemented`: the command's answer (QueryWorkerCommandFlags), asked once by MakePlan.
StatusOr<std::vector<std::string>> WorkerCommandFlags(const StatusOr<DaemonFlags>& implemented,
                                                      const std::string& shown,
                                                      const std::vector<PassThroughFlag>& routed,
                                                      const DaemonFlags daemon_flags[3]) {
  std::vector<std::string> only_sieve_worker;  // --name of flags no other daemon takes
  for (const PassThroughFlag& f : routed) {
    if (!daemon_flags[0].Defines(f.name) && !daemon_flags[1].Defines(f.name)) {
      only_sieve_worker.push_back("--" + f.name);
    }
  }
  auto join = [](const std::vector<std::string>& names) {
    std::string text;
    for (const std::string& n : names) text += (text.empty() ? "" : ", ") + n;
    return text;
  };
  if (!implemented.ok()) {
    if (only_sieve_worker.empty()) return std::vector<std::string>();
    return InvalidArgumentError(
        "cannot pass " + join(only_sieve_worker) + " to the worker command '" + shown +
        "': asked which worker flags it implements, " + implemented.status().message() +
        " (a worker command takes worker flags only when it calls sieve.torch.init() or "
        "sieve.worker.parse_flags(), which answer SIEVE_HELPXML=1)");
  }
  std::vector<std::string> missing, flags;
  for (const PassThroughFlag& f : routed) {
    if (implemented->Defines(f.name)) {
      flags.push_back(f.Render());
    } else if (!daemon_flags[0].Defines(f.name) && !daemon_flags[1].Defines(f.name)) {
      missing.push_back("--" + f.name);
    }
  }
  if (!missing.empty()) {
    return InvalidArgumentError(join(missing) + (missing.size() == 1 ? " is" : " are") +
                                " not implemented by the worker command '" + shown + "'");
  }
  return flags;
}

// --metrics_port=`base` given out one port per daemon: the scheduler `base`, servers base+1..,
// workers after them (`counts`: 1, S, W); `listing` says so ("scheduler :P, server 0 :P+1, ...").
// A port past 65535 is a usage error.
Status MetricsPorts(int base, const int counts[3], std::vector<int> ports[3],
                    std::string* listing) {
  const int last = base + counts[1] + counts[2];
  if (last > 65535) {
    return InvalidArgumentError("--metrics_port=" + std::to_string(base) + " gives " +
                                std::to_string(1 + counts[1] + counts[2]) +
                                " daemons ports up to " + std::to_string(last) + ", above 65535");
  }
  int next = base;
  for (int r = 0; r < 3; ++r) {
    for (int rank = 0; rank < counts[r]; ++rank) {
      ports[r].push_back(next++);
      if (!listing->empty()) listing->append(", ");
      listing->append(kRoles[r].name);
      if (r != 0) listing->append(" ").append(std::to_string(rank));
      listing->append(" :").append(std::to_string(ports[r].back()));
    }
  }
  return Status::Ok();
}

// The PYTHONPATH that puts the Python module built beside `worker_program` (build/worker/python
// next to build/worker/sieve-worker) first; "" when there is none there.
std::string PythonPathFor(const std::string& worker_program) {
  const size_t slash = worker_program.rfind('/');
  const std::string dir =
      (slash == std::string::npos ? std::string(".") : worker_program.substr(0, slash)) + "/python";
  struct stat st {};
  if (stat((dir + "/sieve/__init__.py").c_str(), &st) != 0) return "";
  const char* inherited = std::getenv("PYTHONPATH");
  return inherited != nullptr && *inherited != '\0' ? dir + ":" + inherited : dir;
}

StatusOr<Plan> MakePlan(const LaunchOptions& o) {
  std::string paths[3];
  DaemonFlags flags[3];
  for (int r = 0; r < 3; ++r) {
    SIEVE_ASSIGN_OR_RETURN(auto path, FindDaemon(kRoles[r].program, o.bin_dir));
    paths[r] = path;
    SIEVE_ASSIGN_OR_RETURN(auto f, QueryDaemonFlags(paths[r], kHelpXmlTimeout));
    flags[r] = f;
  }
  // A --worker_cmd stands in for sieve-worker: asked once which flags it implements (when any
  // flag is passed through), its own flags (e.g. a script's --width) are worker flags too.
  std::vector<std::string> command_argv = o.worker_cmd;
  StatusOr<DaemonFlags> command_flags = UnavailableError("not asked");
  const std::string python_path = PythonPathFor(paths[2]);
  if (!command_argv.empty()) {
    SIEVE_ASSIGN_OR_RETURN(command_argv[0], ResolveProgram(command_argv[0]));
    if (!o.pass_through.empty()) {
      std::vector<std::string> env;
      if (!python_path.empty()) env.push_back("PYTHONPATH=" + python_path);
      command_flags = QueryWorkerCommandFlags(command_argv, env, kWorkerCmdHelpXmlTimeout);
      if (command_flags.ok())
        flags[2].types.insert(command_flags->types.begin(), command_flags->types.end());
    }
  }
  std::vector<const DaemonFlags*> daemons = {&flags[0], &flags[1], &flags[2]};
  std::vector<std::string> known;
  for (const DaemonFlags& d : flags) {
    for (const auto& [name, type] : d.types) known.push_back(name);
  }
  auto parsed = ParsePassThrough(
      o.pass_through, [&](const std::string& name) { return KindAcross(daemons, name); }, known);
  if (!parsed.ok()) return parsed.status();
  Plan plan;
  WorkerJob& job = plan.worker_job;
  job.num_workers = o.num_workers;
  job.num_servers = o.num_servers;
  job.bind = job.host = "127.0.0.1";
  job.python_path = python_path;
  bool has_token = false;
  std::string user_token, user_key;
  int metrics_port = 0;
  std::vector<PassThroughFlag> passed;  // every flag but --metrics_port (given out per daemon)
  for (const PassThroughFlag& f : *parsed) {
    has_token = has_token || f.name == "job_token" || f.name == "job_token_file";
    if (f.name == "job_token") user_token = f.value;
    if (f.name == "job_token_file") job.job_token_file = f.value;
    if (f.name == "curve_key") user_key = f.value;
    if (f.name == "curve_dir") job.curve_dir = f.value;
    if (flags[2].Defines(f.name) && (f.name == "bind" || f.name == "host")) {
      (f.name == "bind" ? job.bind : job.host) = f.value;
    }
    if (f.name == "scheduler" || f.name == "rank") {
      return InvalidArgumentError("--" + f.name + " is set by the launcher for each process");
    }
    // gflags' reporting flags (--help, --helpxml, --helpon, ..., --version) print and exit.
    if (f.name.starts_with("help") || f.name == "version") {
      return InvalidArgumentError("--" + f.name +
                                  " cannot be passed through (run a daemon with it, " +
                                  "e.g. sieve-worker --" + f.name + ")");
    }
    if (f.name == "min_workers" && flags[0].Defines(f.name)) {
      SIEVE_ASSIGN_OR_RETURN(plan.min_workers, IntFlag(f, o.num_workers));
    }
    if (f.name == "metrics_port") {
      SIEVE_ASSIGN_OR_RETURN(metrics_port, IntFlag(f, 65535));
      continue;
    }
    passed.push_back(f);
  }
  const int counts_per_role[3] = {1, o.num_servers, o.num_workers};
  std::vector<int> ports[3];
  if (metrics_port > 0) {
    SIEVE_RETURN_IF_ERROR(MetricsPorts(metrics_port, counts_per_role, ports, &plan.metrics_ports));
    job.metrics_ports = ports[2];
  }
  std::vector<PassThroughFlag> counts = {{"num_workers", std::to_string(o.num_workers)},
                                         {"num_servers", std::to_string(o.num_servers)}};
  counts.insert(counts.end(), passed.begin(), passed.end());
  // The scheduler always takes the counts, whether or not its --helpxml lists them.
  flags[0].types.emplace("num_workers", "int32");
  flags[0].types.emplace("num_servers", "int32");
  SIEVE_ASSIGN_OR_RETURN(
      auto routed, RouteFlags(counts, {kRoles[0].name, kRoles[1].name, kRoles[2].name}, daemons));
  std::vector<PassThroughFlag> to_workers;
  for (const PassThroughFlag& f : passed) {
    if (flags[2].Defines(f.name)) to_workers.push_back(f);
  }
  for (const PassThroughFlag& f : to_workers) job.worker_flags.push_back(f.Render());

  // Every job gets its own token unless the user gave one: the same for all its daemons.
  const std::string token = has_token ? std::string() : NewJobToken();
  plan.token = has_token ? user_token : token;
  // A key directory with a key per node (`sieve keygen --servers=S --workers=W`): each server and
  // worker gets its own, named by the rank the launcher gives it, so that the scheduler binds
  // every node id to a key of its own (docs/security.md).
  const bool has_key = !user_key.empty();
  const std::vector<std::string> node_keys[3] = {
      {},
      has_key ? std::vector<std::string>() : NodeKeyFiles(job.curve_dir, "server", o.num_servers),
      has_key ? std::vector<std::string>() : NodeKeyFiles(job.curve_dir, "worker", o.num_workers)};
  job.curve_keys = has_key ? std::vector<std::string>(o.num_workers, user_key) : node_keys[2];
  std::vector<std::string> programs[3] = {{paths[0]}, {paths[1]}, {paths[2]}};
  const bool command = !o.worker_cmd.empty();
  if (command) {
    // The worker command stands in for sieve-worker: its argv is the user's, the job is in its
    // environment, and the worker flags it implements are in SIEVE_WORKER_FLAGS.
    programs[2] = command_argv;
    plan.scheduler_on_argv[2] = false;
    if (!to_workers.empty()) {
      SIEVE_ASSIGN_OR_RETURN(
          job.worker_flags,
          WorkerCommandFlags(command_flags, JoinShellWords(o.worker_cmd), to_workers, flags));
    }
  }
  for (int r = 0; r < 3; ++r) plan.program_words[r] = programs[r].size();
  for (int r = 0; r < 3; ++r) {
    for (int rank = 0; rank < counts_per_role[r]; ++rank) {
      ChildSpec spec;
      spec.name =
          r == 0 ? kRoles[r].name : std::string(kRoles[r].name) + " " + std::to_string(rank);
      spec.log_name =
          r == 0 ? kRoles[r].name : std::string(kRoles[r].name) + "-" + std::to_string(rank);
      spec.argv = programs[r];
      plan.scheduler_servers_workers[r].push_back(spec);
      if (r == 2 && command) continue;  // the user's argv, exactly
      std::vector<std::string>& argv = plan.scheduler_servers_workers[r].back().argv;
      // --scheduler is filled in once the port is known.
      if (r == 0) {
        argv.push_back("--port=" + std::to_string(o.port));
      } else {
        argv.push_back("--rank=" + std::to_string(rank));
      }
      // A local cluster lives on loopback: bind and advertise 127.0.0.1 unless the user's
      // pass-through flags (which come later on the command line, so they win) say otherwise.
      for (const char* name : {"bind", "host"}) {
        if (flags[r].Defines(name)) argv.push_back(std::string("--") + name + "=127.0.0.1");
      }
      if (!token.empty() && flags[r].Defines("job_token")) argv.push_back("--job_token=" + token);
      if (!node_keys[r].empty() && flags[r].Defines("curve_key")) {
        argv.push_back("--curve_key=" + node_keys[r][rank]);
      }
      if (!ports[r].empty() && flags[r].Defines("metrics_port")) {
        argv.push_back("--metrics_port=" + std::to_string(ports[r][rank]));
      }
      const auto& mine = routed[kRoles[r].name];
      argv.insert(argv.end(), mine.begin(), mine.end());
    }
  }
  return plan;
}

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
  LaunchedJob(const LaunchOptions& o, int out_fd, Plan* plan, Supervisor* sup, Reporter* say)
      : o_(o),
        out_fd_(out_fd),
        plan_(*plan),
        sup_(*sup),
        say_(*say),
        live_(o.progress == Progress::kLive ||
              (o.progress == Progress::kAuto && isatty(out_fd) != 0)),
        lines_(o.progress == Progress::kLines || (o.progress == Progress::kAuto && !live_)),
        job_start_(Clock::now()),
        progress_(o.num_servers, o.num_workers),
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

  // The scheduler's lines give its port and feed the progress and the result; a worker's
  // progress lines are shown as the job's progress instead of relayed (unless progress is off).
  void ObserveLines() {
    sup_.set_line_observer([this](size_t child, bool is_stderr, std::string_view line) {
      if (child == 0) {
        if (!is_stderr && !port_) port_ = ListeningPort(line);
        progress_.SchedulerLine(line);
        result_.SchedulerLine(line);
        return true;
      }
      auto worker = worker_rank_.find(child);
      if (worker == worker_rank_.end() || is_stderr) return true;
      result_.WorkerLine(child, line);
      if (o_.progress == Progress::kOff) return true;
      auto point = ParseProgressLine(line);
      if (!point) return true;
      progress_.WorkerProgress(worker->second, *point, Clock::now());
      return false;  // shown as the job's progress instead
    });
  }

  Status Start(const ChildSpec& spec, int rank_if_worker) {
    SIEVE_ASSIGN_OR_RETURN(auto index, sup_.Start(spec));
    if (rank_if_worker >= 0) {
      worker_rank_[index] = rank_if_worker;
      latest_[rank_if_worker] = index;
      result_.WorkerStarted(index, rank_if_worker);
    }
    return Status::Ok();
  }

  void ShowProgress() {
    std::string text = progress_.Text();
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
    say_.Say(result_.Failed(reason));
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
    if (auto s = sup_.Start(plan_.scheduler_servers_workers[0][0]); !s.ok()) {
      say_.Say(s.status().message());
      return Fail(kExitFailure, "the scheduler could not be started");
    }
    const auto listen_deadline = Clock::now() + o_.listen_timeout;
    while (!port_) {
      if (Interrupted()) return Interrupt();
      if (!sup_.running(0)) {
        const std::string how =
            "scheduler " + DescribeWaitStatus(sup_.wait_status(0)) + " before reporting its port";
        say_.Say(how);
        return Fail(FailureCode(sup_.wait_status(0)), how);
      }
      int left = MillisUntil(listen_deadline);
      if (left == 0) {
        say_.Say("scheduler did not print \"" + std::string(kListeningMarker) +
                 "HOST:PORT\" within " + std::to_string(o_.listen_timeout.count()) + " ms");
        return Fail(kExitFailure, "the scheduler did not report its port");
      }
      sup_.Pump(milliseconds(left));
    }
    const std::string scheduler_address = "127.0.0.1:" + std::to_string(*port_);
    progress_.set_scheduler_address(scheduler_address);
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
      if (!sup_.AnyRunning()) return Finished();
      int timeout = static_cast<int>(kIdlePoll.count());
      if (JobEnd end = AwaitFinishGrace(&timeout)) return *end;
      sup_.Pump(milliseconds(timeout));
      ShowProgress();
    }
  }

  // Workers whose latest process runs or exited 0: those the job can still finish with.
  int WorkersLeft() const {
    int left = 0;
    for (const auto& [rank, index] : latest_)
      left += sup_.running(index) || !Failed(sup_.wait_status(index));
    return left;
  }

  // Child i exited: a failed server or worker is restarted while the job runs and restarts are
  // left; a worker the scheduler's --min_workers can do without is let go; any other failure
  // stops the job.
  JobEnd HandleExit(size_t i) {
    const int status = sup_.wait_status(i);
    auto rank = worker_rank_.find(i);
    const bool worker = rank != worker_rank_.end();
    if (worker) result_.WorkerExited(i, !Failed(status));
    if (!Failed(status)) return std::nullopt;
    if (i == 0) {
      ReportFailure(i);
      if (o_.max_restarts > 0) say_.Say("the scheduler cannot be restarted; the job is lost");
      return Fail(FailureCode(status), Failure(i));
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

  // The same command line again (rank_if_worker: the worker's rank, -1 for a server).
  JobEnd Restart(size_t i, int status, int rank_if_worker) {
    ++restarts_;
    say_.Say("restarting " + sup_.name(i) + " (" + DescribeWaitStatus(status) + "), restart " +
             std::to_string(restarts_) + " of " + std::to_string(o_.max_restarts));
    if (Status s = Start(sup_.spec(i), rank_if_worker); !s.ok()) {
      say_.Say(s.message());
      return Fail(kExitFailure, s.message());
    }
    return std::nullopt;
  }

  // Every process has exited (and none was a failure that stops the job).
  int Finished() {
    sup_.StopAll(milliseconds(0));  // drains the last output
    const double seconds = std::chrono::duration<double>(Clock::now() - job_start_).count();
    say_.Say(result_.Finished(seconds));
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
  const int out_fd_;
  Plan& plan_;
  Supervisor& sup_;
  Reporter& say_;
  const bool live_;   // a status line redrawn in place
  const bool lines_;  // a progress message every kProgressLineEvery
  const Clock::time_point job_start_;
  JobProgress progress_;
  JobResult result_;
  std::map<size_t, int> worker_rank_;  // child index -> rank, for workers
  std::map<int, size_t> latest_;       // rank -> child index of its latest process
  std::optional<int> port_;            // the scheduler's, once it said
  Clock::time_point next_progress_line_;
  std::optional<Clock::time_point> finish_deadline_;
  size_t exits_seen_ = 0;
  int restarts_ = 0;
};

// Step 1's files: the log directory and, unless the user names one, the private file with the job
// token for the workers' SIEVE_JOB_TOKEN_FILE (removed when *token_file goes).
Status PrepareFiles(const LaunchOptions& o, Plan* plan, std::unique_ptr<PrivateFile>* token_file) {
  if (!o.log_dir.empty()) SIEVE_RETURN_IF_ERROR(MakeDirs(o.log_dir));
  if (plan->worker_job.job_token_file.empty()) {
    SIEVE_ASSIGN_OR_RETURN(*token_file, PrivateFile::Create("job_token", plan->token + "\n"));
    plan->worker_job.job_token_file = (*token_file)->path();
  }
  return Status::Ok();
}

}  // namespace

int Launch(const LaunchOptions& o, int out_fd, int err_fd) {
  Reporter say(err_fd);
  auto plan = MakePlan(o);
  if (!plan.ok()) {
    say.Say(plan.status().message());
    return plan.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
  }
  std::unique_ptr<PrivateFile> token_file;
  if (Status s = PrepareFiles(o, &*plan, &token_file); !s.ok()) {
    say.Say(s.message());
    return kExitFailure;
  }
  Supervisor sup({o.log_dir, out_fd, err_fd});
  if (Status s = sup.Init(); !s.ok()) {
    say.Say(s.message());
    return kExitFailure;
  }
  say.set_supervisor(&sup);
  return LaunchedJob(o, out_fd, &*plan, &sup, &say).Run();
}

}  // namespace sieve
