// `sieve launch` with stand-in daemons (launch_fixture.h): the job in every worker's environment
// (worker_env.h), a --worker_cmd (standin_worker_cmd.sh) asked which worker flags it implements,
// --metrics_port per daemon, --min_workers, and the job's result line.
#include <sys/stat.h>

#include "tests/deploy/local/launch_fixture.h"

namespace sieve {
namespace {

class LaunchWorkerEnv : public LauncherIntegration {
 protected:
  static std::string Command() { return STANDIN_WORKER_CMD; }
};

TEST_F(LaunchWorkerEnv, WorkerCommandGetsTheJobInItsEnvironmentAndExactlyItsOwnArgv) {
  RunResult r = Launch({"--num_servers=1", "--num_workers=2", "--port=5555",
                        "--worker_cmd=" + Command() + " --tag='two words'", "--lr=0.5",
                        "--consistency=ssp", "--num_params=7", "--v=2", "--", "--density=0.25"});
  ASSERT_EQ(ExitCode(r), 0) << r.output;
  for (int rank : {0, 1}) {
    const std::string name = "cmd-" + std::to_string(rank);
    EXPECT_EQ(ArgsOf(name), std::vector<std::string>{"--tag=two words"}) << name;
    auto env = EnvOf(name);
    EXPECT_EQ(Value(env, "SIEVE_SCHEDULER"), "127.0.0.1:5555") << name;
    EXPECT_EQ(Value(env, "SIEVE_RANK"), std::to_string(rank));
    EXPECT_EQ(Value(env, "SIEVE_NUM_WORKERS"), "2");
    EXPECT_EQ(Value(env, "SIEVE_NUM_SERVERS"), "1");
    EXPECT_EQ(Value(env, "SIEVE_BIND"), "127.0.0.1");
    EXPECT_EQ(Value(env, "SIEVE_HOST"), "127.0.0.1");
    EXPECT_NE(Value(env, "SIEVE_JOB_TOKEN_FILE"), "(unset)");
    // The worker flags it implements, in command-line order; --v (every daemon's) it does not
    // implement is left out, --consistency is the servers'.
    EXPECT_EQ(Value(env, "SIEVE_WORKER_FLAGS"), "--lr=0.5 --num_params=7 --density=0.25");
    EXPECT_EQ(Value(env, "SIEVE_CURVE_DIR"), "(unset)");
    EXPECT_EQ(Value(env, "SIEVE_METRICS_PORT"), "(unset)");
    EXPECT_EQ(Value(env, "SIEVE_HELPXML"), "(unset)");
  }
  EXPECT_TRUE(Has(ArgsOf("server-0"), "--num_params=7"));
  EXPECT_TRUE(Has(ArgsOf("server-0"), "--v=2"));
  EXPECT_FALSE(Has(ArgsOf("server-0"), "--tag=two words"));
}

TEST_F(LaunchWorkerEnv, WorkerFlagTheCommandDoesNotImplementIsAUsageErrorStartingNothing) {
  RunResult r =
      Launch({"--num_workers=2", "--worker_cmd=" + Command(), "--lr=0.5", "--straggler=1:x2"});
  EXPECT_EQ(ExitCode(r), 2) << r.output;
  EXPECT_NE(r.output.find("sieve launch: --straggler is not implemented by the worker command '" +
                          Command() + "'"),
            std::string::npos)
      << r.output;
  EXPECT_TRUE(ArgsOf("scheduler").empty());
}

TEST_F(LaunchWorkerEnv, CommandThatCannotListItsFlagsTakesNoWorkerFlags) {
  for (const char* mode : {"exit3", "noxml"}) {
    RunResult r = Launch({"--num_workers=2", "--worker_cmd=" + Command(), "--lr=0.5"},
                         {std::string("STANDIN_CMD_HELPXML=") + mode});
    EXPECT_EQ(ExitCode(r), 2) << mode << "\n" << r.output;
    EXPECT_NE(r.output.find("cannot pass --lr to the worker command"), std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find(mode == std::string("exit3") ? "it exited with code 3"
                                                         : "it printed no flag list"),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("sieve.torch.init()"), std::string::npos) << r.output;
    EXPECT_TRUE(ArgsOf("scheduler").empty());
  }
  // Without worker flags the command is not asked: the same command runs the job.
  RunResult r = Launch({"--num_workers=2", "--worker_cmd=" + Command(), "--consistency=ssp"},
                       {"STANDIN_CMD_HELPXML=exit3"});
  EXPECT_EQ(ExitCode(r), 0) << r.output;
  EXPECT_EQ(Value(EnvOf("cmd-1"), "SIEVE_WORKER_FLAGS"), "");
}

// sieve-worker gets the same environment (besides its flags); the token file is private, holds
// the job token the daemons get, and is gone after the job; a SIEVE_* variable of the launcher's
// own environment never reaches a worker.
TEST_F(LaunchWorkerEnv, SieveWorkerGetsTheJobEnvironmentWithAPrivateTokenFile) {
  RunResult r = Launch({"--num_servers=1", "--num_workers=2", "--port=5555", "--lr=0.5"},
                       {"SIEVE_CURVE_DIR=/stale", "SIEVE_RANK=7"});
  ASSERT_EQ(ExitCode(r), 0) << r.output;
  auto env = EnvOf("worker-1");
  EXPECT_EQ(Value(env, "SIEVE_RANK"), "1");
  EXPECT_EQ(Value(env, "SIEVE_SCHEDULER"), "127.0.0.1:5555");
  EXPECT_EQ(Value(env, "SIEVE_WORKER_FLAGS"), "--lr=0.5");
  EXPECT_EQ(Value(env, "SIEVE_CURVE_DIR"), "(unset)");
  EXPECT_EQ(Value(env, "token_mode"), "600");
  const std::string token = Value(env, "token");
  EXPECT_EQ(token.size(), 32u) << token;
  EXPECT_TRUE(Has(ArgsOf("server-0"), "--job_token=" + token));
  EXPECT_TRUE(Has(ArgsOf("worker-1"), "--job_token=" + token));
  EXPECT_FALSE(fs::exists(Value(env, "SIEVE_JOB_TOKEN_FILE")));
  EXPECT_FALSE(fs::exists(fs::path(Value(env, "SIEVE_JOB_TOKEN_FILE")).parent_path()));
  EXPECT_EQ(Value(EnvOf("server-0"), "SIEVE_RANK"), "7");  // only workers get the job's
}

TEST_F(LaunchWorkerEnv, CurveKeysGoToTheEnvironmentOfAWorkerCommand) {
  const fs::path keys = NodeKeyDir();
  RunResult r =
      Launch({"--num_workers=2", "--curve_dir=" + keys.string(), "--worker_cmd=" + Command()});
  ASSERT_EQ(ExitCode(r), 0) << r.output;
  EXPECT_EQ(Value(EnvOf("cmd-1"), "SIEVE_CURVE_DIR"), keys.string());
  EXPECT_EQ(Value(EnvOf("cmd-1"), "SIEVE_CURVE_KEY"), (keys / "worker-1.key").string());
  EXPECT_TRUE(ArgsOf("cmd-1").empty());
}

TEST_F(LaunchWorkerEnv, MetricsPortGivesEachDaemonItsOwn) {
  RunResult r = Launch({"--num_servers=2", "--num_workers=2", "--metrics_port=9500"});
  ASSERT_EQ(ExitCode(r), 0) << r.output;
  EXPECT_NE(r.output.find("sieve launch: metrics on scheduler :9500, server 0 :9501, server 1 "
                          ":9502, worker 0 :9503, worker 1 :9504\n"),
            std::string::npos)
      << r.output;
  EXPECT_TRUE(Has(ArgsOf("scheduler"), "--metrics_port=9500"));
  EXPECT_TRUE(Has(ArgsOf("server-1"), "--metrics_port=9502"));
  EXPECT_TRUE(Has(ArgsOf("worker-0"), "--metrics_port=9503"));
  EXPECT_FALSE(Has(ArgsOf("worker-0"), "--metrics_port=9500"));
  EXPECT_EQ(Value(EnvOf("worker-1"), "SIEVE_METRICS_PORT"), "9504");

  RunResult high = Launch({"--num_servers=2", "--num_workers=2", "--metrics_port=65533"});
  EXPECT_EQ(ExitCode(high), 2) << high.output;
  EXPECT_NE(high.output.find("above 65535"), std::string::npos) << high.output;
}

// The result line comes from the scheduler's final status file (its stand-in writes one).
TEST_F(LaunchWorkerEnv, ResultLineSumsUpTheSchedulersStatus) {
  RunResult r = Launch({"--num_servers=1", "--num_workers=3"}, {"STANDIN_STATUS=1"});
  ASSERT_EQ(ExitCode(r), 0) << r.output;
  const std::string last = LastLine(r.output);
  EXPECT_EQ(last.rfind("sieve launch: job finished: test_acc=0.8512 rounds=10 time=", 0), 0)
      << r.output;
  EXPECT_NE(last.find("s pushed=6.0kB workers=3/3"), std::string::npos) << last;
  EXPECT_EQ(last.find("lost"), std::string::npos) << last;
}

// A worker killed with no restarts: with --min_workers slack the job goes on (the scheduler
// decides; its stand-in waits for M workers), without it the job stops at once.
TEST_F(LaunchWorkerEnv, MinWorkersLetsTheJobGoOnWithoutADeadWorker) {
  const std::vector<std::string> env = {"STANDIN_FAIL=worker-1:signal:9", "STANDIN_STATUS=1"};
  RunResult r = Launch({"--num_workers=3", "--", "--min_workers=2"}, env);
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(ExitCode(r), 0) << r.output;
  EXPECT_NE(r.output.find("sieve launch: lost worker 1 (killed by signal 9"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("2 of 3 workers left, the scheduler's --min_workers=2 decides"),
            std::string::npos)
      << r.output;
  const std::string last = LastLine(r.output);
  EXPECT_EQ(last.rfind("sieve launch: job finished: ", 0), 0) << r.output;
  EXPECT_NE(last.find("workers=2/3; lost worker 1 (killed by signal 9"), std::string::npos) << last;

  RunResult tight = Launch({"--num_workers=3", "--", "--min_workers=3"}, env);
  ASSERT_FALSE(tight.timed_out) << tight.output;
  EXPECT_EQ(ExitCode(tight), 1) << tight.output;
  EXPECT_NE(tight.output.find("only 2 of 3 workers left, fewer than --min_workers=3"),
            std::string::npos)
      << tight.output;
  EXPECT_EQ(LastLine(tight.output).rfind("sieve launch: job FAILED: worker 1 (pid ", 0), 0)
      << tight.output;
}

TEST_F(LaunchWorkerEnv, InterruptedJobEndsWithAFailedLine) {
  RunResult r = Launch({"--num_servers=1", "--num_workers=1"}, {"STANDIN_HANG=all"},
                       /*term_after_ready=*/3);
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(ExitCode(r), 143) << r.output;
  EXPECT_EQ(LastLine(r.output), "sieve launch: job FAILED: interrupted by Terminated") << r.output;
}

}  // namespace
}  // namespace sieve
