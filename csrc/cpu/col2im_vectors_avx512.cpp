// cpu/col2im_vectors.h's kernel on AVX-512F. Compiled for AVX-512 whatever the build's flags; called only where the CPU
// and the OS support AVX-512F (kernel_paths.h).
#include "cpu/col2im_vectors.h"

#if defined(__x86_64__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx512f")

namespace fastpad::cpu {

namespace {

template <bool kConsecutive>
void add_rows(const Col2imVectors& rows) {
  const Col2imVectorPlan& plan = *rows.plan;
  const int64_t vectors = static_cast<int64_t>(plan.vector_starts.size()) - 1;
  const int64_t tail = plan.size - (vectors - 1) * kCol2imVectorLanes;
  const __mmask16 last_vector = static_cast<__mmask16>((uint32_t(1) << tail) - 1);
  const Col2imVectorPart* const parts = plan.parts.data();
  const int64_t* const vector_starts = plan.vector_starts.data();
  // A part's values: consecutive lanes by one masked load, others loaded together and spread onto their lanes.
  const auto part_values = [&](const Col2imVectorPart& part, const float* src) {
    const float* x = src + part.column * rows.column_stride + part.first;
    if constexpr (kConsecutive) {
      return _mm512_maskz_loadu_ps(part.lanes, x);
    } else {
      return _mm512_maskz_expand_ps(part.lanes, _mm512_maskz_loadu_ps(part.values, x));
    }
  };
  for (int64_t row = 0; row < rows.rows; ++row) {
    float* y = rows.y + rows.y_offsets[row];
    const float* src = rows.src + rows.src_offsets[row];
    for (int64_t vector = 0; vector < vectors; ++vector) {
      const __mmask16 positions = vector + 1 == vectors ? last_vector : static_cast<__mmask16>(0xffff);
      float* y_vector = y + vector * kCol2imVectorLanes;
      // Two sums, the parts alternating between them: one chain of dependent adds would wait on each.
      __m512 sum = _mm512_maskz_loadu_ps(positions, y_vector), other = _mm512_setzero_ps();
      int64_t part = vector_starts[vector];
      const int64_t end = vector_starts[vector + 1];
      for (; part + 1 < end; part += 2) {
        sum = _mm512_add_ps(sum, part_values(parts[part], src));
        other = _mm512_add_ps(other, part_values(parts[part + 1], src));
      }
      if (part < end) sum = _mm512_add_ps(sum, part_values(parts[part], src));
      _mm512_mask_storeu_ps(y_vector, positions, _mm512_add_ps(sum, other));
    }
    for (const Col2imFold& fold : plan.folds) y[fold.y] += src[fold.column * rows.column_stride + fold.x];
  }
}

}  // namespace

void col2im_vectors_avx512(const Col2imVectors& rows) {
  if (rows.plan->consecutive) {
    add_rows<true>(rows);
  } else {
    add_rows<false>(rows);
  }
}

}  // namespace fastpad::cpu

#pragma GCC pop_options
#endif  // __x86_64__
