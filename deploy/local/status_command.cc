#include "deploy/local/status_command.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/parse_number.h"
#include "deploy/local/http_get.h"
#include "deploy/local/status_query.h"
#include "deploy/local/status_screen.h"
#include "deploy/local/subcommand.h"
#include "proto/job_identity.h"
#include "proto/job_status_text.h"

namespace sieve {
namespace {

constexpr char kUsage[] =
    "usage: sieve status --scheduler=HOST:PORT | --metrics=HOST:PORT | --status_file=PATH\n"
    "                    [--json] [--watch[=SECONDS]] [--timeout_ms=N]\n"
    "\n"
    "Shows a sieve job's status: phase, progress, and a row per server and worker (state,\n"
    "heartbeat age, round, loss, counters). It is asked of the scheduler itself (its --port, the\n"
    "address every node is given as --scheduler), read from its metrics endpoint (GET /v1/job on\n"
    "sieve-scheduler --metrics_port; `sieve launch --metrics_port=P` puts the scheduler's on P) "
    "or\n"
    "from the file sieve-scheduler --status_file writes.\n"
    "\n"
    "  --scheduler=HOST:PORT  the scheduler's address: the answer comes back to a socket of this\n"
    "                         command's own, which the scheduler must be able to reach\n"
    "  --job_token_file=PATH  with --scheduler: the job's token (a job started with one)\n"
    "  --host=HOST            with --scheduler: the address the scheduler answers to (default: "
    "this\n"
    "                         machine's first non-loopback address, or 127.0.0.1)\n"
    "  --metrics=HOST:PORT    the scheduler's metrics address instead\n"
    "  --status_file=PATH     the scheduler's status file instead\n"
    "  --json                 print the status as JSON (the scheduler's own form) instead\n"
    "  --watch[=SECONDS]      print it again every SECONDS (default 1) until the job ends\n"
    "  --timeout_ms=N         bound on one read or query (default 5000)\n"
    "\n"
    "Exit status: 0 shown (with --watch: the job finished), 1 not readable (with --watch: the job\n"
    "failed or its scheduler went away first), 2 usage error.\n";

struct Options {
  std::string scheduler;
  std::string job_token_file;
  std::string host;
  std::string metrics;
  std::string status_file;
  bool json = false;
  std::optional<double> watch;  // seconds between reads
  std::chrono::milliseconds timeout{5000};
};

int Usage(const std::string& message) { return UsageError("status", message, kUsage); }

// Parses args into *o; returns an exit code to end with, or nullopt to go on.
std::optional<int> Parse(const std::vector<std::string>& args, Options* o) {
  for (const std::string& a : args) {
    const auto [name, value] = SplitFlagWord(a);
    if (name == "--help" || name == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (name == "--scheduler" && value && !value->empty()) {
      o->scheduler = *value;
    } else if (name == "--job_token_file" && value && !value->empty()) {
      o->job_token_file = *value;
    } else if (name == "--host" && value && !value->empty()) {
      o->host = *value;
    } else if (name == "--metrics" && value && !value->empty()) {
      o->metrics = *value;
    } else if (name == "--status_file" && value && !value->empty()) {
      o->status_file = *value;
    } else if (name == "--json" && !value) {
      o->json = true;
    } else if (name == "--watch") {
      o->watch = value ? ParseNumber<double>(*value) : std::optional<double>(1.0);
      if (!o->watch || !(*o->watch >= 0.1 && *o->watch <= 3600)) {
        return Usage("--watch takes seconds in [0.1, 3600], got '" + value.value_or("") + "'");
      }
    } else if (name == "--timeout_ms" && value) {
      std::optional<double> ms = ParseNumber<double>(*value);
      if (!ms || !(*ms >= 1 && *ms <= 600000)) {
        return Usage("--timeout_ms takes milliseconds in [1, 600000], got '" + *value + "'");
      }
      o->timeout = std::chrono::milliseconds(static_cast<int64_t>(*ms));
    } else {
      return Usage("unknown or malformed argument '" + a + "'");
    }
  }
  const int sources = !o->scheduler.empty() + !o->metrics.empty() + !o->status_file.empty();
  if (sources != 1) {
    return Usage("give one of --scheduler=HOST:PORT, --metrics=HOST:PORT, --status_file=PATH");
  }
  if (o->scheduler.empty() && (!o->job_token_file.empty() || !o->host.empty())) {
    return Usage("--job_token_file and --host go with --scheduler");
  }
  return std::nullopt;
}

// --scheduler's querier (the job's token read first); nullptr with the exit code in *code.
std::unique_ptr<StatusQuerier> MakeQuerier(const Options& o, int* code) {
  StatusQueryOptions q;
  q.scheduler = o.scheduler;
  q.host = o.host;
  q.timeout = o.timeout;
  if (!o.job_token_file.empty()) {
    auto token = ReadJobTokenFile(o.job_token_file);
    if (!token.ok()) {
      *code = Usage("--job_token_file: " + token.status().ToString());
      return nullptr;
    }
    q.job_token = *token;
  }
  auto querier = StatusQuerier::Create(q);
  if (!querier.ok()) {
    const bool usage = querier.status().code() == StatusCode::kInvalidArgument;
    std::fprintf(stderr, "sieve status: %s\n", querier.status().ToString().c_str());
    *code = usage ? 2 : 1;
    return nullptr;
  }
  return std::move(querier).value();
}

StatusOr<pb::JobStatus> Read(const Options& o, StatusQuerier* querier) {
  if (querier != nullptr) return querier->Query();
  std::string json;
  if (!o.metrics.empty()) {
    SIEVE_ASSIGN_OR_RETURN(json, HttpGet(o.metrics, "/v1/job", o.timeout));
  } else {
    std::ifstream in(o.status_file, std::ios::binary);
    if (!in) return UnavailableError("cannot read " + o.status_file);
    std::ostringstream content;
    content << in.rdbuf();
    json = content.str();
  }
  return JobStatusFromJson(json);
}

size_t TerminalWidth() {
  winsize ws{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1) return ws.ws_col - 1;
  return 0;
}

void Show(const Options& o, const pb::JobStatus& st, bool redraw) {
  std::string text = o.json ? JobStatusToJson(st) + "\n" : StatusScreen(st, TerminalWidth());
  if (redraw) text = "\033[H\033[J" + text;  // home, clear: the screen is drawn in place
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

bool Ended(const pb::JobStatus& st) {
  return st.phase() == pb::JOB_FINISHED || st.phase() == pb::JOB_FAILED;
}

}  // namespace

int RunStatus(const std::vector<std::string>& args) {
  Options o;
  if (std::optional<int> code = Parse(args, &o)) return *code;
  const bool redraw = o.watch && !o.json && isatty(STDOUT_FILENO) != 0;
  std::unique_ptr<StatusQuerier> querier;
  if (!o.scheduler.empty()) {
    int code = 0;
    querier = MakeQuerier(o, &code);
    if (querier == nullptr) return code;
  }
  std::optional<pb::JobStatus> last;
  for (;;) {
    StatusOr<pb::JobStatus> st = Read(o, querier.get());
    if (!st.ok()) {
      if (!last) {
        std::fprintf(stderr, "sieve status: %s\n", st.status().ToString().c_str());
        return 1;
      }
      std::fprintf(stderr, "sieve status: the job's status is gone before its end (%s)\n",
                   st.status().ToString().c_str());
      return 1;
    }
    Show(o, *st, redraw);
    last = std::move(st).value();
    if (!o.watch) return 0;
    if (Ended(*last)) return last->phase() == pb::JOB_FINISHED ? 0 : 1;
    std::this_thread::sleep_for(std::chrono::duration<double>(*o.watch));
  }
}

}  // namespace sieve
