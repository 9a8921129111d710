// cpu/blocked_direct.h's micro-kernels for AVX2 + FMA (8 floats per vector, 16 registers): blocks of 3 vectors (24
// channels), tiles of 4 positions x 3 vectors (12 accumulators, 3 weight vectors, 1 broadcast); and
// cpu/reduction_tiles.h's weight-gradient GEMM on the same vectors (tiles of 4 rows x 3 vectors). Compiled for AVX2
// whatever the build's flags; called only where the CPU has AVX2 and FMA (kernel_paths.h).
#include "cpu/blocked_direct.h"
#include "cpu/channel_dots.h"
#include "cpu/reduction_tiles.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <type_traits>

#pragma GCC push_options
#pragma GCC target("avx2,fma")

namespace fastpad::cpu {
namespace blocked_avx2 {

struct Isa {
  using V = __m256;
  static constexpr int kLanes = kBlockedDirectVectorAvx2, kRegisters = 16,
                       kVectors = kBlockedDirectMaxVectorsAvx2;
  // Tiles never run on into the next row here (blocked_direct_kernel.h's all_positions): on AVX2 that took 0.81-1.08x
  // the time of tiles within rows (151 calls of random layers and the suite, geomean 0.94; 2 cores, Sapphire Rapids).
  static constexpr int kMaxListedPositions = 0;
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V zero() { return _mm256_setzero_ps(); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  // The sum of the lanes.
  static float sum(V v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
  }
  // The first n (<= kLanes) floats; the other lanes load as zero and are not stored.
  static __m256i first_lanes(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static V load_first(const float* p, int n) { return _mm256_maskload_ps(p, first_lanes(n)); }
  static void store_first(float* p, V v, int n) { _mm256_maskstore_ps(p, first_lanes(n), v); }
  // The first n lanes of v to p[0], p[2], ..., p[2 (n - 1)]; the values between are left as they are.
  static void store_first_even(float* p, V v, int n) {
    const int last = 2 * n - 1;
    const __m256i even = _mm256_setr_epi32(-1, 0, -1, 0, -1, 0, -1, 0);
    _mm256_maskstore_ps(p, _mm256_and_si256(even, first_lanes(std::min(last, kLanes))),
                        _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3)));
    if (last > kLanes) {
      _mm256_maskstore_ps(p + kLanes, _mm256_and_si256(even, first_lanes(last - kLanes)),
                          _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7)));
    }
  }
  using Element = float;
  using W = V;
  static constexpr int kDepth = 1;
  static W broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static W load_weights(const float* p) { return load(p); }
  static V multiply_add(W x, W w, V acc) { return fmadd(x, w, acc); }
  // r[i] (row i, 8 floats) becomes column i: r[i][j] = old r[j][i]. Pairs of rows interleaved by 1, then 2 floats
  // (within 128-bit lanes), then the 128-bit lanes of rows 4 apart exchanged.
  static void transpose(V r[kLanes]) {
    V t[kLanes], s[kLanes];
    for (int i = 0; i < 4; ++i) {
      t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; ++i) {
      s[4 * i + 0] = _mm256_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
      s[4 * i + 1] = _mm256_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
      s[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
      s[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int i = 0; i < 4; ++i) {
      r[i] = _mm256_permute2f128_ps(s[i], s[4 + i], 0x20);
      r[4 + i] = _mm256_permute2f128_ps(s[i], s[4 + i], 0x31);
    }
  }
};

#include "cpu/blocked_direct_kernel.h"
#include "cpu/reduction_tiles_kernel.h"
#include "cpu/channel_dots_kernel.h"

}  // namespace blocked_avx2

void pack_weight_lanes_avx2(const WeightLanes& w) { blocked_avx2::pack_weight_lanes(w); }
void blocked_direct_avx2(const BlockedDirectArgs<float>& args, int64_t channels) {
  blocked_avx2::blocked_direct(args, channels);
}
void reduction_tiles_avx2(const ReductionTiles& t) { blocked_avx2::reduction_tiles(t); }
void transpose_floats_avx2(const FloatTranspose& t) { blocked_avx2::transpose_floats(t); }
void channel_dots_avx2(const ChannelDots& p, const float* const* rows, int64_t pixels, float* y) {
  blocked_avx2::channel_dots(p, rows, pixels, y);
}
int64_t fma_peak_loop_avx2(int64_t iterations, float* sink) { return blocked_avx2::fma_peak_loop(iterations, sink); }

}  // namespace fastpad::cpu

#pragma GCC pop_options
#endif  // __x86_64__
