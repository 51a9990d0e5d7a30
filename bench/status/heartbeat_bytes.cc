// bench_heartbeat_bytes: the encoded size of a HEARTBEAT (what every node sends the scheduler once
// per --heartbeat_interval_ms) without a report, with a worker's typical report, with a worker's
// report carrying 4 metrics, and with a server's report. Prints one line per case; exits 1 when a
// message does not encode. The reports' values are of a long job (round 1e6, 1e9 bytes): protobuf's
// varints make larger values cost more bytes, so these are upper ends of the usual size.
#include <cstdio>
#include <string>

#include "proto/codec.h"
#include "proto/messages.h"

namespace sieve {
namespace {

int Size(const pb::Heartbeat& report, const char* what) {
  pb::Header h = MakeHeader(pb::MSG_HEARTBEAT, 17, kSchedulerId);
  *h.mutable_heartbeat() = report;
  auto frames = EncodeControl(h);
  if (!frames.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, frames.status().ToString().c_str());
    return -1;
  }
  size_t bytes = 0;
  for (const auto& f : *frames) bytes += f.size();
  std::printf("heartbeat %-28s %4zu bytes\n", what, bytes);
  return static_cast<int>(bytes);
}

int Main() {
  pb::Heartbeat none;
  pb::Heartbeat worker;
  pb::WorkerReport* w = worker.mutable_worker();
  w->set_round(1000000);
  w->set_total_rounds(2000000);
  w->set_epoch(50);
  w->set_epochs(100);
  w->set_loss(0.3125f);
  w->set_test_accuracy(0.8851f);
  w->set_bytes_pushed(1000000000);
  w->set_bytes_pulled(3000000000);
  pb::Heartbeat metrics = worker;
  for (const char* name : {"perplexity", "grad_norm", "lr", "tokens_per_second"}) {
    (*metrics.mutable_worker()->mutable_metrics())[name] = 12.345;
  }
  pb::Heartbeat server;
  pb::ServerReport* s = server.mutable_server();
  s->set_rounds(1000000);
  s->set_pushes_applied(64000000);
  s->set_rejected(3);
  s->set_duplicates(12);
  const int sizes[] = {Size(none, "(no report)"), Size(worker, "(a worker's report)"),
                       Size(metrics, "(a worker's, 4 metrics)"),
                       Size(server, "(a server's report)")};
  for (int n : sizes) {
    if (n < 0) return 1;
  }
  std::printf("report bytes per node per heartbeat: worker +%d, server +%d\n", sizes[1] - sizes[0],
              sizes[3] - sizes[0]);
  return 0;
}

}  // namespace
}  // namespace sieve

int main() { return sieve::Main(); }
