// kill -9 of a server of a job with --replication=1 (real processes, a --model=synthetic job,
// 3 servers, 2 workers): the scheduler moves its shard to its backup at once, and a replacement
// is started under the dead rank (what a Kubernetes Job does with a failed pod). BSP: the
// replacement is rebuilt (the primaries send it snapshots of the shards it should hold) and the
// job finishes with every worker; the servers' shards end with the same bytes as the workers'
// replicas (each worker dumps its replica; each live server dumps its own shard; the promoted
// copy's checksum is in its shard summary). ASP, and BSP with backup workers (replicated by their
// pushes): the replacement is rebuilt too (the snapshots carry the clocks; BSP's waits for a
// round's end), and its copy of its own shard ends with the same bytes as the promoted one.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "net/node.h"
#include "tests/fault/cluster.h"

namespace sieve {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

constexpr uint64_t kD = 30000;

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

uint32_t Crc32(const std::string& bytes) {
  return static_cast<uint32_t>(crc32(crc32(0, nullptr, 0),
                                     reinterpret_cast<const Bytef*>(bytes.data()),
                                     static_cast<uInt>(bytes.size())));
}

bool Contains(const google::protobuf::RepeatedField<int32_t>& shards, int shard) {
  return std::find(shards.begin(), shards.end(), shard) != shards.end();
}

// Whether server `rank`'s row of the job status names `shard` among its primary shards.
bool Serves(const pb::JobStatus& st, int rank, int shard) {
  const pb::JobNode* n = testing::FindNode(st, pb::ROLE_SERVER, rank);
  return n != nullptr && Contains(n->primary_shards(), shard);
}

// Starts the 3-server job (`consistency`), kills server 1 once worker 0 reached epoch 10 and
// starts its replacement once the scheduler moved its shard.
struct KilledJob {
  explicit KilledJob(const std::string& consistency, int backup_workers = 0) {
    dir = fs::temp_directory_path() /
          ("sieve-failover-" + consistency + "-" + std::to_string(getpid()));
    fs::create_directories(dir);
    server = {"--model=synthetic",
              "--num_params=" + std::to_string(kD),
              "--consistency=" + consistency,
              "--backup_workers=" + std::to_string(backup_workers),
              "--heartbeat_interval_ms=100",
              "--dump_shard=" + (dir / "s{rank}.bin").string()};
  }
  ~KilledJob() {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
  // False (with the log in *why) when a step did not happen in time.
  bool Start(std::string* why) {
    if (!c.StartScheduler(3, 2,
                          {"--replication=1", "--heartbeat_timeout_ms=1000",
                           "--server_restart_timeout_ms=2000"})) {
      *why = c.Log();
      return false;
    }
    for (int s = 0; s < 3; ++s) c.StartServer(s, server);
    for (int w = 0; w < 2; ++w) {
      c.StartWorker(w, {"--model=synthetic", "--num_params=" + std::to_string(kD), "--epochs=40",
                        "--rounds_per_epoch=100", "--compressor=topk", "--density=0.01",
                        "--heartbeat_interval_ms=100", "--round_timeout_ms=30000",
                        "--dump_weights=" + (dir / "w{rank}.bin").string()});
    }
    if (!c.WaitForStatus([](const pb::JobStatus& st) { return st.progress().round() >= 1000; },
                         milliseconds(60000))) {
      *why = "no round 1000: " + c.Log();
      return false;
    }
    c.server(1).Kill(SIGKILL);
    // The failover: server 2's row of the job status names shard 1 among its primary shards.
    if (!c.WaitForStatus([](const pb::JobStatus& st) { return Serves(st, 2, 1); },
                         milliseconds(10000))) {
      *why = "no failover: " + c.Log();
      return false;
    }
    // A server that says it cannot be rebuilt (no sieve-server does) under the failed-over rank.
    NodeOptions no;
    no.role = pb::ROLE_SERVER;
    no.rank = 1;
    no.scheduler = c.address();
    no.transport.bind_host = "127.0.0.1";
    no.rebuildable = false;
    no.heartbeat_interval = milliseconds(0);
    no.register_attempts = 3;
    auto refused = Node::Start(no);
    not_rebuildable = refused.ok() ? Status::Ok() : refused.status();
    c.StartServer(1, server);
    return true;
  }
  Status not_rebuildable;  // what the scheduler answered that REGISTER
  fs::path dir;
  std::vector<std::string> server;
  testing::FaultCluster c;
};

// The replacement of server 1 comes to hold copies of shard 1 (its own, served by server 2 now,
// until server 2 hands it back) and of shard 0, and the job finishes with every process exiting 0
// and every round done. The copies are server 1's row of the job status: a process that took
// the rank again (restarts), alive, with shard 0 among its backup shards and shard 1 among its
// backup or (handed back) primary shards.
// Every process of the job ends with exit 0 and every worker trained its 4000 rounds.
void ExpectFinished(testing::FaultCluster& c) {
  ASSERT_TRUE(c.WaitAll(milliseconds(120000))) << c.Log();
  EXPECT_TRUE(c.AllExitedZero()) << c.Log();
  for (int w = 0; w < 2; ++w) EXPECT_EQ(c.WorkerSummary(w).at("rounds"), "4000") << c.Log();
}

void ExpectRebuiltAndFinished(testing::FaultCluster& c) {
  ASSERT_TRUE(c.WaitForStatus(
      [](const pb::JobStatus& st) {
        const pb::JobNode* n = testing::FindNode(st, pb::ROLE_SERVER, 1);
        return n != nullptr && n->restarts() >= 1 && n->state() != pb::NODE_LOST &&
               Contains(n->backup_shards(), 0) &&
               (Contains(n->backup_shards(), 1) || Contains(n->primary_shards(), 1));
      },
      milliseconds(40000)))
      << c.Log();
  ExpectFinished(c);
}

// The checksum of shard `shard` in server `server`'s summary of the shards it took over ("" when
// it took over none).
std::string SummaryChecksum(testing::FaultCluster& c, int server, int shard) {
  for (const testing::KeyValues& s : c.ShardSummaries(server)) {
    if (s.at("shard") == std::to_string(shard)) return s.at("checksum");
  }
  return "";
}

// Starts `job` (a fatal failure when a step did not happen in time) and expects server 1's
// replacement rebuilt and the job finished (ExpectRebuiltAndFinished).
void StartAndExpectRebuiltAndFinished(KilledJob& job) {
  std::string why;
  ASSERT_TRUE(job.Start(&why)) << why;
  ExpectRebuiltAndFinished(job.c);
}

// Shard 1 ends where it is served (server 2's promoted copy, or server 1 after a hand-back) with
// the same bytes as its other copy: the replacement's dump is its copy of shard 1, server 2's
// shard summary has the checksum of its copy.
void ExpectTheCopiesOfShard1Agree(KilledJob& job) {
  const std::string s1 = ReadFile(job.dir / "s1.bin");
  ASSERT_EQ(s1.size(), kD / 3 * 4) << job.c.Log();
  char want[9];
  std::snprintf(want, sizeof want, "%08x", Crc32(s1));
  EXPECT_EQ(SummaryChecksum(job.c, 2, 1), want) << job.c.Log();
}

TEST(FailoverTest, BspAKilledServersShardGoesOnAtItsBackupAndItsReplacementIsRebuilt) {
  KilledJob job("bsp");
  ASSERT_NO_FATAL_FAILURE(StartAndExpectRebuiltAndFinished(job));
  testing::FaultCluster& c = job.c;
  // Replicas equal the servers: shards 0 and 2 from the servers' dumps (server 1's replacement
  // dumps its copy of shard 1, which must be the same bytes), shard 1 (promoted on server 2) by
  // its checksum.
  const std::string w0 = ReadFile(job.dir / "w0.bin");
  ASSERT_EQ(w0.size(), 4 * kD);
  EXPECT_EQ(w0, ReadFile(job.dir / "w1.bin"));
  const uint64_t per = kD / 3 * 4;
  EXPECT_EQ(w0.substr(0, per), ReadFile(job.dir / "s0.bin"));
  EXPECT_EQ(w0.substr(per, per), ReadFile(job.dir / "s1.bin")) << "the rebuilt copy differs";
  EXPECT_EQ(w0.substr(2 * per), ReadFile(job.dir / "s2.bin"));
  char want[9];
  std::snprintf(want, sizeof want, "%08x", Crc32(w0.substr(per, per)));
  EXPECT_EQ(SummaryChecksum(c, 2, 1), want) << c.Log();
}

TEST(FailoverTest, AspAKilledServersReplacementIsRebuiltFromTheClocks) {
  KilledJob job("asp");
  ASSERT_NO_FATAL_FAILURE(StartAndExpectRebuiltAndFinished(job));
  ExpectTheCopiesOfShard1Agree(job);
}

// BSP replicated by its pushes (backup workers: 1 of 2): the replacement's snapshots wait for a
// round's end, and it is rebuilt like the others. Before it starts, a REGISTER under the dead rank
// that says it cannot be rebuilt is refused (ERROR_FAILED_OVER) and changes nothing.
TEST(FailoverTest, BspWithBackupWorkersAKilledServersReplacementIsRebuiltAtARoundsEnd) {
  KilledJob job("bsp", /*backup_workers=*/1);
  std::string why;
  ASSERT_TRUE(job.Start(&why)) << why;
  EXPECT_NE(job.not_rebuildable.message().find("ERROR_FAILED_OVER"), std::string::npos)
      << job.not_rebuildable.ToString();
  testing::FaultCluster& c = job.c;
  ExpectRebuiltAndFinished(c);
  if (::testing::Test::HasFatalFailure()) return;
  ExpectTheCopiesOfShard1Agree(job);
}

// Both servers of a 2-server job (BSP, ASP, SSP) with --replication=1 killed together, server 1
// restarted at once and server 0 only after the scheduler declared it lost (the chaos soak's
// schedule: `sieve launch` waited out its restart backoff). Server 1's replacement registers while
// the scheduler still takes server 0 for alive, so shard 1 fails over to server 0, and server 1
// comes back as a rebuilt copy waiting for server 0's snapshot; then server 0 is declared dead and
// both shards wait for it. The restarted server 0 serves both from their checkpoints and rebuilds
// server 1, and the job finishes. Before, server 0 came back serving only its own shard and
// nobody served shard 1: every worker's round timed out, for ever.
class BothServersDie : public ::testing::TestWithParam<const char*> {
 protected:
  void TearDown() override {
    std::error_code ignored;
    if (!dir_.empty()) fs::remove_all(dir_, ignored);
  }
  // Starts the job (2 servers with checkpoints, 2 workers, --replication=1, the scheduler's
  // heartbeat timeout `timeout_ms`) and waits until its slowest worker is past round 500.
  void Start(const std::string& name, int timeout_ms) {
    const std::string consistency = GetParam();
    dir_ = fs::temp_directory_path() /
           ("sieve-failover-" + name + "-" + consistency + std::to_string(getpid()));
    fs::create_directories(dir_);
    server_ = {"--model=synthetic",
               "--num_params=" + std::to_string(kD),
               "--consistency=" + consistency,
               "--heartbeat_interval_ms=100",
               "--checkpoint_dir=" + (dir_ / "ckpt").string(),
               consistency == "bsp" ? "--checkpoint_every=50" : "--checkpoint_every_s=1"};
    ASSERT_TRUE(c_.StartScheduler(
        2, 2,
        {"--replication=1", "--heartbeat_timeout_ms=" + std::to_string(timeout_ms),
         "--server_restart_timeout_ms=60000"}))
        << c_.Log();
    for (int s = 0; s < 2; ++s) c_.StartServer(s, server_);
    for (int w = 0; w < 2; ++w) {
      c_.StartWorker(
          w, {"--model=synthetic", "--num_params=" + std::to_string(kD), "--epochs=40",
              "--rounds_per_epoch=100", "--compressor=topk", "--density=0.01",
              "--straggler=delay:5ms", "--heartbeat_interval_ms=100", "--round_timeout_ms=20000"});
    }
    ASSERT_TRUE(c_.WaitForStatus(
        [](const pb::JobStatus& st) { return st.progress().round() >= 500; }, milliseconds(60000)))
        << c_.Log();
  }
  fs::path dir_;
  std::vector<std::string> server_;
  testing::FaultCluster c_;
};

TEST_P(BothServersDie, AShardWhoseCopiesAllDiedIsServedByItsPrimaryFromItsCheckpoint) {
  ASSERT_NO_FATAL_FAILURE(Start("both", 3000));
  testing::FaultCluster& c = c_;
  c.server(0).Kill(SIGKILL);
  c.server(1).Kill(SIGKILL);
  c.StartServer(1, server_);
  ASSERT_TRUE(c.WaitForStatus([](const pb::JobStatus& st) { return Serves(st, 0, 1); },
                              milliseconds(10000)))
      << "shard 1 did not fail over to server 0\n"
      << c.Log();
  ASSERT_TRUE(c.WaitForNodeState(pb::ROLE_SERVER, 0, pb::NODE_LOST, milliseconds(20000)))
      << c.Log();
  c.StartServer(0, server_);
  ExpectRebuiltAndFinished(c);
}

// Both servers die one after the other: server 0 first, declared dead (shard 0 fails over to
// server 1), then server 1, whose restart serves both shards from their checkpoints while server
// 0 is still dead. Server 0's restart must be rebuilt (copies of both shards) and take shard 0
// back. Before, server 1 started without being told that server 0 was dead, offered the dead
// process a snapshot and counted it a backup, so server 0's restart was sent none: it refused
// every event while it waited for one, was dropped as a backup, and the job trained on with
// server 0 idle and no shard copied (the 30-minute ASP soak, seed 24).
TEST_P(BothServersDie, OneAfterTheOtherTheFirstToReturnIsRebuiltAndTakesItsShardBack) {
  ASSERT_NO_FATAL_FAILURE(Start("serial", 1000));
  testing::FaultCluster& c = c_;
  c.server(0).Kill(SIGKILL);
  ASSERT_TRUE(c.WaitForStatus(
      [](const pb::JobStatus& st) {
        const pb::JobNode* n = testing::FindNode(st, pb::ROLE_SERVER, 0);
        return n != nullptr && n->state() == pb::NODE_LOST && Serves(st, 1, 0);
      },
      milliseconds(20000)))
      << "shard 0 did not fail over to server 1\n"
      << c.Log();
  c.server(1).Kill(SIGKILL);
  c.StartServer(1, server_);
  ASSERT_TRUE(c.WaitForStatus(
      [](const pb::JobStatus& st) {
        const pb::JobNode* n = testing::FindNode(st, pb::ROLE_SERVER, 1);
        return n != nullptr && n->restarts() >= 1 && n->state() != pb::NODE_LOST &&
               Serves(st, 1, 0) && Serves(st, 1, 1);
      },
      milliseconds(20000)))
      << "server 1's restart did not serve both shards\n"
      << c.Log();
  c.StartServer(0, server_);
  ASSERT_TRUE(c.WaitForStatus(
      [](const pb::JobStatus& st) {
        const pb::JobNode* s0 = testing::FindNode(st, pb::ROLE_SERVER, 0);
        const pb::JobNode* s1 = testing::FindNode(st, pb::ROLE_SERVER, 1);
        return s0 != nullptr && s1 != nullptr && Serves(st, 0, 0) && Serves(st, 1, 1) &&
               !Serves(st, 1, 0) && Contains(s0->backup_shards(), 1) &&
               Contains(s1->backup_shards(), 0);
      },
      milliseconds(30000)))
      << "server 0's restart was not rebuilt or did not take shard 0 back\n"
      << c.Log();
  ExpectFinished(c);
}

// BSP: a shard restored behind the workers resyncs by a jump of rounds, after which its copies
// are rebased on a snapshot (docs/architecture.md, "Failure handling").
INSTANTIATE_TEST_SUITE_P(Modes, BothServersDie, ::testing::Values("bsp", "asp", "ssp"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace sieve
