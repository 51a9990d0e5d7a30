// Reply: what a shard (server/shard/shard_server.h) asks its driver to send after an event, in the
// shard core's own terms. The core does no I/O and knows nothing of the wire: ShardService maps a
// ReplyType, a ShardError and a ShardEvent to the protocol's message types and error codes
// (docs/protocol.md), so the core depends on no generated protobuf code.
//
// Ownership: a Reply holds its arrays through a shared_ptr to a ReplyBuffer (server/shard/reply_pool.h)
// that may be shared by every recipient of one round and by every part of a split reply; they are
// never modified after the event that produced them returns. Thread-safety: a value type.
#ifndef SIEVE_SERVER_SHARD_SHARD_REPLY_H_
#define SIEVE_SERVER_SHARD_SHARD_REPLY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "server/shard/reply_pool.h"

namespace sieve {

enum class ReplyType {
  kUpdate,       // a round's new values (sparse pairs or the whole shard): MSG_UPDATE
  kDense,        // the whole shard answering a pull: MSG_DENSE
  kJoinAck,      // a rejoining worker is counted (or will be): MSG_JOIN_ACK
  kInitAck,      // the initial weights were taken or are not needed: MSG_INIT_ACK
  kError,        // the event was refused and changed nothing: MSG_ERROR
  kLatePushAck,  // a late push (backup workers, kApply) is applied: MSG_LATE_PUSH_ACK
};

// Why the shard refused an event (the protocol's ERROR code of the same name).
enum class ShardError {
  kNone,
  kNotRegistered,   // unknown rank, a dead worker, a JOIN without re-admission
  kBadCount,        // the value count does not match the shard or the indices
  kNotInitialized,  // the shard awaits worker 0's initial weights
  kUnknownRound,    // a push for a round the shard does not aggregate
  kJoinTooLate,     // BSP has passed the round a worker asked to join at
  kLatePush,        // BSP with backup workers: the push's round closed without it
};

// The worker event a refusal answers (the rejected message's type).
enum class ShardEvent { kPush, kPullDense, kInit, kJoin };

// For UPDATE/DENSE, `buffer` holds the arrays; for kError, `code`, `message` and `rejected`. A part
// of a split sparse UPDATE (parts > 1) covers pairs [begin, end) of the buffer; otherwise the whole
// buffer is meant.
struct Reply {
  int worker = 0;  // worker rank
  ReplyType type = ReplyType::kUpdate;
  uint64_t round = 0;
  bool dense = false;
  std::shared_ptr<const ReplyBuffer> buffer;
  ShardError code = ShardError::kNone;
  std::string message;
  ShardEvent rejected = ShardEvent::kPush;  // kError: the kind of the rejected event
  uint32_t part = 0;
  uint32_t parts = 1;
  size_t begin = 0;
  size_t end = 0;
  // kUpdate of a BSP round that closed without this worker's push (backup workers): the
  // protocol's FLAG_PUSH_MISSED (late_pushes kReturn: never applied) or FLAG_PUSH_LATE (kApply:
  // applied when it comes, then acknowledged with a kLatePushAck).
  bool push_missed = false;
  bool push_late = false;

  // An UPDATE of `round` to `worker`: the whole shard (`dense`) or the buffer's pairs.
  static Reply Update(int worker, uint64_t round, bool dense,
                      std::shared_ptr<const ReplyBuffer> buffer) {
    return Make(worker, ReplyType::kUpdate, round, dense, std::move(buffer));
  }
  // The whole shard (a pull's answer) as of `round`.
  static Reply Dense(int worker, uint64_t round, std::shared_ptr<const ReplyBuffer> buffer) {
    return Make(worker, ReplyType::kDense, round, true, std::move(buffer));
  }
  static Reply JoinAck(int worker, uint64_t round) {
    return Make(worker, ReplyType::kJoinAck, round, false, nullptr);
  }
  static Reply InitAck(int worker) { return Make(worker, ReplyType::kInitAck, 0, false, nullptr); }
  static Reply LatePushAck(int worker, uint64_t round) {
    return Make(worker, ReplyType::kLatePushAck, round, false, nullptr);
  }
  // A refusal of a `rejected` event of `round`.
  static Reply Error(int worker, uint64_t round, ShardError code, std::string message,
                     ShardEvent rejected) {
    Reply r = Make(worker, ReplyType::kError, round, false, nullptr);
    r.code = code;
    r.message = std::move(message);
    r.rejected = rejected;
    return r;
  }

 private:
  static Reply Make(int worker, ReplyType type, uint64_t round, bool dense,
                    std::shared_ptr<const ReplyBuffer> buffer) {
    Reply r;
    r.worker = worker;
    r.type = type;
    r.round = round;
    r.dense = dense;
    r.buffer = std::move(buffer);
    return r;
  }
};
using Outbox = std::vector<Reply>;

}  // namespace sieve

#endif  // SIEVE_SERVER_SHARD_SHARD_REPLY_H_
