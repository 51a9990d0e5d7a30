// `sieve launch`: start a local cluster (scheduler + servers + workers). See launcher.h for the
// behaviour and launch_options.h for the flags.
#ifndef SIEVE_DEPLOY_LOCAL_LAUNCH_COMMAND_H_
#define SIEVE_DEPLOY_LOCAL_LAUNCH_COMMAND_H_

#include <string>
#include <vector>

namespace sieve {

// The subcommand: `args` are the words after "launch"; returns the exit status (subcommand.h).
int RunLaunch(const std::vector<std::string>& args);

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_LAUNCH_COMMAND_H_
