#include "net/node_flags.h"

#include "net/address.h"

DEFINE_string(scheduler, "127.0.0.1:9310", "Scheduler address HOST:PORT");
DEFINE_int32(rank, -1,
             "Requested rank among this role's nodes (-1 = the scheduler assigns one); a restarted "
             "node gives its old rank to rejoin");
DEFINE_string(bind, "0.0.0.0", "Interface address to bind");
DEFINE_string(host, "",
              "Address advertised to peers (default: first non-loopback IPv4, else 127.0.0.1)");
DEFINE_uint32(port, 0, "TCP port to listen on (0 = any free port)");
DEFINE_string(curve_dir, "",
              "CurveZMQ on every socket with the keys in this directory (server.key, client.key, "
              "allowed_clients; written by `sieve keygen`); empty = no encryption");
DEFINE_int32(heartbeat_interval_ms, 1000, "Heartbeat period to the scheduler (0 = off)");
DEFINE_int32(heartbeat_timeout_ms, 10000,
             "Fail when the scheduler is silent this long (0 = never)");
DEFINE_uint32(metrics_port, 0,
              "Serve Prometheus /metrics and /healthz on this port (on --bind); 0 = off");

namespace sieve {

StatusOr<NodeFlags> ReadNodeFlags() {
  NodeFlags f;
  if (FLAGS_rank < -1) return InvalidArgumentError("--rank must be >= -1");
  std::string sched_host;
  uint16_t sched_port = 0;
  if (Status s = ParseHostPort(FLAGS_scheduler, &sched_host, &sched_port); !s.ok()) {
    return InvalidArgumentError("--scheduler: " + s.message());
  }
  if (FLAGS_port > 65535) return InvalidArgumentError("--port must be in [0, 65535]");
  if (FLAGS_metrics_port > 65535)
    return InvalidArgumentError("--metrics_port must be in [0, 65535]");
  if (FLAGS_heartbeat_interval_ms < 0) {
    return InvalidArgumentError("--heartbeat_interval_ms must be >= 0");
  }
  if (FLAGS_heartbeat_timeout_ms < 0) {
    return InvalidArgumentError("--heartbeat_timeout_ms must be >= 0");
  }
  if (!FLAGS_curve_dir.empty()) {
    auto curve = LoadCurveDir(FLAGS_curve_dir);
    if (!curve.ok())
      return Status(curve.status().code(), "--curve_dir: " + curve.status().message());
    f.curve = *curve;
  }
  f.scheduler = FLAGS_scheduler;
  f.rank = FLAGS_rank;
  f.bind = FLAGS_bind;
  f.host = FLAGS_host;
  f.port = static_cast<uint16_t>(FLAGS_port);
  f.curve_dir = FLAGS_curve_dir;
  f.heartbeat_interval_ms = FLAGS_heartbeat_interval_ms;
  f.heartbeat_timeout_ms = FLAGS_heartbeat_timeout_ms;
  f.metrics_port = static_cast<uint16_t>(FLAGS_metrics_port);
  return f;
}

}  // namespace sieve
