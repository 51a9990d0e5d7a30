// sieve-server's run, once its flags are options (server/daemon/server_flags.h): serve /healthz, register
// with the scheduler, take the shard's initial weights (seeded, --init_weights or worker 0's
// INIT), restore a checkpoint, serve PUSH and PULL_DENSE on the node's I/O thread until the
// scheduler's SHUTDOWN, then print the `sieve-server summary:` line (see main.cc) and write
// --dump_shard and --trace_out (the timeline of the pushes and replies of --trace_rounds,
// docs/tracing.md; its zero is the start of serving).
//
// Contract: call RunServer once, from main()'s thread, before any other thread is started (it
// installs the SIGINT/SIGTERM stop, daemon/daemon_main.h). Returns the exit code: 0 the job ended
// well; 1 it failed, the node could not start, a checkpoint could not be read or --dump_shard or
// --trace_out not written; 2 the job does not fit the flags (D, the shard's range, --init_weights).
#ifndef SIEVE_SERVER_DAEMON_SERVER_DAEMON_H_
#define SIEVE_SERVER_DAEMON_SERVER_DAEMON_H_

#include "server/daemon/server_flags.h"

namespace sieve {

int RunServer(const ServerDaemonOptions& options);

}  // namespace sieve

#endif  // SIEVE_SERVER_DAEMON_SERVER_DAEMON_H_
