#include "server/service/shard_service.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/sparse_ops.h"
#include "proto/messages.h"
#include "server/service/mirror_replica.h"
#include "server/service/primary_replica.h"
#include "server/service/replica_role.h"
#include "server/shard/round_shard.h"

namespace sieve {
namespace {

using Clock = std::chrono::steady_clock;

// The shard core's replies in the protocol's terms (docs/protocol.md).
pb::MsgType WireType(ReplyType t) {
  switch (t) {
    case ReplyType::kUpdate:
      return pb::MSG_UPDATE;
    case ReplyType::kDense:
      return pb::MSG_DENSE;
    case ReplyType::kJoinAck:
      return pb::MSG_JOIN_ACK;
    case ReplyType::kInitAck:
      return pb::MSG_INIT_ACK;
    case ReplyType::kError:
      return pb::MSG_ERROR;
    case ReplyType::kLatePushAck:
      return pb::MSG_LATE_PUSH_ACK;
  }
  return pb::MSG_ERROR;
}

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

// What the replication role reaches of the service.
class ShardService::Host final : public ReplicaHost {
 public:
  explicit Host(ShardService* service) : s_(service) {}

  const ShardServiceOptions& options() const override { return s_->options_; }
  ShardServer* shard() override { return s_->shard_; }
  ServerLink* link() override { return s_->link_; }
  DaemonMetrics* metrics() override { return s_->metrics_; }
  RejectionLog& peer_log() override { return s_->peer_log_; }
  ReplicationStats& stats() override { return s_->repl_; }
  Outbox* out() override { return &s_->out_; }
  void Flush() override { s_->Flush(); }
  void SendReplies(const Outbox& replies) override { s_->Send(replies); }
  void RefuseReplicate(int sender, uint64_t seq, const std::string& why) override {
    s_->RefuseReplicate(sender, seq, why);
  }
  void SwitchRole(std::unique_ptr<ReplicaRole> next) override {
    s_->replaced_role_ = std::move(s_->role_);
    s_->role_ = std::move(next);
  }

 private:
  ShardService* const s_;
};

ShardService::ShardService(const ShardServiceOptions& options, ShardServer* shard, ServerLink* link,
                           DaemonMetrics* metrics, ShardCheckpointer* checkpointer)
    : options_(options),
      shard_(shard),
      link_(link),
      metrics_(metrics),
      checkpointer_(checkpointer),
      host_(std::make_unique<Host>(this)) {
  if (options.mirror) {
    role_ = std::make_unique<MirrorReplica>(
        host_.get(), options.awaiting_snapshot ? Role::kRebuilding : Role::kMirror,
        link->ShardPrimary(options.rank), 0, std::set<int>());
  } else {
    role_ = std::make_unique<PrimaryReplica>(host_.get(), 0, options.backups, std::set<int>());
  }
  shard_->set_part_sink([this](Outbox*) { Flush(); });
}

ShardService::~ShardService() { shard_->set_part_sink(nullptr); }

ShardService::Role ShardService::role() const { return role_->role(); }

const std::vector<int>& ShardService::backups() const { return role_->backups(); }

void ShardService::set_trace(TraceWriter* trace) {
  trace_ = trace;
  if (trace_ != nullptr)
    trace_->SetThreadName(trace_tid(), "shard " + std::to_string(options_.rank));
}

// A mirror follows its primary's events only; the deaths and re-admissions its primary did not
// replicate are applied when it is promoted (MirrorReplica::Promote).
void ShardService::OnWorkerDead(int rank) {
  if (!primary()) return;
  const uint64_t before = shard_->round();
  role_->Replicate(pb::REPLICA_WORKER_DEAD, rank, 0, {}, {}, false);
  shard_->OnWorkerDead(rank, &out_);
  role_->ReplicateCompletedRound(before);
  PassIdleRounds();
  Flush();
  role_->SendPendingSnapshots();  // the death may have ended the round
}

void ShardService::OnWorkerRejoined(int rank) {
  if (!primary()) return;
  LOG(INFO) << "worker " << rank << " was re-admitted; it may join shard " << options_.rank
            << " again";
  role_->Replicate(pb::REPLICA_WORKER_REJOINED, rank, 0, {}, {}, false);
  shard_->OnWorkerRejoined(rank);
  Flush();
}

void ShardService::OnServerDead(int rank) { role_->OnServerDead(rank); }

void ShardService::OnServerRejoined(int rank) { role_->OnServerRejoined(rank); }

void ShardService::OnTable() { role_->OnTable(); }

void ShardService::OnTick() { role_->OnTick(); }

void ShardService::OnData(Message msg) {
  if (msg.type() == pb::MSG_REPLICATE || msg.type() == pb::MSG_REPLICATE_ACK) {
    return OnReplicationData(msg);
  }
  const int sender = msg.header.sender();
  const int worker = link_->WorkerRankOf(sender);
  const bool from_worker = worker >= 0 && worker < static_cast<int>(options_.num_workers);
  const uint64_t round = msg.header.round();
  const bool worker_request = msg.type() == pb::MSG_JOIN || msg.type() == pb::MSG_PUSH ||
                              msg.type() == pb::MSG_INIT || msg.type() == pb::MSG_PULL_DENSE;
  if (worker_request && from_worker && !primary()) return RefuseNotPrimary(msg);
  switch (msg.type()) {
    case pb::MSG_JOIN:
      if (!from_worker) {
        (void)link_->SendError(sender, pb::ERROR_UNEXPECTED_TYPE, "only workers join", msg.type(),
                               round, options_.rank);
      } else {
        OnJoin(msg, worker);
      }
      break;
    case pb::MSG_PUSH:
    case pb::MSG_INIT:
    case pb::MSG_PULL_DENSE:
      if (!from_worker) {
        (void)link_->SendError(sender, pb::ERROR_UNEXPECTED_TYPE, "only workers push or pull",
                               msg.type(), round, options_.rank);
      } else if (msg.header.shard() != options_.rank) {
        (void)link_->SendError(sender, pb::ERROR_WRONG_SHARD,
                               "this is server " + std::to_string(options_.rank) +
                                   ", message is for shard " + std::to_string(msg.header.shard()),
                               msg.type(), round, options_.rank);
      } else {
        OnWorkerData(msg, worker);
      }
      break;
    case pb::MSG_ERROR:
      OnPeerError(msg);
      break;
    default:
      (void)link_->SendError(
          sender, pb::ERROR_UNEXPECTED_TYPE,
          std::string("a server does not accept ") + std::string(MsgTypeName(msg.type())),
          msg.type(), round, options_.rank);
  }
  FinishDataMessage();
}

void ShardService::OnReplicationData(const Message& msg) {
  const int sender = msg.header.sender();
  if (msg.type() == pb::MSG_REPLICATE) {
    if (role_->OnReplicate(msg)) return;
    return RefuseReplicate(sender, role_->seq(),
                           "server " + std::to_string(server_rank()) + " holds no copy of shard " +
                               std::to_string(options_.rank) + " that node " +
                               std::to_string(sender) + " replicates");
  }
  if (role_->OnReplicateAck(msg)) return;
  peer_log_.Warn([&](std::ostream& os) {
    os << "REPLICATE_ACK for shard " << options_.rank << " from node " << sender
       << ", not a live backup of it; ignored";
  });
}

void ShardService::RefuseNotPrimary(const Message& msg) {
  (void)link_->SendError(msg.header.sender(), pb::ERROR_NOT_PRIMARY,
                         "server " + std::to_string(server_rank()) + " does not serve shard " +
                             std::to_string(options_.rank) + " (server " +
                             std::to_string(link_->ShardPrimary(options_.rank)) +
                             " does in this server's node table)",
                         msg.type(), msg.header.round(), options_.rank);
}

void ShardService::RefuseReplicate(int sender, uint64_t seq, const std::string& why) {
  (void)link_->SendError(sender, pb::ERROR_NOT_REPLICA, why, pb::MSG_REPLICATE, seq, options_.rank);
}

void ShardService::OnPeerError(const Message& msg) {
  const int sender = msg.header.sender();
  peer_log_.Warn([&](std::ostream& os) {
    os << "error from node " << sender << ": " << msg.header.error().message();
  });
  if (msg.header.error().code() == pb::ERROR_NOT_REPLICA) role_->OnReplicaRefused(sender - 1);
}

void ShardService::OnJoin(const Message& msg, int worker) {
  const uint64_t round = msg.header.round();
  const uint64_t before = shard_->round();
  role_->Replicate(pb::REPLICA_JOIN, worker, round, {}, {}, false);
  shard_->OnJoin(worker, round, &out_);
  role_->ReplicateCompletedRound(before);
  PassIdleRounds();
}

void ShardService::OnWorkerData(const Message& msg, int worker) {
  if (msg.type() == pb::MSG_PULL_DENSE) {
    shard_->OnPullDense(worker, &out_);
    return;
  }
  std::span<const float> values = msg.values;
  if (!msg.values16().empty()) {
    unpacked_.resize(msg.values16().size());
    (void)Unpack16(msg.values16(), msg.values16_type(), unpacked_);  // sizes equal: no error
    values = unpacked_;
  }
  if (msg.type() == pb::MSG_INIT) {
    role_->Replicate(pb::REPLICA_INIT, worker, 0, {}, values, true);
    const bool was_awaiting = shard_->awaiting_initial_weights();
    shard_->OnInit(worker, values, &out_);
    if (was_awaiting && !shard_->awaiting_initial_weights()) {
      LOG(INFO) << "shard " << options_.rank << " starts from worker 0's initial weights";
    }
    return;
  }
  OnWorkerPush(msg, worker, values);
}

void ShardService::OnWorkerPush(const Message& msg, int worker, std::span<const float> values) {
  const uint64_t round = msg.header.round();
  const auto push_start = Clock::now();
  const uint64_t before = shard_->round();
  if (!options_.replicate_rounds) {
    role_->Replicate(pb::REPLICA_PUSH, worker, round, msg.indices, values, msg.dense());
  }
  shard_->OnPush(worker, round, msg.indices, values, msg.dense(), &out_);
  role_->ReplicateCompletedRound(before);
  if (trace_ != nullptr && trace_->Wants(round)) {
    trace_->AddSpan("aggregate", trace_tid(), round, push_start, Clock::now(),
                    {{"worker", worker},
                     {"bytes", FrameBytes(msg.storage)},
                     {"pairs", msg.header.count()},
                     {"completed_round", options_.bsp && shard_->round() != before}});
  }
  if (metrics_ != nullptr) {
    const ShardServerStats& st = shard_->stats();
    metrics_->ObservePushLatency(SecondsSince(push_start));
    metrics_->AddBytes(FrameBytes(msg.storage), 0);
    metrics_->SetRoundsTotal(options_.bsp ? st.rounds_completed : st.pushes_applied);
    metrics_->SetStaleness(st.max_staleness);
  }
}

void ShardService::PassIdleRounds() {
  RoundShard* rounds = shard_->rounds();
  if (rounds == nullptr) return;  // ASP/SSP: no rounds to pass
  const std::optional<uint64_t> until = rounds->IdleUntil();
  if (!until) return;
  LOG(INFO) << "shard " << options_.rank << " has no live worker: rounds " << shard_->round()
            << " to " << *until << " pass empty, the rejoined workers are counted from round "
            << *until;
  // A copy replicated by pushes replays the same events and passes the same rounds itself.
  if (options_.replicate_rounds) role_->Replicate(pb::REPLICA_IDLE, -1, *until, {}, {}, false);
  rounds->PassIdleRounds(&out_);
  role_->ReplicateCompletedRound(*until);  // a joiner's held push may have completed it
}

void ShardService::FinishDataMessage() {
  const bool replies = !out_.empty();
  const auto flush_start = Clock::now();
  Flush();
  if (replies && metrics_ != nullptr) metrics_->ObserveUpdateLatency(SecondsSince(flush_start));
  // Only the copy that serves the shard writes its checkpoint (a mirror's replay is the
  // primary's to write; a promoted or handed-back copy writes from then on).
  if (checkpointer_ != nullptr && primary()) checkpointer_->MaybeWrite(*shard_);
  role_->SendPendingSnapshots();
}

void ShardService::SendAck(const Reply& r, int peer) {
  pb::Header h = MakeDataHeader(WireType(r.type), link_->id(), peer, options_.rank, r.round);
  auto frames = EncodeControl(h);
  if (frames.ok()) (void)link_->Reply(peer, std::move(frames).value());
}

bool ShardService::SendSlice(const Reply& r, int peer, uint32_t part, uint32_t parts, size_t from,
                             size_t to) {
  const auto encode_start = Clock::now();
  pb::Header h = MakeDataHeader(WireType(r.type), link_->id(), peer, options_.rank, r.round);
  if (parts > 1) {
    h.set_part(part);
    h.set_parts(parts);
  }
  if (r.push_missed) h.set_flags(pb::FLAG_PUSH_MISSED);
  if (r.push_late) h.set_flags(pb::FLAG_PUSH_LATE);
  DataPayload p;
  bool fresh = false;
  const CodedSlice& slice = CodeSlice(r, from, to, &p, &fresh);
  EncodeOptions eo;
  eo.precomputed_checksum = &slice.crc;
  eo.compact_indices = options_.compact_indices;
  auto frames = EncodeData(h, p, eo);
  if (!frames.ok()) {
    LOG(ERROR) << "encode reply: " << frames.status().ToString();
    return false;
  }
  const uint64_t bytes = FrameBytes(*frames);
  if (metrics_ != nullptr) metrics_->AddBytes(0, bytes);
  const auto reply_start = Clock::now();
  Status s = link_->Reply(peer, std::move(frames).value());
  if (trace_ != nullptr && trace_->Wants(r.round)) {
    const char* type = r.type == ReplyType::kDense ? "DENSE" : "UPDATE";
    trace_->AddSpan("encode", trace_tid(), r.round, encode_start, reply_start,
                    {{"worker", r.worker},
                     {"type", type},
                     {"part", part},
                     {"parts", parts},
                     {"pairs", to - from},
                     {"coded_here", fresh}});
    trace_->AddSpan("reply", trace_tid(), r.round, reply_start, Clock::now(),
                    {{"worker", r.worker}, {"type", type}, {"bytes", bytes}, {"sent", s.ok()}});
  }
  if (!s.ok()) {
    peer_log_.Warn(
        [&](std::ostream& os) { os << "reply to worker " << r.worker << ": " << s.ToString(); });
  }
  return s.ok();
}

const ShardService::CodedSlice& ShardService::CodeSlice(const Reply& r, size_t from, size_t to,
                                                        DataPayload* p, bool* fresh) {
  p->dense = r.dense;
  p->value_type = options_.reply_values;
  if (!r.dense) p->indices = std::span<const uint32_t>(r.buffer->indices).subspan(from, to - from);
  const std::span<const float> weights =
      std::span<const float>(r.buffer->values).subspan(from, to - from);
  // Every live worker gets the same BSP reply: its index frame, 16-bit values and checksum are
  // made once.
  auto [it, made] = slices_.try_emplace(SliceKey{r.buffer.get(), from, to});
  CodedSlice& slice = it->second;
  if (made) {
    if (!r.dense && options_.compact_indices) slice.encoded = EncodeIndexFrame(p->indices);
    slice.keepalive = r.buffer;
    if (options_.reply_values != ValueType::kFp32) {
      auto packed = std::make_shared<std::vector<uint16_t>>(weights.size());
      // Same numbering as ValuePrecision; sizes are equal: cannot fail.
      (void)PackSaturating(weights, options_.reply_values, *packed);
      slice.packed = packed;
      // The frames borrow both the buffer (raw indices) and the packed values.
      slice.keepalive =
          std::make_shared<const std::pair<std::shared_ptr<const ReplyBuffer>,
                                           std::shared_ptr<const std::vector<uint16_t>>>>(
              r.buffer, slice.packed);
    }
  }
  p->values = slice.packed ? std::as_bytes(std::span<const uint16_t>(*slice.packed))
                           : std::as_bytes(weights);
  p->keepalive = slice.keepalive;
  p->encoded = slice.encoded;
  if (made) slice.crc = DataChecksum(*p);
  *fresh = made;
  return slice;
}

void ShardService::Flush() {
  if (!role_->HoldReplies(&out_)) Send(out_);
  out_.clear();
}

void ShardService::Send(const Outbox& replies) {
  for (const Reply& r : replies) {
    const int peer = link_->WorkerId(r.worker);
    if (r.type == ReplyType::kError) {
      (void)link_->SendError(peer, r.code, r.message, r.rejected, r.round, options_.rank);
      continue;
    }
    if (r.type == ReplyType::kJoinAck || r.type == ReplyType::kInitAck ||
        r.type == ReplyType::kLatePushAck) {
      SendAck(r, peer);
      continue;
    }
    if (r.parts > 1) {  // a part ShardServer produced
      SendSlice(r, peer, r.part, r.parts, r.begin, r.end);
      continue;
    }
    // A whole sparse UPDATE larger than a part goes out in parts too: the worker decodes one
    // while it writes the previous into its replica.
    const size_t pairs = r.buffer->values.size();
    const uint64_t per = options_.reply_part_pairs;
    uint32_t parts = 1;
    if (r.type == ReplyType::kUpdate && !r.dense && per > 0 && pairs > per) {
      parts = static_cast<uint32_t>(std::min<uint64_t>((pairs + per - 1) / per, kMaxReplyParts));
    }
    const size_t step = std::max<size_t>(1, (pairs + parts - 1) / parts);
    parts = static_cast<uint32_t>(std::max<size_t>(1, (pairs + step - 1) / step));  // none empty
    for (uint32_t part = 0; part < parts; ++part) {
      if (!SendSlice(r, peer, part, parts, std::min(pairs, part * step),
                     std::min(pairs, (part + 1) * step))) {
        break;
      }
    }
  }
  slices_.clear();  // a pooled buffer may come back with other content
}

}  // namespace sieve
