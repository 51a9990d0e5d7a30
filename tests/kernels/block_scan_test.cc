// The CPU counting scan (kernels/block_scan.h) at every vector width this CPU runs, against a
// brute-force oracle written from the contract: the hits, their values, the masking, the
// non-finite count, the `need` cap, and Σx² bit for bit against the contract's summation order.
#include "kernels/block_scan.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend_functors.h"

namespace sieve::backend_internal {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Oracle {
  std::vector<uint32_t> idx;
  std::vector<float> vals;
  uint64_t count = 0, nonfinite = 0;
  double sumsq = 0.0;
};

// The contract, entry by entry: blocks of 64 from lo; per full block 16 float partial sums
// s[e mod 16] in index order, reduced ((s[l] + s[4+l]) + (s[8+l] + s[12+l])) then
// (l0 + l1) + (l2 + l3); a last partial block summed in order; a non-finite block sum → the block
// in double over its finite entries.
Oracle Expect(const std::vector<float>& x, size_t lo, size_t hi, int64_t key_thr, uint64_t need) {
  Oracle o;
  for (size_t b = lo; b < hi; b += 64) {
    const size_t e = std::min(hi, b + 64);
    float fss = 0.0f;
    if (e - b == 64) {
      float part[16] = {};
      for (size_t i = b; i < e; ++i) part[(i - b) % 16] += x[i] * x[i];
      float lane[4];
      for (int l = 0; l < 4; ++l) lane[l] = (part[l] + part[4 + l]) + (part[8 + l] + part[12 + l]);
      fss = (lane[0] + lane[1]) + (lane[2] + lane[3]);
    } else {
      for (size_t i = b; i < e; ++i) fss += x[i] * x[i];
    }
    if (std::isfinite(fss)) {
      o.sumsq += fss;
    } else {
      double block = 0.0;
      for (size_t i = b; i < e; ++i) {
        if (std::isfinite(x[i])) block += static_cast<double>(x[i]) * x[i];
      }
      o.sumsq += block;
    }
    for (size_t i = b; i < e; ++i) {
      if (!std::isfinite(x[i])) {
        ++o.nonfinite;
        continue;
      }
      const int64_t key = std::bit_cast<uint32_t>(std::fabs(x[i]));
      if (key > key_thr) {
        if (o.count < need) {
          o.idx.push_back(static_cast<uint32_t>(i));
          o.vals.push_back(x[i]);
        }
        ++o.count;
      }
    }
  }
  return o;
}

int64_t KeyOf(float t) { return std::bit_cast<uint32_t>(t); }

std::vector<SimdLevel> Levels() {
  std::vector<SimdLevel> out;
  for (SimdLevel l : {SimdLevel::kScalar, SimdLevel::kSse2, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (SimdLevelSupported(l)) out.push_back(l);
  }
  return out;
}

std::vector<float> Normal(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> x(n);
  for (float& v : x) v = nd(rng);
  return x;
}

// Runs the scan at `level` on a copy (masked when `mask`) and checks it against the oracle.
void CheckScan(SimdLevel level, const std::vector<float>& x, size_t lo, size_t hi, int64_t key_thr,
               uint64_t need, bool want_sumsq, bool mask, ValuePrecision keep,
               const std::string& what) {
  SCOPED_TRACE(what + " at " + std::string(SimdLevelName(level)));
  const Oracle o = Expect(x, lo, hi, key_thr, need);
  std::vector<float> r = x;
  std::vector<uint32_t> idx(need + 1, 0xdeadbeefu);
  std::vector<float> vals(need + 1, -7.0f);
  ScanOut out;
  out.idx = idx.data();
  out.vals = vals.data();
  out.mask_r = mask ? r.data() : nullptr;
  out.keep = keep;
  out.need = need;
  ScanAbove(level, mask ? r.data() : x.data(), lo, hi, key_thr, want_sumsq, &out);
  EXPECT_EQ(out.count, o.count);
  EXPECT_EQ(out.nonfinite, o.nonfinite);
  if (want_sumsq) {
    EXPECT_EQ(std::bit_cast<uint64_t>(out.sumsq), std::bit_cast<uint64_t>(o.sumsq))
        << out.sumsq << " vs " << o.sumsq;
  } else {
    EXPECT_EQ(out.sumsq, 0.0);
  }
  const size_t held = o.idx.size();
  ASSERT_EQ(held, std::min<uint64_t>(o.count, need));
  for (size_t j = 0; j < held; ++j) {
    ASSERT_EQ(idx[j], o.idx[j]) << "hit " << j;
    ASSERT_EQ(std::bit_cast<uint32_t>(vals[j]), std::bit_cast<uint32_t>(o.vals[j])) << "hit " << j;
  }
  EXPECT_EQ(idx[need], 0xdeadbeefu) << "wrote past need";
  std::vector<float> want_r = x;
  if (mask) {
    for (size_t j = 0; j < held; ++j) want_r[o.idx[j]] = KeptResidual(x[o.idx[j]], keep);
  }
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(r[i]), std::bit_cast<uint32_t>(want_r[i]))
        << "r[" << i << "]";
  }
}

TEST(BlockScanTest, TheBestLevelIsSupported) {
  EXPECT_TRUE(SimdLevelSupported(BestSimdLevel()));
  EXPECT_TRUE(SimdLevelSupported(SimdLevel::kScalar));
  EXPECT_EQ(SimdLevelName(SimdLevel::kAvx512), "avx512");
}

TEST(BlockScanTest, EveryLevelMatchesTheOracle) {
  const std::vector<float> x = Normal(64 * 1000 + 37, 1);
  for (SimdLevel level : Levels()) {
    for (float t : {0.0f, 1.0f, 2.5f, 3.3f, 10.0f}) {
      for (bool sumsq : {false, true}) {
        CheckScan(level, x, 0, x.size(), KeyOf(t), x.size(), sumsq, false, ValuePrecision::kFp32,
                  "t=" + std::to_string(t));
        CheckScan(level, x, 0, x.size(), KeyOf(t), x.size(), sumsq, true, ValuePrecision::kFp32,
                  "masked t=" + std::to_string(t));
      }
    }
    // Every entry (key_thr < 0), and a range not aligned to a block, with a short tail.
    CheckScan(level, x, 0, x.size(), -1, x.size(), true, true, ValuePrecision::kFp32, "all");
    CheckScan(level, x, 5, 64 * 7 + 3, KeyOf(0.5f), x.size(), true, true, ValuePrecision::kFp32,
              "unaligned");
    CheckScan(level, x, 10, 40, KeyOf(0.5f), x.size(), true, false, ValuePrecision::kFp32,
              "shorter than a block");
  }
}

TEST(BlockScanTest, TheCapKeepsTheFirstHitsAndCountsTheRest) {
  const std::vector<float> x = Normal(64 * 50, 2);
  for (SimdLevel level : Levels()) {
    for (uint64_t need : {0, 1, 63, 64, 65, 500}) {
      CheckScan(level, x, 0, x.size(), KeyOf(0.3f), need, true, true, ValuePrecision::kFp32,
                "need=" + std::to_string(need));
    }
  }
}

TEST(BlockScanTest, NonFiniteEntriesAreCountedNeverSelected) {
  std::vector<float> x = Normal(64 * 20 + 9, 3);
  x[3] = kNaN;
  x[64 + 5] = kInf;
  x[64 * 7] = -kInf;
  x[64 * 20 + 4] = kNaN;  // in the tail
  for (SimdLevel level : Levels()) {
    CheckScan(level, x, 0, x.size(), KeyOf(1.0f), x.size(), true, true, ValuePrecision::kFp32,
              "nan/inf");
    // A threshold at the largest finite key selects nothing; the bad entries are still counted.
    CheckScan(level, x, 0, x.size(), KeyOf(std::numeric_limits<float>::max()), x.size(), true,
              false, ValuePrecision::kFp32, "max threshold");
  }
}

TEST(BlockScanTest, AFloatOverflowSumsTheBlockInDouble) {
  std::vector<float> x = Normal(64 * 8, 4);
  x[70] = 3e38f;  // x² overflows float
  x[71] = -2e38f;
  for (SimdLevel level : Levels()) {
    CheckScan(level, x, 0, x.size(), KeyOf(1.0f), x.size(), true, false, ValuePrecision::kFp32,
              "overflow");
  }
}

TEST(BlockScanTest, AReducedPrecisionMaskKeepsTheRoundingError) {
  const std::vector<float> x = Normal(64 * 30 + 1, 5, 3.0f);
  for (SimdLevel level : Levels()) {
    for (ValuePrecision keep : {ValuePrecision::kFp16, ValuePrecision::kBf16}) {
      CheckScan(level, x, 0, x.size(), KeyOf(2.0f), x.size(), true, true, keep, "keep");
    }
  }
}

}  // namespace
}  // namespace sieve::backend_internal
