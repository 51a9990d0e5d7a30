// ShardServer: the state machine of one server shard — the authoritative weights of the key
// range [lo, hi) and the consistency logic that turns workers' pushes into replies. It does no
// I/O: every event returns the replies to send through an Outbox, so it is tested without
// sockets and driven by the sieve-server daemon.
//
// Semantics (docs/architecture.md):
//  BSP  pushes of round t from every live worker are summed: each sparse push is merged into the
//       round's ascending union of indices with per-index sums (sequential work in the push and
//       union sizes; no access proportional to the shard, and no per-shard accumulator: a whole-
//       shard one exists only while dense rounds run). When the last arrives, w[i] -= a[i]/N over
//       the union (N = pushes aggregated) and every worker gets an UPDATE with the union and the
//       new values. Optional two-way compression
//       sparsifies a/N through a server residual before applying, so replies hold <= k' pairs.
//  ASP  each push is applied at once (w[i] -= scale·v) and answered with every index changed
//       since that worker's previous reply and its current value: the update pass records the
//       pushed indices' new values in a shared change log, and a reply merges the records the
//       worker has not seen (server/change_log.h), so it reads no weight at a scattered position;
//       past half the shard of pending changes a worker gets a dense reply instead.
//  SSP  ASP, but a worker's reply (which lets it start its next round) is held back while its
//       clock (rounds pushed) is more than `staleness` ahead of the slowest live worker's.
//  A push repeated for a (worker, round) already applied is never applied again: BSP resends the
//  round's reply, ASP/SSP answer with every change the worker has not been sent yet. Pushes for any
//  other round get ERROR_UNKNOWN_ROUND. Errors change no state.
//
// Files: shard_server.cc (events, worker deaths and rejoins, Restore), shard_server_bsp.cc (the
// BSP round: merge, completion, two-way compression, joiners, resync) and shard_server_async.cc
// (the ASP/SSP clock and replies). Per-worker state is one WorkerState per rank.
//
// Threads (options.threads = N): the shard owns a ThreadTeam (base/thread_team.h) of N - 1
// helper threads, started in Create and joined in the destructor; they run only inside the event
// that uses them and sleep otherwise. A BSP round's merges, its completion (the update pass and
// the reply's arrays, the dense round, two-way compression's residual update) and an ASP/SSP
// push's update pass are split by index range: each thread handles a contiguous key range or a
// contiguous run of the sorted union, so no two threads touch the same weight and the hot loops
// take no lock. Every weight gets the same float operations in the same order as with one thread
// (equal indices still add in push arrival order), so results are bitwise independent of N.
// Work of fewer than parallel_min_pairs pairs per thread runs on the calling thread alone.
// Not parallel: ASP/SSP replies (ChangeLog::Take's merge tree), the server-side selection,
// copies of the whole shard for dense replies.
//
// Thread-safety: not thread-safe; one thread drives it (its helpers are internal). Reply buffers
// may be read by other threads (ZeroMQ) after the call that produced them returns, and a part of
// a split reply from the moment it is handed to the part sink; they are never modified again.
#ifndef SIEVE_SERVER_SHARD_SERVER_H_
#define SIEVE_SERVER_SHARD_SERVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/huge_page_allocator.h"
#include "base/log_limiter.h"
#include "base/status.h"
#include "base/thread_team.h"
#include "kernels/compressor.h"
#include "proto/sieve.pb.h"
#include "server/change_log.h"
#include "server/consistency.h"
#include "server/reply_pool.h"

namespace sieve {

struct ShardServerOptions {
  uint32_t num_workers = 1;
  Consistency consistency = Consistency::kBsp;
  int staleness = 0;         // SSP bound s >= 0
  float async_scale = 0.0f;  // ASP/SSP step scale; 0 = 1/num_workers
  // Two-way compression of the BSP aggregate (kNone = off).
  Compressor server_compressor = Compressor::kNone;
  double server_density = 0.0;  // ρ' of the shard, in (0, 1]
  // BSP: a sparse reply of more pairs than this is produced in parts of about this many pairs
  // (at most kMaxReplyParts), each emitted as soon as its slice of the union is applied (see
  // set_part_sink). 0 = always whole.
  uint64_t reply_part_pairs = 0;
  // The shard's initial weights come from worker 0 (MSG_INIT; a server started without a model):
  // until they arrive, PUSH and PULL_DENSE are refused with ERROR_NOT_INITIALIZED. false = the
  // `initial` vector given to Create is the start (INIT is then acknowledged and ignored).
  bool await_initial_weights = false;
  // Threads that share the shard's work (1..ThreadTeam::kMaxThreads; 1 = the calling thread
  // alone; see "Threads" above). sieve-server --server_threads.
  uint32_t threads = 1;
  // A parallel region uses at most (pairs of work) / parallel_min_pairs threads (>= 1): small
  // rounds stay on the calling thread, where waking helpers would cost more than it saves.
  // Tests lower it to split small rounds.
  uint64_t parallel_min_pairs = 16384;
};

// What to send after an event. For UPDATE/DENSE, `buffer` holds the arrays (shared by all
// recipients of the same round, and by every part of a split reply); for ERROR, `code` and
// `message`. A part of a split sparse UPDATE (parts > 1) covers pairs [begin, end) of the buffer;
// otherwise the whole buffer is meant.
struct Reply {
  int worker = 0;  // worker rank
  pb::MsgType type = pb::MSG_UPDATE;
  uint64_t round = 0;
  bool dense = false;
  std::shared_ptr<const ReplyBuffer> buffer;
  pb::ErrorCode code = pb::ERROR_NONE;
  std::string message;
  pb::MsgType rejected = pb::MSG_PUSH;  // ERROR: the type of the rejected message
  uint32_t part = 0;
  uint32_t parts = 1;
  size_t begin = 0;
  size_t end = 0;

  // An UPDATE of `round` to `worker`: the whole shard (`dense`) or the buffer's pairs.
  static Reply Update(int worker, uint64_t round, bool dense,
                      std::shared_ptr<const ReplyBuffer> buffer) {
    return Make(worker, pb::MSG_UPDATE, round, dense, std::move(buffer));
  }
  // The whole shard (PULL_DENSE's answer) as of `round`.
  static Reply Dense(int worker, uint64_t round, std::shared_ptr<const ReplyBuffer> buffer) {
    return Make(worker, pb::MSG_DENSE, round, true, std::move(buffer));
  }
  static Reply JoinAck(int worker, uint64_t round) {
    return Make(worker, pb::MSG_JOIN_ACK, round, false, nullptr);
  }
  static Reply InitAck(int worker) { return Make(worker, pb::MSG_INIT_ACK, 0, false, nullptr); }
  // An ERROR answering a `rejected` message of `round`.
  static Reply Error(int worker, uint64_t round, pb::ErrorCode code, std::string message,
                     pb::MsgType rejected) {
    Reply r = Make(worker, pb::MSG_ERROR, round, false, nullptr);
    r.code = code;
    r.message = std::move(message);
    r.rejected = rejected;
    return r;
  }

 private:
  static Reply Make(int worker, pb::MsgType type, uint64_t round, bool dense,
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

struct ShardServerStats {
  uint64_t pushes_applied = 0;
  uint64_t duplicates = 0;
  uint64_t rejected = 0;
  uint64_t rounds_completed = 0;  // BSP rounds
  int max_staleness = 0;          // SSP/ASP: largest clock lead a released reply had
  uint64_t staleness_sum = 0;     // SSP/ASP: Σ clock lead over released replies (mean = / count)
  uint64_t released_replies = 0;  // SSP/ASP: replies released (the mean's denominator)
  double pushed_sum = 0;        // Σ of every applied pushed value (fp64), for conservation checks
  uint64_t resync_replies = 0;  // dense UPDATEs sent to resynchronize workers after a restore
  uint64_t rejoins = 0;         // restarted workers counted again (see OnJoin)
  // Two-way compression rounds whose server-side selection failed (a non-finite aggregate): the
  // round's reply is empty and the residual keeps the aggregate; each one is logged.
  uint64_t selection_failures = 0;
  uint64_t dense_pulls_dropped = 0;  // PULL_DENSEs dropped: that worker's DENSE was in flight
};

class ShardServer {
 public:
  // `initial` holds the shard's initial weights (length hi - lo >= 1). Errors: InvalidArgument
  // for bad options (zero workers, negative staleness, density outside (0, 1], threads outside
  // 1..ThreadTeam::kMaxThreads, parallel_min_pairs = 0).
  static StatusOr<std::unique_ptr<ShardServer>> Create(const ShardServerOptions& options,
                                                       std::vector<float> initial);
  ShardServer(const ShardServer&) = delete;
  ShardServer& operator=(const ShardServer&) = delete;

  // A validated PUSH (indices shard-relative, strictly ascending, < size(); values finite).
  // Dense pushes carry size() values and no indices.
  void OnPush(int worker, uint64_t round, std::span<const uint32_t> indices,
              std::span<const float> values, bool dense, Outbox* out);
  // Answers with a DENSE of the whole shard. Its round tells a (re)joining worker where the job
  // is: BSP, the round being aggregated; ASP/SSP, the slowest live worker's clock (or this
  // worker's own next round when larger). A worker that is dead and not re-admitted gets
  // ERROR_NOT_REGISTERED. At most one DENSE per worker is in flight: while ZeroMQ still holds the
  // previous one (its buffer is alive), a PULL_DENSE is dropped without a reply and counted
  // (dense_pulls_dropped): a whole-shard reply per 30-byte request would let a peer fill the
  // server's memory; the worker's resends are answered once the first reply has left.
  void OnPullDense(int worker, Outbox* out);
  // Worker `worker`'s offer of the shard's initial weights (size() finite values, validated by
  // the codec). While the shard awaits them (options.await_initial_weights, before any Restore)
  // and worker is 0, they become the weights; every later or repeated INIT from worker 0 is only
  // acknowledged (INIT_ACK either way). From another worker: ERROR_NOT_INITIALIZED, no change.
  void OnInit(int worker, std::span<const float> values, Outbox* out);
  bool awaiting_initial_weights() const { return awaiting_init_; }

  // The scheduler declared `worker` dead: it no longer counts for BSP rounds or SSP clocks.
  void OnWorkerDead(int worker, Outbox* out);

  // Worker rejoin (docs/architecture.md, "Worker rejoin"). OnWorkerRejoined: the scheduler
  // re-admitted a dead worker's rank (a new process); it may now pull and send JOIN. Ignored for
  // a live worker. OnJoin(worker, round): the re-admitted worker asks to be counted from `round`
  // on, answered with JOIN_ACK (also for a repeated JOIN), or ERROR_JOIN_TOO_LATE when BSP has
  // passed `round`, or ERROR_NOT_REGISTERED when the worker was not re-admitted.
  //  BSP  the worker is counted again from the boundary where round_ becomes `round`: until
  //       then rounds complete without it, and its PUSH of `round` is held. Its UPDATE for that
  //       first round is the dense shard, so its replica equals the server's from then on.
  //  ASP/SSP  counted at once; its clock becomes max(its old clock, round) and its next reply is
  //       dense.
  // Retries (BSP): a joiner refused by one server asks every server again for a later round.
  // A JOIN for a later round replaces a pending one; one for an earlier round than the pending
  // one is stale (a resend overtaken by the retry) and ignored without a reply. A joiner already
  // counted from its join round but that has not pushed yet is uncounted again and moved to the
  // later round (the round it left may then complete without it); once it has pushed, a JOIN is
  // only acknowledged.
  void OnWorkerRejoined(int worker);
  void OnJoin(int worker, uint64_t round, Outbox* out);

  // Restart from a checkpoint (server/checkpoint.h): the shard's weights become `weights` (size()
  // values) and, in BSP, `round` (rounds completed at the snapshot) is the earliest round the
  // shard will aggregate. Call before any other event. Errors: InvalidArgument (wrong length).
  //
  // BSP resync after a restore: the workers' rounds are unknown (they may be ahead of the
  // checkpoint, and a kill between replies can leave them one round apart), so the first push of
  // every live worker is held, not applied. When all are in, E = max(round, their rounds): held
  // pushes of round E are aggregated as round E; a worker whose held push is older gets, at once,
  // a dense UPDATE of its own round holding the restored weights (its push is dropped) and joins
  // round E with its next push. The reply that completes round E is dense as well, so every
  // worker's replica of the shard equals the server's again. Updates to the shard between the
  // checkpoint and the restart are lost (at most the checkpoint interval).
  // ASP/SSP: the weights are restored and every worker's next reply is dense.
  Status Restore(uint64_t round, std::vector<float> weights);

  // Called with the outbox right after each part of a split reply was appended, from inside the
  // event that produced it; it may send the outbox's replies and clear it, so a part travels while
  // the next one is computed. Without a sink the parts stay in the outbox like any reply.
  void set_part_sink(std::function<void(Outbox*)> sink) { part_sink_ = std::move(sink); }
  bool resyncing() const { return resync_; }

  std::span<const float> weights() const { return w_; }
  uint64_t size() const { return w_.size(); }
  uint64_t round() const { return round_; }  // BSP: the round being aggregated
  const ShardServerStats& stats() const { return stats_; }
  uint32_t threads() const { return team_->size(); }
  // Parallel regions run on more than one thread so far (tests: the split paths were taken).
  uint64_t parallel_regions() const { return team_->parallel_regions(); }

 private:
  ShardServer(const ShardServerOptions& options, std::vector<float> initial);
  void Reject(int worker, uint64_t round, pb::ErrorCode code, std::string message, Outbox* out,
              pb::MsgType rejected = pb::MSG_PUSH);
  void BspPush(int worker, uint64_t round, std::span<const uint32_t> indices,
               std::span<const float> values, bool dense, Outbox* out);
  void BspMaybeComplete(Outbox* out);
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
  // stats_.pushed_sum's fp64 Σ of a push, by fixed blocks of kSumBlock values (SumAsDouble each,
  // added in block order), so it is bitwise the same for any thread count and its cost is split
  // too: PrepareBlockSums before a region of `count` threads, SumBlocks(values, t, count) on each
  // thread t inside it (blocks t, t + count, ...), AddBlockSums after it.
  static constexpr size_t kSumBlock = 4096;
  void PrepareBlockSums(std::span<const float> values);
  void SumBlocks(std::span<const float> values, uint32_t t, uint32_t count);
  void AddBlockSums();
  void ClearUnion();
  // The sparse completion: w[i] -= a[i]/n over the union into the reply `buf` (its values, and
  // its indices), emitting the parts of a split reply as they are done. True when it was sent in
  // parts.
  bool ApplyUnion(float n, ReplyBuffer* buf, const std::shared_ptr<const ReplyBuffer>& shared,
                  Outbox* out);
  void AsyncPush(int worker, uint64_t round, std::span<const uint32_t> indices,
                 std::span<const float> values, bool dense, Outbox* out);
  void AsyncRelease(Outbox* out);
  void AsyncReply(int worker, uint64_t round, Outbox* out);
  void ResyncPush(int worker, uint64_t round, std::span<const uint32_t> indices,
                  std::span<const float> values, bool dense, Outbox* out);
  void ResyncMaybeFinish(Outbox* out);
  // BSP: stops counting the live `worker` and completes the round if it waited for it alone.
  void BspUncount(int worker, Outbox* out);
  void BspAdmitJoiners(Outbox* out);  // counts joiners whose join round is round_

  const ShardServerOptions options_;
  // Two-way compression's failed selections are logged at most 20 per 10 s (a peer's pushes can
  // make the aggregate non-finite every round; each one is counted in the stats).
  LogLimiter selection_log_{20, std::chrono::seconds(10)};
  std::unique_ptr<ThreadTeam> team_;  // options_.threads (the calling thread is its thread 0)
  std::function<void(Outbox*)> part_sink_;
  HugePageVector<float> w_;  // huge pages: the sparse rounds touch it at scattered indices
  ReplyPool pool_;
  ShardServerStats stats_;
  // A push kept for later: during a resync after Restore, or a joiner's push of its join round.
  struct HeldPush {
    bool held = false;
    uint64_t round = 0;
    bool dense = false;
    std::vector<uint32_t> indices;
    std::vector<float> values;
    // Keeps a copy of a push; true when one was already held (the new one replaces it).
    bool Hold(uint64_t r, bool d, std::span<const uint32_t> idx, std::span<const float> vals) {
      const bool had = held;
      held = true;
      round = r;
      dense = d;
      indices.assign(idx.begin(), idx.end());
      values.assign(vals.begin(), vals.end());
      return had;
    }
  };
  // What the shard knows of one worker (workers_[rank]).
  struct WorkerState {
    bool live = true;
    std::weak_ptr<ReplyBuffer> dense_in_flight;  // its last DENSE
    // BSP.
    bool arrived = false;  // pushed round_
    HeldPush held;         // resync after Restore: its latest push
    // Rejoin.
    bool rejoined = false;         // re-admitted by the scheduler, not yet counted
    int64_t join_round = -1;       // BSP: accepted join round (-1 = none)
    HeldPush join_push;            // BSP: its PUSH of its join round, held
    bool dense_reply_to = false;   // BSP: its next UPDATE is the whole shard
    bool unpushed_joiner = false;  // BSP: counted from its join round, no push arrived yet
    // ASP / SSP.
    int64_t last_round = -1;  // last round applied (-1 = none)
    bool all_dirty = false;   // its next reply is the whole shard
    bool waiting = false;     // SSP: reply held back
    uint64_t waiting_round = 0;
  };
  // Whether worker w is live, for ChangeLog::Trim (no allocation: it runs on every ASP reply).
  std::function<bool(uint32_t)> IsLive() const {
    return [this](uint32_t w) { return workers_[w].live; };
  }

  std::vector<WorkerState> workers_;
  uint32_t live_count_;

  // BSP.
  uint64_t round_ = 0;
  // The round's sparse pushes merged: ascending union of their indices and per-index sums, kept
  // in union_count_ parts of consecutive key ranges (part s holds the keys in [union_keys_[s],
  // union_keys_[s + 1]); one part with one thread, kPartsPerThread per thread used otherwise), so
  // each merge and the completion split it across threads without moving it. Each merge recomputes
  // the parts (a near-equal share of the pairs each) into merge_parts_, then the two swap. Dense
  // pushes go to acc_, a whole-shard accumulator that exists only during a dense round.
  struct UnionPart {
    std::vector<uint32_t> idx;
    std::vector<float> sum;
  };
  static constexpr uint32_t kPartsPerThread = 4;
  std::vector<UnionPart> union_parts_;  // kPartsPerThread per thread; [0, union_count_) in use
  std::vector<UnionPart> merge_parts_;  // scratch of MergeIntoUnion
  std::vector<uint64_t> union_keys_;    // union_count_ + 1 key bounds, 0 first, size() last
  std::vector<uint64_t> new_keys_;      // scratch: the bounds of the merge in progress
  std::vector<size_t> union_offsets_;   // scratch: part s starts at pair union_offsets_[s]
  std::vector<double> block_sums_;      // scratch of SumBlocks
  uint32_t union_count_ = 1;
  // ApplyUnion's completion flags, one per chunk (kMaxReplyParts; only with threads > 1).
  std::unique_ptr<std::atomic<uint32_t>[]> chunk_done_;
  std::vector<float> acc_;
  bool dense_round_ = false;
  uint32_t contributions_ = 0;
  std::shared_ptr<const ReplyBuffer> last_reply_;  // reply of round_ - 1, for resends
  bool last_reply_dense_ = false;
  std::vector<float> residual_;  // two-way compression

  bool awaiting_init_ = false;  // see ShardServerOptions::await_initial_weights

  // BSP resync after Restore (see there).
  bool resync_ = false;
  bool dense_next_reply_ = false;  // the round completing the resync replies densely

  // ASP / SSP.
  float scale_ = 1.0f;
  // Every change since each worker's last reply, with the values after it (server/change_log.h).
  std::unique_ptr<ChangeLog> changes_;
  std::vector<float> new_values_;  // scratch: a push's new weights
};

}  // namespace sieve

#endif  // SIEVE_SERVER_SHARD_SERVER_H_
