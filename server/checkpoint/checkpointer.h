// ShardCheckpointer: when a sieve-server restores its shard from a checkpoint and when it writes
// one. It wraps server/checkpoint/checkpoint.h with the daemon's policy:
//  - restore: "always", "never", or "auto" (only when the server joins a job that is already
//    running, i.e. it is a restarted process re-admitted under its rank). A missing checkpoint is
//    not an error (the shard starts from its initial weights and this is logged); a corrupt,
//    truncated or foreign one is, and the server must not start.
//  - write: every `every_rounds` completed BSP rounds and/or every `every_seconds`, never while
//    the shard is resynchronizing after a restore (its round is not settled yet). A failed write
//    is logged and training goes on (the previous checkpoint stays valid).
//
// Thread-safety: not thread-safe; the server's main thread drives it.
#ifndef SIEVE_SERVER_CHECKPOINT_CHECKPOINTER_H_
#define SIEVE_SERVER_CHECKPOINT_CHECKPOINTER_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "server/checkpoint/checkpoint.h"
#include "server/shard/shard_server.h"

namespace sieve {

struct CheckpointerOptions {
  std::string dir;            // empty: no checkpoints at all
  uint64_t every_rounds = 0;  // 0 = not by rounds
  double every_seconds = 0;   // 0 = not by time
  std::string restore = "auto";
  bool rejoining = false;  // the node table this server got is not the job's first
  bool copy = false;       // a copy of a shard, whose state comes from its primary's snapshot
};

class ShardCheckpointer {
 public:
  // Validates the options, creates `dir`, and restores `shard` when the policy says so. A server
  // rejoining a running job that restores no checkpoint (none written yet, no `dir`, or the
  // policy "never") restarts the shard from its initial weights as a checkpoint of round 0, so
  // that it resynchronizes with the workers (BspShard's resync) instead of refusing their rounds;
  // every update the shard had is lost, and restored_round() is 0. Not for a copy, nor for a
  // shard that awaits its initial weights from worker 0. Errors: InvalidArgument (bad policy, an
  // interval without a directory), Unavailable (cannot create the directory), and those of
  // ReadCheckpoint except NotFound.
  Status Init(const CheckpointerOptions& options, const CheckpointConfig& config, int rank,
              ShardServer* shard);

  // Writes a checkpoint of `shard` when one is due.
  void MaybeWrite(const ShardServer& shard);
  // Writes one now (e.g. at the end). Errors as WriteCheckpoint.
  Status Write(const ShardServer& shard);

  uint64_t written() const { return written_; }
  int64_t restored_round() const { return restored_round_; }  // -1 = nothing restored

 private:
  using Clock = std::chrono::steady_clock;
  // Init's steps: the options, the directory and a restore from the file.
  Status OpenAndRestore(const CheckpointerOptions& options, const CheckpointConfig& config,
                        int rank, ShardServer* shard);
  CheckpointerOptions options_;
  std::string path_;
  uint64_t config_hash_ = 0;
  uint64_t lo_ = 0, hi_ = 0;
  uint64_t last_round_ = 0;
  Clock::time_point last_time_;
  uint64_t written_ = 0;
  int64_t restored_round_ = -1;
};

}  // namespace sieve

#endif  // SIEVE_SERVER_CHECKPOINT_CHECKPOINTER_H_
