#include "deploy/local/daemon_locator.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "deploy/local/child_process.h"
#include "deploy/local/worker_env.h"

namespace sieve {
namespace {

bool IsExecutableFile(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::string ExecutableDir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  std::string path(buf, static_cast<size_t>(n));
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

StatusOr<std::string> FindDaemon(const std::string& program, const std::string& bin_dir) {
  std::vector<std::string> dirs;
  if (!bin_dir.empty()) {
    dirs.push_back(bin_dir);  // an explicit --bin_dir is the only place looked at
  } else if (std::string self = ExecutableDir(); !self.empty()) {
    dirs.push_back(self);
    for (const char* sub : {"scheduler", "server", "worker"}) {
      dirs.push_back(self + "/../" + sub);
    }
  }
  if (const char* path = std::getenv("PATH"); path != nullptr && bin_dir.empty()) {
    std::string all(path);
    size_t start = 0;
    while (start <= all.size()) {
      size_t colon = all.find(':', start);
      if (colon == std::string::npos) colon = all.size();
      dirs.push_back(colon == start ? "." : all.substr(start, colon - start));
      start = colon + 1;
    }
  }
  for (const std::string& dir : dirs) {
    std::string candidate = dir + "/" + program;
    if (IsExecutableFile(candidate)) return candidate;
  }
  std::string searched;
  for (const std::string& dir : dirs) searched += (searched.empty() ? "" : ", ") + dir;
  return NotFoundError("cannot find executable " + program + " (searched: " + searched +
                       "; use --bin_dir)");
}

StatusOr<DaemonFlags> QueryDaemonFlags(const std::string& path, std::chrono::milliseconds timeout) {
  auto run = RunAndCapture({path, "--helpxml"}, timeout);
  if (!run.ok()) {
    return Status(run.status().code(), path + " --helpxml: " + run.status().message());
  }
  auto flags = ParseGflagsHelpXml(run->stdout_text);
  if (!flags.ok()) {
    return InvalidArgumentError(path + " --helpxml: " + flags.status().message() + " (" +
                                DescribeWaitStatus(run->wait_status) + ")");
  }
  return flags;
}

StatusOr<DaemonFlags> QueryWorkerCommandFlags(const std::vector<std::string>& argv,
                                              const std::vector<std::string>& extra_env,
                                              std::chrono::milliseconds timeout) {
  std::vector<std::string> env = {"SIEVE_HELPXML=1"};
  for (const char* name : kWorkerEnvNames) env.push_back(name);
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  auto run = RunAndCapture(argv, timeout, env);
  if (!run.ok()) return run.status();
  // gflags' own --helpxml exits 1 after printing (a sieve-worker behind a --worker_cmd): a
  // flag list that parses counts whatever the exit status; without one, the status is named.
  auto flags = ParseGflagsHelpXml(run->stdout_text);
  if (!flags.ok()) {
    if (!WIFEXITED(run->wait_status) || WEXITSTATUS(run->wait_status) != 0) {
      return FailedPreconditionError("with SIEVE_HELPXML=1 it " +
                                     DescribeWaitStatus(run->wait_status));
    }
    return FailedPreconditionError("with SIEVE_HELPXML=1 it printed no flag list (" +
                                   flags.status().message() + ")");
  }
  return flags;
}

}  // namespace sieve
