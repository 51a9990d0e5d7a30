#include "deploy/local/launch_plan.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/parse_number.h"
#include "deploy/local/daemon_locator.h"
#include "deploy/local/flag_routing.h"
#include "net/curve.h"

namespace sieve {
namespace {

constexpr std::chrono::milliseconds kHelpXmlTimeout{10000};
// A --worker_cmd asked for its flags may first import torch.
constexpr std::chrono::milliseconds kWorkerCmdHelpXmlTimeout{60000};

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

// A fresh job token: 128 random bits in hex.
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
  const std::optional<int> value = ParseNumber<int>(f.value);
  if (!value || *value < 0 || *value > max) {
    return InvalidArgumentError("--" + f.name + " must be an integer in [0, " +
                                std::to_string(max) + "], got '" + f.value + "'");
  }
  return *value;
}

// The worker flags a --worker_cmd gets (SIEVE_WORKER_FLAGS) of those routed to workers: asks the
// command which flags it implements (QueryWorkerCommandFlags). A flag only sieve-worker defines
// that the command does not implement is a usage error naming it; a flag other daemons define too
// (--v, --model, ...) still reaches them and goes to the command only if it implements it.
// `implemented`: the command's answer (QueryWorkerCommandFlags), asked once by FindDaemons.
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
      listing->append(kLaunchRoles[r].name);
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

// The job's three programs and the flags each defines. With --worker_cmd, the command (its
// program resolved in $PATH) stands in for sieve-worker: asked once which flags it implements
// (when any flag is passed through), its own flags (e.g. a script's --width) are worker flags too.
struct Daemons {
  std::string paths[3];
  DaemonFlags flags[3];
  std::vector<std::string> command_argv;  // empty without --worker_cmd
  StatusOr<DaemonFlags> command_flags = UnavailableError("not asked");
  std::string python_path;  // PythonPathFor(sieve-worker)
};

StatusOr<Daemons> FindDaemons(const LaunchOptions& o) {
  Daemons d;
  for (int r = 0; r < 3; ++r) {
    SIEVE_ASSIGN_OR_RETURN(d.paths[r], FindDaemon(kLaunchRoles[r].program, o.bin_dir));
    SIEVE_ASSIGN_OR_RETURN(d.flags[r], QueryDaemonFlags(d.paths[r], kHelpXmlTimeout));
  }
  d.python_path = PythonPathFor(d.paths[2]);
  d.command_argv = o.worker_cmd;
  if (d.command_argv.empty()) return d;
  SIEVE_ASSIGN_OR_RETURN(d.command_argv[0], ResolveProgram(d.command_argv[0]));
  if (!o.pass_through.empty()) {
    std::vector<std::string> env;
    if (!d.python_path.empty()) env.push_back("PYTHONPATH=" + d.python_path);
    d.command_flags = QueryWorkerCommandFlags(d.command_argv, env, kWorkerCmdHelpXmlTimeout);
    if (d.command_flags.ok()) {
      d.flags[2].types.insert(d.command_flags->types.begin(), d.command_flags->types.end());
    }
  }
  return d;
}

// The pass-through flags the launcher reads itself.
struct LauncherFlags {
  bool has_token = false;               // --job_token or --job_token_file was given
  std::string user_token;               // --job_token
  std::string user_key;                 // --curve_key
  int metrics_port = 0;                 // --metrics_port; 0: none
  std::vector<PassThroughFlag> passed;  // every flag but --metrics_port (given out per daemon)
};

// Reads `parsed` in order: refuses the flags the launcher sets for each process (--scheduler,
// --rank) and gflags' reporting flags (they print and exit), and records in *plan the workers'
// token file, key directory, bind and advertised addresses, and the scheduler's --min_workers;
// refuses a --backup_workers that is not below the job's workers and a --replication that is not
// below its servers.
StatusOr<LauncherFlags> ReadLauncherFlags(const std::vector<PassThroughFlag>& parsed,
                                          const Daemons& d, int num_workers, int num_servers,
                                          LaunchPlan* plan) {
  LauncherFlags seen;
  WorkerJob& job = plan->worker_job;
  for (const PassThroughFlag& f : parsed) {
    seen.has_token = seen.has_token || f.name == "job_token" || f.name == "job_token_file";
    if (f.name == "job_token") seen.user_token = f.value;
    if (f.name == "job_token_file") job.job_token_file = f.value;
    if (f.name == "curve_key") seen.user_key = f.value;
    if (f.name == "curve_dir") job.curve_dir = f.value;
    if (d.flags[2].Defines(f.name) && (f.name == "bind" || f.name == "host")) {
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
    if (f.name == "min_workers" && d.flags[0].Defines(f.name)) {
      SIEVE_ASSIGN_OR_RETURN(plan->min_workers, IntFlag(f, num_workers));
    }
    if (f.name == "replication" && d.flags[0].Defines(f.name)) {
      // Backups live on other servers: refused here, before any process starts.
      auto r = IntFlag(f, num_servers - 1);
      if (!r.ok()) {
        return InvalidArgumentError(r.status().message() + " (--replication=r needs at least " +
                                    "r + 1 servers; the job has " + std::to_string(num_servers) +
                                    ")");
      }
      plan->replication = *r;
    }
    if (f.name == "backup_workers" && d.flags[1].Defines(f.name)) {
      // A round needs at least one push: refused here, before any process starts.
      auto b = IntFlag(f, num_workers - 1);
      if (!b.ok()) {
        return InvalidArgumentError(b.status().message() + " (backup workers must be fewer than " +
                                    "the job's " + std::to_string(num_workers) + " workers)");
      }
    }
    if (f.name == "metrics_port") {
      SIEVE_ASSIGN_OR_RETURN(seen.metrics_port, IntFlag(f, 65535));
      continue;
    }
    seen.passed.push_back(f);
  }
  return seen;
}

// The flags for each role (kLaunchRoles names): --num_workers and --num_servers, then `passed`,
// each to the roles that define it. The scheduler always takes the counts, whether or not its
// --helpxml lists them (added to d->flags[0]).
StatusOr<std::map<std::string, std::vector<std::string>>> RouteToRoles(
    const LaunchOptions& o, const std::vector<PassThroughFlag>& passed, Daemons* d) {
  std::vector<PassThroughFlag> flags = {{"num_workers", std::to_string(o.num_workers)},
                                        {"num_servers", std::to_string(o.num_servers)}};
  flags.insert(flags.end(), passed.begin(), passed.end());
  d->flags[0].types.emplace("num_workers", "int32");
  d->flags[0].types.emplace("num_servers", "int32");
  return RouteFlags(flags, {kLaunchRoles[0].name, kLaunchRoles[1].name, kLaunchRoles[2].name},
                    {&d->flags[0], &d->flags[1], &d->flags[2]});
}

// What the launcher gives every process of one role beside the user's flags routed to it.
struct RoleLaunch {
  std::vector<std::string> program;  // argv before the flags
  const DaemonFlags* flags = nullptr;
  bool argv_as_is = false;          // a --worker_cmd: the user's argv, nothing added
  std::vector<std::string> keys;    // --curve_key per rank; empty: none
  std::vector<int> metrics_ports;   // --metrics_port per rank; empty: none
  std::vector<std::string> routed;  // the user's flags for this role, rendered
};

// The spec of process `rank` of role `r`. --scheduler is filled in by Launch once the port is
// known. `token`: the job token to pass, "" when the user gave one.
ChildSpec ChildFor(int r, int rank, const RoleLaunch& role, int port, const std::string& token) {
  ChildSpec spec;
  const std::string rank_text = std::to_string(rank);
  spec.name = r == 0 ? kLaunchRoles[r].name : std::string(kLaunchRoles[r].name) + " " + rank_text;
  spec.log_name =
      r == 0 ? kLaunchRoles[r].name : std::string(kLaunchRoles[r].name) + "-" + rank_text;
  spec.argv = role.program;
  if (role.argv_as_is) return spec;
  std::vector<std::string>& argv = spec.argv;
  argv.push_back(r == 0 ? "--port=" + std::to_string(port) : "--rank=" + rank_text);
  // A local cluster lives on loopback: bind and advertise 127.0.0.1 unless the user's
  // pass-through flags (which come later on the command line, so they win) say otherwise.
  for (const char* name : {"bind", "host"}) {
    if (role.flags->Defines(name)) argv.push_back(std::string("--") + name + "=127.0.0.1");
  }
  if (!token.empty() && role.flags->Defines("job_token")) argv.push_back("--job_token=" + token);
  if (!role.keys.empty() && role.flags->Defines("curve_key")) {
    argv.push_back("--curve_key=" + role.keys[rank]);
  }
  if (!role.metrics_ports.empty() && role.flags->Defines("metrics_port")) {
    argv.push_back("--metrics_port=" + std::to_string(role.metrics_ports[rank]));
  }
  argv.insert(argv.end(), role.routed.begin(), role.routed.end());
  return spec;
}

}  // namespace

StatusOr<LaunchPlan> MakeLaunchPlan(const LaunchOptions& o) {
  SIEVE_ASSIGN_OR_RETURN(Daemons d, FindDaemons(o));
  std::vector<const DaemonFlags*> daemons = {&d.flags[0], &d.flags[1], &d.flags[2]};
  std::vector<std::string> known;
  for (const DaemonFlags& f : d.flags) {
    for (const auto& [name, type] : f.types) known.push_back(name);
  }
  SIEVE_ASSIGN_OR_RETURN(
      auto parsed, ParsePassThrough(
                       o.pass_through,
                       [&](const std::string& name) { return KindAcross(daemons, name); }, known));
  LaunchPlan plan;
  WorkerJob& job = plan.worker_job;
  job.num_workers = o.num_workers;
  job.num_servers = o.num_servers;
  job.bind = job.host = "127.0.0.1";
  job.python_path = d.python_path;
  SIEVE_ASSIGN_OR_RETURN(LauncherFlags seen,
                         ReadLauncherFlags(parsed, d, o.num_workers, o.num_servers, &plan));

  RoleLaunch roles[3];
  const int counts_per_role[3] = {1, o.num_servers, o.num_workers};
  if (seen.metrics_port > 0) {
    std::vector<int> ports[3];
    SIEVE_RETURN_IF_ERROR(
        MetricsPorts(seen.metrics_port, counts_per_role, ports, &plan.metrics_ports));
    for (int r = 0; r < 3; ++r) roles[r].metrics_ports = ports[r];
    job.metrics_ports = ports[2];
  }
  SIEVE_ASSIGN_OR_RETURN(auto routed, RouteToRoles(o, seen.passed, &d));
  std::vector<PassThroughFlag> to_workers;
  for (const PassThroughFlag& f : seen.passed) {
    if (d.flags[2].Defines(f.name)) to_workers.push_back(f);
  }
  for (const PassThroughFlag& f : to_workers) job.worker_flags.push_back(f.Render());

  // Every job gets its own token unless the user gave one: the same for all its daemons.
  const std::string token = seen.has_token ? std::string() : NewJobToken();
  plan.token = seen.has_token ? seen.user_token : token;
  // A key directory with a key per node (`sieve keygen --servers=S --workers=W`): each server and
  // worker gets its own, named by the rank the launcher gives it, so that the scheduler binds
  // every node id to a key of its own (docs/security.md).
  const bool has_key = !seen.user_key.empty();
  if (!has_key) {
    roles[1].keys = NodeKeyFiles(job.curve_dir, "server", o.num_servers);
    roles[2].keys = NodeKeyFiles(job.curve_dir, "worker", o.num_workers);
  }
  job.curve_keys = has_key ? std::vector<std::string>(o.num_workers, seen.user_key) : roles[2].keys;
  for (int r = 0; r < 3; ++r) {
    roles[r].program = {d.paths[r]};
    roles[r].flags = &d.flags[r];
    roles[r].routed = routed[kLaunchRoles[r].name];
  }
  if (!o.worker_cmd.empty()) {
    // The worker command stands in for sieve-worker: its argv is the user's, the job is in its
    // environment, and the worker flags it implements are in SIEVE_WORKER_FLAGS.
    roles[2].program = d.command_argv;
    roles[2].argv_as_is = true;
    plan.scheduler_on_argv[2] = false;
    if (!to_workers.empty()) {
      SIEVE_ASSIGN_OR_RETURN(
          job.worker_flags,
          WorkerCommandFlags(d.command_flags, JoinShellWords(o.worker_cmd), to_workers, d.flags));
    }
  }
  for (int r = 0; r < 3; ++r) {
    plan.program_words[r] = roles[r].program.size();
    for (int rank = 0; rank < counts_per_role[r]; ++rank) {
      plan.scheduler_servers_workers[r].push_back(ChildFor(r, rank, roles[r], o.port, token));
    }
  }
  return plan;
}

}  // namespace sieve
