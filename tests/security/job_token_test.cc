// A job token (--job_token) on a real cluster in plaintext mode: the daemons of another job, with
// the same D but another token, are strangers. Every attack below is performed for real against
// live daemons by a peer holding the other token; each must be dropped unanswered (the receiver's
// `foreign` count rises) while the real job runs to its end with exactly its own worker's pushes.
// Without the token (or with the same one) the registration attacks succeed: docs/security.md.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/enum_names.h"
#include "net/transport.h"
#include "proto/codec.h"
#include "proto/job_identity.h"
#include "proto/messages.h"
#include "tests/fault/cluster.h"
#include "tests/proto/test_util.h"

namespace sieve {
namespace {

using std::chrono::milliseconds;
using testing::FaultCluster;

constexpr char kToken[] = "--job_token=job-A";
constexpr char kD[] = "--num_params=1000";
// What the worker runs: `rounds` rounds (the server's `applied` count when only it pushes).
std::vector<std::string> WorkerFlags(int rounds) {
  return {kToken,
          kD,
          "--model=synthetic",
          "--rounds_per_epoch=" + std::to_string(rounds),
          "--epochs=1",
          "--compressor=topk",
          "--density=0.1",
          "--progress=log"};
}

// A peer of job B on loopback: its transport stamps job B's identity on every message.
std::unique_ptr<Transport> Stranger() {
  TransportOptions o;
  o.bind_host = "127.0.0.1";
  o.advertise_host = "127.0.0.1";
  o.send_timeout = std::chrono::milliseconds(100);
  o.job = JobDigest("job-B");
  auto t = CreateZmqTransport(o);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(t).value() : nullptr;
}

// Connects `peer` to the scheduler at `address` (HOST:PORT) as node 0.
void ConnectToScheduler(Transport& peer, const std::string& address) {
  const size_t colon = address.rfind(':');
  ASSERT_TRUE(peer.Connect(kSchedulerId, address.substr(0, colon),
                           static_cast<uint16_t>(std::stoi(address.substr(colon + 1))))
                  .ok());
}

// A REGISTER as a node of `role` would send it, answered at `peer`'s own port.
Frames Register(const Transport& peer, pb::Role role, int rank, uint64_t instance,
                uint64_t num_params) {
  return std::move(EncodeControl(MakeRegisterHeader(role, peer.host(), peer.port(), rank, instance,
                                                    num_params)))
      .value();
}

// A free port for a daemon (bound a moment ago by a throw-away transport).
uint16_t FreePort() {
  auto probe = Stranger();
  return probe == nullptr ? 0 : probe->port();
}

// Expects the job to have ended well: every process exited 0 and the server applied exactly the
// worker's pushes, one per round.
void ExpectJobSucceeded(FaultCluster& c, int rounds = 300) {
  EXPECT_TRUE(c.AllExitedZero()) << c.Log();
  testing::KeyValues s = c.ServerSummary(0);
  EXPECT_EQ(s["rounds"], std::to_string(rounds)) << c.Log();
  EXPECT_EQ(s["applied"], std::to_string(rounds));
  EXPECT_EQ(s["rejoins"], "0");
  EXPECT_EQ(c.WorkerSummary(0)["rounds"], std::to_string(rounds));
}

// The scheduler's count of foreign messages in its final job status (--status_file), or -1 when
// it wrote none.
int64_t SchedulerForeign(FaultCluster& c) {
  const std::optional<pb::JobStatus> status = c.JobStatus();
  return status ? static_cast<int64_t>(status->foreign_messages()) : -1;
}

// Waits (bounded) until the scheduler's job status counts at least `n` foreign messages.
bool SchedulerDropped(FaultCluster& c, uint64_t n) {
  return c
      .WaitForStatus([n](const pb::JobStatus& st) { return st.foreign_messages() >= n; },
                     milliseconds(30000))
      .has_value();
}

// Another job's daemons (same D, token B) register at this job's scheduler before this job's
// own, and job B's peer pushes at this job's server during the run: the scheduler and the server
// drop all of it unanswered; job B's daemons never get an answer and give up; job A succeeds.
TEST(JobTokenTest, AnotherJobWithTheSameDIsRefused) {
  FaultCluster c;
  ASSERT_TRUE(c.StartScheduler(1, 1, {kToken})) << c.Log();
  testing::Subprocess& other_server =
      c.StartServer(0, {"--job_token=job-B", kD, "--model=synthetic"});
  ASSERT_TRUE(SchedulerDropped(c, 1)) << c.Log();
  const uint16_t server_port = FreePort();
  c.StartServer(0, {kToken, kD, "--model=synthetic", "--port=" + std::to_string(server_port)});
  std::unique_ptr<Transport> peer = Stranger();
  ASSERT_NE(peer, nullptr);
  ASSERT_TRUE(peer->Connect(1, "127.0.0.1", server_port).ok());
  std::atomic<bool> stop{false};
  std::thread pushes([&] {
    // A well-formed PUSH for shard 0 claiming to be worker 0 (node 2), for each round in turn.
    for (uint64_t round = 0; !stop; round = (round + 1) % 300) {
      auto frames = testing::EncodePairs(MakeDataHeader(pb::MSG_PUSH, 2, 1, 0, round), {3}, {1e6f});
      if (frames.ok()) (void)peer->TrySend(1, std::move(frames).value());
      std::this_thread::sleep_for(milliseconds(2));
    }
  });
  // Job B's pushes go on while this job runs (300 rounds of at least 5 ms: long enough for the
  // peer's connection to the server to come up); the server's summary counts them dropped.
  std::vector<std::string> worker = WorkerFlags(300);
  worker.push_back("--straggler=delay:5ms");
  c.StartWorker(0, worker);
  const bool ended = c.WaitAll(milliseconds(120000));
  stop = true;
  pushes.join();
  ASSERT_TRUE(ended) << c.Log();
  ExpectJobSucceeded(c);
  EXPECT_GT(std::stoll(c.ServerSummary(0)["foreign"]), 0) << c.Log();
  EXPECT_GT(SchedulerForeign(c), 0) << c.Log();
  // Job B's server registered 20 times without an answer and gave up (60 s bounds a hang).
  auto st = other_server.Wait(milliseconds(60000));
  ASSERT_TRUE(st.has_value());
  EXPECT_FALSE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0);
}

// A stranger's REGISTER for the live server's rank while the job runs (the "rank takeover"):
// without a token it would replace the server and receive every gradient.
TEST(JobTokenTest, RankTakeoverByAStrangerIsIgnored) {
  FaultCluster c;
  ASSERT_TRUE(c.StartScheduler(1, 1, {kToken})) << c.Log();
  c.StartServer(0, {kToken, kD, "--model=synthetic"});
  // Rounds enough for the job to run a few seconds: its status file is rewritten about once a
  // second while it runs, and one of those must show the takeover's REGISTERs dropped.
  constexpr int kRounds = 15000;
  c.StartWorker(0, WorkerFlags(kRounds));
  std::unique_ptr<Transport> peer = Stranger();
  ASSERT_NE(peer, nullptr);
  ASSERT_NO_FATAL_FAILURE(ConnectToScheduler(*peer, c.address()));
  // The takeover starts once the job runs (earlier it would be squatting, tested below).
  ASSERT_TRUE(c.WaitForRunning(milliseconds(60000))) << c.Log();
  std::atomic<bool> stop{false};
  std::thread takeover([&] {
    while (!stop) {
      (void)peer->TrySend(kSchedulerId, Register(*peer, pb::ROLE_SERVER, 0, 77, 0));
      std::this_thread::sleep_for(milliseconds(5));
    }
  });
  // At least one REGISTER was dropped while the job ran: the stranger sent nothing before, so a
  // running job's status that counts a foreign message saw one of the takeover's.
  const bool during = c.WaitForStatus(
                           [](const pb::JobStatus& st) {
                             return st.phase() == pb::JOB_RUNNING && st.foreign_messages() > 0;
                           },
                           milliseconds(60000))
                          .has_value();
  const bool ended = c.WaitAll(milliseconds(120000));
  stop = true;
  takeover.join();
  ASSERT_TRUE(ended) << c.Log();
  ExpectJobSucceeded(c, kRounds);
  EXPECT_TRUE(during) << "no takeover attempt arrived while the job ran\n" << c.Log();
  // No process but the job's own ever held the server's rank.
  const std::optional<pb::JobStatus> status = c.JobStatus();
  ASSERT_TRUE(status.has_value()) << c.Log();
  const pb::JobNode* server = testing::FindNode(*status, pb::ROLE_SERVER, 0);
  ASSERT_NE(server, nullptr) << c.Log();
  EXPECT_EQ(server->restarts(), 0u) << c.Log();
  EXPECT_EQ(server->lost_reason(), "") << c.Log();
  Frames got;
  auto r = peer->Recv(&got, std::chrono::milliseconds(0));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r) << "the scheduler answered a stranger";
}

// Registration attacks before the job starts, by a stranger, each of which breaks a job without a
// token: squatting the ranks the job's nodes ask for, registering fake workers to fill the job,
// declaring another D first (the scheduler takes D from the workers here).
enum class EarlyAttack { kSquatRanks, kFakeWorkers, kOtherD };

class JobTokenEarlyTest : public ::testing::TestWithParam<EarlyAttack> {};

TEST_P(JobTokenEarlyTest, RegistrationBeforeTheStartIsIgnored) {
  FaultCluster c;
  ASSERT_TRUE(c.StartScheduler(1, 1, {kToken})) << c.Log();  // no --num_params
  std::unique_ptr<Transport> peer = Stranger();
  ASSERT_NE(peer, nullptr);
  ASSERT_NO_FATAL_FAILURE(ConnectToScheduler(*peer, c.address()));
  std::vector<Frames> attack;
  switch (GetParam()) {
    case EarlyAttack::kSquatRanks:
      attack.push_back(Register(*peer, pb::ROLE_SERVER, 0, 11, 0));
      attack.push_back(Register(*peer, pb::ROLE_WORKER, 0, 12, 1000));
      break;
    case EarlyAttack::kFakeWorkers:
      attack.push_back(Register(*peer, pb::ROLE_WORKER, -1, 21, 0));
      attack.push_back(Register(*peer, pb::ROLE_WORKER, -1, 22, 0));
      break;
    case EarlyAttack::kOtherD:
      attack.push_back(Register(*peer, pb::ROLE_WORKER, -1, 31, 5));
      break;
  }
  for (Frames& f : attack) ASSERT_TRUE(peer->Send(kSchedulerId, std::move(f)).ok());
  // The scheduler has seen (and dropped) the attack before the job's own nodes register.
  ASSERT_TRUE(SchedulerDropped(c, attack.size())) << c.Log();
  c.StartServer(0, {kToken, kD, "--model=synthetic"});
  c.StartWorker(0, WorkerFlags(300));
  ASSERT_TRUE(c.WaitAll(milliseconds(120000))) << c.Log();
  ExpectJobSucceeded(c);
  EXPECT_GE(SchedulerForeign(c), static_cast<int64_t>(attack.size())) << c.Log();
  Frames got;
  auto r = peer->Recv(&got, std::chrono::milliseconds(0));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r) << "the scheduler answered a stranger";
}

constexpr EnumName<EarlyAttack> kEarlyAttackNames[] = {{EarlyAttack::kSquatRanks, "SquatRanks"},
                                                       {EarlyAttack::kFakeWorkers, "FakeWorkers"},
                                                       {EarlyAttack::kOtherD, "OtherD"}};

INSTANTIATE_TEST_SUITE_P(Attacks, JobTokenEarlyTest,
                         ::testing::Values(EarlyAttack::kSquatRanks, EarlyAttack::kFakeWorkers,
                                           EarlyAttack::kOtherD),
                         [](const ::testing::TestParamInfo<EarlyAttack>& info) {
                           return std::string(EnumNameOf(kEarlyAttackNames, info.param, "Unknown"));
                         });

}  // namespace
}  // namespace sieve
