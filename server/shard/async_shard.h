// AsyncShard: a shard in ASP or SSP mode (server/shard/shard_server.h states the semantics). Each
// push is applied at once and recorded in a change log (server/shard/change_log.h); a worker's
// reply holds every change since its previous reply, or the whole shard once its pending changes
// pass half the shard. SSP holds a worker's reply back while its clock (rounds pushed) leads the
// slowest live worker's by more than the staleness bound.
//
// Staleness: the shard counts the pushes it applied (its version); a push's staleness τ is the
// version now minus the version when the pushing worker's last reply was built (0 before its first
// reply), and StalenessLr::kInverse applies it with scale / τ when τ >= 1.
//
// Snapshot (a rebuilt copy): the weights, the version and every worker's clock; the copy has no
// change log from before it, so each worker's next reply from it is the whole shard.
//
// Join: a re-admitted worker is counted at once; its clock becomes max(its old clock, the join
// round) and its next reply is the whole shard. Restore: every worker's next reply is dense.
//
// Thread-safety: as ShardServer (one driving thread; the team's helpers are internal).
#ifndef SIEVE_SERVER_SHARD_ASYNC_SHARD_H_
#define SIEVE_SERVER_SHARD_ASYNC_SHARD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "server/shard/change_log.h"
#include "server/shard/shard_server.h"

namespace sieve {

class AsyncShard : public ShardServer {
 public:
  // Options as validated by ShardServer::Create (consistency kAsp or kSsp).
  AsyncShard(const ShardServerOptions& options, std::vector<float> initial);

  ShardSnapshot TakeSnapshot() const override;
  Status InstallSnapshot(ShardSnapshot snapshot) override;

 protected:
  void Push(int worker, uint64_t round, std::span<const uint32_t> indices,
            std::span<const float> values, bool dense, Outbox* out) override;
  uint64_t PullRound(int worker) const override;
  void Dead(int worker, Outbox* out) override;
  void Join(int worker, uint64_t round, Outbox* out) override;
  void Restored(uint64_t round) override;

 private:
  // What the clock knows of one worker (workers_[rank]): its WorkerClock (shard_server.h), the
  // part a snapshot carries, and whether its next reply is the whole shard; the base holds live
  // and rejoined.
  struct WorkerState : WorkerClock {
    bool all_dirty = false;  // its next reply is the whole shard
  };
  // The step scale of a push from `worker` now, counting its staleness in the stats.
  float PushScale(int worker);
  void ApplySparse(std::span<const uint32_t> indices, std::span<const float> values, float scale);
  void ApplyDense(std::span<const float> values, float scale);
  void Release(Outbox* out);  // sends every reply the clock allows
  void SendReply(int worker, uint64_t round, Outbox* out);
  void AllDirty();  // every worker's next reply is the whole shard
  // Whether worker w is live, for ChangeLog::Trim (no allocation: it runs on every reply).
  std::function<bool(uint32_t)> IsLive() const {
    return [this](uint32_t w) { return counts(static_cast<int>(w)); };
  }

  std::vector<WorkerState> workers_;
  float scale_ = 1.0f;    // the step scale of a fresh push
  uint64_t version_ = 0;  // pushes applied since the start
  // Every change since each worker's last reply, with the values after it.
  ChangeLog changes_;
  std::vector<float> new_values_;  // scratch: a push's new weights
};

}  // namespace sieve

#endif  // SIEVE_SERVER_SHARD_ASYNC_SHARD_H_
