#include "net/inbound_filter.h"

#include <ostream>

#include "proto/codec.h"

namespace sieve {

bool InboundFilter::Admit(const pb::Header& h, pb::ErrorCode code, const Status& decoded,
                          bool key_matches) {
  if (code == pb::ERROR_FOREIGN_JOB) {
    foreign_.fetch_add(1, std::memory_order_relaxed);
    log_->Warn([&](std::ostream& os) {
      os << "dropped a " << MsgTypeName(h.type()) << " of another job claiming to be node "
         << h.sender() << ": " << decoded.message();
    });
    return false;
  }
  if (!key_matches) {
    impostors_.fetch_add(1, std::memory_order_relaxed);
    log_->Warn([&](std::ostream& os) {
      os << "dropped a " << MsgTypeName(h.type()) << " claiming to be node " << h.sender()
         << ": it came with another client key than that node's";
    });
    return false;
  }
  return true;
}

void InboundFilter::DropOtherInstance(const pb::Header& h) {
  foreign_.fetch_add(1, std::memory_order_relaxed);
  log_->Warn([&](std::ostream& os) {
    os << "dropped a " << MsgTypeName(h.type()) << " of another instance of this job";
  });
}

}  // namespace sieve
