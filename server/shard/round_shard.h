// RoundShard: the round-based half of a shard, which only BSP has (BspShard implements it; an
// ASP/SSP shard has none: ShardServer::rounds() is null). ShardService drives it for BSP
// replication, idle rounds and snapshots, the checkpointer to skip a resync, the daemon for its
// summary. The round being aggregated itself is ShardServer::round() (0 in ASP/SSP), which both
// modes report.
//
// Units: rounds are BSP round numbers (the round_ a PUSH and its UPDATE carry); indices are
// shard-relative (< ShardServer::size()).
//
// Thread-safety: as ShardServer's events: not thread-safe, called by the one thread that drives
// the shard. Reply buffers returned may be read by other threads and are never modified again.
#ifndef SIEVE_SERVER_SHARD_ROUND_SHARD_H_
#define SIEVE_SERVER_SHARD_ROUND_SHARD_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "base/status.h"
#include "server/shard/reply_pool.h"
#include "server/shard/shard_reply.h"

namespace sieve {

class RoundShard {
 public:
  virtual ~RoundShard() = default;

  // Replication of rounds by their result (ShardService). last_round_reply: the UPDATE of the
  // round completed last (its pairs, or the whole shard when *dense), null before any round.
  // ApplyRound: on a copy, round `round` completes with that result (validated like a PUSH:
  // indices shard-relative, strictly ascending, < ShardServer::size()): its weights are written,
  // and every live worker gets the round's UPDATE (in `out`) as the primary's round completion
  // sends it. Errors (nothing changes): FailedPrecondition when the copy is not at `round` or its
  // rounds are replicated by their pushes, InvalidArgument for sizes that do not fit the shard.
  virtual std::shared_ptr<const ReplyBuffer> last_round_reply(bool* dense) const = 0;
  virtual Status ApplyRound(uint64_t round, std::span<const uint32_t> indices,
                            std::span<const float> values, bool dense, Outbox* out) = 0;

  // Idle rounds: with no live worker and no push in the open round, nobody will ever push it,
  // while a re-admitted worker waits to be counted from a later round (every worker restarted at
  // once: each joined a few rounds past the servers'). IdleUntil: that earliest join round
  // (>= ShardServer::round(); that round itself only during a resync, which has nobody left to wait
  // for), or nothing. PassIdleRounds: the rounds up to it pass empty (no weight changes, no UPDATE,
  // counted in idle_rounds, not rounds_completed), then the joiners are counted and their held
  // pushes aggregated (which may complete that round); a no-op when IdleUntil is nothing. Both
  // depend on the shard's state alone, so a copy that replays the primary's events passes the same
  // rounds.
  virtual std::optional<uint64_t> IdleUntil() const = 0;
  virtual void PassIdleRounds(Outbox* out) = 0;

  // Whether ShardServer::TakeSnapshot may be called now: not while it resyncs after a restore;
  // replicated by pushes, only at a round boundary with nothing held, which the round's completion
  // always is. (An ASP/SSP shard may always take one.)
  virtual bool SnapshotReady() const = 0;

  // Waiting for every live worker's first push after a Restore (the round is not settled yet).
  virtual bool resyncing() const = 0;

  // Pushes aggregated into the round being aggregated, which has not completed (at the end of a
  // job with backup workers, late pushes of the last round: counted in pushed_sum, never applied).
  virtual uint32_t open_round_pushes() const = 0;
};

}  // namespace sieve

#endif  // SIEVE_SERVER_SHARD_ROUND_SHARD_H_
