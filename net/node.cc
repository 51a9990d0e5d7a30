#include "net/node.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

#include "net/address.h"
#include "net/loop_stall.h"
#include "proto/error_code.h"
#include "proto/job_identity.h"
#include "proto/messages.h"
#include "proto/register_proof.h"

namespace sieve {
namespace {

using Clock = std::chrono::steady_clock;

// Peers' messages kept while waiting for the first node table (more are dropped).
constexpr size_t kMaxMessagesBeforeTable = 1024;

// What a node logs when the scheduler declares a peer dead: its role and rank, and what the
// operator can do about it.
std::string DeadPeerMessage(const pb::NodeDead& d) {
  const bool server = d.role() == pb::ROLE_SERVER;
  const std::string who = std::string(server ? "server " : "worker ") + std::to_string(d.rank());
  if (d.finished()) {
    return who + " (node " + std::to_string(d.id()) +
           ") finished its training before the others; rounds, barriers and collectives go on "
           "without it";
  }
  std::string m = who + " (node " + std::to_string(d.id()) + ") is dead: " + d.reason() + ". ";
  if (server) {
    m += "With the scheduler's --server_failure=wait (the default) the job waits for a new "
         "`sieve-server --rank=" +
         std::to_string(d.rank()) +
         "` started against the same --scheduler (with its --checkpoint_dir it restores the "
         "shard); with --server_failure=fail the job ends.";
  } else {
    m += "The job goes on without it; a new `sieve-worker --rank=" + std::to_string(d.rank()) +
         "` started against the same --scheduler rejoins it.";
  }
  return m;
}

uint64_t RandomInstance() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
         static_cast<uint64_t>(Clock::now().time_since_epoch().count());
}

bool IsDataPlane(pb::MsgType t) {
  return t == pb::MSG_PUSH || t == pb::MSG_UPDATE || t == pb::MSG_PULL_DENSE ||
         t == pb::MSG_DENSE || t == pb::MSG_ERROR || t == pb::MSG_JOIN || t == pb::MSG_JOIN_ACK ||
         t == pb::MSG_INIT || t == pb::MSG_INIT_ACK || t == pb::MSG_REPLICATE ||
         t == pb::MSG_REPLICATE_ACK || t == pb::MSG_LATE_PUSH_ACK;
}

// Whether a node of role `self` keeps a connection to a node of role `peer`: workers talk only to
// servers and servers only to workers (and both to the scheduler, connected at the start), so a
// node holds 2 (peers of the other role + 1) + 1 sockets instead of a full mesh's 2 N - 1.
// Who connects to whom: everyone to the scheduler, workers and servers to each other, and with
// replication (NodeTable.replication > 0) servers to servers (a shard's primary sends its events to
// its backups, which acknowledge them).
bool Talks(pb::Role self, pb::Role peer, uint32_t replication) {
  if (self == pb::ROLE_SCHEDULER || peer == pb::ROLE_SCHEDULER) return true;
  if (self == pb::ROLE_SERVER && peer == pb::ROLE_SERVER) return replication > 0;
  return self != peer;
}

}  // namespace

Node::Node(const NodeOptions& options)
    : options_(options), instance_(RandomInstance()), job_(options.transport.job) {}

StatusOr<std::unique_ptr<Node>> Node::Start(const NodeOptions& options) {
  if (options.role != pb::ROLE_SERVER && options.role != pb::ROLE_WORKER) {
    return InvalidArgumentError("a Node is a server or a worker");
  }
  std::string sched_host;
  uint16_t sched_port = 0;
  SIEVE_RETURN_IF_ERROR(ParseHostPort(options.scheduler, &sched_host, &sched_port));
  std::unique_ptr<Node> node(new Node(options));
  SIEVE_ASSIGN_OR_RETURN(auto transport, CreateTransport(options.transport));
  node->transport_ = std::move(transport);
  SIEVE_RETURN_IF_ERROR(node->transport_->Connect(kSchedulerId, sched_host, sched_port));
  node->last_from_scheduler_ = Clock::now();
  node->io_ = std::thread([n = node.get()] { n->IoLoop(); });
  SIEVE_RETURN_IF_ERROR(node->Register());
  return node;
}

StatusOr<std::unique_ptr<Node>> Node::CreateForTesting(const NodeOptions& options,
                                                       pb::NodeTable table, int id) {
  std::unique_ptr<Node> node(new Node(options));
  SIEVE_ASSIGN_OR_RETURN(auto transport, CreateTransport(options.transport));
  node->transport_ = std::move(transport);
  bool found = false;
  for (pb::NodeInfo& n : *table.mutable_nodes()) {
    if (n.id() == id) {
      n.set_instance(node->instance_);
      found = true;
    }
  }
  if (!found) return InvalidArgumentError("the node table has no node " + std::to_string(id));
  MutexLock lock(&node->mu_);
  node->InstallFirstTableLocked(table);
  return node;
}

void Node::DispatchForTesting(Frames frames) {
  std::string key = PeerKey(frames);
  Dispatch(std::move(frames), std::move(key));
}

Node::~Node() {
  io_stop_ = true;
  // The I/O thread may be waiting for a message with no timeout: closing the transport wakes it
  // (Recv fails with Aborted).
  if (transport_) transport_->Close();
  if (io_.joinable()) io_.join();
}

Status Node::Register() {
  MutexLock lock(&mu_);
  register_header_ = MakeRegisterHeader(options_.role, transport_->host(), transport_->port(),
                                        options_.rank, instance_, options_.num_params);
  register_header_.mutable_register_()->set_rebuildable(options_.rebuildable);
  SetRegisterBytesLocked();
  // The registration that completes the job is answered by the node table alone (no ack).
  for (int attempt = 0; attempt < options_.register_attempts && !acked_ && !have_table_;
       ++attempt) {
    const pb::Header h = register_header_;
    challenged_ = false;
    lock.Unlock();
    SIEVE_ASSIGN_OR_RETURN(auto frames, EncodeControl(h));
    Status s = transport_->Send(kSchedulerId, std::move(frames));
    lock.Lock();
    if (!s.ok() && s.code() != StatusCode::kDeadlineExceeded) return s;
    // A challenge (a job with a token) is answered at once, with the proof.
    cv_.WaitFor(&mu_, options_.register_retry, [&] {
      mu_.AssertHeld();
      return acked_ || have_table_ || challenged_ || !register_error_.ok() ||
             !StopStatusLocked().ok();
    });
    if (!register_error_.ok()) return register_error_.Prefixed("scheduler refused registration: ");
    SIEVE_RETURN_IF_ERROR(StopStatusLocked());
  }
  if (!acked_ && !have_table_) {
    return UnavailableError("scheduler at " + options_.scheduler + " did not answer " +
                            std::to_string(options_.register_attempts) +
                            " registration attempts (" +
                            std::to_string(options_.register_retry.count()) +
                            " ms apart); a scheduler given another --job_token drops them");
  }
  const bool got = cv_.WaitFor(&mu_, options_.startup_timeout, [&] {
    mu_.AssertHeld();
    return have_table_ || !register_error_.ok() || !StopStatusLocked().ok();
  });
  if (!register_error_.ok()) return register_error_.Prefixed("scheduler refused registration: ");
  SIEVE_RETURN_IF_ERROR(StopStatusLocked());
  if (!got) {
    return DeadlineExceededError("registered, but no node table within " +
                                 std::to_string(options_.startup_timeout.count()) +
                                 " ms (other nodes missing?)");
  }
  return Status::Ok();
}

void Node::SetRegisterBytesLocked() {
  pb::Header copy = register_header_;
  copy.set_version(kProtocolVersion);
  register_bytes_ = copy.SerializeAsString();
}

void Node::AnswerChallenge(const pb::RegisterChallenge& c) {
  MutexLock lock(&mu_);
  if (have_table_ || IsZero(options_.job_key))
    return;  // nothing to prove (or no token to prove it)
  pb::Register* r = register_header_.mutable_register_();
  if (r->challenge() == c.challenge()) return;  // answered already (a resent challenge)
  r->set_challenge(c.challenge());
  r->set_proof(RegisterProof(options_.job_key, *r));
  SetRegisterBytesLocked();
  challenged_ = true;
  cv_.NotifyAll();
}

Status Node::StopStatusLocked() const {
  if (!stop_reason_.empty()) return AbortedError(stop_reason_);
  if (dropped_) {
    return UnavailableError(
        "the scheduler declared this process dead (silent for longer than its heartbeat timeout: "
        "stopped or starved that long); a new process under the same rank rejoins the job");
  }
  if (scheduler_lost_) {
    return UnavailableError("scheduler silent for more than " +
                            std::to_string(options_.heartbeat_timeout.count()) + " ms");
  }
  if (shutdown_) return AbortedError(shutdown_failed_ ? "job failed" : "job finished");
  return Status::Ok();
}

void Node::IoLoop() {
  auto next_heartbeat = Clock::now();
  // Until the scheduler acknowledges the registration, poll at this period; afterwards sleep until
  // a message comes or the next heartbeat is due (forever without heartbeats), so an idle node
  // wakes once per heartbeat interval, not several times a second.
  constexpr std::chrono::milliseconds kUnregisteredPoll{100};
  const std::chrono::milliseconds unregistered_poll =
      options_.heartbeat_interval > std::chrono::milliseconds::zero()
          ? std::min(kUnregisteredPoll, options_.heartbeat_interval)
          : kUnregisteredPoll;
  std::chrono::milliseconds wait = unregistered_poll;
  bool scheduler_lost = false;  // this thread's copy of scheduler_lost_ (only it sets that)
  // A pass waits at most a heartbeat interval (or the unregistered poll) before it looks again.
  LoopStall stall(
      std::max<std::chrono::milliseconds>(options_.heartbeat_interval, unregistered_poll) +
      std::chrono::milliseconds(250));
  while (!io_stop_) {
    Frames frames;
    auto got = transport_->Recv(&frames, wait);
    if (!got.ok()) {
      if (got.status().code() == StatusCode::kAborted) break;
      LOG(WARNING) << "receive failed: " << got.status().ToString();
      continue;
    }
    if (*got) {
      std::string key = PeerKey(frames);
      Dispatch(std::move(frames), std::move(key));
    }
    reject_log_.Flush();
    event_log_.Flush();
    if (options_.heartbeat_interval <= std::chrono::milliseconds::zero()) {
      wait = kForever;  // no heartbeats, no loss detection: only messages and Close() wake us
      continue;
    }
    const auto now = Clock::now();
    // Time this process did not run is not the scheduler's silence: its messages of that time
    // are still queued (net/loop_stall.h).
    last_from_scheduler_ += stall.Pass(now);
    bool registered, have_table;
    {
      MutexLock lock(&mu_);
      registered = (acked_ || have_table_) && !shutdown_;
      have_table = have_table_;
    }
    if (!registered) {
      wait = unregistered_poll;
      continue;
    }
    if (now >= next_heartbeat) {
      next_heartbeat = now + options_.heartbeat_interval;
      SendLiveness(have_table);
    }
    if (now - last_from_scheduler_ > options_.heartbeat_timeout) scheduler_lost |= LoseScheduler();
    const auto loss_check =
        last_from_scheduler_ + options_.heartbeat_timeout + std::chrono::milliseconds(1);
    const auto deadline = scheduler_lost ? next_heartbeat : std::min(next_heartbeat, loss_check);
    const auto until = deadline - now;
    wait = std::clamp(std::chrono::ceil<std::chrono::milliseconds>(until),
                      std::chrono::milliseconds(1), options_.heartbeat_interval);
  }
}

void Node::SendLiveness(bool have_table) {
  Frames frames;
  if (!have_table) {
    // Before the node table the scheduler knows this node only by its registration, so the
    // liveness signal is the (idempotent) REGISTER itself, which the scheduler acknowledges.
    MutexLock lock(&mu_);
    frames.emplace_back(register_bytes_.data(), register_bytes_.size());
  } else {
    pb::Header h = MakeHeader(pb::MSG_HEARTBEAT, id_ >= 0 ? id_ : -1, kSchedulerId);
    {
      MutexLock lock(&mu_);
      *h.mutable_heartbeat() = report_;
    }
    auto enc = EncodeControl(h);
    if (!enc.ok()) return;
    frames = std::move(enc).value();
  }
  (void)transport_->TrySend(kSchedulerId, std::move(frames));  // never waits on a peer
}

bool Node::LoseScheduler() {
  MutexLock lock(&mu_);
  if (scheduler_lost_) return false;
  LOG(ERROR) << "scheduler silent for more than " << options_.heartbeat_timeout.count() << " ms";
  scheduler_lost_ = true;
  cv_.NotifyAll();
  return true;
}

bool Node::OfThisJobInstance(const Message& msg) const {
  const pb::Header& h = msg.header;
  if (h.type() == pb::MSG_NODE_TABLE && HaveTableOnIoThread()) {
    return h.node_table().job_instance() == table_.job_instance();
  }
  if (h.type() == pb::MSG_NODE_TABLE) {  // the first: it must list this process
    for (const auto& n : h.node_table().nodes()) {
      if (n.instance() == instance_) return true;
    }
    return false;
  }
  if (h.type() == pb::MSG_ERROR &&
      !HaveTableOnIoThread()) {  // the answer to this process's REGISTER
    return h.error().register_instance() == instance_;
  }
  if (h.type() ==
      pb::MSG_REGISTER_CHALLENGE) {  // only for this process's REGISTER, before the table
    return !HaveTableOnIoThread() && h.register_challenge().register_instance() == instance_;
  }
  return true;
}

bool Node::FromClaimedSender(int sender, const std::string& key) const {
  if (!options_.transport.curve.enabled) return true;
  if (sender == kSchedulerId) {
    const std::string& scheduler = options_.transport.curve.scheduler_key;
    return scheduler.empty() || key == scheduler;
  }
  // current_ is written on this thread only. Unknown ids are refused by the caller.
  if (sender < 1 || static_cast<size_t>(sender) > current_.size()) return true;
  return current_[sender - 1].key() == key;
}

void Node::Dispatch(Frames frames, std::string key) {
  // Before the first table a peer's message can be neither decoded (no shard lengths) nor
  // attributed, yet a peer that got the table first may already send: keep a copy to dispatch
  // again once the table is in. have_table_ only changes on this thread.
  Frames copy;
  if (!HaveTableOnIoThread()) copy = CopyFrames(frames);
  Message msg;
  Status s;
  {
    // shard_lengths_ is only written by this thread (InstallTable), so reading it here is safe.
    DecodeLimits limits;
    limits.shard_lengths = shard_lengths_;
    limits.job = job_;
    // Before the table, the scheduler's answers to the REGISTER carry the token's digest; from
    // the table on, every message carries the instance's and nothing else is believed.
    limits.token_job = options_.transport.job;
    if (!HaveTableOnIoThread()) limits.token_types = kTokenStampedToNode;
    s = Decode(std::move(frames), limits, &msg);
  }
  const pb::ErrorCode code = WireCodeOf(s);
  const int sender = msg.header.sender();
  if (!HaveTableOnIoThread() && sender > 0) {  // checked (job included) when dispatched again
    if (before_table_.size() < kMaxMessagesBeforeTable) {
      before_table_.push_back({std::move(copy), std::move(key)});
      return;
    }
    reject_log_.Warn([&](std::ostream& os) {
      os << "more than " << kMaxMessagesBeforeTable
         << " peer messages before the node table; dropping";
    });
  }
  if (!filter_.Admit(msg.header, code, s, FromClaimedSender(sender, key))) return;
  if (s.ok() && sender == kSchedulerId && !OfThisJobInstance(msg)) {
    filter_.DropOtherInstance(msg.header);
    return;
  }
  if (!s.ok()) {
    rejected_++;
    reject_log_.Warn([&](std::ostream& os) {
      os << "rejected " << MsgTypeName(msg.header.type()) << " from node " << sender << ": "
         << s.ToString();
    });
    if (HaveTableOnIoThread() && sender > 0 && sender <= table_.nodes_size()) {
      (void)SendError(sender, code, s.message(), msg.header.type(), msg.header.round());
    }
    return;
  }
  if (IsDataPlane(msg.type()) && !(msg.type() == pb::MSG_ERROR && sender == kSchedulerId)) {
    if (!HaveTableOnIoThread() || sender <= 0 || sender > table_.nodes_size()) {
      rejected_++;
      reject_log_.Warn([&](std::ostream& os) {
        os << "dropped " << MsgTypeName(msg.type()) << " from unknown node " << sender;
      });
      return;
    }
    MutexLock data_lock(&data_mu_);
    if (on_data_) {
      on_data_(std::move(msg));
      return;
    }
    MutexLock lock(&mu_);
    inbox_.push_back(std::move(msg));
    cv_.NotifyAll();
    return;
  }
  if (sender != kSchedulerId) {
    rejected_++;
    reject_log_.Warn([&](std::ostream& os) {
      os << "dropped control message " << MsgTypeName(msg.type()) << " from node " << sender;
    });
    return;
  }
  HandleControl(std::move(msg));
}

namespace {

// Whether a control message of `type` shows that the scheduler lives. Only a message that
// decoded, is of this job and comes from the scheduler (under CURVE with its key:
// FromClaimedSender) reaches HandleControl; garbage, other jobs' messages and impostors were
// dropped before and refresh nothing.
bool ShowsSchedulerAlive(pb::MsgType type) {
  switch (type) {
    case pb::MSG_REGISTER_ACK:
    case pb::MSG_REGISTER_CHALLENGE:
    case pb::MSG_NODE_TABLE:
    case pb::MSG_BARRIER_RELEASE:
    case pb::MSG_NODE_DEAD:
    case pb::MSG_SHUTDOWN:
    case pb::MSG_ERROR:
    case pb::MSG_HEARTBEAT:
    case pb::MSG_COLLECTIVE_RESULT:
      return true;
    default:
      return false;
  }
}

}  // namespace

void Node::HandleControl(Message msg) {
  const pb::Header& h = msg.header;
  if (ShowsSchedulerAlive(h.type())) last_from_scheduler_ = Clock::now();
  switch (h.type()) {
    case pb::MSG_REGISTER_ACK: {
      MutexLock lock(&mu_);
      acked_ = true;
      cv_.NotifyAll();
      break;
    }
    case pb::MSG_REGISTER_CHALLENGE:
      AnswerChallenge(h.register_challenge());
      break;
    case pb::MSG_NODE_TABLE:
      OnNodeTable(h.node_table());
      break;
    case pb::MSG_BARRIER_RELEASE:
      OnBarrierRelease(h.barrier());
      break;
    case pb::MSG_NODE_DEAD:
      OnNodeDead(h.node_dead());
      break;
    case pb::MSG_SHUTDOWN:
      OnShutdown(h.shutdown());
      break;
    case pb::MSG_COLLECTIVE_RESULT:
      OnCollectiveResult(h.collective());
      break;
    case pb::MSG_ERROR:
      OnSchedulerError(h);
      break;
    case pb::MSG_HEARTBEAT:
      break;  // liveness already recorded
    default:
      rejected_++;
      reject_log_.Warn([&](std::ostream& os) {
        os << "unexpected " << MsgTypeName(h.type()) << " from the scheduler";
      });
  }
}

void Node::OnNodeTable(const pb::NodeTable& table) {
  InstallTable(table);
  std::vector<EarlyMessage> early;
  if (HaveTableOnIoThread()) early.swap(before_table_);
  for (EarlyMessage& m : early) Dispatch(std::move(m.frames), std::move(m.key));
}

void Node::OnBarrierRelease(const pb::Barrier& barrier) {
  MutexLock lock(&mu_);
  const uint32_t g = barrier.group();
  if (g < barrier_released_.size() && barrier.seq() > barrier_released_[g]) {
    barrier_released_[g] = barrier.seq();
  }
  cv_.NotifyAll();
}

void Node::OnNodeDead(const pb::NodeDead& dead_node) {
  const int dead = dead_node.id();
  if (dead < 1 || static_cast<size_t>(dead) > current_.size()) {  // current_: this thread's
    rejected_++;
    reject_log_.Warn([&](std::ostream& os) {
      os << "ignored NODE_DEAD for node " << dead << ", which is not in the node table";
    });
    return;
  }
  std::function<void(const pb::NodeDead&)> fn;
  {
    MutexLock lock(&mu_);
    dead_.insert(dead_node.id());
    fn = on_node_dead_;
  }
  event_log_.Warn([&](std::ostream& os) { os << DeadPeerMessage(dead_node); });
  if (fn) fn(dead_node);
}

void Node::OnShutdown(const pb::Shutdown& shutdown) {
  MutexLock lock(&mu_);
  if (shutdown_) return;  // the first SHUTDOWN counts (and is logged), repeats change nothing
  shutdown_ = true;
  shutdown_failed_ = shutdown.failed();
  LOG(INFO) << "shutdown from scheduler: " << shutdown.reason();
  cv_.NotifyAll();
}

void Node::OnCollectiveResult(const pb::Collective& collective) {
  MutexLock lock(&mu_);
  if (collective.seq() != collective_seq_ || collective_answered_) {
    rejected_++;
    reject_log_.Warn([&](std::ostream& os) {
      os << "dropped the result of collective " << collective.seq()
         << ", which this node does not wait for";
    });
    return;
  }
  collective_result_.values.assign(collective.values().begin(), collective.values().end());
  collective_result_.contributors = collective.contributors();
  collective_answered_ = true;
  cv_.NotifyAll();
}

void Node::OnSchedulerError(const pb::Header& h) {
  MutexLock lock(&mu_);
  if (h.error().rejected_type() == pb::MSG_COLLECTIVE && h.round() == collective_seq_ &&
      !collective_answered_) {
    collective_error_ = WireError(h.error().code(), h.error().message());
    collective_answered_ = true;
    cv_.NotifyAll();
  }
  if (!have_table_) register_error_ = WireError(h.error().code(), h.error().message());
  // The answer to this process's HEARTBEAT once the scheduler declared it dead (it was stopped
  // past the timeout: its own stall is not the scheduler's silence, net/loop_stall.h): the job
  // went on without it, so it leaves, and whatever restarts it brings a new process.
  if (have_table_ && h.error().code() == pb::ERROR_NOT_REGISTERED &&
      h.error().rejected_type() == pb::MSG_HEARTBEAT) {
    dropped_ = true;
  }
  event_log_.Error([&](std::ostream& os) { os << "scheduler error: " << h.error().message(); });
  cv_.NotifyAll();
}

void Node::InstallTable(const pb::NodeTable& table) {
  std::vector<pb::NodeInfo> rejoined;
  std::function<void(const pb::NodeInfo&)> fn;
  std::function<void(const pb::NodeTable&)> table_fn;
  {
    MutexLock lock(&mu_);
    tables_installed_.fetch_add(1);
    if (have_table_) {
      // A later table (a node re-admitted under its rank): reconnect nodes whose address
      // changed; report those running as a new instance. table_ stays the start-up table.
      for (const auto& n : table.nodes()) {
        if (n.id() < 1 || static_cast<size_t>(n.id()) > current_.size()) continue;
        pb::NodeInfo& old = current_[n.id() - 1];
        if (n.id() != id_ && (old.host() != n.host() || old.port() != n.port())) {
          if (Talks(options_.role, n.role(), table_.replication()))
            (void)transport_->Connect(n.id(), n.host(), n.port());
          dead_.erase(n.id());
        }
        if (n.id() != id_ && old.instance() != n.instance()) rejoined.push_back(n);
        old = n;
      }
      SetShardPrimaries(table);
      fn = on_node_rejoined_;
      table_fn = on_table_;
    } else {
      InstallFirstTableLocked(table);
      return;
    }
  }
  if (fn) {
    for (const pb::NodeInfo& n : rejoined) fn(n);
  }
  if (table_fn) table_fn(table);
}

void Node::SetShardPrimaries(const pb::NodeTable& table) {
  const int servers = static_cast<int>(table_.num_servers());
  for (int s = 0; s < servers; ++s) {
    int primary = s;
    if (s < table.shard_primary_size() && table.shard_primary(s) >= 0 &&
        table.shard_primary(s) < servers) {
      primary = table.shard_primary(s);
    }
    shard_primary_[static_cast<size_t>(s)].store(primary, std::memory_order_release);
  }
}

int Node::ShardPrimary(int shard) const {
  if (shard < 0 || static_cast<uint32_t>(shard) >= table_.num_servers()) return shard;
  return shard_primary_[static_cast<size_t>(shard)].load(std::memory_order_acquire);
}

void Node::set_on_table(std::function<void(const pb::NodeTable&)> fn) {
  MutexLock lock(&mu_);
  on_table_ = std::move(fn);
}

void Node::InstallFirstTableLocked(const pb::NodeTable& table) {
  table_ = table;
  shard_primary_ = std::make_unique<std::atomic<int>[]>(table.num_servers());
  SetShardPrimaries(table);
  current_.assign(table.nodes().begin(), table.nodes().end());
  for (const auto& n : table.nodes()) {
    if (n.instance() == instance_) {
      id_ = n.id();
      rank_ = n.rank();
    } else if (Talks(options_.role, n.role(), table.replication())) {
      Status s = transport_->Connect(n.id(), n.host(), n.port());
      if (!s.ok()) LOG(ERROR) << "cannot connect to node " << n.id() << ": " << s.ToString();
    }
    if (n.role() == pb::ROLE_SERVER) {
      shards_.push_back({n.shard_lo(), n.shard_hi()});
      shard_lengths_.push_back(n.shard_hi() - n.shard_lo());
    }
  }
  if (id_ < 0) {
    register_error_ = FailedPreconditionError("node table does not list this node");
  } else {
    have_table_ = true;
    job_ = JobInstanceDigest(options_.transport.job, table.job_instance());
    if (transport_ != nullptr) transport_->SetJob(job_);
  }
  cv_.NotifyAll();
}

Status Node::Send(int peer, Frames frames) { return transport_->Send(peer, std::move(frames)); }

Status Node::SendError(int peer, pb::ErrorCode code, const std::string& message,
                       pb::MsgType rejected, uint64_t round, int shard) {
  pb::Header h = MakeErrorHeader(id_, peer, round, code, message, rejected);
  h.set_shard(shard);
  SIEVE_ASSIGN_OR_RETURN(auto frames, EncodeControl(h));
  // Never wait: a peer that sends garbage and does not read must not stall this thread.
  Status sent = transport_->TrySend(peer, std::move(frames));
  if (!sent.ok()) errors_dropped_.fetch_add(1, std::memory_order_relaxed);
  return sent;
}

Status Node::Reply(int peer, Frames frames) {
  Status sent = transport_->TrySend(peer, std::move(frames));
  if (!sent.ok()) replies_dropped_.fetch_add(1, std::memory_order_relaxed);
  return sent;
}

StatusOr<bool> Node::Receive(Message* out, std::chrono::milliseconds timeout) {
  MutexLock lock(&mu_);
  auto ready = [&] {
    mu_.AssertHeld();
    return !inbox_.empty() || interrupted_ || !StopStatusLocked().ok();
  };
  if (timeout < std::chrono::milliseconds::zero()) {  // kForever
    cv_.Wait(&mu_, ready);
  } else if (!cv_.WaitFor(&mu_, timeout, ready)) {
    return false;
  }
  if (!inbox_.empty()) {
    *out = std::move(inbox_.front());
    inbox_.pop_front();
    return true;
  }
  Status stop = StopStatusLocked();
  if (!stop.ok()) return stop;
  interrupted_ = false;
  return false;
}

void Node::Interrupt() {
  MutexLock lock(&mu_);
  interrupted_ = true;
  cv_.NotifyAll();
}

Status Node::Barrier(uint32_t group, std::chrono::milliseconds timeout) {
  if (group == 0 || group > kGroupAll) return InvalidArgumentError("bad barrier group");
  uint64_t seq;
  {
    MutexLock lock(&mu_);
    seq = ++barrier_seq_[group];
  }
  pb::Header h = MakeHeader(pb::MSG_BARRIER, id_, kSchedulerId);
  h.mutable_barrier()->set_group(group);
  h.mutable_barrier()->set_seq(seq);
  SIEVE_ASSIGN_OR_RETURN(auto frames, EncodeControl(h));
  SIEVE_RETURN_IF_ERROR(transport_->Send(kSchedulerId, std::move(frames)));
  MutexLock lock(&mu_);
  const bool done = cv_.WaitFor(&mu_, timeout, [&] {
    mu_.AssertHeld();
    return barrier_released_[group] >= seq || !StopStatusLocked().ok();
  });
  if (barrier_released_[group] >= seq) return Status::Ok();
  SIEVE_RETURN_IF_ERROR(StopStatusLocked());
  if (!done)
    return DeadlineExceededError("barrier " + std::to_string(seq) + " not released in " +
                                 std::to_string(timeout.count()) + " ms");
  return Status::Ok();
}

StatusOr<Node::CollectiveResult> Node::Collective(pb::CollectiveOp op, int root,
                                                  std::span<const float> values,
                                                  std::chrono::milliseconds timeout) {
  if (values.size() > kMaxCollectiveValues) {
    return InvalidArgumentError("a collective carries at most " +
                                std::to_string(kMaxCollectiveValues) + " values, got " +
                                std::to_string(values.size()));
  }
  for (const float v : values) {
    if (!std::isfinite(v)) return InvalidArgumentError("a collective's values must be finite");
  }
  pb::Header h = MakeHeader(pb::MSG_COLLECTIVE, id_, kSchedulerId);
  pb::Collective* c = h.mutable_collective();
  c->set_op(op);
  c->set_root(root);
  c->mutable_values()->Add(values.begin(), values.end());
  uint64_t seq;
  {
    MutexLock lock(&mu_);
    seq = ++collective_seq_;
    collective_answered_ = false;
    collective_result_ = {};
    collective_error_ = Status::Ok();
  }
  c->set_seq(seq);
  SIEVE_ASSIGN_OR_RETURN(auto frames, EncodeControl(h));
  SIEVE_RETURN_IF_ERROR(transport_->Send(kSchedulerId, std::move(frames)));
  MutexLock lock(&mu_);
  const bool done = cv_.WaitFor(&mu_, timeout, [&] {
    mu_.AssertHeld();
    return collective_answered_ || !StopStatusLocked().ok();
  });
  if (collective_answered_) {
    if (!collective_error_.ok()) return collective_error_;
    if (collective_result_.values.size() != values.size()) {
      return FailedPreconditionError("collective " + std::to_string(seq) + ": the scheduler sent " +
                                     std::to_string(collective_result_.values.size()) +
                                     " values for " + std::to_string(values.size()));
    }
    return std::move(collective_result_);
  }
  SIEVE_RETURN_IF_ERROR(StopStatusLocked());
  if (!done) {
    return DeadlineExceededError("collective " + std::to_string(seq) + " not answered in " +
                                 std::to_string(timeout.count()) +
                                 " ms (does every live worker call it?)");
  }
  return InternalError("collective wait ended without an answer");
}

void Node::SetReport(const pb::Heartbeat& report) {
  MutexLock lock(&mu_);
  report_ = report;
}

Status Node::Finish() {
  pb::Header h = MakeHeader(pb::MSG_FINISHED, id_, kSchedulerId);
  {
    MutexLock lock(&mu_);
    if (report_.has_worker()) *h.mutable_finished()->mutable_report() = report_.worker();
  }
  h.mutable_finished();
  SIEVE_ASSIGN_OR_RETURN(auto frames, EncodeControl(h));
  return transport_->Send(kSchedulerId, std::move(frames));
}

Status Node::WaitShutdown(std::chrono::milliseconds timeout) {
  MutexLock lock(&mu_);
  const bool done = cv_.WaitFor(&mu_, timeout, [&] {
    mu_.AssertHeld();
    return shutdown_ || !StopStatusLocked().ok();
  });
  if (shutdown_ && !shutdown_failed_ && stop_reason_.empty()) return Status::Ok();
  if (!done)
    return DeadlineExceededError("no shutdown within " + std::to_string(timeout.count()) + " ms");
  return StopStatusLocked();
}

void Node::RequestStop(const std::string& reason) {
  MutexLock lock(&mu_);
  if (stop_reason_.empty()) stop_reason_ = reason.empty() ? "stopped" : reason;
  cv_.NotifyAll();
}

uint64_t Node::auth_accepted() const { return transport_ ? transport_->auth_accepted() : 0; }
uint64_t Node::auth_denied() const { return transport_ ? transport_->auth_denied() : 0; }
uint64_t Node::refused_at_fd_limit() const {
  return transport_ ? transport_->refused_at_fd_limit() : 0;
}

void Node::set_on_node_rejoined(std::function<void(const pb::NodeInfo&)> fn) {
  MutexLock lock(&mu_);
  on_node_rejoined_ = std::move(fn);
}

void Node::set_on_data(std::function<void(Message)> fn) {
  MutexLock data_lock(&data_mu_);
  on_data_ = std::move(fn);
  if (!on_data_) return;
  std::deque<Message> queued;
  {
    MutexLock lock(&mu_);
    queued.swap(inbox_);
  }
  for (Message& m : queued) on_data_(std::move(m));
}

void Node::set_on_node_dead(std::function<void(const pb::NodeDead&)> fn) {
  MutexLock lock(&mu_);
  on_node_dead_ = std::move(fn);
}

std::set<int> Node::dead_nodes() const {
  MutexLock lock(&mu_);
  return dead_;
}

}  // namespace sieve
