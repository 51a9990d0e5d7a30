#include "net/rejection_log.h"

#include <glog/logging.h>

#include <sstream>

namespace sieve {
void RejectionLog::ReportHeldBack(uint64_t held) const {
  if (held > 0) LOG(WARNING) << held << " more " << what_ << " were not logged";
}

void RejectionLog::Warn(const std::function<void(std::ostream&)>& line) { Write(false, line); }

void RejectionLog::Error(const std::function<void(std::ostream&)>& line) { Write(true, line); }

void RejectionLog::Write(bool error, const std::function<void(std::ostream&)>& line) {
  uint64_t held = 0;
  if (!limiter_.Allow(LogLimiter::Clock::now(), &held)) return;
  ReportHeldBack(held);
  std::ostringstream os;
  line(os);
  if (error) {
    LOG(ERROR) << os.str();
  } else {
    LOG(WARNING) << os.str();
  }
}

void RejectionLog::Flush() { ReportHeldBack(limiter_.Flush(LogLimiter::Clock::now())); }

}  // namespace sieve
