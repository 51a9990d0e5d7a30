#include "deploy/local/status_command.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "deploy/local/http_get.h"
#include "deploy/local/status_screen.h"
#include "proto/job_status_text.h"

namespace sieve {
namespace {

constexpr char kUsage[] =
    "usage: sieve status --metrics=HOST:PORT | --status_file=PATH [--json] [--watch[=SECONDS]]\n"
    "                    [--timeout_ms=N]\n"
    "\n"
    "Shows a sieve job's status: phase, progress, and a row per server and worker (state,\n"
    "heartbeat age, round, loss, counters). It is read from the scheduler's metrics endpoint\n"
    "(GET /v1/job on sieve-scheduler --metrics_port; `sieve launch --metrics_port=P` puts the\n"
    "scheduler's on P) or from the file sieve-scheduler --status_file writes.\n"
    "\n"
    "  --metrics=HOST:PORT    the scheduler's metrics address\n"
    "  --status_file=PATH     the scheduler's status file instead\n"
    "  --json                 print the status as JSON (the scheduler's own form) instead\n"
    "  --watch[=SECONDS]      print it again every SECONDS (default 1) until the job ends\n"
    "  --timeout_ms=N         bound on one read of the endpoint (default 5000)\n"
    "\n"
    "Exit status: 0 shown (with --watch: the job finished), 1 not readable (with --watch: the job\n"
    "failed or its scheduler went away first), 2 usage error.\n";

struct Options {
  std::string metrics;
  std::string status_file;
  bool json = false;
  std::optional<double> watch;  // seconds between reads
  std::chrono::milliseconds timeout{5000};
};

int Usage(const std::string& message) {
  std::fprintf(stderr, "sieve status: %s\n%s", message.c_str(), kUsage);
  return 2;
}

std::optional<double> ParseNumber(std::string_view text) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// Parses args into *o; returns an exit code to end with, or nullopt to go on.
std::optional<int> Parse(const std::vector<std::string>& args, Options* o) {
  for (const std::string& a : args) {
    const size_t eq = a.find('=');
    const std::string name = a.substr(0, eq);
    const std::optional<std::string> value =
        eq == std::string::npos ? std::nullopt : std::optional<std::string>(a.substr(eq + 1));
    if (name == "--help" || name == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (name == "--metrics" && value && !value->empty()) {
      o->metrics = *value;
    } else if (name == "--status_file" && value && !value->empty()) {
      o->status_file = *value;
    } else if (name == "--json" && !value) {
      o->json = true;
    } else if (name == "--watch") {
      o->watch = value ? ParseNumber(*value) : std::optional<double>(1.0);
      if (!o->watch || !(*o->watch >= 0.1 && *o->watch <= 3600)) {
        return Usage("--watch takes seconds in [0.1, 3600], got '" + value.value_or("") + "'");
      }
    } else if (name == "--timeout_ms" && value) {
      std::optional<double> ms = ParseNumber(*value);
      if (!ms || !(*ms >= 1 && *ms <= 600000)) {
        return Usage("--timeout_ms takes milliseconds in [1, 600000], got '" + *value + "'");
      }
      o->timeout = std::chrono::milliseconds(static_cast<int64_t>(*ms));
    } else {
      return Usage("unknown or malformed argument '" + a + "'");
    }
  }
  if (o->metrics.empty() == o->status_file.empty()) {
    return Usage("give either --metrics=HOST:PORT or --status_file=PATH");
  }
  return std::nullopt;
}

StatusOr<pb::JobStatus> Read(const Options& o) {
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

int RunStatus(const std::vector<std::string>& args) {
  Options o;
  if (std::optional<int> code = Parse(args, &o)) return *code;
  const bool redraw = o.watch && !o.json && isatty(STDOUT_FILENO) != 0;
  std::optional<pb::JobStatus> last;
  for (;;) {
    StatusOr<pb::JobStatus> st = Read(o);
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

}  // namespace

const Subcommand& StatusSubcommand() {
  static const Subcommand kStatus = {
      "status", "show a running or ended job's status (phase, progress, every node's state)",
      &RunStatus};
  return kStatus;
}

}  // namespace sieve
