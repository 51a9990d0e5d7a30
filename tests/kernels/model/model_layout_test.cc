#include "kernels/model/model_layout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kernels/model/param_init.h"

namespace sieve {
namespace {

ModelLayout Layout(std::string_view name, uint64_t d = 0) {
  StatusOr<ModelLayout> l = MakeModelLayout(name, d);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return *l;
}

TEST(WorkerModelLayout, ParameterCounts) {
  EXPECT_EQ(Layout("softmax").num_params, 7850u);
  EXPECT_EQ(Layout("fnn3").num_params, 199210u);
  EXPECT_EQ(Layout("cnn").num_params, 20522u);
  EXPECT_EQ(Layout("synthetic", 123456789).num_params, 123456789u);
}

TEST(WorkerModelLayout, SegmentsAreContiguousAndNamedUniquely) {
  for (const char* name : {"softmax", "fnn3", "cnn"}) {
    const ModelLayout l = Layout(name);
    uint64_t next = 0;
    std::set<std::string> names;
    for (const Segment& s : l.segments) {
      EXPECT_EQ(s.offset, next) << name << " " << s.name;
      uint64_t product = 1;
      for (int64_t d : s.shape) product *= static_cast<uint64_t>(d);
      EXPECT_EQ(product, s.length) << s.name;
      EXPECT_TRUE(names.insert(s.name).second) << s.name;
      EXPECT_EQ(l.Find(s.name), &s);
      next += s.length;
    }
    EXPECT_EQ(next, l.num_params) << name;
  }
  EXPECT_EQ(Layout("fnn3").Find("nope"), nullptr);
}

TEST(WorkerModelLayout, RejectsUnknownNameAndBadSyntheticSize) {
  EXPECT_EQ(MakeModelLayout("resnet").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(MakeModelLayout("synthetic", 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeModelLayout("synthetic", kMaxSyntheticParams + 1).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(WorkerModelLayout, SliceInitEqualsFullInitBitwise) {
  std::mt19937_64 rng(7);
  for (const ModelLayout& l :
       {Layout("fnn3"), Layout("cnn"), Layout("softmax"), Layout("synthetic", 1000003)}) {
    const uint64_t d = l.num_params;
    const std::vector<float> full = InitParams(l, 42);
    // Random slices, including empty ones and ones straddling segment boundaries.
    for (int t = 0; t < 50; ++t) {
      uint64_t lo = rng() % (d + 1);
      uint64_t hi = rng() % (d + 1);
      if (lo > hi) std::swap(lo, hi);
      std::vector<float> part(hi - lo + 1, -1.0f);
      ASSERT_TRUE(InitSlice(l, 42, lo, hi, part.data()).ok());
      EXPECT_EQ(std::memcmp(part.data(), full.data() + lo, sizeof(float) * (hi - lo)), 0)
          << l.name << " [" << lo << ", " << hi << ")";
      EXPECT_EQ(part[hi - lo], -1.0f) << "wrote past the slice";
    }
    // A balanced shard split, as the servers do.
    for (uint64_t shards : {1u, 2u, 3u, 7u}) {
      std::vector<float> joined(d);
      for (uint64_t s = 0; s < shards; ++s) {
        const uint64_t lo = d * s / shards, hi = d * (s + 1) / shards;
        ASSERT_TRUE(InitSlice(l, 42, lo, hi, joined.data() + lo).ok());
      }
      EXPECT_EQ(std::memcmp(joined.data(), full.data(), sizeof(float) * d), 0) << shards;
    }
  }
}

TEST(WorkerModelLayout, InitSliceRefusesARangeOutsideTheModel) {
  const ModelLayout l = Layout("fnn3");
  const uint64_t d = l.num_params;
  std::vector<float> out(8, -1.0f);
  for (auto [lo, hi] : {std::pair<uint64_t, uint64_t>{d - 2, d + 1}, {5, 3}, {d + 1, d + 1}}) {
    Status s = InitSlice(l, 42, lo, hi, out.data());
    EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << lo << " " << hi;
    EXPECT_NE(s.message().find(std::to_string(d)), std::string::npos) << s.message();
  }
  for (float v : out) EXPECT_EQ(v, -1.0f) << "wrote on a refused range";
}

TEST(WorkerModelLayout, InitDependsOnSeed) {
  const ModelLayout l = Layout("fnn3");
  EXPECT_EQ(InitParams(l, 1), InitParams(l, 1));
  EXPECT_NE(InitParams(l, 1), InitParams(l, 2));
}

TEST(WorkerModelLayout, InitFollowsTheRules) {
  const ModelLayout l = Layout("fnn3");
  const std::vector<float> p = InitParams(l, 3);
  for (const Segment& s : l.segments) {
    double sum = 0, sq = 0;
    float lo = 1e9f, hi = -1e9f;
    for (uint64_t i = s.offset; i < s.offset + s.length; ++i) {
      sum += p[i];
      sq += double{p[i]} * p[i];
      lo = std::min(lo, p[i]);
      hi = std::max(hi, p[i]);
    }
    const double n = static_cast<double>(s.length);
    if (s.init.kind == InitKind::kZeros) {
      EXPECT_EQ(lo, 0.0f) << s.name;
      EXPECT_EQ(hi, 0.0f) << s.name;
      continue;
    }
    ASSERT_EQ(s.init.kind, InitKind::kUniform) << s.name;
    const double bound = s.init.scale;
    EXPECT_NEAR(bound * bound, (s.name == "fc3.weight" ? 3.0 : 6.0) / s.fan_in, 1e-6);
    EXPECT_GE(lo, -bound);
    EXPECT_LT(hi, bound);
    EXPECT_NEAR(sum / n, 0.0, 0.05 * bound) << s.name;
    EXPECT_NEAR(sq / n, bound * bound / 3.0, 0.05 * bound * bound) << s.name;
  }
  for (float v : InitParams(Layout("softmax"), 3)) ASSERT_EQ(v, 0.0f);
}

TEST(WorkerModelLayout, SyntheticInitIsNormal) {
  const ModelLayout l = Layout("synthetic", 200000);
  const std::vector<float> p = InitParams(l, 9);
  double sum = 0, sq = 0, beyond_2sd = 0;
  for (float v : p) {
    sum += v;
    sq += double{v} * v;
    beyond_2sd += std::fabs(v) > 0.02f;
  }
  const double n = static_cast<double>(p.size());
  EXPECT_NEAR(sum / n, 0.0, 1e-4);
  EXPECT_NEAR(std::sqrt(sq / n), 0.01, 2e-4);
  EXPECT_NEAR(beyond_2sd / n, 0.0455, 0.003);  // two-sided Gaussian tail beyond 2 sigma
}

TEST(WorkerModelLayout, CounterHashIsDeterministicAndSpreads) {
  EXPECT_EQ(CounterHash(1, 2), CounterHash(1, 2));
  EXPECT_NE(CounterHash(1, 2), CounterHash(2, 1));
  std::set<uint64_t> seen;
  for (uint64_t i = 0; i < 10000; ++i) seen.insert(CounterHash(5, i));
  EXPECT_EQ(seen.size(), 10000u);
}

// fnn3 as an MLP: three layers chaining 784 -> 200 -> 200 -> 10, each weight then its bias,
// back to back from index 0 (offsets from the shapes by hand).
TEST(WorkerModelLayout, MlpLayersOfFnn3ChainAtTheirOffsets) {
  auto layers = MlpLayersOf(Layout("fnn3"), 784, 10);
  ASSERT_TRUE(layers.ok()) << layers.status().ToString();
  ASSERT_EQ(layers->size(), 3u);
  const int dims[] = {784, 200, 200, 10};
  uint64_t offset = 0;
  for (int l = 0; l < 3; ++l) {
    const DenseLayerSpec& d = (*layers)[static_cast<size_t>(l)];
    EXPECT_EQ(d.in, dims[l]);
    EXPECT_EQ(d.out, dims[l + 1]);
    EXPECT_EQ(d.weight_offset, offset);
    offset += static_cast<uint64_t>(dims[l]) * dims[l + 1];
    EXPECT_EQ(d.bias_offset, offset);
    offset += static_cast<uint64_t>(dims[l + 1]);
  }
  EXPECT_EQ(offset, 199210u);
}

TEST(WorkerModelLayout, MlpLayersOfRefusesWhatIsNotAChain) {
  // Conv weights are 4-D: not an MLP.
  EXPECT_EQ(MlpLayersOf(Layout("cnn"), 784, 10).status().code(), StatusCode::kInvalidArgument);
  // The chain must start at the input and end at the classes.
  EXPECT_FALSE(MlpLayersOf(Layout("fnn3"), 783, 10).ok());
  EXPECT_FALSE(MlpLayersOf(Layout("fnn3"), 784, 9).ok());
  ModelLayout odd = Layout("softmax");
  odd.segments.pop_back();  // a weight without its bias
  EXPECT_FALSE(MlpLayersOf(odd, 784, 10).ok());
}

}  // namespace
}  // namespace sieve
