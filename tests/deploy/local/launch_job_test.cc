// `sieve launch` with the real daemons of the build tree (a --model=synthetic job, no data set):
// --min_workers under the launcher (a worker killed with SIGKILL mid-job, no restarts), the job's
// result line, and --metrics_port giving each daemon its own /healthz.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <random>

#include "tests/deploy/local/launch_fixture.h"

namespace sieve {
namespace {

const std::vector<std::string> kJobFlags = {
    "--model=synthetic",          "--num_params=20000", "--rounds_per_epoch=100",
    "--compressor=topk",          "--density=0.01",     "--heartbeat_interval_ms=200",
    "--heartbeat_timeout_ms=5000"};

class LaunchJob : public LauncherIntegration {
 protected:
  // Runs a 4-worker synthetic BSP job with `extra` daemon flags into *r and kills worker 1 mid-job
  // (LauncherIntegration::RunKillingWorker1).
  void RunKillingWorker1(const std::vector<std::string>& extra, RunResult* r) {
    std::vector<std::string> args = {
        "launch", "--num_servers=1", "--num_workers=4", "--progress=off", "--", "--epochs=100"};
    args.insert(args.end(), kJobFlags.begin(), kJobFlags.end());
    args.insert(args.end(), extra.begin(), extra.end());
    LauncherIntegration::RunKillingWorker1(args, std::chrono::seconds(240), r);
  }
};

TEST_F(LaunchJob, MinWorkersAcceptsAWorkerKilledMidJob) {
  RunResult r;
  ASSERT_NO_FATAL_FAILURE(RunKillingWorker1({"--min_workers=3"}, &r));
  EXPECT_EQ(ExitCode(r), 0) << r.output;
  EXPECT_NE(r.output.find("sieve launch: lost worker 1 (killed by signal 9"), std::string::npos)
      << r.output;
  EXPECT_EQ(WorkerSummaries(4), 3) << r.output;
  const std::string last = LastLine(r.output);
  EXPECT_EQ(last.rfind("sieve launch: job finished: rounds=10000 time=", 0), 0) << r.output;
  EXPECT_NE(last.find(" pushed="), std::string::npos) << last;
  EXPECT_NE(last.find(" workers=3/4; lost worker 1 (killed by signal 9 (Killed))"),
            std::string::npos)
      << last;
}

TEST_F(LaunchJob, WithoutMinWorkersTheSameKillFailsTheJob) {
  RunResult r;
  ASSERT_NO_FATAL_FAILURE(RunKillingWorker1({}, &r));
  EXPECT_EQ(ExitCode(r), 1) << r.output;
  EXPECT_EQ(LastLine(r.output).rfind("sieve launch: job FAILED: worker 1 (pid ", 0), 0) << r.output;
  EXPECT_EQ(r.output.find("lost worker"), std::string::npos) << r.output;
}

// The launcher's progress and result come from the job's data (the port file, the status file),
// never from the daemons' logs: with every daemon's glog silenced (--minloglevel=3) it still
// prints its progress lines and the job's result, and no daemon log line reaches the output.
TEST_F(LaunchJob, ProgressAndResultWithoutTheDaemonsLogs) {
  std::vector<std::string> args = {
      "launch", "--num_servers=1", "--num_workers=2",        "--progress=lines",
      "--",     "--epochs=12",     "--straggler=delay:10ms", "--minloglevel=3"};
  args.insert(args.end(), kJobFlags.begin(), kJobFlags.end());
  RunResult r = RunSieve(args, {}, {}, std::chrono::seconds(120));
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(ExitCode(r), 0) << r.output;
  // At least 12 s of training: the 10-second progress line came.
  EXPECT_GE(CountOf(r.output, "sieve launch: epoch "), 1) << r.output;
  EXPECT_EQ(LastLine(r.output).rfind("sieve launch: job finished: rounds=1200 time=", 0), 0)
      << r.output;
  EXPECT_NE(LastLine(r.output).find(" workers=2/2"), std::string::npos) << r.output;
  // glog's line format: severity letter, then the date (e.g. "[worker 0] I20261207 ...").
  for (const char* prefix : {"[scheduler] ", "[server 0] ", "[worker 0] ", "[worker 1] "}) {
    for (const char* severity : {"I2", "W2", "E2"}) {
      EXPECT_EQ(r.output.find(std::string(prefix) + severity), std::string::npos)
          << prefix << severity << " in\n"
          << r.output;
    }
  }
}

// A worker command started from the environment alone (env_worker.sh runs sieve-worker with
// the SIEVE_* variables as its flags) trains the job, CURVE keys and a routed worker flag
// included: the environment carries everything a worker needs.
TEST_F(LaunchJob, WorkerCommandStartedFromTheEnvironmentAloneTrains) {
  const std::string keys = (root_ / "keys").string();
  RunResult keygen = RunSieve({"keygen", "--out=" + keys, "--servers=1", "--workers=2"});
  ASSERT_EQ(ExitCode(keygen), 0) << keygen.output;
  for (const bool curve : {false, true}) {
    std::vector<std::string> args = {"launch",
                                     "--num_workers=2",
                                     "--progress=off",
                                     std::string("--worker_cmd=") + ENV_WORKER_CMD,
                                     "--",
                                     "--epochs=2",
                                     "--straggler=1:x2",
                                     "--summary_out=" + (root_ / "{role}-{rank}.json").string()};
    args.insert(args.end(), kJobFlags.begin(), kJobFlags.end());
    if (curve) args.push_back("--curve_dir=" + keys);
    RunResult r = RunSieve(args, {std::string("SIEVE_WORKER_BIN=") + SIEVE_WORKER_BINARY}, {},
                           std::chrono::seconds(120));
    ASSERT_FALSE(r.timed_out) << r.output;
    EXPECT_EQ(ExitCode(r), 0) << "curve " << curve << "\n" << r.output;
    // Worker 1's routed flag, as its summary reports it.
    EXPECT_EQ(testing::ReadSummaryFile((root_ / "worker-1.json").string())["straggler"], "x2")
        << r.output;
    EXPECT_EQ(LastLine(r.output).rfind("sieve launch: job finished: rounds=200 time=", 0), 0)
        << r.output;
    EXPECT_NE(LastLine(r.output).find(" workers=2/2"), std::string::npos) << r.output;
    // Under CURVE the server accepted the workers' handshakes (their keys from SIEVE_CURVE_KEY).
    const testing::KeyValues summary = testing::ReadSummaryFile((root_ / "server-0.json").string());
    ASSERT_FALSE(summary.empty()) << r.output;
    EXPECT_EQ(summary.at("auth_accepted") == "0", !curve) << r.output;
    EXPECT_EQ(summary.at("auth_denied"), "0") << r.output;
  }
}

// The HTTP status line and body of GET `path` on 127.0.0.1:`port`, or "" when nothing answers
// within `limit` (a bound on a hang only).
std::string HttpGet(int port, const std::string& path, std::chrono::seconds limit) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string reply;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request = "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      const auto deadline = Clock::now() + limit;
      char buf[4096];
      for (;;) {
        auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        pollfd p{fd, POLLIN, 0};
        if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0) break;
        const ssize_t n = read(fd, buf, sizeof(buf));
        if (n <= 0) break;
        reply.append(buf, static_cast<size_t>(n));
      }
    }
  }
  close(fd);
  return reply;
}

// Whether nothing listens on 127.0.0.1:`port` (it can be bound).
bool PortFree(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool free = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return free;
}

TEST_F(LaunchJob, MetricsPortGivesEachDaemonItsOwnHealthz) {
  constexpr int kDaemons = 1 + 1 + 2;
  std::mt19937 rng(static_cast<unsigned>(getpid()));
  int base = 0;
  for (int attempt = 0; attempt < 100 && base == 0; ++attempt) {
    const int candidate = 20000 + static_cast<int>(rng() % 30000);
    bool all = true;
    for (int i = 0; i < kDaemons; ++i) all = all && PortFree(candidate + i);
    if (all) base = candidate;
  }
  ASSERT_NE(base, 0);
  std::vector<std::string> args = {"launch",
                                   "--num_servers=1",
                                   "--num_workers=2",
                                   "--progress=off",
                                   "--metrics_port=" + std::to_string(base),
                                   "--",
                                   "--epochs=100000"};
  args.insert(args.end(), kJobFlags.begin(), kJobFlags.end());
  std::vector<std::string> replies;
  RunResult r = RunSieve(
      args, {},
      [&](pid_t launcher, const std::string& output) {
        if (!replies.empty() || output.find("[worker 0] progress: ") == std::string::npos ||
            output.find("[worker 1] progress: ") == std::string::npos) {
          return;
        }
        // Every daemon runs (both workers train): ask each port once, then end the job.
        for (int i = 0; i < kDaemons; ++i) {
          replies.push_back(HttpGet(base + i, "/healthz", std::chrono::seconds(10)));
        }
        kill(launcher, SIGTERM);
      },
      std::chrono::seconds(120));
  ASSERT_FALSE(r.timed_out) << r.output;
  const std::string b = std::to_string(base);
  EXPECT_NE(r.output.find("sieve launch: metrics on scheduler :" + b + ", server 0 :" +
                          std::to_string(base + 1) + ", worker 0 :" + std::to_string(base + 2) +
                          ", worker 1 :" + std::to_string(base + 3) + "\n"),
            std::string::npos)
      << r.output;
  ASSERT_EQ(replies.size(), static_cast<size_t>(kDaemons)) << r.output;
  for (int i = 0; i < kDaemons; ++i) {
    EXPECT_EQ(replies[i].rfind("HTTP/1.", 0), 0u) << "port " << base + i << ": " << replies[i];
    EXPECT_NE(replies[i].find(" 200 "), std::string::npos) << base + i << ": " << replies[i];
    EXPECT_NE(replies[i].find("sieve_healthy 1"), std::string::npos) << replies[i];
  }
  EXPECT_EQ(ExitCode(r), 143) << r.output;  // ended by the test
}

}  // namespace
}  // namespace sieve
