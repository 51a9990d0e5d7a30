// What a peer that reads a plaintext job's traffic (or recorded an earlier job's with the same
// token file) can send, against live daemons (docs/security.md):
//  - ERRORs "from server 0" stamped with the token's digest (as before the node table) reach no
//    worker's retry logic (the scheduler's registration replies replayed after its death:
//    SchedulerLossTest);
//  - a flood of bad PUSHes claiming a dead worker fills the server's queue to it, then an INIT
//    claiming that worker: the INIT_ACK is dropped, not waited for, and the job goes on;
//  - a REGISTER with another protocol version naming a registering node's instance and address,
//    from a peer that cannot prove the token, fails no one.
// (BARRIERs forged for a node: NetSchedulerTest.ForgedBarriersDoNotKeepTheRealOneOut.)
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "net/node.h"
#include "proto/codec.h"
#include "proto/job_identity.h"
#include "proto/messages.h"
#include "proto/register_proof.h"
#include "tests/fault/cluster.h"
#include "tests/security/forwarding_transport.h"
#include "tests/security/free_port.h"

namespace sieve {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr char kToken[] = "sniffed-message-token";

// A token file in a fresh directory, removed at the end.
class TokenFile {
 public:
  TokenFile() : dir_(fs::temp_directory_path() / ("sieve-sniffed-" + std::to_string(::getpid()))) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "token") << kToken << "\n";
  }
  ~TokenFile() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string flag() const { return "--job_token_file=" + (dir_ / "token").string(); }

 private:
  fs::path dir_;
};

// `header` encoded and stamped with `job`: what the wire carries.
Frames Wire(const pb::Header& header, uint64_t job) {
  auto frames = EncodeControl(header);
  EXPECT_TRUE(frames.ok());
  StampJob(&*frames, job);
  return std::move(frames).value();
}

// A plain ZeroMQ PUSH socket to 127.0.0.1:`port`, queueing without limit.
zmq::socket_t PushTo(zmq::context_t& ctx, int port) {
  zmq::socket_t s(ctx, zmq::socket_type::push);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::sndhwm, 0);
  s.connect("tcp://127.0.0.1:" + std::to_string(port));
  return s;
}

void SendAll(zmq::socket_t& s, const Frames& frames) {
  for (size_t i = 0; i < frames.size(); ++i) {
    zmq::message_t copy(frames[i].data(), frames[i].size());
    (void)s.send(copy, i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
}

// The exit code of a process that has exited (-1: still running or killed by a signal).
int ExitCode(testing::Subprocess& p) {
  const std::optional<int> status = p.Wait(milliseconds(1));
  return status && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
}

std::vector<std::string> Synthetic(const std::vector<std::string>& more) {
  std::vector<std::string> flags = {"--model=synthetic", "--num_params=1000"};
  flags.insert(flags.end(), more.begin(), more.end());
  return flags;
}

TEST(SniffedMessageTest, AnErrorStampedWithTheTokensDigestReachesNoWorker) {
  TokenFile token;
  const int server_port = testing::FreePort(), worker_port = testing::FreePort();
  ASSERT_TRUE(server_port > 0 && worker_port > 0);
  constexpr int kRounds = 4000;
  testing::FaultCluster c;
  ASSERT_TRUE(c.StartScheduler(1, 1, {token.flag()})) << c.Log();
  c.StartServer(
      0, Synthetic({token.flag(), "--port=" + std::to_string(server_port), "--consistency=asp"}));
  c.StartWorker(0, Synthetic({token.flag(), "--port=" + std::to_string(worker_port),
                              "--rounds_per_epoch=" + std::to_string(kRounds), "--epochs=1",
                              "--compressor=topk", "--density=0.1", "--progress=log"}));
  ASSERT_TRUE(c.WaitForRunning(milliseconds(60000))) << c.Log();
  // "Server 0 refused your PUSH of round r" for every round of the job, again and again. Stopping
  // the server makes the worker wait in one round meanwhile, so that round's ERROR reaches it
  // many times: believed, more than 8 in one wait fail the worker.
  std::vector<Frames> forged;
  for (int r = 0; r < kRounds + 2; ++r) {
    pb::Header e = MakeErrorHeader(1, 2, static_cast<uint64_t>(r), pb::ERROR_UNKNOWN_ROUND,
                                   "forged", pb::MSG_PUSH);
    e.set_shard(0);
    forged.push_back(Wire(e, JobDigest(kToken)));
  }
  c.server(0).Kill(SIGSTOP);
  std::atomic<bool> stop{false};
  std::thread attack([&] {
    zmq::context_t ctx;
    zmq::socket_t w = PushTo(ctx, worker_port);
    while (!stop) {
      for (const Frames& m : forged) SendAll(w, m);
    }
  });
  std::this_thread::sleep_for(milliseconds(2500));
  c.server(0).Kill(SIGCONT);
  std::this_thread::sleep_for(milliseconds(500));
  stop = true;
  attack.join();
  ASSERT_TRUE(c.WaitAll(milliseconds(120000))) << c.Log();
  EXPECT_TRUE(c.AllExitedZero()) << c.Log();
  EXPECT_EQ(c.WorkerSummary(0).at("errors_retried"), "0")
      << "a forged ERROR reached the worker's retry logic\n"
      << c.Log();
}

TEST(SniffedMessageTest, AFloodAndAnInitFromAPeerThatDoesNotReadStallNoServer) {
  testing::FaultCluster c;
  const std::vector<std::string> heartbeats = {"--heartbeat_interval_ms=300",
                                               "--heartbeat_timeout_ms=3000"};
  ASSERT_TRUE(c.StartScheduler(1, 2, {"--min_workers=1", "--heartbeat_timeout_ms=3000"}))
      << c.Log();
  const int server_port = testing::FreePort();
  ASSERT_GT(server_port, 0);
  std::vector<std::string> server = Synthetic({"--port=" + std::to_string(server_port)});
  server.insert(server.end(), heartbeats.begin(), heartbeats.end());
  c.StartServer(0, server);
  for (int rank = 0; rank < 2; ++rank) {
    // Worker 1 runs ~3000 rounds of >= 5 ms: the job outlives the attack by several seconds.
    std::vector<std::string> w =
        Synthetic({"--rounds_per_epoch=3000", "--epochs=1", "--compressor=topk", "--density=0.1",
                   "--straggler=delay:5ms", "--progress=log"});
    w.insert(w.end(), heartbeats.begin(), heartbeats.end());
    c.StartWorker(rank, w);
  }
  ASSERT_TRUE(c.WaitForRunning(milliseconds(60000))) << c.Log();
  c.worker(0).Kill(SIGKILL);  // declared dead after the heartbeat timeout; nobody reads its queue
  ASSERT_TRUE(c.WaitForNodeState(pb::ROLE_WORKER, 0, pb::NODE_LOST, milliseconds(30000)))
      << c.Log();

  // PUSHes claiming worker 0 (node 2) whose checksum is wrong: each is answered with an ERROR
  // that waits in the server's queue to the dead worker, until the queue is full.
  constexpr int kFlood = 24000;
  zmq::context_t ctx;
  zmq::socket_t s = PushTo(ctx, server_port);
  std::vector<uint32_t> idx = {1, 2, 3};
  std::vector<float> val = {0.5f, 0.5f, 0.5f};
  DataPayload p;
  p.indices = idx;
  p.values = std::as_bytes(std::span<const float>(val));
  auto push = EncodeData(MakeDataHeader(pb::MSG_PUSH, 2, 1, 0, 1), p);
  ASSERT_TRUE(push.ok());
  pb::Header bad;
  ASSERT_TRUE(bad.ParseFromArray((*push)[0].data(), static_cast<int>((*push)[0].size())));
  bad.set_checksum(bad.checksum() ^ 1);
  Frames bad_push;
  bad_push.emplace_back(bad.SerializeAsString());
  for (size_t i = 1; i < push->size(); ++i)
    bad_push.emplace_back((*push)[i].data(), (*push)[i].size());
  for (int i = 0; i < kFlood; ++i) SendAll(s, bad_push);
  // Then an INIT claiming worker 0: its INIT_ACK goes to the same full queue.
  const std::vector<float> init(1000, 0.25f);
  DataPayload ip;
  ip.dense = true;
  ip.values = std::as_bytes(std::span<const float>(init));
  auto init_frames = EncodeData(MakeDataHeader(pb::MSG_INIT, 2, 1, 0, 0), ip);
  ASSERT_TRUE(init_frames.ok());
  SendAll(s, *init_frames);

  ASSERT_TRUE(c.WaitAll(milliseconds(120000))) << c.Log();
  EXPECT_EQ(ExitCode(c.scheduler()), 0) << c.Log();
  EXPECT_EQ(ExitCode(c.server(0)), 0) << c.Log();
  EXPECT_EQ(ExitCode(c.worker(1)), 0) << c.Log();
  const testing::KeyValues summary = c.ServerSummary(0);
  ASSERT_FALSE(summary.empty()) << c.Log();
  std::printf("server: rounds=%s errors_dropped=%s replies_dropped=%s\n",
              summary.at("rounds").c_str(), summary.at("errors_dropped").c_str(),
              summary.at("replies_dropped").c_str());
  EXPECT_GT(std::stoll(summary.at("errors_dropped")), 0) << "the queue never filled\n" << c.Log();
  EXPECT_EQ(summary.at("rounds"), "3000") << c.Log();
}

// A transport that keeps a copy of the first REGISTER its node sends: what a sniffer reads off
// the wire (the node's instance and address).
class SniffedTransport final : public testing::ForwardingTransport {
 public:
  SniffedTransport(std::unique_ptr<Transport> inner, std::mutex* mu, pb::Register* seen)
      : ForwardingTransport(std::move(inner)), mu_(mu), seen_(seen) {}

 private:
  void OnSend(const Frames& frames) override {
    pb::Header h;
    if (frames.empty() || !h.ParseFromArray(frames[0].data(), static_cast<int>(frames[0].size())) ||
        h.type() != pb::MSG_REGISTER) {
      return;
    }
    std::lock_guard<std::mutex> lock(*mu_);
    if (seen_->instance() == 0) *seen_ = h.register_();
  }
  std::mutex* mu_;
  pb::Register* seen_;
};

TEST(SniffedMessageTest, AnUnprovenRegisterOfAnotherVersionFailsNoRegisteringNode) {
  TokenFile token;
  testing::FaultCluster c;
  ASSERT_TRUE(c.StartScheduler(1, 1, {token.flag()})) << c.Log();
  const std::string& address = c.address();
  const int scheduler_port = std::stoi(address.substr(address.rfind(':') + 1));
  // The worker registers first and waits for the server: a Node in this process, whose REGISTER
  // a sniffer reads.
  NodeOptions o;
  o.role = pb::ROLE_WORKER;
  o.rank = 0;
  o.scheduler = address;
  o.num_params = 1000;
  o.transport.bind_host = "127.0.0.1";
  o.transport.advertise_host = "127.0.0.1";
  o.transport.job = JobDigest(kToken);
  o.job_key = JobKey(kToken);
  o.heartbeat_interval = milliseconds(0);
  o.register_retry = milliseconds(200);
  o.register_attempts = 300;
  o.startup_timeout = milliseconds(60000);
  std::mutex mu;
  pb::Register sniffed;
  o.transport.factory = [&](const TransportOptions& to) -> StatusOr<std::unique_ptr<Transport>> {
    TransportOptions inner = to;
    inner.factory = nullptr;
    SIEVE_ASSIGN_OR_RETURN(auto t, CreateZmqTransport(inner));
    return std::unique_ptr<Transport>(new SniffedTransport(std::move(t), &mu, &sniffed));
  };
  StatusOr<std::unique_ptr<Node>> node = InternalError("not started");
  std::thread worker([&] { node = Node::Start(o); });
  pb::Register victim;
  for (const auto deadline = Clock::now() + milliseconds(30000); Clock::now() < deadline;) {
    {
      std::lock_guard<std::mutex> lock(mu);
      victim = sniffed;
    }
    if (victim.instance() != 0) break;
    std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_NE(victim.instance(), 0u) << "the worker sent no REGISTER";
  // The forgeries, naming the worker's instance and address: a REGISTER declaring protocol 9,
  // and one whose header is of version 9; both without the proof, each several times. Answered,
  // either would reach the worker as the refusal of its own registration and end it.
  zmq::context_t ctx;
  zmq::socket_t to_scheduler = PushTo(ctx, scheduler_port);
  for (int i = 0; i < 5; ++i) {
    for (const bool header : {false, true}) {
      pb::Header r = MakeHeader(pb::MSG_REGISTER, -1, kSchedulerId);
      *r.mutable_register_() = victim;
      r.mutable_register_()->set_protocol_version(9);
      auto frames = EncodeControl(r);
      ASSERT_TRUE(frames.ok());
      if (header) {
        pb::Header old;
        ASSERT_TRUE(old.ParseFromArray((*frames)[0].data(), static_cast<int>((*frames)[0].size())));
        old.set_version(9);
        (*frames)[0] = zmq::message_t(old.SerializeAsString());
      }
      StampJob(&*frames, JobDigest(kToken));
      SendAll(to_scheduler, *frames);
    }
  }
  std::this_thread::sleep_for(milliseconds(1000));  // time for a refusal to reach the worker
  c.StartServer(0, Synthetic({token.flag()}));
  worker.join();
  ASSERT_TRUE(node.ok()) << node.status().ToString() << "\n" << c.Log();
  ASSERT_TRUE((*node)->Finish().ok());
  EXPECT_TRUE((*node)->WaitShutdown(milliseconds(60000)).ok()) << c.Log();
}

}  // namespace
}  // namespace sieve
