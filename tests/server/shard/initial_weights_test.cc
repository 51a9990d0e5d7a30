// server/shard/initial_weights.h against files written here: every slice of a good file comes back
// bit for bit; wrong sizes, a missing file and a non-finite value are clear errors.
#include "server/shard/initial_weights.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "tests/base/temp_dir.h"

namespace sieve {
namespace {

std::string Write(const std::filesystem::path& path, const std::vector<float>& v, size_t bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  EXPECT_EQ(std::fwrite(v.data(), 1, bytes, f), bytes);
  std::fclose(f);
  return path.string();
}

TEST(ServerInitialWeights, EverySliceComesBackBitForBit) {
  testing::TempDir dir("sieve-init-weights");
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::ldexp(static_cast<float>(i) - 500.5f, -7);
  const std::string path = Write(dir.path() / "w.bin", v, 4 * v.size());
  ASSERT_TRUE(CheckWeightsFile(path, 1000).ok());
  for (auto [lo, hi] : {std::pair<uint64_t, uint64_t>{0, 1000}, {0, 0}, {333, 667}, {999, 1000}}) {
    std::vector<float> out(hi - lo);
    ASSERT_TRUE(ReadWeightsSlice(path, 1000, lo, hi, out.data()).ok()) << lo << " " << hi;
    for (uint64_t i = lo; i < hi; ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(out[i - lo]), std::bit_cast<uint32_t>(v[i])) << i;
    }
  }
}

TEST(ServerInitialWeights, BadFilesAreClearErrors) {
  testing::TempDir dir("sieve-init-weights");
  std::vector<float> v(100, 0.5f);
  const std::string truncated = Write(dir.path() / "short.bin", v, 4 * 100 - 3);
  Status s = CheckWeightsFile(truncated, 100);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("holds 397 bytes"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("need 400"), std::string::npos) << s.message();

  const std::string other_model = Write(dir.path() / "long.bin", v, 4 * 100);
  EXPECT_EQ(CheckWeightsFile(other_model, 99).code(), StatusCode::kInvalidArgument);

  EXPECT_EQ(CheckWeightsFile((dir.path() / "missing.bin").string(), 100).code(),
            StatusCode::kNotFound);

  v[42] = std::numeric_limits<float>::quiet_NaN();
  const std::string nan = Write(dir.path() / "nan.bin", v, 4 * 100);
  std::vector<float> out(100);
  s = ReadWeightsSlice(nan, 100, 0, 100, out.data());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("index 42"), std::string::npos) << s.message();
  EXPECT_TRUE(ReadWeightsSlice(nan, 100, 43, 100, out.data()).ok()) << "the slice avoids it";
  EXPECT_EQ(ReadWeightsSlice(nan, 100, 50, 101, out.data()).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sieve
