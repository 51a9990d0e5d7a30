// A `sieve` subcommand: `sieve <name> [args...]`.
//
// Contract: run() receives the arguments after the subcommand name and returns the process exit
// status (0 success, 1 failure, 2 usage error). `sieve <name> --help` must print usage to stdout
// and return 0. Each subcommand's run function lives in its own <name>_command.{h,cc}; main.cc
// lists them with their names and summaries.
#ifndef SIEVE_DEPLOY_LOCAL_SUBCOMMAND_H_
#define SIEVE_DEPLOY_LOCAL_SUBCOMMAND_H_

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sieve {

struct Subcommand {
  const char* name;
  const char* summary;  // one line, for `sieve --help`
  int (*run)(const std::vector<std::string>& args);
};

// A command-line word split at its first '=': "--name=value" is {"--name", "value"}; a word
// without '=' has no value ("--json" is {"--json", nullopt}).
struct FlagWord {
  std::string name;
  std::optional<std::string> value;
};

inline FlagWord SplitFlagWord(const std::string& word) {
  const size_t eq = word.find('=');
  if (eq == std::string::npos) return {word, std::nullopt};
  return {word.substr(0, eq), word.substr(eq + 1)};
}

// Prints "sieve <command>: <problem>" and then `usage` to stderr; returns 2, the exit status of a
// usage error.
inline int UsageError(std::string_view command, const std::string& problem, const char* usage) {
  std::fprintf(stderr, "sieve %.*s: %s\n%s", static_cast<int>(command.size()), command.data(),
               problem.c_str(), usage);
  return 2;
}

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_SUBCOMMAND_H_
