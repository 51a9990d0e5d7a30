// sieve-server: one key-range shard of the flat parameter vector. Registers with the scheduler,
// generates its shard's initial weights from --model/--seed exactly as the workers do, then
// serves PUSH and PULL_DENSE until the scheduler's SHUTDOWN. Prints one summary line at the end:
//   sieve-server summary: rank=R lo=.. hi=.. rounds=.. applied=.. duplicates=.. rejected=..
//                         max_staleness=.. staleness_sum=.. released=.. pushed_sum=..
//                         checksum=<crc32 of the weights> ...
// (SSP/ASP: mean staleness = staleness_sum / released, the clock lead of each released reply)
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <zlib.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>

#include "base/flags.h"
#include "kernels/compressor.h"
#include "kernels/model/model_layout.h"
#include "kernels/model/param_init.h"
#include "kernels/sparse_ops.h"
#include "metrics/daemon_metrics.h"
#include "net/curve.h"
#include "net/node.h"
#include "net/signal_watcher.h"
#include "server/checkpointer.h"
#include "server/consistency.h"
#include "server/initial_weights.h"
#include "server/shard_server.h"

DEFINE_string(scheduler, "127.0.0.1:9310", "Scheduler address host:port");
DEFINE_int32(rank, -1, "Requested server rank (-1 = assigned by the scheduler)");
DEFINE_string(bind, "0.0.0.0", "Interface address to bind");
DEFINE_string(host, "",
              "Address advertised to peers (default: first non-loopback IPv4, else 127.0.0.1)");
DEFINE_string(curve_dir, "",
              "CurveZMQ on every socket with the keys in this directory (server.key, client.key, "
              "allowed_clients; written by `sieve keygen`); empty = no encryption");
DEFINE_uint32(port, 0, "Port to listen on (0 = any free port)");
DEFINE_string(model, "fnn3",
              "Model whose layout and seeded init the shard uses: softmax|fnn3|cnn|cnn_large|"
              "synthetic");
DEFINE_uint64(num_params, 0, "D for --model=synthetic");
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
DEFINE_int32(heartbeat_interval_ms, 1000, "Heartbeat period to the scheduler (0 = off)");
DEFINE_int32(heartbeat_timeout_ms, 10000, "Fail when the scheduler is silent this long");
DEFINE_string(dump_shard, "",
              "At the end, write the shard's weights here (raw little-endian float32)");
DEFINE_string(checkpoint_dir, "", "Directory of this shard's checkpoint (empty = no checkpoints)");
DEFINE_uint64(checkpoint_every, 0, "BSP: checkpoint every N completed rounds (0 = off)");
DEFINE_double(checkpoint_every_s, 0, "Checkpoint every S seconds, any consistency (0 = off)");
DEFINE_string(restore, "auto",
              "Restore the shard from --checkpoint_dir: auto (when rejoining a running job, i.e. "
              "after a restart), always, never");
DEFINE_uint64(reply_part_pairs, 32768,
              "Send a sparse UPDATE of more pairs than this in parts of about this many pairs, "
              "each as soon as it is ready (BSP: while the rest of the round is applied); "
              "0 = whole replies");
DEFINE_uint32(metrics_port, 0,
              "Serve Prometheus /metrics and /healthz on this port (on --bind); 0 = off");

namespace sieve {
namespace {

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
  if (FLAGS_port > 65535) {
    std::cerr << "sieve-server: --port must be in [0, 65535]\n";
    return 2;
  }
  auto layout = MakeModelLayout(FLAGS_model, FLAGS_num_params);
  if (!layout.ok()) {
    std::cerr << "sieve-server: --model: " << layout.status().ToString() << "\n";
    return 2;
  }
  if (!FLAGS_init_weights.empty()) {
    if (Status s = CheckWeightsFile(FLAGS_init_weights, layout->num_params); !s.ok()) {
      std::cerr << "sieve-server: --init_weights: " << s.message() << "\n";
      return 2;
    }
  }

  // Serving /healthz before registering lets the Kubernetes probes pass while the job forms.
  auto metrics_or = DaemonMetrics::Start({"server", FLAGS_bind, FLAGS_metrics_port});
  if (!metrics_or.ok()) {
    std::cerr << "sieve-server: " << metrics_or.status().ToString() << "\n";
    return 1;
  }
  DaemonMetrics& metrics = **metrics_or;
  auto frame_bytes = [](const Frames& frames) {
    uint64_t n = 0;
    for (const auto& f : frames) n += f.size();
    return n;
  };
  using MetricsClock = std::chrono::steady_clock;
  auto seconds_since = [](MetricsClock::time_point t) {
    return std::chrono::duration<double>(MetricsClock::now() - t).count();
  };

  NodeOptions no;
  no.role = pb::ROLE_SERVER;
  no.rank = FLAGS_rank;
  no.scheduler = FLAGS_scheduler;
  no.transport.bind_host = FLAGS_bind;
  no.transport.port = static_cast<uint16_t>(FLAGS_port);
  no.transport.advertise_host = FLAGS_host;
  no.transport.max_message_bytes = MaxFrameBytes(layout->num_params);
  if (!FLAGS_curve_dir.empty()) {
    auto curve = LoadCurveDir(FLAGS_curve_dir);
    if (!curve.ok()) {
      std::cerr << "sieve-server: --curve_dir: " << curve.status().ToString() << "\n";
      return 2;
    }
    no.transport.curve = *curve;
  }
  no.heartbeat_interval_ms = FLAGS_heartbeat_interval_ms;
  no.heartbeat_timeout_ms = FLAGS_heartbeat_timeout_ms;

  std::mutex mu;
  Node* node_ptr = nullptr;
  SignalWatcher signals([&](int signo) {
    std::lock_guard<std::mutex> lock(mu);
    if (node_ptr) node_ptr->RequestStop(std::string("stopped by signal ") + strsignal(signo));
  });
  auto started = Node::Start(no);
  if (!started.ok()) {
    std::cerr << "sieve-server: " << started.status().ToString() << "\n";
    return 1;
  }
  Node& node = **started;
  {
    std::lock_guard<std::mutex> lock(mu);
    node_ptr = &node;
  }
  if (layout->num_params != node.num_params()) {
    std::cerr << "sieve-server: model " << FLAGS_model << " has D = " << layout->num_params
              << " but the job has D = " << node.num_params() << "\n";
    return 2;
  }
  const int rank = node.rank();
  metrics.SetRank(rank);
  ScopedDeadNodesSource dead_source(
      &metrics, [&node] { return static_cast<double>(node.dead_nodes().size()); });
  const ShardRange range = node.shards()[rank];
  std::vector<float> init(range.size());
  if (FLAGS_init_weights.empty()) {
    InitSlice(*layout, FLAGS_seed, range.lo, range.hi, init.data());
  } else if (Status s = ReadWeightsSlice(FLAGS_init_weights, layout->num_params, range.lo, range.hi,
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
            << node.num_workers() << " workers";

  Outbox out;
  std::vector<float> unpacked;
  // The checksum of the slice last sent within one flush (replies to several workers share their
  // buffer; the outbox keeps every buffer alive, so an address names one content until then).
  struct SliceChecksum {
    const ReplyBuffer* buffer = nullptr;
    size_t from = 0, to = 0;
    uint32_t crc = 0;
  } crc_of;
  auto flush = [&] {
    for (Reply& r : out) {
      const int peer = node.WorkerId(r.worker);
      if (r.type == pb::MSG_ERROR) {
        (void)node.SendError(peer, r.code, r.message, r.rejected, r.round);
        continue;
      }
      if (r.type == pb::MSG_JOIN_ACK) {
        pb::Header h;
        h.set_type(pb::MSG_JOIN_ACK);
        h.set_sender(node.id());
        h.set_recipient(peer);
        h.set_shard(rank);
        h.set_round(r.round);
        auto frames = EncodeControl(h);
        if (frames.ok()) (void)node.Send(peer, std::move(frames).value());
        continue;
      }
      // Sends pairs [from, to) of the reply as part `part` of `parts` (1 = unsplit).
      auto send_slice = [&](uint32_t part, uint32_t parts, size_t from, size_t to) {
        pb::Header h;
        h.set_type(r.type);
        h.set_sender(node.id());
        h.set_recipient(peer);
        h.set_shard(rank);
        h.set_round(r.round);
        if (parts > 1) {
          h.set_part(part);
          h.set_parts(parts);
        }
        DataPayload p;
        p.dense = r.dense;
        if (!r.dense) {
          p.indices = std::span<const uint32_t>(r.buffer->indices).subspan(from, to - from);
        }
        p.values = std::as_bytes(std::span<const float>(r.buffer->values).subspan(from, to - from));
        p.keepalive = r.buffer;
        // Every live worker gets the same BSP reply: its checksum is computed once.
        EncodeOptions eo;
        if (crc_of.buffer != r.buffer.get() || crc_of.from != from || crc_of.to != to) {
          crc_of = {r.buffer.get(), from, to, DataChecksum(p)};
        }
        eo.precomputed_checksum = &crc_of.crc;
        auto frames = EncodeData(h, p, eo);
        if (!frames.ok()) {
          LOG(ERROR) << "encode reply: " << frames.status().ToString();
          return false;
        }
        metrics.AddBytes(0, frame_bytes(*frames));
        Status s = node.Send(peer, std::move(frames).value());
        if (!s.ok()) LOG(WARNING) << "reply to worker " << r.worker << ": " << s.ToString();
        return s.ok();
      };
      if (r.parts > 1) {  // a part ShardServer produced
        send_slice(r.part, r.parts, r.begin, r.end);
        continue;
      }
      // A whole sparse UPDATE larger than a part goes out in parts too: the worker decodes one
      // while it writes the previous into its replica.
      const size_t pairs = r.buffer->values.size();
      const uint64_t per = FLAGS_reply_part_pairs;
      uint32_t parts = 1;
      if (r.type == pb::MSG_UPDATE && !r.dense && per > 0 && pairs > per) {
        parts = static_cast<uint32_t>(std::min<uint64_t>((pairs + per - 1) / per, kMaxReplyParts));
      }
      const size_t step = std::max<size_t>(1, (pairs + parts - 1) / parts);
      parts = static_cast<uint32_t>(std::max<size_t>(1, (pairs + step - 1) / step));  // none empty
      for (uint32_t part = 0; part < parts; ++part) {
        if (!send_slice(part, parts, std::min(pairs, part * step),
                        std::min(pairs, (part + 1) * step))) {
          break;
        }
      }
    }
    out.clear();
    crc_of = SliceChecksum{};  // a pooled buffer may come back with other content
  };
  shard.set_part_sink([&flush](Outbox*) { flush(); });

  // Everything below runs on the node's I/O thread (Node::set_on_data and the peer callbacks):
  // a push is answered without waking a second thread, and worker deaths and rejoins are
  // applied in the order the scheduler sent them, between data messages. The gate (shared with
  // the handlers, so it outlives any call still in flight) turns them off at the end of Run;
  // while it is open only the I/O thread touches the shard, `out` and `unpacked`.
  struct HandlerGate {
    std::mutex mu;
    bool serving = true;
  };
  auto gate = std::make_shared<HandlerGate>();
  node.set_on_node_dead([&, gate](const pb::NodeDead& d) {
    if (d.role() != pb::ROLE_WORKER) return;
    std::lock_guard<std::mutex> lock(gate->mu);
    if (!gate->serving) return;
    shard.OnWorkerDead(d.rank(), &out);
    flush();
  });
  node.set_on_node_rejoined([&, gate](const pb::NodeInfo& n) {
    if (n.role() != pb::ROLE_WORKER) return;
    std::lock_guard<std::mutex> lock(gate->mu);
    if (!gate->serving) return;
    LOG(INFO) << "worker " << n.rank() << " was re-admitted; it may join again";
    shard.OnWorkerRejoined(n.rank());
  });
  node.set_on_data([&, gate](Message msg) {
    std::lock_guard<std::mutex> lock(gate->mu);
    if (!gate->serving) return;
    const int sender = msg.header.sender();
    const int worker = node.WorkerRankOf(sender);
    const bool from_worker = worker >= 0 && worker < static_cast<int>(node.num_workers());
    switch (msg.type()) {
      case pb::MSG_JOIN:
        if (!from_worker) {
          (void)node.SendError(sender, pb::ERROR_UNEXPECTED_TYPE, "only workers join", msg.type(),
                               msg.header.round());
        } else {
          shard.OnJoin(worker, msg.header.round(), &out);
        }
        break;
      case pb::MSG_PUSH:
      case pb::MSG_PULL_DENSE: {
        if (!from_worker) {
          (void)node.SendError(sender, pb::ERROR_UNEXPECTED_TYPE, "only workers push or pull",
                               msg.type(), msg.header.round());
          break;
        }
        if (msg.header.shard() != rank) {
          (void)node.SendError(sender, pb::ERROR_WRONG_SHARD,
                               "this is server " + std::to_string(rank) +
                                   ", message is for shard " + std::to_string(msg.header.shard()),
                               msg.type(), msg.header.round());
          break;
        }
        if (msg.type() == pb::MSG_PULL_DENSE) {
          shard.OnPullDense(worker, &out);
          break;
        }
        std::span<const float> values = msg.values;
        if (!msg.values_fp16.empty()) {
          unpacked.resize(msg.values_fp16.size());
          (void)UnpackFp16(msg.values_fp16, unpacked);
          values = unpacked;
        }
        const auto push_start = MetricsClock::now();
        shard.OnPush(worker, msg.header.round(), msg.indices, values, msg.dense(), &out);
        metrics.ObservePushLatency(seconds_since(push_start));
        metrics.AddBytes(frame_bytes(msg.storage), 0);
        metrics.SetRoundsTotal(*consistency == Consistency::kBsp ? shard.stats().rounds_completed
                                                                 : shard.stats().pushes_applied);
        metrics.SetStaleness(shard.stats().max_staleness);
        break;
      }
      case pb::MSG_ERROR:
        LOG(WARNING) << "error from node " << sender << ": " << msg.header.error().message();
        break;
      default:
        (void)node.SendError(
            sender, pb::ERROR_UNEXPECTED_TYPE,
            std::string("a server does not accept ") + std::string(MsgTypeName(msg.type())),
            msg.type(), msg.header.round());
    }
    const bool replies = !out.empty();
    const auto flush_start = MetricsClock::now();
    flush();
    if (replies) metrics.ObserveUpdateLatency(seconds_since(flush_start));
    checkpointer.MaybeWrite(shard);
  });

  // This thread only waits for the end; with --metrics_port it refreshes the auth gauges.
  Status end;
  do {
    end = node.WaitShutdown(FLAGS_metrics_port != 0 ? 1000 : 3600 * 1000);
    metrics.SetAuth(node.auth_accepted(), node.auth_denied());
  } while (end.code() == StatusCode::kDeadlineExceeded);
  node.set_on_data(nullptr);  // from here on no data handler runs
  {
    std::lock_guard<std::mutex> lock(gate->mu);
    gate->serving = false;  // nor a worker-event handler
  }

  const auto w = shard.weights();
  const uint32_t crc =
      static_cast<uint32_t>(crc32(crc32(0, nullptr, 0), reinterpret_cast<const Bytef*>(w.data()),
                                  static_cast<uInt>(w.size_bytes())));
  if (!FLAGS_dump_shard.empty()) {
    std::string path = FLAGS_dump_shard;
    if (const size_t at = path.find("{rank}"); at != std::string::npos)
      path.replace(at, 6, std::to_string(rank));
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(w.data()), static_cast<std::streamsize>(w.size_bytes()));
    if (!f) std::cerr << "sieve-server: cannot write " << path << "\n";
  }
  const auto& st = shard.stats();
  std::printf(
      "sieve-server summary: rank=%d lo=%lu hi=%lu rounds=%lu applied=%lu duplicates=%lu "
      "rejected=%lu "
      "dropped=%lu max_staleness=%d staleness_sum=%lu released=%lu pushed_sum=%.9g checksum=%08x "
      "resync=%lu checkpoints=%lu restored_round=%ld rejoins=%lu auth_accepted=%lu "
      "auth_denied=%lu errors_dropped=%lu\n",
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
      static_cast<unsigned long>(node.errors_dropped()));
  std::fflush(stdout);
  if (!end.ok()) {
    std::cerr << "sieve-server: ended: " << end.ToString() << "\n";
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
      {{"Cluster", {"scheduler", "rank", "port", "bind", "host", "curve_dir"}},
       {"Model", {"model", "num_params", "seed", "init_weights"}},
       {"Consistency", {"consistency", "staleness", "async_scale"}},
       {"Compression", {"server_compressor", "server_density", "reply_part_pairs"}},
       {"Failure handling",
        {"heartbeat_interval_ms", "heartbeat_timeout_ms", "checkpoint_dir", "checkpoint_every",
         "checkpoint_every_s", "restore"}},
       {"Output and metrics", {"dump_shard", "metrics_port"}}}};
  if (auto exit_code = sieve::ParseCommandLine(program, argc, argv)) return *exit_code;
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  return sieve::Run();
}
