// sieve-server: one key-range shard of the flat parameter vector. Registers with the scheduler,
// takes its shard's initial weights (from worker 0's INIT when started without --model; else
// generated from --model/--seed exactly as the workers do, or read from --init_weights), then
// serves PUSH and PULL_DENSE until the scheduler's SHUTDOWN. Prints one summary line at the end:
//   sieve-server summary: rank=R lo=.. hi=.. rounds=.. applied=.. duplicates=.. rejected=..
//                         max_staleness=.. staleness_sum=.. released=.. pushed_sum=..
//                         checksum=<crc32 of the weights> ...
// (SSP/ASP: mean staleness = staleness_sum / released, the clock lead of each released reply)
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <zlib.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <thread>

#include "base/fd_limit.h"
#include "base/flags.h"
#include "base/mutex.h"
#include "base/rank_pattern.h"
#include "base/thread_annotations.h"
#include "base/thread_team.h"
#include "kernels/compressor.h"
#include "kernels/model/model_layout.h"
#include "kernels/model/param_init.h"
#include "metrics/daemon_metrics.h"
#include "net/node.h"
#include "net/node_flags.h"
#include "net/signal_watcher.h"
#include "server/checkpointer.h"
#include "server/consistency.h"
#include "server/initial_weights.h"
#include "server/shard_server.h"
#include "server/shard_service.h"

DEFINE_string(model, "",
              "Model whose layout and seeded init the shard uses: softmax|fnn3|cnn|cnn_large|"
              "synthetic; empty = the workers' model: D as the workers declare it and the initial "
              "weights worker 0 sends (a torch model's own init)");
DEFINE_uint64(num_params, 0,
              "D for --model=synthetic; without --model, the D the workers must declare (0 = any; "
              "also bounds the largest frame accepted)");
DEFINE_uint64(seed, 1, "Initialization seed (must match the workers')");
DEFINE_string(init_weights, "",
              "Start from these weights instead of the seeded init: a file of D raw little-endian "
              "float32 values (what sieve-worker --dump_weights writes); each server reads its "
              "shard's slice");
DEFINE_string(consistency, "bsp", "bsp | ssp | asp");
DEFINE_int32(staleness, 2, "SSP bound: max rounds a worker may run ahead of the slowest");
DEFINE_double(async_scale, 0.0, "ASP/SSP: w -= scale * pushed value; 0 = 1/num_workers");
DEFINE_string(server_compressor, "none",
              "Two-way compression of the BSP aggregate: none|topk|gaussiank");
DEFINE_double(server_density, 0.001,
              "Density rho' of the server-side selection (two-way compression)");
DEFINE_string(dump_shard, "",
              "At the end, write the shard's weights here (raw little-endian float32)");
DEFINE_string(checkpoint_dir, "", "Directory of this shard's checkpoint (empty = no checkpoints)");
DEFINE_uint64(checkpoint_every, 0, "BSP: checkpoint every N completed rounds (0 = off)");
DEFINE_double(checkpoint_every_s, 0, "Checkpoint every S seconds, any consistency (0 = off)");
DEFINE_string(restore, "auto",
              "Restore the shard from --checkpoint_dir: auto (when rejoining a running job, i.e. "
              "after a restart), always, never");
namespace {

// --server_threads=0: the cores beside the node's I/O thread, which drives the shard (and runs
// thread 0 of its team).
uint32_t DefaultServerThreads() {
  const unsigned cores = std::thread::hardware_concurrency();
  return cores > 1 ? cores - 1 : 1;
}

const char* ServerThreadsHelp() {
  static const std::string help =
      "Threads that split each shard's work by index range: a BSP round's merges, update pass "
      "and reply arrays (whole or in parts), dense rounds and two-way compression's residual; "
      "an ASP/SSP push's update pass. Results are bitwise the same for any count; rounds below "
      "16384 pairs per thread stay on the node's I/O thread. 1..256; 0 = what the cores allow "
      "beside the node's I/O thread, max(1, hardware threads - 1) = " +
      std::to_string(DefaultServerThreads()) + " on this machine";
  return help.c_str();
}

}  // namespace

DEFINE_uint32(server_threads, 0, ServerThreadsHelp());
DEFINE_string(reply_values, "",
              "Value type of this server's UPDATE and DENSE replies (fp32, fp16, bf16); empty = "
              "--wire_values. The replies carry absolute weights, and the workers compute at "
              "them: with --wire_values=bf16, --reply_values=fp16 keeps bf16's range for the "
              "pushes and gives the weights 3 more significand bits for the same bytes "
              "(docs/results.md). The shard accumulates in fp32 either way");
DEFINE_uint64(reply_part_pairs, 32768,
              "Send a sparse UPDATE of more pairs than this in parts of about this many pairs, "
              "each as soon as it is ready (BSP: while the rest of the round is applied); "
              "0 = whole replies");

namespace sieve {
namespace {

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

int Run() {
  auto consistency = ParseConsistency(FLAGS_consistency);
  if (!consistency.ok()) {
    std::cerr << "sieve-server: --consistency: " << consistency.status().message() << "\n";
    return 2;
  }
  auto compressor = ParseCompressor(FLAGS_server_compressor);
  if (!compressor.ok() || (*compressor != Compressor::kNone && *compressor != Compressor::kTopk &&
                           *compressor != Compressor::kGaussiank)) {
    std::cerr << "sieve-server: --server_compressor must be none, topk or gaussiank\n";
    return 2;
  }
  if (FLAGS_staleness < 0) {
    std::cerr << "sieve-server: --staleness must be >= 0\n";
    return 2;
  }
  if (!(FLAGS_server_density > 0 && FLAGS_server_density <= 1)) {
    std::cerr << "sieve-server: --server_density must be in (0, 1]\n";
    return 2;
  }
  if (FLAGS_server_threads > ThreadTeam::kMaxThreads) {
    std::cerr << "sieve-server: --server_threads must be in 0.." << ThreadTeam::kMaxThreads
              << " (0 = " << DefaultServerThreads() << " on this machine), got "
              << FLAGS_server_threads << "\n";
    return 2;
  }
  const uint32_t server_threads =
      FLAGS_server_threads == 0 ? DefaultServerThreads() : FLAGS_server_threads;
  auto node_flags = ReadNodeFlags("server");
  if (!node_flags.ok()) {
    std::cerr << "sieve-server: " << node_flags.status().message() << "\n";
    return 2;
  }
  const NodeFlags& nf = *node_flags;
  ValueType reply_values = nf.wire_values;
  if (!FLAGS_reply_values.empty()) {
    auto parsed = ParseValueType(FLAGS_reply_values);
    if (!parsed.ok()) {
      std::cerr << "sieve-server: --reply_values: " << parsed.status().message() << "\n";
      return 2;
    }
    reply_values = *parsed;
  }
  // Without --model the workers' model defines the job: D comes with the node table.
  const bool own_model = !FLAGS_model.empty();
  std::optional<ModelLayout> layout;
  if (own_model) {
    auto made = MakeModelLayout(FLAGS_model, FLAGS_num_params);
    if (!made.ok()) {
      std::cerr << "sieve-server: --model: " << made.status().ToString() << "\n";
      return 2;
    }
    layout = std::move(*made);
  }
  // The D this server expects (0 = whatever the workers declare).
  const uint64_t expected_d = own_model ? layout->num_params : FLAGS_num_params;
  if (!FLAGS_init_weights.empty() && expected_d != 0) {
    if (Status s = CheckWeightsFile(FLAGS_init_weights, expected_d); !s.ok()) {
      std::cerr << "sieve-server: --init_weights: " << s.message() << "\n";
      return 2;
    }
  }

  // Serving /healthz before registering lets the Kubernetes probes pass while the job forms.
  auto metrics_or = DaemonMetrics::Start({"server", nf.bind, nf.metrics_port});
  if (!metrics_or.ok()) {
    std::cerr << "sieve-server: " << metrics_or.status().ToString() << "\n";
    return 1;
  }
  DaemonMetrics& metrics = **metrics_or;

  NodeOptions no;
  no.role = pb::ROLE_SERVER;
  no.rank = nf.rank;
  no.scheduler = nf.scheduler;
  no.transport.bind_host = nf.bind;
  no.transport.port = nf.port;
  no.transport.advertise_host = nf.host;
  // D unknown before the node table: no frame limit (docs/security.md).
  no.transport.max_message_bytes = expected_d != 0 ? MaxFrameBytes(expected_d) : 0;
  no.transport.curve = nf.curve;
  no.transport.job = nf.job;
  no.job_key = nf.job_key;
  no.heartbeat_interval_ms = nf.heartbeat_interval_ms;
  no.heartbeat_timeout_ms = nf.heartbeat_timeout_ms;

  struct StopTarget {  // the node the signal callback stops (it runs on its own thread)
    Mutex mu;
    Node* node GUARDED_BY(mu) = nullptr;
  } stop_target;
  SignalWatcher signals([&](int signo) {
    MutexLock lock(&stop_target.mu);
    if (stop_target.node)
      stop_target.node->RequestStop(std::string("stopped by signal ") + strsignal(signo));
  });
  auto started = Node::Start(no);
  if (!started.ok()) {
    std::cerr << "sieve-server: " << started.status().ToString() << "\n";
    return 1;
  }
  Node& node = **started;
  {
    MutexLock lock(&stop_target.mu);
    stop_target.node = &node;
  }
  if (expected_d != 0 && expected_d != node.num_params()) {
    const std::string what = own_model ? "model " + FLAGS_model : std::string("--num_params");
    std::cerr << "sieve-server: " << what << " has D = " << expected_d
              << " but the workers declared D = " << node.num_params()
              << (own_model ? " (omit --model to take the workers' model)" : "") << "\n";
    node.RequestStop(what + " has D = " + std::to_string(expected_d) +
                     " but the workers declared D = " + std::to_string(node.num_params()));
    return 2;
  }
  const int rank = node.rank();
  metrics.SetRank(rank);
  ScopedDeadNodesSource dead_source(
      &metrics, [&node] { return static_cast<double>(node.dead_nodes().size()); });
  const ShardRange range = node.shards()[rank];
  std::vector<float> init(range.size());
  const bool await_init = !own_model && FLAGS_init_weights.empty();
  if (await_init) {
    LOG(INFO) << "no --model: shard " << rank << " waits for worker 0's initial weights";
  } else if (FLAGS_init_weights.empty()) {
    if (Status s = InitSlice(*layout, FLAGS_seed, range.lo, range.hi, init.data()); !s.ok()) {
      std::cerr << "sieve-server: the scheduler assigned shard " << rank << " a range outside "
                << "the model: " << s.message() << "\n";
      node.RequestStop("bad shard range: " + s.message());
      return 2;
    }
  } else if (Status s = ReadWeightsSlice(FLAGS_init_weights, node.num_params(), range.lo, range.hi,
                                         init.data());
             !s.ok()) {
    std::cerr << "sieve-server: --init_weights: " << s.message() << "\n";
    node.RequestStop("--init_weights: " + s.message());
    return 2;
  }

  ShardServerOptions so;
  so.num_workers = node.num_workers();
  so.consistency = *consistency;
  so.staleness = FLAGS_staleness;
  so.async_scale = static_cast<float>(FLAGS_async_scale);
  so.server_compressor = *compressor;
  so.server_density = FLAGS_server_density;
  so.reply_part_pairs = FLAGS_reply_part_pairs;
  so.await_initial_weights = await_init;
  so.threads = server_threads;
  auto created = ShardServer::Create(so, std::move(init));
  if (!created.ok()) {
    std::cerr << "sieve-server: " << created.status().ToString() << "\n";
    return 2;
  }
  ShardServer& shard = **created;
  ShardCheckpointer checkpointer;
  {
    CheckpointConfig cc;
    cc.model = FLAGS_model;
    cc.num_params = node.num_params();
    cc.lo = range.lo;
    cc.hi = range.hi;
    cc.consistency = std::string(ConsistencyName(*consistency));
    cc.seed = FLAGS_seed;
    CheckpointerOptions co{FLAGS_checkpoint_dir, FLAGS_checkpoint_every, FLAGS_checkpoint_every_s,
                           FLAGS_restore, node.table().generation() > 1};
    Status restored = checkpointer.Init(co, cc, rank, &shard);
    if (!restored.ok()) {
      std::cerr << "sieve-server: " << restored.ToString() << "\n";
      node.RequestStop("checkpoint: " + restored.message());
      return 1;
    }
  }
  LOG(INFO) << "server " << rank << " owns [" << range.lo << ", " << range.hi
            << ") of D = " << node.num_params() << ", " << ConsistencyName(*consistency) << ", "
            << node.num_workers() << " workers, " << server_threads << " thread"
            << (server_threads == 1 ? "" : "s");

  NodeServerLink link(&node);
  ShardServiceOptions sso;
  sso.rank = rank;
  sso.num_workers = node.num_workers();
  sso.bsp = *consistency == Consistency::kBsp;
  sso.reply_part_pairs = FLAGS_reply_part_pairs;
  sso.compact_indices = nf.compact_indices;
  sso.reply_values = reply_values;  // the shard's weights and accumulation stay fp32
  ShardService service(sso, &shard, &link, &metrics, &checkpointer);

  // Everything below runs on the node's I/O thread (Node::set_on_data and the peer callbacks):
  // a push is answered without waking a second thread, and worker deaths and rejoins are
  // applied in the order the scheduler sent them, between data messages. The gate (shared with
  // the handlers, so it outlives any call still in flight) turns them off at the end of Run;
  // while it is open only the I/O thread touches the service and its shard.
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
    end = node.WaitShutdown(nf.metrics_port != 0 ? 1000 : 3600 * 1000);
    metrics.SetAuth(node.auth_accepted(), node.auth_denied());
  } while (end.code() == StatusCode::kDeadlineExceeded);
  node.set_on_data(nullptr);  // from here on no data handler runs
  {
    MutexLock lock(&gate->mu);
    gate->serving = false;  // nor a worker-event handler
  }

  const auto w = shard.weights();
  const uint32_t crc =
      static_cast<uint32_t>(crc32(crc32(0, nullptr, 0), reinterpret_cast<const Bytef*>(w.data()),
                                  static_cast<uInt>(w.size_bytes())));
  Status dumped;
  if (!FLAGS_dump_shard.empty()) {
    dumped = DumpShard(ExpandRankPattern(FLAGS_dump_shard, rank), w);
  }
  const auto& st = shard.stats();
  std::printf(
      "sieve-server summary: rank=%d lo=%lu hi=%lu rounds=%lu applied=%lu duplicates=%lu "
      "rejected=%lu "
      "dropped=%lu max_staleness=%d staleness_sum=%lu released=%lu pushed_sum=%.9g checksum=%08x "
      "resync=%lu checkpoints=%lu restored_round=%ld rejoins=%lu auth_accepted=%lu "
      "auth_denied=%lu errors_dropped=%lu foreign=%lu impostors=%lu fd_limit_refused=%lu\n",
      rank, static_cast<unsigned long>(range.lo), static_cast<unsigned long>(range.hi),
      static_cast<unsigned long>(st.rounds_completed),
      static_cast<unsigned long>(st.pushes_applied), static_cast<unsigned long>(st.duplicates),
      static_cast<unsigned long>(st.rejected), static_cast<unsigned long>(node.rejected_messages()),
      st.max_staleness, static_cast<unsigned long>(st.staleness_sum),
      static_cast<unsigned long>(st.released_replies), st.pushed_sum, crc,
      static_cast<unsigned long>(st.resync_replies),
      static_cast<unsigned long>(checkpointer.written()),
      static_cast<long>(checkpointer.restored_round()), static_cast<unsigned long>(st.rejoins),
      static_cast<unsigned long>(node.auth_accepted()),
      static_cast<unsigned long>(node.auth_denied()),
      static_cast<unsigned long>(node.errors_dropped()),
      static_cast<unsigned long>(node.foreign_messages()),
      static_cast<unsigned long>(node.impostor_messages()),
      static_cast<unsigned long>(node.refused_at_fd_limit()));
  std::fflush(stdout);
  if (!end.ok()) {
    std::cerr << "sieve-server: ended: " << end.ToString() << "\n";
    return 1;
  }
  // The summary above still reports the job; a shard asked for that is not on disk fails the run.
  if (!dumped.ok()) {
    std::cerr << "sieve-server: --dump_shard failed: " << dumped.ToString() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace sieve

int main(int argc, char** argv) {
  const sieve::ProgramInfo program = {
      "sieve-server",
      "a sieve parameter server: holds one key-range shard, aggregates pushes (BSP/SSP/ASP) and "
      "answers with sparse updates.",
      "sieve-server --scheduler=HOST:PORT [--consistency=bsp] ...",
      {{"Cluster", {"scheduler", "rank", "port", "bind", "host", "curve_dir", "curve_key"}},
       {"Job identity", {"job_token_file", "job_token"}},
       {"Model", {"model", "num_params", "seed", "init_weights"}},
       {"Consistency", {"consistency", "staleness", "async_scale"}},
       {"Compression",
        {"server_compressor", "server_density", "reply_part_pairs", "wire_values", "reply_values",
         "wire"}},
       {"Threads", {"server_threads"}},
       {"Failure handling",
        {"heartbeat_interval_ms", "heartbeat_timeout_ms", "checkpoint_dir", "checkpoint_every",
         "checkpoint_every_s", "restore"}},
       {"Output and metrics", {"dump_shard", "metrics_port"}}}};
  if (auto exit_code = sieve::ParseCommandLine(program, argc, argv)) return *exit_code;
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  // Every peer connection costs a descriptor: start with all this process may have.
  if (auto fds = sieve::RaiseFdLimit(); !fds.ok()) LOG(WARNING) << fds.status().ToString();
  return sieve::Run();
}
