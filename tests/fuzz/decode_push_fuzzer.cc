// libFuzzer harness: arbitrary bytes -> ZeroMQ frames -> proto Decode (every validation of
// docs/protocol.md) -> for a decoded PUSH, ShardServer::OnPush of a BSP and an ASP shard, exactly
// the path a sieve-server runs for a peer's message. The same frames also go to a scheduler (1
// server, 2 workers, D = 101, on an in-process network where its replies go nowhere), which keeps
// its state across inputs: registrations, the job's start, re-admissions, barriers, heartbeats,
// FINISHED and every other control message (REGISTER, NODE_TABLE, NODE_DEAD, SHUTDOWN, BARRIER,
// JOIN, ...) a peer can send it; and to a worker node's runtime (Node, with the node table of 2
// servers of 64 and 37 values and 2 workers; it is worker 0, node 3), which handles the
// scheduler's control messages (node tables, deaths, shutdown, barrier releases, ERRORs) and
// validates and attributes the data plane, also keeping its state. Crashes, sanitizer reports
// (ASan, UBSan), a failed decode without an error code and a reply larger than the shard are
// failures.
//
// Input layout: byte 0 = number of frames (1..4, mod 4 + 1); then per frame a 2-byte little-endian
// length followed by that many bytes (the last frame takes whatever is left). Checksum
// verification is off so the fuzzer reaches the checks after it (a CRC only guards transport
// corruption; a malicious peer can compute it).
#include <glog/logging.h>
#include <google/protobuf/stubs/logging.h>

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "net/inproc_transport.h"
#include "net/node.h"
#include "proto/codec.h"
#include "proto/error_code.h"
#include "scheduler/scheduler.h"
#include "server/shard/shard_server.h"

namespace {

constexpr uint64_t kShardLengths[2] = {64, 37};

std::unique_ptr<sieve::ShardServer> MakeShard(sieve::Consistency c) {
  sieve::ShardServerOptions o;
  o.num_workers = 3;
  o.consistency = c;
  auto s = sieve::ShardServer::Create(o, std::vector<float>(kShardLengths[1], 0.5f));
  if (!s.ok()) std::abort();
  return std::move(s).value();
}

const sieve::InprocNetwork& Network() {
  static const sieve::InprocNetwork network;
  return network;
}

std::unique_ptr<sieve::Node> MakeWorkerNode() {
  sieve::NodeOptions o;
  o.role = sieve::pb::ROLE_WORKER;
  o.heartbeat_interval = std::chrono::milliseconds(0);
  o.transport.factory = Network().factory();
  sieve::pb::NodeTable t;
  t.set_num_params(kShardLengths[0] + kShardLengths[1]);
  t.set_num_servers(2);
  t.set_num_workers(2);
  t.set_generation(1);
  for (int id = 1; id <= 4; ++id) {
    sieve::pb::NodeInfo* n = t.add_nodes();
    n->set_id(id);
    n->set_role(id <= 2 ? sieve::pb::ROLE_SERVER : sieve::pb::ROLE_WORKER);
    n->set_rank((id - 1) % 2);
    n->set_host("inproc");
    n->set_port(static_cast<uint32_t>(60000 + id));
    n->set_instance(static_cast<uint64_t>(id));
    if (id == 1) n->set_shard_hi(kShardLengths[0]);
    if (id == 2) {
      n->set_shard_lo(kShardLengths[0]);
      n->set_shard_hi(kShardLengths[0] + kShardLengths[1]);
    }
  }
  auto node = sieve::Node::CreateForTesting(o, t, 3);
  if (!node.ok()) std::abort();
  (*node)->set_on_data([](sieve::Message) {});  // nothing consumes the data plane here
  return std::move(node).value();
}

std::unique_ptr<sieve::Scheduler> MakeScheduler() {
  const sieve::InprocNetwork& network = Network();
  sieve::SchedulerOptions o;
  o.num_servers = 1;
  o.num_workers = 2;
  o.num_params = 101;
  o.heartbeat_timeout = std::chrono::milliseconds(0);
  o.transport.factory = network.factory();
  auto s = sieve::Scheduler::Create(o);
  if (!s.ok()) std::abort();
  return std::move(s).value();
}

}  // namespace

// Protobuf logs every string field with invalid UTF-8; at thousands of inputs a second that
// is all the fuzzer would do.
// The scheduler logs a line for every message it refuses; so would the fuzzer, at every input.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  FLAGS_minloglevel = google::GLOG_FATAL;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto bsp = MakeShard(sieve::Consistency::kBsp);
  static auto asp = MakeShard(sieve::Consistency::kAsp);
  static auto scheduler = MakeScheduler();
  static auto node = MakeWorkerNode();
  if (size == 0) return 0;
  const int nframes = data[0] % 4 + 1;
  size_t at = 1;
  sieve::Frames frames;
  for (int i = 0; i < nframes; ++i) {
    size_t len = size - at;
    if (i + 1 < nframes) {
      if (at + 2 > size) break;
      len = std::min<size_t>(size - at - 2, data[at] | (data[at + 1] << 8));
      at += 2;
    }
    frames.emplace_back(data + at, len);
    at += len;
  }
  sieve::Frames to_scheduler, to_node;
  for (const auto& f : frames) {
    to_scheduler.emplace_back(f.data(), f.size());
    to_node.emplace_back(f.data(), f.size());
  }
  scheduler->HandleMessage(std::move(to_scheduler));
  node->DispatchForTesting(std::move(to_node));
  sieve::DecodeLimits limits;
  limits.shard_lengths = kShardLengths;
  limits.verify_checksum = false;
  sieve::Message msg;
  const sieve::Status s = sieve::Decode(std::move(frames), limits, &msg);
  const sieve::pb::ErrorCode code = WireCodeOf(s);
  if (!s.ok()) {
    if (code == sieve::pb::ERROR_NONE) std::abort();  // a failure must name its code
    return 0;
  }
  if (msg.type() != sieve::pb::MSG_PUSH || msg.header.shard() != 1) return 0;
  std::vector<float> unpacked;
  std::span<const float> values = msg.values;
  if (!msg.values_fp16.empty()) {
    unpacked.resize(msg.values_fp16.size());
    for (size_t j = 0; j < unpacked.size(); ++j) unpacked[j] = 0.001f * msg.values_fp16[j];
    values = unpacked;
  }
  const int worker = static_cast<int>(msg.header.sender() % 4);  // rank 3 is unknown: rejected
  for (sieve::ShardServer* shard : {bsp.get(), asp.get()}) {
    sieve::Outbox out;
    shard->OnPush(worker, msg.header.round() % 4, msg.indices, values, msg.dense(), &out);
    for (const sieve::Reply& r : out) {
      if (r.buffer && r.buffer->values.size() > kShardLengths[1]) std::abort();
    }
  }
  return 0;
}
