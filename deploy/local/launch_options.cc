#include "deploy/local/launch_options.h"

#include <functional>
#include <map>
#include <optional>
#include <string_view>

#include "base/parse_number.h"

namespace sieve {

const char kLaunchUsage[] =
    R"(usage: sieve launch [launcher flags] [--] [daemon flags...]

Starts a local cluster: sieve-scheduler, then S sieve-server and W sieve-worker processes
(each with --scheduler=127.0.0.1:PORT --rank=i). Their output is printed line by line with a
[scheduler], [server i] or [worker i] prefix; the workers' progress lines are summed up in one
job progress line instead (epoch, round, loss, rounds/s, bytes pushed, ETA; while the job forms,
who is still missing). If a process fails, all others are stopped and the launcher exits
non-zero naming it, unless --max_restarts allows restarting it, or, for a worker, the
scheduler's --min_workers=M accepts the loss ("lost worker 1": the job goes on and the
scheduler decides it), or, for a server, the scheduler's --replication=R gives its shards
copies ("lost server 0 ...; its shards fail over to their backups": the job goes on). Ctrl-C (or SIGTERM) stops everything. The daemons die with the launcher,
even when it is killed with SIGKILL. The last line is the job's result:
  sieve launch: job finished: test_acc=0.8512 rounds=1875 time=21.3s pushed=12.3MB workers=4/4
or "sieve launch: job FAILED: <which process, how>" with a non-zero exit.

Every worker (sieve-worker or --worker_cmd) gets the job in its environment: SIEVE_SCHEDULER,
SIEVE_RANK, SIEVE_NUM_WORKERS, SIEVE_NUM_SERVERS, SIEVE_BIND, SIEVE_HOST, SIEVE_JOB_TOKEN_FILE
(a 0600 file, removed at exit), SIEVE_CURVE_DIR and SIEVE_CURVE_KEY (CURVE), SIEVE_METRICS_PORT
(--metrics_port) and SIEVE_WORKER_FLAGS (docs/worker-api.md, "Environment variables").

Launcher flags:
  --num_servers=S          servers to start (default 1)
  --num_workers=W          workers to start (default 1); both also go to the scheduler
  --port=P                 scheduler port; 0 lets the scheduler pick (default 0)
  --bin_dir=DIR            the only place to look for the daemons (default: next to
                           sieve, ../scheduler, ../server, ../worker, then PATH)
  --log_dir=DIR            also write each process's output to DIR/<role>-<rank>.log
  --listen_timeout_ms=N    wait for the scheduler's port file (default 30000)
  --finish_grace_ms=N      once the scheduler exits 0, how long the others may take
                           (default 10000)
  --stop_timeout_ms=N      SIGTERM to SIGKILL interval when stopping (default 5000)
  --max_restarts=N         restart a server or worker that dies abnormally (non-zero exit or
                           signal) while the scheduler runs, at most N times in all (default
                           0: the job stops). A server restarts under its --rank when it has
                           --checkpoint_dir (it restores its shard from there; without one the
                           job stops), or in a job with --replication (it is rebuilt from its
                           shards' copies); a worker restarts under its --rank and rejoins the
                           running job. The scheduler is not restarted. A process that
                           failed within 10 s of its start is restarted after 0.5 s, then 1,
                           2, 4, up to 8 s for each such failure in a row.
  --worker_cmd=CMD         run CMD (split into words like a shell, no expansions) as each
                           worker instead of sieve-worker, e.g.
                           --worker_cmd="/usr/bin/python3 mlp.py". Its argv is CMD's words
                           only; the job is in the SIEVE_* variables above, added to the
                           launcher's environment
                           (PYTHONPATH included). With worker flags (those sieve-worker's
                           --helpxml lists), CMD is first run once with SIEVE_HELPXML=1 and
                           must print the flags it implements as gflags --helpxml XML and
                           exit 0 (sieve.torch.init() does); they reach it in
                           SIEVE_WORKER_FLAGS, and a sieve-worker-only flag it does not
                           implement is a usage error before anything starts
  --progress=MODE          the job's progress: auto (a live line when stdout is a terminal,
                           else a line every 10 s), live (or bar), lines (or log), off
                           (default auto). The workers' own --progress is reachable after --

The launcher's own flags are never passed through (so glog's --log_dir of the daemons is
not reachable from here); --scheduler and --rank are set per process. --metrics_port=P gives
each daemon its own port: the scheduler P, servers P+1..P+S, workers P+S+1..P+S+W (printed).

Daemon flags: every other flag (--name=value, --name value, --name, --noname) goes to exactly
the daemons that define it (as listed by their --helpxml); a flag no daemon defines is an error.
--flagfile=FILE is read here, one --name=value a line: every line is checked and routed alike.
Every worker gets the same flags; a per-worker setting names its ranks inside its value, e.g.
--straggler=3:x3 (worker 3 computes 3x slower, the others are unchanged).

Exit status: 0 when the job finished (every process exited 0, workers let go under
--min_workers aside); 1 when it failed; 2 for usage errors, and when a daemon exits 2 (its own
usage error, e.g. a bad flag value); 130/143 when interrupted by SIGINT/SIGTERM.
)";

namespace {

Status ParseInt(const std::string& name, std::string_view text, long min, long max, long* out) {
  const std::optional<long> value = ParseNumber<long>(text);
  if (!value || *value < min || *value > max) {
    return InvalidArgumentError("--" + name + " must be an integer in [" + std::to_string(min) +
                                ", " + std::to_string(max) + "], got '" + std::string(text) + "'");
  }
  *out = *value;
  return Status::Ok();
}

}  // namespace

StatusOr<LaunchOptions> ParseLaunchArgs(const std::vector<std::string>& args) {
  LaunchOptions o;
  auto set_int = [](int* field, long min, long max) {
    return [=](const std::string& name, std::string_view v) {
      long x = 0;
      SIEVE_RETURN_IF_ERROR(ParseInt(name, v, min, max, &x));
      *field = static_cast<int>(x);
      return Status::Ok();
    };
  };
  auto set_ms = [](std::chrono::milliseconds* field) {
    return [=](const std::string& name, std::string_view v) {
      long x = 0;
      SIEVE_RETURN_IF_ERROR(ParseInt(name, v, 0, 24L * 3600 * 1000, &x));
      *field = std::chrono::milliseconds(x);
      return Status::Ok();
    };
  };
  auto set_str = [](std::string* field) {
    return [=](const std::string& name, std::string_view v) {
      if (v.empty()) return InvalidArgumentError("--" + name + " must not be empty");
      *field = std::string(v);
      return Status::Ok();
    };
  };
  const std::map<std::string, std::function<Status(const std::string&, std::string_view)>> own = {
      {"num_servers", set_int(&o.num_servers, 1, 4096)},
      {"num_workers", set_int(&o.num_workers, 1, 4096)},
      {"port", set_int(&o.port, 0, 65535)},
      {"bin_dir", set_str(&o.bin_dir)},
      {"log_dir", set_str(&o.log_dir)},
      {"listen_timeout_ms", set_ms(&o.listen_timeout)},
      {"finish_grace_ms", set_ms(&o.finish_grace)},
      {"stop_timeout_ms", set_ms(&o.stop_timeout)},
      {"max_restarts", set_int(&o.max_restarts, 0, 1000000)},
      {"worker_cmd",
       [&o](const std::string& name, std::string_view v) {
         auto words = SplitCommandWords(v);
         if (!words.ok())
           return InvalidArgumentError("--" + name + ": " + words.status().message());
         o.worker_cmd = std::move(*words);
         return Status::Ok();
       }},
      {"progress",
       [&o](const std::string& name, std::string_view v) {
         using P = LaunchOptions::Progress;
         const std::map<std::string_view, P> modes = {{"auto", P::kAuto}, {"live", P::kLive},
                                                      {"bar", P::kLive},  {"lines", P::kLines},
                                                      {"log", P::kLines}, {"off", P::kOff}};
         auto it = modes.find(v);
         if (it == modes.end()) {
           return InvalidArgumentError("--" + name +
                                       " must be auto, live, bar, lines, log or off, got '" +
                                       std::string(v) + "'");
         }
         o.progress = it->second;
         return Status::Ok();
       }},
  };

  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == "--") {
      o.pass_through.insert(o.pass_through.end(), args.begin() + i + 1, args.end());
      break;
    }
    if (word == "--help" || word == "-h" || word == "-help") {
      o.help = true;
      return o;
    }
    std::string_view body = word;
    if (body.starts_with("--")) {
      body.remove_prefix(2);
    } else if (body.starts_with("-")) {
      body.remove_prefix(1);
    }
    size_t eq = body.find('=');
    auto it = own.find(std::string(body.substr(0, eq)));
    if (body.size() == word.size() || it == own.end()) {
      o.pass_through.push_back(word);
      continue;
    }
    std::string_view value;
    if (eq != std::string_view::npos) {
      value = body.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return InvalidArgumentError("--" + it->first + " needs a value");
    }
    SIEVE_RETURN_IF_ERROR(it->second(it->first, value));
  }
  return o;
}

}  // namespace sieve
