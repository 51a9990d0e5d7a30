// End-to-end runs of the `sieve` binary against stand-in daemons (standin_daemon.cc) placed in a
// temporary --bin_dir (fixture: launch_fixture.h).
#include <sstream>

#include "tests/deploy/local/launch_fixture.h"

namespace sieve {
namespace {

TEST_F(LauncherIntegration, SuccessPathPrefixesEveryLine) {
  RunResult r =
      Launch({"--num_servers=2", "--num_workers=3", "--log_dir=" + (root_ / "logs").string()});
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(ExitCode(r), 0) << r.output;
  for (const char* name : {"scheduler", "server 0", "server 1", "worker 0", "worker 2"}) {
    std::string prefix = std::string("[").append(name).append("] ");
    EXPECT_NE(r.output.find(prefix + "argv: "), std::string::npos) << name << "\n" << r.output;
    EXPECT_NE(r.output.find(prefix + "part-ial line on stderr\n"), std::string::npos) << name;
  }
  EXPECT_EQ(CountOf(r.output, "] ready\n"), 6);
  // Every output line carries a prefix (whole lines, nothing interleaved mid-line).
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_TRUE(line.rfind("[", 0) == 0 || line.rfind("sieve launch: ", 0) == 0) << line;
  }
  EXPECT_EQ(ArgsOf("worker-2")[0], "--scheduler=127.0.0.1:41234");
  EXPECT_EQ(ArgsOf("worker-2")[1], "--rank=2");
  EXPECT_EQ(ArgsOf("server-1")[1], "--rank=1");
  std::ifstream log(root_ / "logs" / "worker-1.log");
  std::string log_text((std::istreambuf_iterator<char>(log)), {});
  EXPECT_NE(log_text.find("argv: --scheduler=127.0.0.1:41234 --rank=1"), std::string::npos);
  EXPECT_NE(log_text.find("part-ial line on stderr\n"), std::string::npos);
}

TEST_F(LauncherIntegration, RoutesEachFlagToExactlyTheDaemonsDefiningIt) {
  RunResult r =
      Launch({"--num_servers=1", "--num_workers=2", "--port=5555", "--lr=0.5", "--consistency",
              "ssp", "--fast", "--", "--sched_only=x", "--num_params=7", "--v=2"});
  ASSERT_EQ(ExitCode(r), 0) << r.output;
  auto sched = ArgsOf("scheduler");
  auto server = ArgsOf("server-0");
  auto worker = ArgsOf("worker-1");
  EXPECT_TRUE(Has(sched, "--port=5555"));
  EXPECT_TRUE(Has(sched, "--num_workers=2"));
  EXPECT_TRUE(Has(sched, "--num_servers=1"));
  EXPECT_TRUE(Has(sched, "--sched_only=x"));
  EXPECT_TRUE(Has(sched, "--num_params=7"));
  EXPECT_TRUE(Has(sched, "--v=2"));
  EXPECT_FALSE(Has(sched, "--lr=0.5"));
  EXPECT_FALSE(Has(sched, "--fast=true"));
  EXPECT_FALSE(Has(sched, "--consistency=ssp"));

  EXPECT_TRUE(Has(server, "--scheduler=127.0.0.1:5555"));
  EXPECT_TRUE(Has(server, "--consistency=ssp"));
  EXPECT_TRUE(Has(server, "--fast=true"));
  EXPECT_TRUE(Has(server, "--num_params=7"));
  EXPECT_FALSE(Has(server, "--lr=0.5"));
  EXPECT_FALSE(Has(server, "--sched_only=x"));
  EXPECT_FALSE(Has(server, "--num_workers=2"));

  EXPECT_TRUE(Has(worker, "--scheduler=127.0.0.1:5555"));
  EXPECT_TRUE(Has(worker, "--lr=0.5"));
  EXPECT_TRUE(Has(worker, "--fast=true"));
  EXPECT_TRUE(Has(worker, "--num_params=7"));
  EXPECT_FALSE(Has(worker, "--consistency=ssp"));
  EXPECT_FALSE(Has(worker, "--port=5555"));
}

// A key directory with a key pair per node (`sieve keygen --servers=1 --workers=2`): each server
// and worker is handed its own by role and rank; the scheduler keeps its default (scheduler.key).
// With one node's key missing, nobody is handed one (they fall back to client.key).
TEST_F(LauncherIntegration, HandsEachNodeItsOwnCurveKey) {
  const fs::path keys = NodeKeyDir();
  RunResult r =
      Launch({"--num_servers=1", "--num_workers=2", "--port=5555", "--curve_dir=" + keys.string()});
  ASSERT_EQ(ExitCode(r), 0) << r.output;
  EXPECT_TRUE(Has(ArgsOf("server-0"), "--curve_key=" + (keys / "server-0.key").string()));
  EXPECT_TRUE(Has(ArgsOf("worker-0"), "--curve_key=" + (keys / "worker-0.key").string()));
  EXPECT_TRUE(Has(ArgsOf("worker-1"), "--curve_key=" + (keys / "worker-1.key").string()));
  for (const std::string& a : ArgsOf("scheduler")) EXPECT_EQ(a.rfind("--curve_key", 0), a.npos);

  fs::remove(keys / "worker-1.key");
  r = Launch({"--num_servers=1", "--num_workers=2", "--port=5555", "--curve_dir=" + keys.string()});
  ASSERT_EQ(ExitCode(r), 0) << r.output;
  for (const std::string& a : ArgsOf("worker-0")) EXPECT_EQ(a.rfind("--curve_key", 0), a.npos);
  EXPECT_TRUE(Has(ArgsOf("server-0"), "--curve_key=" + (keys / "server-0.key").string()));
}

TEST_F(LauncherIntegration, MissingWorkerCommandIsAUsageErrorStartingNothing) {
  RunResult r = Launch({"--num_workers=2", "--worker_cmd=sieve-no-such-program --x"});
  EXPECT_EQ(ExitCode(r), 2) << r.output;
  EXPECT_NE(r.output.find("'sieve-no-such-program' not found in PATH"), std::string::npos)
      << r.output;
  EXPECT_TRUE(ArgsOf("scheduler").empty());
}

TEST_F(LauncherIntegration, UnknownFlagStartsNothing) {
  RunResult r = Launch({"--num_workers=2", "--lr=0.1", "--bogus_flag=3"});
  EXPECT_EQ(ExitCode(r), 2) << r.output;
  EXPECT_NE(r.output.find("--bogus_flag"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::is_empty(state_)) << "a daemon was started";
}

// --rank is set per process; gflags' reporting flags would only print and exit.
TEST_F(LauncherIntegration, LauncherOwnedFlagsCannotBePassedThrough) {
  for (const char* flag : {"--rank=3", "--version", "--helpshort"}) {
    RunResult r = Launch({flag});
    EXPECT_EQ(ExitCode(r), 2) << r.output;
    EXPECT_NE(r.output.find(std::string(flag).substr(0, std::string(flag).find('='))),
              std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("unknown flag"), std::string::npos) << r.output;
    EXPECT_TRUE(fs::is_empty(state_));
  }
}

// The launcher reads pass-through flag files itself: a typo starts nothing.
TEST_F(LauncherIntegration, FlagFileTypoStartsNothing) {
  const std::string path = (root_ / "typo.flags").string();
  std::ofstream(path) << "--lr=0.5\n--desnity=0.5\n";
  RunResult r = Launch({"--num_workers=2", "--", "--flagfile=" + path});
  EXPECT_EQ(ExitCode(r), 2) << r.output;
  EXPECT_NE(r.output.find(path + ":2: unknown flag --desnity"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::is_empty(state_)) << "a daemon was started";
}

// The launcher exits 1, or 2 when the daemon's exit was a usage error (2: a bad flag value only
// the daemon can check).
TEST_F(LauncherIntegration, FailingWorkerStopsEveryoneAndIsNamed) {
  for (const auto& [worker_code, launcher_code] : {std::pair{3, 1}, std::pair{2, 2}}) {
    const std::string code = std::to_string(worker_code);
    RunResult r = Launch({"--num_servers=2", "--num_workers=4"},
                         {"STANDIN_FAIL=worker-2:exit:" + code, "STANDIN_HANG=all"});
    ASSERT_FALSE(r.timed_out) << r.output;
    EXPECT_EQ(ExitCode(r), launcher_code) << r.output;
    EXPECT_NE(r.output.find("sieve launch: worker 2 (pid "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("failed: exited with code " + code), std::string::npos) << r.output;
    EXPECT_EQ(LastLine(r.output).rfind("sieve launch: job FAILED: worker 2 (pid ", 0), 0)
        << r.output;
    ExpectNoStandinAlive();
  }
}

TEST_F(LauncherIntegration, WorkerKilledBySignalIsReported) {
  RunResult r = Launch({"--num_servers=1", "--num_workers=3"},
                       {"STANDIN_FAIL=worker-2:signal:9", "STANDIN_HANG=all"});
  EXPECT_EQ(ExitCode(r), 1) << r.output;
  EXPECT_NE(r.output.find("worker 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("killed by signal 9"), std::string::npos) << r.output;
  ExpectNoStandinAlive();
}

TEST_F(LauncherIntegration, ChildrenIgnoringSigtermAreKilled) {
  RunResult r =
      Launch({"--num_servers=1", "--num_workers=2", "--stop_timeout_ms=200"},
             {"STANDIN_FAIL=server-0:exit:5", "STANDIN_HANG=all", "STANDIN_IGNORE_TERM=1"});
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(ExitCode(r), 1) << r.output;
  EXPECT_NE(r.output.find("server 0"), std::string::npos) << r.output;
  ExpectNoStandinAlive();
}

TEST_F(LauncherIntegration, SigtermToLauncherStopsEveryone) {
  RunResult r = Launch({"--num_servers=2", "--num_workers=2"}, {"STANDIN_HANG=all"},
                       /*term_after_ready=*/5);
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(ExitCode(r), 143) << r.output;
  EXPECT_EQ(CountOf(r.output, "] ready\n"), 5);
  ExpectNoStandinAlive();
}

TEST_F(LauncherIntegration, KilledLauncherTakesEveryDaemonAlong) {
  RunResult r = Launch({"--num_servers=2", "--num_workers=2"}, {"STANDIN_HANG=all"},
                       /*term_after_ready=*/5, SIGKILL);
  ASSERT_FALSE(r.timed_out) << r.output;
  ASSERT_TRUE(WIFSIGNALED(r.wait_status)) << r.output;
  EXPECT_EQ(CountOf(r.output, "] ready\n"), 5);
  ExpectNoStandinAliveWithin(std::chrono::seconds(10));
}

TEST_F(LauncherIntegration, FailedWorkerIsRestartedAndTheJobFinishes) {
  const std::vector<std::string> env = {"STANDIN_FAIL=worker-1:signal:9", "STANDIN_FAIL_ONCE=1",
                                        "STANDIN_SCHEDULER_WAITS=1"};
  RunResult r = Launch({"--num_servers=1", "--num_workers=2", "--max_restarts=1",
                        "--log_dir=" + (root_ / "logs").string()},
                       env);
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(ExitCode(r), 0) << r.output;
  EXPECT_NE(r.output.find("sieve launch: restarting worker 1 (killed by signal 9"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("restart 1 of 1\n"), std::string::npos) << r.output;
  EXPECT_EQ(ArgsOf("worker-1")[1], "--rank=1");  // the restart kept its rank
  EXPECT_EQ(CountOf(r.output, "[worker 1] ready\n"), 2);
  // The restarted process appends to its predecessor's log.
  std::ifstream log(root_ / "logs" / "worker-1.log");
  std::string log_text((std::istreambuf_iterator<char>(log)), {});
  EXPECT_EQ(CountOf(log_text, "ready\n"), 2) << log_text;
}

TEST_F(LauncherIntegration, WithoutRestartsTheSameFailureStopsTheJob) {
  RunResult r = Launch({"--num_servers=1", "--num_workers=2"},
                       {"STANDIN_FAIL=worker-1:signal:9", "STANDIN_FAIL_ONCE=1",
                        "STANDIN_SCHEDULER_WAITS=1", "STANDIN_HANG=server-0,worker-0"});
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(ExitCode(r), 1) << r.output;
  EXPECT_EQ(r.output.find("restarting"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("worker 1 (pid "), std::string::npos) << r.output;
  ExpectNoStandinAlive();
}

// (--checkpoint_dir from a flag file: the launcher reads it, so it counts like a plain flag.)
TEST_F(LauncherIntegration, RestartsAreBoundedPerJob) {
  const std::string flags = (root_ / "server.flags").string();
  std::ofstream(flags) << "--checkpoint_dir=" << (root_ / "ckpt").string() << "\n";
  RunResult r = Launch(
      {"--num_servers=2", "--num_workers=2", "--max_restarts=2", "--", "--flagfile=" + flags},
      {"STANDIN_FAIL=server-1:exit:3", "STANDIN_SCHEDULER_WAITS=1",
       "STANDIN_HANG=server-0,worker-0,worker-1"});
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(ExitCode(r), 1) << r.output;
  EXPECT_EQ(CountOf(r.output, "sieve launch: restarting server 1 (exited with code 3)"), 2)
      << r.output;
  EXPECT_NE(r.output.find("restart 2 of 2\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("no restarts left (2 used)"), std::string::npos) << r.output;
  // It failed at once every time: each restart waited, the second twice as long as the first.
  const size_t first = r.output.find("restarting it in 500 ms\n");
  const size_t second = r.output.find("restarting it in 1000 ms\n");
  EXPECT_NE(first, std::string::npos) << r.output;
  EXPECT_NE(second, std::string::npos) << r.output;
  EXPECT_LT(first, r.output.find("restart 1 of 2\n")) << r.output;
  EXPECT_LT(second, r.output.find("restart 2 of 2\n")) << r.output;
  ExpectNoStandinAlive();
}

// A server comes back with its shard only from a checkpoint: without --checkpoint_dir the job
// cannot go on, so the launcher stops it instead of spending a restart.
TEST_F(LauncherIntegration, ServerWithoutCheckpointDirIsNotRestarted) {
  RunResult r = Launch({"--num_servers=2", "--num_workers=2", "--max_restarts=3"},
                       {"STANDIN_FAIL=server-1:signal:9", "STANDIN_SCHEDULER_WAITS=1",
                        "STANDIN_HANG=server-0,worker-0,worker-1"});
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(ExitCode(r), 1) << r.output;
  EXPECT_EQ(r.output.find("restarting"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("server 1 is not restarted: it has no --checkpoint_dir"),
            std::string::npos)
      << r.output;
  ExpectNoStandinAlive();
}

TEST_F(LauncherIntegration, SchedulerIsNeverRestarted) {
  RunResult r =
      Launch({"--num_workers=2", "--max_restarts=5"},
             {"STANDIN_FAIL=scheduler:exit:4", "STANDIN_HANG=server-0,worker-0,worker-1"});
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(ExitCode(r), 1) << r.output;
  EXPECT_NE(r.output.find("scheduler (pid "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the scheduler cannot be restarted"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("restarting"), std::string::npos) << r.output;
  ExpectNoStandinAlive();
}

TEST_F(LauncherIntegration, ProgressLinesAreSummedUpNotRelayed) {
  RunResult r =
      Launch({"--num_workers=2", "--progress=lines", "--log_dir=" + (root_ / "logs").string()},
             {"STANDIN_PROGRESS=1"});
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(ExitCode(r), 0) << r.output;
  EXPECT_EQ(r.output.find("] progress: "), std::string::npos) << r.output;
  std::ifstream log(root_ / "logs" / "worker-1.log");
  std::string log_text((std::istreambuf_iterator<char>(log)), {});
  EXPECT_NE(log_text.find("progress: epoch 1/2 round 3/8"), std::string::npos) << log_text;
  // --progress=off relays them like any other line.
  RunResult off = Launch({"--num_workers=2", "--progress=off"}, {"STANDIN_PROGRESS=1"});
  EXPECT_EQ(ExitCode(off), 0) << off.output;
  EXPECT_EQ(CountOf(off.output, "] progress: epoch 1/2 round 3/8"), 2) << off.output;
}

TEST_F(LauncherIntegration, SchedulerThatNeverListensTimesOut) {
  RunResult r = Launch({"--listen_timeout_ms=300"}, {"STANDIN_NO_LISTEN=1"});
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(ExitCode(r), 1) << r.output;
  EXPECT_NE(r.output.find("did not write its port file"), std::string::npos) << r.output;
  EXPECT_TRUE(ArgsOf("worker-0").empty());
  ExpectNoStandinAlive();
}

TEST_F(LauncherIntegration, OthersHangingAfterSchedulerFinishesAreStopped) {
  RunResult r = Launch({"--num_workers=2", "--finish_grace_ms=200"}, {"STANDIN_HANG=worker-1"});
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(ExitCode(r), 1) << r.output;
  EXPECT_NE(r.output.find("worker 1 still running"), std::string::npos) << r.output;
  ExpectNoStandinAlive();
}

TEST_F(LauncherIntegration, MissingDaemonIsAClearError) {
  fs::remove(bin_ / "sieve-server");
  std::vector<std::string> env = {"PATH=/nonexistent"};
  RunResult r = Launch({}, env);
  EXPECT_EQ(ExitCode(r), 1) << r.output;
  EXPECT_NE(r.output.find("cannot find executable sieve-server"), std::string::npos) << r.output;
}

TEST_F(LauncherIntegration, HelpAndSubcommands) {
  RunResult help = RunSieve({"--help"});
  EXPECT_EQ(ExitCode(help), 0);
  EXPECT_NE(help.output.find("launch"), std::string::npos) << help.output;
  RunResult launch_help = RunSieve({"launch", "--help"});
  EXPECT_EQ(ExitCode(launch_help), 0);
  EXPECT_NE(launch_help.output.find("--num_workers"), std::string::npos);
  RunResult unknown = RunSieve({"frobnicate"});
  EXPECT_EQ(ExitCode(unknown), 2);
  EXPECT_NE(unknown.output.find("unknown subcommand 'frobnicate'"), std::string::npos);
  EXPECT_NE(unknown.output.find("launch"), std::string::npos);
}

}  // namespace
}  // namespace sieve
