#include "scheduler/scheduler_flags.h"

#include <chrono>

#include "net/listen_flags.h"
#include "net/transport.h"

DEFINE_uint32(num_workers, 1, "Workers the job waits for before it starts (>= 1)");
DEFINE_uint32(num_servers, 1, "Servers the job waits for before it starts (>= 1)");
DEFINE_uint32(min_workers, 0,
              "Workers that must finish for the job to succeed (0 = all of --num_workers): a job "
              "that ends after fewer finished (the others died) exits 1");
DEFINE_uint64(
    num_params, 0,
    "D, the length of the flat parameter vector; 0 = take it from the workers' registration");
DEFINE_bool(allow_unbound_keys, false,
            "Under --curve_dir with keys bound to nodes (allowed_clients `KEY server R` / `KEY "
            "worker R`, as `sieve keygen --servers --workers` writes them): also admit "
            "allow-listed keys bound to no node (client.key), for ranks bound to no key only. "
            "Off: such a key's REGISTER is refused (ERROR_BAD_REGISTRATION)");
DEFINE_int32(heartbeat_timeout_ms, 10000,
             "A node silent for this long is declared dead and the others are told; 0 disables");
DEFINE_int32(startup_timeout_ms, 600000,
             "Every expected node must register within this, else the job fails");
DEFINE_string(server_failure, "wait",
              "A dead server: wait (for a restart under its rank, up to "
              "--server_restart_timeout_ms) or fail (end the job at once)");
DEFINE_uint32(replication, 0,
              "Backup copies r of every shard (0 = none; needs at least r + 1 servers): shard s is "
              "replicated on servers s+1..s+r, and when its server dies the first live backup "
              "serves it at once, losing no round (docs/architecture.md, \"Replicated shards\")");
DEFINE_int32(server_restart_timeout_ms, 60000,
             "With --server_failure=wait: the job fails if a dead server is not back within this");

DEFINE_string(job_name, "sieve", "The job's name in its status (GET /v1/job, --status_file)");
DEFINE_string(status_file, "",
              "Write the job's status (JSON, docs/protocol.md \"Job status\") to this file, "
              "atomically: at every change of phase, at most every --status_file_interval_ms "
              "while running, and the final status last");
DEFINE_int32(
    status_file_interval_ms, 1000,
    "While the job runs, rewrite --status_file at most this often (the status itself is "
    "rebuilt every 250 ms at most): lower for a harness that acts on it, in [250, 3600000]");
DEFINE_string(termination_message_file, "",
              "Write one line on how the job ended (phase, rounds, loss, test accuracy, failure) "
              "to this file when it ends: a Kubernetes pod's terminationMessagePath");
DEFINE_int32(status_linger_ms, 2000,
             "With --metrics_port: keep serving the final job status (GET /v1/job) this long "
             "after the job ended, so that a `sieve status --watch` sees how it ended");
DEFINE_string(
    port_file, "",
    "Once bound, write the scheduler's HOST:PORT and a newline to this file (atomically): "
    "how a launcher learns the port of --port=0");

namespace sieve {

ProgramInfo SchedulerProgram() {
  return {"sieve-scheduler",
          "the sieve scheduler: admits servers and workers, assigns ranks and shards, runs "
          "barriers, watches heartbeats and ends the job.",
          "sieve-scheduler --num_servers=S --num_workers=W [--num_params=D] [--port=P]",
          {{"Cluster",
            {"num_servers", "num_workers", "num_params", "port", "bind", "host", "curve_dir",
             "curve_key", "allow_unbound_keys"}},
           {"Job identity", {"job_token_file", "job_token"}},
           {"Failure handling",
            {"min_workers", "heartbeat_timeout_ms", "startup_timeout_ms", "replication",
             "server_failure", "server_restart_timeout_ms"}},
           {"Job status",
            {"job_name", "status_file", "status_file_interval_ms", "termination_message_file",
             "port_file", "status_linger_ms"}},
           {"Metrics", {"metrics_port"}}}};
}

StatusOr<SchedulerDaemonOptions> FlagsToSchedulerOptions() {
  auto listen = ReadListenFlags("scheduler.key");
  if (!listen.ok()) return listen.status();
  SchedulerDaemonOptions d;
  SchedulerOptions& opt = d.scheduler;
  opt.num_workers = FLAGS_num_workers;
  opt.min_workers = FLAGS_min_workers;
  opt.num_servers = FLAGS_num_servers;
  opt.num_params = FLAGS_num_params;
  opt.replication = FLAGS_replication;
  opt.transport.bind_host = listen->bind;
  opt.transport.port = listen->port;
  opt.transport.advertise_host = listen->host;
  // The scheduler receives only header-sized messages (REGISTER, HEARTBEAT, BARRIER, FINISHED).
  opt.transport.max_message_bytes = MaxFrameBytes(0);
  opt.transport.curve = listen->curve;
  opt.transport.job = listen->job;
  opt.job_key = listen->job_key;
  opt.allow_unbound_keys = FLAGS_allow_unbound_keys;
  opt.heartbeat_timeout = std::chrono::milliseconds(FLAGS_heartbeat_timeout_ms);
  opt.startup_timeout = std::chrono::milliseconds(FLAGS_startup_timeout_ms);
  if (FLAGS_server_failure != "wait" && FLAGS_server_failure != "fail") {
    return InvalidArgumentError("--server_failure must be wait or fail");
  }
  opt.wait_for_server_restart = FLAGS_server_failure == "wait";
  opt.server_restart_timeout = std::chrono::milliseconds(FLAGS_server_restart_timeout_ms);
  d.metrics.role = "scheduler";
  d.metrics.bind = listen->bind;
  d.metrics.port = listen->metrics_port;
  opt.job_name = FLAGS_job_name;
  d.status_file = FLAGS_status_file;
  if (FLAGS_status_file_interval_ms < 250 || FLAGS_status_file_interval_ms > 3600000) {
    return InvalidArgumentError("--status_file_interval_ms must be in [250, 3600000]");
  }
  d.status_file_interval = std::chrono::milliseconds(FLAGS_status_file_interval_ms);
  d.termination_message_file = FLAGS_termination_message_file;
  d.port_file = FLAGS_port_file;
  if (FLAGS_status_linger_ms < 0 || FLAGS_status_linger_ms > 600000) {
    return InvalidArgumentError("--status_linger_ms must be in [0, 600000]");
  }
  d.status_linger = std::chrono::milliseconds(FLAGS_status_linger_ms);
  return d;
}

}  // namespace sieve
