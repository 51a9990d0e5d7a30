// HugePageAllocator: large buffers are 2 MiB aligned and their mapping carries the kernel's
// huge-page advice (VmFlags "hg" in /proc/self/smaps, read independently of the allocator); small
// ones are ordinary; contents behave as in a std::vector.
#include "base/huge_page_allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>

namespace sieve {
namespace {

// The VmFlags of the mapping that contains `p`, from /proc/self/smaps; empty if not found.
std::string VmFlagsOf(const void* p) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(':') > line.find(' ')) {
      inside = lo <= addr && addr < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line.substr(8);
  }
  return "";
}

bool KernelHasThp() { return std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled").good(); }

TEST(HugePageAllocator, LargeVectorIsAlignedAdvisedAndHoldsItsValues) {
  const size_t n = 3 * kHugePageBytes / sizeof(float) + 123;  // not a whole number of pages
  HugePageVector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % kHugePageBytes, 0u);
  EXPECT_EQ(v[n - 1], static_cast<float>(n - 1));
  EXPECT_EQ(v[12345], 12345.0f);
  if (!KernelHasThp()) GTEST_SKIP() << "kernel without transparent huge pages";
  const std::string flags = VmFlagsOf(v.data() + n / 2);
  ASSERT_FALSE(flags.empty()) << "mapping not found in /proc/self/smaps";
  EXPECT_NE(flags.find(" hg"), std::string::npos) << "VmFlags:" << flags;
}

TEST(HugePageAllocator, SmallVectorIsOrdinaryAndGrowsAcrossTheThreshold) {
  HugePageVector<double> v;
  for (int i = 0; i < 10; ++i) v.push_back(i);
  EXPECT_EQ(v[9], 9.0);
  // Growing from small to large and back (shrink_to_fit) moves the contents intact.
  v.resize(kHugePageBytes / sizeof(double) + 1, 7.0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % kHugePageBytes, 0u);
  EXPECT_EQ(v[3], 3.0);
  EXPECT_EQ(v.back(), 7.0);
  v.resize(5);
  v.shrink_to_fit();
  EXPECT_EQ(v[4], 4.0);
}

TEST(HugePageAllocator, ImpossibleSizeThrowsBadAlloc) {
  HugePageAllocator<float> a;
  EXPECT_THROW((void)a.allocate(static_cast<size_t>(-1) / 2), std::bad_alloc);
}

}  // namespace
}  // namespace sieve
