// The compact index codings (proto/index_coding.h) and their messages (protocol 7): round trips
// of random and adversarial index sets checked against the element-by-element reference reader
// (tests/proto/test_util.h), the encoder's choice against the two sizes computed by hand, and
// every truncation and bit flip of valid messages rejected.
#include "proto/index_coding.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "proto/codec.h"
#include "proto/error_code.h"
#include "proto/messages.h"
#include "tests/proto/test_util.h"

namespace sieve {
namespace {

constexpr uint64_t kLen = 5000;

// Index sets: empty, one index (first, last, middle), the whole shard, runs, maximal gaps, and
// random sets at densities from 1e-4 to 1.
std::vector<std::vector<uint32_t>> Sets() {
  std::mt19937_64 rng(7);
  std::vector<std::vector<uint32_t>> sets = {{}, {0}, {kLen - 1}, {2500}, {0, kLen - 1}};
  std::vector<uint32_t> all(kLen);
  for (uint32_t i = 0; i < kLen; ++i) all[i] = i;
  sets.push_back(all);
  sets.push_back({10, 11, 12, 13, 14, 15, 16, 17, 18, 4000, 4001, 4002});  // runs
  std::vector<uint32_t> strided;
  for (uint32_t i = 3; i < kLen; i += 257) strided.push_back(i);  // 2-byte gaps
  sets.push_back(strided);
  for (double density : {1e-4, 1e-3, 0.01, 0.05, 0.1, 0.125, 0.2, 0.5, 0.9, 1.0}) {
    for (int rep = 0; rep < 3; ++rep) {
      std::vector<uint32_t> s;
      for (uint32_t i = 0; i < kLen; ++i)
        if (std::uniform_real_distribution<double>(0, 1)(rng) < density) s.push_back(i);
      sets.push_back(s);
    }
  }
  return sets;
}

std::string AsString(const CodedBytes& b) { return std::string(b.begin(), b.end()); }

TEST(IndexCodingTest, BothCodingsRoundTripAgainstTheReference) {
  for (const auto& set : Sets()) {
    for (IndexFormat f : {IndexFormat::kDeltaVByte, IndexFormat::kBitmap}) {
      if (f == IndexFormat::kBitmap && set.empty()) continue;  // an empty list is delta-vbyte
      CodedBytes bytes;
      EncodeIndicesAs(f, set, &bytes);
      EXPECT_EQ(bytes.size(), f == IndexFormat::kBitmap ? BitmapBytes(set) : DeltaVByteBytes(set));
      std::vector<uint32_t> reference;
      ASSERT_TRUE(testing::ReferenceDecodeIndices(f, AsString(bytes), set.size(), &reference))
          << IndexFormatName(f) << " n=" << set.size();
      EXPECT_EQ(reference, set);
      std::vector<uint32_t> out(set.size());
      std::string why;
      ASSERT_EQ(DecodeIndices(f, {bytes.data(), bytes.size()}, set.size(), kLen, out, &why),
                IndexFault::kNone)
          << why;
      EXPECT_EQ(out, set);
    }
  }
}

TEST(IndexCodingTest, EncoderPicksTheSmallerCoding) {
  for (const auto& set : Sets()) {
    CodedBytes bytes;
    const IndexFormat f = EncodeIndices(set, &bytes);
    const size_t delta = DeltaVByteBytes(set), bitmap = BitmapBytes(set);
    if (set.empty()) {
      EXPECT_EQ(f, IndexFormat::kDeltaVByte);
      EXPECT_TRUE(bytes.empty());
      continue;
    }
    EXPECT_EQ(bytes.size(), std::min(delta, bitmap));
    EXPECT_EQ(f, bitmap < delta ? IndexFormat::kBitmap : IndexFormat::kDeltaVByte);
  }
  // Gaps that need 4 bytes each.
  const std::vector<uint32_t> far = {0, 1u << 30, (1u << 31) + 5};
  CodedBytes bytes;
  EXPECT_EQ(EncodeIndices(far, &bytes), IndexFormat::kDeltaVByte);
  EXPECT_EQ(bytes.size(), 1u + 1 + 4 + 4);
}

TEST(IndexCodingTest, MalformedCodingsAreRefusedWithTheirFault) {
  std::vector<uint32_t> out(kLen + 8);
  std::string why;
  auto decode = [&](IndexFormat f, std::vector<uint8_t> b, uint64_t count, uint64_t len = kLen) {
    return DecodeIndices(f, {b.data(), b.size()}, count, len, out, &why);
  };
  // delta-vbyte: control bytes announce 2 data bytes, the frame has 1 or 3.
  EXPECT_EQ(decode(IndexFormat::kDeltaVByte, {0x00, 5}, 2), IndexFault::kEncoding);
  EXPECT_EQ(decode(IndexFormat::kDeltaVByte, {0x00, 5, 6, 7}, 2), IndexFault::kEncoding);
  EXPECT_EQ(decode(IndexFormat::kDeltaVByte, {0x00, 5, 6}, 2), IndexFault::kNone);
  EXPECT_EQ(out[0], 5u);
  EXPECT_EQ(out[1], 11u);
  // An unused field of the last control byte set.
  EXPECT_EQ(decode(IndexFormat::kDeltaVByte, {0x10, 5, 6}, 2), IndexFault::kEncoding);
  EXPECT_EQ(decode(IndexFormat::kDeltaVByte, {}, 1), IndexFault::kEncoding);
  EXPECT_EQ(decode(IndexFormat::kDeltaVByte, {7}, 0), IndexFault::kEncoding);
  // A zero gap after the first: not strictly increasing.
  EXPECT_EQ(decode(IndexFormat::kDeltaVByte, {0x00, 5, 0}, 2), IndexFault::kOrder);
  // A wrap-around: 0xFFFFFFFF + 2 = 1 < the first.
  EXPECT_EQ(
      decode(IndexFormat::kDeltaVByte, {0x03, 0xFF, 0xFF, 0xFF, 0xFF, 2}, 2, uint64_t{1} << 32),
      IndexFault::kOrder);
  EXPECT_EQ(decode(IndexFormat::kDeltaVByte, {0x00, 10, 200}, 2, 100), IndexFault::kRange);
  // bitmap: base 3, bits 0 and 2 -> {3, 5}.
  EXPECT_EQ(decode(IndexFormat::kBitmap, {3, 0, 0, 0, 0x05}, 2), IndexFault::kNone);
  EXPECT_EQ(out[0], 3u);
  EXPECT_EQ(out[1], 5u);
  EXPECT_EQ(decode(IndexFormat::kBitmap, {3, 0, 0, 0, 0x05}, 3), IndexFault::kEncoding);  // count
  EXPECT_EQ(decode(IndexFormat::kBitmap, {3, 0, 0, 0, 0x05}, 1), IndexFault::kEncoding);
  EXPECT_EQ(decode(IndexFormat::kBitmap, {3, 0, 0, 0, 0x04}, 1), IndexFault::kEncoding);  // bit 0
  EXPECT_EQ(decode(IndexFormat::kBitmap, {3, 0, 0, 0, 0x05, 0}, 2),
            IndexFault::kEncoding);  // 0 tail
  EXPECT_EQ(decode(IndexFormat::kBitmap, {3, 0, 0, 0}, 1), IndexFault::kEncoding);
  EXPECT_EQ(decode(IndexFormat::kBitmap, {3, 0, 0, 0, 0x81}, 2, 10), IndexFault::kRange);    // 10
  EXPECT_EQ(decode(IndexFormat::kBitmap, {9, 0, 0, 0, 0x01}, 1, 9), IndexFault::kRange);     // base
  EXPECT_EQ(decode(IndexFormat::kBitmap, {0, 0, 0, 0, 1, 0, 1}, 2, 9), IndexFault::kRange);  // size
  // count above the shard length.
  EXPECT_EQ(decode(IndexFormat::kDeltaVByte, {0x00, 1, 1}, 2, 1), IndexFault::kRange);
}

// A compact message of `set` with values of type `vt`.
Frames CompactMessage(const std::vector<uint32_t>& set, ValueType vt, std::mt19937_64& rng) {
  auto keep = std::make_shared<std::pair<std::vector<uint32_t>, std::vector<uint16_t>>>();
  keep->first = set;
  std::vector<float> f(set.size());
  for (float& x : f) x = std::normal_distribution<float>(0, 1)(rng);
  DataPayload p;
  p.indices = keep->first;
  p.value_type = vt;
  if (vt == ValueType::kFp32) {
    auto fk = std::make_shared<std::vector<float>>(f);
    p.values = std::as_bytes(std::span<const float>(*fk));
    p.keepalive = fk;
  } else {
    keep->second.resize(set.size());
    for (size_t j = 0; j < set.size(); ++j)  // finite 16-bit patterns of either type
      keep->second[j] = static_cast<uint16_t>(0x3000 + rng() % 0x800) | ((rng() & 1) << 15);
    p.values = std::as_bytes(std::span<const uint16_t>(keep->second));
    p.keepalive = keep;
  }
  auto frames = EncodeData(MakeDataHeader(pb::MSG_PUSH, 3, 1, 0, 9), p);
  EXPECT_TRUE(frames.ok());
  return std::move(frames).value();
}

TEST(IndexCodingTest, MessagesRoundTripForEveryValueType) {
  std::mt19937_64 rng(3);
  const std::vector<uint64_t> lengths = {kLen};
  for (const auto& set : Sets()) {
    for (ValueType vt : {ValueType::kFp32, ValueType::kFp16, ValueType::kBf16}) {
      Frames frames = CompactMessage(set, vt, rng);
      const std::string index_frame(static_cast<const char*>(frames[1].data()), frames[1].size());
      const std::string value_frame(static_cast<const char*>(frames[2].data()), frames[2].size());
      Message m;
      Status s = Decode(std::move(frames), {lengths, true}, &m);
      ASSERT_TRUE(s.ok()) << s.ToString();
      std::vector<uint32_t> reference;
      ASSERT_TRUE(
          testing::ReferenceDecodeIndices(m.index_format, index_frame, set.size(), &reference));
      EXPECT_EQ(reference, set);
      EXPECT_TRUE(std::equal(m.indices.begin(), m.indices.end(), set.begin(), set.end()));
      const auto& got = vt == ValueType::kFp32   ? std::as_bytes(m.values)
                        : vt == ValueType::kFp16 ? std::as_bytes(m.values_fp16)
                                                 : std::as_bytes(m.values_bf16);
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(got.data()), got.size()), value_frame);
    }
  }
}

// Every truncation and every single-bit flip of a data frame of valid compact messages is an
// error (the checksum catches every flip; with verification off, a flip in the index frame is
// either refused or decodes to a valid list the reference agrees with).
TEST(IndexCodingTest, EveryTruncationAndBitFlipIsRefused) {
  std::mt19937_64 rng(5);
  const std::vector<uint64_t> lengths = {kLen};
  const std::vector<std::vector<uint32_t>> sets = {
      {7}, {1, 2, 3, 900, 901, 4999}, {0, 300, 70000 % kLen}, Sets()[20], Sets()[30]};
  int refused = 0, checked = 0;
  for (auto set : sets) {
    std::sort(set.begin(), set.end());
    set.erase(std::unique(set.begin(), set.end()), set.end());
    for (ValueType vt : {ValueType::kFp32, ValueType::kBf16}) {
      const Frames valid = CompactMessage(set, vt, rng);
      for (size_t f = 1; f < valid.size(); ++f) {
        for (size_t cut = 0; cut < valid[f].size(); ++cut) {
          Frames t = CopyFrames(valid);
          t[f] = zmq::message_t(valid[f].data(), cut);
          for (bool verify : {true, false}) {
            Message m;
            EXPECT_FALSE(Decode(CopyFrames(t), {lengths, verify}, &m).ok())
                << "frame " << f << " cut to " << cut;
            ++checked;
          }
        }
        for (size_t bit = 0; bit < valid[f].size() * 8; ++bit) {
          Frames t = CopyFrames(valid);
          static_cast<uint8_t*>(t[f].data())[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
          Message m;
          const Status s = Decode(CopyFrames(t), {lengths, true}, &m);
          const pb::ErrorCode code = WireCodeOf(s);
          EXPECT_FALSE(s.ok()) << "frame " << f << " bit " << bit;
          EXPECT_EQ(code, pb::ERROR_CHECKSUM);
          ++checked;
          if (f != 1) continue;
          Message unverified;
          if (Decode(CopyFrames(t), {lengths, false}, &unverified).ok()) {
            std::vector<uint32_t> reference;
            const std::string bytes(static_cast<const char*>(t[1].data()), t[1].size());
            ASSERT_TRUE(testing::ReferenceDecodeIndices(unverified.index_format, bytes,
                                                        unverified.indices.size(), &reference));
            ASSERT_TRUE(std::equal(reference.begin(), reference.end(), unverified.indices.begin(),
                                   unverified.indices.end()));
            for (size_t j = 0; j < reference.size(); ++j) {
              ASSERT_LT(reference[j], kLen);
              if (j > 0) {
                ASSERT_GT(reference[j], reference[j - 1]);
              }
            }
          } else {
            ++refused;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 1000);
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace sieve
