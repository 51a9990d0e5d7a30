// LoopStall: of the time since a polling loop's previous pass, how much the loop could not observe
// its peers: the part beyond the loop's own longest expected pass (its receive wait and handling).
// That time this process did not run (a machine out of CPU, SIGSTOP, a long handler), and its
// peers' messages of that time are still queued, unread. A liveness check that counts a peer's
// silence (the scheduler's heartbeat timeout, a node's loss of the scheduler) moves the peer's
// last-seen time forward by it, so that its own stall is not taken for the peer's. A loop stalled
// for good still sees time pass at `expected` per pass, so a silent peer is still found, later.
// Steady-clock time. One loop's own: not thread-safe.
#ifndef SIEVE_NET_LOOP_STALL_H_
#define SIEVE_NET_LOOP_STALL_H_

#include <chrono>
#include <optional>
#include <utility>

namespace sieve {

class LoopStall {
 public:
  using Clock = std::chrono::steady_clock;

  explicit LoopStall(Clock::duration expected) : expected_(expected) {}

  // The time since the previous call beyond `expected` (zero on the first call, and when `now`
  // is not later than the previous call's).
  Clock::duration Pass(Clock::time_point now) {
    const std::optional<Clock::time_point> previous = std::exchange(previous_, now);
    if (!previous || now - *previous <= expected_) return Clock::duration::zero();
    return now - *previous - expected_;
  }

 private:
  const Clock::duration expected_;
  std::optional<Clock::time_point> previous_;
};

}  // namespace sieve

#endif  // SIEVE_NET_LOOP_STALL_H_
