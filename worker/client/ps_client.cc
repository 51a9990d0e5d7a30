#include "worker/client/ps_client.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>

#include "base/lent_buffer_pool.h"
#include "base/prefetch.h"
#include "kernels/sparse_ops.h"
#include "net/curve.h"
#include "net/node.h"
#include "net/rejection_log.h"
#include "proto/error_code.h"
#include "proto/job_identity.h"
#include "proto/messages.h"
#include "proto/register_proof.h"
#include "proto/shards.h"
#include "worker/client/ps_client_testing.h"

namespace sieve {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The shard a server's message is for (with replication one server may serve several, and a
// shard's last backup answers for it); a message without one (an ERROR of the node runtime) is
// its sender's own shard's. -1: not from a server.
int ShardOf(const Message& msg, uint32_t servers) {
  const int from = msg.header.sender() - 1;
  if (from < 0 || from >= static_cast<int>(servers)) return -1;
  const int shard = msg.header.shard();
  return shard >= 0 && shard < static_cast<int>(servers) ? shard : from;
}

// The request a reply type answers (an ERROR names the request it rejects).
pb::MsgType RequestFor(pb::MsgType reply) {
  switch (reply) {
    case pb::MSG_DENSE:
      return pb::MSG_PULL_DENSE;
    case pb::MSG_JOIN_ACK:
      return pb::MSG_JOIN;
    case pb::MSG_INIT_ACK:
      return pb::MSG_INIT;
    default:
      return pb::MSG_PUSH;
  }
}

// The wire's name of a precision (kernels and proto number them alike).
ValueType WireType(ValuePrecision p) {
  static_assert(static_cast<int>(ValuePrecision::kFp16) == static_cast<int>(ValueType::kFp16) &&
                static_cast<int>(ValuePrecision::kBf16) == static_cast<int>(ValueType::kBf16));
  return static_cast<ValueType>(p);
}

// options.push_values, with the deprecated options.fp16 folded in.
StatusOr<ValuePrecision> PushPrecision(const PsClientOptions& options) {
  if (!options.fp16) return options.push_values;
  if (options.push_values != ValuePrecision::kFp32 &&
      options.push_values != ValuePrecision::kFp16) {
    return InvalidArgumentError(
        "fp16 (deprecated: push values as fp16) conflicts with push values " +
        std::string(ValueTypeName(WireType(options.push_values))));
  }
  return ValuePrecision::kFp16;
}

}  // namespace

// The client's state: the node runtime (sockets, registration, heartbeats) and the round's
// buffers. The public PsClient forwards every call here.
class PsClient::Impl {
 public:
  Impl(const PsClientOptions& options, std::unique_ptr<Node> node);

  Node& node() { return *node_; }
  const Node& node() const { return *node_; }
  ValuePrecision push_values() const { return push_values_; }
  uint64_t resends() const { return resends_; }
  uint64_t errors_retried() const { return errors_retried_; }

  Status PullDense(std::span<float> weights, std::chrono::milliseconds timeout, uint64_t* at);
  Status Join(uint64_t round, std::chrono::milliseconds timeout);
  Status OfferInitialWeights(std::span<const float> weights, std::chrono::milliseconds timeout);
  Status PushPull(uint64_t round, Selection* sel, std::span<float> weights, RoundStats* stats,
                  std::chrono::milliseconds timeout);
  Status PushPull(uint64_t round, Selection* sel, const UpdateSink& sink, RoundStats* stats,
                  std::chrono::milliseconds timeout);

 private:
  // Waits for one data message of `type` and `round` from each server in `pending` (by rank),
  // calling apply(server_rank, message) for each; a reply split into parts (docs/protocol.md,
  // "Split replies") calls apply once per distinct part and counts once all have arrived. ERRORs
  // for the round fail the wait. `resend(server_rank)`, when given, is called for each server still
  // missing when a new node table was installed since the last send (checked every
  // options_.resend_check), or, with always_resend > 0, first after always_resend and then at
  // doubling intervals up to 8 s. With `any_round`, messages of any round are taken.
  // An ERROR for the request whose code a peer can cause without our fault (checksum, malformed
  // or out-of-range content, unknown round: our requests are validated before they leave, so it
  // was corrupted or forged) is answered with resend(server) — at most kErrorRetries times per
  // server and wait — and logged; any other ERROR, or one past the retries, fails the wait.
  static constexpr int kErrorRetries = 8;
  // UPDATEs (split replies among them) go through `stream` instead: it is given every message of
  // `type` from a server and returns true once that server's reply of `round` is complete
  // (TakeUpdate). Servers with arrived[s] set count as answered from the start.
  template <typename Fn>
  Status Collect(pb::MsgType type, uint64_t round, std::chrono::milliseconds timeout, Fn apply,
                 const std::function<void(int)>& resend = nullptr,
                 std::chrono::milliseconds always_resend = std::chrono::milliseconds::zero(),
                 bool any_round = false,
                 const std::function<bool(int, const Message&)>& stream = nullptr,
                 const std::vector<bool>* arrived = nullptr);
  // One Collect's bookkeeping, by server: answered, ERRORs answered with a resend, refused with
  // ERROR_NOT_PRIMARY since the last resend check; and how many have not answered.
  struct CollectWait {
    std::vector<bool> done;
    std::vector<int> error_retries;
    std::vector<bool> not_primary;
    uint32_t left = 0;
    void Done(int server) {
      done[server] = true;
      --left;
    }
  };
  // Collect's resend check: resend(s) for every server still missing when `always` or a new node
  // table came since the last send, else only for those that refused as not primary.
  void ResendToMissing(CollectWait* w, const std::function<void(int)>& resend, bool always);
  // An ERROR that came during Collect: OK when the wait goes on (not for this request or round,
  // a late push's, not primary, or answered with resend(server)); else the wait's failure.
  Status OnCollectError(const Message& msg, int server, pb::MsgType type, uint64_t round,
                        bool any_round, const std::function<void(int)>& resend, CollectWait* w);
  // Adds an UPDATE (or one part of a split one, docs/protocol.md "Split replies") to `server`'s
  // stream: applied (apply(server, msg), once per distinct part) when it belongs to the stream's
  // next round, ignored otherwise (stale, a duplicate part, another server's shard).
  void TakeUpdate(int server, const Message& msg,
                  const std::function<void(int, const Message&)>& apply);
  // Applies the UPDATEs already queued (none is waited for) through TakeUpdate: with backup
  // workers, rounds that closed without this worker.
  Status DrainUpdates(const std::function<void(int, const Message&)>& apply);
  // One round of PushPull, each arriving UPDATE given to apply(server_rank, message).
  Status PushPullWith(uint64_t round, Selection* sel,
                      const std::function<void(int, const Message&)>& apply, RoundStats* stats,
                      std::chrono::milliseconds timeout);
  // Sends a header-only `type` for `round` to server `s`.
  Status SendControl(pb::MsgType type, uint64_t round, int s);
  // Node id of the server serving shard `s` now (the node table's shard_primary: s's own server
  // unless it failed over).
  int ServerOf(int s) const { return node_->ServerId(node_->ShardPrimary(s)); }
  uint64_t num_params() const { return node_->num_params(); }
  uint32_t num_servers() const { return node_->num_servers(); }
  bool joined_late() const { return node_->joined_late(); }

  // Arrays lent to ZeroMQ during a round; reused while no frame of an earlier round holds them.
  struct SendBuffers {
    std::vector<uint32_t> indices;   // the selection's global indices (moved in from Selection)
    std::vector<float> values;       // the selection's values (moved in from Selection)
    std::vector<uint32_t> relative;  // shard-relative indices
    std::vector<uint16_t> packed;    // 16-bit values (push_values fp16 / bf16)
  };
  // One round of PushPullWith: the state its steps (below, in the order they run) share.
  struct PushPullRound {
    uint64_t round = 0;
    Selection* sel = nullptr;
    std::shared_ptr<SendBuffers> lent;  // the round's send buffers, lent to ZeroMQ
    bool packed = false;                // values go as 16-bit (push_values fp16 / bf16)
    RoundStats stats;
    // By server: its UPDATE of the round came before the push (the round closed without us);
    // the round's UPDATE was flagged FLAG_PUSH_MISSED; flagged FLAG_PUSH_LATE.
    std::vector<bool> arrived, missed, late;
  };
  // Moves the selection's arrays into r->lent (its indices split by shard first) and packs the
  // values when they go as 16-bit. An error may leave the selection's arrays moved.
  Status FillSendBuffers(PushPullRound* r);
  // Sizes the per-server state for r->round and reads what each UPDATE stream already holds.
  void StartUpdateStreams(PushPullRound* r);
  // After a new node table, sends every shard's held late pushes again (before the round's push).
  void SendHeldLatePushesAfterNewTable();
  // [from, to) of server s's slice in the round's send buffers.
  std::pair<size_t, size_t> SliceOf(const PushPullRound& r, uint32_t s) const;
  // Sends server s its slice of the round's push, counted in r->stats.
  Status PushSlice(PushPullRound* r, uint32_t s);
  // One UPDATE (or part) of the round's streams: counted, its flags recorded, then apply(s, m).
  void TakeRoundUpdate(PushPullRound* r, int s, const Message& m,
                       const std::function<void(int, const Message&)>& apply);
  // Waits for every server's UPDATE of the round, resending the slice where Collect says so.
  Status CollectRoundUpdates(PushPullRound* r, std::chrono::milliseconds timeout,
                             const std::function<void(int, const Message&)>& take);
  // Keeps the slices of the pushes the round's UPDATEs flagged late until the shard acks them.
  void HoldLatePushes(const PushPullRound& r);
  // The slices the round closed without (flagged missed) into r->stats' missed_*.
  void RecordMissedSlices(PushPullRound* r);
  // Gives the send buffers back to the pool and their arrays to `sel`, unless ZeroMQ still holds
  // them (then sel's arrays are left empty).
  void ReturnSendBuffers(std::shared_ptr<SendBuffers> lent, Selection* sel);

  const PsClientOptions options_;
  const ValuePrecision push_values_;  // options_.push_values, or kFp16 for options_.fp16
  std::unique_ptr<Node> node_;
  std::vector<uint64_t> bounds_;  // S+1 shard boundaries
  std::vector<size_t> offsets_;   // reused across rounds
  // The round's send buffers are lent to ZeroMQ (zero-copy); a buffer is reused only after
  // ZeroMQ let go of it (LentBufferPool's locked hand-back, never a use_count() check).
  LentBufferPool<SendBuffers> buffers_;
  std::vector<float> sink_scratch_;  // 16-bit UPDATE values converted for an UpdateSink
  // Each server's UPDATEs in round order (a peer's messages keep their order): the next round
  // not yet applied, and the parts of it seen so far. Only backup workers make a round's UPDATE
  // arrive before this worker pushed it.
  struct UpdateStream {
    uint64_t next = 0;
    std::vector<bool> seen;
    uint32_t left = 0;
    std::vector<uint64_t> flagged;  // rounds taken ahead whose UPDATE had FLAG_PUSH_MISSED
    std::vector<uint64_t> late;     // rounds taken ahead whose UPDATE had FLAG_PUSH_LATE
  };
  std::vector<UpdateStream> streams_;
  // Backup workers with --late_pushes=apply: each shard's pushes whose round closed without them
  // (FLAG_PUSH_LATE), oldest first, kept until the shard's LATE_PUSH_ACK; sent again before any
  // resend to that shard and after a new node table (a failover), so a late push is never lost
  // with its server (the shard applies a resend of one it applied as a duplicate). At most
  // kMaxHeldLatePushes per shard: past that the oldest is dropped with a warning.
  struct HeldLatePush {
    uint64_t round = 0;
    bool dense = false;
    std::vector<uint32_t> indices;  // shard-relative
    std::vector<float> values;      // as sent: fp32, or (push_values fp16 / bf16) `packed`
    std::vector<uint16_t> packed;
  };
  static constexpr size_t kMaxHeldLatePushes = 64;
  std::vector<std::deque<HeldLatePush>> late_held_;
  uint64_t late_tables_ = 0;  // node tables installed when the held late pushes were last sent
  // LATE_PUSH_ACKs that came during the round before the push they acknowledge was held.
  std::vector<std::pair<int, uint64_t>> acked_late_;
  void OnLatePushAck(int shard, uint64_t round);
  // Sends shard s's held late pushes (oldest first) to the server serving it now.
  void SendHeldLatePushes(int s);
  // Encodes and sends a PUSH of `round` to the server serving shard s: shard-relative `indices`
  // (none when dense) and the values as they go on the wire (fp32, or 16-bit when push_values_
  // says so), borrowed until ZeroMQ lets go of `keepalive`. The bytes sent, or the error.
  StatusOr<uint64_t> SendPush(int s, uint64_t round, bool dense, std::span<const uint32_t> indices,
                              std::span<const std::byte> values,
                              std::shared_ptr<const void> keepalive);
  // Lines a server's (or a forger's) message can cause: at most 20 per 10 s (net/rejection_log.h).
  RejectionLog peer_log_{"peer-caused client events"};
  uint64_t resends_ = 0;
  uint64_t errors_retried_ = 0;
  uint64_t tables_at_send_ = 0;  // node tables installed when the round's PUSHes went out
};

PsClient::Impl::Impl(const PsClientOptions& options, std::unique_ptr<Node> node)
    : options_(options), push_values_(*PushPrecision(options)), node_(std::move(node)) {
  bounds_.push_back(0);
  for (const auto& r : node_->shards()) bounds_.push_back(r.hi);
}

namespace {

// The node runtime's options for a worker with the public `options`.
StatusOr<NodeOptions> ToNodeOptions(const PsClientOptions& options) {
  NodeOptions n;
  n.role = pb::ROLE_WORKER;
  n.rank = options.rank;
  n.scheduler = options.scheduler;
  n.num_params = options.num_params;
  n.transport.bind_host = options.bind_host;
  n.transport.port = options.port;
  n.transport.advertise_host = options.advertise_host;
  n.transport.max_message_bytes = options.max_message_bytes;
  if (options.max_message_bytes < 0) {
    n.transport.max_message_bytes = options.num_params > 0 ? MaxFrameBytes(options.num_params) : 0;
  }
  n.transport.send_timeout = options.send_timeout;
  n.transport.send_hwm = options.send_hwm;
  if (!options.curve_dir.empty()) {
    SIEVE_ASSIGN_OR_RETURN(auto curve, LoadCurveDir(options.curve_dir, options.curve_key));
    n.transport.curve = std::move(curve);
  }
  n.transport.job = JobDigest(options.job_token);
  n.job_key = JobKey(options.job_token);
  n.heartbeat_interval = options.heartbeat_interval;
  n.heartbeat_timeout = options.heartbeat_timeout;
  n.register_attempts = options.register_attempts;
  n.register_retry = options.register_retry;
  n.startup_timeout = options.startup_timeout;
  return n;
}

}  // namespace

StatusOr<std::unique_ptr<PsClient>> PsClient::Connect(const PsClientOptions& options) {
  return PsClientTesting::Connect(options, nullptr);
}

StatusOr<std::unique_ptr<PsClient>> PsClientTesting::Connect(const PsClientOptions& options,
                                                             TransportFactory factory) {
  SIEVE_RETURN_IF_ERROR(PushPrecision(options).status());  // before anything starts
  SIEVE_ASSIGN_OR_RETURN(NodeOptions n, ToNodeOptions(options));
  n.transport.factory = std::move(factory);
  SIEVE_ASSIGN_OR_RETURN(auto node, Node::Start(n));
  return std::unique_ptr<PsClient>(
      new PsClient(std::make_unique<PsClient::Impl>(options, std::move(node))));
}

PsClient::PsClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PsClient::~PsClient() = default;

int PsClient::rank() const { return impl_->node().rank(); }
uint64_t PsClient::num_params() const { return impl_->node().num_params(); }
ValuePrecision PsClient::push_values() const { return impl_->push_values(); }
uint32_t PsClient::num_workers() const { return impl_->node().num_workers(); }
uint32_t PsClient::num_servers() const { return impl_->node().num_servers(); }
size_t PsClient::dead_nodes() const { return impl_->node().dead_nodes().size(); }
uint64_t PsClient::resends() const { return impl_->resends(); }
uint64_t PsClient::errors_retried() const { return impl_->errors_retried(); }
bool PsClient::joined_late() const { return impl_->node().joined_late(); }

Status PsClient::OfferInitialWeights(std::span<const float> weights,
                                     std::chrono::milliseconds timeout) {
  return impl_->OfferInitialWeights(weights, timeout);
}

Status PsClient::PullDense(std::span<float> weights, std::chrono::milliseconds timeout,
                           uint64_t* at) {
  return impl_->PullDense(weights, timeout, at);
}
Status PsClient::Join(uint64_t round, std::chrono::milliseconds timeout) {
  return impl_->Join(round, timeout);
}
Status PsClient::PushPull(uint64_t round, Selection* sel, std::span<float> weights,
                          RoundStats* stats, std::chrono::milliseconds timeout) {
  return impl_->PushPull(round, sel, weights, stats, timeout);
}
Status PsClient::PushPull(uint64_t round, Selection* sel, const UpdateSink& sink, RoundStats* stats,
                          std::chrono::milliseconds timeout) {
  return impl_->PushPull(round, sel, sink, stats, timeout);
}
Status PsClient::Barrier(std::chrono::milliseconds timeout) {
  return impl_->node().Barrier(kGroupWorkers, timeout);
}
StatusOr<std::pair<std::vector<float>, uint32_t>> PsClient::Collective(
    CollectiveOp op, int root, std::span<const float> values, std::chrono::milliseconds timeout) {
  SIEVE_ASSIGN_OR_RETURN(
      Node::CollectiveResult r,
      impl_->node().Collective(
          op == CollectiveOp::kSum ? pb::COLLECTIVE_SUM : pb::COLLECTIVE_BROADCAST, root, values,
          timeout));
  return std::make_pair(std::move(r.values), r.contributors);
}
Status PsClient::Finish() { return impl_->node().Finish(); }
void PsClient::Report(const WorkerProgress& p) {
  pb::Heartbeat h;
  pb::WorkerReport* r = h.mutable_worker();
  r->set_round(p.round);
  r->set_total_rounds(p.total_rounds);
  r->set_epoch(p.epoch);
  r->set_epochs(p.epochs);
  if (p.loss) r->set_loss(static_cast<float>(*p.loss));
  if (p.test_accuracy) r->set_test_accuracy(static_cast<float>(*p.test_accuracy));
  r->set_bytes_pushed(p.bytes_pushed);
  r->set_bytes_pulled(p.bytes_pulled);
  r->set_skipped_rounds(p.skipped_rounds);
  r->set_missed_slices(p.missed_slices);
  r->set_straggle_seconds(static_cast<float>(p.straggle_seconds));
  for (const auto& [name, value] : p.metrics) (*r->mutable_metrics())[name] = value;
  impl_->node().SetReport(h);
}
Status PsClient::WaitShutdown(std::chrono::milliseconds timeout) {
  return impl_->node().WaitShutdown(timeout);
}
void PsClient::RequestStop(const std::string& reason) { impl_->node().RequestStop(reason); }

namespace {

// ERROR codes a peer can provoke for a request this client validated before sending: corruption in
// transit, a forged copy of it, or a forged ERROR (see PsClient::Impl::OnCollectError).
bool PeerCausable(pb::ErrorCode code) {
  switch (code) {
    case pb::ERROR_MALFORMED_HEADER:
    case pb::ERROR_BAD_FRAME_COUNT:
    case pb::ERROR_BAD_FRAME_SIZE:
    case pb::ERROR_INDEX_ORDER:
    case pb::ERROR_INDEX_RANGE:
    case pb::ERROR_NON_FINITE:
    case pb::ERROR_CHECKSUM:
    case pb::ERROR_BAD_COUNT:
    case pb::ERROR_UNKNOWN_ROUND:
      return true;
    default:
      return false;
  }
}

// How long Collect's next receive may wait: until `deadline` or, with `next_resend`, just past
// that resend check; 1 ms while the deadline is still ahead. Not positive: the deadline passed.
std::chrono::milliseconds ReceiveWait(Clock::time_point deadline,
                                      const Clock::time_point* next_resend) {
  using std::chrono::milliseconds;
  auto remaining = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
  if (next_resend != nullptr) {
    const auto to_resend = std::chrono::duration_cast<milliseconds>(*next_resend - Clock::now());
    remaining = std::min(remaining, to_resend + milliseconds(1));
  }
  if (remaining <= milliseconds::zero() && Clock::now() < deadline) remaining = milliseconds(1);
  return remaining;
}

// Collect's failure when `left` of `servers` did not answer within `timeout`.
Status CollectTimeout(pb::MsgType type, uint64_t round, uint32_t left, uint32_t servers,
                      std::chrono::milliseconds timeout) {
  return DeadlineExceededError(std::string("no ") + std::string(MsgTypeName(type)) + " for round " +
                               std::to_string(round) + " from " + std::to_string(left) + " of " +
                               std::to_string(servers) + " servers within " +
                               std::to_string(timeout.count()) + " ms");
}

}  // namespace

void PsClient::Impl::ResendToMissing(CollectWait* w, const std::function<void(int)>& resend,
                                     bool always) {
  const uint32_t servers = node_->num_servers();
  // A new node table means a peer was re-admitted (e.g. a restarted server): what was sent
  // to its predecessor is lost, so send again to every server still missing.
  const uint64_t tables = node_->tables_installed();
  if (always || tables != tables_at_send_) {
    tables_at_send_ = tables;
    for (uint32_t s = 0; s < servers; ++s) {
      if (!w->done[s]) resend(static_cast<int>(s));
    }
  } else {
    for (uint32_t s = 0; s < servers; ++s) {
      if (w->not_primary[s] && !w->done[s]) resend(static_cast<int>(s));
    }
  }
  std::fill(w->not_primary.begin(), w->not_primary.end(), false);
}

Status PsClient::Impl::OnCollectError(const Message& msg, int server, pb::MsgType type,
                                      uint64_t round, bool any_round,
                                      const std::function<void(int)>& resend, CollectWait* w) {
  const pb::MsgType rejected = msg.header.error().rejected_type();
  if (rejected != pb::MSG_UNSPECIFIED && rejected != RequestFor(type)) return Status::Ok();
  // A late push's refusal: the round's UPDATE (flagged) already said so.
  if (msg.header.error().code() == pb::ERROR_LATE_PUSH) return Status::Ok();
  // A server that does not serve the shard in its table (a failover the tables do not agree
  // on yet): asked again at the next resend check, by then under the table that names the
  // shard's server.
  if (msg.header.error().code() == pb::ERROR_NOT_PRIMARY) {
    if (resend && !w->done[server]) w->not_primary[server] = true;
    return Status::Ok();
  }
  if (!any_round && msg.header.round() != round) return Status::Ok();
  const Status refused =
      WireError(msg.header.error().code(), msg.header.error().message())
          .Prefixed("server " + std::to_string(server) + " rejected " +
                    std::string(MsgTypeName(msg.header.error().rejected_type())) + ": ");
  const std::string& what = refused.message();
  // The one refusal a caller recovers from by asking again later (Trainer's join retry).
  if (msg.header.error().code() == pb::ERROR_JOIN_TOO_LATE) return refused;
  if (resend && PeerCausable(msg.header.error().code()) && !w->done[server] &&
      w->error_retries[server] < kErrorRetries) {
    ++w->error_retries[server];
    ++errors_retried_;
    peer_log_.Warn([&](std::ostream& os) {
      os << what << " (round " << round << "); sending it again (" << w->error_retries[server]
         << " of " << kErrorRetries << ")";
    });
    resend(server);
    return Status::Ok();
  }
  return refused;
}

template <typename Fn>
Status PsClient::Impl::Collect(pb::MsgType type, uint64_t round, std::chrono::milliseconds timeout,
                               Fn apply, const std::function<void(int)>& resend,
                               std::chrono::milliseconds always_resend, bool any_round,
                               const std::function<bool(int, const Message&)>& stream,
                               const std::vector<bool>* arrived) {
  const uint32_t servers = node_->num_servers();
  CollectWait w;
  w.done = arrived != nullptr ? *arrived : std::vector<bool>(servers, false);
  w.error_retries.assign(servers, 0);
  w.not_primary.assign(servers, false);
  w.left = static_cast<uint32_t>(std::count(w.done.begin(), w.done.end(), false));
  using std::chrono::milliseconds;
  const auto deadline = Clock::now() + timeout;
  const bool resending = resend && options_.resend_check > milliseconds::zero();
  // Unconditional resends (idempotent requests) back off: the interval doubles up to 8 s.
  constexpr milliseconds kMaxResendInterval{8000};
  const bool always = always_resend > milliseconds::zero();
  milliseconds interval = always ? always_resend : options_.resend_check;
  auto next_resend = Clock::now() + interval;
  while (w.left > 0) {
    if (resending && Clock::now() >= next_resend) {
      ResendToMissing(&w, resend, always);
      if (always) interval = std::min(2 * interval, kMaxResendInterval);
      next_resend = Clock::now() + interval;
    }
    const milliseconds remaining = ReceiveWait(deadline, resending ? &next_resend : nullptr);
    if (remaining <= milliseconds::zero()) {
      return CollectTimeout(type, round, w.left, servers, timeout);
    }
    Message msg;
    SIEVE_ASSIGN_OR_RETURN(auto got, node_->Receive(&msg, remaining));
    if (!got) continue;
    const int server = ShardOf(msg, servers);
    if (server < 0) continue;  // not from a server
    if (msg.type() == pb::MSG_LATE_PUSH_ACK) {
      OnLatePushAck(server, msg.header.round());
      continue;
    }
    if (msg.type() == pb::MSG_ERROR) {
      SIEVE_RETURN_IF_ERROR(OnCollectError(msg, server, type, round, any_round, resend, &w));
      continue;
    }
    if (stream && msg.type() == type) {  // UPDATEs: each server's stream takes them in order,
      // also a later round's from a server already answered (backup workers: a round that
      // closed without us), which is never sent again.
      if (stream(server, msg) && !w.done[server]) w.Done(server);
      continue;
    }
    if (msg.type() != type || (!any_round && msg.header.round() != round) || w.done[server])
      continue;  // stale or duplicate
    if (msg.header.shard() != server) {
      peer_log_.Warn([&](std::ostream& os) {
        os << "server " << server << " answered for shard " << msg.header.shard() << "; ignored";
      });
      continue;
    }
    apply(server, msg);
    w.Done(server);
  }
  return Status::Ok();
}

namespace {

// Writes values v[0, n) (decoded by `value`) of a validated UPDATE/DENSE of the shard starting at
// lo into the replica: at lo + j (dense) or at lo + indices[j].
template <typename Value>
void WriteValues(const Message& msg, size_t n, uint64_t lo, std::span<float> weights,
                 const Value& value) {
  if (msg.dense() || msg.type() == pb::MSG_DENSE) {
    float* const out = weights.data() + lo;
    for (size_t j = 0; j < n; ++j) out[j] = value(j);
    return;
  }
  float* const base = weights.data() + lo;
  const uint32_t* const idx = msg.indices.data();
  const size_t ahead = n > kScatterPrefetchDistance ? n - kScatterPrefetchDistance : 0;
  for (size_t j = 0; j < n; ++j) {
    if (j < ahead) PrefetchForWrite(base + idx[j + kScatterPrefetchDistance]);
    base[idx[j]] = value(j);
  }
}

// Writes a validated UPDATE/DENSE of shard [lo, hi) into the replica (fp16 and bf16 values
// decoded exactly).
void ApplyValues(const Message& msg, uint64_t lo, std::span<float> weights) {
  if (!msg.values_fp16.empty()) {
    const uint16_t* const v = msg.values_fp16.data();
    WriteValues(msg, msg.values_fp16.size(), lo, weights,
                [v](size_t j) { return HalfToFloat(v[j]); });
  } else if (!msg.values_bf16.empty()) {
    const uint16_t* const v = msg.values_bf16.data();
    WriteValues(msg, msg.values_bf16.size(), lo, weights,
                [v](size_t j) { return Bf16ToFloat(v[j]); });
  } else {
    const float* const v = msg.values.data();
    WriteValues(msg, msg.values.size(), lo, weights, [v](size_t j) { return v[j]; });
  }
}

// Hands msg's values (fp16 / bf16 converted through *scratch) to sink; see UpdateSink.
void ForwardValues(const Message& msg, uint64_t lo, const UpdateSink& sink,
                   std::vector<float>* scratch) {
  std::span<const float> values = msg.values;
  if (!msg.values16().empty()) {
    scratch->resize(msg.values16().size());
    (void)Unpack16(msg.values16(), msg.values16_type(), *scratch);  // sizes equal: no error
    values = *scratch;
  }
  const bool dense = msg.dense() || msg.type() == pb::MSG_DENSE;
  sink(lo, dense ? std::span<const uint32_t>() : std::span<const uint32_t>(msg.indices), values);
}

}  // namespace

Status PsClient::Impl::SendControl(pb::MsgType type, uint64_t round, int s) {
  const int to = ServerOf(s);
  pb::Header h = MakeDataHeader(type, node_->id(), to, s, round);
  SIEVE_ASSIGN_OR_RETURN(auto frames, EncodeControl(h));
  return node_->Send(to, std::move(frames));
}

Status PsClient::Impl::PullDense(std::span<float> weights, std::chrono::milliseconds timeout,
                                 uint64_t* at) {
  if (weights.size() != num_params()) {
    return InvalidArgumentError("replica has " + std::to_string(weights.size()) +
                                " values, D = " + std::to_string(num_params()));
  }
  tables_at_send_ = node_->tables_installed();
  for (uint32_t s = 0; s < num_servers(); ++s) {
    SIEVE_RETURN_IF_ERROR(SendControl(pb::MSG_PULL_DENSE, 0, static_cast<int>(s)));
  }
  uint64_t max_round = 0;
  SIEVE_RETURN_IF_ERROR(Collect(
      pb::MSG_DENSE, 0, timeout,
      [&](int s, const Message& m) {
        ApplyValues(m, bounds_[s], weights);
        max_round = std::max<uint64_t>(max_round, m.header.round());
      },
      [&](int s) { (void)SendControl(pb::MSG_PULL_DENSE, 0, s); },
      // A re-admitted worker's first request may reach a server before the node table that
      // admits it (then it is refused towards the dead address): ask again, slowly, since every
      // answer is a whole shard. Otherwise only a new node table triggers a resend.
      /*always_resend=*/
      joined_late() ? std::chrono::milliseconds(1000) : std::chrono::milliseconds::zero(),
      /*any_round=*/true));
  if (at != nullptr) *at = max_round;
  return Status::Ok();
}

Status PsClient::Impl::Join(uint64_t round, std::chrono::milliseconds timeout) {
  tables_at_send_ = node_->tables_installed();
  for (uint32_t s = 0; s < num_servers(); ++s) {
    SIEVE_RETURN_IF_ERROR(SendControl(pb::MSG_JOIN, round, static_cast<int>(s)));
  }
  return Collect(
      pb::MSG_JOIN_ACK, round, timeout, [](int, const Message&) {},
      [&](int s) { (void)SendControl(pb::MSG_JOIN, round, s); },
      /*always_resend=*/options_.resend_check);
}

Status PsClient::Impl::OfferInitialWeights(std::span<const float> weights,
                                           std::chrono::milliseconds timeout) {
  if (weights.size() != num_params()) {
    return InvalidArgumentError("initial weights have " + std::to_string(weights.size()) +
                                " values, D = " + std::to_string(num_params()));
  }
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!std::isfinite(weights[i])) {
      return InvalidArgumentError("initial weight " + std::to_string(i) + " is not finite");
    }
  }
  // ZeroMQ may hold the frames past this call: they borrow a copy that lives until it lets go.
  auto copy = std::make_shared<const std::vector<float>>(weights.begin(), weights.end());
  auto send = [&](int s) -> Status {
    pb::Header h = MakeDataHeader(pb::MSG_INIT, node_->id(), ServerOf(s), s, 0);
    DataPayload p;
    p.dense = true;
    p.values = std::as_bytes(
        std::span<const float>(*copy).subspan(bounds_[s], bounds_[s + 1] - bounds_[s]));
    p.keepalive = copy;
    EncodeOptions eo;
    eo.checksum = options_.checksum;
    eo.compact_indices = options_.compact_indices;
    SIEVE_ASSIGN_OR_RETURN(auto frames, EncodeData(h, p, eo));
    return node_->Send(ServerOf(s), std::move(frames));
  };
  tables_at_send_ = node_->tables_installed();
  for (uint32_t s = 0; s < num_servers(); ++s) SIEVE_RETURN_IF_ERROR(send(static_cast<int>(s)));
  return Collect(
      pb::MSG_INIT_ACK, 0, timeout, [](int, const Message&) {}, [&](int s) { (void)send(s); });
}

Status PsClient::Impl::PushPull(uint64_t round, Selection* sel, std::span<float> weights,
                                RoundStats* stats, std::chrono::milliseconds timeout) {
  if (weights.size() != num_params()) {
    return InvalidArgumentError("replica has " + std::to_string(weights.size()) +
                                " values, D = " + std::to_string(num_params()));
  }
  return PushPullWith(
      round, sel, [&](int s, const Message& m) { ApplyValues(m, bounds_[s], weights); }, stats,
      timeout);
}

Status PsClient::Impl::PushPull(uint64_t round, Selection* sel, const UpdateSink& sink,
                                RoundStats* stats, std::chrono::milliseconds timeout) {
  return PushPullWith(
      round, sel,
      [&](int s, const Message& m) { ForwardValues(m, bounds_[s], sink, &sink_scratch_); }, stats,
      timeout);
}

void PsClient::Impl::TakeUpdate(int server, const Message& msg,
                                const std::function<void(int, const Message&)>& apply) {
  UpdateStream& st = streams_[server];
  if (msg.header.round() != st.next) return;  // stale or duplicate
  if (msg.header.shard() != server) {
    peer_log_.Warn([&](std::ostream& os) {
      os << "server " << server << " answered for shard " << msg.header.shard() << "; ignored";
    });
    return;
  }
  const uint32_t parts = msg.header.parts();
  if (parts > 1) {  // one part of a split reply (validated by the codec: part < parts)
    if (st.seen.empty()) {
      st.seen.assign(parts, false);
      st.left = parts;
    }
    if (st.seen.size() != parts) {
      peer_log_.Warn([&](std::ostream& os) {
        os << "server " << server << " split round " << st.next << " into " << parts
           << " parts after " << st.seen.size() << "; part ignored";
      });
      return;
    }
    if (st.seen[msg.header.part()]) return;  // duplicate part
    st.seen[msg.header.part()] = true;
    apply(server, msg);
    if (--st.left > 0) return;
  } else {
    apply(server, msg);  // the whole reply (also completes a partly received split one)
  }
  st.seen.clear();
  ++st.next;
}

void PsClient::Impl::OnLatePushAck(int shard, uint64_t round) {
  if (shard >= static_cast<int>(late_held_.size())) late_held_.resize(shard + 1);
  std::deque<HeldLatePush>& held = late_held_[shard];
  const size_t before = held.size();
  std::erase_if(held, [&](const HeldLatePush& h) { return h.round == round; });
  if (held.size() == before) acked_late_.push_back({shard, round});
}

StatusOr<uint64_t> PsClient::Impl::SendPush(int s, uint64_t round, bool dense,
                                            std::span<const uint32_t> indices,
                                            std::span<const std::byte> values,
                                            std::shared_ptr<const void> keepalive) {
  pb::Header h = MakeDataHeader(pb::MSG_PUSH, node_->id(), ServerOf(s), s, round);
  DataPayload p;
  p.dense = dense;
  p.value_type = WireType(push_values_);
  if (!dense) p.indices = indices;
  p.values = values;
  p.keepalive = std::move(keepalive);
  EncodeOptions eo;
  eo.checksum = options_.checksum;
  eo.compact_indices = options_.compact_indices;
  SIEVE_ASSIGN_OR_RETURN(auto frames, EncodeData(h, p, eo));
  const uint64_t bytes = FrameBytes(frames);
  SIEVE_RETURN_IF_ERROR(node_->Send(ServerOf(s), std::move(frames)));
  return bytes;
}

void PsClient::Impl::SendHeldLatePushes(int s) {
  if (s >= static_cast<int>(late_held_.size())) return;
  for (const HeldLatePush& h : late_held_[s]) {
    auto keep = std::make_shared<const HeldLatePush>(h);  // the frames borrow its arrays
    const std::span<const std::byte> values =
        keep->packed.empty() ? std::as_bytes(std::span<const float>(keep->values))
                             : std::as_bytes(std::span<const uint16_t>(keep->packed));
    auto sent = SendPush(s, h.round, h.dense, keep->indices, values, keep);
    if (!sent.ok()) {
      peer_log_.Warn([&](std::ostream& os) {
        os << "late push of round " << h.round << " to shard " << s << ": "
           << sent.status().ToString();
      });
    }
  }
}

Status PsClient::Impl::DrainUpdates(const std::function<void(int, const Message&)>& apply) {
  const uint32_t servers = num_servers();
  for (;;) {
    Message msg;
    SIEVE_ASSIGN_OR_RETURN(auto got, node_->Receive(&msg, std::chrono::milliseconds::zero()));
    if (!got) return Status::Ok();
    const int server = ShardOf(msg, servers);
    if (server >= 0 && msg.type() == pb::MSG_LATE_PUSH_ACK) {
      OnLatePushAck(server, msg.header.round());
      continue;
    }
    if (server < 0 || msg.type() != pb::MSG_UPDATE)
      continue;  // nothing awaits it: an ERROR_LATE_PUSH, a resent reply
    TakeUpdate(server, msg, apply);
  }
}

Status PsClient::Impl::PushPullWith(uint64_t round, Selection* sel,
                                    const std::function<void(int, const Message&)>& apply,
                                    RoundStats* stats, std::chrono::milliseconds timeout) {
  const uint64_t d = num_params();
  if (sel->dense ? sel->values.size() != d : sel->indices.size() != sel->values.size()) {
    return InvalidArgumentError(
        "selection sizes do not match (dense: D values; sparse: one value per index)");
  }
  const auto t0 = Clock::now();
  PushPullRound r;
  r.round = round;
  r.sel = sel;
  r.lent = buffers_.Get();
  SIEVE_RETURN_IF_ERROR(FillSendBuffers(&r));
  Status status;
  const uint32_t servers = num_servers();
  StartUpdateStreams(&r);
  tables_at_send_ = node_->tables_installed();
  SendHeldLatePushesAfterNewTable();
  // Every server gets the slice, also one whose UPDATE of the round is already here: with backup
  // workers it applies a late push in a later round (--late_pushes=apply) or refuses it.
  for (uint32_t s = 0; s < servers && status.ok(); ++s) status = PushSlice(&r, s);
  r.stats.push_seconds = Since(t0);
  const auto t1 = Clock::now();
  const std::function<void(int, const Message&)> take = [&](int s, const Message& m) {
    TakeRoundUpdate(&r, s, m, apply);
  };
  if (status.ok()) status = CollectRoundUpdates(&r, timeout, take);
  if (status.ok()) status = DrainUpdates(take);
  if (status.ok()) {
    uint64_t all_through = streams_[0].next;
    for (const UpdateStream& st : streams_) all_through = std::min(all_through, st.next);
    r.stats.rounds_skipped = all_through - (round + 1);
    HoldLatePushes(r);
    RecordMissedSlices(&r);
  }
  r.stats.wait_seconds = Since(t1);
  ReturnSendBuffers(std::move(r.lent), sel);
  if (stats != nullptr) *stats = std::move(r.stats);
  return status;
}

Status PsClient::Impl::FillSendBuffers(PushPullRound* r) {
  SendBuffers& b = *r->lent;
  Selection* const sel = r->sel;
  if (!sel->dense) {
    SIEVE_RETURN_IF_ERROR(SplitByShard(sel->indices, bounds_, &offsets_, &b.relative));
  }
  b.indices.swap(sel->indices);
  b.values.swap(sel->values);
  r->packed = push_values_ != ValuePrecision::kFp32;
  if (r->packed) {
    b.packed.resize(b.values.size());
    SIEVE_RETURN_IF_ERROR(PackSaturating(b.values, push_values_, b.packed));
  }
  return Status::Ok();
}

void PsClient::Impl::StartUpdateStreams(PushPullRound* r) {
  const uint64_t round = r->round;
  const uint32_t servers = num_servers();
  // Where each server's UPDATE stream stands: a caller that moved on (a pull, a join) starts at
  // `round`; a stream already past it (backup workers: the round closed without us) is answered.
  streams_.resize(servers);
  r->arrived.assign(servers, false);
  r->missed.assign(servers, false);
  r->late.assign(servers, false);
  late_held_.resize(servers);
  for (uint32_t s = 0; s < servers; ++s) {
    UpdateStream& st = streams_[s];
    if (st.next < round) st = UpdateStream{round, {}, 0, {}, {}};
    r->arrived[s] = st.next > round;
    r->missed[s] = std::find(st.flagged.begin(), st.flagged.end(), round) != st.flagged.end();
    std::erase_if(st.flagged, [&](uint64_t f) { return f <= round; });
    r->late[s] = std::find(st.late.begin(), st.late.end(), round) != st.late.end();
    std::erase_if(st.late, [&](uint64_t f) { return f <= round; });
  }
}

void PsClient::Impl::SendHeldLatePushesAfterNewTable() {
  // A new node table (a failover) since the held late pushes went: they go again first, so each
  // arrives before this round's push at the shard's server now.
  if (node_->tables_installed() != late_tables_) {
    late_tables_ = node_->tables_installed();
    for (uint32_t s = 0; s < num_servers(); ++s) SendHeldLatePushes(static_cast<int>(s));
  }
}

std::pair<size_t, size_t> PsClient::Impl::SliceOf(const PushPullRound& r, uint32_t s) const {
  return r.sel->dense ? std::pair<size_t, size_t>{bounds_[s], bounds_[s + 1]}
                      : std::pair<size_t, size_t>{offsets_[s], offsets_[s + 1]};
}

Status PsClient::Impl::PushSlice(PushPullRound* r, uint32_t s) {
  const SendBuffers& b = *r->lent;
  const bool dense = r->sel->dense;
  const auto [from, to] = SliceOf(*r, s);
  const std::span<const uint32_t> indices =
      dense ? std::span<const uint32_t>()
            : std::span<const uint32_t>(b.relative).subspan(from, to - from);
  const std::span<const std::byte> values =
      r->packed ? std::as_bytes(std::span<const uint16_t>(b.packed).subspan(from, to - from))
                : std::as_bytes(std::span<const float>(b.values).subspan(from, to - from));
  SIEVE_ASSIGN_OR_RETURN(const uint64_t bytes,
                         SendPush(static_cast<int>(s), r->round, dense, indices, values, r->lent));
  r->stats.bytes_up += bytes;
  r->stats.pairs_up += to - from;
  return Status::Ok();
}

void PsClient::Impl::TakeRoundUpdate(PushPullRound* r, int s, const Message& m,
                                     const std::function<void(int, const Message&)>& apply) {
  const uint64_t round = r->round;
  r->stats.bytes_down += FrameBytes(m.storage);
  r->stats.pairs_down += m.header.count();
  if (m.header.flags() & pb::FLAG_PUSH_LATE) {
    if (m.header.round() == round) {
      r->late[s] = true;
    } else if (streams_[s].late.empty() || streams_[s].late.back() != m.header.round()) {
      streams_[s].late.push_back(m.header.round());  // a later round's, for its PushPull
    }
  }
  if (m.header.flags() & pb::FLAG_PUSH_MISSED) {
    if (m.header.round() == round) {
      r->missed[s] = true;
    } else if (streams_[s].flagged.empty() || streams_[s].flagged.back() != m.header.round()) {
      streams_[s].flagged.push_back(m.header.round());  // a later round's, for its PushPull
    }
  }
  apply(s, m);
}

Status PsClient::Impl::CollectRoundUpdates(PushPullRound* r, std::chrono::milliseconds timeout,
                                           const std::function<void(int, const Message&)>& take) {
  const uint64_t round = r->round;
  return Collect(
      pb::MSG_UPDATE, round, timeout, take,
      [&](int s) {
        ++resends_;
        SendHeldLatePushes(s);  // before the round's push: the shard takes them in order
        Status st = PushSlice(r, static_cast<uint32_t>(s));
        if (!st.ok()) {
          peer_log_.Warn([&](std::ostream& os) {
            os << "resend of round " << round << " to server " << s << ": " << st.ToString();
          });
        }
      },
      std::chrono::milliseconds::zero(), /*any_round=*/false,
      [&](int s, const Message& m) {
        TakeUpdate(s, m, take);
        return streams_[s].next > round;
      },
      &r->arrived);
}

void PsClient::Impl::HoldLatePushes(const PushPullRound& r) {
  const SendBuffers& b = *r.lent;
  for (uint32_t s = 0; s < num_servers(); ++s) {
    if (!r.late[s]) continue;
    const auto [from, to] = SliceOf(r, s);
    HeldLatePush h;
    h.round = r.round;
    h.dense = r.sel->dense;
    if (!r.sel->dense) h.indices.assign(b.relative.begin() + from, b.relative.begin() + to);
    if (r.packed) {
      h.packed.assign(b.packed.begin() + from, b.packed.begin() + to);
    } else {
      h.values.assign(b.values.begin() + from, b.values.begin() + to);
    }
    std::deque<HeldLatePush>& held = late_held_[s];
    // Its acknowledgement may have come already (the UPDATE and the ack cross).
    if (std::find(acked_late_.begin(), acked_late_.end(), std::pair<int, uint64_t>(s, r.round)) ==
        acked_late_.end()) {
      held.push_back(std::move(h));
    }
    if (held.size() > kMaxHeldLatePushes) {
      peer_log_.Warn([&](std::ostream& os) {
        os << "shard " << s << " has not acknowledged " << held.size()
           << " late pushes; the push of round " << held.front().round
           << " is no longer kept for a failover";
      });
      held.pop_front();
    }
  }
  acked_late_.clear();
}

void PsClient::Impl::RecordMissedSlices(PushPullRound* r) {
  const SendBuffers& b = *r->lent;
  RoundStats& local = r->stats;
  for (uint32_t s = 0; s < num_servers(); ++s) {
    if (!r->missed[s]) continue;
    const auto [from, to] = SliceOf(*r, s);
    ++local.missed_shards;
    local.missed_values.insert(local.missed_values.end(), b.values.begin() + from,
                               b.values.begin() + to);
    for (size_t j = from; j < to; ++j)
      local.missed_indices.push_back(r->sel->dense ? static_cast<uint32_t>(j) : b.indices[j]);
  }
}

void PsClient::Impl::ReturnSendBuffers(std::shared_ptr<SendBuffers> lent, Selection* sel) {
  // Hand the arrays back unless ZeroMQ still holds frames pointing into them.
  const SendBuffers* const mine = lent.get();
  lent.reset();
  if (std::unique_ptr<SendBuffers> back = buffers_.Reclaim(mine)) {
    sel->indices.swap(back->indices);
    sel->values.swap(back->values);
    buffers_.Put(std::move(back));
  } else {
    sel->indices.clear();
    sel->values.clear();
  }
}

}  // namespace sieve
