#include "deploy/local/launch_command.h"

#include <cstdio>

#include "deploy/local/launch_options.h"
#include "deploy/local/launcher.h"

namespace sieve {

int RunLaunch(const std::vector<std::string>& args) {
  auto options = ParseLaunchArgs(args);
  if (!options.ok()) {
    std::fprintf(stderr, "sieve launch: %s\n(see sieve launch --help)\n",
                 options.status().message().c_str());
    return 2;
  }
  if (options->help) {
    std::fputs(kLaunchUsage, stdout);
    return 0;
  }
  std::fflush(stdout);
  return Launch(*options);
}

}  // namespace sieve
