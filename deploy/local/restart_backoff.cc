#include "deploy/local/restart_backoff.h"

#include <algorithm>

namespace sieve {

std::chrono::milliseconds RestartBackoff::Failed(const std::string& name,
                                                 std::chrono::milliseconds ran_for) {
  if (ran_for >= options_.healthy_run) {
    short_runs_.erase(name);
    return std::chrono::milliseconds(0);
  }
  const int n = ++short_runs_[name];
  std::chrono::milliseconds delay = options_.first_delay;
  for (int i = 1; i < n && delay < options_.max_delay; ++i) delay *= 2;
  return std::min(delay, options_.max_delay);
}

}  // namespace sieve
