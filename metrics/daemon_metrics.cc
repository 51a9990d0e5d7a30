#include "metrics/daemon_metrics.h"

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <atomic>
#include <map>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "metrics/http_endpoint.h"

namespace sieve {
namespace {

// Latency buckets from 50 µs to 10 s (sparse rounds on loopback take well under a millisecond;
// a dense round of a large model over a slow network takes seconds).
prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
          0.025,   0.05,   0.1,     0.25,   0.5,   1.0,    2.5,   10.0};
}

// One gauge whose value is read from a callback at every scrape (or a stored value while no
// callback is set). The HTTP thread calls Collect.
class CallbackGauge : public prometheus::Collectable {
 public:
  CallbackGauge(std::string name, std::string help, prometheus::Labels labels)
      : name_(std::move(name)), help_(std::move(help)), labels_(std::move(labels)) {}

  void Set(double v) { value_.store(v); }
  // Replacing a source keeps its last value (so clearing it freezes the series).
  void SetSource(std::function<double()> fn) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    if (source_) value_.store(source_());
    source_ = std::move(fn);
  }

  std::vector<prometheus::MetricFamily> Collect() const override EXCLUDES(mu_) {
    double v = value_.load();
    {
      MutexLock lock(&mu_);
      if (source_) v = source_();
    }
    prometheus::MetricFamily f;
    f.name = name_;
    f.help = help_;
    f.type = prometheus::MetricType::Gauge;
    prometheus::ClientMetric m;
    for (const auto& [k, val] : labels_) m.label.push_back({k, val});
    m.gauge.value = v;
    f.metric.push_back(std::move(m));
    return {std::move(f)};
  }

 private:
  const std::string name_;
  const std::string help_;
  const prometheus::Labels labels_;
  std::atomic<double> value_{0.0};
  mutable Mutex mu_;
  std::function<double()> source_ GUARDED_BY(mu_);
};

}  // namespace

struct DaemonMetrics::Impl {
  explicit Impl(const std::string& role) : labels{{"role", role}} {}

  prometheus::Labels labels;
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::shared_ptr<prometheus::Registry> health = std::make_shared<prometheus::Registry>();
  std::unique_ptr<HttpEndpoint> http;  // last member: stopped first, before what it reads

  prometheus::Family<prometheus::Gauge>* info = nullptr;
  prometheus::Gauge* info_gauge = nullptr;
  prometheus::Counter* rounds = nullptr;
  prometheus::Counter* bytes_in = nullptr;
  prometheus::Counter* bytes_out = nullptr;
  prometheus::Histogram* push_latency = nullptr;
  prometheus::Histogram* update_latency = nullptr;
  prometheus::Gauge* selected_k = nullptr;
  prometheus::Gauge* target_k = nullptr;
  prometheus::Gauge* staleness = nullptr;
  prometheus::Gauge* auth_accepted = nullptr;
  prometheus::Gauge* auth_denied = nullptr;
  std::shared_ptr<CallbackGauge> dead_nodes;

  Mutex rounds_mu;
  uint64_t rounds_seen GUARDED_BY(rounds_mu) = 0;  // SetRoundsTotal's last total
};

StatusOr<std::unique_ptr<DaemonMetrics>> DaemonMetrics::Start(const DaemonMetricsOptions& options) {
  if (options.port > 65535) return InvalidArgumentError("--metrics_port must be in [0, 65535]");
  if (options.role.empty()) return InvalidArgumentError("metrics need a role");
  if (options.port == 0) return std::unique_ptr<DaemonMetrics>(new DaemonMetrics(nullptr));

  auto impl = std::make_unique<Impl>(options.role);
  prometheus::Registry& r = *impl->registry;
  const prometheus::Labels& l = impl->labels;
  impl->info = &prometheus::BuildGauge()
                    .Name("sieve_info")
                    .Help("Constant 1; labels name the daemon's role and rank")
                    .Register(r);
  impl->info_gauge = &impl->info->Add(l);
  impl->info_gauge->Set(1);
  auto counter = [&](const char* name, const char* help) {
    return &prometheus::BuildCounter().Name(name).Help(help).Register(r).Add(l);
  };
  auto gauge = [&](const char* name, const char* help) {
    return &prometheus::BuildGauge().Name(name).Help(help).Register(r).Add(l);
  };
  auto histogram = [&](const char* name, const char* help) {
    return &prometheus::BuildHistogram().Name(name).Help(help).Register(r).Add(l, LatencyBuckets());
  };
  impl->rounds = counter("sieve_rounds_total",
                         "Training rounds finished (server: BSP rounds closed, else pushes)");
  impl->bytes_in =
      counter("sieve_bytes_received_total", "Payload bytes received (indices, values, headers)");
  impl->bytes_out =
      counter("sieve_bytes_sent_total", "Payload bytes sent (indices, values, headers)");
  impl->push_latency = histogram("sieve_push_latency_seconds",
                                 "Worker: split and send one round's pushes; server: handle one");
  impl->update_latency = histogram("sieve_update_latency_seconds",
                                   "Worker: wait for a round's updates; server: send replies");
  impl->selected_k = gauge("sieve_selected_k", "Pairs the worker selected in its last round");
  impl->target_k = gauge("sieve_target_k", "k = round(density * D) of the worker's current epoch");
  impl->staleness =
      gauge("sieve_staleness_max", "Largest clock lead (rounds) an SSP server released so far");
  impl->auth_accepted =
      gauge("sieve_auth_accepted", "CurveZMQ handshakes the allow-list accepted so far");
  impl->auth_denied =
      gauge("sieve_auth_denied", "CurveZMQ handshakes the allow-list refused so far");
  impl->dead_nodes =
      std::make_shared<CallbackGauge>("sieve_dead_nodes", "Nodes declared dead in this job", l);
  prometheus::BuildGauge()
      .Name("sieve_healthy")
      .Help("1 while the daemon runs")
      .Register(*impl->health)
      .Add(l)
      .Set(1);

  Impl* raw = impl.get();
  auto serve = [](std::vector<prometheus::MetricFamily> families) {
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = prometheus::TextSerializer().Serialize(families);
    return r;
  };
  std::map<std::string, HttpEndpoint::Handler> handlers;
  handlers["/metrics"] = [raw, serve, more = options.more_series] {
    std::vector<prometheus::MetricFamily> families = raw->registry->Collect();
    for (auto& f : raw->dead_nodes->Collect()) families.push_back(std::move(f));
    HttpResponse r = serve(std::move(families));
    if (more) r.body += more();
    return r;
  };
  for (const auto& [path, handler] : options.more_paths) handlers[path] = handler;
  handlers["/healthz"] = [raw, serve] { return serve(raw->health->Collect()); };
  auto http =
      HttpEndpoint::Start(options.bind, static_cast<uint16_t>(options.port), std::move(handlers));
  if (!http.ok()) return http.status();
  impl->http = std::move(http).value();
  return std::unique_ptr<DaemonMetrics>(new DaemonMetrics(std::move(impl)));
}

DaemonMetrics::DaemonMetrics(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

DaemonMetrics::~DaemonMetrics() {
  if (impl_) impl_->http.reset();  // no scrape may run while the series go away
}

void DaemonMetrics::SetRank(int rank) {
  if (!impl_) return;
  prometheus::Labels l = impl_->labels;
  l["rank"] = std::to_string(rank);
  impl_->info->Remove(impl_->info_gauge);
  impl_->info_gauge = &impl_->info->Add(l);
  impl_->info_gauge->Set(1);
}

void DaemonMetrics::AddRounds(uint64_t n) {
  if (impl_) impl_->rounds->Increment(static_cast<double>(n));
}

void DaemonMetrics::SetRoundsTotal(uint64_t total) {
  if (!impl_) return;
  MutexLock lock(&impl_->rounds_mu);
  if (total <= impl_->rounds_seen) return;
  impl_->rounds->Increment(static_cast<double>(total - impl_->rounds_seen));
  impl_->rounds_seen = total;
}

void DaemonMetrics::AddBytes(uint64_t received, uint64_t sent) {
  if (!impl_) return;
  impl_->bytes_in->Increment(static_cast<double>(received));
  impl_->bytes_out->Increment(static_cast<double>(sent));
}

void DaemonMetrics::ObservePushLatency(double seconds) {
  if (impl_) impl_->push_latency->Observe(seconds);
}

void DaemonMetrics::ObserveUpdateLatency(double seconds) {
  if (impl_) impl_->update_latency->Observe(seconds);
}

void DaemonMetrics::SetSelectedK(uint64_t selected, uint64_t target_k) {
  if (!impl_) return;
  impl_->selected_k->Set(static_cast<double>(selected));
  impl_->target_k->Set(static_cast<double>(target_k));
}

void DaemonMetrics::SetStaleness(double max_staleness) {
  if (impl_) impl_->staleness->Set(max_staleness);
}

void DaemonMetrics::SetDeadNodes(uint64_t n) {
  if (impl_) impl_->dead_nodes->Set(static_cast<double>(n));
}

void DaemonMetrics::SetAuth(uint64_t accepted, uint64_t denied) {
  if (!impl_) return;
  impl_->auth_accepted->Set(static_cast<double>(accepted));
  impl_->auth_denied->Set(static_cast<double>(denied));
}

void DaemonMetrics::SetDeadNodesSource(std::function<double()> fn) {
  if (impl_) impl_->dead_nodes->SetSource(std::move(fn));
}

}  // namespace sieve
