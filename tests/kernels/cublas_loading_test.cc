// cuBLAS is loaded only when a CUDA NnOps is made (kernels/nn/cublas_library.h): a process that
// does its model math on the CPU maps no cuBLAS, also in a build with the CUDA backend (which is
// what this test guards: linked, cuBLAS and cuBLASLt were mapped and ~84 MB of their data touched
// at every start, --device=cpu or not). The reference is the process's own /proc/self/maps.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "kernels/nn/nn_ops.h"
#if SIEVE_TEST_WITH_CUDA
#include "kernels/nn/cublas_library.h"
#endif

namespace sieve {
namespace {

bool MapsCublas() {
  std::ifstream maps("/proc/self/maps");
  EXPECT_TRUE(maps.good());
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("libcublas") != std::string::npos) return true;
  }
  return false;
}

TEST(CublasLoadingTest, CpuModelMathMapsNoCublas) {
  auto ops = NnOps::Create(Device::kCpu);
  ASSERT_TRUE(ops.ok()) << ops.status().ToString();
  BackendContext* ctx = (*ops)->context();
  // c = a · b for 2x2 matrices, through the CPU GEMM (OpenBLAS), checked by hand.
  const std::vector<float> a = {1, 2, 3, 4}, b = {5, 6, 7, 8};
  auto a_dev = ctx->Alloc(4), b_dev = ctx->Alloc(4), c_dev = ctx->Alloc(4);
  ASSERT_TRUE(a_dev.ok() && b_dev.ok() && c_dev.ok());
  ASSERT_TRUE(ctx->FromHost(a.data(), 4, *a_dev).ok());
  ASSERT_TRUE(ctx->FromHost(b.data(), 4, *b_dev).ok());
  ASSERT_TRUE((*ops)->Gemm(false, false, 2, 2, 2, 1.0f, *a_dev, *b_dev, 0.0f, *c_dev).ok());
  std::vector<float> c(4);
  ASSERT_TRUE(ctx->ToHost(*c_dev, 4, c.data()).ok());
  EXPECT_EQ(c, (std::vector<float>{19, 22, 43, 50}));
  for (float* p : {*a_dev, *b_dev, *c_dev}) ctx->Free(p);
  EXPECT_FALSE(MapsCublas()) << "cuBLAS was loaded without a CUDA NnOps";
}

#if SIEVE_TEST_WITH_CUDA
// Loading needs no GPU: the library and every function the CUDA NnOps calls are found.
TEST(CublasLoadingTest, TheLibraryOpensWithEveryFunction) {
  auto lib = CublasLibrary::Open();
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  EXPECT_NE((*lib)->create, nullptr);
  EXPECT_NE((*lib)->destroy, nullptr);
  EXPECT_NE((*lib)->set_stream, nullptr);
  EXPECT_NE((*lib)->set_math_mode, nullptr);
  EXPECT_NE((*lib)->set_atomics_mode, nullptr);
  EXPECT_NE((*lib)->sgemm, nullptr);
  ASSERT_NE((*lib)->status_string, nullptr);
  // A call through the table: cuBLAS's own messages, one per status.
  EXPECT_STRNE((*lib)->status_string(CUBLAS_STATUS_SUCCESS),
               (*lib)->status_string(CUBLAS_STATUS_NOT_INITIALIZED));
  EXPECT_TRUE(MapsCublas());
}
#endif

}  // namespace
}  // namespace sieve
