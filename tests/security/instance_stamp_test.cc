// Every message type of the protocol against the job instance (proto/job_identity.h): once a node
// has its node table it believes only messages stamped with the job instance's digest, whatever
// their type (a REGISTER_ACK or an ERROR recorded at the start of an earlier job with the same
// token file travels with the token's digest, and once moved the node's scheduler-liveness clock
// and a worker's retry logic); the scheduler accepts the token's digest on a REGISTER only. The
// list of types is the protocol's own (pb::MsgType's descriptor), so a type added later is
// covered without touching this test.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "net/inproc_transport.h"
#include "net/node.h"
#include "proto/codec.h"
#include "proto/job_identity.h"
#include "proto/messages.h"
#include "proto/register_proof.h"
#include "scheduler/scheduler.h"

namespace sieve {
namespace {

constexpr char kToken[] = "a-token-file-two-jobs-share";
constexpr uint64_t kInstance = 0x5eed5eed12345678ull;

std::vector<pb::MsgType> EveryType() {
  std::vector<pb::MsgType> types;
  const auto* d = pb::MsgType_descriptor();
  for (int i = 0; i < d->value_count(); ++i) {
    const auto t = static_cast<pb::MsgType>(d->value(i)->number());
    if (t != pb::MSG_UNSPECIFIED) types.push_back(t);
  }
  return types;
}

// Worker 0 (node 3) of a job with 2 servers and 2 workers, its table installed.
std::unique_ptr<Node> WorkerWithTable(const InprocNetwork& network) {
  NodeOptions o;
  o.role = pb::ROLE_WORKER;
  o.heartbeat_interval = std::chrono::milliseconds(0);
  o.transport.factory = network.factory();
  o.transport.job = JobDigest(kToken);
  pb::NodeTable t;
  t.set_num_params(20);
  t.set_num_servers(2);
  t.set_num_workers(2);
  t.set_generation(1);
  t.set_job_instance(kInstance);
  for (int id = 1; id <= 4; ++id) {
    pb::NodeInfo* n = t.add_nodes();
    n->set_id(id);
    n->set_role(id <= 2 ? pb::ROLE_SERVER : pb::ROLE_WORKER);
    n->set_rank((id - 1) % 2);
    n->set_host("inproc");
    n->set_port(static_cast<uint32_t>(61000 + id));
    n->set_instance(static_cast<uint64_t>(id));
    n->set_shard_lo(id == 2 ? 10 : 0);
    n->set_shard_hi(id == 1 ? 10 : id == 2 ? 20 : 0);
  }
  auto node = Node::CreateForTesting(o, t, 3);
  EXPECT_TRUE(node.ok()) << node.status().ToString();
  if (!node.ok()) return nullptr;
  (*node)->set_on_data([](Message) {});
  return std::move(node).value();
}

// A message of `type` from `sender` to node 3, its body the one its type requires (empty),
// stamped with `job`.
Frames Stamped(pb::MsgType type, int sender, uint64_t job) {
  pb::Header h = MakeHeader(type, sender, 3);
  auto frames = EncodeControl(h);
  EXPECT_TRUE(frames.ok());
  StampJob(&*frames, job);
  return std::move(frames).value();
}

TEST(InstanceStampTest, ANodeWithItsTableTakesNoTypeStampedWithTheTokensDigest) {
  InprocNetwork network;
  std::unique_ptr<Node> node = WorkerWithTable(network);
  ASSERT_NE(node, nullptr);
  const uint64_t token = JobDigest(kToken), instance = JobInstanceDigest(token, kInstance);
  ASSERT_NE(token, instance);
  for (const pb::MsgType type : EveryType()) {
    for (const int sender : {kSchedulerId, 1}) {  // the scheduler, server 0
      const uint64_t before = node->foreign_messages();
      node->DispatchForTesting(Stamped(type, sender, token));
      EXPECT_EQ(node->foreign_messages(), before + 1)
          << MsgTypeName(type) << " from node " << sender
          << " with the token's digest was not dropped as foreign";
    }
  }
  // The same types with the instance's digest are this job's: none is foreign (the NODE_TABLE
  // carries this job's instance, as a real later table does). A REGISTER_CHALLENGE after the
  // table answers no REGISTER of this process: dropped by its content, and counted so.
  for (const pb::MsgType type : EveryType()) {
    if (type == pb::MSG_REGISTER_CHALLENGE) continue;
    pb::Header h = MakeHeader(type, kSchedulerId, 3);
    if (type == pb::MSG_NODE_TABLE) *h.mutable_node_table() = node->table();
    auto frames = EncodeControl(h);
    ASSERT_TRUE(frames.ok());
    StampJob(&*frames, instance);
    const uint64_t before = node->foreign_messages();
    node->DispatchForTesting(std::move(frames).value());
    EXPECT_EQ(node->foreign_messages(), before) << MsgTypeName(type) << " with the instance's";
  }
}

// The scheduler: every type but REGISTER and STATUS_QUERY (a status client never learns the
// instance) stamped with the token's digest is foreign.
TEST(InstanceStampTest, TheSchedulerTakesTheTokensDigestOnARegisterOrAStatusQueryOnly) {
  InprocNetwork network;
  SchedulerOptions o;
  o.num_servers = 1;
  o.num_workers = 1;
  o.num_params = 10;
  o.heartbeat_timeout = std::chrono::milliseconds(0);
  o.transport.factory = network.factory();
  o.transport.job = JobDigest(kToken);
  o.job_key = JobKey(kToken);
  auto s = Scheduler::Create(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Scheduler& scheduler = **s;
  for (const pb::MsgType type : EveryType()) {
    pb::Header h = MakeHeader(type, 2, kSchedulerId);
    if (type == pb::MSG_REGISTER) {
      h = MakeRegisterHeader(pb::ROLE_WORKER, "inproc", 61009, 0, 77, 10);
    }
    auto frames = EncodeControl(h);
    ASSERT_TRUE(frames.ok());
    StampJob(&*frames, JobDigest(kToken));
    const uint64_t before = scheduler.foreign_messages();
    scheduler.HandleMessage(std::move(frames).value());
    const bool taken = type == pb::MSG_REGISTER || type == pb::MSG_STATUS_QUERY;
    EXPECT_EQ(scheduler.foreign_messages(), before + (taken ? 0 : 1))
        << MsgTypeName(type) << " with the token's digest";
  }
}

}  // namespace
}  // namespace sieve
