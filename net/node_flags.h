// The cluster flags of a node daemon (sieve-server, sieve-worker), defined once here so that both
// read them the same way: --scheduler, --rank, --bind, --host, --port, --curve_dir,
// --heartbeat_interval_ms, --heartbeat_timeout_ms, --metrics_port. A daemon links
// sieve_node_flags and lists these names in its --help groups (base/flags.h).
//
// Contract: ReadNodeFlags() reads the parsed gflags values and validates them all (rank >= -1,
// --scheduler a HOST:PORT, ports <= 65535, heartbeat periods >= 0, the CURVE key directory
// readable); errors are InvalidArgument (or the key files' error) naming the flag, a usage error
// the caller reports and exits 2 on. Call it from main()'s thread after the command line is parsed.
#ifndef SIEVE_NET_NODE_FLAGS_H_
#define SIEVE_NET_NODE_FLAGS_H_

#include <gflags/gflags.h>

#include <cstdint>
#include <string>

#include "base/status.h"
#include "net/curve.h"

DECLARE_string(scheduler);
DECLARE_int32(rank);
DECLARE_string(bind);
DECLARE_string(host);
DECLARE_uint32(port);
DECLARE_string(curve_dir);
DECLARE_int32(heartbeat_interval_ms);
DECLARE_int32(heartbeat_timeout_ms);
DECLARE_uint32(metrics_port);

namespace sieve {

struct NodeFlags {
  std::string scheduler;  // HOST:PORT
  int rank = -1;          // -1 = the scheduler assigns one
  std::string bind;       // interface to bind
  std::string host;       // advertised address; empty = detect
  uint16_t port = 0;      // 0 = any free port
  std::string curve_dir;  // empty = no CURVE
  CurveOptions curve;     // loaded from curve_dir (enabled only when it is set)
  int heartbeat_interval_ms = 1000;
  int heartbeat_timeout_ms = 10000;
  uint16_t metrics_port = 0;  // 0 = no /metrics endpoint
};

StatusOr<NodeFlags> ReadNodeFlags();

}  // namespace sieve

#endif  // SIEVE_NET_NODE_FLAGS_H_
