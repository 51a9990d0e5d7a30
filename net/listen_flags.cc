#include "net/listen_flags.h"

#include <filesystem>
#include <string>

#include "proto/job_identity.h"
#include "proto/register_proof.h"

DEFINE_string(bind, "0.0.0.0", "Interface address to bind");
DEFINE_string(host, "",
              "Address advertised to peers (default: first non-loopback IPv4, else 127.0.0.1)");
DEFINE_uint32(port, 0, "TCP port to listen on (0 = any free port, printed at start-up)");
DEFINE_string(curve_dir, "",
              "CurveZMQ on every socket with the keys in this directory (server.key, client.key, "
              "allowed_clients; written by `sieve keygen`); empty = no encryption");
DEFINE_string(curve_key, "",
              "This daemon's own client key pair file; empty = its own in --curve_dir when the "
              "directory has one (the scheduler: scheduler.key; a server or worker with "
              "--rank=R: server-R.key / worker-R.key from `sieve keygen --servers --workers`), "
              "else client.key. Each node's key is bound to its node id when it registers");
DEFINE_string(job_token_file, "",
              "File holding this job's token (one line): every message carries its digest and "
              "messages of other tokens are dropped; all daemons of a job need the same token. "
              "Empty (and no --job_token) = no token: one job per network");
DEFINE_string(job_token, "",
              "The job token itself (visible in the process list; prefer --job_token_file). "
              "`sieve launch` sets a random one per job unless either flag is given");
DEFINE_uint32(metrics_port, 0,
              "Serve Prometheus /metrics and /healthz on this port (on --bind); 0 = off");

namespace sieve {

void SetDefaultPort(uint16_t port) {
  gflags::SetCommandLineOptionWithMode("port", std::to_string(port).c_str(),
                                       gflags::SET_FLAGS_DEFAULT);
}

StatusOr<ListenFlags> ReadListenFlags(const std::string& default_key_name) {
  if (FLAGS_port > 65535) return InvalidArgumentError("--port must be in [0, 65535]");
  if (FLAGS_metrics_port > 65535) {
    return InvalidArgumentError("--metrics_port must be in [0, 65535]");
  }
  ListenFlags f;
  if (FLAGS_curve_dir.empty() && !FLAGS_curve_key.empty()) {
    return InvalidArgumentError("--curve_key needs --curve_dir");
  }
  if (!FLAGS_curve_dir.empty()) {
    std::string key = FLAGS_curve_key;
    if (key.empty() && !default_key_name.empty() &&
        std::filesystem::exists(FLAGS_curve_dir + "/" + default_key_name)) {
      key = FLAGS_curve_dir + "/" + default_key_name;
    }
    auto curve = LoadCurveDir(FLAGS_curve_dir, key);
    if (!curve.ok()) {
      // Name the flag that named the file at fault: a bad key pair given with --curve_key is
      // that flag's error, everything else the directory's.
      const std::string msg = curve.status().message();
      const bool key_file =
          !FLAGS_curve_key.empty() && msg.find(FLAGS_curve_key) != std::string::npos;
      return Status(curve.status().code(), (key_file ? "--curve_key: " : "--curve_dir: ") + msg);
    }
    f.curve = *curve;
    f.curve_key = key;
  }
  if (!FLAGS_job_token.empty() && !FLAGS_job_token_file.empty()) {
    return InvalidArgumentError("--job_token and --job_token_file: give one of them");
  }
  f.job_token = FLAGS_job_token;
  if (!FLAGS_job_token_file.empty()) {
    auto token = ReadJobTokenFile(FLAGS_job_token_file);
    if (!token.ok()) {
      return Status(token.status().code(), "--job_token_file: " + token.status().message());
    }
    f.job_token = *token;
  }
  f.job = JobDigest(f.job_token);
  f.job_key = JobKey(f.job_token);
  f.bind = FLAGS_bind;
  f.host = FLAGS_host;
  f.port = static_cast<uint16_t>(FLAGS_port);
  f.curve_dir = FLAGS_curve_dir;
  f.metrics_port = static_cast<uint16_t>(FLAGS_metrics_port);
  return f;
}

}  // namespace sieve
