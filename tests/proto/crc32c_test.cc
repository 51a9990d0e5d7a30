// CRC-32C: published check values, chaining, and the hardware and portable routines agreeing with
// each other and with a bit-at-a-time reference on random buffers of many lengths and alignments.
#include "proto/crc32c.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "tests/proto/test_util.h"

namespace sieve {
namespace {

using Fn = uint32_t (*)(uint32_t, const void*, size_t);

struct Impl {
  const char* name;
  Fn fn;
};

uint32_t Portable(uint32_t c, const void* p, size_t n) {
  return Crc32cWith(Crc32cPath::kPortable, c, p, n);
}
uint32_t Sse42(uint32_t c, const void* p, size_t n) {
  return Crc32cWith(Crc32cPath::kSse42, c, p, n);
}
uint32_t Clmul(uint32_t c, const void* p, size_t n) {
  return Crc32cWith(Crc32cPath::kClmul, c, p, n);
}

// Crc32c() and every routine this CPU runs.
std::vector<Impl> Impls() {
  std::vector<Impl> impls = {{"Crc32c", &Crc32c}, {"portable", &Portable}};
  if (Crc32cSupported(Crc32cPath::kSse42)) impls.push_back({"sse4.2", &Sse42});
  if (Crc32cSupported(Crc32cPath::kClmul)) impls.push_back({"vpclmulqdq", &Clmul});
  return impls;
}

uint32_t Of(Fn fn, const std::vector<uint8_t>& bytes) { return fn(0, bytes.data(), bytes.size()); }

std::span<const std::byte> AsBytes(const uint8_t* p, size_t n) {
  return std::as_bytes(std::span<const uint8_t>(p, n));
}

TEST(Crc32cTest, ReportsWhichRoutinesRun) {
  // Informational: the agreement tests below cover only the routines this CPU runs.
  std::printf("CRC-32C: Crc32c() uses %s; sse4.2 %s, vpclmulqdq %s\n",
              Crc32cPathName(Crc32cBestPath()),
              Crc32cSupported(Crc32cPath::kSse42) ? "tested" : "not supported here",
              Crc32cSupported(Crc32cPath::kClmul) ? "tested" : "not supported here");
  EXPECT_TRUE(Crc32cSupported(Crc32cPath::kPortable));
  EXPECT_TRUE(Crc32cSupported(Crc32cBestPath()));
  // An unsupported path falls back to the portable routine's (identical) value.
  EXPECT_EQ(Crc32cWith(static_cast<Crc32cPath>(99), 0, "123456789", 9), 0xE3069283u);
}

TEST(Crc32cTest, CheckValues) {
  const std::string check = "123456789";
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xFF), up(32), down(32);
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<uint8_t>(i);
    down[i] = static_cast<uint8_t>(31 - i);
  }
  for (const Impl& impl : Impls()) {
    SCOPED_TRACE(impl.name);
    EXPECT_EQ(impl.fn(0, check.data(), check.size()), 0xE3069283u);
    EXPECT_EQ(impl.fn(0, nullptr, 0), 0u);
    EXPECT_EQ(impl.fn(0xE3069283u, nullptr, 0), 0xE3069283u);
    // RFC 3720 (iSCSI), appendix B.4.
    EXPECT_EQ(Of(impl.fn, zeros), 0x8A9136AAu);
    EXPECT_EQ(Of(impl.fn, ones), 0x62A8AB43u);
    EXPECT_EQ(Of(impl.fn, up), 0x46DD794Eu);
    EXPECT_EQ(Of(impl.fn, down), 0x113FDB5Cu);
  }
  EXPECT_EQ(testing::ReferenceCrc32c(0, std::as_bytes(std::span(check))), 0xE3069283u);
}

// Every length 0..2100 (all tails, the folding thresholds and the small three-stream blocks) at
// every offset 0..7 from an aligned address, then lengths around the large blocks and a few
// megabyte-sized buffers.
TEST(Crc32cTest, RoutinesAgreeOnRandomBuffers) {
  std::mt19937_64 rng(20261130);
  std::vector<uint8_t> buf((1u << 21) + 64);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 2100; ++n) lengths.push_back(n);
  for (size_t n : {6143, 6144, 6145, 6144 + 767, 6144 + 768, 12288 + 8, 24575, 24576, 24577, 100003,
                   1 << 20, (1 << 21) - 5}) {
    lengths.push_back(n);
  }
  const std::vector<Impl> impls = Impls();
  for (size_t n : lengths) {
    for (size_t offset = 0; offset < 8; ++offset) {
      const uint8_t* p = buf.data() + offset;
      const uint32_t want = Portable(0, p, n);
      for (const Impl& impl : impls) {
        ASSERT_EQ(impl.fn(0, p, n), want) << impl.name << " length " << n << " offset " << offset;
        // A nonzero starting value (the head of a longer message) enters every routine alike.
        ASSERT_EQ(impl.fn(0x9A5C3E17u, p, n), Portable(0x9A5C3E17u, p, n))
            << impl.name << " length " << n << " offset " << offset;
      }
      if (n <= 2100 || offset == 0) {
        ASSERT_EQ(testing::ReferenceCrc32c(0, AsBytes(p, n)), want) << "length " << n;
      }
    }
  }
}

TEST(Crc32cTest, ChainingEqualsOneCall) {
  std::mt19937_64 rng(7);
  std::vector<uint8_t> buf(20000);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (const Impl& impl : Impls()) {
    SCOPED_TRACE(impl.name);
    const uint32_t whole = impl.fn(0, buf.data(), buf.size());
    for (int trial = 0; trial < 200; ++trial) {
      const size_t cut = rng() % (buf.size() + 1);
      const uint32_t first = impl.fn(0, buf.data(), cut);
      ASSERT_EQ(impl.fn(first, buf.data() + cut, buf.size() - cut), whole) << "cut " << cut;
      // Mixing the routines mid-stream gives the same value too.
      ASSERT_EQ(Portable(first, buf.data() + cut, buf.size() - cut), whole);
    }
  }
}

TEST(Crc32cTest, DetectsEverySingleBitFlip) {
  std::vector<uint8_t> buf(10000);
  std::mt19937_64 rng(11);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  const uint32_t good = Crc32c(0, buf.data(), buf.size());
  for (size_t bit = 0; bit < 8 * buf.size(); bit += 37) {
    buf[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    ASSERT_NE(Crc32c(0, buf.data(), buf.size()), good) << "bit " << bit;
    buf[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
  }
}

}  // namespace
}  // namespace sieve
