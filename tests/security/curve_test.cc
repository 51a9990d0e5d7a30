// CurveZMQ on the transport: an allow-listed client's messages arrive; a client with a key that is
// not allowed, with the wrong server key, or without CURVE gets nothing in (the receiver's
// counters prove the refusals and no message is received), and a receiver without the server's
// secret key gets nothing out of an honest sender.
#include "net/curve.h"

#include <gtest/gtest.h>
#include <zmq.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>
#include <vector>

#include "net/transport.h"
#include "tests/base/temp_dir.h"

namespace sieve {
namespace {

using Clock = std::chrono::steady_clock;

CurveKeyPair Keys() {
  auto k = GenerateCurveKeyPair();
  EXPECT_TRUE(k.ok()) << k.status().ToString();
  return *k;
}

struct Fixture {
  CurveKeyPair server = Keys(), good = Keys(), bad = Keys();

  CurveOptions Receiver() const { return {true, server, good, {good.public_key}, "", {}}; }
  CurveOptions Sender(const CurveKeyPair& client, const CurveKeyPair& srv) const {
    return {true, srv, client, {client.public_key}, "", {}};
  }
};

std::unique_ptr<Transport> Make(const CurveOptions& curve) {
  TransportOptions o;
  o.bind_host = "127.0.0.1";
  o.advertise_host = "127.0.0.1";
  o.send_timeout = std::chrono::milliseconds(1000);
  o.curve = curve;
  auto t = CreateZmqTransport(o);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(t).value();
}

Frames Hello() {
  Frames f;
  f.emplace_back(std::string("hello"));
  return f;
}

// Sends one message from `sender` to `receiver` and reports whether it arrived within 1.5 s.
bool Delivered(Transport& sender, Transport& receiver) {
  EXPECT_TRUE(sender.Connect(1, "127.0.0.1", receiver.port()).ok());
  (void)sender.Send(1, Hello());
  Frames got;
  auto r = receiver.Recv(&got, std::chrono::milliseconds(1500));
  return r.ok() && *r;
}

// Waits (bounded) until `receiver` refused at least one handshake.
bool Refused(Transport& receiver) {
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < deadline) {
    if (receiver.auth_denied() > 0) return true;
    Frames got;
    // Paces the poll; nothing may arrive.
    auto r = receiver.Recv(&got, std::chrono::milliseconds(50));
    EXPECT_TRUE(r.ok() && !*r) << "a refused peer's message was received";
  }
  return false;
}

TEST(CurveTest, LibzmqHasCurve) { EXPECT_TRUE(zmq_has("curve")); }

TEST(CurveTest, AllowListedClientIsHeard) {
  Fixture k;
  auto rx = Make(k.Receiver());
  auto tx = Make(k.Sender(k.good, k.server));
  EXPECT_TRUE(Delivered(*tx, *rx));
  EXPECT_GE(rx->auth_accepted(), 1u);
  EXPECT_EQ(rx->auth_denied(), 0u);
}

TEST(CurveTest, ClientKeyNotOnTheListGetsNothingIn) {
  Fixture k;
  auto rx = Make(k.Receiver());
  auto tx = Make(k.Sender(k.bad, k.server));
  EXPECT_FALSE(Delivered(*tx, *rx));
  EXPECT_TRUE(Refused(*rx));
  EXPECT_EQ(rx->auth_accepted(), 0u);
}

TEST(CurveTest, WrongServerKeyGetsNothingIn) {
  Fixture k;
  auto rx = Make(k.Receiver());
  auto tx = Make(k.Sender(k.good, k.bad));  // believes the server's key is another one
  EXPECT_FALSE(Delivered(*tx, *rx));
  EXPECT_EQ(rx->auth_accepted(), 0u);
}

TEST(CurveTest, PlainClientGetsNothingIn) {
  Fixture k;
  auto rx = Make(k.Receiver());
  auto tx = Make(CurveOptions{});
  EXPECT_FALSE(Delivered(*tx, *rx));
  EXPECT_EQ(rx->auth_accepted(), 0u);
}

TEST(CurveTest, ReceiverWithoutTheServerSecretGetsNothingOut) {
  Fixture k;
  auto honest = Make(k.Sender(k.good, k.server));
  auto impostor = Make(CurveOptions{true, k.bad, k.good, {k.good.public_key}, "", {}});
  EXPECT_FALSE(Delivered(*honest, *impostor));
  auto plain = Make(CurveOptions{});
  EXPECT_FALSE(Delivered(*honest, *plain));
}

TEST(CurveTest, KeyDirectoryRoundTripAndErrors) {
  namespace fs = std::filesystem;
  const sieve::testing::TempDir tmp("sieve-curve");
  const fs::path& dir = tmp.path();
  Fixture k;
  EXPECT_EQ(LoadCurveDir(dir.string()).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(WriteCurveKeyPair((dir / "server.key").string(), k.server).ok());
  ASSERT_TRUE(WriteCurveKeyPair((dir / "client.key").string(), k.good).ok());
  std::ofstream(dir / "allowed_clients") << "# workers and servers\n" << k.good.public_key << "\n";
  auto o = LoadCurveDir(dir.string());
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_TRUE(o->enabled);
  EXPECT_EQ(o->server.secret_key, k.server.secret_key);
  EXPECT_EQ(o->client.public_key, k.good.public_key);
  ASSERT_EQ(o->allowed_clients.size(), 1u);
  EXPECT_EQ((fs::status(dir / "server.key").permissions() & fs::perms::others_read),
            fs::perms::none);
  std::ofstream(dir / "allowed_clients") << "not-a-key\n";
  EXPECT_EQ(LoadCurveDir(dir.string()).status().code(), StatusCode::kInvalidArgument);
  std::ofstream(dir / "allowed_clients") << k.good.public_key << " worker\n";  // no rank
  EXPECT_EQ(LoadCurveDir(dir.string()).status().code(), StatusCode::kInvalidArgument);
  std::ofstream(dir / "allowed_clients") << k.good.public_key << " master 1\n";
  EXPECT_EQ(LoadCurveDir(dir.string()).status().code(), StatusCode::kInvalidArgument);
  std::ofstream(dir / "allowed_clients") << k.good.public_key << " worker 1\n"
                                         << k.bad.public_key << " worker 1\n";
  EXPECT_EQ(LoadCurveDir(dir.string()).status().code(), StatusCode::kInvalidArgument);
  std::ofstream(dir / "allowed_clients") << k.good.public_key << " scheduler\n"
                                         << k.bad.public_key << " scheduler\n";
  EXPECT_EQ(LoadCurveDir(dir.string()).status().code(), StatusCode::kInvalidArgument);
}

// `sieve keygen --servers=1 --workers=1`'s directory: one key pair per node (named by role and
// rank) and the scheduler's, all on the
// allow-list, the scheduler's marked; each daemon loads its own pair. Nothing is overwritten
// without `force`.
TEST(CurveTest, KeyDirectoryWithAKeyPerNode) {
  namespace fs = std::filesystem;
  const sieve::testing::TempDir tmp("sieve-keys");
  const fs::path& dir = tmp.path();
  auto names = WriteCurveDir(dir.string(), 1, 1, false, /*unbound_client_key=*/true);
  ASSERT_TRUE(names.ok()) << names.status().ToString();
  EXPECT_EQ(*names, (std::vector<std::string>{"server.key", "scheduler.key", "client.key",
                                              "server-0.key", "worker-0.key", "allowed_clients"}));
  EXPECT_EQ(NodeKeyName("worker", 12), "worker-12.key");
  auto scheduler = LoadCurveDir(dir.string(), (dir / "scheduler.key").string());
  auto node0 = LoadCurveDir(dir.string(), (dir / "server-0.key").string());
  auto node1 = LoadCurveDir(dir.string(), (dir / "worker-0.key").string());
  auto shared = LoadCurveDir(dir.string());
  ASSERT_TRUE(scheduler.ok() && node0.ok() && node1.ok() && shared.ok());
  EXPECT_EQ(node0->scheduler_key, scheduler->client.public_key);
  EXPECT_EQ(node0->allowed_clients.size(), 4u);
  EXPECT_NE(node0->client.public_key, node1->client.public_key);
  EXPECT_NE(node0->client.public_key, shared->client.public_key);
  EXPECT_EQ(node0->server.public_key, node1->server.public_key);
  // Each node key is bound to its node in the allow-list; the shared and scheduler keys are not.
  ASSERT_EQ(node0->bindings.size(), 2u);
  EXPECT_EQ(node0->bindings.at(node0->client.public_key).role, "server");
  EXPECT_EQ(node0->bindings.at(node1->client.public_key).role, "worker");
  EXPECT_EQ(node0->bindings.at(node1->client.public_key).rank, 0);
  const CurveOptions& c = *node0;
  EXPECT_TRUE(CheckKeyBinding(c, node0->client.public_key, "server", 0).ok());
  EXPECT_EQ(CheckKeyBinding(c, node0->client.public_key, "worker", 0).code(),
            StatusCode::kInvalidArgument);  // a bound key speaks only as its node
  EXPECT_EQ(CheckKeyBinding(c, node0->client.public_key, "server", -1).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckKeyBinding(c, shared->client.public_key, "worker", 0).code(),
            StatusCode::kAlreadyExists);  // a bound rank only with its key
  EXPECT_TRUE(CheckKeyBinding(c, shared->client.public_key, "worker", 1).ok());  // unbound rank
  EXPECT_TRUE(CheckKeyBinding(CurveOptions{}, "", "worker", 0).ok());            // no bindings
  EXPECT_EQ(WriteCurveDir(dir.string(), 1, 1, false, true).status().code(),
            StatusCode::kAlreadyExists);
  // Without asking, a directory with node keys holds no key bound to no node.
  const fs::path bound_only = dir / "bound-only";
  fs::create_directories(bound_only);
  auto bound_names = WriteCurveDir(bound_only.string(), 1, 1, false, false);
  ASSERT_TRUE(bound_names.ok()) << bound_names.status().ToString();
  EXPECT_FALSE(fs::exists(bound_only / "client.key"));
  EXPECT_EQ(bound_names->size(), 5u);
  EXPECT_TRUE(WriteCurveDir(dir.string(), 1, 1, true, true).ok());
}

// `sieve keygen --per_role`: each role's directory holds exactly the files its daemons read, no
// other role's secret key, and its daemons load their own key pairs from it.
TEST(CurveTest, RoleDirectoriesHoldOnlyTheirRolesKeys) {
  namespace fs = std::filesystem;
  const sieve::testing::TempDir tmp("sieve-roles");
  const fs::path& dir = tmp.path();
  EXPECT_EQ(WriteRoleDirs(dir.string(), 2, 3, false).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(WriteCurveDir(dir.string(), 2, 3, false, false).ok());
  auto written = WriteRoleDirs(dir.string(), 2, 3, false);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(written->size(), 3u + 4u + 5u);
  auto listing = [&](const std::string& role) {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir / role)) {
      names.insert(e.path().filename().string());
      EXPECT_EQ(fs::status(e.path()).permissions() & fs::perms::all,
                fs::perms::owner_read | fs::perms::owner_write)
          << e.path();
    }
    EXPECT_EQ(fs::status(dir / role).permissions() & fs::perms::all, fs::perms::owner_all);
    return names;
  };
  using Names = std::set<std::string>;
  EXPECT_EQ(listing("scheduler"), (Names{"server.key", "scheduler.key", "allowed_clients"}));
  EXPECT_EQ(listing("servers"),
            (Names{"server.key", "server-0.key", "server-1.key", "allowed_clients"}));
  EXPECT_EQ(listing("workers"), (Names{"server.key", "worker-0.key", "worker-1.key", "worker-2.key",
                                       "allowed_clients"}));
  // The same keys as the flat directory, byte for byte.
  auto read = [](const fs::path& p) {
    std::ifstream f(p);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  for (const auto& [role, name] :
       std::vector<std::pair<std::string, std::string>>{{"scheduler", "scheduler.key"},
                                                        {"servers", "server-1.key"},
                                                        {"workers", "worker-2.key"},
                                                        {"workers", "allowed_clients"},
                                                        {"servers", "server.key"}}) {
    EXPECT_EQ(read(dir / role / name), read(dir / name)) << role << "/" << name;
  }
  auto worker = LoadCurveDir((dir / "workers").string(), (dir / "workers/worker-2.key").string());
  auto scheduler =
      LoadCurveDir((dir / "scheduler").string(), (dir / "scheduler/scheduler.key").string());
  ASSERT_TRUE(worker.ok() && scheduler.ok());
  EXPECT_EQ(worker->bindings.at(worker->client.public_key).rank, 2);
  EXPECT_EQ(worker->scheduler_key, scheduler->client.public_key);
  EXPECT_EQ(WriteRoleDirs(dir.string(), 2, 3, false).status().code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(WriteRoleDirs(dir.string(), 2, 3, true).ok());
}

// Every message received over a CURVE connection names the client key it was authenticated with
// (what binds a node id to a key); without CURVE it names none.
TEST(CurveTest, ReceivedMessagesCarryTheSendersKey) {
  Fixture k;
  CurveOptions receiver = k.Receiver();
  receiver.allowed_clients.push_back(k.bad.public_key);
  auto rx = Make(receiver);
  auto tx = Make(k.Sender(k.bad, k.server));
  ASSERT_TRUE(tx->Connect(1, "127.0.0.1", rx->port()).ok());
  ASSERT_TRUE(tx->Send(1, Hello()).ok());
  Frames got;
  auto r = rx->Recv(&got, std::chrono::milliseconds(10000));  // bounds a hang
  ASSERT_TRUE(r.ok() && *r);
  EXPECT_EQ(PeerKey(got), k.bad.public_key);
  auto plain_rx = Make(CurveOptions{});
  auto plain_tx = Make(CurveOptions{});
  ASSERT_TRUE(plain_tx->Connect(1, "127.0.0.1", plain_rx->port()).ok());
  ASSERT_TRUE(plain_tx->Send(1, Hello()).ok());
  r = plain_rx->Recv(&got, std::chrono::milliseconds(10000));
  ASSERT_TRUE(r.ok() && *r);
  EXPECT_EQ(PeerKey(got), "");
}

}  // namespace
}  // namespace sieve
