// A worker survives ERRORs a peer can forge ("one packet kills a worker"): while a job
// runs, an intruder on the same network keeps sending the worker ERRORs that claim to come from
// server 0 and reject the worker's PUSH of every round (plaintext mode: the header's sender is
// not authenticated). The worker answers an ERROR for its current round by pushing again (a
// bounded number of times) instead of failing; the job completes every round and exits 0.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "net/transport.h"
#include "proto/codec.h"
#include "proto/messages.h"
#include "tests/fault/cluster.h"

namespace sieve {
namespace {

using std::chrono::milliseconds;
using testing::FaultCluster;

TEST(ForgedErrorTest, WorkerPushesAgainAndTheJobFinishes) {
  TransportOptions to;
  to.bind_host = "127.0.0.1";
  to.advertise_host = "127.0.0.1";
  to.send_timeout = std::chrono::milliseconds(100);
  auto intruder = CreateZmqTransport(to);
  auto probe = CreateZmqTransport(to);  // a port that was free a moment ago, for the worker
  ASSERT_TRUE(intruder.ok() && probe.ok());
  const uint16_t worker_port = (*probe)->port();
  probe->reset();

  FaultCluster c;
  ASSERT_TRUE(c.StartScheduler(1, 1, {"--num_params=100000"})) << c.Log();
  c.StartServer(0, {"--model=synthetic", "--num_params=100000", "--heartbeat_interval_ms=200"});
  constexpr int kRounds = 3000;
  c.StartWorker(0, {"--model=synthetic", "--num_params=100000", "--epochs=1",
                    "--rounds_per_epoch=" + std::to_string(kRounds), "--compressor=topk",
                    "--density=0.01", "--port=" + std::to_string(worker_port), "--progress=log",
                    "--heartbeat_interval_ms=200"});
  // Node ids: 0 scheduler, 1 server 0, 2 worker 0.
  ASSERT_TRUE((*intruder)->Connect(2, "127.0.0.1", worker_port).ok());
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> forged{0};
  std::thread flood([&] {
    while (!stop) {
      for (uint64_t round = 0; round < kRounds && !stop; ++round) {
        const pb::Header h =
            MakeErrorHeader(1, 2, round, pb::ERROR_INDEX_ORDER, "forged", pb::MSG_PUSH);
        auto frames = EncodeControl(h);
        if (frames.ok() && (*intruder)->TrySend(2, std::move(frames).value()).ok()) ++forged;
        if (round % 16 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
  });
  const bool ended = c.WaitAll(milliseconds(120000));
  stop = true;
  flood.join();
  ASSERT_TRUE(ended) << c.Log();
  auto st = c.worker(0).Wait(milliseconds(1));
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << c.Log();
  const testing::KeyValues summary = c.WorkerSummary(0);
  EXPECT_EQ(summary.at("rounds"), std::to_string(kRounds)) << c.Log();
  // A clean job retries nothing: every retry the worker counted answered a forged ERROR.
  EXPECT_GT(std::stoull(summary.at("errors_retried")), 0u)
      << "no forged ERROR reached the worker during its round (" << forged << " sent)\n"
      << c.Log().substr(0, 4000);
}

}  // namespace
}  // namespace sieve
