// `sieve launch --max_restarts` with the real daemons of the build tree (no stand-ins): a job of
// --model=synthetic (no data set) in which the test kills worker 1 with SIGKILL mid-run. With one
// restart allowed the launcher restarts it under its rank, it rejoins, and the job ends with exit
// 0; with none the job fails.
#include <dirent.h>

#include <cstdio>

#include "tests/launcher/launch_fixture.h"

namespace sieve {
namespace {

// The pid of the launcher's child running sieve-worker with --rank=`rank`, or -1.
pid_t WorkerPid(pid_t launcher, int rank) {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return -1;
  pid_t found = -1;
  const std::string rank_flag = "--rank=" + std::to_string(rank);
  while (dirent* e = readdir(proc)) {
    const pid_t pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), {});
    size_t paren = text.rfind(')');
    if (paren == std::string::npos) continue;
    int ppid = 0;
    char state = 0;
    if (std::sscanf(text.c_str() + paren + 1, " %c %d", &state, &ppid) != 2) continue;
    if (ppid != launcher || state == 'Z') continue;
    std::ifstream cmdline("/proc/" + std::to_string(pid) + "/cmdline");
    std::vector<std::string> args;
    for (std::string arg; std::getline(cmdline, arg, '\0');) args.push_back(arg);
    if (!args.empty() && args[0].ends_with("sieve-worker") &&
        std::find(args.begin(), args.end(), rank_flag) != args.end()) {
      found = pid;
      break;
    }
  }
  closedir(proc);
  return found;
}

class LaunchRestart : public LauncherIntegration {
 protected:
  // Runs a 2-worker synthetic BSP job and kills worker 1 once it printed its first progress
  // line; returns the run, with `killed` set when the kill was sent.
  RunResult RunKillingWorker1(int max_restarts, bool* killed) {
    *killed = false;
    return RunSieve(
        {"launch", "--num_servers=1", "--num_workers=2",
         "--max_restarts=" + std::to_string(max_restarts), "--progress=off", "--",
         "--model=synthetic", "--num_params=20000", "--epochs=20", "--rounds_per_epoch=100",
         "--compressor=topk", "--density=0.01", "--heartbeat_interval_ms=200"},
        {},
        [&](pid_t launcher, const std::string& output) {
          if (*killed || output.find("[worker 1] progress: ") == std::string::npos) return;
          const pid_t worker = WorkerPid(launcher, 1);
          if (worker > 0 && kill(worker, SIGKILL) == 0) *killed = true;
        },
        std::chrono::seconds(120));
  }
};

TEST_F(LaunchRestart, KilledWorkerIsRestartedRejoinsAndTheJobSucceeds) {
  bool killed = false;
  RunResult r = RunKillingWorker1(/*max_restarts=*/1, &killed);
  ASSERT_FALSE(r.timed_out) << r.output;
  ASSERT_TRUE(killed) << r.output;
  EXPECT_EQ(ExitCode(r), 0) << r.output;
  EXPECT_NE(r.output.find("sieve launch: restarting worker 1 (killed by signal 9"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("restart 1 of 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rejoined a running job"), std::string::npos) << r.output;
  // Both workers (the restarted one included) finished the whole run.
  EXPECT_EQ(CountOf(r.output, "sieve-worker summary: "), 2) << r.output;
}

TEST_F(LaunchRestart, WithoutRestartsTheKilledWorkerFailsTheJob) {
  bool killed = false;
  RunResult r = RunKillingWorker1(/*max_restarts=*/0, &killed);
  ASSERT_FALSE(r.timed_out) << r.output;
  ASSERT_TRUE(killed) << r.output;
  EXPECT_EQ(ExitCode(r), 1) << r.output;
  EXPECT_NE(r.output.find("worker 1 (pid "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("restarting"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace sieve
