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
//       With backup workers b the round completes at max(1, live - b) pushes; a late push is
//       merged into a later round or refused (ShardServerOptions::backup_workers, late_pushes).
//  ASP  each push is applied at once (w[i] -= scale·v) and answered with every index changed
//       since that worker's previous reply and its current value: the update pass records the
//       pushed indices' new values in a shared change log, and a reply merges the records the
//       worker has not seen (server/shard/change_log.h), so it reads no weight at a scattered
//       position; past half the shard of pending changes a worker gets a dense reply instead.
//  SSP  ASP, but a worker's reply (which lets it start its next round) is held back while its
//       clock (rounds pushed) is more than `staleness` ahead of the slowest live worker's.
//  A push repeated for a (worker, round) already applied is never applied again: BSP resends the
//  round's reply, ASP/SSP answer with every change the worker has not been sent yet. Under BSP
//  without backup workers a push for any other round gets ERROR_UNKNOWN_ROUND (with backup workers
//  a late push is merged or refused as above; ASP/SSP have no open round to miss). Errors change no
//  state.
//
// Objects: ShardServer (this header) is the interface the service drives and the state both modes
// share (shard_server.cc: the common checks, pulls, INIT, deaths and re-admissions, Restore);
// BspShard (server/shard/bsp_shard.h; bsp_shard.cc: the round's merge and completion,
// bsp_shard_rejoin.cc: joiners and the resync after Restore; it also implements RoundShard,
// server/shard/round_shard.h, the round-based half reached through rounds()) and AsyncShard
// (server/shard/async_shard.h: the ASP/SSP clock and replies) each hold their mode's per-worker
// state. Replies (server/shard/shard_reply.h) are in the core's own ReplyType; a refusal carries
// the protocol's pb::ErrorCode and the rejected pb::MsgType, which the service sends as they are.
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
#ifndef SIEVE_SERVER_SHARD_SHARD_SERVER_H_
#define SIEVE_SERVER_SHARD_SHARD_SERVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/huge_page_allocator.h"
#include "base/status.h"
#include "base/thread_team.h"
#include "kernels/compressor.h"
#include "server/shard/consistency.h"
#include "server/shard/reply_pool.h"
#include "server/shard/round_shard.h"
#include "server/shard/shard_reply.h"

namespace sieve {

struct ShardServerOptions {
  uint32_t num_workers = 1;
  Consistency consistency = Consistency::kBsp;
  int staleness = 0;         // SSP bound s >= 0
  float async_scale = 0.0f;  // ASP/SSP step scale; 0 = 1/num_workers
  // ASP/SSP: kInverse applies a push of staleness τ >= 1 with async_scale / τ (consistency.h);
  // BSP refuses anything but kNone.
  StalenessLr staleness_lr = StalenessLr::kNone;
  // BSP backup workers b (Chen et al. 2016; 0 = every live worker is waited for): a round
  // completes once max(1, live - b) of the live workers pushed it, and its UPDATE goes to every
  // live worker. A push of a round that closed without it (late) is, by late_pushes:
  //  kApply   merged into the round being aggregated as one more contribution (applied once, one
  //           or more rounds stale); its round's UPDATE to the worker is flagged push_late, and
  //           the push is answered with a kLatePushAck (also a resend of one applied already).
  //  kReturn  refused (ERROR_LATE_PUSH) and never applied; the UPDATE of its round is flagged
  //           push_missed for the worker, which returns the values to its residual.
  // Requires b < num_workers.
  uint32_t backup_workers = 0;
  LatePushes late_pushes = LatePushes::kApply;
  // BSP: a round's pushes are added in worker-rank order once the round closes, instead of
  // merged as they arrive, so a round's result does not depend on arrival order: runs with the
  // same inputs are bitwise reproducible (and a failed-over shard continues bitwise as the
  // undisturbed run would). Costs a copy of each push and the merge after the last arrival.
  bool ordered_rounds = false;
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

struct ShardServerStats {
  uint64_t pushes_applied = 0;
  uint64_t duplicates = 0;
  uint64_t rejected = 0;
  uint64_t rounds_completed = 0;  // BSP rounds
  uint64_t idle_rounds = 0;       // BSP rounds passed with no live worker (PassIdleRounds)
  // Pairs (index, value) of the UPDATEs sent, a dense one counting the whole shard: BSP one per
  // completed round (the union; mean = / rounds_completed), ASP/SSP one per released reply
  // (mean = / released_replies). Answers to replayed pushes and the resync's dense UPDATEs to
  // workers behind a restore are not counted.
  uint64_t reply_pairs_sum = 0;
  int max_staleness = 0;          // SSP/ASP: largest clock lead a released reply had
  uint64_t staleness_sum = 0;     // SSP/ASP: Σ clock lead over released replies (mean = / count)
  uint64_t released_replies = 0;  // SSP/ASP: replies released (the mean's denominator)
  // SSP/ASP: Σ and largest staleness τ of the applied pushes (consistency.h: the pushes applied
  // since the pusher's last reply was built; mean = push_staleness_sum / pushes_applied).
  uint64_t push_staleness_sum = 0;
  uint64_t max_push_staleness = 0;
  double pushed_sum = 0;        // Σ of every applied pushed value (fp64), for conservation checks
  uint64_t resync_replies = 0;  // dense UPDATEs sent to resynchronize workers after a restore
  uint64_t rejoins = 0;         // restarted workers counted again (see OnJoin)
  // Two-way compression rounds whose server-side selection failed (a non-finite aggregate): the
  // round's reply is empty and the residual keeps the aggregate; each one is logged.
  uint64_t selection_failures = 0;
  uint64_t dense_pulls_dropped = 0;  // PULL_DENSEs dropped: that worker's DENSE was in flight
  // BSP backup workers: Σ over completed rounds of the live workers the round closed without
  // (missed), the late pushes (applied in a later round, or refused with ERROR_LATE_PUSH), and per
  // worker rank the rounds it missed and the longest run of consecutive rounds it missed (sized
  // num_workers when b > 0).
  uint64_t missed = 0;
  uint64_t late_pushes = 0;
  std::vector<uint64_t> missed_by_worker;
  std::vector<uint64_t> longest_miss_run;
};

// A shard's state as a rebuilt copy receives it (ShardServer::TakeSnapshot / InstallSnapshot).
// BSP: the round being aggregated and the weights (the open round's pushes are not in it);
// replicated by its pushes (backup workers, two-way compression) it is taken at a round boundary
// (RoundShard::SnapshotReady) and adds what the round logic knows of each worker and the server
// residual. ASP/SSP also each worker's clock and the shard's version. Both modes replicated by
// pushes carry the applied pushes' count and sum (so the copy's conservation figures continue the
// primary's). `clocks` is empty in BSP, `bsp_clocks` outside BSP replicated by pushes.
struct WorkerClock {
  int64_t last_round = -1;  // the last round applied (-1: none)
  bool waiting = false;     // its reply is not sent yet (SSP's bound holds it back)
  uint64_t waiting_round = 0;
  uint64_t reply_version = 0;  // the shard's version when its last reply was built (or it rejoined)
};
// BSP replicated by its pushes (backup workers, two-way compression), at a round boundary (no
// push of the open round aggregated or held): what the round logic knows of one worker.
struct BspWorkerClock {
  bool counted_last = false;     // its push was aggregated in the round before
  int64_t last_applied = -1;     // the latest round whose push was aggregated (late or not)
  uint64_t miss_run = 0;         // backup workers: consecutive rounds closed without its push
  bool dense_reply_to = false;   // its next UPDATE is the whole shard
  bool unpushed_joiner = false;  // counted from its join round, no push yet
  int64_t join_round = -1;       // its accepted join round (-1: none)
};
struct ShardSnapshot {
  uint64_t round = 0;
  std::vector<float> weights;
  uint64_t version = 0;
  std::vector<WorkerClock> clocks;
  uint64_t pushes_applied = 0;
  double pushed_sum = 0;
  std::vector<BspWorkerClock> bsp_clocks;  // BSP replicated by pushes; else empty
  std::vector<float> residual;             // two-way compression's server residual; else empty
};

// The shard interface ShardService drives, and the state and events both modes share: the
// weights, the reply pool, the thread team, the stats, and for each worker whether it is counted
// (live), re-admitted after a death (rejoined) and its last DENSE. Create returns the object of the
// configured mode: BspShard (server/shard/bsp_shard.h) or AsyncShard (server/shard/async_shard.h,
// ASP and SSP). Every event validates what it can before it changes anything: a refusal is a kError
// reply and changes no state.
class ShardServer {
 public:
  // `initial` holds the shard's initial weights (length hi - lo >= 1). Errors: InvalidArgument
  // for bad options (zero workers, negative staleness, density outside (0, 1], threads outside
  // 1..ThreadTeam::kMaxThreads, parallel_min_pairs = 0).
  static StatusOr<std::unique_ptr<ShardServer>> Create(const ShardServerOptions& options,
                                                       std::vector<float> initial);
  virtual ~ShardServer();
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
  // previous one (its buffer is alive), a pull is dropped without a reply and counted
  // (dense_pulls_dropped): a whole-shard reply per 30-byte request would let a peer fill the
  // server's memory; the worker's resends are answered once the first reply has left.
  void OnPullDense(int worker, Outbox* out);
  // Worker `worker`'s offer of the shard's initial weights (size() finite values, validated by
  // the codec). While the shard awaits them (options.await_initial_weights, before any Restore)
  // and worker is 0, they become the weights; every later or repeated INIT from worker 0 is only
  // acknowledged (kInitAck either way). From another worker: ERROR_NOT_INITIALIZED, no
  // change.
  void OnInit(int worker, std::span<const float> values, Outbox* out);
  bool awaiting_initial_weights() const { return awaiting_init_; }

  // The scheduler declared `worker` dead: it no longer counts for BSP rounds or SSP clocks. A
  // re-admitted worker that dies again before it was counted is forgotten.
  void OnWorkerDead(int worker, Outbox* out);

  // Worker rejoin (docs/architecture.md, "Worker rejoin"). OnWorkerRejoined: the scheduler
  // re-admitted a dead worker's rank (a new process); it may now pull and send JOIN. Ignored for
  // a live worker. OnJoin(worker, round): the re-admitted worker asks to be counted from `round`
  // on, answered with kJoinAck (also for a repeated JOIN), or ERROR_JOIN_TOO_LATE when BSP has
  // passed `round`, or ERROR_NOT_REGISTERED when the worker was not re-admitted. How each mode
  // counts it: BspShard::Join and AsyncShard::Join.
  void OnWorkerRejoined(int worker);
  void OnJoin(int worker, uint64_t round, Outbox* out);

  // Restart from a checkpoint (server/checkpoint/checkpoint.h): the shard's weights become
  // `weights` (size() values); `round` is the rounds completed at the snapshot (BSP: the earliest
  // round the shard will aggregate, after a resync: BspShard::Restored). Call before any other
  // event. Errors: InvalidArgument (wrong length), no change.
  Status Restore(uint64_t round, std::vector<float> weights);

  // Called with the outbox right after each part of a split reply was appended, from inside the
  // event that produced it; it may send the outbox's replies and clear it, so a part travels while
  // the next one is computed. Without a sink the parts stay in the outbox like any reply.
  void set_part_sink(std::function<void(Outbox*)> sink) { part_sink_ = std::move(sink); }

  // The round-based half of the shard (server/shard/round_shard.h: the last round's reply, idle
  // rounds, applying a replicated round, resync, open-round pushes, snapshot readiness): the
  // shard itself in BSP (BspShard), null in ASP/SSP, which have no rounds.
  virtual RoundShard* rounds() { return nullptr; }
  virtual const RoundShard* rounds() const { return nullptr; }

  // The rebuild of a replacement server's copy (ShardSnapshot above). TakeSnapshot: the state a
  // copy needs, as of now (between events; BSP: once RoundShard::SnapshotReady). InstallSnapshot,
  // on a fresh copy: the shard's state becomes the primary's snapshot, every worker counted (the
  // snapshot's deaths follow as OnWorkerDead). BSP: the weights as of the start of round `round`,
  // no previous round's reply (a resend of round - 1 is answered with the whole shard, which is
  // what that UPDATE left on the worker). ASP/SSP: the weights and clocks; each worker's next reply
  // is the whole shard (the copy has no change log from before the snapshot; the values are the
  // same). Errors: InvalidArgument (wrong length, clocks that do not fit the mode or the workers);
  // no change.
  virtual ShardSnapshot TakeSnapshot() const;
  virtual Status InstallSnapshot(ShardSnapshot snapshot) = 0;

  // Whether `worker` (a valid rank) is counted for rounds / clocks, and whether it was
  // re-admitted after a death and is not counted yet (ShardService's promotion reconciles both
  // with the scheduler's view).
  bool counts(int worker) const { return members_[static_cast<size_t>(worker)].live; }
  bool readmitted(int worker) const { return members_[static_cast<size_t>(worker)].rejoined; }

  std::span<const float> weights() const { return w_; }
  uint64_t size() const { return w_.size(); }
  // BSP: the round being aggregated; ASP/SSP: 0 (each worker has its own clock). Both modes
  // report it (checkpoints, snapshots, logs).
  virtual uint64_t round() const { return 0; }
  const ShardServerStats& stats() const { return stats_; }
  const ShardServerOptions& options() const { return options_; }
  uint32_t threads() const { return team_->size(); }
  // Parallel regions run on more than one thread so far (tests: the split paths were taken).
  uint64_t parallel_regions() const { return team_->parallel_regions(); }

 protected:
  ShardServer(const ShardServerOptions& options, std::vector<float> initial);

  // The mode's halves of the events above, called once the common checks passed: `worker` is a
  // valid rank, the push's sizes match, the shard has its weights.
  // Push: `worker` may not be live (a BSP joiner's push is held; otherwise RejectNotLive).
  virtual void Push(int worker, uint64_t round, std::span<const uint32_t> indices,
                    std::span<const float> values, bool dense, Outbox* out) = 0;
  virtual uint64_t PullRound(int worker) const = 0;  // the round a DENSE to `worker` carries
  virtual void Dead(int worker, Outbox* out) = 0;    // `worker` is live
  virtual void Join(int worker, uint64_t round, Outbox* out) = 0;
  // A not-live worker's join state is void (re-admitted anew, or dead again before counted).
  virtual void ForgetJoin(int /*worker*/) {}
  virtual void Restored(uint64_t round) = 0;  // after Restore replaced the weights

  // A kError reply of `code` to `worker`'s `rejected` message; counted in stats().rejected.
  void Reject(int worker, uint64_t round, pb::ErrorCode code, std::string message, Outbox* out,
              pb::MsgType rejected = pb::MSG_PUSH);
  // The refusal of a push from a worker that is not counted.
  void RejectNotLive(int worker, uint64_t round, Outbox* out);
  // The whole shard in a pooled buffer.
  std::shared_ptr<const ReplyBuffer> CopyOfShard();

  // stats().pushed_sum's fp64 Σ of a push, by fixed blocks of kSumBlock values (SumAsDouble each,
  // added in block order), so it is bitwise the same for any thread count and its cost is split
  // too: PrepareBlockSums before a region of `count` threads, SumBlocks(values, t, count) on each
  // thread t inside it (blocks t, t + count, ...), AddBlockSums after it.
  static constexpr size_t kSumBlock = 4096;
  void PrepareBlockSums(std::span<const float> values);
  void SumBlocks(std::span<const float> values, uint32_t t, uint32_t count);
  void AddBlockSums();

  // The shared state, for the modes' logic (options(), weights(), counts() and readmitted() are
  // public): the weights to update in place (their length never changes), the pool of reply
  // buffers, the thread team (its calling thread is thread 0), the stats to count in, and how
  // many workers are counted.
  std::span<float> mutable_weights() { return w_; }
  ReplyPool& pool() { return pool_; }
  ThreadTeam& team() { return *team_; }
  ShardServerStats& mutable_stats() { return stats_; }
  uint32_t live_count() const { return live_count_; }

  // Counts / uncounts a worker (keeps live_count()).
  void SetLive(int worker, bool live);
  // Marks `worker` re-admitted by the scheduler and not counted yet (readmitted()), or not.
  void SetReadmitted(int worker, bool readmitted);
  // A re-admitted worker is counted again: live, no longer readmitted().
  void CountRejoined(int worker);
  // Hands the outbox to the part sink (set_part_sink) right after a part of a split reply was
  // appended; without a sink the part stays in the outbox.
  void EmitPart(Outbox* out);

 private:
  // What every mode knows of one worker (members_[rank]).
  struct Member {
    bool live = true;                            // counted for rounds (BSP) or clocks (SSP)
    bool rejoined = false;                       // re-admitted by the scheduler, not yet counted
    std::weak_ptr<ReplyBuffer> dense_in_flight;  // its last DENSE
  };

  const ShardServerOptions options_;
  std::unique_ptr<ThreadTeam> team_;  // options_.threads (the calling thread is its thread 0)
  std::function<void(Outbox*)> part_sink_;
  HugePageVector<float> w_;  // huge pages: the sparse rounds touch it at scattered indices
  ReplyPool pool_;
  ShardServerStats stats_;
  std::vector<Member> members_;
  uint32_t live_count_;
  bool awaiting_init_ = false;      // see ShardServerOptions::await_initial_weights
  std::vector<double> block_sums_;  // scratch of SumBlocks
};

}  // namespace sieve

#endif  // SIEVE_SERVER_SHARD_SHARD_SERVER_H_
