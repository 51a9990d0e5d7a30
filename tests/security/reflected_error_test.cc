// Log lines a peer can cause are rate-limited where they are written (net/rejection_log.h): an
// insider (here: plaintext without a token, where anyone is one) sends the scheduler thousands of
// SHUTDOWNs claiming to be worker 0 (node 2). The scheduler answers each with an ERROR
// ("the scheduler does not accept SHUTDOWN") at the real worker, which used to log a line per
// ERROR from the scheduler (99,998 lines of "node 2 already waits in 4 barriers" in the attack
// review, the same path). The worker must log a bounded number of them and the job succeed.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <memory>
#include <string>

#include "net/transport.h"
#include "proto/codec.h"
#include "proto/messages.h"
#include "tests/fault/cluster.h"

namespace sieve {
namespace {

using std::chrono::milliseconds;

constexpr int kFlood = 3000;

TEST(ReflectedErrorTest, AFloodOfReflectedErrorsIsLoggedInBoundedLines) {
  testing::FaultCluster c;
  ASSERT_TRUE(c.StartScheduler(1, 1, {})) << c.Log();
  c.StartServer(0, {"--model=synthetic", "--num_params=1000"});
  c.StartWorker(0, {"--model=synthetic", "--num_params=1000", "--rounds_per_epoch=20000",
                    "--epochs=1", "--compressor=topk", "--density=0.1", "--progress=log"});
  ASSERT_TRUE(c.WaitForRunning(milliseconds(60000))) << c.Log();

  TransportOptions o;
  o.bind_host = "127.0.0.1";
  o.advertise_host = "127.0.0.1";
  auto peer = CreateZmqTransport(o);
  ASSERT_TRUE(peer.ok()) << peer.status().ToString();
  const std::string& address = c.address();
  const size_t colon = address.rfind(':');
  ASSERT_TRUE((*peer)
                  ->Connect(kSchedulerId, address.substr(0, colon),
                            static_cast<uint16_t>(std::stoi(address.substr(colon + 1))))
                  .ok());
  for (int i = 0; i < kFlood; ++i) {
    pb::Header b = MakeHeader(pb::MSG_SHUTDOWN, /*sender=*/2, kSchedulerId);
    b.mutable_shutdown()->set_reason("reflect me " + std::to_string(i));
    auto frames = EncodeControl(b);
    ASSERT_TRUE(frames.ok());
    ASSERT_TRUE((*peer)->Send(kSchedulerId, std::move(frames).value()).ok());
  }
  ASSERT_TRUE(c.WaitAll(milliseconds(120000))) << c.Log();
  EXPECT_TRUE(c.AllExitedZero()) << c.Log();
  int lines = 0;
  for (const std::string& line : c.worker(0).lines()) {
    lines += line.find("does not accept SHUTDOWN") != std::string::npos;
  }
  std::printf("the worker logged %d lines about %d reflected ERRORs\n", lines, kFlood);
  EXPECT_GE(lines, 1) << "no reflected ERROR reached the worker\n" << c.Log();
  // 20 lines per 10 s window (RejectionLog); a job of a few seconds spans two windows at most.
  EXPECT_LE(lines, 40);
}

}  // namespace
}  // namespace sieve
