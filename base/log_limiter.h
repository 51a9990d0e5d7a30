// LogLimiter: bounds how many lines of one kind a daemon logs, so that a peer sending a flood of
// bad messages cannot flood the log (each rejection used to log a line). At most `burst` lines
// pass per `interval`; the others are counted, and the next line allowed after them (or a Flush)
// reports how many were held back. Time is passed in, so tests need no clock.
// Thread-safety: none; one thread (the node's I/O thread) uses an instance.
#ifndef SIEVE_BASE_LOG_LIMITER_H_
#define SIEVE_BASE_LOG_LIMITER_H_

#include <chrono>
#include <cstdint>

namespace sieve {

class LogLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  LogLimiter(int burst, Clock::duration interval) : burst_(burst), interval_(interval) {}

  // Whether to log the line of an event at `now`. *held_back gets the number of earlier lines that
  // were not logged and not yet reported (report them first), else 0.
  bool Allow(Clock::time_point now, uint64_t* held_back) {
    *held_back = 0;
    if (now - window_start_ >= interval_) {
      window_start_ = now;
      used_ = 0;
    }
    if (used_ >= burst_) {
      ++held_back_;
      return false;
    }
    ++used_;
    *held_back = held_back_;
    held_back_ = 0;
    return true;
  }

  // Lines held back for longer than an interval: their count (reported once), else 0. For a
  // periodic caller, so that the last lines of a flood are reported even if nothing follows.
  uint64_t Flush(Clock::time_point now) {
    if (held_back_ == 0 || now - window_start_ < interval_) return 0;
    const uint64_t n = held_back_;
    held_back_ = 0;
    return n;
  }

 private:
  const int burst_;
  const Clock::duration interval_;
  Clock::time_point window_start_{};
  int used_ = 0;
  uint64_t held_back_ = 0;
};

}  // namespace sieve

#endif  // SIEVE_BASE_LOG_LIMITER_H_
