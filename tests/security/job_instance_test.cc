// A job token file used by two jobs one after the other (as daemons started by hand are told to
// share one): the traffic of the first job, recorded on the wire, is foreign in the second,
// because every message after the node table carries the job instance's digest (a random id the
// scheduler draws: proto/job_identity.h, JobInstanceDigest). Job 1 runs a real scheduler and
// server (ASP) with one worker the test plays through a Node whose transport records every message
// it sends and receives, byte for byte as on the wire: its PUSHes for rounds far ahead and the
// scheduler's SHUTDOWN. Job 2 (same token file, same ids, the real sieve-worker) runs while those
// bytes are sent again and again at its server and its worker. They must be dropped and counted
// (`foreign=`), and job 2 must end with the server's weights of a clean run of the same job. (With
// the token's digest alone the replayed SHUTDOWN ended job 2 and the pushes were applied.) Job 1's
// admitted REGISTER (its challenge and proof included) is replayed at job 2's scheduler before and
// while job 2's nodes register: it is challenged again and takes no slot (protocol 7's
// registration proof; before it, the REGISTER took worker rank 0 and job 2's worker was refused).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "net/node.h"
#include "net/transport.h"
#include "proto/codec.h"
#include "proto/job_identity.h"
#include "proto/messages.h"
#include "proto/register_proof.h"
#include "tests/fault/cluster.h"
#include "tests/proto/test_util.h"
#include "tests/security/forwarding_transport.h"
#include "tests/security/free_port.h"

namespace sieve {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

// What a recording transport saw: the wire bytes of every message sent and received.
struct Recording {
  std::mutex mu;
  std::vector<Frames> sent, received;
};

// A ZeroMQ transport that records each message: sent ones stamped as the inner transport stamps
// them (StampJob with the job it was last given), received ones as they arrived.
class RecordingTransport final : public testing::ForwardingTransport {
 public:
  RecordingTransport(std::unique_ptr<Transport> inner, uint64_t job, Recording* rec)
      : ForwardingTransport(std::move(inner)), job_(job), rec_(rec) {}
  StatusOr<bool> Recv(Frames* frames, std::chrono::milliseconds timeout) override {
    auto got = inner().Recv(frames, timeout);
    if (got.ok() && *got) {
      std::lock_guard<std::mutex> lock(rec_->mu);
      rec_->received.push_back(CopyFrames(*frames));
    }
    return got;
  }
  void SetJob(uint64_t job) override {
    job_ = job;
    inner().SetJob(job);
  }

 private:
  void OnSend(const Frames& frames) override {
    Frames copy = CopyFrames(frames);
    StampJob(&copy, job_.load());
    std::lock_guard<std::mutex> lock(rec_->mu);
    rec_->sent.push_back(std::move(copy));
  }
  std::atomic<uint64_t> job_;
  Recording* rec_;
};

// The first recorded message of `type`, or an empty Frames.
Frames First(const std::vector<Frames>& messages, pb::MsgType type) {
  for (const Frames& m : messages) {
    pb::Header h;
    if (!m.empty() && h.ParseFromArray(m[0].data(), static_cast<int>(m[0].size())) &&
        h.type() == type) {
      return CopyFrames(m);
    }
  }
  return {};
}

std::vector<std::string> ServerFlags(const std::string& token) {
  return {token, "--model=synthetic", "--num_params=1000", "--consistency=asp", "--seed=5"};
}

std::vector<std::string> WorkerFlags(const std::string& token, int port) {
  return {token,
          "--port=" + std::to_string(port),
          "--model=synthetic",
          "--num_params=1000",
          "--seed=5",
          "--rounds_per_epoch=4000",
          "--epochs=1",
          "--compressor=topk",
          "--density=0.1",
          "--progress=log"};
}

// Runs job 2 (a clean one without `replay`): its server's summary.
testing::KeyValues RunJob(const std::string& token, const std::vector<Frames>* replay,
                          const Frames* replayed_register, std::string* log) {
  const int server_port = testing::FreePort(), worker_port = testing::FreePort();
  testing::FaultCluster c;
  if (!c.StartScheduler(1, 1, {token})) return {};
  std::atomic<bool> stop{false};
  std::atomic<int> registers_sent{0};
  // Job 1's recorded REGISTER, sent at job 2's scheduler before and while its nodes register:
  // believed, it would take worker rank 0 (the job has one worker) and the real worker 0 would
  // be refused.
  std::thread register_replay([&] {
    if (replayed_register == nullptr) return;
    zmq::context_t ctx;
    zmq::socket_t to_scheduler(ctx, zmq::socket_type::push);
    to_scheduler.set(zmq::sockopt::linger, 0);
    to_scheduler.connect("tcp://" + c.address());
    while (!stop) {
      Frames copy = CopyFrames(*replayed_register);
      if (to_scheduler.send(copy[0], zmq::send_flags::dontwait)) registers_sent++;
      std::this_thread::sleep_for(milliseconds(20));
    }
  });
  while (replayed_register != nullptr && registers_sent < 10) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  std::vector<std::string> server = ServerFlags(token);
  server.push_back("--port=" + std::to_string(server_port));
  c.StartServer(0, server);
  c.StartWorker(0, WorkerFlags(token, worker_port));
  std::thread attack([&] {
    if (replay == nullptr) return;
    zmq::context_t ctx;
    zmq::socket_t to_server(ctx, zmq::socket_type::push), to_worker(ctx, zmq::socket_type::push);
    for (zmq::socket_t* s : {&to_server, &to_worker}) s->set(zmq::sockopt::linger, 0);
    to_server.connect("tcp://127.0.0.1:" + std::to_string(server_port));
    to_worker.connect("tcp://127.0.0.1:" + std::to_string(worker_port));
    while (!stop) {
      for (const Frames& m : *replay) {
        for (zmq::socket_t* s : {&to_server, &to_worker}) {
          Frames copy = CopyFrames(m);
          for (size_t i = 0; i < copy.size(); ++i) {
            (void)s->send(copy[i], i + 1 < copy.size()
                                       ? zmq::send_flags::sndmore | zmq::send_flags::dontwait
                                       : zmq::send_flags::dontwait);
          }
        }
      }
      std::this_thread::sleep_for(milliseconds(2));
    }
  });
  const bool done = c.WaitAll(milliseconds(120000));
  stop = true;
  attack.join();
  register_replay.join();
  *log = c.Log();
  if (!done || !c.AllExitedZero()) return {};
  return c.ServerSummary(0);
}

TEST(JobInstanceTest, OneJobsRecordedPushAndShutdownAreForeignInTheNext) {
  const fs::path dir = fs::temp_directory_path() / ("sieve-instance-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "token") << "a-token-file-shared-by-two-jobs\n";
  const std::string token = "--job_token_file=" + (dir / "token").string();

  // Job 1, recorded: worker 0 is the test's Node, pushing rounds 100000.. (ASP applies them).
  Recording rec;
  {
    testing::FaultCluster c;
    ASSERT_TRUE(c.StartScheduler(1, 1, {token})) << c.Log();
    c.StartServer(0, ServerFlags(token));
    NodeOptions o;
    o.role = pb::ROLE_WORKER;
    o.rank = 0;
    o.scheduler = c.address();
    o.num_params = 1000;
    o.transport.bind_host = "127.0.0.1";
    o.transport.advertise_host = "127.0.0.1";
    o.transport.job = JobDigest("a-token-file-shared-by-two-jobs");
    o.job_key = JobKey("a-token-file-shared-by-two-jobs");
    o.transport.factory =
        [&rec](const TransportOptions& to) -> StatusOr<std::unique_ptr<Transport>> {
      TransportOptions inner = to;
      inner.factory = nullptr;
      SIEVE_ASSIGN_OR_RETURN(auto t, CreateZmqTransport(inner));
      return std::unique_ptr<Transport>(new RecordingTransport(std::move(t), to.job, &rec));
    };
    auto node = Node::Start(o);
    ASSERT_TRUE(node.ok()) << node.status().ToString() << c.Log();
    for (uint64_t round = 100000; round < 100020; ++round) {
      std::vector<uint32_t> idx = {1, 2, 3};
      std::vector<float> val = {1e3f, -1e3f, 1e3f};
      auto push = testing::EncodePairs(
          MakeDataHeader(pb::MSG_PUSH, (*node)->id(), (*node)->ServerId(0), 0, round), idx, val);
      ASSERT_TRUE(push.ok());
      ASSERT_TRUE((*node)->Send((*node)->ServerId(0), std::move(push).value()).ok());
      Message reply;
      ASSERT_TRUE((*node)->Receive(&reply, std::chrono::milliseconds(10000)).ok());
    }
    ASSERT_TRUE((*node)->Finish().ok());
    ASSERT_TRUE((*node)->WaitShutdown(std::chrono::milliseconds(30000)).ok()) << c.Log();
    ASSERT_TRUE(c.WaitAll(milliseconds(30000))) << c.Log();
  }
  std::vector<Frames> replay;
  Frames admitted_register;
  {
    std::lock_guard<std::mutex> lock(rec.mu);
    for (const Frames& m : rec.sent) {
      pb::Header h;
      if (h.ParseFromArray(m[0].data(), static_cast<int>(m[0].size())) &&
          h.type() == pb::MSG_PUSH) {
        replay.push_back(CopyFrames(m));
      }
    }
    // The REGISTER job 1's scheduler admitted: the last one sent, with its challenge and proof.
    for (const Frames& m : rec.sent) {
      pb::Header h;
      if (h.ParseFromArray(m[0].data(), static_cast<int>(m[0].size())) &&
          h.type() == pb::MSG_REGISTER && h.register_().proof() != 0) {
        admitted_register = CopyFrames(m);
      }
    }
    ASSERT_FALSE(admitted_register.empty()) << "job 1's proven REGISTER was not recorded";
    Frames shutdown = First(rec.received, pb::MSG_SHUTDOWN);
    ASSERT_FALSE(shutdown.empty()) << "job 1's SHUTDOWN was not recorded";
    replay.push_back(std::move(shutdown));
  }
  ASSERT_EQ(replay.size(), 21u);

  std::string clean_log, attacked_log;
  const testing::KeyValues clean = RunJob(token, nullptr, nullptr, &clean_log);
  ASSERT_FALSE(clean.empty()) << clean_log;
  const testing::KeyValues attacked = RunJob(token, &replay, &admitted_register, &attacked_log);
  ASSERT_FALSE(attacked.empty()) << "job 2 did not run to a clean end\n" << attacked_log;
  EXPECT_EQ(attacked.at("applied"), clean.at("applied")) << attacked_log;
  EXPECT_EQ(attacked.at("checksum"), clean.at("checksum")) << "the weights differ\n"
                                                           << attacked_log;
  EXPECT_GT(std::stoll(attacked.at("foreign")), 0) << attacked_log;
  EXPECT_EQ(clean.at("foreign"), "0");
  std::printf("job 2: applied=%s checksum=%s (clean run %s), foreign=%s\n",
              attacked.at("applied").c_str(), attacked.at("checksum").c_str(),
              clean.at("checksum").c_str(), attacked.at("foreign").c_str());
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace sieve
