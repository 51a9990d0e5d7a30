#include "net/node_environment.h"

#include <gflags/gflags.h>

#include <cstdlib>
#include <string>

namespace sieve {

Status ApplyNodeEnvironment() {
  for (const EnvironmentFlag& e : kNodeEnvironment) {
    const char* value = std::getenv(e.variable);
    if (value == nullptr || *value == '\0') continue;
    gflags::CommandLineFlagInfo info;
    if (!gflags::GetCommandLineFlagInfo(e.flag, &info) || !info.is_default) continue;
    if (std::string(e.flag) == "job_token_file") {
      gflags::CommandLineFlagInfo token;
      if (gflags::GetCommandLineFlagInfo("job_token", &token) && !token.is_default) continue;
    }
    if (gflags::SetCommandLineOption(e.flag, value).empty()) {
      return InvalidArgumentError(std::string(e.variable) + "=" + value + ": not a value of --" +
                                  e.flag + " (" + info.type + ")");
    }
  }
  return Status::Ok();
}

}  // namespace sieve
