// Test fixture of the `sieve launch` end-to-end tests: runs the `sieve` binary (SIEVE_BINARY) in a
// temporary directory, with stand-in daemons (STANDIN_BINARY, standin_daemon.cc) linked into a
// --bin_dir for Launch(), or the real daemons of the build tree for RunSieve({"launch", ...}).
// Every wait is bounded by a deadline; synchronization is by reading the launcher's output or the
// scheduler's job status (ReadJobStatus), never by sleeping.
#ifndef SIEVE_TESTS_DEPLOY_LOCAL_LAUNCH_FIXTURE_H_
#define SIEVE_TESTS_DEPLOY_LOCAL_LAUNCH_FIXTURE_H_

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "proto/job_status_text.h"
#include "tests/net/summary_file.h"

extern char** environ;

namespace sieve {

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
  // term_after_ready > 0, sends `sig` to the launcher once that many "] ready" lines appeared.
  RunResult Launch(std::vector<std::string> args, std::vector<std::string> env = {},
                   int term_after_ready = 0, int sig = SIGTERM) {
    args.insert(args.begin(), {"launch", "--bin_dir=" + bin_.string()});
    bool sent = false;
    return RunSieve(args, env, [&](pid_t launcher, const std::string& output) {
      if (term_after_ready > 0 && !sent && CountOf(output, "] ready\n") >= term_after_ready) {
        kill(launcher, sig);
        sent = true;
      }
    });
  }

  // Runs `sieve <args>`; `on_output` sees the launcher's pid and all its output so far after each
  // read, and at least every 100 ms while none comes (so that it can poll a file). The run is
  // killed after `limit` (a bound on hangs only).
  RunResult RunSieve(const std::vector<std::string>& args, std::vector<std::string> env = {},
                     const std::function<void(pid_t, const std::string&)>& on_output = {},
                     std::chrono::seconds limit = std::chrono::seconds(20)) {
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
    const auto deadline = Clock::now() + limit;
    char buf[4096];
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        result.timed_out = true;
        kill(pid, SIGKILL);
        break;
      }
      pollfd fd{p[0], POLLIN, 0};
      if (poll(&fd, 1, static_cast<int>(std::min<int64_t>(left.count(), 100))) <= 0) {
        if (on_output) on_output(pid, result.output);
        continue;
      }
      ssize_t n = read(p[0], buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      result.output.append(buf, static_cast<size_t>(n));
      if (on_output) on_output(pid, result.output);
    }
    close(p[0]);
    waitpid(pid, &result.wait_status, 0);
    return result;
  }

  // The job status the scheduler last wrote to `path` (its --status_file; docs/protocol.md, "Job
  // status"), or nullopt while there is none. A running job's is at most about a second old; the
  // final one is written just before the scheduler exits.
  static std::optional<pb::JobStatus> ReadJobStatus(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    const std::string json((std::istreambuf_iterator<char>(in)), {});
    if (json.empty()) return std::nullopt;
    auto status = JobStatusFromJson(json);
    if (!status.ok()) return std::nullopt;
    return *std::move(status);
  }

  // The row of `status` for the node of `role` and `rank`, or nullptr.
  static const pb::JobNode* NodeOf(const pb::JobStatus& status, pb::Role role, int rank) {
    for (const pb::JobNode& n : status.nodes()) {
      if (n.role() == role && n.rank() == rank) return &n;
    }
    return nullptr;
  }

  static int CountOf(const std::string& text, const std::string& needle) {
    int count = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
      ++count;
    }
    return count;
  }

  // The lines of the file at `path` (without their newlines), or empty if it cannot be read.
  static std::vector<std::string> LinesOf(const fs::path& path) {
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

  // Arguments the stand-in `name` (e.g. "worker-1") received, or empty if it never ran.
  std::vector<std::string> ArgsOf(const std::string& name) const {
    return LinesOf(state_ / (name + ".args"));
  }

  // A key directory as `sieve keygen --servers=1 --workers=2` makes it (stand-in contents).
  fs::path NodeKeyDir() const {
    const fs::path keys = root_ / "keys";
    fs::create_directories(keys);
    for (const char* name : {"server-0.key", "worker-0.key", "worker-1.key"}) {
      std::ofstream(keys / name) << "pair\n";
    }
    return keys;
  }

  // The SIEVE_* environment the stand-in (or stand-in command, "cmd-1") `name` ran with, one
  // NAME=value a line (standin_daemon.cc, standin_worker_cmd.sh), or empty if it never ran.
  std::vector<std::string> EnvOf(const std::string& name) const {
    return LinesOf(state_ / (name + ".env"));
  }

  // The value of `key` in EnvOf(name)-style lines, or "(unset)".
  static std::string Value(const std::vector<std::string>& env, const std::string& key) {
    for (const std::string& e : env) {
      if (e.rfind(key + "=", 0) == 0) return e.substr(key.size() + 1);
    }
    return "(unset)";
  }

  // The last line of `text` (without its newline).
  static std::string LastLine(const std::string& text) {
    std::string t = text;
    while (!t.empty() && t.back() == '\n') t.pop_back();
    const size_t nl = t.rfind('\n');
    return nl == std::string::npos ? t : t.substr(nl + 1);
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

  // Every stand-in that wrote a pid file is gone (or a zombie waiting for its new parent) within
  // `deadline`: the bound only stops a hang.
  void ExpectNoStandinAliveWithin(std::chrono::seconds deadline) const {
    const auto until = Clock::now() + deadline;
    std::vector<pid_t> pids;
    for (const auto& entry : fs::directory_iterator(state_)) {
      if (entry.path().extension() != ".pid") continue;
      std::ifstream in(entry.path());
      pid_t pid = 0;
      in >> pid;
      ASSERT_GT(pid, 0) << entry.path();
      pids.push_back(pid);
    }
    EXPECT_FALSE(pids.empty());
    for (pid_t pid : pids) {
      while (!Gone(pid) && Clock::now() < until) {
        poll(nullptr, 0, 10);
      }
      EXPECT_TRUE(Gone(pid)) << "pid " << pid << " outlived the launcher";
    }
  }

  static bool Gone(pid_t pid) {
    if (kill(pid, 0) != 0) return errno == ESRCH;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), {});
    size_t paren = text.rfind(')');
    return paren != std::string::npos && text.compare(paren, 4, ") Z ") == 0;
  }

  static int ExitCode(const RunResult& r) {
    return WIFEXITED(r.wait_status) ? WEXITSTATUS(r.wait_status) : -1;
  }

  // Runs `sieve <args>` (a launch with the real daemons and --progress=off) into *r and kills
  // worker 1 with SIGKILL once the job status shows a round done. A fatal failure unless the run
  // ended within `limit` and the kill was sent (call it under ASSERT_NO_FATAL_FAILURE).
  void RunKillingWorker1(std::vector<std::string> args, std::chrono::seconds limit, RunResult* r) {
    // `args` end with the daemons' flags: the scheduler's status file and every daemon's summary
    // file join them.
    args.push_back("--status_file=" + KillStatusPath().string());
    args.push_back("--status_file_interval_ms=250");
    args.push_back("--summary_out=" + (root_ / "{role}-{rank}.json").string());
    bool killed = false;
    *r = RunSieve(
        args, {},
        [&](pid_t launcher, const std::string&) {
          if (killed) return;
          const std::optional<pb::JobStatus> status = ReadJobStatus(KillStatusPath());
          if (!status || status->progress().round() < 1) return;
          const pid_t worker = WorkerPid(launcher, 1);
          if (worker > 0 && kill(worker, SIGKILL) == 0) killed = true;
        },
        limit);
    ASSERT_FALSE(r->timed_out) << r->output;
    ASSERT_TRUE(killed) << r->output;
  }

  // The job status file of RunKillingWorker1's run.
  fs::path KillStatusPath() const { return root_ / "status.json"; }

  // How many workers of ranks 0..workers-1 wrote a run summary (RunKillingWorker1's
  // --summary_out): those that finished the job; a killed process writes none.
  int WorkerSummaries(int workers) const {
    int n = 0;
    for (int w = 0; w < workers; ++w) {
      n += fs::exists(root_ / ("worker-" + std::to_string(w) + ".json")) ? 1 : 0;
    }
    return n;
  }

  // The pid of the launcher's child running sieve-worker with --rank=`rank`, or -1.
  static pid_t WorkerPid(pid_t launcher, int rank) {
    return ChildPid(launcher, "sieve-worker", rank);
  }

  // The pid of the launcher's child running `program` (sieve-server, sieve-worker) with
  // --rank=`rank`, or -1.
  static pid_t ChildPid(pid_t launcher, const std::string& program, int rank) {
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
      if (!args.empty() && args[0].ends_with(program) &&
          std::find(args.begin(), args.end(), rank_flag) != args.end()) {
        found = pid;
        break;
      }
    }
    closedir(proc);
    return found;
  }

  fs::path root_, bin_, state_;
};

}  // namespace sieve

#endif  // SIEVE_TESTS_DEPLOY_LOCAL_LAUNCH_FIXTURE_H_
