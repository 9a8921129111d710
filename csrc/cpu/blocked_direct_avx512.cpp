// cpu/blocked_direct.h's micro-kernels for AVX-512F (16 floats per vector, 32 registers): blocks of 4 vectors (64
// channels), tiles of 6 positions x 4 vectors (24 accumulators, 4 weight vectors, 1 broadcast). Compiled for AVX-512
// whatever the build's flags; called only where the CPU and the OS support AVX-512F (kernel_paths.h).
#include "cpu/blocked_direct.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>

#pragma GCC push_options
#pragma GCC target("avx512f,fma")

namespace fastpad::cpu {
namespace blocked_avx512 {

struct Isa {
  using V = __m512;
  static constexpr int kLanes = kBlockedDirectVectorAvx512, kRegisters = 32,
                       kVectors = kBlockedDirectMaxVectorsAvx512;
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  using Element = float;
  using W = V;
  static constexpr int kDepth = 1;
  static W broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static W load_weights(const float* p) { return load(p); }
  static V multiply_add(W x, W w, V acc) { return fmadd(x, w, acc); }
};

#include "cpu/blocked_direct_kernel.h"

}  // namespace blocked_avx512

void blocked_direct_avx512(const BlockedDirectArgs<float>& args, int64_t channels) {
  blocked_avx512::blocked_direct(args, channels);
}
int64_t fma_peak_loop_avx512(int64_t iterations, float* sink) {
  return blocked_avx512::fma_peak_loop(iterations, sink);
}

}  // namespace fastpad::cpu

#pragma GCC pop_options
#endif  // __x86_64__
