// libFuzzer harness: arbitrary bytes -> ZeroMQ frames -> proto Decode (every validation of
// docs/protocol.md) -> for a decoded PUSH, ShardServer::OnPush of a BSP and an ASP shard, exactly
// the path a sieve-server runs for a peer's message. Crashes, sanitizer reports (ASan), a failed
// decode without an error code and a reply larger than the shard are failures.
//
// Input layout: byte 0 = number of frames (1..4, mod 4 + 1); then per frame a 2-byte little-endian
// length followed by that many bytes (the last frame takes whatever is left). Checksum
// verification is off so the fuzzer reaches the checks after it (a CRC only guards transport
// corruption; a malicious peer can compute it).
#include <google/protobuf/stubs/logging.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "proto/codec.h"
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

}  // namespace

// Protobuf logs every string field with invalid UTF-8; at thousands of inputs a second that
// is all the fuzzer would do.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto bsp = MakeShard(sieve::Consistency::kBsp);
  static auto asp = MakeShard(sieve::Consistency::kAsp);
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
