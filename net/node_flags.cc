#include "net/node_flags.h"

#include <chrono>

#include "net/address.h"
#include "net/curve.h"

DEFINE_string(scheduler, "127.0.0.1:9310", "Scheduler address HOST:PORT");
DEFINE_int32(rank, -1,
             "Requested rank among this role's nodes (-1 = the scheduler assigns one); a restarted "
             "node gives its old rank to rejoin");
DEFINE_int32(heartbeat_interval_ms, 1000, "Heartbeat period to the scheduler (0 = off)");
DEFINE_int32(heartbeat_timeout_ms, 10000,
             "Fail when the scheduler is silent this long (0 = never)");
DEFINE_string(wire_values, "fp32",
              "Precision of values on the wire: fp32, fp16 or bf16 (round to nearest even). "
              "sieve-worker: its pushed values (the rounding error stays in its error-feedback "
              "residual); sieve-server: the values of its UPDATE and DENSE replies (every "
              "worker's replica is the server's weights rounded to it). Servers always hold and "
              "accumulate the weights in fp32; give it to the whole job (sieve launch routes it "
              "to the servers and the workers)");
DEFINE_string(wire, "v5",
              "Layout of data messages: v5 (compact index frames, Stream VByte gaps or a bitmap "
              "of the range, whichever is smaller) or v4 (raw uint32 indices, the layout before, "
              "kept for comparisons); both are protocol 7 and every node reads both");

namespace sieve {

StatusOr<NodeFlags> ReadNodeFlags(const std::string& role) {
  if (FLAGS_rank < -1) return InvalidArgumentError("--rank must be >= -1");
  std::string sched_host;
  uint16_t sched_port = 0;
  if (Status s = ParseHostPort(FLAGS_scheduler, &sched_host, &sched_port); !s.ok()) {
    return InvalidArgumentError("--scheduler: " + s.message());
  }
  if (FLAGS_heartbeat_interval_ms < 0) {
    return InvalidArgumentError("--heartbeat_interval_ms must be >= 0");
  }
  if (FLAGS_heartbeat_timeout_ms < 0) {
    return InvalidArgumentError("--heartbeat_timeout_ms must be >= 0");
  }
  StatusOr<ValueType> values = ParseValueType(FLAGS_wire_values);
  if (!values.ok()) return InvalidArgumentError("--wire_values: " + values.status().message());
  if (FLAGS_wire != "v5" && FLAGS_wire != "v4") {
    return InvalidArgumentError("--wire must be v5 or v4, got '" + FLAGS_wire + "'");
  }
  NodeFlags f;
  f.wire_values = *values;
  f.compact_indices = FLAGS_wire == "v5";
  SIEVE_ASSIGN_OR_RETURN(static_cast<ListenFlags&>(f),
                         ReadListenFlags(FLAGS_rank >= 0 ? NodeKeyName(role, FLAGS_rank) : ""));
  f.scheduler = FLAGS_scheduler;
  f.rank = FLAGS_rank;
  f.heartbeat_interval = std::chrono::milliseconds(FLAGS_heartbeat_interval_ms);
  f.heartbeat_timeout = std::chrono::milliseconds(FLAGS_heartbeat_timeout_ms);
  return f;
}

}  // namespace sieve
