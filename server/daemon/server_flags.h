// sieve-server's command line: its flags (defined in server_flags.cc, plus the node flags of
// net/node_flags.h), its --help groups and their conversion to the daemon's options.
//
// Contract: parse the command line (daemon/daemon_main.h's StartDaemon with ServerProgram())
// before FlagsToServerOptions(), both on main()'s thread. FlagsToServerOptions reads the parsed
// flags (and, for --init_weights with a known D, the file's size) and changes nothing; an error is
// a usage error (exit 2) with the message the daemon prints after "sieve-server: ".
#ifndef SIEVE_SERVER_DAEMON_SERVER_FLAGS_H_
#define SIEVE_SERVER_DAEMON_SERVER_FLAGS_H_

#include <gflags/gflags.h>

#include <cstdint>
#include <optional>
#include <string>

#include "base/flags.h"
#include "base/status.h"
#include "kernels/model/model_layout.h"
#include "net/node_flags.h"
#include "proto/codec.h"
#include "server/checkpoint/checkpointer.h"
#include "server/shard/shard_server.h"
#include "trace/trace_rounds.h"

DECLARE_string(model);
DECLARE_uint64(num_params);
DECLARE_uint64(seed);
DECLARE_string(init_weights);
DECLARE_string(consistency);
DECLARE_int32(staleness);
DECLARE_double(async_scale);
DECLARE_string(staleness_lr);
DECLARE_uint32(backup_workers);
DECLARE_string(late_pushes);
DECLARE_string(server_compressor);
DECLARE_double(server_density);
DECLARE_string(dump_shard);
DECLARE_string(checkpoint_dir);
DECLARE_uint64(checkpoint_every);
DECLARE_double(checkpoint_every_s);
DECLARE_string(restore);
DECLARE_uint32(server_threads);
DECLARE_string(reply_values);
DECLARE_uint64(reply_part_pairs);
DECLARE_string(trace_out);
DECLARE_string(summary_out);
DECLARE_string(trace_rounds);

namespace sieve {

// What sieve-server runs with, before it registers (server/daemon/server_daemon.h fills in the rest).
struct ServerDaemonOptions {
  NodeFlags node;                     // the cluster flags
  std::string model;                  // --model; empty = the workers' model (D and weights)
  std::optional<ModelLayout> layout;  // --model's layout: set iff `model` is not empty
  uint64_t expected_d = 0;            // the D the workers must declare; 0 = any
  uint64_t seed = 1;                  // --seed of the seeded init
  std::string init_weights;           // --init_weights; empty = seeded init or worker 0's INIT
  // All but num_workers and await_initial_weights, known once registered; threads resolved
  // (--server_threads=0: DefaultServerThreads()).
  ShardServerOptions shard;
  ValueType reply_values = ValueType::kFp32;  // --reply_values, else --wire_values
  CheckpointerOptions checkpoint;             // all but `rejoining`, known once registered
  std::string dump_shard;                     // --dump_shard ({rank} not yet expanded)
  std::string trace_out;     // --trace_out ({role} and {rank} not yet expanded); empty = none
  TraceRounds trace_rounds;  // --trace_rounds
  std::string summary_out;   // --summary_out ({role} and {rank} not yet expanded); empty = none
};

// --server_threads=0: the cores beside the node's I/O thread, max(1, hardware threads - 1).
uint32_t DefaultServerThreads();

// sieve-server's name, summary, usage and --help groups (base/flags.h).
ProgramInfo ServerProgram();

// The options of the parsed flags. Errors, checked in this order: --consistency,
// --server_compressor, --staleness, --staleness_lr, --late_pushes, --backup_workers (BSP only; its
// bound, < the job's workers, is checked once registered), --server_density, --server_threads,
// the node flags
// (ReadNodeFlags("server")), --reply_values, --model (with --num_params), --init_weights (its
// size against a known D), --trace_rounds.
StatusOr<ServerDaemonOptions> FlagsToServerOptions();

}  // namespace sieve

#endif  // SIEVE_SERVER_DAEMON_SERVER_FLAGS_H_
