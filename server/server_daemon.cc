#include "server/server_daemon.h"

#include <glog/logging.h>
#include <zlib.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/rank_pattern.h"
#include "base/thread_annotations.h"
#include "daemon/daemon_main.h"
#include "kernels/model/param_init.h"
#include "metrics/daemon_metrics.h"
#include "net/node.h"
#include "server/bsp_shard.h"
#include "server/checkpointer.h"
#include "server/consistency.h"
#include "server/initial_weights.h"
#include "server/shard_server.h"
#include "server/shard_service.h"

namespace sieve {
namespace {

constexpr char kName[] = "sieve-server";

// The server's Node as ShardService sees it.
class NodeServerLink : public ServerLink {
 public:
  explicit NodeServerLink(Node* node) : node_(node) {}
  int id() const override { return node_->id(); }
  int WorkerId(int rank) const override { return node_->WorkerId(rank); }
  int WorkerRankOf(int id) const override { return node_->WorkerRankOf(id); }
  Status Send(int peer, Frames frames) override { return node_->Send(peer, std::move(frames)); }
  Status SendError(int peer, pb::ErrorCode code, const std::string& message, pb::MsgType rejected,
                   uint64_t round) override {
    return node_->SendError(peer, code, message, rejected, round);
  }

 private:
  Node* const node_;
};

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
  no.rank = nf.rank;
  no.scheduler = nf.scheduler;
  no.transport.bind_host = nf.bind;
  no.transport.port = nf.port;
  no.transport.advertise_host = nf.host;
  // D unknown before the node table: no frame limit (docs/security.md).
  no.transport.max_message_bytes = o.expected_d != 0 ? MaxFrameBytes(o.expected_d) : 0;
  no.transport.curve = nf.curve;
  no.transport.job = nf.job;
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

// Restores the shard from --checkpoint_dir as the policy says: 0, or the exit code.
int RestoreShard(const ServerDaemonOptions& o, Node& node, ShardRange range, ShardServer* shard,
                 ShardCheckpointer* checkpointer) {
  CheckpointConfig cc;
  cc.model = o.model;
  cc.num_params = node.num_params();
  cc.lo = range.lo;
  cc.hi = range.hi;
  cc.consistency = std::string(ConsistencyName(o.shard.consistency));
  cc.seed = o.seed;
  CheckpointerOptions co = o.checkpoint;
  co.rejoining = node.table().generation() > 1;
  Status restored = checkpointer->Init(co, cc, node.rank(), shard);
  if (!restored.ok()) {
    return StopJob(node, kExitFailure, restored.ToString(), "checkpoint: " + restored.message());
  }
  return 0;
}

// Serves the job until the scheduler's SHUTDOWN (or a stop); returns how it ended.
//
// Everything the handlers do runs on the node's I/O thread (Node::set_on_data and the peer
// callbacks): a push is answered without waking a second thread, and worker deaths and rejoins
// are applied in the order the scheduler sent them, between data messages. The gate (shared with
// the handlers, so it outlives any call still in flight) turns them off at the end; while it is
// open only the I/O thread touches the service and its shard.
Status Serve(Node& node, ShardService& service, DaemonMetrics& metrics, bool refresh_metrics) {
  struct HandlerGate {
    Mutex mu;
    bool serving GUARDED_BY(mu) = true;
  };
  auto gate = std::make_shared<HandlerGate>();
  node.set_on_node_dead([&service, gate](const pb::NodeDead& d) {
    if (d.role() != pb::ROLE_WORKER) return;
    MutexLock lock(&gate->mu);
    if (gate->serving) service.OnWorkerDead(d.rank());
  });
  node.set_on_node_rejoined([&service, gate](const pb::NodeInfo& n) {
    if (n.role() != pb::ROLE_WORKER) return;
    MutexLock lock(&gate->mu);
    if (gate->serving) service.OnWorkerRejoined(n.rank());
  });
  node.set_on_data([&service, gate](Message msg) {
    MutexLock lock(&gate->mu);
    if (gate->serving) service.OnData(std::move(msg));
  });

  // This thread only waits for the end; with --metrics_port it refreshes the auth gauges.
  Status end;
  do {
    end = node.WaitShutdown(refresh_metrics ? std::chrono::seconds(1) : std::chrono::hours(1));
    metrics.SetAuth(node.auth_accepted(), node.auth_denied());
  } while (end.code() == StatusCode::kDeadlineExceeded);
  node.set_on_data(nullptr);  // from here on no data handler runs
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

// The summary's backup-worker fields: missed= (rounds x workers closed without a push),
// late_pushes= (applied in a later round, or refused), late_workers= naming every worker that
// missed BspShard::kNamedMissRun rounds or more in a row as rank:missed/longest-run ("-" for
// none), open_round_pushes= (aggregated into a round that never completed: late pushes of the
// job's last round).
std::string BackupWorkerFields(const ShardServerStats& st, uint32_t open_round_pushes) {
  std::string named;
  for (size_t w = 0; w < st.longest_miss_run.size(); ++w) {
    if (st.longest_miss_run[w] < BspShard::kNamedMissRun) continue;
    if (!named.empty()) named += ',';
    named += std::to_string(w) + ':' + std::to_string(st.missed_by_worker[w]) + '/' +
             std::to_string(st.longest_miss_run[w]);
  }
  return " missed=" + std::to_string(st.missed) + " late_pushes=" + std::to_string(st.late_pushes) +
         " late_workers=" + (named.empty() ? std::string("-") : named) +
         " open_round_pushes=" + std::to_string(open_round_pushes);
}

// The `sieve-server summary:` line (main.cc's header; tests/net/summary_line.cc parses it).
std::string SummaryLine(int rank, ShardRange range, const ShardServer& shard,
                        const ShardCheckpointer& checkpointer, const Node& node) {
  const auto& st = shard.stats();
  char line[2048];
  std::snprintf(
      line, sizeof line,
      "sieve-server summary: rank=%d lo=%lu hi=%lu rounds=%lu applied=%lu duplicates=%lu "
      "rejected=%lu "
      "dropped=%lu max_staleness=%d staleness_sum=%lu released=%lu push_staleness_sum=%lu "
      "max_push_staleness=%lu reply_pairs=%lu pushed_sum=%.9g checksum=%08x "
      "resync=%lu checkpoints=%lu restored_round=%ld rejoins=%lu auth_accepted=%lu "
      "auth_denied=%lu errors_dropped=%lu foreign=%lu impostors=%lu fd_limit_refused=%lu",
      rank, static_cast<unsigned long>(range.lo), static_cast<unsigned long>(range.hi),
      static_cast<unsigned long>(st.rounds_completed),
      static_cast<unsigned long>(st.pushes_applied), static_cast<unsigned long>(st.duplicates),
      static_cast<unsigned long>(st.rejected), static_cast<unsigned long>(node.rejected_messages()),
      st.max_staleness, static_cast<unsigned long>(st.staleness_sum),
      static_cast<unsigned long>(st.released_replies),
      static_cast<unsigned long>(st.push_staleness_sum),
      static_cast<unsigned long>(st.max_push_staleness),
      static_cast<unsigned long>(st.reply_pairs_sum), st.pushed_sum, Crc32Of(shard.weights()),
      static_cast<unsigned long>(st.resync_replies),
      static_cast<unsigned long>(checkpointer.written()),
      static_cast<long>(checkpointer.restored_round()), static_cast<unsigned long>(st.rejoins),
      static_cast<unsigned long>(node.auth_accepted()),
      static_cast<unsigned long>(node.auth_denied()),
      static_cast<unsigned long>(node.errors_dropped()),
      static_cast<unsigned long>(node.foreign_messages()),
      static_cast<unsigned long>(node.impostor_messages()),
      static_cast<unsigned long>(node.refused_at_fd_limit()));
  return line + BackupWorkerFields(st, shard.open_round_pushes());
}

// The registered node's part of the job: the shard, its service, the serving and the summary.
int ServeShard(const ServerDaemonOptions& o, Node& node, DaemonMetrics& metrics) {
  if (int code = CheckWorkersD(o, node); code != 0) return code;
  const int rank = node.rank();
  metrics.SetRank(rank);
  ScopedDeadNodesSource dead_source(
      &metrics, [&node] { return static_cast<double>(node.dead_nodes().size()); });
  const ShardRange range = node.shards()[rank];
  std::vector<float> init(range.size());
  const bool await_init = !o.layout && o.init_weights.empty();
  if (int code = InitialWeights(o, node, range, await_init, &init); code != 0) return code;

  ShardServerOptions so = o.shard;
  so.num_workers = node.num_workers();
  so.await_initial_weights = await_init;
  auto created = ShardServer::Create(so, std::move(init));
  if (!created.ok()) return ExitWith(kExitUsage, kName, created.status().ToString());
  ShardServer& shard = **created;
  ShardCheckpointer checkpointer;
  if (int code = RestoreShard(o, node, range, &shard, &checkpointer); code != 0) return code;
  LOG(INFO) << "server " << rank << " owns [" << range.lo << ", " << range.hi
            << ") of D = " << node.num_params() << ", " << ConsistencyName(so.consistency) << ", "
            << node.num_workers() << " workers, " << so.threads << " thread"
            << (so.threads == 1 ? "" : "s");

  NodeServerLink link(&node);
  ShardServiceOptions sso;
  sso.rank = rank;
  sso.num_workers = node.num_workers();
  sso.bsp = so.consistency == Consistency::kBsp;
  sso.reply_part_pairs = so.reply_part_pairs;
  sso.compact_indices = o.node.compact_indices;
  sso.reply_values = o.reply_values;  // the shard's weights and accumulation stay fp32
  ShardService service(sso, &shard, &link, &metrics, &checkpointer);
  const Status end = Serve(node, service, metrics, o.node.metrics_port != 0);

  Status dumped;
  if (!o.dump_shard.empty())
    dumped = DumpShard(ExpandRankPattern(o.dump_shard, rank), shard.weights());
  PrintSummaryLine(SummaryLine(rank, range, shard, checkpointer, node));
  if (!end.ok()) return ExitWith(kExitFailure, kName, "ended: " + end.ToString());
  // The summary above still reports the job; a shard asked for that is not on disk fails the run.
  if (!dumped.ok())
    return ExitWith(kExitFailure, kName, "--dump_shard failed: " + dumped.ToString());
  return kExitSuccess;
}

}  // namespace

int RunServer(const ServerDaemonOptions& options) {
  // Serving /healthz before registering lets the Kubernetes probes pass while the job forms.
  auto metrics = StartMetrics(kName, {"server", options.node.bind, options.node.metrics_port});
  if (metrics == nullptr) return kExitFailure;
  StopOnSignal signals;  // before the node's threads; stops the node once it is there
  auto started = Node::Start(ToNodeOptions(options));
  if (!started.ok()) return ExitWith(kExitFailure, kName, started.status().ToString());
  Node& node = **started;
  signals.SetTarget([&node](const std::string& reason) { node.RequestStop(reason); });
  const int code = ServeShard(options, node, *metrics);
  signals.SetTarget(nullptr);
  return code;
}

}  // namespace sieve
