// RejectionLog: the lines a daemon writes about peers' messages it rejected or dropped, and every
// other line a peer's message can cause (an ERROR the scheduler reflected at a node, a NODE_DEAD,
// a FINISHED), bounded so that a flood of messages cannot flood the log: at most 20 lines per
// 10 s (base/log_limiter.h), WARNING or ERROR lines sharing one limit; the lines over the limit
// are counted and reported in one line, "N more rejected or dropped messages were not logged"
// (the noun is the constructor's), before the next line allowed or by Flush(). A daemon keeps one
// for its rejections and one for the job events a peer can cause, so that a flood of garbage
// cannot hide a node's death.
// Thread-safety: none; the one thread that receives (a node's I/O thread, the scheduler's Run
// thread) uses an instance.
#ifndef SIEVE_NET_REJECTION_LOG_H_
#define SIEVE_NET_REJECTION_LOG_H_

#include <chrono>
#include <functional>
#include <iosfwd>
#include <string>
#include <utility>

#include "base/log_limiter.h"

namespace sieve {

class RejectionLog {
 public:
  // `what`: what the lines are about, for the held-back count ("N more <what> were not logged").
  explicit RejectionLog(std::string what = "rejected or dropped messages")
      : what_(std::move(what)) {}

  // Logs the line `line` writes, unless the limit is reached (then `line` is not called).
  void Warn(const std::function<void(std::ostream&)>& line);
  // The same at ERROR severity (within the same limit).
  void Error(const std::function<void(std::ostream&)>& line);
  // Reports the lines held back for longer than an interval; for a periodic caller, so that the
  // last lines of a flood are reported even when nothing follows.
  void Flush();

 private:
  void ReportHeldBack(uint64_t held) const;
  void Write(bool error, const std::function<void(std::ostream&)>& line);

  const std::string what_;
  LogLimiter limiter_{20, std::chrono::seconds(10)};
};

}  // namespace sieve

#endif  // SIEVE_NET_REJECTION_LOG_H_
