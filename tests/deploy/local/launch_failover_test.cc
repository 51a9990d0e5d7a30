// `sieve launch` with the scheduler's --replication=1 and the real daemons of the build tree (a
// --model=synthetic job, no data set, no restarts, no checkpoint directory): the test kills
// server 0 with SIGKILL half-way through. Its shard fails over to its backup on server 1, and the
// job ends with exit 0. BSP (with --ordered_rounds, so that runs are reproducible): every worker's
// final weights are bitwise those of the same job run without the kill. ASP: nothing pushed is
// lost (Σ pushed by the workers = Σ applied by the shards, the failed-over one included). Each
// mode also survives a second kill after the first server was rebuilt. Where the shards are is
// read from the scheduler's job status (--status_file: each server's primary and backup shards).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <optional>

#include "tests/deploy/local/launch_fixture.h"
#include "tests/net/summary_file.h"

namespace sieve {
namespace {

constexpr int kEpochs = 30;

class LaunchFailover : public LauncherIntegration {
 protected:
  // Runs a 2-server, 4-worker synthetic job with --replication=1 writing each worker's final
  // weights to <root>/<tag>-w<rank>.bin; with `kill` true, server 0 is killed with SIGKILL once
  // a worker logged the end of epoch kEpochs / 2.
  // With `restarts` > 0 (--max_restarts) the killed server is restarted and rebuilt, and once
  // both of its copies are back and it serves its shard again, server 1 is killed too (*killed
  // counts the kills). The scheduler writes its job status to StatusPath(tag).
  RunResult Run(const std::string& tag, bool kill, const std::vector<std::string>& extra,
                int* killed, int restarts = 0) {
    std::vector<std::string> args = {
        "launch", "--num_servers=2", "--num_workers=4", "--progress=off",
        "--max_restarts=" + std::to_string(restarts), "--", "--replication=1", "--model=synthetic",
        "--num_params=20000", "--epochs=" + std::to_string(kEpochs), "--rounds_per_epoch=100",
        "--compressor=topk", "--density=0.01", "--heartbeat_interval_ms=100",
        "--heartbeat_timeout_ms=1000",
        // At least 1 ms a round: the kills, paced by the job status
        // (rewritten every 250 ms), land well inside the job.
        "--straggler=delay:1ms", "--dump_weights=" + (root_ / (tag + "-w{rank}.bin")).string(),
        "--status_file=" + StatusPath(tag).string(), "--status_file_interval_ms=250",
        "--summary_out=" + (root_ / (tag + "-{role}-{rank}.json")).string()};
    args.insert(args.end(), extra.begin(), extra.end());
    *killed = 0;
    return RunSieve(
        args, {},
        [&](pid_t launcher, const std::string&) {
          if (!kill) return;
          const std::optional<pb::JobStatus> status = ReadJobStatus(StatusPath(tag));
          if (!status) return;
          // The first kill half-way through (the slowest worker's round, at most a second old).
          if (*killed == 0 && status->progress().round() < 100 * kEpochs / 2) return;
          if (*killed == 0) {
            const pid_t server = ChildPid(launcher, "sieve-server", 0);
            if (server > 0 && ::kill(server, SIGKILL) == 0) *killed = 1;
            return;
          }
          if (*killed != 1 || restarts == 0) return;
          if (Rebuilt(*status, 0) && Serves(*status, 0, 0)) {
            // Server 0's new process holds copies of both shards and shard 0 was handed back.
            const pid_t server = ChildPid(launcher, "sieve-server", 1);
            if (server > 0 && ::kill(server, SIGKILL) == 0) *killed = 2;
          }
        },
        std::chrono::seconds(240));
  }

  fs::path StatusPath(const std::string& tag) const { return root_ / (tag + "-status.json"); }

  // The final job status of the run `tag` (the scheduler writes it before it exits).
  pb::JobStatus FinalStatus(const std::string& tag) const {
    const std::optional<pb::JobStatus> status = ReadJobStatus(StatusPath(tag));
    EXPECT_TRUE(status.has_value()) << "no job status in " << StatusPath(tag);
    return status.value_or(pb::JobStatus());
  }

  static bool Has(const google::protobuf::RepeatedField<int32_t>& shards, int shard) {
    return std::find(shards.begin(), shards.end(), shard) != shards.end();
  }
  // Whether server `rank`'s row of `status` names `shard` among its primary shards.
  static bool Serves(const pb::JobStatus& status, int rank, int shard) {
    const pb::JobNode* n = NodeOf(status, pb::ROLE_SERVER, rank);
    return n != nullptr && Has(n->primary_shards(), shard);
  }
  // Whether server `rank` is a new process of its rank (a restart), alive, holding a copy of each
  // of the 2 shards, as primary or backup: both were rebuilt from their primaries' snapshots (a
  // new process holds nothing else).
  static bool Rebuilt(const pb::JobStatus& status, int rank) {
    const pb::JobNode* n = NodeOf(status, pb::ROLE_SERVER, rank);
    if (n == nullptr || n->restarts() < 1 || n->state() == pb::NODE_LOST) return false;
    for (int shard = 0; shard < 2; ++shard) {
      if (!Has(n->primary_shards(), shard) && !Has(n->backup_shards(), shard)) return false;
    }
    return true;
  }

  // After the two kills of the run `tag`: the job finished, and each server's rank was taken by
  // one new process, which was rebuilt (holds both shards).
  void ExpectFailedOverAndRebuilt(const std::string& tag) const {
    const pb::JobStatus status = FinalStatus(tag);
    EXPECT_EQ(status.phase(), pb::JOB_FINISHED) << JobStatusToJson(status);
    for (int rank = 0; rank < 2; ++rank) {
      const pb::JobNode* n = NodeOf(status, pb::ROLE_SERVER, rank);
      ASSERT_NE(n, nullptr) << JobStatusToJson(status);
      EXPECT_EQ(n->restarts(), 1u) << JobStatusToJson(status);
      EXPECT_FALSE(n->lost_reason().empty()) << JobStatusToJson(status);
      EXPECT_TRUE(Rebuilt(status, rank)) << "server " << rank << ": " << JobStatusToJson(status);
    }
  }

  // In the final status of the run `tag`, server `rank` was promoted at least once: a failover
  // made it the primary of the other server's shard (with 2 servers, server 1 - rank's), even if
  // it handed the shard back since.
  void ExpectPromoted(const std::string& tag, int rank) const {
    const pb::JobStatus status = FinalStatus(tag);
    const pb::JobNode* n = NodeOf(status, pb::ROLE_SERVER, rank);
    ASSERT_NE(n, nullptr) << JobStatusToJson(status);
    EXPECT_GE(n->promotions(), 1u) << "server " << rank << " never took shard " << 1 - rank
                                   << " over: " << JobStatusToJson(status);
  }

  std::string Weights(const std::string& tag, int rank) const {
    std::ifstream in(root_ / (tag + "-w" + std::to_string(rank) + ".bin"), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  // Every worker's final weights of run `kill` are bitwise those of the undisturbed run `base`.
  void ExpectSameWeights(const std::string& base, const std::string& kill) const {
    for (int w = 0; w < 4; ++w) {
      const std::string a = Weights(base, w), b = Weights(kill, w);
      ASSERT_FALSE(a.empty()) << "worker " << w;
      EXPECT_TRUE(a == b) << "worker " << w << "'s final weights differ from the undisturbed run's";
    }
  }

  // The run summary (--summary_out) of the last process of `role` and `rank` in the run `tag`;
  // empty when it wrote none.
  testing::KeyValues Summary(const std::string& tag, const std::string& role, int rank) const {
    return testing::ReadSummaryFile(
        (root_ / (tag + "-" + role + "-" + std::to_string(rank) + ".json")).string());
  }

  // The shard `shard` that server `rank` took over at failover in the run `tag` (its summary's
  // "shards"); empty when it took over none.
  testing::KeyValues ShardSummary(const std::string& tag, int rank, int shard) const {
    for (const testing::KeyValues& s : testing::ReadShardSummaries(
             (root_ / (tag + "-server-" + std::to_string(rank) + ".json")).string())) {
      if (s.at("shard") == std::to_string(shard)) return s;
    }
    return {};
  }

  // Σ of the values the 4 workers pushed (their summaries' pushed_sum); NaN when one is missing.
  double WorkersPushed(const std::string& tag) const {
    double pushed = 0;
    for (int w = 0; w < 4; ++w) {
      const testing::KeyValues kv = Summary(tag, "worker", w);
      if (kv.count("pushed_sum") != 1) return std::nan("");
      pushed += std::stod(kv.at("pushed_sum"));
    }
    return pushed;
  }
};

TEST_F(LaunchFailover, BspKillOfAServerLosesNothingAndEndsBitwiseAsWithoutTheKill) {
  int killed = 0;
  RunResult base = Run("base", false, {"--ordered_rounds"}, &killed);
  ASSERT_FALSE(base.timed_out) << base.output;
  ASSERT_EQ(ExitCode(base), 0) << base.output;
  // Checkpoints on top: they change no weight; the copy that serves shard 0 after the kill goes
  // on writing the shard's checkpoint.
  const std::string ckpt = (root_ / "ckpt").string();
  RunResult run =
      Run("kill", true, {"--ordered_rounds", "--checkpoint_dir=" + ckpt, "--checkpoint_every=500"},
          &killed);
  ASSERT_FALSE(run.timed_out) << run.output;
  ASSERT_EQ(killed, 1) << run.output;
  EXPECT_EQ(ExitCode(run), 0) << run.output;
  EXPECT_NE(run.output.find("sieve launch: lost server 0 (killed by signal 9"), std::string::npos)
      << run.output;
  // The job's end: server 0 lost, its shard served by its backup, server 1, promoted.
  const pb::JobStatus status = FinalStatus("kill");
  EXPECT_EQ(status.phase(), pb::JOB_FINISHED) << JobStatusToJson(status);
  const pb::JobNode* s0 = NodeOf(status, pb::ROLE_SERVER, 0);
  const pb::JobNode* s1 = NodeOf(status, pb::ROLE_SERVER, 1);
  ASSERT_TRUE(s0 != nullptr && s1 != nullptr) << JobStatusToJson(status);
  EXPECT_EQ(s0->state(), pb::NODE_LOST) << JobStatusToJson(status);
  EXPECT_EQ(s1->state(), pb::NODE_PROMOTED) << JobStatusToJson(status);
  EXPECT_EQ(s1->promotions(), 1u) << JobStatusToJson(status);
  EXPECT_TRUE(Serves(status, 1, 0)) << JobStatusToJson(status);
  const testing::KeyValues shard0 = ShardSummary("kill", 1, 0);
  ASSERT_EQ(shard0.count("promoted_round"), 1u) << run.output;
  EXPECT_EQ(shard0.at("shard"), "0");
  const uint64_t promoted = std::stoull(shard0.at("promoted_round"));
  const uint64_t rounds = 100 * kEpochs;
  EXPECT_GT(promoted, 0u);
  EXPECT_LT(promoted, rounds);
  EXPECT_EQ(shard0.at("rounds"), std::to_string(rounds)) << "the shard skipped or replayed rounds";
  ExpectSameWeights("base", "kill");
  // server/checkpoint/checkpoint.h's layout: the round after magic, version, reserved and config (24 bytes).
  std::ifstream in(ckpt + "/server-0.ckpt", std::ios::binary);
  uint64_t ckpt_round = 0;
  in.seekg(24);
  in.read(reinterpret_cast<char*>(&ckpt_round), sizeof ckpt_round);
  ASSERT_TRUE(in.good()) << "no checkpoint of shard 0";
  EXPECT_GT(ckpt_round, promoted) << "the promoted copy wrote no checkpoint of shard 0";
}

TEST_F(LaunchFailover, AspKillOfAServerLosesNoPush) {
  int killed = 0;
  RunResult run = Run("asp", true, {"--consistency=asp"}, &killed);
  ASSERT_FALSE(run.timed_out) << run.output;
  ASSERT_EQ(killed, 1) << run.output;
  EXPECT_EQ(ExitCode(run), 0) << run.output;
  const double pushed = WorkersPushed("asp");
  const testing::KeyValues server1 = Summary("asp", "server", 1);
  const testing::KeyValues shard0 = ShardSummary("asp", 1, 0);
  ASSERT_EQ(server1.count("pushed_sum"), 1u) << run.output;
  ASSERT_EQ(shard0.count("pushed_sum"), 1u) << run.output;
  EXPECT_EQ(server1.at("promoted"), "0");
  const double applied = std::stod(server1.at("pushed_sum")) + std::stod(shard0.at("pushed_sum"));
  EXPECT_NEAR(applied, pushed, 1e-6 * (1 + std::abs(pushed))) << run.output;
}

// The second kill: server 0 killed, restarted and rebuilt (the primaries send it their
// shards' snapshots) and given its shard back, then server 1 killed: its shard fails over to the
// rebuilt server 0, server 1 is rebuilt in turn, and the job still ends bitwise as without kills.
TEST_F(LaunchFailover, BspASecondKillAfterTheRebuildLosesNothingEither) {
  int killed = 0;
  RunResult base = Run("base2", false, {"--ordered_rounds"}, &killed);
  ASSERT_EQ(ExitCode(base), 0) << base.output;
  RunResult run = Run("twice", true, {"--ordered_rounds"}, &killed, /*restarts=*/2);
  ASSERT_FALSE(run.timed_out) << run.output;
  ASSERT_EQ(killed, 2) << run.output;
  EXPECT_EQ(ExitCode(run), 0) << run.output;
  // Shard 0 went to server 1 and came back (the second kill waited for the job status to show
  // it back); shard 1 then failed over to server 0. Both servers ended as new processes rebuilt
  // from snapshots. A failover lasts only until the rebuilt server takes its shard back, less than
  // the job status's period: each server's row counts the failovers that promoted it.
  ExpectPromoted("twice", 1);
  ExpectPromoted("twice", 0);
  ExpectFailedOverAndRebuilt("twice");
  ExpectSameWeights("base2", "twice");
}

// The second kill where rounds do not replay bitwise (ASP; BSP with a backup worker, whose late
// pushes land in whichever round is open): the rebuilt copies get the shards' clocks or round
// states and pushed sums in their snapshots, so nothing pushed is lost across both kills: Σ pushed
// by the workers = Σ over the two shards of what their copies applied (each server's own shard),
// and the copy of shard 1 that server 0 served after the second kill agrees with server 1's
// rebuilt one.
class LaunchFailoverTwice : public LaunchFailover,
                            public ::testing::WithParamInterface<const char*> {};

TEST_P(LaunchFailoverTwice, ASecondKillAfterTheRebuildLosesNoPushEither) {
  int killed = 0;
  RunResult run = Run(std::string("twice-") + (GetParam()[2] == 'c' ? "asp" : "bw"), true,
                      {GetParam()}, &killed, /*restarts=*/2);
  ASSERT_FALSE(run.timed_out) << run.output;
  ASSERT_EQ(killed, 2) << run.output;
  EXPECT_EQ(ExitCode(run), 0) << run.output;
  // A failover lasts less than the job status's period here (see above): server 0's row counts
  // it.
  ExpectPromoted(std::string("twice-") + (GetParam()[2] == 'c' ? "asp" : "bw"), 0);
  ExpectFailedOverAndRebuilt(std::string("twice-") + (GetParam()[2] == 'c' ? "asp" : "bw"));
  const std::string tag = std::string("twice-") + (GetParam()[2] == 'c' ? "asp" : "bw");
  const double pushed = WorkersPushed(tag);
  const testing::KeyValues server0 = Summary(tag, "server", 0);
  const testing::KeyValues server1 = Summary(tag, "server", 1);
  const testing::KeyValues shard1 = ShardSummary(tag, 0, 1);
  ASSERT_EQ(server0.count("pushed_sum"), 1u) << run.output;
  ASSERT_EQ(server1.count("pushed_sum"), 1u) << run.output;
  ASSERT_EQ(shard1.count("pushed_sum"), 1u) << run.output;
  const double tolerance = 1e-6 * (1 + std::abs(pushed));
  EXPECT_NEAR(std::stod(server0.at("pushed_sum")) + std::stod(server1.at("pushed_sum")), pushed,
              tolerance)
      << run.output;
  EXPECT_NEAR(std::stod(shard1.at("pushed_sum")), std::stod(server1.at("pushed_sum")), tolerance);
  EXPECT_EQ(shard1.at("applied"), server1.at("applied"));
  EXPECT_EQ(shard1.at("checksum"), server1.at("checksum")) << "the two copies of shard 1 differ";
}

INSTANTIATE_TEST_SUITE_P(AspOrBackupWorkers, LaunchFailoverTwice,
                         ::testing::Values("--consistency=asp", "--backup_workers=1"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param[2] == 'c' ? "Asp" : "BspBackupWorker");
                         });

TEST_F(LaunchFailover, AReplicationFactorOfAtLeastTheServersIsRefusedUpFront) {
  RunResult r = RunSieve({"launch", "--num_servers=2", "--num_workers=1", "--", "--replication=2",
                          "--model=synthetic", "--num_params=1000"});
  EXPECT_EQ(ExitCode(r), 2) << r.output;
  EXPECT_NE(r.output.find("--replication must be an integer in [0, 1]"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("needs at least r + 1 servers"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace sieve
