// BspShard: a shard in bulk-synchronous mode (server/shard/shard_server.h states the semantics). A
// round's sparse pushes are merged into an ascending union of indices with per-index sums, kept in
// key-range parts so each merge and the completion are split across the thread team; a dense push
// goes to a whole-shard accumulator that exists only while dense rounds run. When every live
// worker's push of round_ is in (with b backup workers: max(1, live - b) of them), the round
// completes through one of three paths (a dense round, two-way compression through a server
// residual, or the union applied and sent, whole or in parts) and every live worker gets the
// round's UPDATE. It is also the shard's RoundShard (server/shard/round_shard.h:
// ShardServer::rounds() returns it): the round-based half ShardService drives for BSP replication,
// idle rounds and snapshots.
//
// Backup workers: an UPDATE to a worker whose push the round closed without is flagged
// push_missed; that push, when it comes, is refused (ERROR_LATE_PUSH, counted in late_pushes) and
// the worker returns its values to its residual (PsClient's RoundStats::missed_*). Each server
// decides alone: with several servers a worker may be counted in one shard's round and not in
// another's. That needs no agreement, because no value crosses shards: each shard applies exactly
// the pushes it counted, and every live worker gets every shard's UPDATE, so replicas stay equal to
// the servers'. The resync after a Restore still waits for every live worker.
//
// Joiners and the resync after Restore (bsp_shard_rejoin.cc) change who is counted and when:
//  Join  a re-admitted worker is counted again from the boundary where round_ becomes its join
//        round: until then rounds complete without it, and its PUSH of that round is held. Its
//        UPDATE for that first round is the dense shard, so its replica equals the server's from
//        then on. A joiner refused by one server asks every server again for a later round: a
//        JOIN for a later round replaces a pending one; one for an earlier round than the pending
//        one is stale (a resend overtaken by the retry) and ignored without a reply. A joiner
//        already counted from its join round but that has not pushed yet is uncounted again and
//        moved to the later round (the round it left may then complete without it); once it has
//        pushed, a JOIN is only acknowledged.
//  Resync  after Restore the workers' rounds are unknown (they may be ahead of the checkpoint,
//        and a kill between replies can leave them one round apart), so the first push of every
//        live worker is held, not applied. When all are in, E = max(restored round, their
//        rounds): held pushes of round E are aggregated as round E; a worker whose held push is
//        older gets, at once, a dense UPDATE of its own round holding the restored weights (its
//        push is dropped) and joins round E with its next push. The reply that completes round E
//        is dense as well, so every worker's replica of the shard equals the server's again.
//        Updates to the shard between the checkpoint and the restart are lost (at most the
//        checkpoint interval).
//  Idle  when every worker died and rejoined (each counted from a round past the servers'),
//        nobody pushes the rounds before the earliest join round: they pass empty
//        (PassIdleRounds), a resync included.
//
// Thread-safety: as ShardServer (one driving thread; the team's helpers are internal).
#ifndef SIEVE_SERVER_SHARD_BSP_SHARD_H_
#define SIEVE_SERVER_SHARD_BSP_SHARD_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "base/log_limiter.h"
#include "server/shard/round_shard.h"
#include "server/shard/shard_server.h"

namespace sieve {

class BspShard : public ShardServer, public RoundShard {
 public:
  // Options as validated by ShardServer::Create (consistency kBsp).
  BspShard(const ShardServerOptions& options, std::vector<float> initial);

  // ShardServer.
  RoundShard* rounds() override { return this; }
  const RoundShard* rounds() const override { return this; }
  uint64_t round() const override { return round_; }
  ShardSnapshot TakeSnapshot() const override;
  Status InstallSnapshot(ShardSnapshot snapshot) override;

  // RoundShard.
  bool resyncing() const override { return resync_; }
  uint32_t open_round_pushes() const override { return contributions_; }
  std::shared_ptr<const ReplyBuffer> last_round_reply(bool* dense) const override {
    *dense = last_reply_dense_;
    return last_reply_;
  }
  // Without backup workers and two-way compression (whose rounds depend on more than the result:
  // the late pushes of the open round, the server residual).
  Status ApplyRound(uint64_t round, std::span<const uint32_t> indices,
                    std::span<const float> values, bool dense, Outbox* out) override;
  bool SnapshotReady() const override;
  std::optional<uint64_t> IdleUntil() const override;
  void PassIdleRounds(Outbox* out) override;

 protected:
  void Push(int worker, uint64_t round, std::span<const uint32_t> indices,
            std::span<const float> values, bool dense, Outbox* out) override;
  uint64_t PullRound(int) const override { return round_; }
  void Dead(int worker, Outbox* out) override { Uncount(worker, out); }
  void Join(int worker, uint64_t round, Outbox* out) override;
  void ForgetJoin(int worker) override;
  void Restored(uint64_t round) override;

 private:
  // A push kept for later: during a resync after Restore, or a joiner's push of its join round.
  struct HeldPush {
    bool held = false;
    uint64_t round = 0;
    bool dense = false;
    std::vector<uint32_t> indices;
    std::vector<float> values;
    // Keeps a copy of a push; true when one was already held (the new one replaces it).
    bool Hold(uint64_t r, bool d, std::span<const uint32_t> idx, std::span<const float> vals);
  };
  // What the BSP round knows of one worker (workers_[rank]): its BspWorkerClock (shard_server.h),
  // the part a snapshot carries, and the pushes held for it; the base holds live and rejoined.
  struct WorkerState : BspWorkerClock {
    bool arrived = false;  // pushed round_
    HeldPush held;         // resync after Restore: its latest push
    HeldPush join_push;    // its PUSH of its join round, held
    HeldPush ordered;      // ordered_rounds: its push of round_, until the round closes
  };
  // The round's sparse pushes merged (see the file comment): part s holds the keys in
  // [union_keys_[s], union_keys_[s + 1]); one part with one thread, kPartsPerThread per thread
  // used otherwise. Each merge recomputes the parts (a near-equal share of the pairs each) into
  // merge_parts_, then the two swap.
  struct UnionPart {
    std::vector<uint32_t> idx;
    std::vector<float> sum;
  };
  static constexpr uint32_t kPartsPerThread = 4;

 public:
  // A worker that misses this many BSP rounds in a row (backup workers) is logged (again at 10x
  // and 100x) and named in sieve-server's summary (late_workers=).
  static constexpr uint64_t kNamedMissRun = 5;

 private:
  // Whether rounds depend on more than their result (backup workers' late pushes, two-way
  // compression's residual): such a shard is replicated by its pushes.
  bool ByPushes() const {
    return options().backup_workers > 0 || options().server_compressor != Compressor::kNone;
  }
  // The round: a counted worker's push of round_ (or the previous round's resend).
  void RoundPush(int worker, uint64_t round, std::span<const uint32_t> indices,
                 std::span<const float> values, bool dense, Outbox* out);
  // One push into the round's aggregate (the union, or the dense accumulator), counted.
  void Aggregate(std::span<const uint32_t> indices, std::span<const float> values, bool dense);
  // Backup workers, LatePushes::kApply: a push of a closed round joins the round being
  // aggregated once (a resend of one already applied is a duplicate), answered with a
  // kLatePushAck either way.
  void LatePush(int worker, uint64_t round, std::span<const uint32_t> indices,
                std::span<const float> values, bool dense, Outbox* out);
  // ordered_rounds: the round's held pushes into the aggregate, by worker rank.
  void AggregateInRankOrder();
  void AccumulateDense(std::span<const float> values);
  void MaybeComplete(Outbox* out);
  // Two of the three completions (the third is ApplyUnion): each applies the round's average
  // (sums / n) to w_ and fills `buf`: the whole shard, or two-way compression's selected pairs.
  void CompleteDense(float n, ReplyBuffer* buf);
  void CompleteTwoWay(float n, ReplyBuffer* buf);
  // Every live worker's UPDATE of round_ (the whole shard to a worker in its first round after a
  // join), then the next round begins.
  void SendRoundReplies(std::shared_ptr<const ReplyBuffer> reply, bool dense, bool sent_in_parts,
                        Outbox* out);
  // The UPDATE of round_ to `worker`, flagged push_missed when the round closes without its push.
  Reply RoundUpdate(int worker, bool dense, std::shared_ptr<const ReplyBuffer> buffer) const;
  // At a round's completion: who was counted (a resend of round_ - 1 is answered only for them)
  // and, with backup workers, the missed rounds and runs (stats, the warning).
  void CountMisses();

  // The union.
  void MergeIntoUnion(std::span<const uint32_t> indices, std::span<const float> values);
  // MergeIntoUnion's work on part t: the new union's part t (keys [new_keys_[t],
  // new_keys_[t + 1])) from the current parts and the push's pairs in that range.
  void MergeUnionPart(uint32_t t, std::span<const uint32_t> indices, std::span<const float> values);
  // body(part) for every part of the union, the parts shared among the threads (disjoint keys).
  template <typename Body>
  void ForEachUnionPart(Body body);
  // The smallest key K >= from such that the union and the push hold >= rank pairs below K.
  uint64_t UnionKeyOfRank(uint64_t rank, uint64_t from, std::span<const uint32_t> indices) const;
  size_t UnionSize() const;
  void ClearUnion();
  // The sparse completion: w[i] -= a[i]/n over the union into the reply `buf` (its values, and
  // its indices), emitting the parts of a split reply as they are done. True when it was sent in
  // parts.
  bool ApplyUnion(float n, ReplyBuffer* buf, const std::shared_ptr<const ReplyBuffer>& shared,
                  Outbox* out);
  // ApplyUnion's steps. How a union reply of m pairs goes out: `parts` parts (1 = whole) of
  // `step` pairs each (the last may be shorter).
  struct UnionReplySplit {
    uint32_t parts = 1;
    size_t step = 0;
  };
  // Sizes `buf` for the m pairs of the union (one part: the union's indices become its indices)
  // and sets union_offsets_ (where each part of the union starts among the pairs).
  void LayOutUnionReply(size_t m, bool one_part, ReplyBuffer* buf);
  // Whole (a worker gets the whole shard this round) or in parts of reply_part_pairs.
  UnionReplySplit SplitUnionReply(size_t m) const;
  // w[i] -= a[i]/n for the union's pairs [from, to) into buf's values (and, with several union
  // parts, its indices). Threads may run it on disjoint ranges.
  void ApplyUnionPairs(size_t from, size_t to, float n, bool one_part, ReplyBuffer* buf);
  // With threads > 1: apply_chunk(c) for every chunk c < chunks, the threads taking chunks in
  // order; with in_parts, each chunk is part c of the reply and thread 0 emits them in order
  // (emit(c)) as they are done, so a part goes out while later ones are applied.
  template <typename ApplyChunk, typename Emit>
  void ApplyChunksOnTeam(uint32_t threads, uint32_t chunks, bool in_parts, ApplyChunk apply_chunk,
                         Emit emit);
  // Part p of the split reply (`shared`, m pairs) to every live worker, through the part sink.
  void EmitUnionReplyPart(uint32_t p, const UnionReplySplit& split, size_t m,
                          const std::shared_ptr<const ReplyBuffer>& shared, Outbox* out);

  // Joiners and resync (bsp_shard_rejoin.cc).
  void HoldJoinPush(int worker, uint64_t round, std::span<const uint32_t> indices,
                    std::span<const float> values, bool dense, Outbox* out);
  // Stops counting the live `worker` and completes the round if it waited for it alone.
  void Uncount(int worker, Outbox* out);
  void AdmitJoiners(Outbox* out);  // counts joiners whose join round is round_
  void ResyncPush(int worker, uint64_t round, std::span<const uint32_t> indices,
                  std::span<const float> values, bool dense, Outbox* out);
  void ResyncMaybeFinish(Outbox* out);

  // Two-way compression's failed selections are logged at most 20 per 10 s (a peer's pushes can
  // make the aggregate non-finite every round; each one is counted in the stats).
  LogLimiter selection_log_{20, std::chrono::seconds(10)};
  std::vector<WorkerState> workers_;
  uint64_t round_ = 0;
  std::vector<UnionPart> union_parts_;  // kPartsPerThread per thread; [0, union_count_) in use
  std::vector<UnionPart> merge_parts_;  // scratch of MergeIntoUnion
  std::vector<uint64_t> union_keys_;    // union_count_ + 1 key bounds, 0 first, size() last
  std::vector<uint64_t> new_keys_;      // scratch: the bounds of the merge in progress
  std::vector<size_t> union_offsets_;   // scratch: part s starts at pair union_offsets_[s]
  uint32_t union_count_ = 1;
  // ApplyUnion's completion flags, one per chunk (kMaxReplyParts; only with threads > 1).
  std::unique_ptr<std::atomic<uint32_t>[]> chunk_done_;
  std::vector<float> acc_;  // dense rounds' accumulator
  bool dense_round_ = false;
  uint32_t contributions_ = 0;
  std::shared_ptr<const ReplyBuffer> last_reply_;  // reply of round_ - 1, for resends
  bool last_reply_dense_ = false;
  std::vector<float> residual_;  // two-way compression
  bool resync_ = false;
  bool dense_next_reply_ = false;  // the round completing the resync replies densely
};

}  // namespace sieve

#endif  // SIEVE_SERVER_SHARD_BSP_SHARD_H_
