// Multi-process integration tests of the scheduler and the node runtime on loopback: real
// sieve-scheduler processes and test_node stand-ins for servers and workers.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "net/curve.h"
#include "net/transport.h"
#include "proto/messages.h"
#include "tests/net/daemon_paths.h"
#include "tests/net/subprocess.h"

namespace sieve::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Every wait below ends as soon as what it waits for happens; the deadline only bounds a hang,
// so it is generous enough for a loaded machine.
constexpr seconds kDeadline(60);

std::string SchedulerBin() { return SchedulerBinary(); }
std::string NodeBin() { return TestNodeBinary(); }

// The HOST:PORT in the scheduler's --port_file, or "" while it is missing or incomplete (the
// scheduler replaces it atomically, so a partial file is never seen).
std::string ReadPortFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line) || in.eof()) return "";  // no line, or not yet its newline
  return line;
}

struct Cluster {
  std::unique_ptr<Subprocess> scheduler;
  std::string address;
  std::vector<std::unique_ptr<Subprocess>> nodes;
  std::filesystem::path dir;  // holds the scheduler's port file

  ~Cluster() {
    nodes.clear();  // kills what still runs
    scheduler.reset();
    std::error_code ignored;
    if (!dir.empty()) std::filesystem::remove_all(dir, ignored);
  }

  // Starts the scheduler and waits (bounded) for the address in its --port_file.
  void StartScheduler(int servers, int workers, const std::string& extra = "") {
    std::string pattern = (std::filesystem::temp_directory_path() / "sieve-net-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir = pattern;
    const std::filesystem::path port_file = dir / "scheduler.port";
    std::vector<std::string> argv = LocalSchedulerArgv(servers, workers, port_file);
    argv.push_back("--heartbeat_timeout_ms=1000");
    if (!extra.empty()) argv.push_back(extra);
    scheduler = std::make_unique<Subprocess>(argv);
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while ((address = ReadPortFile(port_file)).empty()) {
      // Wait() drains the scheduler's output and paces the poll.
      if (auto st = scheduler->Wait(milliseconds(20))) {
        FAIL() << "scheduler exited (wait status " << *st << ") before writing its port file";
      }
      ASSERT_TRUE(std::chrono::steady_clock::now() < deadline) << "scheduler did not start";
    }
  }
  Subprocess& StartNode(const std::string& role, std::vector<std::string> flags) {
    std::vector<std::string> argv = {NodeBin(), "--scheduler=" + address, "--role=" + role};
    argv.insert(argv.end(), flags.begin(), flags.end());
    nodes.push_back(std::make_unique<Subprocess>(argv));
    return *nodes.back();
  }
};

bool ExitedOk(std::optional<int> st) { return st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0; }

TEST(NetClusterTest, AllNodesGetSameTableBarrierAndCleanShutdown) {
  Cluster c;
  ASSERT_NO_FATAL_FAILURE(c.StartScheduler(2, 3));
  for (int i = 0; i < 2; ++i) c.StartNode("server", {"--barriers=2"});
  for (int i = 0; i < 3; ++i) c.StartNode("worker", {"--barriers=2", "--num_params=1001"});
  std::set<std::string> digests;
  std::set<std::pair<std::string, int>> ranks;
  for (auto& n : c.nodes) {
    auto line = n->WaitFor("table ", kDeadline);
    ASSERT_TRUE(line.has_value());
    std::istringstream in(*line);
    std::string word, role, digest, text;
    int id, rank;
    in >> word >> id >> role >> rank >> digest >> text;
    digests.insert(digest);
    ranks.insert({role, rank});
    EXPECT_EQ(id, role == "server" ? 1 + rank : 3 + rank);
    // Shards of D = 1001 over 2 servers: [0, 501) and [501, 1001).
    EXPECT_NE(text.find("/0-501;"), std::string::npos) << text;
    EXPECT_NE(text.find("/501-1001;"), std::string::npos) << text;
  }
  EXPECT_EQ(digests.size(), 1u) << "nodes disagree on the node table";
  EXPECT_EQ(ranks, (std::set<std::pair<std::string, int>>{
                       {"server", 0}, {"server", 1}, {"worker", 0}, {"worker", 1}, {"worker", 2}}));
  for (auto& n : c.nodes) {
    EXPECT_TRUE(n->WaitFor("barrier 2 done", kDeadline).has_value());
  }
  for (auto& n : c.nodes) EXPECT_TRUE(ExitedOk(n->Wait(kDeadline)));
  EXPECT_TRUE(ExitedOk(c.scheduler->Wait(kDeadline)));
  for (auto& n : c.nodes) EXPECT_NE(kill(n->pid(), 0), 0) << "process left behind";
}

// With --min_workers=2 the job accepts losing one of its 3 workers; without it (every worker must
// finish) the same job fails: the scheduler exits 1 naming how many finished, and tells the nodes
// the job failed (SHUTDOWN failed), so they do not exit 0 either.
class NetClusterMinWorkers : public ::testing::TestWithParam<bool> {};

TEST_P(NetClusterMinWorkers, KilledWorkerIsDeclaredDeadAndOthersFinish) {
  const bool tolerate = GetParam();
  Cluster c;
  ASSERT_NO_FATAL_FAILURE(c.StartScheduler(2, 3, tolerate ? "--min_workers=2" : ""));
  for (int i = 0; i < 2; ++i)
    c.StartNode("server", {"--wait_dead=1", "--rank=" + std::to_string(i)});
  for (int i = 0; i < 3; ++i) {
    c.StartNode("worker", {"--wait_dead=1", "--num_params=100", "--rank=" + std::to_string(i)});
  }
  for (auto& n : c.nodes) ASSERT_TRUE(n->WaitFor("barrier 1 done", kDeadline).has_value());
  Subprocess& victim = *c.nodes[4];  // worker rank 2 -> node id 5
  victim.Kill(SIGKILL);
  for (size_t i = 0; i < 4; ++i) {
    auto line = c.nodes[i]->WaitFor("dead ", kDeadline);
    ASSERT_TRUE(line.has_value());
    EXPECT_EQ(*line, "dead 5");
  }
  for (size_t i = 0; i < 4; ++i) {
    auto exit = c.nodes[i]->Wait(kDeadline);
    ASSERT_TRUE(exit.has_value());
    EXPECT_EQ(ExitedOk(exit), tolerate) << "node " << i;
  }
  auto st = c.scheduler->Wait(kDeadline);
  ASSERT_TRUE(st.has_value());
  if (tolerate) {
    EXPECT_TRUE(ExitedOk(st));
  } else {
    EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 1);
    std::string text;
    for (const auto& l : c.scheduler->lines()) text += l + "\n";
    EXPECT_NE(text.find("only 2 of 3 workers finished"), std::string::npos) << text;
  }
}

INSTANTIATE_TEST_SUITE_P(Tolerance, NetClusterMinWorkers, ::testing::Bool());

TEST(NetClusterTest, DeadServerFailsTheJobWithoutHanging) {
  Cluster c;
  ASSERT_NO_FATAL_FAILURE(c.StartScheduler(2, 1, "--server_failure=fail"));
  c.StartNode("server", {"--wait_dead=1", "--rank=0"});
  c.StartNode("server", {"--wait_dead=1", "--rank=1"});
  c.StartNode("worker", {"--wait_dead=1", "--num_params=100"});
  for (auto& n : c.nodes) ASSERT_TRUE(n->WaitFor("barrier 1 done", kDeadline).has_value());
  c.nodes[1]->Kill(SIGKILL);
  auto st = c.scheduler->Wait(kDeadline);
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 1);
  for (size_t i : {0u, 2u}) {
    auto exit = c.nodes[i]->Wait(kDeadline);
    ASSERT_TRUE(exit.has_value()) << "node hangs after the job failed";
  }
}

TEST(NetClusterTest, SchedulerRefusesPortInUse) {
  Cluster c;
  ASSERT_NO_FATAL_FAILURE(c.StartScheduler(1, 1));
  const std::string port = c.address.substr(c.address.rfind(':') + 1);
  Subprocess second({SchedulerBin(), "--port=" + port, "--bind=127.0.0.1"});
  auto st = second.Wait(kDeadline);
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) != 0);
  bool mentions = false;
  for (const auto& l : second.lines()) mentions |= l.find("cannot bind") != std::string::npos;
  EXPECT_TRUE(mentions);
}

// Runs `argv` to its end within kDeadline and expects a usage error: exit 2 with an output line
// containing `named`. `what` labels the failures.
void ExpectUsageExit(const std::vector<std::string>& argv, const std::string& named,
                     const std::string& what) {
  Subprocess p(argv);
  auto st = p.Wait(kDeadline);
  ASSERT_TRUE(st.has_value()) << what;
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 2) << what;
  bool mentions = false;
  for (const auto& l : p.lines()) mentions |= l.find(named) != std::string::npos;
  EXPECT_TRUE(mentions) << what;
}

// A bad flag value is a usage error: exit 2 with a message naming the flag; a port in use (above)
// is a run-time failure, exit 1.
TEST(NetClusterTest, SchedulerBadFlagValuesExitTwoNamingTheFlag) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"--num_workers=0", "--num_workers"},
      {"--num_params=1 --num_servers=2", "--num_params"},
      {"--server_failure=maybe", "--server_failure"},
      {"--port=70000", "--port"}};
  for (const auto& [flags, named] : bad) {
    std::vector<std::string> argv = {SchedulerBin(), "--port=0", "--bind=127.0.0.1"};
    std::stringstream ss(flags);
    for (std::string f; ss >> f;) argv.push_back(f);
    ASSERT_NO_FATAL_FAILURE(ExpectUsageExit(argv, named, flags));
  }
}

// A key file that cannot be used is reported under the flag that named it: --curve_key for the
// file given there, --curve_dir for the directory's own files.
TEST(NetClusterTest, CurveFlagErrorsNameTheFlagThatNamedTheFile) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("sieve-flagkeys-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  ASSERT_TRUE(WriteCurveDir(dir.string(), 0, 0, false, false).ok());
  const std::string missing_key = (dir / "no-such.key").string();
  const std::string missing_dir = (dir / "no-such-dir").string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--curve_dir=" + dir.string(), "--curve_key=" + missing_key},
       "--curve_key: cannot read " + missing_key},
      {{"--curve_dir=" + missing_dir}, "--curve_dir: cannot read " + missing_dir}};
  for (const auto& [flags, want] : bad) {
    std::vector<std::string> argv = {SchedulerBin(), "--port=0", "--bind=127.0.0.1",
                                     "--num_servers=1", "--num_workers=1"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    ASSERT_NO_FATAL_FAILURE(ExpectUsageExit(argv, want, want));
  }
  fs::remove_all(dir);
}

TEST(NetClusterTest, SchedulerHelpDocumentsEveryFlag) {
  Subprocess help({SchedulerBin(), "--help"});
  ASSERT_TRUE(help.Wait(kDeadline).has_value());
  std::string all;
  for (const auto& l : help.lines()) all += l + "\n";
  for (const char* flag : {"-num_workers", "-num_servers", "-num_params", "-port", "-bind", "-host",
                           "-heartbeat_timeout_ms", "-startup_timeout_ms"}) {
    EXPECT_NE(all.find(flag), std::string::npos) << flag;
  }
}

// A flood of refused messages does not flood the scheduler's log: 200 bad REGISTERs (no role) are
// each refused, but at most 20 lines name them before the rest are reported in one line as "N
// more rejected or dropped messages were not logged" (after the 10 s window). Nor does it make the
// scheduler open a connection per REGISTER to the address each names: at most 20 are answered.
TEST(NetClusterTest, SchedulerLogsAFloodOfRefusalsInBoundedLines) {
  Cluster c;
  ASSERT_NO_FATAL_FAILURE(c.StartScheduler(1, 1));
  TransportOptions o;
  o.bind_host = "127.0.0.1";
  o.advertise_host = "127.0.0.1";
  auto peer = CreateZmqTransport(o);
  ASSERT_TRUE(peer.ok());
  const size_t colon = c.address.rfind(':');
  ASSERT_TRUE((*peer)->Connect(0, "127.0.0.1", std::stoi(c.address.substr(colon + 1))).ok());
  for (uint64_t i = 1; i <= 200; ++i) {
    auto frames = EncodeControl(
        MakeRegisterHeader(pb::ROLE_UNSPECIFIED, (*peer)->host(), (*peer)->port(), -1, i, 0));
    ASSERT_TRUE(frames.ok() && (*peer)->Send(0, std::move(frames).value()).ok());
  }
  auto held = c.scheduler->WaitFor("more rejected or dropped messages were not logged", kDeadline);
  ASSERT_TRUE(held.has_value()) << "no held-back count";
  int logged = 0;
  for (const std::string& line : c.scheduler->lines()) {
    if (line.find("more rejected or dropped") != std::string::npos) break;
    logged += line.find("role must be server or worker") != std::string::npos;
  }
  EXPECT_GE(logged, 1);
  EXPECT_LE(logged, 20);
  int answered = 0;
  Frames frames;
  for (;;) {
    auto got = (*peer)->Recv(&frames, std::chrono::milliseconds(1000));
    ASSERT_TRUE(got.ok());
    if (!*got) break;
    Message msg;
    ASSERT_TRUE(Decode(std::move(frames), DecodeLimits{}, &msg).ok());
    EXPECT_EQ(msg.type(), pb::MSG_ERROR);
    ++answered;
  }
  EXPECT_GE(answered, 1);
  EXPECT_LE(answered, 20);
}

}  // namespace
}  // namespace sieve::testing
