// libFuzzer harness: arbitrary bytes -> ZeroMQ frames -> proto Decode (every validation of
// docs/protocol.md) -> for a decoded PUSH, ShardServer::OnPush of a BSP and an ASP shard, exactly
// the path a sieve-server runs for a peer's message. The same frames also go to a scheduler (1
// server, 2 workers, D = 101, on an in-process network where its replies go nowhere), which keeps
// its state across inputs: registrations, the job's start, re-admissions, barriers, heartbeats,
// FINISHED and every other control message (REGISTER, NODE_TABLE, NODE_DEAD, SHUTDOWN, BARRIER,
// JOIN, ...) a peer can send it. Crashes, sanitizer reports (ASan, UBSan), a failed decode without
// an error code and a reply larger than the shard are failures.
//
// Input layout: byte 0 = number of frames (1..4, mod 4 + 1); then per frame a 2-byte little-endian
// length followed by that many bytes (the last frame takes whatever is left). Checksum
// verification is off so the fuzzer reaches the checks after it (a CRC only guards transport
// corruption; a malicious peer can compute it).
#include <glog/logging.h>
#include <google/protobuf/stubs/logging.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "net/inproc_transport.h"
#include "proto/codec.h"
#include "scheduler/scheduler.h"
#include "server/shard_server.h"

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

std::unique_ptr<sieve::Scheduler> MakeScheduler() {
  static const sieve::InprocNetwork network;
  sieve::SchedulerOptions o;
  o.num_servers = 1;
  o.num_workers = 2;
  o.num_params = 101;
  o.heartbeat_timeout_ms = 0;
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
  sieve::Frames to_scheduler;
  for (const auto& f : frames) to_scheduler.emplace_back(f.data(), f.size());
  scheduler->HandleMessage(std::move(to_scheduler));
  sieve::DecodeLimits limits;
  limits.shard_lengths = kShardLengths;
  limits.verify_checksum = false;
  sieve::Message msg;
  sieve::pb::ErrorCode code = sieve::pb::ERROR_NONE;
  sieve::Status s = sieve::Decode(std::move(frames), limits, &msg, &code);
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
