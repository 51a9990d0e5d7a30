#include "net/rejection_log.h"

#include <glog/logging.h>

#include <sstream>

namespace sieve {
namespace {

void ReportHeldBack(uint64_t held) {
  if (held > 0) LOG(WARNING) << held << " more rejected or dropped messages were not logged";
}

}  // namespace

void RejectionLog::Warn(const std::function<void(std::ostream&)>& line) {
  uint64_t held = 0;
  if (!limiter_.Allow(LogLimiter::Clock::now(), &held)) return;
  ReportHeldBack(held);
  std::ostringstream os;
  line(os);
  LOG(WARNING) << os.str();
}

void RejectionLog::Flush() { ReportHeldBack(limiter_.Flush(LogLimiter::Clock::now())); }

}  // namespace sieve
