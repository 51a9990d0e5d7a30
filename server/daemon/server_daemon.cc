#include "server/daemon/server_daemon.h"

#include <glog/logging.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/rank_pattern.h"
#include "base/summary_record.h"
#include "base/thread_annotations.h"
#include "daemon/daemon_main.h"
#include "kernels/model/param_init.h"
#include "metrics/daemon_metrics.h"
#include "net/node.h"
#include "proto/messages.h"
#include "server/checkpoint/checkpointer.h"
#include "server/service/shard_service.h"
#include "server/shard/bsp_shard.h"
#include "server/shard/consistency.h"
#include "server/shard/initial_weights.h"
#include "server/shard/round_shard.h"
#include "server/shard/shard_server.h"
#include "trace/trace_writer.h"

namespace sieve {
namespace {

constexpr char kName[] = "sieve-server";
constexpr char kSummaryPrefix[] = "sieve-server summary:";
constexpr char kShardSummaryPrefix[] = "sieve-server shard summary:";

// --dump_shard: the shard's weights as raw little-endian float32, or why they could not be written
// (the path, and the system's reason).
Status DumpShard(const std::string& path, std::span<const float> w) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return UnavailableError("cannot open " + path + ": " + std::strerror(errno));
  f.write(reinterpret_cast<const char*>(w.data()), static_cast<std::streamsize>(w.size_bytes()));
  f.close();
  if (!f) return UnavailableError("cannot write " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

// Reports `message` on stderr, asks the job to stop for `reason` and returns `exit_code`.
int StopJob(Node& node, int exit_code, const std::string& message, const std::string& reason) {
  ExitWith(exit_code, kName, message);
  node.RequestStop(reason);
  return exit_code;
}

NodeOptions ToNodeOptions(const ServerDaemonOptions& o) {
  const NodeFlags& nf = o.node;
  NodeOptions no;
  no.role = pb::ROLE_SERVER;
  // Every shard can be rebuilt from a snapshot (ShardServer::TakeSnapshot): a replacement under a
  // failed-over rank is re-admitted.
  no.rebuildable = true;
  no.rank = nf.rank;
  no.scheduler = nf.scheduler;
  no.transport.bind_host = nf.bind;
  no.transport.port = nf.port;
  no.transport.advertise_host = nf.host;
  // D unknown before the node table: no frame limit (docs/security.md).
  no.transport.max_message_bytes = o.expected_d != 0 ? MaxFrameBytes(o.expected_d) : 0;
  no.transport.curve = nf.curve;
  no.transport.job = nf.job;
  // Replies never wait for queue space (ServerLink::Reply): the queue to each peer holds two
  // rounds of a reply split into the most parts a shard's UPDATE may have, for two shards (a
  // promoted backup serves its own and its predecessor's), so a worker that reads is never
  // dropped a part. The parts borrow one buffer; an ERROR is ~100 bytes.
  no.transport.send_hwm = std::max(no.transport.send_hwm, 4 * static_cast<int>(kMaxReplyParts));
  no.job_key = nf.job_key;
  no.heartbeat_interval = nf.heartbeat_interval;
  no.heartbeat_timeout = nf.heartbeat_timeout;
  return no;
}

// The D the workers declared against the one the flags expect: 0 when they agree, else the exit
// code (the job is asked to stop).
int CheckWorkersD(const ServerDaemonOptions& o, Node& node) {
  if (o.expected_d == 0 || o.expected_d == node.num_params()) return 0;
  const bool own_model = o.layout.has_value();
  const std::string what = own_model ? "model " + o.model : std::string("--num_params");
  const std::string declared = " but the workers declared D = " + std::to_string(node.num_params());
  return StopJob(node, kExitUsage,
                 what + " has D = " + std::to_string(o.expected_d) + declared +
                     (own_model ? " (omit --model to take the workers' model)" : ""),
                 what + " has D = " + std::to_string(o.expected_d) + declared);
}

// The shard's initial weights into `init` (left for worker 0's INIT when `await_init`): 0, or the
// exit code (the job is asked to stop).
int InitialWeights(const ServerDaemonOptions& o, Node& node, ShardRange range, bool await_init,
                   std::vector<float>* init) {
  const int rank = node.rank();
  if (await_init) {
    LOG(INFO) << "no --model: shard " << rank << " waits for worker 0's initial weights";
  } else if (o.init_weights.empty()) {
    if (Status s = InitSlice(*o.layout, o.seed, range.lo, range.hi, init->data()); !s.ok()) {
      return StopJob(node, kExitUsage,
                     "the scheduler assigned shard " + std::to_string(rank) +
                         " a range outside the model: " + s.message(),
                     "bad shard range: " + s.message());
    }
  } else if (Status s = ReadWeightsSlice(o.init_weights, node.num_params(), range.lo, range.hi,
                                         init->data());
             !s.ok()) {
    return StopJob(node, kExitUsage, "--init_weights: " + s.message(),
                   "--init_weights: " + s.message());
  }
  return 0;
}

// Restores shard `shard_rank` from --checkpoint_dir as the policy says: 0, or the exit code. A
// copy's checkpointer has the same intervals; its ShardService writes only while the copy serves
// the shard (promoted, or handed back), so one process at a time writes a shard's file.
int RestoreShard(const ServerDaemonOptions& o, Node& node, int shard_rank, ShardRange range,
                 bool copy, ShardServer* shard, ShardCheckpointer* checkpointer) {
  CheckpointConfig cc;
  cc.model = o.model;
  cc.num_params = node.num_params();
  cc.lo = range.lo;
  cc.hi = range.hi;
  cc.consistency = std::string(ConsistencyName(o.shard.consistency));
  cc.seed = o.seed;
  CheckpointerOptions co = o.checkpoint;
  co.rejoining = node.table().generation() > 1;
  co.copy = copy;
  Status restored = checkpointer->Init(co, cc, shard_rank, shard);
  if (!restored.ok()) {
    return StopJob(node, kExitFailure, restored.ToString(), "checkpoint: " + restored.message());
  }
  return 0;
}

// The server's Node as ShardService sees it.
class NodeServerLink : public ServerLink {
 public:
  explicit NodeServerLink(Node* node) : node_(node) {}
  int id() const override { return node_->id(); }
  int WorkerId(int rank) const override { return node_->WorkerId(rank); }
  int WorkerRankOf(int id) const override { return node_->WorkerRankOf(id); }
  int ServerId(int rank) const override { return node_->ServerId(rank); }
  int ShardPrimary(int shard) const override { return node_->ShardPrimary(shard); }
  bool WorkerDead(int rank) const override {
    return node_->dead_nodes().count(node_->WorkerId(rank)) > 0;
  }
  bool ServerDead(int rank) const override {
    return node_->dead_nodes().count(node_->ServerId(rank)) > 0;
  }
  Status Reply(int peer, Frames frames) override { return node_->Reply(peer, std::move(frames)); }
  Status Send(int peer, Frames frames) override { return node_->Send(peer, std::move(frames)); }
  Status SendError(int peer, pb::ErrorCode code, const std::string& message, pb::MsgType rejected,
                   uint64_t round, int shard) override {
    return node_->SendError(peer, code, message, rejected, round, shard);
  }
  Status ReportCopy(int shard, int server) override {
    return ToScheduler(pb::MSG_COPY_READY, shard, server);
  }
  Status ReportHandover(int shard, int server) override {
    return ToScheduler(pb::MSG_HANDOVER, shard, server);
  }

 private:
  // A report about `shard` and server `server` (Header.shard, Header.origin) to the scheduler.
  Status ToScheduler(pb::MsgType type, int shard, int server) {
    pb::Header h = MakeHeader(type, node_->id(), kSchedulerId);
    h.set_shard(shard);
    h.set_origin(server);
    SIEVE_ASSIGN_OR_RETURN(auto frames, EncodeControl(h));
    return node_->Send(kSchedulerId, std::move(frames));
  }

  Node* const node_;
};

// One shard this server holds: its own (served as primary), or with --replication a copy of a
// ring predecessor's (a mirror, promoted at failover).
struct HostedShard {
  int shard = 0;
  ShardRange range;
  std::unique_ptr<ShardServer> server;
  ShardCheckpointer checkpointer;
  std::unique_ptr<ShardService> service;
};

// The shards this server holds, by shard id, and the dispatch of every message and job event to
// them (each message carries its shard: Header.shard).
class HostedShards {
 public:
  HostedShards(Node* node, NodeServerLink* link) : node_(node), link_(link) {}
  void Add(std::unique_ptr<HostedShard> h) { shards_.push_back(std::move(h)); }
  std::vector<std::unique_ptr<HostedShard>>& all() { return shards_; }

  void OnData(Message msg) {
    const int shard = msg.header.shard();
    for (auto& h : shards_) {
      if (h->shard == shard) return h->service->OnData(std::move(msg));
    }
    if (msg.type() == pb::MSG_ERROR) {
      LOG_EVERY_N(WARNING, 100) << "error from node " << msg.header.sender() << " for shard "
                                << shard << ": " << msg.header.error().message();
      return;
    }
    const bool replica = msg.type() == pb::MSG_REPLICATE || msg.type() == pb::MSG_REPLICATE_ACK;
    const bool known = shard >= 0 && static_cast<uint32_t>(shard) < node_->num_servers();
    (void)link_->SendError(msg.header.sender(),
                           replica ? pb::ERROR_NOT_REPLICA
                           : known ? pb::ERROR_NOT_PRIMARY
                                   : pb::ERROR_WRONG_SHARD,
                           "server " + std::to_string(node_->rank()) + " holds no copy of shard " +
                               std::to_string(shard) +
                               (known ? " (server " + std::to_string(node_->ShardPrimary(shard)) +
                                            " serves it in this server's node table)"
                                      : std::string()),
                           msg.type(), msg.header.round(), shard);
  }
  void OnNodeDead(const pb::NodeDead& d) {
    for (auto& h : shards_) {
      if (d.role() == pb::ROLE_WORKER) h->service->OnWorkerDead(d.rank());
      if (d.role() == pb::ROLE_SERVER) h->service->OnServerDead(d.rank());
    }
  }
  void OnRejoined(const pb::NodeInfo& n) {
    for (auto& h : shards_) {
      if (n.role() == pb::ROLE_WORKER) h->service->OnWorkerRejoined(n.rank());
      if (n.role() == pb::ROLE_SERVER) h->service->OnServerRejoined(n.rank());
    }
  }
  void OnTable() {
    for (auto& h : shards_) h->service->OnTable();
  }
  void OnTick() {
    for (auto& h : shards_) h->service->OnTick();
  }

 private:
  Node* const node_;
  NodeServerLink* const link_;
  std::vector<std::unique_ptr<HostedShard>> shards_;
};

// Serves the job until the scheduler's SHUTDOWN (or a stop); returns how it ended.
//
// Everything the handlers do runs on the node's I/O thread (Node::set_on_data and the peer
// callbacks): a push is answered without waking a second thread, and deaths, rejoins and new
// tables are applied in the order the scheduler sent them, between data messages. With
// replication this thread also ticks the services every 100 ms (resends to backups), behind the
// same gate. The gate (shared with the handlers, so it outlives any call still in flight) turns
// them off at the end; while it is open only one thread at a time touches the services.
// The job status's report of this server (Node::SetReport): its own shard's counters and the
// round of the checkpoint it restored (-1: none).
pb::Heartbeat ServerReportOf(const ShardServer& shard, const ShardCheckpointer& checkpointer) {
  const ShardServerStats& st = shard.stats();
  pb::Heartbeat h;
  pb::ServerReport* r = h.mutable_server();
  const bool bsp = shard.options().consistency == Consistency::kBsp;
  r->set_rounds(bsp ? st.rounds_completed : st.pushes_applied);
  r->set_pushes_applied(st.pushes_applied);
  r->set_rejected(st.rejected);
  r->set_duplicates(st.duplicates);
  r->set_restored_round(checkpointer.restored_round());
  return h;
}

Status Serve(Node& node, HostedShards& shards, DaemonMetrics& metrics, bool refresh_metrics) {
  struct HandlerGate {
    Mutex mu;
    bool serving GUARDED_BY(mu) = true;
  };
  auto gate = std::make_shared<HandlerGate>();
  node.set_on_node_dead([&shards, gate](const pb::NodeDead& d) {
    MutexLock lock(&gate->mu);
    if (gate->serving) shards.OnNodeDead(d);
  });
  node.set_on_node_rejoined([&shards, gate](const pb::NodeInfo& n) {
    MutexLock lock(&gate->mu);
    if (gate->serving) shards.OnRejoined(n);
  });
  node.set_on_table([&shards, gate](const pb::NodeTable&) {
    MutexLock lock(&gate->mu);
    if (gate->serving) shards.OnTable();
  });
  node.set_on_data([&shards, gate](Message msg) {
    MutexLock lock(&gate->mu);
    if (gate->serving) shards.OnData(std::move(msg));
  });
  {
    // The deaths announced before the handlers were in place (to a restarted server, the
    // scheduler retells the dead and finished workers right after its table). One that also
    // reached the handler is applied twice, which changes nothing.
    MutexLock lock(&gate->mu);
    for (int id : node.dead_nodes()) {
      const int worker = node.WorkerRankOf(id);
      if (worker < 0) continue;
      pb::NodeDead d;
      d.set_id(id);
      d.set_role(pb::ROLE_WORKER);
      d.set_rank(worker);
      shards.OnNodeDead(d);
    }
  }

  // This thread only waits for the end; once a second it gives the node its report for the job's
  // status (its own shard's counters) and, with --metrics_port, refreshes the auth gauges; with
  // replication it ticks the services.
  const bool ticking = node.replication() > 0;
  const auto wait = ticking ? std::chrono::milliseconds(100) : std::chrono::milliseconds(1000);
  auto next_report = std::chrono::steady_clock::now();
  Status end;
  do {
    end = node.WaitShutdown(wait);
    if (refresh_metrics) metrics.SetAuth(node.auth_accepted(), node.auth_denied());
    MutexLock lock(&gate->mu);
    if (gate->serving && ticking) shards.OnTick();
    if (gate->serving && std::chrono::steady_clock::now() >= next_report) {
      next_report = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      const HostedShard& own = *shards.all().front();
      node.SetReport(ServerReportOf(*own.server, own.checkpointer));
    }
  } while (end.code() == StatusCode::kDeadlineExceeded);
  node.set_on_data(nullptr);  // from here on no data handler runs
  node.set_on_table(nullptr);
  {
    MutexLock lock(&gate->mu);
    gate->serving = false;  // nor a worker-event handler
  }
  return end;
}

uint32_t Crc32Of(std::span<const float> w) {
  return static_cast<uint32_t>(crc32(crc32(0, nullptr, 0), reinterpret_cast<const Bytef*>(w.data()),
                                     static_cast<uInt>(w.size_bytes())));
}

std::string Crc32Text(std::span<const float> w) {
  char crc[16];
  std::snprintf(crc, sizeof crc, "%08x", Crc32Of(w));
  return crc;
}

// The server's summary (main.cc's header lists the fields; docs/protocol.md, "Run summaries").
// The backup-worker fields: missed (rounds x workers closed without a push), late_pushes (applied
// in a later round, or refused), late_workers naming every worker that missed
// BspShard::kNamedMissRun rounds or more in a row as rank:missed/longest-run, open_round_pushes
// (aggregated into a round that never completed: late pushes of the job's last round).
SummaryRecord ServerSummaryRecord(int rank, ShardRange range, const ShardServer& shard,
                                  const ShardCheckpointer& checkpointer, const Node& node) {
  using Show = SummaryRecord::Show;
  const auto& st = shard.stats();
  std::string late_workers;
  for (size_t w = 0; w < st.longest_miss_run.size(); ++w) {
    if (st.longest_miss_run[w] < BspShard::kNamedMissRun) continue;
    if (!late_workers.empty()) late_workers += ',';
    late_workers.append(std::to_string(w))
        .append(":")
        .append(std::to_string(st.missed_by_worker[w]))
        .append("/")
        .append(std::to_string(st.longest_miss_run[w]));
  }
  const int64_t restored = checkpointer.restored_round();
  SummaryRecord r;
  r.Int("rank", rank, Show::kAlways)
      .Uint("lo", range.lo, Show::kAlways)
      .Uint("hi", range.hi, Show::kAlways)
      .Uint("rounds", st.rounds_completed, Show::kAlways)
      .Uint("applied", st.pushes_applied, Show::kAlways)
      .Uint("duplicates", st.duplicates)
      .Uint("rejected", st.rejected)
      .Uint("dropped", node.rejected_messages())
      .Int("max_staleness", st.max_staleness)
      .Uint("staleness_sum", st.staleness_sum)
      .Uint("released", st.released_replies)
      .Uint("push_staleness_sum", st.push_staleness_sum)
      .Uint("max_push_staleness", st.max_push_staleness)
      .Uint("reply_pairs", st.reply_pairs_sum)
      .Real("pushed_sum", st.pushed_sum, 9)
      .Text("checksum", Crc32Text(shard.weights()), Show::kAlways)
      .Uint("resync", st.resync_replies)
      .Uint("idle_rounds", st.idle_rounds)
      .Uint("checkpoints", checkpointer.written())
      .Int("restored_round", restored, restored >= 0 ? Show::kAlways : Show::kHidden)
      .Uint("rejoins", st.rejoins)
      .Uint("auth_accepted", node.auth_accepted())
      .Uint("auth_denied", node.auth_denied())
      .Uint("errors_dropped", node.errors_dropped())
      .Uint("replies_dropped", node.replies_dropped())
      .Uint("foreign", node.foreign_messages())
      .Uint("impostors", node.impostor_messages())
      .Uint("fd_limit_refused", node.refused_at_fd_limit())
      .Uint("missed", st.missed)
      .Uint("late_pushes", st.late_pushes)
      .Text("late_workers", late_workers)
      .Uint("open_round_pushes",
            shard.rounds() != nullptr ? shard.rounds()->open_round_pushes() : 0);
  return r;
}

// The summary's replication fields: replication (the job's r), backups (live backups of this
// server's own shard at the end), replicated (events sent to them), resent, replayed (events
// this server replayed on its copies of other shards), held_replies (replies that waited for
// acknowledgements), rebases (round jumps of a restored BSP shard after which its copies were
// sent a snapshot), promoted (shards this server took over at failover, comma-separated),
// copies (shard:checksum of every other shard this server holds a copy of, its weights' CRC-32
// as in checksum: at the end of a job each equals that shard's primary's).
void AddReplicationFields(const Node& node, HostedShards& shards, SummaryRecord* r) {
  uint64_t events = 0, resent = 0, replayed = 0, held = 0, rebases = 0;
  size_t backups = 0;
  std::string promoted, copies;
  for (auto& h : shards.all()) {
    if (h->shard != node.rank()) {
      if (!copies.empty()) copies += ',';
      copies.append(std::to_string(h->shard)).append(":").append(Crc32Text(h->server->weights()));
    }
    const ReplicationStats& rs = h->service->replication();
    events += rs.events;
    resent += rs.resent;
    replayed += rs.replayed;
    held += rs.held_replies;
    rebases += rs.rebases;
    if (h->shard == node.rank()) backups = h->service->backups().size();
    if (!rs.promoted) continue;
    if (!promoted.empty()) promoted += ',';
    promoted += std::to_string(h->shard);
  }
  r->Int("replication", node.replication())
      .Uint("backups", backups)
      .Uint("replicated", events)
      .Uint("resent", resent)
      .Uint("replayed", replayed)
      .Uint("held_replies", held)
      .Uint("rebases", rebases)
      .Text("promoted", promoted)
      .Text("copies", copies);
}

// A shard this server took over at failover (its weights and the stats of its whole history:
// the replayed events and those served since): the `sieve-server shard summary:` line and an
// element of the JSON summary's "shards".
SummaryRecord PromotedShardRecord(int rank, const HostedShard& h) {
  using Show = SummaryRecord::Show;
  const auto& st = h.server->stats();
  SummaryRecord r;
  r.Int("rank", rank, Show::kAlways)
      .Int("shard", h.shard, Show::kAlways)
      .Uint("lo", h.range.lo, Show::kAlways)
      .Uint("hi", h.range.hi, Show::kAlways)
      .Uint("rounds", st.rounds_completed, Show::kAlways)
      .Uint("applied", st.pushes_applied, Show::kAlways)
      .Uint("duplicates", st.duplicates)
      .Uint("rejected", st.rejected)
      .Real("pushed_sum", st.pushed_sum, 9)
      .Text("checksum", Crc32Text(h.server->weights()), Show::kAlways)
      .Uint("promoted_round", h.service->replication().promoted_round, Show::kAlways);
  return r;
}

// Whether a replicated shard of these options is copied by its rounds' results
// (ShardServiceOptions::replicate_rounds): BSP without backup workers or two-way compression.
bool ReplicatedByRounds(const ShardServerOptions& so) {
  return so.consistency == Consistency::kBsp && so.backup_workers == 0 &&
         so.server_compressor == Compressor::kNone;
}

// Creates the shard `shard_rank` this server holds (a mirror of another server's when `mirror`):
// its initial weights, its checkpoint restore, its service. nullptr with *code set when the job
// must stop.
std::unique_ptr<HostedShard> HostShard(const ServerDaemonOptions& o, Node& node,
                                       DaemonMetrics& metrics, NodeServerLink* link, int shard_rank,
                                       bool mirror, bool awaiting_snapshot, int* code) {
  auto h = std::make_unique<HostedShard>();
  h->shard = shard_rank;
  h->range = node.shards()[shard_rank];
  std::vector<float> init(h->range.size());
  const bool await_init = !o.layout && o.init_weights.empty();
  if ((*code = InitialWeights(o, node, h->range, await_init, &init)) != 0) return nullptr;
  ShardServerOptions so = o.shard;
  so.num_workers = node.num_workers();
  so.await_initial_weights = await_init;
  // A reply waits for the backups' acknowledgements whole: parts would leave before them.
  if (node.replication() > 0) so.reply_part_pairs = 0;
  auto created = ShardServer::Create(so, std::move(init));
  if (!created.ok()) {
    *code = ExitWith(kExitUsage, kName, created.status().ToString());
    return nullptr;
  }
  h->server = std::move(created).value();
  if ((*code = RestoreShard(o, node, shard_rank, h->range, mirror, h->server.get(),
                            &h->checkpointer)) != 0) {
    return nullptr;
  }
  ShardServiceOptions sso;
  sso.rank = shard_rank;
  sso.server_rank = node.rank();
  sso.num_workers = node.num_workers();
  sso.bsp = so.consistency == Consistency::kBsp;
  sso.reply_part_pairs = so.reply_part_pairs;
  sso.compact_indices = o.node.compact_indices;
  sso.reply_values = o.reply_values;  // the shard's weights and accumulation stay fp32
  sso.mirror = mirror;
  sso.replicate_rounds = ReplicatedByRounds(so);
  sso.rebuildable = true;
  sso.awaiting_snapshot = awaiting_snapshot;
  // A server admitted late (a restart) holds no copies, so its own shard has no backups left.
  const int servers = static_cast<int>(node.num_servers());
  if (!mirror && !node.joined_late()) {
    for (int k = 1; k <= static_cast<int>(node.replication()); ++k)
      sso.backups.push_back((shard_rank + k) % servers);
  }
  // Where the shard's copies belong (its own server and the r after it): a replacement of one of
  // them is rebuilt by this shard's primary, whichever server that is then.
  for (int k = 0; k <= static_cast<int>(node.replication()) && node.replication() > 0; ++k) {
    const int holder = (shard_rank + k) % servers;
    if (holder != node.rank()) sso.rebuild_into.push_back(holder);
  }
  // The mirror's own metrics would count its replays as pushes: only the primary reports.
  h->service = std::make_unique<ShardService>(sso, h->server.get(), link,
                                              mirror ? nullptr : &metrics, &h->checkpointer);
  return h;
}

// Whether this server, admitted late (a restart), takes up shard `shard` (not its own) as its
// primary: its table names it so (AdoptWaitingShards).
bool AdoptsShard(const Node& node, int shard) {
  return node.joined_late() && node.replication() > 0 && shard != node.rank() &&
         node.ShardPrimary(shard) == node.rank();
}

// A server admitted late (a restart) whose table names it the primary of other shards than its
// own: each failed over to it, then lost its last live copy while it was down, and waits for it.
// It takes them up as their primary from their checkpoints, as it does its own shard. Then every
// shard it serves after such a loss offers a snapshot to the live servers rebuilding copies of
// it (replacements whose own shard is served elsewhere): the primary they wait for is this one.
// A BSP shard restored behind the workers resyncs by a jump of rounds; its copies are rebased on
// a snapshot after it (PrimaryReplica::RebaseBackups). 0, or the exit code.
int AdoptWaitingShards(const ServerDaemonOptions& o, Node& node, DaemonMetrics& metrics,
                       NodeServerLink* link, HostedShards* shards) {
  const int rank = node.rank();
  const int servers = static_cast<int>(node.num_servers());
  bool adopted = false;
  for (int s = 0; s < servers; ++s) {
    if (!AdoptsShard(node, s)) continue;
    int code = 0;
    auto h = HostShard(o, node, metrics, link, s, /*mirror=*/false, false, &code);
    if (h == nullptr) return code;
    LOG(WARNING) << "shard " << s << " lost every live copy while server " << rank
                 << " was down and waited for it: server " << rank
                 << " serves it from its checkpoint";
    shards->Add(std::move(h));
    adopted = true;
  }
  if (!adopted &&
      (!node.joined_late() || node.replication() == 0 || node.ShardPrimary(rank) != rank)) {
    return 0;
  }
  for (auto& h : shards->all()) {
    if (!h->service->primary()) continue;
    for (int r = 0; r < servers; ++r) {
      if (r != rank && !link->ServerDead(r) && node.ShardPrimary(r) != r) {
        h->service->OnServerRejoined(r);
      }
    }
  }
  return 0;
}

// --trace_out's writer for server `rank`; null without the flag.
StatusOr<std::unique_ptr<TraceWriter>> OpenTrace(const ServerDaemonOptions& o, int rank) {
  if (o.trace_out.empty()) return std::unique_ptr<TraceWriter>();
  TraceWriterOptions to;
  to.path = ExpandRolePattern(o.trace_out, "server", rank);
  to.role = "server";
  to.rank = rank;
  to.rounds = o.trace_rounds;
  return TraceWriter::Open(to);
}

// The registered node's part of the job: its shards (its own, and with --replication copies of
// the r servers before it in ring order), their services, the serving and the summary.
int ServeShard(const ServerDaemonOptions& o, Node& node, DaemonMetrics& metrics) {
  if (int code = CheckWorkersD(o, node); code != 0) return code;
  const int rank = node.rank();
  metrics.SetRank(rank);
  ScopedDeadNodesSource dead_source(
      &metrics, [&node] { return static_cast<double>(node.dead_nodes().size()); });
  // Before the shards, so that it outlives their services, which borrow it.
  auto trace = OpenTrace(o, rank);
  if (!trace.ok()) {
    const std::string why = "--trace_out: " + trace.status().message();
    return StopJob(node, kExitFailure, why, why);
  }
  NodeServerLink link(&node);
  HostedShards shards(&node, &link);
  int code = 0;
  // A replacement for a rank whose shard failed over (the scheduler admits it only when it is
  // rebuildable) holds empty copies that the shards' primaries fill with snapshots: of its own
  // shard, served elsewhere, and of the r shards before it.
  const bool rebuild =
      node.joined_late() && node.replication() > 0 && node.ShardPrimary(rank) != rank;
  auto own = HostShard(o, node, metrics, &link, rank, /*mirror=*/rebuild, rebuild, &code);
  if (own == nullptr) return code;
  HostedShard& mine = *own;
  shards.Add(std::move(own));
  const int servers = static_cast<int>(node.num_servers());
  if (!node.joined_late() || rebuild) {
    for (int k = 1; k <= static_cast<int>(node.replication()); ++k) {
      const int s = ((rank - k) % servers + servers) % servers;
      if (AdoptsShard(node, s)) continue;  // taken up as its primary below
      auto copy = HostShard(o, node, metrics, &link, s, /*mirror=*/true, rebuild, &code);
      if (copy == nullptr) return code;
      shards.Add(std::move(copy));
    }
  }
  if ((code = AdoptWaitingShards(o, node, metrics, &link, &shards)) != 0) return code;
  const ShardServerOptions& so = mine.server->options();
  LOG(INFO) << "server " << rank << " owns [" << mine.range.lo << ", " << mine.range.hi
            << ") of D = " << node.num_params() << ", " << ConsistencyName(so.consistency) << ", "
            << node.num_workers() << " workers, " << so.threads << " thread"
            << (so.threads == 1 ? "" : "s")
            << (node.replication() > 0
                    ? ", replication " + std::to_string(node.replication()) + " (" +
                          std::to_string(shards.all().size() - 1) + " copies of other shards)"
                    : std::string());

  if (*trace != nullptr) {
    for (auto& h : shards.all()) h->service->set_trace(trace->get());
    // The server takes part in no barrier: its zero is the start of serving, and `sieve trace
    // merge` places it by its wall clock.
    (void)(*trace)->MarkZero("serving");
  }
  const Status end = Serve(node, shards, metrics, o.node.metrics_port != 0);
  // No handler runs any more: the timeline is complete.
  const Status traced = *trace != nullptr ? (*trace)->Close(/*complete=*/end.ok()) : Status::Ok();

  Status dumped;
  if (!o.dump_shard.empty())
    dumped = DumpShard(ExpandRankPattern(o.dump_shard, rank), mine.server->weights());
  SummaryRecord summary =
      ServerSummaryRecord(rank, mine.range, *mine.server, mine.checkpointer, node);
  AddReplicationFields(node, shards, &summary);
  std::vector<SummaryRecord> promoted;
  for (auto& h : shards.all()) {
    if (h->service->replication().promoted) promoted.push_back(PromotedShardRecord(rank, *h));
  }
  PrintSummaryLine(summary.Line(kSummaryPrefix));
  for (const SummaryRecord& p : promoted) PrintSummaryLine(p.Line(kShardSummaryPrefix));
  summary.List("shards", std::move(promoted));
  const Status summarized = o.summary_out.empty()
                                ? Status::Ok()
                                : WriteSummaryFile(o.summary_out, "server", rank, summary);
  if (!end.ok()) return ExitWith(kExitFailure, kName, "ended: " + end.ToString());
  // The summary above still reports the job; a shard asked for that is not on disk fails the run.
  if (!dumped.ok())
    return ExitWith(kExitFailure, kName, "--dump_shard failed: " + dumped.ToString());
  if (!traced.ok())
    return ExitWith(kExitFailure, kName, "--trace_out failed: " + traced.ToString());
  if (!summarized.ok()) return ExitWith(kExitFailure, kName, summarized.ToString());
  return kExitSuccess;
}

}  // namespace

int RunServer(const ServerDaemonOptions& options) {
  // Before any thread of ours (the metrics endpoint's, the node's): they inherit the blocked
  // signals. Until the node is registered, a signal ends the daemon as the default action would.
  StopOnSignal signals([](int signo, const std::string& reason) {
    std::fprintf(stderr, "%s: %s before joining the job\n", kName, reason.c_str());
    std::_Exit(128 + signo);
  });
  // Serving /healthz before registering lets the Kubernetes probes pass while the job forms.
  auto metrics = StartMetrics(kName, {"server", options.node.bind, options.node.metrics_port});
  if (metrics == nullptr) return kExitFailure;
  auto started = Node::Start(ToNodeOptions(options));
  if (!started.ok()) return ExitWith(kExitFailure, kName, started.status().ToString());
  Node& node = **started;
  signals.SetTarget([&node](const std::string& reason) { node.RequestStop(reason); });
  const int code = ServeShard(options, node, *metrics);
  signals.SetTarget(nullptr);
  return code;
}

}  // namespace sieve
