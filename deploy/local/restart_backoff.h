// RestartBackoff: how long `sieve launch` waits before restarting a process that failed, so one
// that cannot start (an unwritable --checkpoint_dir, a missing file) is not restarted in a tight
// loop that floods the logs and spends --max_restarts in a second.
//
// Contract: Failed(name, ran_for) records that the process known as `name` ("server 1") failed
// after running for `ran_for` and returns the delay before its restart. A process that ran at
// least healthy_run is restarted at once and its name's history is forgotten (a crash after real
// work, or a kill); each consecutive shorter run waits first_delay, then twice as long, up to
// max_delay. Names are independent. A plain value type, not thread-safe.
#ifndef SIEVE_DEPLOY_LOCAL_RESTART_BACKOFF_H_
#define SIEVE_DEPLOY_LOCAL_RESTART_BACKOFF_H_

#include <chrono>
#include <map>
#include <string>

namespace sieve {

struct RestartBackoffOptions {
  std::chrono::milliseconds healthy_run{10000};
  std::chrono::milliseconds first_delay{500};
  std::chrono::milliseconds max_delay{8000};
};

class RestartBackoff {
 public:
  explicit RestartBackoff(RestartBackoffOptions options = {}) : options_(options) {}

  std::chrono::milliseconds Failed(const std::string& name, std::chrono::milliseconds ran_for);

 private:
  RestartBackoffOptions options_;
  std::map<std::string, int> short_runs_;  // consecutive runs shorter than healthy_run, per name
};

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_RESTART_BACKOFF_H_
