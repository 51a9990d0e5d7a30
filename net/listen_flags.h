// The flags every sieve daemon listens by (sieve-scheduler, sieve-server, sieve-worker), defined
// once here: --bind, --host, --port, --curve_dir, --curve_key, --job_token_file, --job_token,
// --metrics_port. A
// daemon links sieve_cluster_flags and lists these names in its --help groups (base/flags.h); node
// daemons read them through ReadNodeFlags (net/node_flags.h).
//
// Contract: SetDefaultPort(p), called before the command line is parsed, makes p --port's default
// (the scheduler's well-known 9310; 0 elsewhere, any free port). ReadListenFlags() validates the
// parsed values (ports <= 65535, the CURVE key directory and the job token file readable, not
// both --job_token and --job_token_file): errors are InvalidArgument
// (or the key files' error) naming the flag, a usage error the caller exits 2 on. Call both from
// main()'s thread.
#ifndef SIEVE_NET_LISTEN_FLAGS_H_
#define SIEVE_NET_LISTEN_FLAGS_H_

#include <gflags/gflags.h>

#include <cstdint>
#include <string>

#include "base/status.h"
#include "net/curve.h"
#include "proto/siphash.h"

DECLARE_string(bind);
DECLARE_string(host);
DECLARE_uint32(port);
DECLARE_string(curve_dir);
DECLARE_string(curve_key);
DECLARE_string(job_token_file);
DECLARE_string(job_token);
DECLARE_uint32(metrics_port);

namespace sieve {

struct ListenFlags {
  std::string bind;           // interface to bind
  std::string host;           // advertised address; empty = detect
  uint16_t port = 0;          // 0 = any free port
  std::string curve_dir;      // empty = no CURVE
  std::string curve_key;      // the client key pair file in use; empty = client.key (or no CURVE)
  CurveOptions curve;         // loaded from curve_dir (enabled only when it is set)
  std::string job_token;      // --job_token, or the content of --job_token_file; empty = none
  uint64_t job = 0;           // JobDigest(job_token): TransportOptions::job
  SipKey job_key;             // JobKey(job_token): the registration proof's key (NodeOptions)
  uint16_t metrics_port = 0;  // 0 = no /metrics endpoint
};

void SetDefaultPort(uint16_t port);

// `default_key_name`: the key pair file in --curve_dir this daemon uses when --curve_key is not
// given and the directory holds it (the scheduler: "scheduler.key"; a server or worker of a known
// rank: NodeKeyName(role, rank), net/node_flags.h); else client.key.
StatusOr<ListenFlags> ReadListenFlags(const std::string& default_key_name = "");

}  // namespace sieve

#endif  // SIEVE_NET_LISTEN_FLAGS_H_
