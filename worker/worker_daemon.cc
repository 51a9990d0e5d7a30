#include "worker/worker_daemon.h"

#include <cblas.h>
#include <glog/logging.h>
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "daemon/daemon_main.h"
#include "metrics/daemon_metrics.h"
#include "worker/client/ps_client.h"
#include "worker/trainer/summary.h"
#include "worker/trainer/trainer.h"

namespace sieve {
namespace {

constexpr char kName[] = "sieve-worker";

PsClientOptions ToClientOptions(const WorkerDaemonOptions& o) {
  const NodeFlags& nf = o.node;
  PsClientOptions copt;
  copt.rank = nf.rank;
  copt.scheduler = nf.scheduler;
  copt.bind_host = nf.bind;
  copt.port = nf.port;
  copt.advertise_host = nf.host;
  copt.curve_dir = nf.curve_dir;  // its keys were checked by ReadNodeFlags
  copt.curve_key = nf.curve_key;
  copt.job_token = nf.job_token;   // and the token file
  copt.num_params = o.num_params;  // max_message_bytes: the default, 4·D + 1 MiB
  copt.heartbeat_interval = nf.heartbeat_interval;
  copt.heartbeat_timeout = nf.heartbeat_timeout;
  // The trainer rounds the selected values to this precision, keeping the error in the residual.
  copt.push_values = o.push_values;
  copt.compact_indices = nf.compact_indices;
  copt.checksum = o.checksum;
  return copt;
}

// Each finished round updates the metrics endpoint.
void ReportRounds(DaemonMetrics* m, const PsClient* c, TrainerOptions* o) {
  o->on_round = [m, c](uint64_t, uint64_t k, uint64_t selected, const RoundStats& stats) {
    m->AddRounds(1);
    m->AddBytes(stats.bytes_down, stats.bytes_up);
    m->ObservePushLatency(stats.push_seconds);
    m->ObserveUpdateLatency(stats.wait_seconds);
    m->SetSelectedK(selected, k);
    m->SetDeadNodes(c->dead_nodes());
  };
}

// Trains and prints the summary line: the exit code so far (0 or 1).
int Train(const WorkerDaemonOptions& o, PsClient& c) {
  auto trainer = Trainer::Create(o.trainer, o.device, &c);
  if (!trainer.ok()) return ExitWith(kExitFailure, kName, trainer.status().ToString());
  auto summary = (*trainer)->Run();
  if (!summary.ok()) {
    return ExitWith(kExitFailure, kName, "training failed: " + summary.status().ToString());
  }
  PrintSummaryLine(FormatSummaryLine(*summary));
  if (!o.summary_out.empty()) {
    const Status written =
        WriteSummaryFile(o.summary_out, "worker", summary->rank, WorkerSummaryRecord(*summary));
    if (!written.ok()) return ExitWith(kExitFailure, kName, written.ToString());
  }
  if (summary->near_chance()) {
    std::fprintf(stderr,
                 "sieve-worker: warning: test accuracy %.4f is near chance (0.10 for 10 "
                 "classes): the model did not learn. Try a smaller --lr (now %g) or more "
                 "epochs.\n",
                 *summary->test_acc, o.trainer.lr);
  }
  return kExitSuccess;
}

// After training: finish and wait for the scheduler's shutdown, or stop the job on a failure.
int EndJob(const WorkerDaemonOptions& o, PsClient& c, int code) {
  if (code != kExitSuccess) {
    c.RequestStop("training failed");
    return code;
  }
  Status s = c.Finish();
  if (s.ok()) s = c.WaitShutdown(o.shutdown_timeout);
  if (!s.ok()) return ExitWith(kExitFailure, kName, "job did not end cleanly: " + s.ToString());
  return kExitSuccess;
}

}  // namespace

int RunWorker(WorkerDaemonOptions options) {
  openblas_set_num_threads(options.blas_threads);
  omp_set_num_threads(options.kernel_threads);
  StopOnSignal signals([](int signo, const std::string& reason) {
    std::fprintf(stderr, "sieve-worker: %s before joining the job\n", reason.c_str());
    std::_Exit(128 + signo);
  });
  // Serving /healthz before joining lets the Kubernetes probes pass while the job forms.
  auto metrics = StartMetrics(kName, {"worker", options.node.bind, options.node.metrics_port});
  if (metrics == nullptr) return kExitFailure;
  auto client = PsClient::Connect(ToClientOptions(options));
  if (!client.ok()) {
    return ExitWith(kExitFailure, kName, "cannot join the job: " + client.status().ToString());
  }
  PsClient& c = **client;
  signals.SetTarget([&c](const std::string& reason) { c.RequestStop(reason); });
  metrics->SetRank(c.rank());
  ReportRounds(metrics.get(), &c, &options.trainer);
  LOG(INFO) << "worker " << c.rank() << " of " << c.num_workers() << ", " << c.num_servers()
            << " servers, D = " << c.num_params() << ", model " << options.trainer.model
            << ", compressor " << CompressorName(options.trainer.compressor) << ", device "
            << DeviceName(options.device) << ", wire "
            << (options.node.compact_indices ? "v5" : "v4") << " "
            << ValueTypeName(options.push_values);
  const int code = EndJob(options, c, Train(options, c));
  signals.SetTarget(nullptr);
  client->reset();
  return code;
}

}  // namespace sieve
