// End-to-end runs of the `sieve` binary against stand-in daemons (standin_daemon.cc) placed in a
// temporary --bin_dir. Every wait is bounded by a deadline; synchronization is by reading the
// launcher's output, never by sleeping.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace sieve {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct RunResult {
  int wait_status = -1;
  std::string output;  // stdout and stderr of the launcher, interleaved by line
  bool timed_out = false;
};

class LauncherIntegration : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "sieve-launch-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    bin_ = root_ / "bin";
    state_ = root_ / "state";
    fs::create_directories(bin_);
    fs::create_directories(state_);
    for (const char* name : {"sieve-scheduler", "sieve-server", "sieve-worker"}) {
      fs::create_symlink(STANDIN_BINARY, bin_ / name);
    }
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }

  // Runs `sieve launch --bin_dir=<bin> <args>` with the stand-in environment `env`. When
  // term_after_ready > 0, sends SIGTERM to the launcher once that many "] ready" lines appeared.
  RunResult Launch(std::vector<std::string> args, std::vector<std::string> env = {},
                   int term_after_ready = 0) {
    args.insert(args.begin(), {"launch", "--bin_dir=" + bin_.string()});
    return RunSieve(args, env, term_after_ready);
  }

  RunResult RunSieve(const std::vector<std::string>& args, std::vector<std::string> env = {},
                     int term_after_ready = 0) {
    env.push_back("STANDIN_DIR=" + state_.string());
    std::vector<std::string> argv = {SIEVE_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv, cenv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    for (char** e = environ; *e; ++e) {
      if (std::string(*e).rfind("STANDIN_", 0) != 0) cenv.push_back(*e);
    }
    for (auto& e : env) cenv.push_back(e.data());
    cenv.push_back(nullptr);

    RunResult result;
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return result;
    pid_t pid = fork();
    if (pid == 0) {
      dup2(p[1], 1);
      dup2(p[1], 2);
      execve(cargv[0], cargv.data(), cenv.data());
      _exit(127);
    }
    close(p[1]);
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    int ready = 0;
    bool termed = false;
    char buf[4096];
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        result.timed_out = true;
        kill(pid, SIGKILL);
        break;
      }
      pollfd fd{p[0], POLLIN, 0};
      if (poll(&fd, 1, static_cast<int>(left.count())) <= 0) continue;
      ssize_t n = read(p[0], buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      result.output.append(buf, static_cast<size_t>(n));
      if (term_after_ready > 0 && !termed) {
        ready = CountOf(result.output, "] ready\n");
        if (ready >= term_after_ready) {
          kill(pid, SIGTERM);
          termed = true;
        }
      }
    }
    close(p[0]);
    waitpid(pid, &result.wait_status, 0);
    return result;
  }

  static int CountOf(const std::string& text, const std::string& needle) {
    int count = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
      ++count;
    }
    return count;
  }

  // Arguments the stand-in `name` (e.g. "worker-1") received, or empty if it never ran.
  std::vector<std::string> ArgsOf(const std::string& name) const {
    std::ifstream in(state_ / (name + ".args"));
    std::vector<std::string> args;
    for (std::string line; std::getline(in, line);) args.push_back(line);
    return args;
  }

  static bool Has(const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  }

  // Every stand-in that wrote a pid file is gone (reaped, not a zombie left to us).
  void ExpectNoStandinAlive() const {
    int files = 0;
    for (const auto& entry : fs::directory_iterator(state_)) {
      if (entry.path().extension() != ".pid") continue;
      ++files;
      std::ifstream in(entry.path());
      pid_t pid = 0;
      in >> pid;
      ASSERT_GT(pid, 0) << entry.path();
      errno = 0;
      EXPECT_EQ(kill(pid, 0), -1) << entry.path() << " (pid " << pid << ") still exists";
      EXPECT_EQ(errno, ESRCH);
    }
    EXPECT_GT(files, 0);
  }

  static int ExitCode(const RunResult& r) {
    return WIFEXITED(r.wait_status) ? WEXITSTATUS(r.wait_status) : -1;
  }

  fs::path root_, bin_, state_;
};

TEST_F(LauncherIntegration, SuccessPathPrefixesEveryLine) {
  RunResult r =
      Launch({"--num_servers=2", "--num_workers=3", "--log_dir=" + (root_ / "logs").string()});
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(ExitCode(r), 0) << r.output;
  EXPECT_NE(r.output.find("[scheduler] sieve-scheduler listening on 127.0.0.1:41234\n"),
            std::string::npos)
      << r.output;
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

TEST_F(LauncherIntegration, UnknownFlagStartsNothing) {
  RunResult r = Launch({"--num_workers=2", "--lr=0.1", "--bogus_flag=3"});
  EXPECT_EQ(ExitCode(r), 2) << r.output;
  EXPECT_NE(r.output.find("--bogus_flag"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::is_empty(state_)) << "a daemon was started";
}

TEST_F(LauncherIntegration, LauncherOwnedFlagsCannotBePassedThrough) {
  RunResult r = Launch({"--rank=3"});
  EXPECT_EQ(ExitCode(r), 2) << r.output;
  EXPECT_NE(r.output.find("--rank"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::is_empty(state_));
}

TEST_F(LauncherIntegration, FailingWorkerStopsEveryoneAndIsNamed) {
  RunResult r = Launch({"--num_servers=2", "--num_workers=4"},
                       {"STANDIN_FAIL=worker-2:exit:3", "STANDIN_HANG=all"});
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(ExitCode(r), 1) << r.output;
  EXPECT_NE(r.output.find("sieve launch: worker 2 (pid "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("failed: exited with code 3"), std::string::npos) << r.output;
  ExpectNoStandinAlive();
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

TEST_F(LauncherIntegration, SchedulerThatNeverListensTimesOut) {
  RunResult r = Launch({"--listen_timeout_ms=300"}, {"STANDIN_NO_LISTEN=1"});
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(ExitCode(r), 1) << r.output;
  EXPECT_NE(r.output.find("did not print"), std::string::npos) << r.output;
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
