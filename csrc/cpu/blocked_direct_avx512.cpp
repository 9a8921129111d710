// cpu/blocked_direct.h's micro-kernels for AVX-512F (16 floats per vector, 32 registers): blocks of 4 vectors (64
// channels), tiles of 6 positions x 4 vectors (24 accumulators, 4 weight vectors, 1 broadcast), and
// cpu/reduction_tiles.h's weight-gradient GEMM on the same vectors (tiles of 6 rows x 4 vectors); and, below, the
// blocked tiles for bfloat16 on AVX512_BF16. Compiled for AVX-512 whatever the build's flags; called only where the CPU
// and the OS support AVX-512F (kernel_paths.h).
#include "cpu/blocked_direct.h"
#include "cpu/channel_dots.h"
#include "cpu/reduction_tiles.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#pragma GCC push_options
#pragma GCC target("avx512f,fma")

namespace fastpad::cpu {
namespace blocked_avx512 {

struct Isa {
  using V = __m512;
  static constexpr int kLanes = kBlockedDirectVectorAvx512, kRegisters = 32,
                       kVectors = kBlockedDirectMaxVectorsAvx512;
  // Tiles of up to 9 positions (3 and 4 vectors of channels) take a band's rows as one run of positions
  // (blocked_direct_kernel.h's all_positions): their input offsets stay in general registers. Tiles of 14 and 16
  // positions (1 and 2 vectors), whose offsets would spill, keep to rows.
  static constexpr int kMaxListedPositions = 9;
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V zero() { return _mm512_setzero_ps(); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static float sum(V v) { return _mm512_reduce_add_ps(v); }  // the sum of the lanes
  // The first n (<= kLanes) floats; the other lanes load as zero and are not stored.
  static V load_first(const float* p, int n) { return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), p); }
  static void store_first(float* p, V v, int n) { _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1), v); }
  // The first n lanes of v to p[0], p[2], ..., p[2 (n - 1)]; the values between are left as they are.
  static void store_first_even(float* p, V v, int n) {
    const int last = 2 * n - 1;
    const auto even_first = [](int count) {  // the even lanes of the first count
      return static_cast<__mmask16>(0x5555u & ((1u << count) - 1));
    };
    _mm512_mask_storeu_ps(p, even_first(std::min(last, kLanes)),
                          _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7), v));
    if (last > kLanes) {
      _mm512_mask_storeu_ps(p + kLanes, even_first(last - kLanes),
                            _mm512_permutexvar_ps(_mm512_setr_epi32(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14,
                                                                    14, 15, 15), v));
    }
  }
  using Element = float;
  using W = V;
  static constexpr int kDepth = 1;
  static W broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static W load_weights(const float* p) { return load(p); }
  static V multiply_add(W x, W w, V acc) { return fmadd(x, w, acc); }
  // r[i] (row i, 16 floats) becomes column i: r[i][j] = old r[j][i]. Pairs of rows interleaved by 1, then 2 floats
  // (within 128-bit lanes), then by 128-bit lanes twice.
  static void transpose(V r[kLanes]) {
    V t[kLanes];
    for (int i = 0; i < 8; ++i) {
      t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; ++i) {
      r[4 * i + 0] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
      r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
      r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
      r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int h = 0; h < 2; ++h) {
      for (int i = 0; i < 4; ++i) {
        t[8 * h + i] = _mm512_shuffle_f32x4(r[8 * h + i], r[8 * h + 4 + i], 0x88);
        t[8 * h + 4 + i] = _mm512_shuffle_f32x4(r[8 * h + i], r[8 * h + 4 + i], 0xDD);
      }
    }
    for (int i = 0; i < 8; ++i) {
      r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
      r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xDD);
    }
  }
};

#include "cpu/blocked_direct_kernel.h"
#include "cpu/reduction_tiles_kernel.h"
#include "cpu/channel_dots_kernel.h"

}  // namespace blocked_avx512

void pack_weight_lanes_avx512(const WeightLanes& w) { blocked_avx512::pack_weight_lanes(w); }
void blocked_direct_avx512(const BlockedDirectArgs<float>& args, int64_t channels) {
  blocked_avx512::blocked_direct(args, channels);
}
void reduction_tiles_avx512(const ReductionTiles& t) { blocked_avx512::reduction_tiles(t); }
void transpose_floats_avx512(const FloatTranspose& t) { blocked_avx512::transpose_floats(t); }
void channel_dots_avx512(const ChannelDots& p, const float* const* rows, int64_t pixels, float* y) {
  blocked_avx512::channel_dots(p, rows, pixels, y);
}
int64_t fma_peak_loop_avx512(int64_t iterations, float* sink) {
  return blocked_avx512::fma_peak_loop(iterations, sink);
}

}  // namespace fastpad::cpu

#pragma GCC pop_options

// The bfloat16 micro-kernel on AVX512_BF16: AVX-512's tiles and float32 accumulators, each step a dot product over a
// pair of input channels (vdpbf16ps: acc += x[ci] * w[ci] + x[ci + 1] * w[ci + 1], the products exact in float32), so
// twice the multiply-adds of an FMA per instruction, from planes and weights half the size of float32 ones. Called
// only where the CPU and the OS support AVX512_BF16 (kernel_paths.h).
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bf16,fma")

namespace fastpad::cpu {
namespace blocked_avx512_bf16 {

struct Isa : blocked_avx512::Isa {
  using Element = uint16_t;  // bfloat16's bits
  using W = __m512bh;
  static constexpr int kDepth = 2;
  static W broadcast(const uint16_t* p) {  // one position's pair of channels, in every 32-bit lane
    int32_t pair;
    std::memcpy(&pair, p, sizeof(pair));
    return reinterpret_cast<W>(_mm512_set1_epi32(pair));
  }
  static W load_weights(const uint16_t* p) { return reinterpret_cast<W>(_mm512_loadu_si512(p)); }
  static V multiply_add(W x, W w, V acc) { return _mm512_dpbf16_ps(acc, x, w); }
};

#include "cpu/blocked_direct_kernel.h"

}  // namespace blocked_avx512_bf16

void blocked_direct_avx512_bf16(const BlockedDirectArgs<uint16_t>& args, int64_t channels) {
  blocked_avx512_bf16::blocked_direct(args, channels);
}

}  // namespace fastpad::cpu

#pragma GCC pop_options
#endif  // __x86_64__
