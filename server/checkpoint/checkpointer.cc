#include "server/checkpoint/checkpointer.h"

#include <glog/logging.h>

#include <filesystem>
#include <system_error>
#include <vector>

#include "server/shard/round_shard.h"

namespace sieve {

Status ShardCheckpointer::Init(const CheckpointerOptions& options, const CheckpointConfig& config,
                               int rank, ShardServer* shard) {
  SIEVE_RETURN_IF_ERROR(OpenAndRestore(options, config, rank, shard));
  if (!options.rejoining || options.copy || restored_round_ >= 0 ||
      shard->awaiting_initial_weights()) {
    return Status::Ok();
  }
  LOG(WARNING) << "server restarted in a running job without a checkpoint of shard [" << config.lo
               << ", " << config.hi
               << "): it starts again from its initial weights, as of round 0; every update the "
                  "shard had is lost";
  std::vector<float> initial(shard->weights().begin(), shard->weights().end());
  SIEVE_RETURN_IF_ERROR(shard->Restore(0, std::move(initial)));
  restored_round_ = 0;
  last_round_ = 0;
  return Status::Ok();
}

Status ShardCheckpointer::OpenAndRestore(const CheckpointerOptions& options,
                                         const CheckpointConfig& config, int rank,
                                         ShardServer* shard) {
  options_ = options;
  if (options.restore != "auto" && options.restore != "always" && options.restore != "never") {
    return InvalidArgumentError("--restore must be auto, always or never, not '" + options.restore +
                                "'");
  }
  if (options.every_seconds < 0) return InvalidArgumentError("checkpoint interval < 0");
  if (options.dir.empty()) {
    if (options.every_rounds > 0 || options.every_seconds > 0) {
      return InvalidArgumentError("a checkpoint interval needs --checkpoint_dir");
    }
    return Status::Ok();
  }
  std::error_code ec;
  std::filesystem::create_directories(options.dir, ec);
  if (ec) return UnavailableError("cannot create " + options.dir + ": " + ec.message());
  path_ = CheckpointPath(options.dir, rank);
  config_hash_ = ConfigHash(config);
  lo_ = config.lo;
  hi_ = config.hi;
  last_time_ = Clock::now();
  last_round_ = shard->round();
  const bool restore =
      options.restore == "always" || (options.restore == "auto" && options.rejoining);
  if (!restore) return Status::Ok();
  auto ckpt = ReadCheckpoint(path_, config_hash_, lo_, hi_);
  if (ckpt.status().code() == StatusCode::kNotFound) {
    LOG(WARNING) << "no checkpoint at " << path_;
    return Status::Ok();
  }
  if (!ckpt.ok()) return ckpt.status();
  SIEVE_RETURN_IF_ERROR(shard->Restore(ckpt->round, std::move(ckpt->weights)));
  restored_round_ = static_cast<int64_t>(ckpt->round);
  last_round_ = ckpt->round;
  LOG(INFO) << "restored shard [" << lo_ << ", " << hi_ << ") from " << path_ << " at round "
            << ckpt->round;
  return Status::Ok();
}

void ShardCheckpointer::MaybeWrite(const ShardServer& shard) {
  const RoundShard* rounds = shard.rounds();
  if (path_.empty() || (rounds != nullptr && rounds->resyncing())) return;
  const bool by_rounds =
      options_.every_rounds > 0 && shard.round() >= last_round_ + options_.every_rounds;
  const bool by_time =
      options_.every_seconds > 0 &&
      std::chrono::duration<double>(Clock::now() - last_time_).count() >= options_.every_seconds;
  if (!by_rounds && !by_time) return;
  Status s = Write(shard);
  if (!s.ok()) LOG(ERROR) << "checkpoint failed (the previous one stays): " << s.ToString();
}

Status ShardCheckpointer::Write(const ShardServer& shard) {
  if (path_.empty()) return FailedPreconditionError("no --checkpoint_dir");
  Checkpoint c;
  c.config_hash = config_hash_;
  c.round = shard.round();
  c.lo = lo_;
  c.hi = hi_;
  const auto w = shard.weights();
  c.weights.assign(w.begin(), w.end());
  last_round_ = shard.round();
  last_time_ = Clock::now();
  SIEVE_RETURN_IF_ERROR(WriteCheckpoint(path_, c));
  ++written_;
  return Status::Ok();
}

}  // namespace sieve
