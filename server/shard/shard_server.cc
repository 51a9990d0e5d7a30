#include "server/shard/shard_server.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "server/shard/async_shard.h"
#include "server/shard/bsp_shard.h"
#include "server/shard/sum_as_double.h"

namespace sieve {
namespace {

constexpr char kAwaitingInit[] =
    "this server was started without a model and waits for worker 0's initial weights (INIT)";

}  // namespace

StatusOr<std::unique_ptr<ShardServer>> ShardServer::Create(const ShardServerOptions& options,
                                                           std::vector<float> initial) {
  if (options.num_workers == 0) return InvalidArgumentError("a shard server needs >= 1 worker");
  if (options.staleness < 0) return InvalidArgumentError("staleness must be >= 0");
  if (initial.empty()) return InvalidArgumentError("empty shard");
  if (initial.size() > (uint64_t{1} << 32)) return InvalidArgumentError("shard longer than 2^32");
  if (options.server_compressor != Compressor::kNone &&
      !(options.server_density > 0.0 && options.server_density <= 1.0)) {
    return InvalidArgumentError("server density must be in (0, 1]");
  }
  if (options.async_scale < 0 || !std::isfinite(options.async_scale)) {
    return InvalidArgumentError("async scale must be finite and >= 0");
  }
  if (options.threads < 1 || options.threads > ThreadTeam::kMaxThreads) {
    return InvalidArgumentError("a shard server runs on 1.." +
                                std::to_string(ThreadTeam::kMaxThreads) + " threads, got " +
                                std::to_string(options.threads));
  }
  if (options.consistency == Consistency::kBsp && options.staleness_lr != StalenessLr::kNone) {
    return InvalidArgumentError("staleness_lr applies to asp and ssp, not bsp");
  }
  if (options.backup_workers > 0 && options.consistency != Consistency::kBsp) {
    return InvalidArgumentError("backup workers apply to bsp, not asp or ssp");
  }
  if (options.backup_workers >= options.num_workers) {
    return InvalidArgumentError("backup_workers = " + std::to_string(options.backup_workers) +
                                " must be below the job's " + std::to_string(options.num_workers) +
                                " workers (a round needs at least one push)");
  }
  if (options.parallel_min_pairs == 0) {
    return InvalidArgumentError("parallel_min_pairs must be >= 1");
  }
  if (options.consistency == Consistency::kBsp)
    return std::unique_ptr<ShardServer>(new BspShard(options, std::move(initial)));
  return std::unique_ptr<ShardServer>(new AsyncShard(options, std::move(initial)));
}

ShardServer::ShardServer(const ShardServerOptions& options, std::vector<float> initial)
    : options_(options),
      team_(std::make_unique<ThreadTeam>(options.threads)),
      w_(initial.begin(), initial.end()),
      members_(options.num_workers),
      live_count_(options.num_workers),
      awaiting_init_(options.await_initial_weights) {}

ShardServer::~ShardServer() = default;

void ShardServer::PrepareBlockSums(std::span<const float> values) {
  block_sums_.assign((values.size() + kSumBlock - 1) / kSumBlock, 0.0);
}

void ShardServer::SumBlocks(std::span<const float> values, uint32_t t, uint32_t count) {
  for (size_t b = t; b < block_sums_.size(); b += count) {
    const size_t from = b * kSumBlock;
    block_sums_[b] = SumAsDouble(values.subspan(from, std::min(kSumBlock, values.size() - from)));
  }
}

void ShardServer::AddBlockSums() {
  double s = 0;
  for (double b : block_sums_) s += b;
  stats_.pushed_sum += s;
}

void ShardServer::Reject(int worker, uint64_t round, pb::ErrorCode code, std::string message,
                         Outbox* out, pb::MsgType rejected) {
  ++stats_.rejected;
  out->push_back(Reply::Error(worker, round, code, std::move(message), rejected));
}

void ShardServer::RejectNotLive(int worker, uint64_t round, Outbox* out) {
  Reject(worker, round, pb::ERROR_NOT_REGISTERED,
         members_[worker].rejoined ? "a re-admitted worker sends JOIN before pushing"
                                   : "worker was declared dead",
         out);
}

std::shared_ptr<const ReplyBuffer> ShardServer::CopyOfShard() {
  auto buf = pool_.Get();
  buf->values.assign(w_.begin(), w_.end());
  return buf;
}

void ShardServer::SetLive(int worker, bool live) {
  if (members_[worker].live == live) return;
  members_[worker].live = live;
  if (live) {
    ++live_count_;
  } else {
    --live_count_;
  }
}

void ShardServer::SetReadmitted(int worker, bool readmitted) {
  members_[worker].rejoined = readmitted;
}

void ShardServer::CountRejoined(int worker) {
  SetLive(worker, true);
  SetReadmitted(worker, false);
}

void ShardServer::EmitPart(Outbox* out) {
  if (part_sink_) part_sink_(out);
}

void ShardServer::OnPush(int worker, uint64_t round, std::span<const uint32_t> indices,
                         std::span<const float> values, bool dense, Outbox* out) {
  if (worker < 0 || worker >= static_cast<int>(options_.num_workers)) {
    return Reject(worker, round, pb::ERROR_NOT_REGISTERED,
                  "unknown worker rank " + std::to_string(worker), out);
  }
  if (dense ? values.size() != w_.size() : indices.size() != values.size()) {
    return Reject(worker, round, pb::ERROR_BAD_COUNT, "push sizes do not match the shard", out);
  }
  if (awaiting_init_) {
    return Reject(worker, round, pb::ERROR_NOT_INITIALIZED, kAwaitingInit, out);
  }
  Push(worker, round, indices, values, dense, out);
}

void ShardServer::OnPullDense(int worker, Outbox* out) {
  if (worker < 0 || worker >= static_cast<int>(options_.num_workers) ||
      (!members_[worker].live && !members_[worker].rejoined)) {
    return Reject(worker, 0, pb::ERROR_NOT_REGISTERED, "worker was declared dead", out,
                  pb::MSG_PULL_DENSE);
  }
  if (awaiting_init_) {
    return Reject(worker, 0, pb::ERROR_NOT_INITIALIZED, kAwaitingInit, out, pb::MSG_PULL_DENSE);
  }
  if (!members_[worker].dense_in_flight.expired()) {
    ++stats_.dense_pulls_dropped;
    return;
  }
  auto buf = pool_.Get();
  buf->values.assign(w_.begin(), w_.end());
  members_[worker].dense_in_flight = buf;
  out->push_back(Reply::Dense(worker, PullRound(worker), std::move(buf)));
}

void ShardServer::OnInit(int worker, std::span<const float> values, Outbox* out) {
  if (worker != 0) {
    return Reject(
        worker, 0, pb::ERROR_NOT_INITIALIZED,
        "only worker 0 offers the initial weights, got INIT from worker " + std::to_string(worker),
        out, pb::MSG_INIT);
  }
  if (values.size() != w_.size()) {
    return Reject(worker, 0, pb::ERROR_BAD_COUNT, "INIT sizes do not match the shard", out,
                  pb::MSG_INIT);
  }
  if (awaiting_init_) {
    std::copy(values.begin(), values.end(), w_.begin());
    awaiting_init_ = false;
  }
  out->push_back(Reply::InitAck(worker));
}

void ShardServer::OnWorkerRejoined(int worker) {
  if (worker < 0 || worker >= static_cast<int>(options_.num_workers) || members_[worker].live)
    return;
  members_[worker].rejoined = true;
  ForgetJoin(worker);
}

void ShardServer::OnJoin(int worker, uint64_t round, Outbox* out) {
  if (worker < 0 || worker >= static_cast<int>(options_.num_workers)) {
    return Reject(worker, round, pb::ERROR_NOT_REGISTERED,
                  "unknown worker rank " + std::to_string(worker), out, pb::MSG_JOIN);
  }
  Join(worker, round, out);
}

void ShardServer::OnWorkerDead(int worker, Outbox* out) {
  if (worker < 0 || worker >= static_cast<int>(options_.num_workers)) return;
  if (!members_[worker].live) {  // a re-admitted worker that died again before it was counted
    members_[worker].rejoined = false;
    ForgetJoin(worker);
    return;
  }
  Dead(worker, out);
}

Status ShardServer::Restore(uint64_t round, std::vector<float> weights) {
  if (weights.size() != w_.size()) {
    return InvalidArgumentError("restored shard has " + std::to_string(weights.size()) +
                                " values, the shard has " + std::to_string(w_.size()));
  }
  w_.assign(weights.begin(), weights.end());
  awaiting_init_ = false;  // a restored shard has its weights
  Restored(round);
  return Status::Ok();
}

ShardSnapshot ShardServer::TakeSnapshot() const {
  ShardSnapshot s;
  s.round = round();
  s.weights.assign(w_.begin(), w_.end());
  return s;
}

}  // namespace sieve
