// sieve-server: one key-range shard of the flat parameter vector. Registers with the scheduler,
// takes its shard's initial weights (from worker 0's INIT when started without --model; else
// generated from --model/--seed exactly as the workers do, or read from --init_weights), then
// serves PUSH and PULL_DENSE until the scheduler's SHUTDOWN. Ends with its run summary
// (docs/protocol.md, "Run summaries", every field): one line for people,
//   sieve-server summary: rank=R lo=.. hi=.. rounds=.. applied=.. checksum=<crc32 of the
//                         weights> and every other field that is not zero,
// and with --summary_out the same fields as JSON for programs
// (SSP/ASP: mean staleness = staleness_sum / released, the clock lead of each released reply;
// mean push staleness = push_staleness_sum / applied, server/shard/consistency.h's τ; mean pairs per
// UPDATE = reply_pairs / rounds (BSP: the union) or / released (SSP/ASP))
// Flags and their options: server/daemon/server_flags.h; the run: server/daemon/server_daemon.h; start, exit
// codes, signals and metrics: daemon/daemon_main.h.
#include "daemon/daemon_main.h"
#include "server/daemon/server_daemon.h"
#include "server/daemon/server_flags.h"

int main(int argc, char** argv) {
  if (auto code = sieve::StartDaemon(sieve::ServerProgram(), argc, argv)) return *code;
  auto options = sieve::FlagsToServerOptions();
  if (!options.ok()) {
    return sieve::ExitWith(sieve::kExitUsage, "sieve-server", options.status().message());
  }
  return sieve::RunServer(*options);
}
