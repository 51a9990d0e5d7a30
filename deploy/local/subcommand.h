// A `sieve` subcommand: `sieve <name> [args...]`.
//
// Contract: run() receives the arguments after the subcommand name and returns the process exit
// status (0 success, 1 failure, 2 usage error). `sieve <name> --help` must print usage to stdout
// and return 0. Each subcommand lives in its own <name>_command.{h,cc}; main.cc lists them.
#ifndef SIEVE_DEPLOY_LOCAL_SUBCOMMAND_H_
#define SIEVE_DEPLOY_LOCAL_SUBCOMMAND_H_

#include <string>
#include <vector>

namespace sieve {

struct Subcommand {
  const char* name;
  const char* summary;  // one line, for `sieve --help`
  int (*run)(const std::vector<std::string>& args);
};

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_SUBCOMMAND_H_
