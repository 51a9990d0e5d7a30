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
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>
#include <zmq_addon.hpp>

#include "net/curve.h"
#include "proto/codec.h"
#include "proto/messages.h"
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

// A valid one-pair PUSH for shard 0, claiming to be worker id 2.
Frames ForgedPush() {
  pb::Header h = MakeDataHeader(pb::MSG_PUSH, 2, 1, 0, 0);
  const std::vector<uint32_t> idx = {3};
  const std::vector<float> val = {1e6f};
  DataPayload p;
  p.indices = idx;
  p.values = std::as_bytes(std::span<const float>(val));
  auto frames = EncodeData(h, p);
  EXPECT_TRUE(frames.ok());
  return frames.ok() ? std::move(frames).value() : Frames{};
}

// One connection attempt of an intruder: a ZeroMQ PUSH socket (a CURVE client when `curve` is
// enabled) connected to 127.0.0.1:port, and a monitor of its handshakes.
class IntruderConnection {
 public:
  IntruderConnection(zmq::context_t& ctx, const CurveOptions& curve, int port, int attempt)
      : push_(ctx, zmq::socket_type::push), monitor_(ctx, zmq::socket_type::pair) {
    push_.set(zmq::sockopt::linger, 0);
    if (curve.enabled) {
      push_.set(zmq::sockopt::curve_serverkey, curve.server.public_key);
      push_.set(zmq::sockopt::curve_publickey, curve.client.public_key);
      push_.set(zmq::sockopt::curve_secretkey, curve.client.secret_key);
    }
    const std::string endpoint = "inproc://intruder-monitor-" + std::to_string(attempt);
    const int events = ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                       ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;
    EXPECT_EQ(zmq_socket_monitor(push_.handle(), endpoint.c_str(), events), 0);
    monitor_.set(zmq::sockopt::linger, 0);
    monitor_.connect(endpoint);
    push_.connect("tcp://127.0.0.1:" + std::to_string(port));
  }
  ~IntruderConnection() { zmq_socket_monitor(push_.handle(), nullptr, 0); }

  // Queues `frames` unless the queue is full (no handshake succeeds, so nothing is ever sent).
  void Push(const Frames& frames) {
    Frames copy;
    for (const auto& f : frames) copy.emplace_back(f.data(), f.size());
    (void)zmq::send_multipart(push_, copy, zmq::send_flags::dontwait);
  }

  // Waits up to `timeout` for the handshake to fail; sets *refused when the server's allow-list
  // refused it (ZAP status 400). False if no handshake failed meanwhile.
  bool HandshakeFailed(milliseconds timeout, bool* refused) {
    zmq::pollitem_t item{monitor_.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, timeout) == 0) return false;
    std::vector<zmq::message_t> event;  // [uint16 event, uint32 value], endpoint
    if (!zmq::recv_multipart(monitor_, std::back_inserter(event), zmq::recv_flags::dontwait) ||
        event.empty() || event[0].size() < 6) {
      return false;
    }
    uint16_t id;
    uint32_t value;
    std::memcpy(&id, event[0].data(), sizeof(id));
    std::memcpy(&value, static_cast<const char*>(event[0].data()) + 2, sizeof(value));
    *refused = id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH && value == 400;
    return true;
  }

 private:
  zmq::socket_t push_;
  zmq::socket_t monitor_;
};

// Pushes forged PUSH messages at 127.0.0.1:port every 20 ms until `stop`. libzmq gives up a
// connection whose handshake failed, so after each failure the intruder connects again (a new
// handshake). Counts in `*refusals` (if given) the handshakes the server's allow-list refused:
// each of them was counted by the server's ZAP handler in auth_denied.
void Intrude(const CurveOptions& curve, int port, const std::atomic<bool>& stop,
             std::atomic<int>* refusals) {
  zmq::context_t ctx;
  const Frames push = ForgedPush();
  for (int attempt = 0; !stop.load(); ++attempt) {
    const auto next_attempt = std::chrono::steady_clock::now() + milliseconds(20);
    IntruderConnection connection(ctx, curve, port, attempt);
    bool failed = false, refused = false;
    while (!stop.load() && !failed) {
      connection.Push(push);
      failed = connection.HandshakeFailed(milliseconds(20), &refused);
    }
    if (refused && refusals != nullptr) ++*refusals;
    std::this_thread::sleep_until(next_attempt);  // at most 50 handshakes a second
  }
}

// Polls until `refusals` is at least 1 (true) or `timeout`, which only bounds a hang, passes.
bool WaitForRefusal(const std::atomic<int>& refusals, milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (refusals.load() < 1) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return true;
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
  std::atomic<int> refusals{0};
  std::thread bad_key(Intrude, CurveOptions{true, *server, *stranger, {stranger->public_key}}, port,
                      std::cref(stop), &refusals);
  std::thread plain(Intrude, CurveOptions{}, port, std::cref(stop), nullptr);
  // A short job can end before the intruder's first handshake reaches the server, and the job
  // cannot start before its worker registers: the worker starts once the allow-list has refused
  // the unlisted key. Both intruders keep connecting and pushing while the job runs.
  const bool refused_first = WaitForRefusal(refusals, milliseconds(60000));
  const int refused_before_job = refusals.load();
  if (refused_first) {
    c.StartWorker(0, {curve, "--model=synthetic", "--num_params=1000", "--rounds_per_epoch=300",
                      "--epochs=1", "--compressor=topk", "--density=0.1", "--progress=log"});
  }
  const bool done = refused_first && c.WaitAll(milliseconds(120000));
  stop = true;
  bad_key.join();
  plain.join();
  ASSERT_TRUE(refused_first) << "the server never refused the unlisted key's handshake\n"
                             << c.Log();
  ASSERT_TRUE(done) << c.Log();
  auto st = c.scheduler().Wait(milliseconds(1));
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << c.Log();

  testing::KeyValues s = c.ServerSummary(0);
  EXPECT_EQ(s["rounds"], "300") << c.Log();
  EXPECT_EQ(s["applied"], "300");  // the worker's pushes, and nothing else
  EXPECT_EQ(s["rejected"], "0");
  EXPECT_EQ(s["dropped"], "0");  // no foreign bytes reached the decoder
  // The server counted the refusals the intruder saw before the job (later ones may come after
  // the server printed its summary).
  EXPECT_GE(std::stoll(s["auth_denied"]), refused_before_job)
      << "the allow-list refused no handshake";
  EXPECT_GE(std::stoll(s["auth_accepted"]), 2);  // the scheduler and the worker
  std::printf(
      "server counters: applied=%s rejected=%s dropped=%s auth_accepted=%s "
      "auth_denied=%s (refusals seen by the intruder: %d)\n",
      s["applied"].c_str(), s["rejected"].c_str(), s["dropped"].c_str(), s["auth_accepted"].c_str(),
      s["auth_denied"].c_str(), refusals.load());
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace sieve
