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

std::vector<const sieve::Subcommand*> AllSubcommands() {
  return {&sieve::LaunchSubcommand(), &sieve::CompareSubcommand(), &sieve::KeygenSubcommand(),
          &sieve::StatusSubcommand(), &sieve::TraceSubcommand(),   &sieve::ExportSubcommand()};
}

void PrintUsage(FILE* out) {
  std::fputs("usage: sieve <subcommand> [flags...]\n\nsubcommands:\n", out);
  for (const sieve::Subcommand* s : AllSubcommands()) {
    std::fprintf(out, "  %-10s %s\n", s->name, s->summary);
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
  for (const sieve::Subcommand* s : AllSubcommands()) {
    if (first == s->name) return s->run(std::vector<std::string>(argv + 2, argv + argc));
  }
  std::string names;
  for (const sieve::Subcommand* s : AllSubcommands()) names += std::string(" ") + s->name;
  std::fprintf(stderr, "sieve: unknown subcommand '%s'; available:%s\n", first.c_str(),
               names.c_str());
  return 2;
}
