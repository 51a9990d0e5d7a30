// Random and mutated frames: Decode never crashes, and it either returns OK for a message that
// really is valid or reports a wire error code.
#include <google/protobuf/stubs/logging.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "proto/codec.h"
#include "proto/error_code.h"
#include "tests/proto/test_util.h"

namespace sieve {
namespace {

const std::vector<uint64_t> kShardLengths = {64, 63, 5};

// A message as plain byte strings, so it can be mutated and replayed.
using RawMessage = std::vector<std::string>;

// Turns `raw` into frames. With `misalign`, data frames borrow bytes one past an aligned address
// from `backing`, which must outlive the frames.
Frames ToFrames(const RawMessage& raw, bool misalign, std::vector<std::string>* backing) {
  Frames frames;
  backing->clear();
  backing->reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (misalign && i > 0 && !raw[i].empty()) {
      backing->push_back("\x01" + raw[i]);
      frames.emplace_back(backing->back().data() + 1, raw[i].size(), nullptr, nullptr);
    } else {
      frames.emplace_back(raw[i].data(), raw[i].size());
    }
  }
  return frames;
}

// Independent check that an accepted message is what the protocol allows.
void ExpectValid(const Message& msg, const RawMessage& raw) {
  const pb::Header& h = msg.header;
  ASSERT_EQ(h.version(), kProtocolVersion);
  ASSERT_TRUE(pb::MsgType_IsValid(h.type()));
  ASSERT_NE(h.type(), pb::MSG_UNSPECIFIED);
  ASSERT_EQ(msg.storage.size(), raw.size());
  const bool data =
      h.type() == pb::MSG_PUSH || h.type() == pb::MSG_UPDATE || h.type() == pb::MSG_DENSE;
  if (!data) {
    ASSERT_EQ(raw.size(), 1u);
    ASSERT_TRUE(msg.indices.empty() && msg.values.empty() && msg.values_fp16.empty());
    if (h.type() == pb::MSG_PULL_DENSE) {
      ASSERT_GE(h.shard(), 0);
      ASSERT_LT(static_cast<size_t>(h.shard()), kShardLengths.size());
    }
    return;
  }
  ASSERT_EQ(h.flags() & ~63u, 0u);
  ASSERT_GE(h.shard(), 0);
  ASSERT_LT(static_cast<size_t>(h.shard()), kShardLengths.size());
  const uint64_t len = kShardLengths[static_cast<size_t>(h.shard())];
  const bool dense = (h.flags() & pb::FLAG_DENSE) != 0;
  const bool fp16 = (h.flags() & (pb::FLAG_FP16 | pb::FLAG_BF16)) != 0;
  const IndexFormat format = (h.flags() & pb::FLAG_INDEX_DELTA)    ? IndexFormat::kDeltaVByte
                             : (h.flags() & pb::FLAG_INDEX_BITMAP) ? IndexFormat::kBitmap
                                                                   : IndexFormat::kRaw;
  ASSERT_EQ(raw.size(), dense ? 2u : 3u);
  if (dense) {
    ASSERT_EQ(h.count(), len);
    ASSERT_TRUE(msg.indices.empty());
  } else {
    ASSERT_LE(h.count(), len);
    ASSERT_EQ(msg.indices.size(), h.count());
    std::vector<uint32_t> reference;
    if (format == IndexFormat::kRaw) {
      ASSERT_EQ(raw[1].size(), h.count() * 4);
      reference.resize(h.count());
      std::memcpy(reference.data(), raw[1].data(), raw[1].size());
    } else {
      ASSERT_TRUE(testing::ReferenceDecodeIndices(format, raw[1], h.count(), &reference));
      ASSERT_EQ(msg.index_format, format);
    }
    for (size_t j = 0; j < msg.indices.size(); ++j) {
      const uint32_t want = reference[j];
      ASSERT_EQ(msg.indices[j], want);
      ASSERT_LT(msg.indices[j], len);
      if (j > 0) {
        ASSERT_GT(msg.indices[j], msg.indices[j - 1]);
      }
    }
  }
  ASSERT_EQ(raw.back().size(), h.count() * (fp16 ? 2 : 4));
  if (h.flags() & pb::FLAG_BF16) {
    ASSERT_EQ(msg.values_bf16.size(), h.count());
    ASSERT_TRUE(msg.values.empty() && msg.values_fp16.empty());
    for (uint16_t v : msg.values_bf16) ASSERT_NE(v & 0x7F80, 0x7F80);
  } else if (fp16) {
    ASSERT_EQ(msg.values_fp16.size(), h.count());
    ASSERT_TRUE(msg.values.empty());
    for (uint16_t v : msg.values_fp16) ASSERT_NE(v & 0x7C00, 0x7C00);
  } else {
    ASSERT_EQ(msg.values.size(), h.count());
    ASSERT_TRUE(msg.values_fp16.empty());
    for (size_t j = 0; j < msg.values.size(); ++j) {
      ASSERT_TRUE(std::isfinite(msg.values[j]));
      ASSERT_EQ(std::memcmp(&msg.values[j], raw.back().data() + 4 * j, 4), 0);
    }
  }
}

struct Tally {
  int ok = 0;
  int rejected = 0;
  std::vector<int> by_code = std::vector<int>(32, 0);
};

void DecodeAndCheck(const RawMessage& raw, bool misalign, Tally* tally) {
  std::vector<std::string> backing;
  Message msg;
  const Status s =
      Decode(ToFrames(raw, misalign, &backing), DecodeLimits{kShardLengths, true}, &msg);
  const pb::ErrorCode code = WireCodeOf(s);
  if (s.ok()) {
    ASSERT_EQ(code, pb::ERROR_NONE);
    ASSERT_NO_FATAL_FAILURE(ExpectValid(msg, raw));
    ++tally->ok;
  } else {
    ASSERT_NE(code, pb::ERROR_NONE) << s.ToString();
    ASSERT_TRUE(pb::ErrorCode_IsValid(code));
    ASSERT_TRUE(msg.indices.empty() && msg.values.empty() && msg.values_fp16.empty());
    ASSERT_TRUE(msg.storage.empty());
    ++tally->rejected;
    ++tally->by_code[static_cast<size_t>(code)];
  }
}

std::string RandomBytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

size_t RandomLength(std::mt19937_64& rng) {
  switch (rng() % 4) {
    case 0:
      return 0;
    case 1:
      return rng() % 8;
    case 2:
      return rng() % 64;
    default:
      return rng() % 600;
  }
}

// A header whose fields are drawn near the interesting values, serialized as is.
std::string RandomHeader(std::mt19937_64& rng) {
  pb::Header h;
  h.set_version(rng() % 8 == 0 ? static_cast<uint32_t>(rng() % (kProtocolVersion + 2))
                               : kProtocolVersion);
  h.set_type(static_cast<pb::MsgType>(rng() % 16));
  h.set_sender(static_cast<int32_t>(rng() % 8) - 1);
  h.set_shard(static_cast<int32_t>(rng() % 5) - 1);
  h.set_count(rng() % 10 == 0 ? rng() : rng() % 70);
  h.set_flags(static_cast<uint32_t>(rng() % 10 == 0 ? rng() : rng() % 8));
  h.set_checksum(static_cast<uint32_t>(rng()));
  if (rng() % 3 == 0) h.mutable_barrier()->set_group(3);
  std::string bytes;
  h.SerializeToString(&bytes);
  return bytes;
}

RawMessage ToRaw(Frames frames) {
  RawMessage raw;
  for (const auto& f : frames) raw.emplace_back(static_cast<const char*>(f.data()), f.size());
  return raw;
}

// A valid encoding of a random message (control or data), as bytes.
RawMessage RandomValid(std::mt19937_64& rng) {
  const int kind = static_cast<int>(rng() % 6);
  pb::Header h;
  h.set_sender(static_cast<int32_t>(rng() % 6));
  h.set_round(rng() % 1000);
  Frames frames;
  if (kind == 0) {
    h.set_type(pb::MSG_NODE_DEAD);
    h.mutable_node_dead()->set_id(2);
    h.mutable_node_dead()->set_reason(rng() % 2 == 0 ? "" : "timeout");
    frames = std::move(EncodeControl(h)).value();
  } else if (kind == 1) {
    h.set_type(pb::MSG_PULL_DENSE);
    h.set_shard(static_cast<int32_t>(rng() % 3));
    frames = std::move(EncodeControl(h)).value();
  } else {
    const int shard = static_cast<int>(rng() % 3);
    const uint64_t len = kShardLengths[static_cast<size_t>(shard)];
    const bool dense = kind == 2;
    const int value_kind = static_cast<int>(rng() % 3);  // fp32, fp16, bf16
    const bool fp16 = value_kind != 0;
    // Dense unions (bitmap) and sparse ones with gaps past one byte (delta-vbyte).
    const uint64_t every = std::array<uint64_t, 3>{2, 3, 300}[rng() % 3];
    h.set_type(kind == 3 ? pb::MSG_UPDATE : (kind == 4 && dense ? pb::MSG_DENSE : pb::MSG_PUSH));
    h.set_shard(shard);
    std::vector<uint32_t> idx;
    if (!dense) {
      for (uint32_t i = 0; i < len; ++i) {
        if (rng() % every == 0) idx.push_back(i);
      }
    }
    const size_t count = dense ? len : idx.size();
    std::vector<float> val(count);
    std::vector<uint16_t> half(count);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (size_t i = 0; i < count; ++i) {
      val[i] = normal(rng);
      half[i] = static_cast<uint16_t>(rng() % 0x7C00) | static_cast<uint16_t>(rng() & 0x8000);
    }
    DataPayload p;
    p.indices = idx;
    p.values = fp16 ? testing::Bytes(half) : testing::Bytes(val);
    p.value_type = value_kind == 0   ? ValueType::kFp32
                   : value_kind == 1 ? ValueType::kFp16
                                     : ValueType::kBf16;
    p.dense = dense;
    // Copied out below, while the borrowed arrays are still alive.
    return ToRaw(std::move(EncodeData(h, p,
                                      EncodeOptions{.checksum = rng() % 4 != 0,
                                                    .compact_indices = rng() % 2 == 0}))
                     .value());
  }
  return ToRaw(std::move(frames));
}

void Mutate(std::mt19937_64& rng, RawMessage* raw) {
  const int steps = 1 + static_cast<int>(rng() % 3);
  for (int k = 0; k < steps; ++k) {
    const size_t f = raw->empty() ? 0 : rng() % raw->size();
    switch (rng() % 7) {
      case 0:  // truncate a frame
        if (!raw->empty()) (*raw)[f].resize(rng() % ((*raw)[f].size() + 1));
        break;
      case 1:  // flip one bit
      case 2:
        if (!raw->empty() && !(*raw)[f].empty()) {
          (*raw)[f][rng() % (*raw)[f].size()] ^= static_cast<char>(1u << (rng() % 8));
        }
        break;
      case 3:  // drop a frame
        if (!raw->empty()) raw->erase(raw->begin() + static_cast<ptrdiff_t>(f));
        break;
      case 4:  // duplicate a frame
        if (!raw->empty()) raw->insert(raw->begin() + static_cast<ptrdiff_t>(f), (*raw)[f]);
        break;
      case 5:  // append bytes
        if (!raw->empty()) (*raw)[f] += RandomBytes(rng, 1 + rng() % 8);
        break;
      default:  // overwrite a 4-byte word with an interesting pattern
        if (!raw->empty() && (*raw)[f].size() >= 4) {
          static const uint32_t kWords[] = {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFFFFFFFu,
                                            0x7C007C00u, 0u,          64u,         63u};
          const uint32_t w = kWords[rng() % 8];
          std::memcpy((*raw)[f].data() + 4 * (rng() % ((*raw)[f].size() / 4)), &w, 4);
        }
    }
  }
}

TEST(ProtoCodecRandomTest, RandomFramesNeverCrash) {
  google::protobuf::LogSilencer quiet;  // invalid UTF-8 in random strings is logged otherwise
  std::mt19937_64 rng(20240611);
  Tally tally;
  for (int n = 0; n < 10000; ++n) {
    RawMessage raw(rng() % 5);
    for (size_t i = 0; i < raw.size(); ++i) {
      raw[i] = (i == 0 && rng() % 2 == 0) ? RandomHeader(rng) : RandomBytes(rng, RandomLength(rng));
    }
    ASSERT_NO_FATAL_FAILURE(DecodeAndCheck(raw, rng() % 4 == 0, &tally)) << "message " << n;
  }
  EXPECT_EQ(tally.ok + tally.rejected, 10000);
  EXPECT_GT(tally.rejected, 9000);
  // The random headers reach past parsing into the deeper checks.
  EXPECT_GT(tally.by_code[pb::ERROR_MALFORMED_HEADER], 0);
  EXPECT_GT(tally.by_code[pb::ERROR_VERSION_MISMATCH], 0);
  EXPECT_GT(tally.by_code[pb::ERROR_BAD_FRAME_COUNT], 0);
  EXPECT_GT(tally.by_code[pb::ERROR_WRONG_SHARD], 0);
}

TEST(ProtoCodecRandomTest, MutatedValidMessagesNeverCrash) {
  google::protobuf::LogSilencer quiet;
  std::mt19937_64 rng(77);
  Tally tally;
  int valid_ok = 0;
  for (int n = 0; n < 10000; ++n) {
    RawMessage raw = RandomValid(rng);
    if (n % 10 == 0) {  // the unmutated encoding must decode
      Tally clean;
      ASSERT_NO_FATAL_FAILURE(DecodeAndCheck(raw, rng() % 2 == 0, &clean));
      ASSERT_EQ(clean.ok, 1) << "message " << n;
      ++valid_ok;
    }
    Mutate(rng, &raw);
    ASSERT_NO_FATAL_FAILURE(DecodeAndCheck(raw, rng() % 4 == 0, &tally)) << "message " << n;
  }
  EXPECT_EQ(valid_ok, 1000);
  EXPECT_EQ(tally.ok + tally.rejected, 10000);
  EXPECT_GT(tally.rejected, 0);
  EXPECT_GT(tally.by_code[pb::ERROR_BAD_FRAME_SIZE], 0);
  EXPECT_GT(tally.by_code[pb::ERROR_BAD_FRAME_COUNT], 0);
  EXPECT_GT(tally.by_code[pb::ERROR_CHECKSUM], 0);
  EXPECT_GT(tally.by_code[pb::ERROR_BAD_ENCODING], 0);  // a compact index frame cut or grown
}

}  // namespace
}  // namespace sieve
