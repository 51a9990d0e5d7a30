#include "net/node_environment.h"

#include <gflags/gflags.h>

#include <cstdlib>
#include <string>
#include <string_view>

#include "base/shell_words.h"

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

StatusOr<std::vector<std::string>> WorkerCommandLine(int argc, char** argv) {
  std::vector<std::string> words;
  if (argc > 0) words.emplace_back(argv[0]);
  if (const char* helpxml = std::getenv("SIEVE_HELPXML"); helpxml != nullptr && *helpxml) {
    words.emplace_back("--helpxml");
  }
  const char* flags = std::getenv("SIEVE_WORKER_FLAGS");
  if (flags != nullptr && std::string_view(flags).find_first_not_of(" \t\n") != std::string::npos) {
    StatusOr<std::vector<std::string>> routed = SplitCommandWords(flags);
    if (!routed.ok()) {
      return InvalidArgumentError("SIEVE_WORKER_FLAGS: " + routed.status().message());
    }
    words.insert(words.end(), routed->begin(), routed->end());
  }
  for (int i = 1; i < argc; ++i) words.emplace_back(argv[i]);
  return words;
}

}  // namespace sieve
