// The cluster flags of a node daemon (sieve-server, sieve-worker), defined once here so that both
// read them the same way: --scheduler, --rank, --heartbeat_interval_ms, --heartbeat_timeout_ms,
// the wire's --wire_values (fp32|fp16|bf16: a worker's pushes, a server's replies) and --wire (v5:
// compact index frames, v4: raw indices), plus the listening flags every daemon shares
// (net/listen_flags.h: --bind, --host, --port, --curve_dir, --metrics_port). A daemon links
// sieve_cluster_flags and lists these names in its --help groups (base/flags.h).
//
// Contract: ReadNodeFlags(role) reads the parsed gflags values and validates them all (rank >= -1,
// --scheduler a HOST:PORT, ports <= 65535, heartbeat periods >= 0, --wire_values a ValueType name
// (ParseValueType), --wire v5 or v4, the CURVE key directory readable); errors are InvalidArgument
// (or the key files' error) naming the flag, a usage error the caller reports and exits 2 on. Call
// it from main()'s thread after the command line is parsed. `role` ("server" or "worker") names
// the node's own key pair under CURVE: without --curve_key, a node with --rank=R uses
// DIR/<role>-<R>.key when the key directory holds it (`sieve keygen --servers=S --workers=W`; in
// Kubernetes the StatefulSet ordinal and the Job completion index are the ranks, so one Secret
// serves every pod), else the shared DIR/client.key.
#ifndef SIEVE_NET_NODE_FLAGS_H_
#define SIEVE_NET_NODE_FLAGS_H_

#include <gflags/gflags.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "net/listen_flags.h"
#include "proto/codec.h"

DECLARE_string(scheduler);
DECLARE_int32(rank);
DECLARE_int32(heartbeat_interval_ms);
DECLARE_int32(heartbeat_timeout_ms);
DECLARE_string(wire_values);
DECLARE_string(wire);

namespace sieve {

// The listening flags (ListenFlags' fields) and the node's own.
struct NodeFlags : ListenFlags {
  std::string scheduler;                               // HOST:PORT
  int rank = -1;                                       // -1 = the scheduler assigns one
  std::chrono::milliseconds heartbeat_interval{1000};  // --heartbeat_interval_ms; 0 disables
  std::chrono::milliseconds heartbeat_timeout{10000};  // --heartbeat_timeout_ms
  ValueType wire_values = ValueType::kFp32;            // --wire_values
  bool compact_indices = true;                         // --wire=v5 (false: v4, raw uint32 indices)
};

StatusOr<NodeFlags> ReadNodeFlags(const std::string& role);

}  // namespace sieve

#endif  // SIEVE_NET_NODE_FLAGS_H_
