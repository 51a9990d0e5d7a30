// `sieve launch`: start a local cluster (scheduler + servers + workers). See launcher.h for the
// behaviour and launch_options.h for the flags.
#ifndef SIEVE_DEPLOY_LOCAL_LAUNCH_COMMAND_H_
#define SIEVE_DEPLOY_LOCAL_LAUNCH_COMMAND_H_

#include "deploy/local/subcommand.h"

namespace sieve {

const Subcommand& LaunchSubcommand();

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_LAUNCH_COMMAND_H_
