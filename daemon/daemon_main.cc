#include "daemon/daemon_main.h"

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <utility>

#include "base/fd_limit.h"

namespace sieve {

std::optional<int> StartDaemon(const ProgramInfo& program, int argc, char** argv) {
  if (auto exit_code = ParseCommandLine(program, argc, argv)) return exit_code;
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  // Every peer connection costs a descriptor: start with all this process may have.
  if (auto fds = RaiseFdLimit(); !fds.ok()) LOG(WARNING) << fds.status().ToString();
  return std::nullopt;
}

int ExitWith(int exit_code, std::string_view daemon, std::string_view message) {
  std::cerr << daemon << ": " << message << "\n";
  return exit_code;
}

std::unique_ptr<DaemonMetrics> StartMetrics(std::string_view daemon,
                                            const DaemonMetricsOptions& options) {
  auto metrics = DaemonMetrics::Start(options);
  if (!metrics.ok()) {
    ExitWith(kExitFailure, daemon, metrics.status().ToString());
    return nullptr;
  }
  return std::move(*metrics);
}

void PrintSummaryLine(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

StopOnSignal::StopOnSignal(std::function<void(int, const std::string&)> no_target)
    : no_target_(std::move(no_target)), watcher_([this](int signo) { OnSignal(signo); }) {}

void StopOnSignal::SetTarget(StopFn stop) {
  MutexLock lock(&mu_);
  stop_ = std::move(stop);
}

void StopOnSignal::OnSignal(int signo) {
  MutexLock lock(&mu_);
  const std::string reason = std::string("stopped by signal ") + strsignal(signo);
  if (stop_) {
    stop_(reason);
  } else if (no_target_) {
    no_target_(signo, reason);
  }
}

}  // namespace sieve
