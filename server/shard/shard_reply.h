// Reply: what a shard (server/shard/shard_server.h) asks its driver to send after an event. The
// core does no I/O: ShardService maps a ReplyType to the protocol's message type and encodes the
// arrays; a refusal (kError) carries the protocol's own values, the pb::ErrorCode to send and the
// pb::MsgType of the rejected message (docs/protocol.md), which ShardService passes through as
// they are.
//
// Ownership: a Reply holds its arrays through a shared_ptr to a ReplyBuffer
// (server/shard/reply_pool.h) that may be shared by every recipient of one round and by every part
// of a split reply; they are never modified after the event that produced them returns.
// Thread-safety: a value type.
#ifndef SIEVE_SERVER_SHARD_SHARD_REPLY_H_
#define SIEVE_SERVER_SHARD_SHARD_REPLY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "proto/sieve.pb.h"
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

// For UPDATE/DENSE, `buffer` holds the arrays; for kError, `code`, `message` and `rejected`. The
// codes a shard refuses with:
//   ERROR_NOT_REGISTERED   unknown rank, a dead worker, a JOIN without re-admission
//   ERROR_BAD_COUNT        the value count does not match the shard or the indices
//   ERROR_NOT_INITIALIZED  the shard awaits worker 0's initial weights
//   ERROR_UNKNOWN_ROUND    a push for a round the shard does not aggregate
//   ERROR_JOIN_TOO_LATE    BSP has passed the round a worker asked to join at
//   ERROR_LATE_PUSH        BSP with backup workers: the push's round closed without it
// and the events it refuses: MSG_PUSH, MSG_PULL_DENSE, MSG_INIT, MSG_JOIN. A part
// of a split sparse UPDATE (parts > 1) covers pairs [begin, end) of the buffer; otherwise the whole
// buffer is meant.
struct Reply {
  int worker = 0;  // worker rank
  ReplyType type = ReplyType::kUpdate;
  uint64_t round = 0;
  bool dense = false;
  std::shared_ptr<const ReplyBuffer> buffer;
  pb::ErrorCode code = pb::ERROR_NONE;  // kError: why the event was refused
  std::string message;
  pb::MsgType rejected = pb::MSG_PUSH;  // kError: the type of the rejected message
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
  static Reply Error(int worker, uint64_t round, pb::ErrorCode code, std::string message,
                     pb::MsgType rejected) {
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
