// `sieve`: the sieve command-line tool. Dispatches to a subcommand (see subcommand.h).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/version.h"
#include "deploy/local/compare_command.h"
#include "deploy/local/export_command.h"
#include "deploy/local/keygen_command.h"
#include "deploy/local/launch_command.h"
#include "deploy/local/status_command.h"
#include "deploy/local/subcommand.h"
#include "deploy/local/trace_command.h"

namespace {

// In the order `sieve --help` lists them.
constexpr sieve::Subcommand kSubcommands[] = {
    {"launch", "start scheduler, servers and workers as local processes", &sieve::RunLaunch},
    {"compare", "run a grid of jobs from a YAML config; write CSV, Markdown and plots",
     &sieve::RunCompare},
    {"keygen", "write CurveZMQ keys for --curve_dir", &sieve::RunKeygen},
    {"status", "show a running or ended job's status (phase, progress, every node's state)",
     &sieve::RunStatus},
    {"trace", "merge the daemons' --trace_out timelines into one", &sieve::RunTrace},
    {"export", "write a job's trained weights (its servers' shards or checkpoints) to one file",
     &sieve::RunExport},
};

void PrintUsage(FILE* out) {
  std::fputs("usage: sieve <subcommand> [flags...]\n\nsubcommands:\n", out);
  for (const sieve::Subcommand& s : kSubcommands) {
    std::fprintf(out, "  %-10s %s\n", s.name, s.summary);
  }
  std::fputs(
      "\nsieve <subcommand> --help prints the subcommand's flags; sieve --version the version.\n"
      "Exit status: 0 success, 1 failure, 2 usage error.\n",
      out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    PrintUsage(stderr);
    return 2;
  }
  const std::string first = argv[1];
  if (first == "--help" || first == "-h" || first == "help" || first == "-help") {
    PrintUsage(stdout);
    return 0;
  }
  if (first == "--version" || first == "-version") {
    std::printf("sieve %s\n", sieve::kVersion);
    return 0;
  }
  for (const sieve::Subcommand& s : kSubcommands) {
    if (first == s.name) return s.run(std::vector<std::string>(argv + 2, argv + argc));
  }
  std::string names;
  for (const sieve::Subcommand& s : kSubcommands) names += std::string(" ") + s.name;
  std::fprintf(stderr, "sieve: unknown subcommand '%s'; available:%s\n", first.c_str(),
               names.c_str());
  return 2;
}
