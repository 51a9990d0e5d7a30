// CurveZMQ on a real cluster (scheduler, one server, one worker, all with --curve_dir): while the
// job runs, two intruders keep pushing well-formed PUSH messages at the server's port, one with a
// client key that is not on the allow-list and one without CURVE. The server's own counters
// prove that nothing of theirs got in: every applied push is the worker's (applied = rounds),
// nothing was rejected or dropped, and the allow-list refused the intruder's handshakes.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "net/curve.h"
#include "net/transport.h"
#include "proto/codec.h"
#include "tests/fault/cluster.h"

namespace sieve {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

// A TCP port that was free a moment ago (bound to port 0, then released).
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

// Pushes a valid one-pair PUSH for shard 0 (claiming to be worker id 2) at 127.0.0.1:port every
// 20 ms until `stop`.
void Intrude(const CurveOptions& curve, int port, const std::atomic<bool>& stop) {
  TransportOptions o;
  o.bind_host = "127.0.0.1";
  o.advertise_host = "127.0.0.1";
  o.send_timeout_ms = 200;
  o.curve = curve;
  auto t = CreateZmqTransport(o);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_TRUE((*t)->Connect(1, "127.0.0.1", port).ok());
  const std::vector<uint32_t> idx = {3};
  const std::vector<float> val = {1e6f};
  while (!stop.load()) {
    pb::Header h;
    h.set_type(pb::MSG_PUSH);
    h.set_sender(2);
    h.set_recipient(1);
    h.set_shard(0);
    h.set_round(0);
    DataPayload p;
    p.indices = idx;
    p.values = std::as_bytes(std::span<const float>(val));
    auto frames = EncodeData(h, p);
    ASSERT_TRUE(frames.ok());
    (void)(*t)->Send(1, std::move(frames).value());
    std::this_thread::sleep_for(milliseconds(20));
  }
}

TEST(CurveClusterTest, IntrudersGetNothingIntoARunningJob) {
  const fs::path dir = fs::temp_directory_path() / ("sieve-curve-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto server = GenerateCurveKeyPair(), client = GenerateCurveKeyPair(),
       stranger = GenerateCurveKeyPair();
  ASSERT_TRUE(server.ok() && client.ok() && stranger.ok());
  ASSERT_TRUE(WriteCurveKeyPair((dir / "server.key").string(), *server).ok());
  ASSERT_TRUE(WriteCurveKeyPair((dir / "client.key").string(), *client).ok());
  std::ofstream(dir / "allowed_clients") << client->public_key << "\n";
  const std::string curve = "--curve_dir=" + dir.string();
  const int port = FreePort();
  ASSERT_GT(port, 0);

  testing::FaultCluster c;
  ASSERT_TRUE(c.StartScheduler(1, 1, {curve}));
  c.StartServer(
      0, {curve, "--port=" + std::to_string(port), "--model=synthetic", "--num_params=1000"});
  std::atomic<bool> stop{false};
  std::thread bad_key(Intrude, CurveOptions{true, *server, *stranger, {stranger->public_key}}, port,
                      std::cref(stop));
  std::thread plain(Intrude, CurveOptions{}, port, std::cref(stop));
  c.StartWorker(0, {curve, "--model=synthetic", "--num_params=1000", "--rounds_per_epoch=300",
                    "--epochs=1", "--compressor=topk", "--density=0.1", "--progress=log"});
  const bool done = c.WaitAll(milliseconds(120000));
  stop = true;
  bad_key.join();
  plain.join();
  ASSERT_TRUE(done) << c.Log();
  auto st = c.scheduler().Wait(milliseconds(1));
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << c.Log();

  testing::KeyValues s = c.ServerSummary(0);
  EXPECT_EQ(s["rounds"], "300") << c.Log();
  EXPECT_EQ(s["applied"], "300");  // the worker's pushes, and nothing else
  EXPECT_EQ(s["rejected"], "0");
  EXPECT_EQ(s["dropped"], "0");  // no foreign bytes reached the decoder
  EXPECT_GE(std::stoll(s["auth_denied"]), 1) << "the allow-list refused no handshake";
  EXPECT_GE(std::stoll(s["auth_accepted"]), 2);  // the scheduler and the worker
  std::printf(
      "server counters: applied=%s rejected=%s dropped=%s auth_accepted=%s "
      "auth_denied=%s\n",
      s["applied"].c_str(), s["rejected"].c_str(), s["dropped"].c_str(), s["auth_accepted"].c_str(),
      s["auth_denied"].c_str());
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace sieve
