#include "deploy/local/trace_command.h"

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "deploy/local/subcommand.h"
#include "trace/trace_merge.h"

namespace sieve {
namespace {

constexpr char kUsage[] =
    "usage: sieve trace merge DIR [--out=FILE]\n"
    "  Merges the timelines that sieve-server and sieve-worker wrote into DIR with\n"
    "  --trace_out=DIR/{role}-{rank}.json (every *.json file of DIR that sieve wrote) into one\n"
    "  Chrome trace-event file, FILE (default DIR/merged.json): one process per file, servers\n"
    "  first, the workers aligned on the job's start barrier and the servers placed by their\n"
    "  clocks. Open FILE in https://ui.perfetto.dev or chrome://tracing; docs/tracing.md says how\n"
    "  to read it.\n"
    "  Exit status: 0 merged, 1 failed (a malformed or truncated file is named), 2 usage error.\n";

int Usage(const std::string& problem) { return UsageError("trace", problem, kUsage); }

int Merge(const std::vector<std::string>& args) {
  std::string dir, out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--out=", 0) == 0) {
      out = a.substr(6);
      if (out.empty()) return Usage("--out needs a file name");
    } else if (a == "--out") {
      if (i + 1 == args.size()) return Usage("--out needs a file name");
      out = args[++i];
    } else if (a.rfind("-", 0) == 0 && a.size() > 1) {
      return Usage("unknown flag '" + a + "'");
    } else if (dir.empty()) {
      dir = a;
    } else {
      return Usage("unexpected argument '" + a + "' (one DIR only)");
    }
  }
  if (dir.empty()) return Usage("merge needs the directory of the trace files");
  if (out.empty()) out = (std::filesystem::path(dir) / "merged.json").string();
  auto merged = MergeTraceDirectory(dir, out);
  if (!merged.ok()) {
    std::fprintf(stderr, "sieve trace merge: %s\n", merged.status().message().c_str());
    return 1;
  }
  for (const std::string& note : merged->notes) {
    std::fprintf(stderr, "sieve trace merge: note: %s\n", note.c_str());
  }
  std::printf(
      "sieve trace merge: wrote %s: %d processes (%d servers, %d workers), %llu events; open it "
      "in https://ui.perfetto.dev or chrome://tracing\n",
      out.c_str(), merged->processes, merged->servers, merged->workers,
      static_cast<unsigned long long>(merged->events));
  return 0;
}

}  // namespace

int RunTrace(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h" || a == "-help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  if (args.empty()) return Usage("missing the action (merge)");
  if (args[0] != "merge") return Usage("unknown action '" + args[0] + "' (the action is merge)");
  return Merge(std::vector<std::string>(args.begin() + 1, args.end()));
}

}  // namespace sieve
