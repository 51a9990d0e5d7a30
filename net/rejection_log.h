// RejectionLog: the WARNING lines a daemon writes about peers' messages it rejected or dropped,
// bounded so that a flood of bad messages cannot flood the log: at most 20 lines per 10 s
// (base/log_limiter.h); the lines over the limit are counted and reported in one line, "N more
// rejected or dropped messages were not logged", before the next line allowed or by Flush().
// Thread-safety: none; the one thread that receives (a node's I/O thread, the scheduler's Run
// thread) uses an instance.
#ifndef SIEVE_NET_REJECTION_LOG_H_
#define SIEVE_NET_REJECTION_LOG_H_

#include <chrono>
#include <functional>
#include <iosfwd>

#include "base/log_limiter.h"

namespace sieve {

class RejectionLog {
 public:
  // Logs the line `line` writes, unless the limit is reached (then `line` is not called).
  void Warn(const std::function<void(std::ostream&)>& line);
  // Reports the lines held back for longer than an interval; for a periodic caller, so that the
  // last lines of a flood are reported even when nothing follows.
  void Flush();

 private:
  LogLimiter limiter_{20, std::chrono::seconds(10)};
};

}  // namespace sieve

#endif  // SIEVE_NET_REJECTION_LOG_H_
