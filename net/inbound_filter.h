// InboundFilter: the admission checks every message a node runtime (net/node.h) or the scheduler
// (scheduler/scheduler.h) receives passes before anything in it is believed, written once for
// both. After decoding (proto/codec.h), a message is dropped — not answered, since an answer would
// go to the node it names — when
//  - it belongs to another job (the codec's ERROR_FOREIGN_JOB: another job's token digest or
//    instance), counted as foreign; or
//  - with CURVE, the client key it came with is not the key of the node it claims to be (an
//    allow-listed key speaking for another node), counted as an impostor.
// Each drop is logged through the owner's RejectionLog (bounded lines). What passes may still have
// failed to decode: the owner answers that with an ERROR as it sees fit.
//
// Thread-safety: Admit and DropOtherInstance from the one receiving thread (as RejectionLog); the
// counters may be read from any thread. Ownership: `log` is borrowed and must outlive the filter.
#ifndef SIEVE_NET_INBOUND_FILTER_H_
#define SIEVE_NET_INBOUND_FILTER_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "net/rejection_log.h"
#include "proto/sieve.pb.h"

namespace sieve {

class InboundFilter {
 public:
  explicit InboundFilter(RejectionLog* log) : log_(log) {}
  InboundFilter(const InboundFilter&) = delete;
  InboundFilter& operator=(const InboundFilter&) = delete;

  // True when the message with header `h` may be handled. `code` and `decoded` are the codec's
  // result for it (ERROR_NONE and OK when it decoded); `key_matches` tells whether its CURVE
  // client key is its claimed sender's (true without CURVE, or when the sender is not known).
  bool Admit(const pb::Header& h, pb::ErrorCode code, const Status& decoded, bool key_matches);
  // Drops a decoded message of another instance of this job (a registration message recorded
  // earlier and replayed, or a stale daemon's: its digest is the token's, so only its content
  // tells): counted as foreign.
  void DropOtherInstance(const pb::Header& h);

  uint64_t foreign() const { return foreign_.load(std::memory_order_relaxed); }
  uint64_t impostors() const { return impostors_.load(std::memory_order_relaxed); }

 private:
  RejectionLog* const log_;
  std::atomic<uint64_t> foreign_{0};
  std::atomic<uint64_t> impostors_{0};
};

}  // namespace sieve

#endif  // SIEVE_NET_INBOUND_FILTER_H_
