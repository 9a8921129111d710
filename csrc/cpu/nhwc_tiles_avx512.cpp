// cpu/nhwc_tiles.h's tiles on AVX-512F: 16 float accumulators per vector, from float32, bfloat16 or float16 tensors.
// Compiled for AVX-512 whatever the build's flags; called only where the CPU and the OS support AVX-512F
// (kernel_paths.h).
#include "cpu/nhwc_tiles.h"
#include "kernel_paths.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#pragma GCC push_options
#pragma GCC target("avx512f,fma,f16c")

namespace fastpad::cpu {
namespace nhwc_avx512 {

struct Isa {
  using V = __m512;
  static constexpr int64_t kLanes = kNhwcTilesAvx512Lanes;
  static_assert(kLanes * sizeof(float) == sizeof(V));
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V load(const BFloat16Bits* p) {  // a bfloat16's bits are a float's upper half
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
  }
  static V load(const Float16Bits* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static constexpr bool kMaskedLanes = true;
  static V load(const float* p, uint32_t lanes_mask) { return _mm512_maskz_loadu_ps(__mmask16(lanes_mask), p); }
  static void store(float* p, V v, uint32_t lanes_mask) { _mm512_mask_storeu_ps(p, __mmask16(lanes_mask), v); }
  static V zero() { return _mm512_setzero_ps(); }
  static float scalar(float v) { return v; }
  static float scalar(BFloat16Bits v) { return _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128(v.bits << 16))); }
  static float scalar(Float16Bits v) { return _cvtsh_ss(v.bits); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  // Rounded to nearest, ties to even, a NaN to the quiet NaN 0x7fc0: as c10::BFloat16 rounds.
  static void store(BFloat16Bits* p, V v) {
    const __m512i bits = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    rounded = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), rounded, _mm512_set1_epi32(0x7fc0));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(rounded));
  }
  static void store(Float16Bits* p, V v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
};

#include "cpu/nhwc_tiles_kernel.h"

template <typename scalar_t>
void row_tiles(const NhwcRowTiles<scalar_t, float>& row, bool groups) {
  if (groups) {
    nhwc_row_tiles<Isa, true>(row);
  } else {
    nhwc_row_tiles<Isa, false>(row);
  }
}

}  // namespace nhwc_avx512

void nhwc_row_tiles_avx512(const NhwcRowTiles<float, float>& row, bool groups) { nhwc_avx512::row_tiles(row, groups); }
void nhwc_weight_grad_row_avx512(const NhwcWeightGradRow<float, float>& row) {
  nhwc_avx512::nhwc_weight_grad_row<nhwc_avx512::Isa>(row);
}
void nhwc_weight_grad_row_avx512(const NhwcWeightGradRow<BFloat16Bits, float>& row) {
  nhwc_avx512::nhwc_weight_grad_row<nhwc_avx512::Isa>(row);
}
void nhwc_weight_grad_row_avx512(const NhwcWeightGradRow<Float16Bits, float>& row) {
  nhwc_avx512::nhwc_weight_grad_row<nhwc_avx512::Isa>(row);
}
void nhwc_row_tiles_avx512(const NhwcRowTiles<BFloat16Bits, float>& row, bool groups) {
  nhwc_avx512::row_tiles(row, groups);
}
void nhwc_row_tiles_avx512(const NhwcRowTiles<Float16Bits, float>& row, bool groups) {
  nhwc_avx512::row_tiles(row, groups);
}

}  // namespace fastpad::cpu

#pragma GCC pop_options
#endif  // __x86_64__
