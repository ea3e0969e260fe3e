// Where values live: the worker's pushed and pulled values and the server's stored ones. A value of 2 MiB or more
// is placed on transparent huge pages (2 MiB aligned, MADV_HUGEPAGE, which the kernel honours in its default
// "madvise" mode). Why: a sweep's values together are far larger than the TLB covers (40 keys of 4 MiB are 160 MiB
// on each side), and every byte sent or received is copied by the kernel between them and its socket buffers; on
// 4 KiB pages those copies miss the TLB every page. Measured on loopback, 4 MiB writes cycling through 40 buffers:
// 23.3 Gbit/s on 4 KiB pages, 32.7 on huge pages, 33.2 from one buffer (bench/why.txt, 2026-12-02).
#pragma once
#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

namespace pslite {

template <class T>
struct HugePageAllocator {
  using value_type = T;
  static constexpr size_t kHugePage = size_t(2) << 20;

  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) {}

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < kHugePage) return std::allocator<T>().allocate(n);
    const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* p = std::aligned_alloc(kHugePage, rounded);
    if (!p) throw std::bad_alloc();
    madvise(p, rounded, MADV_HUGEPAGE);  // advice only: where the kernel has none to give, 4 KiB pages serve
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) {
    if (n * sizeof(T) < kHugePage) return std::allocator<T>().deallocate(p, n);
    std::free(p);
  }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const { return true; }
  template <class U>
  bool operator!=(const HugePageAllocator<U>&) const { return false; }
};

using ValueBuffer = std::vector<char, HugePageAllocator<char>>;

}  // namespace pslite
