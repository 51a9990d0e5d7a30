#include "server/daemon/server_flags.h"

#include <string>
#include <thread>
#include <utility>

#include "base/thread_team.h"
#include "kernels/compressor.h"
#include "server/shard/consistency.h"
#include "server/shard/initial_weights.h"

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
DEFINE_uint32(backup_workers, 0,
              "BSP: a round closes once all but this many live workers pushed it (backup workers; "
              "0 = wait for every one, < --workers); a late worker skips to the current round");
DEFINE_bool(ordered_rounds, false,
            "BSP: add a round's pushes in worker-rank order once the round closes, not as they "
            "arrive, so that runs with the same seed are bitwise reproducible (also across a "
            "server failover with the scheduler's --replication); costs a copy of each push");
DEFINE_string(late_pushes, "apply",
              "BSP with backup workers, a push of a round that closed without it: apply (merged "
              "into the round being aggregated) or return (refused; the worker puts it back into "
              "its residual)");
DEFINE_string(staleness_lr, "none",
              "ASP/SSP: none, or inverse (a push of staleness tau >= 1 gets scale / tau)");
DEFINE_string(server_compressor, "none",
              "Two-way compression of the BSP aggregate: none|topk|gaussiank");
DEFINE_double(server_density, 0.001,
              "Density rho' of the server-side selection (two-way compression)");
DEFINE_string(dump_shard, "",
              "At the end, write the shard's weights here (raw little-endian float32)");
DEFINE_string(checkpoint_dir, "", "Directory of this shard's checkpoint (empty = no checkpoints)");
DEFINE_uint64(checkpoint_every, 0, "BSP: checkpoint every N completed rounds (0 = off)");
DEFINE_double(checkpoint_every_s, 0, "Checkpoint every S seconds, any consistency (0 = off)");
DEFINE_string(summary_out, "",
              "Write this server's end-of-run summary here as JSON (every field of the "
              "`sieve-server summary:` line and the shards taken over at failover; "
              "docs/protocol.md, \"Run summaries\"); {rank} becomes the rank, {role} becomes "
              "server (one path for servers and workers: DIR/{role}-{rank}.json); empty = none");
DEFINE_string(trace_out, "",
              "Write a timeline of this server's pushes and replies here at the end: Chrome "
              "trace-event JSON for Perfetto / chrome://tracing; {rank} becomes the rank, {role} "
              "becomes server (give servers and workers one path, e.g. DIR/{role}-{rank}.json, "
              "then run `sieve trace merge DIR`; docs/tracing.md); empty = none");
DEFINE_string(trace_rounds, "0:100",
              "Rounds A:B (A to B-1) that --trace_out records, so the file stays small");
DEFINE_string(restore, "auto",
              "Restore the shard from --checkpoint_dir: auto (when rejoining a running job, i.e. "
              "after a restart), always, never");

namespace {

const char* ServerThreadsHelp() {
  static const std::string help =
      "Threads that split each shard's work by index range: a BSP round's merges, update pass "
      "and reply arrays (whole or in parts), dense rounds and two-way compression's residual; "
      "an ASP/SSP push's update pass. Results are bitwise the same for any count; rounds below "
      "16384 pairs per thread stay on the node's I/O thread. 1..256; 0 = what the cores allow "
      "beside the node's I/O thread, max(1, hardware threads - 1) = " +
      std::to_string(sieve::DefaultServerThreads()) + " on this machine";
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

// The shard's options from --consistency, --staleness, ... (all but the registration's).
StatusOr<ShardServerOptions> FlagsToShardOptions() {
  auto consistency = ParseConsistency(FLAGS_consistency);
  if (!consistency.ok()) {
    return InvalidArgumentError("--consistency: " + consistency.status().message());
  }
  auto compressor = ParseCompressor(FLAGS_server_compressor);
  if (!compressor.ok() || (*compressor != Compressor::kNone && *compressor != Compressor::kTopk &&
                           *compressor != Compressor::kGaussiank)) {
    return InvalidArgumentError("--server_compressor must be none, topk or gaussiank");
  }
  if (FLAGS_staleness < 0) return InvalidArgumentError("--staleness must be >= 0");
  auto staleness_lr = ParseStalenessLr(FLAGS_staleness_lr);
  if (!staleness_lr.ok()) {
    return InvalidArgumentError("--staleness_lr: " + staleness_lr.status().message());
  }
  if (*consistency == Consistency::kBsp && *staleness_lr != StalenessLr::kNone) {
    return InvalidArgumentError("--staleness_lr=" + FLAGS_staleness_lr +
                                " needs --consistency=asp or ssp");
  }
  auto late_pushes = ParseLatePushes(FLAGS_late_pushes);
  if (!late_pushes.ok()) {
    return InvalidArgumentError("--late_pushes: " + late_pushes.status().message());
  }
  if (*consistency != Consistency::kBsp && FLAGS_backup_workers > 0) {
    return InvalidArgumentError("--backup_workers=" + std::to_string(FLAGS_backup_workers) +
                                " needs --consistency=bsp");
  }
  if (!(FLAGS_server_density > 0 && FLAGS_server_density <= 1)) {
    return InvalidArgumentError("--server_density must be in (0, 1]");
  }
  if (FLAGS_server_threads > ThreadTeam::kMaxThreads) {
    return InvalidArgumentError("--server_threads must be in 0.." +
                                std::to_string(ThreadTeam::kMaxThreads) +
                                " (0 = " + std::to_string(DefaultServerThreads()) +
                                " on this machine), got " + std::to_string(FLAGS_server_threads));
  }
  ShardServerOptions so;
  so.consistency = *consistency;
  so.staleness = FLAGS_staleness;
  so.async_scale = static_cast<float>(FLAGS_async_scale);
  so.staleness_lr = *staleness_lr;
  so.backup_workers = FLAGS_backup_workers;
  so.late_pushes = *late_pushes;
  if (FLAGS_ordered_rounds && *consistency != Consistency::kBsp) {
    return InvalidArgumentError("--ordered_rounds needs --consistency=bsp");
  }
  so.ordered_rounds = FLAGS_ordered_rounds;
  so.server_compressor = *compressor;
  so.server_density = FLAGS_server_density;
  so.reply_part_pairs = FLAGS_reply_part_pairs;
  so.threads = FLAGS_server_threads == 0 ? DefaultServerThreads() : FLAGS_server_threads;
  return so;
}

// --model, --num_params and --init_weights: the model, the D it expects and the weights file.
Status FlagsToModel(ServerDaemonOptions* o) {
  // Without --model the workers' model defines the job: D comes with the node table.
  o->model = FLAGS_model;
  if (!o->model.empty()) {
    auto made = MakeModelLayout(FLAGS_model, FLAGS_num_params);
    if (!made.ok()) return InvalidArgumentError("--model: " + made.status().ToString());
    o->layout = std::move(*made);
  }
  o->expected_d = o->layout ? o->layout->num_params : FLAGS_num_params;
  o->seed = FLAGS_seed;
  o->init_weights = FLAGS_init_weights;
  if (!o->init_weights.empty() && o->expected_d != 0) {
    if (Status s = CheckWeightsFile(o->init_weights, o->expected_d); !s.ok()) {
      return InvalidArgumentError("--init_weights: " + s.message());
    }
  }
  return Status::Ok();
}

}  // namespace

uint32_t DefaultServerThreads() {
  const unsigned cores = std::thread::hardware_concurrency();
  return cores > 1 ? cores - 1 : 1;
}

ProgramInfo ServerProgram() {
  return {"sieve-server",
          "a sieve parameter server: holds one key-range shard, aggregates pushes (BSP/SSP/ASP) "
          "and answers with sparse updates.",
          "sieve-server --scheduler=HOST:PORT [--consistency=bsp] ...",
          {{"Cluster", {"scheduler", "rank", "port", "bind", "host", "curve_dir", "curve_key"}},
           {"Job identity", {"job_token_file", "job_token"}},
           {"Model", {"model", "num_params", "seed", "init_weights"}},
           {"Consistency",
            {"consistency", "staleness", "async_scale", "staleness_lr", "backup_workers",
             "late_pushes", "ordered_rounds"}},
           {"Compression",
            {"server_compressor", "server_density", "reply_part_pairs", "wire_values",
             "reply_values", "wire"}},
           {"Threads", {"server_threads"}},
           {"Failure handling",
            {"heartbeat_interval_ms", "heartbeat_timeout_ms", "checkpoint_dir", "checkpoint_every",
             "checkpoint_every_s", "restore"}},
           {"Output and metrics",
            {"dump_shard", "summary_out", "trace_out", "trace_rounds", "metrics_port"}}}};
}

StatusOr<ServerDaemonOptions> FlagsToServerOptions() {
  ServerDaemonOptions o;
  auto shard = FlagsToShardOptions();
  if (!shard.ok()) return shard.status();
  o.shard = *shard;
  auto node_flags = ReadNodeFlags("server");
  if (!node_flags.ok()) return node_flags.status();
  o.node = std::move(*node_flags);
  o.reply_values = o.node.wire_values;
  if (!FLAGS_reply_values.empty()) {
    auto parsed = ParseValueType(FLAGS_reply_values);
    if (!parsed.ok()) return InvalidArgumentError("--reply_values: " + parsed.status().message());
    o.reply_values = *parsed;
  }
  if (Status s = FlagsToModel(&o); !s.ok()) return s;
  o.checkpoint = {FLAGS_checkpoint_dir, FLAGS_checkpoint_every, FLAGS_checkpoint_every_s,
                  FLAGS_restore, false};
  o.dump_shard = FLAGS_dump_shard;
  o.trace_out = FLAGS_trace_out;
  o.summary_out = FLAGS_summary_out;
  auto trace_rounds = ParseTraceRounds(FLAGS_trace_rounds);
  if (!trace_rounds.ok()) {
    return InvalidArgumentError("--trace_rounds: " + trace_rounds.status().message());
  }
  o.trace_rounds = *trace_rounds;
  return o;
}

}  // namespace sieve
