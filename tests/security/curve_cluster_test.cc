// CurveZMQ on a real cluster (scheduler, one server, one worker, all with --curve_dir): while the
// job runs, two intruders keep pushing well-formed PUSH messages at the server's port, one with a
// client key that is not on the allow-list and one without CURVE. The server's own counters
// prove that nothing of theirs got in: every applied push is the worker's (applied = rounds),
// nothing was rejected or dropped, and the allow-list refused the intruder's handshakes.
// Then keys bound to node ids: an insider with a valid allow-listed key of its own speaks for the
// other nodes and for the scheduler; everything it claims is refused and the job succeeds.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>
#include <utility>
#include <vector>
#include <zmq_addon.hpp>

#include "net/curve.h"
#include "net/transport.h"
#include "proto/codec.h"
#include "proto/error_code.h"
#include "proto/messages.h"
#include "tests/fault/cluster.h"
#include "tests/proto/test_util.h"
#include "tests/security/free_port.h"

namespace sieve {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using testing::FreePort;

// A valid one-pair PUSH for shard 0, claiming to be worker id 2.
Frames ForgedPush() {
  auto frames = testing::EncodePairs(MakeDataHeader(pb::MSG_PUSH, 2, 1, 0, 0), {3}, {1e6f});
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
  std::thread bad_key(Intrude,
                      CurveOptions{true, *server, *stranger, {stranger->public_key}, "", {}}, port,
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

// A fresh key directory of `sieve keygen --servers=1 --workers=W --client_key` (removed at the
// end) and the CURVE options of an insider holding its allow-listed client.key, which is bound to
// no node.
struct PerNodeKeys {
  explicit PerNodeKeys(int workers = 1)
      : dir(fs::temp_directory_path() / ("sieve-keys-" + std::to_string(::getpid()))) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    auto written = WriteCurveDir(dir.string(), 1, workers, false, /*unbound_client_key=*/true);
    status = written.status();
    if (!status.ok()) return;
    auto loaded = LoadCurveDir(dir.string());
    status = loaded.status();
    if (status.ok()) insider = *loaded;
  }
  ~PerNodeKeys() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  // A transport holding the insider's key, connected to the scheduler of `c` as peer 0.
  StatusOr<std::unique_ptr<Transport>> InsiderAtScheduler(
      const testing::FaultCluster& c, std::chrono::milliseconds send_timeout) const {
    TransportOptions to;
    to.bind_host = "127.0.0.1";
    to.advertise_host = "127.0.0.1";
    to.send_timeout = send_timeout;
    to.curve = insider;
    SIEVE_ASSIGN_OR_RETURN(auto t, CreateZmqTransport(to));
    const size_t colon = c.address().rfind(':');
    SIEVE_RETURN_IF_ERROR(t->Connect(0, "127.0.0.1", std::stoi(c.address().substr(colon + 1))));
    return t;
  }
  fs::path dir;
  Status status;
  CurveOptions insider;
};

// Whether `peer` receives an ERROR with `code` (10 s per message only bounds a hang).
bool ReceivesError(Transport& peer, pb::ErrorCode code) {
  Frames got;
  while (true) {
    auto r = peer.Recv(&got, std::chrono::milliseconds(10000));
    if (!r.ok() || !*r) return false;
    Message m;
    if (Decode(std::move(got), {}, &m).ok() && m.type() == pb::MSG_ERROR &&
        m.header.error().code() == code) {
      return true;
    }
  }
}

// The encoded control message `h` (whatever node it claims to come from).
Frames Forged(pb::Header h) { return std::move(EncodeControl(std::move(h))).value(); }

// Every daemon has its own key (`sieve keygen --servers=1 --workers=1`): the server and the worker
// find server-0.key and worker-0.key by their role and --rank, without --curve_key; the scheduler
// uses scheduler.key. While the job runs, an insider holding the shared client.key, which is on
// the allow-list but is no node's of this job (were a daemon using it too, the insider's forgeries
// as that daemon would pass and the counts below would fail), speaks for the others:
// PUSHes as worker 0 and NODE_DEAD (worker 0) and SHUTDOWN as the scheduler at the server; a
// SHUTDOWN, a NODE_TABLE sending the worker's pushes to the insider, and an UPDATE as server 0 at
// the worker; FINISHED as worker 0 (which would end the job at once) and a REGISTER for the live
// server's rank at the scheduler. All of it is refused: the job completes every round with exactly
// the worker's pushes, and the REGISTER is answered ERROR_BAD_REGISTRATION (a job whose keys are
// bound refuses keys bound to no node).
TEST(CurveClusterTest, AnAllowListedKeyCannotSpeakForAnotherNode) {
  PerNodeKeys keys;
  ASSERT_TRUE(keys.status.ok()) << keys.status.ToString();
  const std::string curve = "--curve_dir=" + keys.dir.string();
  const int server_port = FreePort(), worker_port = FreePort();
  ASSERT_TRUE(server_port > 0 && worker_port > 0);
  constexpr int kRounds = 3000;

  testing::FaultCluster c;
  ASSERT_TRUE(c.StartScheduler(1, 1, {curve})) << c.Log();
  c.StartServer(0, {curve, "--port=" + std::to_string(server_port), "--model=synthetic",
                    "--num_params=1000"});
  c.StartWorker(0, {curve, "--port=" + std::to_string(worker_port), "--model=synthetic",
                    "--num_params=1000", "--rounds_per_epoch=" + std::to_string(kRounds),
                    "--epochs=1", "--compressor=topk", "--density=0.1", "--progress=log"});
  auto insider = keys.InsiderAtScheduler(c, std::chrono::milliseconds(100));
  ASSERT_TRUE(insider.ok()) << insider.status().ToString();
  Transport& peer = **insider;
  ASSERT_TRUE(peer.Connect(1, "127.0.0.1", server_port).ok());
  ASSERT_TRUE(peer.Connect(2, "127.0.0.1", worker_port).ok());
  // Node ids: 0 scheduler, 1 server 0, 2 worker 0. The takeover starts once the job runs (a
  // REGISTER before the start would squat the rank: docs/security.md).
  ASSERT_TRUE(c.WaitForRunning(milliseconds(60000))) << c.Log();
  std::atomic<bool> stop{false};
  std::thread attack([&] {
    for (uint64_t round = 0; !stop; round = (round + 1) % kRounds) {
      auto push = testing::EncodePairs(MakeDataHeader(pb::MSG_PUSH, 2, 1, 0, round), {3}, {1e6f});
      if (push.ok()) (void)peer.TrySend(1, std::move(push).value());
      pb::Header dead = MakeHeader(pb::MSG_NODE_DEAD, kSchedulerId, 1);
      dead.mutable_node_dead()->set_id(2);
      dead.mutable_node_dead()->set_role(pb::ROLE_WORKER);
      dead.mutable_node_dead()->set_rank(0);
      dead.mutable_node_dead()->set_reason("forged");
      (void)peer.TrySend(1, Forged(dead));
      for (int node : {1, 2}) {
        pb::Header shutdown = MakeHeader(pb::MSG_SHUTDOWN, kSchedulerId, node);
        shutdown.mutable_shutdown()->set_reason("forged");
        shutdown.mutable_shutdown()->set_failed(true);
        (void)peer.TrySend(node, Forged(shutdown));
      }
      pb::Header table = MakeHeader(pb::MSG_NODE_TABLE, kSchedulerId, 2);
      pb::NodeTable* t = table.mutable_node_table();
      t->set_num_params(1000);
      t->set_num_servers(1);
      t->set_num_workers(1);
      t->set_generation(99);
      pb::NodeInfo* s0 = t->add_nodes();
      s0->set_id(1);
      s0->set_role(pb::ROLE_SERVER);
      s0->set_host("127.0.0.1");
      s0->set_port(peer.port());
      s0->set_shard_hi(1000);
      s0->set_instance(99);
      (void)peer.TrySend(2, Forged(table));
      auto update =
          testing::EncodePairs(MakeDataHeader(pb::MSG_UPDATE, 1, 2, 0, round), {3}, {1e6f});
      if (update.ok()) (void)peer.TrySend(2, std::move(update).value());
      pb::Header finished = MakeHeader(pb::MSG_FINISHED, 2, kSchedulerId);
      finished.mutable_finished();
      (void)peer.TrySend(kSchedulerId, Forged(finished));
      (void)peer.TrySend(kSchedulerId, Forged(MakeRegisterHeader(pb::ROLE_SERVER, peer.host(),
                                                                 peer.port(), 0, 99, 0)));
      std::this_thread::sleep_for(milliseconds(5));
    }
  });
  const bool done = c.WaitAll(milliseconds(120000));
  stop = true;
  attack.join();
  ASSERT_TRUE(done) << c.Log();
  EXPECT_TRUE(c.AllExitedZero()) << c.Log();
  testing::KeyValues s = c.ServerSummary(0);
  EXPECT_EQ(s["rounds"], std::to_string(kRounds)) << c.Log();
  EXPECT_EQ(s["applied"], std::to_string(kRounds));  // the worker's pushes, and nothing else
  EXPECT_EQ(s["rejoins"], "0");
  EXPECT_GT(std::stoll(s["impostors"]), 0) << c.Log();
  EXPECT_EQ(c.WorkerSummary(0)["rounds"], std::to_string(kRounds)) << c.Log();
  const std::string log = c.Log();
  bool worker_refused = false;
  for (const std::string& line : c.worker(0).lines()) {
    worker_refused =
        worker_refused ||
        line.find("claiming to be node 0: it came with another client key") != std::string::npos;
  }
  EXPECT_TRUE(worker_refused) << "no forged control message reached the worker\n" << log;
  EXPECT_NE(log.find("impostors="), std::string::npos);
  EXPECT_EQ(log.find("impostors=0)"), std::string::npos) << "the forged FINISHED was not refused\n"
                                                         << log;
  EXPECT_EQ(log.find("replaced by a new process"), std::string::npos) << log;
  // The insider's REGISTER was refused: its key is bound to no node.
  EXPECT_TRUE(ReceivesError(peer, pb::ERROR_BAD_REGISTRATION)) << log;
  std::printf("server impostors=%s applied=%s; %s\n", s["impostors"].c_str(), s["applied"].c_str(),
              c.scheduler().lines().empty() ? "" : c.scheduler().lines().back().c_str());
}

// Ranks bound to keys in advance (allowed_clients `KEY server 0`, `KEY worker 0`, as `sieve
// keygen --servers --workers` writes them): before the job forms, an insider holding the
// allow-listed client.key (bound to no node) registers as server 0, as worker 0 and as a worker of
// any rank. The job binds its keys, so all three are refused with ERROR_BAD_REGISTRATION; the job
// forms from its own nodes, which register after it, and succeeds. Without the bindings the
// insider would hold the ranks and the real nodes would be turned away.
TEST(CurveClusterTest, ABoundRankCannotBeSquattedWithAnotherKey) {
  PerNodeKeys keys;
  ASSERT_TRUE(keys.status.ok()) << keys.status.ToString();
  const std::string curve = "--curve_dir=" + keys.dir.string();

  testing::FaultCluster c;
  ASSERT_TRUE(c.StartScheduler(1, 1, {curve})) << c.Log();
  auto insider = keys.InsiderAtScheduler(c, std::chrono::milliseconds(30000));
  ASSERT_TRUE(insider.ok()) << insider.status().ToString();
  Transport& peer = **insider;
  int instance = 77;
  for (const auto& [role, rank] : {std::pair{pb::ROLE_SERVER, 0}, std::pair{pb::ROLE_WORKER, 0},
                                   std::pair{pb::ROLE_WORKER, -1}}) {
    ASSERT_TRUE(peer.Send(kSchedulerId, Forged(MakeRegisterHeader(role, peer.host(), peer.port(),
                                                                  rank, instance++, 1000)))
                    .ok());
    EXPECT_TRUE(ReceivesError(peer, pb::ERROR_BAD_REGISTRATION)) << "rank " << rank << c.Log();
  }

  c.StartServer(0, {curve, "--model=synthetic", "--num_params=1000"});
  c.StartWorker(0, {curve, "--model=synthetic", "--num_params=1000", "--rounds_per_epoch=50",
                    "--epochs=1", "--compressor=topk", "--density=0.1", "--progress=log"});
  ASSERT_TRUE(c.WaitAll(milliseconds(120000))) << c.Log();
  EXPECT_TRUE(c.AllExitedZero()) << c.Log();
  EXPECT_EQ(c.ServerSummary(0)["applied"], "50") << c.Log();
}

// The worker flags of the two-worker jobs below: `rounds` rounds; worker 0 is slowed down
// (2 ms a round) so that the job outlasts a death and a rejoin of worker 1.
std::vector<std::string> TwoWorkerFlags(const std::string& curve, int rank, int rounds) {
  std::vector<std::string> f = {curve,
                                "--model=synthetic",
                                "--num_params=1000",
                                "--rounds_per_epoch=" + std::to_string(rounds),
                                "--epochs=1",
                                "--compressor=topk",
                                "--density=0.1",
                                "--progress=log",
                                "--heartbeat_interval_ms=200"};
  if (rank == 0) f.push_back("--straggler=delay:2ms");
  return f;
}

// The message types `peer` receives until an ERROR (its code in *error) or 10 s without a message
// (which only bounds a hang).
std::vector<pb::MsgType> ReceivedUntilError(Transport& peer, pb::ErrorCode* error) {
  std::vector<pb::MsgType> types;
  *error = pb::ERROR_NONE;
  Frames got;
  while (true) {
    auto r = peer.Recv(&got, std::chrono::milliseconds(10000));
    if (!r.ok() || !*r) return types;
    Message m;
    if (!Decode(std::move(got), {}, &m).ok()) continue;
    types.push_back(m.type());
    if (m.type() == pb::MSG_ERROR) {
      *error = m.header.error().code();
      return types;
    }
  }
}

// `sieve keygen --servers=1 --workers=2 --client_key`: every rank is bound to its key, and the
// insider holds client.key, allow-listed but bound to no node. Before the start, it registers as
// a worker of any rank (rank -1), which used to be handed a bound rank at the start (the real
// worker 1 was then turned away with ERROR_RANK_TAKEN and the job failed): now it is refused with
// ERROR_BAD_REGISTRATION and gets nothing else. Then worker 1 is SIGKILLed and declared dead, and
// the insider asks for any worker rank again, which used to take the dead node's rank 1 (and push
// into the model): refused the same way. The real worker 1, restarted under its rank with its own
// key, rejoins, and every daemon exits 0 with no push but the workers' applied.
TEST(CurveClusterTest, AnUnboundKeyTakesNoBoundRankBeforeTheStartOrAfterADeath) {
  PerNodeKeys keys(/*workers=*/2);
  ASSERT_TRUE(keys.status.ok()) << keys.status.ToString();
  const std::string curve = "--curve_dir=" + keys.dir.string();
  constexpr int kRounds = 3000;

  testing::FaultCluster c;
  ASSERT_TRUE(c.StartScheduler(1, 2, {curve, "--heartbeat_timeout_ms=2000"})) << c.Log();
  auto insider = keys.InsiderAtScheduler(c, std::chrono::milliseconds(30000));
  ASSERT_TRUE(insider.ok()) << insider.status().ToString();
  Transport& peer = **insider;
  ASSERT_TRUE(peer.Send(kSchedulerId, Forged(MakeRegisterHeader(pb::ROLE_WORKER, peer.host(),
                                                                peer.port(), -1, 91, 1000)))
                  .ok());
  pb::ErrorCode code;
  std::vector<pb::MsgType> got = ReceivedUntilError(peer, &code);
  EXPECT_EQ(code, pb::ERROR_BAD_REGISTRATION) << c.Log();
  EXPECT_EQ(got, std::vector<pb::MsgType>{pb::MSG_ERROR}) << "the squatter was admitted";

  c.StartServer(0,
                {curve, "--model=synthetic", "--num_params=1000", "--heartbeat_interval_ms=200"});
  c.StartWorker(0, TwoWorkerFlags(curve, 0, kRounds));
  c.StartWorker(1, TwoWorkerFlags(curve, 1, kRounds));
  ASSERT_TRUE(c.WaitForRunning(milliseconds(60000))) << c.Log();
  c.worker(1).Kill(SIGKILL);
  ASSERT_TRUE(c.WaitForNodeState(pb::ROLE_WORKER, 1, pb::NODE_LOST, milliseconds(60000)))
      << c.Log();

  ASSERT_TRUE(peer.Send(kSchedulerId, Forged(MakeRegisterHeader(pb::ROLE_WORKER, peer.host(),
                                                                peer.port(), -1, 92, 1000)))
                  .ok());
  got = ReceivedUntilError(peer, &code);
  EXPECT_EQ(code, pb::ERROR_BAD_REGISTRATION) << c.Log();
  EXPECT_EQ(got, std::vector<pb::MsgType>{pb::MSG_ERROR}) << "the dead node's rank was taken";

  c.StartWorker(1, TwoWorkerFlags(curve, 1, kRounds));
  ASSERT_TRUE(c.WaitAll(milliseconds(150000))) << c.Log();
  EXPECT_TRUE(c.AllExitedZero()) << c.Log();
  testing::KeyValues s = c.ServerSummary(0);
  EXPECT_EQ(s["rounds"], std::to_string(kRounds)) << c.Log();
  EXPECT_EQ(s["rejoins"], "1") << c.Log();  // the real worker 1, and nobody else
  EXPECT_EQ(s["impostors"], "0") << c.Log();
}

}  // namespace
}  // namespace sieve
