#include "server/shard_server.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "proto/codec.h"
#include "server/change_log.h"
#include "server/sum_as_double.h"

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
  if (options.parallel_min_pairs == 0) {
    return InvalidArgumentError("parallel_min_pairs must be >= 1");
  }
  return std::unique_ptr<ShardServer>(new ShardServer(options, std::move(initial)));
}

ShardServer::ShardServer(const ShardServerOptions& options, std::vector<float> initial)
    : options_(options),
      team_(std::make_unique<ThreadTeam>(options.threads)),
      w_(initial.begin(), initial.end()),
      workers_(options.num_workers),
      live_count_(options.num_workers),
      awaiting_init_(options.await_initial_weights) {
  const size_t n = w_.size();
  const uint32_t workers = options.num_workers;
  if (options.consistency == Consistency::kBsp) {
    if (options.server_compressor != Compressor::kNone) residual_.assign(n, 0.0f);
    const size_t parts = options.threads == 1 ? 1 : size_t{options.threads} * kPartsPerThread;
    union_parts_.resize(parts);
    merge_parts_.resize(parts);
    union_keys_ = {0, n};
    if (options.threads > 1)
      chunk_done_ = std::make_unique<std::atomic<uint32_t>[]>(kMaxReplyParts);
  } else {
    scale_ = options.async_scale > 0 ? options.async_scale : 1.0f / static_cast<float>(workers);
    changes_ = std::make_unique<ChangeLog>(workers);
  }
}

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
  if (!workers_[worker].live) {
    if (options_.consistency == Consistency::kBsp && workers_[worker].rejoined &&
        workers_[worker].join_round >= 0) {
      if (round != static_cast<uint64_t>(workers_[worker].join_round)) {
        return Reject(worker, round, pb::ERROR_UNKNOWN_ROUND,
                      "a joining worker pushes its join round " +
                          std::to_string(workers_[worker].join_round) + " first, got round " +
                          std::to_string(round),
                      out);
      }
      // Applied when round_ reaches the join round.
      if (workers_[worker].join_push.Hold(round, dense, indices, values)) ++stats_.duplicates;
      return;
    }
    return Reject(worker, round, pb::ERROR_NOT_REGISTERED,
                  workers_[worker].rejoined ? "a re-admitted worker sends JOIN before pushing"
                                            : "worker was declared dead",
                  out);
  }
  if (options_.consistency == Consistency::kBsp)
    return BspPush(worker, round, indices, values, dense, out);
  AsyncPush(worker, round, indices, values, dense, out);
}

void ShardServer::OnPullDense(int worker, Outbox* out) {
  if (worker < 0 || worker >= static_cast<int>(options_.num_workers) ||
      (!workers_[worker].live && !workers_[worker].rejoined)) {
    return Reject(worker, 0, pb::ERROR_NOT_REGISTERED, "worker was declared dead", out,
                  pb::MSG_PULL_DENSE);
  }
  if (awaiting_init_) {
    return Reject(worker, 0, pb::ERROR_NOT_INITIALIZED, kAwaitingInit, out, pb::MSG_PULL_DENSE);
  }
  uint64_t at = round_;
  if (options_.consistency != Consistency::kBsp) {
    int64_t clock = workers_[worker].last_round + 1;
    int64_t min_live = INT64_MAX;
    for (uint32_t w = 0; w < options_.num_workers; ++w) {
      if (workers_[w].live && static_cast<int>(w) != worker)
        min_live = std::min(min_live, workers_[w].last_round + 1);
    }
    if (min_live != INT64_MAX) clock = std::max(clock, min_live);
    at = static_cast<uint64_t>(clock);
  }
  if (!workers_[worker].dense_in_flight.expired()) {
    ++stats_.dense_pulls_dropped;
    return;
  }
  auto buf = pool_.Get();
  buf->values.assign(w_.begin(), w_.end());
  workers_[worker].dense_in_flight = buf;
  out->push_back(Reply::Dense(worker, at, std::move(buf)));
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
  if (worker < 0 || worker >= static_cast<int>(options_.num_workers) || workers_[worker].live)
    return;
  workers_[worker].rejoined = true;
  workers_[worker].join_round = -1;
  workers_[worker].join_push = HeldPush{};
}

void ShardServer::OnJoin(int worker, uint64_t round, Outbox* out) {
  auto ack = [&] { out->push_back(Reply::JoinAck(worker, round)); };
  if (worker < 0 || worker >= static_cast<int>(options_.num_workers)) {
    return Reject(worker, round, pb::ERROR_NOT_REGISTERED,
                  "unknown worker rank " + std::to_string(worker), out, pb::MSG_JOIN);
  }
  if (workers_[worker].live) {
    if (options_.consistency != Consistency::kBsp || !workers_[worker].unpushed_joiner ||
        round <= round_)
      return ack();  // a repeated JOIN of a worker already counted
    // A retry: another server refused the joiner's first round, so it will start later. Uncount
    // it here before it ever pushed, and wait for it at the new round.
    --stats_.rejoins;
    workers_[worker].rejoined = true;
    workers_[worker].dense_reply_to = false;
    workers_[worker].join_round = static_cast<int64_t>(round);
    ack();
    return BspUncount(worker, out);  // the round may have waited for this worker alone
  }
  if (!workers_[worker].rejoined) {
    return Reject(worker, round, pb::ERROR_NOT_REGISTERED,
                  "JOIN from a worker the scheduler has not re-admitted", out, pb::MSG_JOIN);
  }
  if (options_.consistency == Consistency::kBsp) {
    if (round < round_) {
      return Reject(worker, round, pb::ERROR_JOIN_TOO_LATE,
                    "BSP server is already aggregating round " + std::to_string(round_) +
                        ", past join round " + std::to_string(round),
                    out, pb::MSG_JOIN);
    }
    if (workers_[worker].join_round >= 0 &&
        round < static_cast<uint64_t>(workers_[worker].join_round)) {
      return;  // stale: a resend of a JOIN that a retry for a later round has replaced
    }
    if (workers_[worker].join_round >= 0 &&
        round > static_cast<uint64_t>(workers_[worker].join_round)) {
      workers_[worker].join_push = HeldPush{};  // a push held for the replaced round is void
    }
    workers_[worker].join_round = static_cast<int64_t>(round);
    ack();
    if (round == round_ && !resync_) BspAdmitJoiners(out);
    return;
  }
  workers_[worker].live = true;
  ++live_count_;
  workers_[worker].rejoined = false;
  workers_[worker].last_round =
      std::max(workers_[worker].last_round, static_cast<int64_t>(round) - 1);
  workers_[worker].all_dirty = true;
  changes_->Skip(static_cast<uint32_t>(worker));  // the dense reply covers every change
  workers_[worker].waiting = false;
  ++stats_.rejoins;
  ack();
}

void ShardServer::OnWorkerDead(int worker, Outbox* out) {
  if (worker < 0 || worker >= static_cast<int>(options_.num_workers)) return;
  workers_[worker].unpushed_joiner = false;
  if (!workers_[worker].live) {  // a re-admitted worker that died again before it was counted
    workers_[worker].rejoined = false;
    workers_[worker].join_round = -1;
    workers_[worker].join_push = HeldPush{};
    return;
  }
  if (options_.consistency == Consistency::kBsp) return BspUncount(worker, out);
  workers_[worker].live = false;
  --live_count_;
  workers_[worker].waiting = false;
  changes_->Trim(IsLive());  // a dead worker holds no change back; a rejoin starts dense
  AsyncRelease(out);
}

Status ShardServer::Restore(uint64_t round, std::vector<float> weights) {
  if (weights.size() != w_.size()) {
    return InvalidArgumentError("restored shard has " + std::to_string(weights.size()) +
                                " values, the shard has " + std::to_string(w_.size()));
  }
  w_.assign(weights.begin(), weights.end());
  awaiting_init_ = false;  // a restored shard has its weights
  if (options_.consistency == Consistency::kBsp) {
    round_ = round;
    last_reply_.reset();
    resync_ = true;
    for (WorkerState& ws : workers_) ws.held = HeldPush{};
  } else {
    for (WorkerState& ws : workers_) ws.all_dirty = true;
    for (uint32_t w = 0; w < options_.num_workers; ++w) changes_->Skip(w);
    changes_->Trim(IsLive());
  }
  return Status::Ok();
}

}  // namespace sieve
