// HugePageAllocator: a std::allocator replacement for large, long-lived arrays that are touched
// sparsely (a server's shard weights). Allocations of at least kHugePageBytes are aligned to
// 2 MiB, rounded up to whole 2 MiB pages and advised MADV_HUGEPAGE before the first touch, so the
// kernel can back them with transparent huge pages: 512x fewer page-table entries, which cuts
// the TLB misses of scattered accesses and, on virtual machines that shadow the guest's page
// tables, the cost of every context switch into a process with a large resident set
// (docs/results.md, "Server CPU"). Smaller allocations use operator new. The advice is a hint:
// where transparent huge pages are off or unsupported, memory is ordinary 4 KiB pages and
// nothing fails. Allocation failure throws std::bad_alloc like std::allocator. Stateless:
// every instance compares equal; thread-safe as malloc is.
#ifndef SIEVE_BASE_HUGE_PAGE_ALLOCATOR_H_
#define SIEVE_BASE_HUGE_PAGE_ALLOCATOR_H_

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

namespace sieve {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

template <typename T>
class HugePageAllocator {
 public:
  using value_type = T;

  HugePageAllocator() noexcept = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}  // NOLINT: rebinding is implicit

  T* allocate(size_t n) {
    if (n > (static_cast<size_t>(PTRDIFF_MAX) - kHugePageBytes) / sizeof(T)) throw std::bad_alloc();
    const size_t bytes = n * sizeof(T);
    if (bytes < kHugePageBytes) return static_cast<T*>(::operator new(bytes));
    const size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
    void* p = std::aligned_alloc(kHugePageBytes, rounded);
    if (p == nullptr) throw std::bad_alloc();
    (void)madvise(p, rounded, MADV_HUGEPAGE);  // a hint; EINVAL without THP support
    return static_cast<T*>(p);
  }

  void deallocate(T* p, size_t n) noexcept {
    if (n * sizeof(T) < kHugePageBytes) {
      ::operator delete(p);
    } else {
      std::free(p);
    }
  }

  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const noexcept {
    return true;
  }
};

// A vector whose buffer, once large, lies on (advised) huge pages.
template <typename T>
using HugePageVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace sieve

#endif  // SIEVE_BASE_HUGE_PAGE_ALLOCATOR_H_
