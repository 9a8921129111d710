// Large CPU outputs are faulted in 2 MiB pages where the OS allows it. A freshly allocated output is untouched
// memory (torch's CPU allocator maps large blocks anew for each call), and faulting it in 4 KiB pages cost more than
// the kernel itself on memory-bound layers: a 2x1536x4096 causal depthwise conv1d took 31.5 ms with 4 KiB pages,
// 10.6 ms with torch's own opt-in THP_MEM_ALLOC_ENABLE=1 (2 cores, Linux transparent huge pages in "madvise" mode).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace fastpad::cpu {

// Advises the kernel to back the whole 2 MiB pages of t's untouched storage with huge pages (MADV_HUGEPAGE). Advice
// only: where transparent huge pages are off, or the call fails, nothing changes. Call it before the first write.
inline void advise_huge_pages(const at::Tensor& t) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHugePage = uintptr_t(2) << 20;
  const auto begin = reinterpret_cast<uintptr_t>(t.storage().data());
  const uintptr_t end = begin + t.storage().nbytes();
  const uintptr_t first = (begin + kHugePage - 1) & ~(kHugePage - 1), last = end & ~(kHugePage - 1);
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#else
  (void)t;
#endif
}

}  // namespace fastpad::cpu
