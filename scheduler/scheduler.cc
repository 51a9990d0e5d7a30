#include "scheduler/scheduler.h"

#include <glog/logging.h>

#include <algorithm>
#include <random>

#include "proto/error_code.h"
#include "proto/job_identity.h"
#include "proto/messages.h"
#include "proto/node_ids.h"

namespace sieve {
namespace {

const char* RoleName(pb::Role r) { return r == pb::ROLE_SERVER ? "server" : "worker"; }

// A refused REGISTER: `message` as it goes out in the ERROR of `code`.
Status Refusal(pb::ErrorCode code, std::string message) {
  return Status(StatusCodeOf(code), std::move(message)).WithWireCode(code);
}

}  // namespace

StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(const SchedulerOptions& options) {
  if (options.num_workers == 0) return InvalidArgumentError("--num_workers must be >= 1");
  if (options.num_servers == 0) return InvalidArgumentError("--num_servers must be >= 1");
  if (options.min_workers > options.num_workers) {
    return InvalidArgumentError(
        "--min_workers=" + std::to_string(options.min_workers) +
        " is more than --num_workers=" + std::to_string(options.num_workers));
  }
  if (options.num_params != 0 && options.num_params < options.num_servers) {
    return InvalidArgumentError("--num_params=" + std::to_string(options.num_params) +
                                " is smaller than " +
                                "--num_servers=" + std::to_string(options.num_servers));
  }
  if (options.replication >= options.num_servers) {
    return InvalidArgumentError("--replication=" + std::to_string(options.replication) +
                                " needs at least " + std::to_string(options.replication + 1) +
                                " servers (each shard's backups live on other servers); the job "
                                "has --num_servers=" +
                                std::to_string(options.num_servers));
  }
  std::unique_ptr<Scheduler> s(new Scheduler(options));
  s->shard_primary_.resize(options.num_servers);
  for (uint32_t r = 0; r < options.num_servers; ++r) s->shard_primary_[r] = static_cast<int>(r);
  s->copies_.resize(options.num_servers);
  for (uint32_t shard = 0; shard < options.num_servers; ++shard) {
    for (uint32_t k = 1; k <= options.replication; ++k)
      s->copies_[shard].push_back(static_cast<int>((shard + k) % options.num_servers));
  }
  std::random_device rd;
  while (s->job_instance_ == 0) {
    s->job_instance_ = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
                       static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  }
  s->instance_job_ = JobInstanceDigest(options.transport.job, s->job_instance_);
  s->challenge_secret_ = RandomSipKey();
  TransportOptions transport = options.transport;
  transport.job = 0;  // SendTo stamps each message with the digest its type needs
  SIEVE_ASSIGN_OR_RETURN(auto t, CreateTransport(transport));
  s->transport_ = std::move(t);
  s->num_params_ = options.num_params;
  pb::JobStatus first = s->BuildStatus(pb::JOB_FORMING);  // status() before Run()
  {
    MutexLock lock(&s->status_mu_);
    s->status_ = std::move(first);
  }
  return s;
}

void Scheduler::Stop(const std::string& reason) {
  MutexLock lock(&stop_mu_);
  if (stop_reason_.empty()) stop_reason_ = reason;
  stop_ = true;
}

Status Scheduler::Run() {
  Status end = RunJob();
  failure_ = end;  // BuildStatus reads the failure from it (a stop or min_workers' included)
  PublishStatus(end.ok() ? pb::JOB_FINISHED : pb::JOB_FAILED, /*force=*/true);
  return end;
}

Status Scheduler::RunJob() {
  const auto start = Clock::now();
  LOG(INFO) << "waiting for " << options_.num_servers << " servers and " << options_.num_workers
            << " workers";
  while (!done_) {
    if (stop_) {
      std::string reason;
      {
        MutexLock lock(&stop_mu_);
        reason = stop_reason_;
      }
      ShutdownAll(reason, true);
      return AbortedError(reason);
    }
    Frames frames;
    SIEVE_ASSIGN_OR_RETURN(auto got, transport_->Recv(&frames, std::chrono::milliseconds(100)));
    if (got) Handle(std::move(frames));
    reject_log_.Flush();
    event_log_.Flush();
    if (!started_ && failure_.ok() && Clock::now() - start > options_.startup_timeout) {
      failure_ = DeadlineExceededError("only " + std::to_string(pending_.size()) + " of " +
                                       std::to_string(options_.num_servers + options_.num_workers) +
                                       " nodes registered within " +
                                       std::to_string(options_.startup_timeout.count()) + " ms");
    }
    if (started_) CheckHeartbeats();
    if (failure_.ok()) PublishStatus(CurrentPhase(), /*force=*/CurrentPhase() != last_phase_);
    if (!failure_.ok()) {
      LOG(ERROR) << "job failed: " << failure_.ToString();
      ShutdownAll(failure_.message(), true);
      return failure_;
    }
  }
  uint32_t finished = 0;
  for (const auto& [id, n] : nodes_) finished += n.info.role() == pb::ROLE_WORKER && n.finished;
  const uint32_t needed = options_.min_workers > 0 ? options_.min_workers : options_.num_workers;
  if (finished < needed) {
    // The nodes are told the job failed, as its status and the scheduler's exit say.
    Status failed = FailedPreconditionError(
        "only " + std::to_string(finished) + " of " + std::to_string(options_.num_workers) +
        " workers finished (the others died); the job needs " + std::to_string(needed) +
        " (--min_workers=N accepts fewer; a worker restarted under its --rank counts)");
    LOG(ERROR) << "job failed: " << failed.ToString();
    ShutdownAll(failed.message(), true);
    return failed;
  }
  LOG(INFO) << "every worker finished; shutting down";
  ShutdownAll("training finished", false);
  return Status::Ok();
}

void Scheduler::Handle(Frames frames) {
  const std::string key = PeerKey(frames);  // empty without CURVE
  Message msg;
  DecodeLimits limits;
  limits.job = instance_job_;
  // A REGISTER comes before its node knows the instance; nothing else may carry the token's digest.
  limits.token_job = options_.transport.job;
  limits.token_types = kTokenStampedToScheduler;
  const Status s = Decode(std::move(frames), limits, &msg);
  const pb::ErrorCode code = WireCodeOf(s);
  const pb::Header& h = msg.header;
  const Entry* claimed = Find(h.sender());
  const bool key_matches =
      claimed == nullptr || !options_.transport.curve.enabled || claimed->info.key() == key;
  if (!filter_.Admit(h, code, s, key_matches)) return;
  if (!s.ok()) {
    // A REGISTER is answered at the address it names: with a token, only once it proved that
    // its sender holds the token (a version mismatch included), or the refusal could fail a
    // node that is registering there.
    if (h.has_register_() && claimed == nullptr && !Proven(h.register_())) {
      reject_log_.Warn([&](std::ostream& os) {
        os << "not answered: an unproven REGISTER from " << h.register_().host() << ":"
           << h.register_().port() << " that does not decode (" << s.ToString() << ")";
      });
      return;
    }
    ReplyError(h, code, s.message());
    return;
  }
  if (Entry* e = Find(h.sender())) {
    e->last_seen = Clock::now();
    if (e->dead) {
      ReplyError(
          h, pb::ERROR_NOT_REGISTERED,
          "node " + std::to_string(h.sender()) + " was declared dead; re-register to rejoin");
      return;
    }
  }
  switch (h.type()) {
    case pb::MSG_REGISTER:
      HandleRegister(h, key);
      return;
    case pb::MSG_STATUS_QUERY:
      AnswerStatusQuery(h);
      return;
    case pb::MSG_HEARTBEAT:
      if (Find(h.sender()) != nullptr) {
        heartbeats_.fetch_add(1, std::memory_order_relaxed);
        TakeReport(*Find(h.sender()), h.heartbeat());
        pb::Header echo = MakeHeader(pb::MSG_HEARTBEAT, kSchedulerId, h.sender());
        echo.mutable_heartbeat();
        SendTo(h.sender(), echo);
      }
      return;
    default:
      break;
  }
  Entry* e = Find(h.sender());
  if (e == nullptr) {
    ReplyError(h, pb::ERROR_NOT_REGISTERED,
               "sender " + std::to_string(h.sender()) + " is not in the node table");
    return;
  }
  switch (h.type()) {
    case pb::MSG_BARRIER:
      HandleBarrier(h.sender(), h.barrier());
      break;
    case pb::MSG_COLLECTIVE:
      HandleCollective(*e, h.collective());  // e: this sender's entry
      break;
    case pb::MSG_COPY_READY:
      HandleCopyReady(*e, h);
      break;
    case pb::MSG_HANDOVER:
      HandleHandover(*e, h);
      break;
    case pb::MSG_FINISHED: {
      if (e->info.role() != pb::ROLE_WORKER) {
        ReplyError(h, pb::ERROR_UNEXPECTED_TYPE, "only workers send FINISHED");
        break;
      }
      if (e->finished) break;  // a repeat changes nothing
      if (h.finished().has_report()) {
        pb::Heartbeat last;
        *last.mutable_worker() = h.finished().report();
        TakeReport(*e, last);
      }
      LOG(INFO) << "worker " << e->info.rank() << " finished";
      e->finished = true;
      bool all = true;
      for (const auto& [id, n] : nodes_) {
        if (n.info.role() == pb::ROLE_WORKER && !n.dead && !n.finished) all = false;
      }
      if (all) {
        done_ = true;
        break;
      }
      AnnounceDeparture(*e);
      break;
    }
    default:
      ReplyError(
          h, pb::ERROR_UNEXPECTED_TYPE,
          std::string("the scheduler does not accept ") + std::string(MsgTypeName(h.type())));
  }
}

void Scheduler::HandleRegister(const pb::Header& h, const std::string& key) {
  if (!VetRegister(h, key)) return;
  if (started_) return Readmit(h, key);
  AddPending(h, key);
}

bool Scheduler::VetRegister(const pb::Header& h, const std::string& key) {
  const pb::Register& r = h.register_();
  Status no = CheckRegisterFields(r);
  // With a token: only a REGISTER answering this scheduler's challenge with the token's proof
  // counts (proto/register_proof.h); one recorded in another job is challenged again. Nothing
  // else is answered before the proof, so that a peer without the token cannot make the
  // scheduler send a refusal to the address (and instance) of a node that is registering.
  if (no.ok() && !IsZero(options_.job_key)) {
    const uint64_t challenge = RegisterChallenge(challenge_secret_, r);
    if (r.challenge() != challenge) {
      SendChallenge(h, challenge);
      return false;
    }
    if (r.proof() != RegisterProof(options_.job_key, r)) {
      reject_log_.Warn([&](std::ostream& os) {
        os << "dropped a REGISTER from " << r.host() << ":" << r.port()
           << " whose proof was not made with this job's token";
      });
      return false;
    }
  }
  if (no.ok()) no = CheckRegisterVersion(r);
  if (no.ok()) no = CheckRegisterRank(r, key);
  if (no.ok()) return true;
  ReplyError(h, WireCodeOf(no), no.message());
  return false;
}

bool Scheduler::Proven(const pb::Register& r) const {
  return IsZero(options_.job_key) || (r.challenge() == RegisterChallenge(challenge_secret_, r) &&
                                      r.proof() == RegisterProof(options_.job_key, r));
}

Status Scheduler::CheckRegisterFields(const pb::Register& r) const {
  if (r.role() != pb::ROLE_SERVER && r.role() != pb::ROLE_WORKER) {
    return Refusal(pb::ERROR_BAD_REGISTRATION, "role must be server or worker");
  }
  if (r.host().empty() || r.port() == 0 || r.port() > 65535) {
    return Refusal(pb::ERROR_BAD_REGISTRATION,
                   "registration without a host:port to reach the node");
  }
  return Status::Ok();
}

Status Scheduler::CheckRegisterVersion(const pb::Register& r) const {
  if (r.protocol_version() != kProtocolVersion) {
    return Refusal(pb::ERROR_VERSION_MISMATCH,
                   "node speaks protocol version " + std::to_string(r.protocol_version()) +
                       ", scheduler " + std::to_string(kProtocolVersion));
  }
  return Status::Ok();
}

Status Scheduler::CheckRegisterRank(const pb::Register& r, const std::string& key) const {
  const uint32_t expected = ExpectedOf(r.role());
  if (r.rank() < -1 || r.rank() >= static_cast<int>(expected)) {
    return Refusal(pb::ERROR_BAD_REGISTRATION, std::string(RoleName(r.role())) + " rank " +
                                                   std::to_string(r.rank()) + " outside [0, " +
                                                   std::to_string(expected) + ")");
  }
  // A job whose keys are bound to nodes refuses keys bound to none (client.key), unless told to
  // admit them for the ranks bound to no key: no key ever gets a rank bound to another.
  const bool unbound_key = BoundJob() && options_.transport.curve.bindings.count(key) == 0;
  if (unbound_key && !options_.allow_unbound_keys) {
    return Refusal(pb::ERROR_BAD_REGISTRATION,
                   "this client key is bound to no node, and this job binds its nodes' keys "
                   "(allowed_clients); the scheduler's --allow_unbound_keys admits it for "
                   "ranks bound to no key");
  }
  // Keys bound to ranks in advance (allowed_clients `KEY worker 3`): no other key takes a bound
  // rank, before the start (squatting) or after it (a dead node's rank).
  if (Status b = CheckKeyBinding(options_.transport.curve, key, RoleName(r.role()), r.rank());
      !b.ok()) {
    return Refusal(
        b.code() == StatusCode::kAlreadyExists ? pb::ERROR_RANK_TAKEN : pb::ERROR_BAD_REGISTRATION,
        b.message());
  }
  if (unbound_key && r.rank() == -1 && !started_) {
    // Room for it among the ranks bound to no key, besides the unbound keys already in.
    int free_ranks = 0;
    for (int rank = 0; rank < static_cast<int>(expected); ++rank) {
      free_ranks += !RankBound(r.role(), rank);
    }
    for (const Entry& e : pending_) {
      free_ranks -= e.info.role() == r.role() && e.info.instance() != r.instance() &&
                    options_.transport.curve.bindings.count(e.info.key()) == 0;
    }
    if (free_ranks <= 0) {
      return Refusal(pb::ERROR_BAD_REGISTRATION,
                     std::string("every ") + RoleName(r.role()) +
                         " rank left is bound to a key (allowed_clients), and this one is "
                         "bound to no node");
    }
  }
  if (r.role() == pb::ROLE_WORKER && r.num_params() != 0 && num_params_ != 0 &&
      num_params_ != r.num_params()) {
    return Refusal(pb::ERROR_BAD_REGISTRATION,
                   "worker declares D = " + std::to_string(r.num_params()) +
                       " but the job has D = " + std::to_string(num_params_));
  }
  return Status::Ok();
}

void Scheduler::Readmit(const pb::Header& h, const std::string& key) {
  const pb::Register& r = h.register_();
  const uint32_t expected = ExpectedOf(r.role());
  // A node re-admitted under the rank of a dead one (same role), e.g. after a restart.
  for (auto& [id, e] : nodes_) {
    if (e.info.instance() == r.instance()) {  // resent registration: the table already went out
      pb::Header t = MakeHeader(pb::MSG_NODE_TABLE, kSchedulerId, id);
      *t.mutable_node_table() = BuildTable();
      SendTo(id, t);
      return;
    }
  }
  if (r.rank() >= 0) {  // a restarted process replaces the live holder of its rank...
    for (auto& [id, e] : nodes_) {
      if (e.info.role() != r.role() || e.info.rank() != r.rank() || e.dead) continue;
      // ...if it proves to be that rank: under CURVE, by the key the rank registered with.
      if (e.info.key() != key) {
        return ReplyError(h, pb::ERROR_RANK_TAKEN,
                          std::string(RoleName(r.role())) + " rank " + std::to_string(r.rank()) +
                              " is held by a live node with another client key");
      }
      e.replaced = true;
      DeclareDead(e, "replaced by a new process registering under its rank");
      break;
    }
    if (!failure_.ok()) return;
  }
  int dead_bound_elsewhere = 0;  // dead ranks this key may not take
  for (auto& [id, e] : nodes_) {
    if (e.info.role() != r.role() || !e.dead) continue;
    if (r.rank() != -1 && e.info.rank() != r.rank()) continue;
    // A dead node's rank bound to another key is not this key's to take (rank -1 included).
    if (!CheckKeyBinding(options_.transport.curve, key, RoleName(r.role()), e.info.rank()).ok()) {
      ++dead_bound_elsewhere;
      continue;
    }
    if (e.failed_over && !r.rebuildable()) {  // its shards have a new primary
      return ReplyError(
          h, pb::ERROR_FAILED_OVER,
          "server " + std::to_string(e.info.rank()) +
              " failed over: its shards are served by their backups (--replication)"
              " and this server says it cannot be rebuilt from them (REGISTER without "
              "rebuildable; every sieve-server since protocol 10 can); the job goes on without it");
    }
    e.info.set_host(r.host());
    e.info.set_port(r.port());
    e.info.set_instance(r.instance());
    e.info.set_key(key);
    e.sent_table = false;         // a new process: its first table carries the token's digest
    e.collective_member = false;  // joins the collectives with its first part
    e.dead = false;
    e.finished = false;
    e.failed_over = false;  // a rebuilt replacement: the primaries send it their snapshots
    e.last_seen = Clock::now();
    ++e.restarts;
    e.comeback = e.replaced ? pb::NODE_RESTARTED : pb::NODE_REJOINED;
    reports_.Forget(id);
    e.replaced = false;
    (void)transport_->Connect(id, r.host(), r.port());
    ++generation_;
    const int rank = e.info.rank();  // a structured binding is not captured (clang 14)
    event_log_.Warn([&](std::ostream& os) {
      os << RoleName(r.role()) << " " << rank << " rejoined from " << r.host() << ":" << r.port();
    });
    pb::Header t = MakeHeader(pb::MSG_NODE_TABLE, kSchedulerId);
    *t.mutable_node_table() = BuildTable();
    Broadcast(t);
    if (r.role() == pb::ROLE_SERVER) RetellDepartures(id);
    return;
  }
  if (dead_bound_elsewhere > 0) {
    return ReplyError(h, pb::ERROR_BAD_REGISTRATION,
                      std::to_string(dead_bound_elsewhere) + " dead " + RoleName(r.role()) +
                          " rank(s) could be taken, but each is bound to another client key "
                          "(allowed_clients); only that key may restart it");
  }
  return ReplyError(h, pb::ERROR_REGISTRATION_FULL,
                    std::string("all ") + std::to_string(expected) + " " + RoleName(r.role()) +
                        " ranks are taken by live nodes");
}

void Scheduler::AddPending(const pb::Header& h, const std::string& key) {
  const pb::Register& r = h.register_();
  const uint32_t expected = ExpectedOf(r.role());
  int temp_id = 0;
  uint32_t same_role = 0;
  for (const Entry& e : pending_) {
    if (e.info.instance() == r.instance()) temp_id = e.info.id();
    if (e.info.role() == r.role()) ++same_role;
    if (e.info.instance() != r.instance() && e.info.role() == r.role() && r.rank() >= 0 &&
        e.info.rank() == r.rank()) {
      return ReplyError(h, pb::ERROR_DUPLICATE_RANK,
                        std::string(RoleName(r.role())) + " rank " + std::to_string(r.rank()) +
                            " is already taken");
    }
  }
  if (temp_id == 0) {
    if (same_role >= expected) {
      return ReplyError(
          h, pb::ERROR_REGISTRATION_FULL,
          std::string("already have ") + std::to_string(expected) + " " + RoleName(r.role()) + "s");
    }
    Entry e;
    temp_id = next_temp_id_--;
    e.info.set_id(temp_id);
    e.info.set_role(r.role());
    e.info.set_rank(r.rank());
    e.info.set_host(r.host());
    e.info.set_port(r.port());
    e.info.set_instance(r.instance());
    e.info.set_key(key);
    e.last_seen = Clock::now();
    Status s = transport_->Connect(temp_id, r.host(), r.port());
    if (!s.ok()) {
      event_log_.Warn(
          [&](std::ostream& os) { os << "cannot reach registering node: " << s.ToString(); });
      return;
    }
    if (r.role() == pb::ROLE_WORKER && r.num_params() != 0) num_params_ = r.num_params();
    pending_.push_back(e);
    LOG(INFO) << RoleName(r.role()) << " registered from " << r.host() << ":" << r.port() << " ("
              << pending_.size() << "/" << options_.num_servers + options_.num_workers << ")";
  }
  const uint32_t waiting_for =
      options_.num_servers + options_.num_workers - static_cast<uint32_t>(pending_.size());
  // The registration that completes the job is answered by the node table itself: an ack would
  // travel on the registration's own connection and could arrive after the table, when the node
  // no longer accepts the token's digest.
  if (waiting_for > 0) {
    pb::Header ack = MakeHeader(pb::MSG_REGISTER_ACK, kSchedulerId);
    ack.mutable_register_ack()->set_waiting_for(static_cast<int32_t>(waiting_for));
    SendTo(temp_id, ack);
  }
  failure_ = MaybeStart();
}

Status Scheduler::MaybeStart() {
  if (pending_.size() < options_.num_servers + options_.num_workers) return Status::Ok();
  if (num_params_ == 0) {
    return FailedPreconditionError(
        "D unknown: pass --num_params to the scheduler or have a worker declare it");
  }
  SIEVE_ASSIGN_OR_RETURN(auto shards, SplitShards(num_params_, options_.num_servers));
  // Requested ranks first, then the rest in arrival order.
  for (pb::Role role : {pb::ROLE_SERVER, pb::ROLE_WORKER}) {
    const uint32_t n = role == pb::ROLE_SERVER ? options_.num_servers : options_.num_workers;
    std::vector<bool> taken(n, false);
    for (const Entry& e : pending_) {
      if (e.info.role() == role && e.info.rank() >= 0) taken[e.info.rank()] = true;
    }
    // Ranks bound to a key go to that key only, which asks for its rank: never handed out here.
    for (uint32_t rank = 0; rank < n; ++rank) {
      if (RankBound(role, static_cast<int>(rank))) taken[rank] = true;
    }
    uint32_t next = 0;
    for (Entry& e : pending_) {
      if (e.info.role() != role || e.info.rank() >= 0) continue;
      while (next < n && taken[next]) ++next;
      if (next == n) {  // HandleRegister leaves room; a failure here is a bug, not a peer's doing
        return InternalError(std::string("no ") + RoleName(role) + " rank bound to no key is left");
      }
      e.info.set_rank(static_cast<int>(next));
      taken[next] = true;
    }
  }
  for (Entry& e : pending_) {
    const int temp = e.info.id();
    const int rank = e.info.rank();
    const int id = e.info.role() == pb::ROLE_SERVER
                       ? ServerNodeId(rank)
                       : WorkerNodeId(static_cast<int>(options_.num_servers), rank);
    e.info.set_id(id);
    if (e.info.role() == pb::ROLE_SERVER) {
      e.info.set_shard_lo(shards[rank].lo);
      e.info.set_shard_hi(shards[rank].hi);
    }
    transport_->Disconnect(temp);
    SIEVE_RETURN_IF_ERROR(transport_->Connect(id, e.info.host(), e.info.port()));
    e.last_seen = Clock::now();
    nodes_[id] = e;
  }
  pending_.clear();
  started_ = true;
  generation_ = 1;
  pb::Header t = MakeHeader(pb::MSG_NODE_TABLE, kSchedulerId);
  *t.mutable_node_table() = BuildTable();
  Broadcast(t);
  LOG(INFO) << "node table sent: D = " << num_params_ << ", " << options_.num_servers
            << " servers, " << options_.num_workers << " workers";
  return Status::Ok();
}

pb::NodeTable Scheduler::BuildTable() const {
  pb::NodeTable t;
  t.set_num_params(num_params_);
  t.set_num_servers(options_.num_servers);
  t.set_num_workers(options_.num_workers);
  t.set_generation(generation_);
  t.set_job_instance(job_instance_);
  t.set_replication(options_.replication);
  if (options_.replication > 0) {
    for (int p : shard_primary_) t.add_shard_primary(p);
  }
  for (const auto& [id, e] : nodes_) *t.add_nodes() = e.info;
  return t;
}

bool Scheduler::BoundJob() const {
  return options_.transport.curve.enabled && !options_.transport.curve.bindings.empty();
}

bool Scheduler::RankBound(pb::Role role, int rank) const {
  if (!BoundJob()) return false;
  for (const auto& [key, b] : options_.transport.curve.bindings) {
    if (b.role == RoleName(role) && b.rank == rank) return true;
  }
  return false;
}

void Scheduler::HandleBarrier(int id, const pb::Barrier& b) {
  if (b.group() == 0 || b.group() > kGroupAll) {
    pb::Header h = MakeHeader(pb::MSG_BARRIER, id);
    return ReplyError(h, pb::ERROR_BAD_BARRIER, "bad barrier group " + std::to_string(b.group()));
  }
  // A node waits in one barrier at a time (Node::Barrier blocks); a few pending entries allow for
  // groups and stale entries, more are a misbehaving peer, so the table stays bounded. A node's
  // real barrier is the one after its group's last release (every member enters the same
  // barriers in order); when the node's slots are full, an entry further from that than the new
  // one (a forgery or a leftover) gives up its slot, so forged BARRIERs cannot keep out the real.
  const std::pair<uint32_t, uint64_t> key{b.group(), b.seq()};
  if (auto in = barriers_.find(key); in != barriers_.end() && in->second.count(id) > 0) {
    return;  // a resend
  }
  auto distance = [&](const std::pair<uint32_t, uint64_t>& k) {
    const uint64_t next = barrier_released_[k.first] + 1;
    return k.second > next ? k.second - next : next - k.second;
  };
  int pending = 0;
  auto furthest = barriers_.end();
  for (auto it = barriers_.begin(); it != barriers_.end(); ++it) {
    if (it->second.count(id) == 0) continue;
    ++pending;
    if (furthest == barriers_.end() || distance(it->first) > distance(furthest->first)) {
      furthest = it;
    }
  }
  if (pending >= kMaxPendingBarriersPerNode) {
    if (distance(furthest->first) <= distance(key)) {
      pb::Header h = MakeHeader(pb::MSG_BARRIER, id);
      return ReplyError(h, pb::ERROR_BAD_BARRIER,
                        "node " + std::to_string(id) + " already waits in " +
                            std::to_string(pending) + " barriers");
    }
    const uint32_t group = furthest->first.first;  // not a structured binding: captured below
    const uint64_t seq = furthest->first.second;
    reject_log_.Warn([&](std::ostream& os) {
      os << "node " << id << " waits in " << pending << " barriers: dropped its barrier " << seq
         << " of group " << group << " for barrier " << b.seq();
    });
    furthest->second.erase(id);
    if (furthest->second.empty()) barriers_.erase(furthest);
  }
  barriers_[key].insert(id);
  CheckBarriers();
}

void Scheduler::CheckBarriers() {
  for (auto it = barriers_.begin(); it != barriers_.end();) {
    const auto [group, seq] = it->first;
    bool complete = true;
    for (const auto& [id, e] : nodes_) {
      const uint32_t bit = e.info.role() == pb::ROLE_SERVER ? kGroupServers : kGroupWorkers;
      if ((group & bit) && !e.dead && !e.finished && !it->second.count(id)) complete = false;
    }
    if (!complete) {
      ++it;
      continue;
    }
    barrier_released_[group] = std::max(barrier_released_[group], seq);
    pb::Header rel = MakeHeader(pb::MSG_BARRIER_RELEASE, kSchedulerId);
    rel.mutable_barrier()->set_group(group);
    rel.mutable_barrier()->set_seq(seq);
    for (int id : it->second) {
      Entry* e = Find(id);
      if (e != nullptr && !e->dead) SendTo(id, rel);
    }
    it = barriers_.erase(it);
  }
}

// The NODE_DEAD announcing node `e`: dead for `reason`, or, `finished`, gone with its training
// done.
pb::Header Scheduler::NodeDeadMessage(const Entry& e, const std::string& reason, bool finished) {
  pb::Header h = MakeHeader(pb::MSG_NODE_DEAD, kSchedulerId);
  auto* d = h.mutable_node_dead();
  d->set_id(e.info.id());
  d->set_role(e.info.role());
  d->set_rank(e.info.rank());
  d->set_reason(reason);
  d->set_finished(finished);
  return h;
}

void Scheduler::AnnounceDeparture(const Entry& e) {
  // A worker that ran out of data before the others (uneven inputs): the servers close rounds
  // without it and the barriers and collectives stop waiting for it, so the others are not held
  // up until their round timeout.
  Broadcast(NodeDeadMessage(e, kFinishedReason, /*finished=*/true), e.info.id());
  CheckBarriers();
  CheckCollectives();
}

void Scheduler::RetellDepartures(int to) {
  for (const auto& [id, e] : nodes_) {
    if (id == to || !(e.dead || e.finished)) continue;
    if (e.info.role() != pb::ROLE_WORKER && e.info.role() != pb::ROLE_SERVER) continue;
    SendTo(to, NodeDeadMessage(e, e.dead ? e.lost_reason : kFinishedReason, !e.dead));
  }
}

void Scheduler::HandleCollective(Entry& from, const pb::Collective& c) {
  const int id = from.info.id();
  auto refuse = [&](const std::string& why) {
    pb::Header h = MakeHeader(pb::MSG_COLLECTIVE, id);
    h.set_round(c.seq());
    ReplyError(h, pb::ERROR_BAD_COLLECTIVE, why);
  };
  if (from.info.role() != pb::ROLE_WORKER) return refuse("only workers take part in collectives");
  if (!from.collective_member) {
    // A worker re-admitted under a dead one's rank counts its collectives from 1: its first one
    // is the collective the others are in (the oldest pending), or the next one.
    const uint64_t target =
        collectives_.empty() ? collectives_done_ + 1 : collectives_.begin()->first;
    from.collective_offset = static_cast<int64_t>(target) - static_cast<int64_t>(c.seq());
    from.collective_member = true;
  }
  const int64_t shifted = static_cast<int64_t>(c.seq()) + from.collective_offset;
  if (shifted <= static_cast<int64_t>(collectives_done_)) {
    return refuse("collective " + std::to_string(c.seq()) + " of this worker already completed");
  }
  const uint64_t seq = static_cast<uint64_t>(shifted);
  if (c.op() == pb::COLLECTIVE_BROADCAST &&
      (c.root() < 0 || c.root() >= static_cast<int>(options_.num_workers))) {
    return refuse("broadcast root " + std::to_string(c.root()) + " is not a worker rank");
  }
  auto it = collectives_.find(seq);
  if (it == collectives_.end()) {
    int pending = 0;
    for (const auto& [seq, p] : collectives_) pending += p.parts.count(id) > 0;
    if (pending >= kMaxPendingBarriersPerNode) {
      return refuse("worker " + std::to_string(from.info.rank()) + " already takes part in " +
                    std::to_string(pending) + " collectives");
    }
    it = collectives_.emplace(seq, PendingCollective{c.op(), c.root(), c.values_size(), {}, {}})
             .first;
  }
  PendingCollective& p = it->second;
  if (p.failure.empty() && (p.op != c.op() || p.root != c.root() || p.size != c.values_size())) {
    // The whole collective fails: every worker that took part, and every one that will, is told.
    p.failure = "collective " + std::to_string(c.seq()) + ": worker " +
                std::to_string(from.info.rank()) + " sent " + CollectiveOp_Name(c.op()) + " of " +
                std::to_string(c.values_size()) + " values (root " + std::to_string(c.root()) +
                "), another worker " + CollectiveOp_Name(p.op) + " of " + std::to_string(p.size) +
                " (root " + std::to_string(p.root) +
                "); every worker must pass the same op, root and size";
    for (const auto& [other, values] : p.parts) {
      pb::Header h = MakeHeader(pb::MSG_COLLECTIVE, other);
      h.set_round(WorkerSeq(other, seq));
      ReplyError(h, pb::ERROR_BAD_COLLECTIVE, p.failure);
    }
  }
  p.parts[id].assign(c.values().begin(), c.values().end());
  if (!p.failure.empty()) refuse(p.failure);
  CheckCollectives();
}

void Scheduler::CheckCollectives() {
  for (auto it = collectives_.begin(); it != collectives_.end();) {
    const uint64_t seq = it->first;
    PendingCollective& p = it->second;
    bool complete = true;
    const Entry* root = nullptr;
    for (const auto& [id, e] : nodes_) {
      if (e.info.role() != pb::ROLE_WORKER) continue;
      if (p.op == pb::COLLECTIVE_BROADCAST && e.info.rank() == p.root) root = &e;
      if (!e.dead && !e.finished && e.collective_member && !p.parts.count(id)) complete = false;
    }
    // A root that died, finished or (restarted) takes no part any more, and sent none of its own.
    const bool root_lost =
        p.op == pb::COLLECTIVE_BROADCAST &&
        (root == nullptr || ((root->dead || root->finished || !root->collective_member) &&
                             !p.parts.count(root->info.id())));
    if (!complete && (!root_lost || !p.failure.empty())) {
      ++it;
      continue;
    }
    if (!p.failure.empty()) {
      // Every live worker was told when its part came (or when the failure was found).
    } else if (root_lost) {
      for (const auto& [id, values] : p.parts) {
        const Entry* e = Find(id);
        if (e == nullptr || e->dead) continue;
        pb::Header h = MakeHeader(pb::MSG_COLLECTIVE, id);
        h.set_round(WorkerSeq(id, seq));
        ReplyError(h, pb::ERROR_BAD_COLLECTIVE,
                   "the root of broadcast " + std::to_string(seq) + " (worker " +
                       std::to_string(p.root) +
                       ") left the job (died or finished) before it took part");
      }
    } else {
      pb::Header r = MakeHeader(pb::MSG_COLLECTIVE_RESULT, kSchedulerId);
      pb::Collective* out = r.mutable_collective();
      out->set_seq(seq);
      out->set_op(p.op);
      out->set_root(p.root);
      out->set_contributors(static_cast<uint32_t>(p.parts.size()));
      if (p.op == pb::COLLECTIVE_BROADCAST) {
        const std::vector<float>& v = p.parts.at(root->info.id());
        out->mutable_values()->Add(v.begin(), v.end());
      } else {
        std::vector<double> sum(static_cast<size_t>(p.size), 0.0);
        for (const auto& [id, values] : p.parts) {  // node id order = rank order
          for (size_t j = 0; j < sum.size(); ++j) sum[j] += values[j];
        }
        for (const double v : sum) out->add_values(static_cast<float>(v));
      }
      for (const auto& [id, values] : p.parts) {
        const Entry* e = Find(id);
        if (e == nullptr || e->dead) continue;
        out->set_seq(WorkerSeq(id, seq));
        SendTo(id, r);
      }
    }
    collectives_done_ = std::max(collectives_done_, seq);
    it = collectives_.erase(it);
  }
}

uint64_t Scheduler::WorkerSeq(int id, uint64_t seq) {
  const Entry* e = Find(id);
  return e == nullptr ? seq
                      : static_cast<uint64_t>(static_cast<int64_t>(seq) - e->collective_offset);
}

void Scheduler::CheckHeartbeats() {
  if (options_.heartbeat_timeout <= std::chrono::milliseconds::zero()) return;
  const auto now = Clock::now();
  // Time the scheduler itself did not run is not the nodes' silence: their heartbeats of that
  // time are still queued (net/loop_stall.h).
  const Clock::duration stalled = loop_stall_.Pass(now);
  for (auto& [id, e] : nodes_) {
    if (!e.dead && !e.finished) e.last_seen += stalled;
    if (e.dead && e.info.role() == pb::ROLE_SERVER && !e.failed_over && failure_.ok() &&
        now - e.dead_since > options_.server_restart_timeout) {
      failure_node_ = id;
      failure_ = UnavailableError("server " + std::to_string(e.info.rank()) +
                                  " died and did not restart within " +
                                  std::to_string(options_.server_restart_timeout.count()) + " ms");
    }
    if (e.dead || e.finished) continue;
    if (now - e.last_seen > options_.heartbeat_timeout) {
      DeclareDead(e,
                  "no heartbeat for " + std::to_string(options_.heartbeat_timeout.count()) + " ms");
    }
  }
}

void Scheduler::DeclareDead(Entry& e, const std::string& reason) {
  e.dead = true;
  e.lost_reason = reason;
  dead_count_.fetch_add(1, std::memory_order_relaxed);
  event_log_.Warn([&](std::ostream& os) {
    os << RoleName(e.info.role()) << " " << e.info.rank() << " (node " << e.info.id()
       << ") is dead: " << reason;
  });
  Broadcast(NodeDeadMessage(e, reason, /*finished=*/false), e.info.id());
  e.dead_since = Clock::now();
  if (e.info.role() == pb::ROLE_SERVER) {
    if (options_.replication > 0 && FailOver(e.info.rank())) {
      e.failed_over = true;
      CheckBarriers();
      return;
    }
    if (!options_.wait_for_server_restart) {
      failure_node_ = e.info.id();
      failure_ = UnavailableError("server " + std::to_string(e.info.rank()) + " died (" + reason +
                                  "); its shard is lost");
      return;
    }
    event_log_.Warn([&](std::ostream& os) {
      os << "waiting up to " << options_.server_restart_timeout.count() << " ms for server "
         << e.info.rank() << " to restart";
    });
    CheckBarriers();
    return;
  }
  bool any_live = false, all_done = true;
  for (const auto& [id, n] : nodes_) {
    if (n.info.role() != pb::ROLE_WORKER || n.dead) continue;
    any_live = true;
    if (!n.finished) all_done = false;
  }
  if (!any_live) {
    failure_node_ = e.info.id();  // the last one
    failure_ = UnavailableError("every worker died");
    return;
  }
  if (all_done) done_ = true;
  CheckBarriers();
  CheckCollectives();
}

bool Scheduler::FailOver(int rank) {
  const int servers = static_cast<int>(options_.num_servers);
  for (auto& c : copies_) std::erase(c, rank);  // its copies died with it
  bool moved = false, stranded = false;
  for (int shard = 0; shard < servers; ++shard) {
    if (shard_primary_[shard] != rank) continue;
    const int to = copies_[shard].empty() ? -1 : copies_[shard].front();
    // The new primary's copy is the shard now; the other copies may be ahead of it or behind it
    // by the events in flight: they are retired.
    copies_[shard].clear();
    if (to < 0) {
      stranded = true;
      event_log_.Warn([&](std::ostream& os) {
        os << "shard " << shard
           << " has no live backup left (--replication=" << options_.replication
           << "): it waits for a restart of server " << rank;
      });
      continue;
    }
    shard_primary_[shard] = to;
    moved = true;
    if (Entry* promoted = Find(ServerNodeId(to))) ++promoted->promotions;
    event_log_.Warn([&](std::ostream& os) {
      os << "failover: shard " << shard << " is served by server " << to << " (its backup)";
    });
  }
  if (moved) {
    ++generation_;
    pb::Header t = MakeHeader(pb::MSG_NODE_TABLE, kSchedulerId);
    *t.mutable_node_table() = BuildTable();
    Broadcast(t);
  }
  return !stranded;
}

bool Scheduler::CheckShardReport(const Entry& from, const pb::Header& h) {
  const int shard = h.shard(), holder = h.origin();
  const int servers = static_cast<int>(options_.num_servers);
  Entry* copy = holder >= 0 && holder < servers ? Find(ServerNodeId(holder)) : nullptr;
  if (from.info.role() == pb::ROLE_SERVER && shard >= 0 && shard < servers &&
      shard_primary_[shard] == from.info.rank() && copy != nullptr && !copy->dead &&
      holder != from.info.rank()) {
    return true;
  }
  ReplyError(h, pb::ERROR_UNEXPECTED_TYPE,
             std::string(MsgTypeName(h.type())) + " for shard " + std::to_string(shard) +
                 " and server " + std::to_string(holder) + " from node " +
                 std::to_string(from.info.id()) +
                 ", which is not that shard's primary or names no live server");
  return false;
}

void Scheduler::HandleCopyReady(const Entry& from, const pb::Header& h) {
  if (!CheckShardReport(from, h)) return;
  const int shard = h.shard(), holder = h.origin();
  auto& c = copies_[shard];
  if (std::find(c.begin(), c.end(), holder) != c.end()) return;
  c.push_back(holder);
  event_log_.Warn([&](std::ostream& os) {
    os << "server " << holder << " holds a copy of shard " << shard << " again (" << c.size()
       << " of --replication=" << options_.replication << ")";
  });
}

void Scheduler::HandleHandover(const Entry& from, const pb::Header& h) {
  if (!CheckShardReport(from, h)) return;
  const int shard = h.shard(), to = h.origin();
  auto& c = copies_[shard];
  std::erase(c, to);
  c.push_back(from.info.rank());  // the former primary follows the new one
  shard_primary_[shard] = to;
  ++generation_;
  event_log_.Warn([&](std::ostream& os) {
    os << "handover: shard " << shard << " is served by server " << to << " again";
  });
  pb::Header t = MakeHeader(pb::MSG_NODE_TABLE, kSchedulerId);
  *t.mutable_node_table() = BuildTable();
  Broadcast(t);
}

Scheduler::Entry* Scheduler::Find(int id) {
  auto it = nodes_.find(id);
  return it == nodes_.end() ? nullptr : &it->second;
}

uint64_t Scheduler::JobFor(pb::MsgType type, int id) {
  const Entry* e = Find(id);
  const bool knows_instance = e != nullptr && e->sent_table;
  return IsOneOf(kTokenStampedToNode, type) && !knows_instance ? options_.transport.job
                                                               : instance_job_;
}

void Scheduler::SendTo(int id, const pb::Header& h) {
  pb::Header copy = h;
  copy.set_recipient(id);
  auto frames = EncodeControl(copy);
  if (!frames.ok()) return;
  StampJob(&*frames, JobFor(h.type(), id));
  // Never waits on a peer: a node that reads nothing (frozen, or an address a REGISTER named)
  // must not stall the job's one thread; what its full queue refuses is dropped and logged.
  Status s = transport_->TrySend(id, std::move(frames).value());
  if (h.type() == pb::MSG_NODE_TABLE) {
    if (Entry* e = Find(id)) e->sent_table = true;  // its process knows the instance from now on
  }
  if (!s.ok()) {
    event_log_.Warn([&](std::ostream& os) {
      os << "send " << MsgTypeName(h.type()) << " to node " << id << ": " << s.ToString();
    });
  }
}

void Scheduler::ReplyError(const pb::Header& to, pb::ErrorCode code, const std::string& message) {
  pb::Header h = MakeErrorHeader(kSchedulerId, kNoRecipient, to.round(), code, message, to.type());
  if (to.has_register_()) h.mutable_error()->set_register_instance(to.register_().instance());
  reject_log_.Warn([&](std::ostream& os) {
    os << "rejected " << MsgTypeName(to.type()) << " from node " << to.sender() << ": "
       << pb::ErrorCode_Name(code) << ": " << message;
  });
  if (Find(to.sender()) != nullptr) return SendTo(to.sender(), h);
  // Not (or not yet) in the table: answer at the address it registered with, if it gave one.
  if (to.has_register_()) SendToRegisteringPeer(to.register_(), h, &unknown_replies_);
}

void Scheduler::SendChallenge(const pb::Header& to, uint64_t challenge) {
  pb::Header h = MakeHeader(pb::MSG_REGISTER_CHALLENGE, kSchedulerId, kNoRecipient);
  h.mutable_register_challenge()->set_challenge(challenge);
  h.mutable_register_challenge()->set_register_instance(to.register_().instance());
  SendToRegisteringPeer(to.register_(), h, &challenge_replies_);
}

void Scheduler::SendToRegisteringPeer(const pb::Register& r, const pb::Header& h,
                                      LogLimiter* limiter) {
  for (const Entry& e : pending_) {
    if (e.info.instance() == r.instance()) return SendTo(e.info.id(), h);
  }
  SendToAddress(r.host(), r.port(), h, limiter);
}

void Scheduler::SendToAddress(const std::string& host, uint32_t port, const pb::Header& h,
                              LogLimiter* limiter) {
  if (host.empty() || host.size() > 255 || port == 0 || port > 65535) return;
  uint64_t held_back = 0;
  if (!limiter->Allow(LogLimiter::Clock::now(), &held_back)) return;
  const int temp = next_temp_id_--;
  if (transport_->Connect(temp, host, static_cast<uint16_t>(port)).ok()) {
    SendTo(temp, h);
    transport_->Disconnect(temp);  // ZeroMQ's linger still delivers the queued message
  }
}

void Scheduler::AnswerStatusQuery(const pb::Header& query) {
  const pb::StatusQuery& q = query.status_query();
  pb::Header h = MakeHeader(pb::MSG_STATUS, kSchedulerId, kNoRecipient);
  h.set_round(q.nonce());
  *h.mutable_job_status() = status();
  SendToAddress(q.host(), q.port(), h, &status_replies_);
}

void Scheduler::Broadcast(const pb::Header& h, int except) {
  for (const auto& [id, e] : nodes_) {
    if (id != except && !e.dead) SendTo(id, h);
  }
}

void Scheduler::ShutdownAll(const std::string& reason, bool failed) {
  pb::Header h = MakeHeader(pb::MSG_SHUTDOWN, kSchedulerId);
  h.mutable_shutdown()->set_reason(reason);
  h.mutable_shutdown()->set_failed(failed);
  Broadcast(h);
  // Nodes still waiting for the table do not know the job instance a SHUTDOWN carries: they are
  // told as the answer to their REGISTER (its instance), which ends their registration.
  for (const Entry& e : pending_) {
    pb::Header end =
        MakeErrorHeader(kSchedulerId, kNoRecipient, 0, pb::ERROR_NOT_REGISTERED,
                        "the job ended before it started: " + reason, pb::MSG_REGISTER);
    end.mutable_error()->set_register_instance(e.info.instance());
    SendTo(e.info.id(), end);
  }
}

}  // namespace sieve
