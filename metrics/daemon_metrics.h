// DaemonMetrics: the Prometheus endpoint of a sieve daemon (flag --metrics_port of
// sieve-scheduler, sieve-server and sieve-worker). It serves, on one HTTP port:
//   /metrics  Prometheus text format (version 0.0.4) with the series below;
//   /healthz  HTTP 200 and `sieve_healthy 1` while the process runs (the Kubernetes probes).
// Served by HttpEndpoint (metrics/http_endpoint.h) on its own thread.
// Series (every one carries the constant label role="scheduler|server|worker"):
//   sieve_info{role}                      gauge 1 (plus label rank once known)
//   sieve_rounds_total                    worker: rounds finished; server: BSP rounds closed
//                                         (ASP/SSP: pushes applied)
//   sieve_bytes_received_total            payload bytes received (worker: UPDATEs; server: PUSHes)
//   sieve_bytes_sent_total                payload bytes sent (worker: PUSHes; server: UPDATEs)
//   sieve_push_latency_seconds            histogram; worker: split + send of one round's PUSHes;
//                                         server: handling one PUSH (aggregate / apply)
//   sieve_update_latency_seconds          histogram; worker: wait for and apply one round's
//                                         UPDATEs; server: encode and send the replies to a PUSH
//   sieve_selected_k                      worker: pairs selected in the last round
//   sieve_target_k                        worker: k of the current density
//   sieve_staleness_max                   server: largest SSP lead released so far
//   sieve_dead_nodes                      nodes declared dead (scheduler: by itself; others: as
//                                         told by the scheduler)
//   sieve_auth_accepted, sieve_auth_denied  CurveZMQ handshakes of the receive socket accepted /
//                                         refused by the ZAP allow-list so far (0 without CURVE)
// plus the daemon's own (DaemonMetricsOptions::more_paths, more_series): the scheduler serves
// /v1/job and the sieve_job_* series (proto/job_status_text.h).
//
// Disabled (port 0): Start returns an object whose methods do nothing and nothing listens, so
// the daemons call it unconditionally. Thread-safety: every method may be called from any
// thread; gauge callbacks run on the HTTP server's threads and must be thread-safe themselves.
#ifndef SIEVE_METRICS_DAEMON_METRICS_H_
#define SIEVE_METRICS_DAEMON_METRICS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "base/status.h"
#include "metrics/http_endpoint.h"

namespace sieve {

struct DaemonMetricsOptions {
  std::string role;              // "scheduler", "server" or "worker"
  std::string bind = "0.0.0.0";  // interface the HTTP server listens on
  uint32_t port = 0;             // 0 = metrics disabled
  // A daemon's own: more paths (the scheduler's /v1/job), and text in the Prometheus format
  // appended to /metrics (the scheduler's job series). Both run on the HTTP thread: thread-safe.
  std::map<std::string, HttpEndpoint::Handler> more_paths{};
  std::function<std::string()> more_series{};
};

class DaemonMetrics {
 public:
  // Starts the HTTP server. Errors: InvalidArgument (port > 65535, empty role), Unavailable
  // (the address cannot be bound).
  static StatusOr<std::unique_ptr<DaemonMetrics>> Start(const DaemonMetricsOptions& options);
  ~DaemonMetrics();
  DaemonMetrics(const DaemonMetrics&) = delete;
  DaemonMetrics& operator=(const DaemonMetrics&) = delete;

  bool enabled() const { return impl_ != nullptr; }

  // Adds the rank label to sieve_info once the scheduler has assigned one.
  void SetRank(int rank);
  void AddRounds(uint64_t n);
  // Raises sieve_rounds_total to `total` (monotonic source counters; lower values are ignored).
  void SetRoundsTotal(uint64_t total);
  void AddBytes(uint64_t received, uint64_t sent);
  void ObservePushLatency(double seconds);
  void ObserveUpdateLatency(double seconds);
  void SetSelectedK(uint64_t selected, uint64_t target_k);
  void SetStaleness(double max_staleness);
  void SetDeadNodes(uint64_t n);
  // CurveZMQ handshake totals (Node::auth_accepted / auth_denied).
  void SetAuth(uint64_t accepted, uint64_t denied);
  // sieve_dead_nodes is read from `fn` at every scrape instead (fn must be thread-safe); an
  // empty fn keeps the last value read. See ScopedDeadNodesSource.
  void SetDeadNodesSource(std::function<double()> fn);

 private:
  struct Impl;
  explicit DaemonMetrics(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Sets `metrics`' dead-nodes source for its own lifetime: declare it after the object that `fn`
// reads, so the source is gone before that object is.
class ScopedDeadNodesSource {
 public:
  ScopedDeadNodesSource(DaemonMetrics* metrics, std::function<double()> fn) : metrics_(metrics) {
    metrics_->SetDeadNodesSource(std::move(fn));
  }
  ~ScopedDeadNodesSource() { metrics_->SetDeadNodesSource(nullptr); }
  ScopedDeadNodesSource(const ScopedDeadNodesSource&) = delete;
  ScopedDeadNodesSource& operator=(const ScopedDeadNodesSource&) = delete;

 private:
  DaemonMetrics* metrics_;
};

}  // namespace sieve

#endif  // SIEVE_METRICS_DAEMON_METRICS_H_
