// The NCHW col2im of conv_transpose.cpp's GEMM + col2im on AVX-512 (cpu_gemm_col2im_avx512): a kernel row (kd, kh)
// of cols added onto y a whole x row at a time, every kernel column at once, by vectors of y positions. The scatter
// of one kernel column at a time (RowScatter, the AVX2 path's) costs a call per (channel, tap, x row) and a scalar
// loop per strided or short row, which was most of the col2im's time on short rows (5-20 positions).
// Along W, x position ow of kernel column kw lands on y position p = start + ow * stride + kw * dilation. The
// positions in [0, size) of each vector of 16 y positions that one kernel column reaches are every stride-th lane, and
// they take consecutive x positions: one masked load of those values and an expand into their lanes (at stride 1,
// the load alone). The positions outside the row, which the padding mode drops or folds, are listed by the caller
// (Col2imFold, from RowScatter) and added after. Free of torch.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace fastpad::cpu {

constexpr int64_t kCol2imVectorLanes = 16;

// The kernel takes x rows of at most kCol2imVectorsMaxRow positions, and stride-2 rows of any length; the others
// keep RowScatter, whose plan costs nothing and whose adds of one kernel column at a time run whole vectors at
// stride 1 and a tight scalar loop at stride 3 or more. The kernel against RowScatter on random layers' NCHW input
// gradients (seeds 1-8 and the suite, float32, 2 cores of a Zen 4, the op alone, interleaved): stride 1, x rows of
// 7-33 positions 0.69-1.0x the time (one 1.35x, 0.91x re-timed), 54-157 0.99-1.05x, 271-1923 1.03-1.68x; stride 2,
// 45-1646 positions 0.56-1.10x (geomean about 0.87); stride 3, 41-127 0.84-1.07x, 141-2594 0.86-1.30x.
constexpr int64_t kCol2imVectorsMaxRow = 64;
inline bool col2im_vectors_take(int64_t x_row, int64_t stride) {
  return x_row <= kCol2imVectorsMaxRow || stride == 2;
}

// The lanes of one vector of y positions that one kernel column reaches.
struct Col2imVectorPart {
  int32_t column;  // kw
  // The x position of the first lane it reaches, or at stride 1 (Col2imVectorPlan::consecutive) that of lane 0, which
  // may lie before the row: one load through the lanes' mask reads them all.
  int32_t first;
  uint16_t lanes;   // the lanes it reaches, each the next x position
  uint16_t values;  // as many low lanes as it reaches: its values loaded together before an expand spreads them
};

// A term of a whole x row outside the y row that the padding mode folds back in: y_row[y] += x row of kernel column
// `column` at x.
struct Col2imFold {
  int64_t column, x, y;
};

// How the whole x rows add onto a y row: vector v's parts are parts[vector_starts[v], vector_starts[v + 1]), in
// order of kernel column.
struct Col2imVectorPlan {
  int64_t size = 0;
  bool consecutive = false;  // stride 1: every part's lanes consecutive
  std::vector<Col2imVectorPart> parts;
  std::vector<int64_t> vector_starts;
  std::vector<Col2imFold> folds;  // the caller's, which depend on the padding mode
};

// The plan for y rows of `size` positions and x rows of `count` (no folds).
inline Col2imVectorPlan col2im_vector_plan(int64_t size, int64_t count, int64_t start, int64_t stride,
                                           int64_t dilation, int64_t columns) {
  Col2imVectorPlan plan;
  plan.size = size;
  plan.consecutive = stride == 1;
  const int64_t vectors = (size + kCol2imVectorLanes - 1) / kCol2imVectorLanes;
  plan.parts.reserve(vectors * columns);
  plan.vector_starts.reserve(vectors + 1);
  for (int64_t vector = 0; vector * kCol2imVectorLanes < size; ++vector) {
    plan.vector_starts.push_back(static_cast<int64_t>(plan.parts.size()));
    for (int64_t kw = 0; kw < columns; ++kw) {
      // The x positions ow whose p = first_p + ow * stride falls in [lo, hi): ceil((lo - first_p) / stride) on.
      const int64_t first_p = start + kw * dilation, lo = vector * kCol2imVectorLanes;
      const int64_t hi = std::min(lo + kCol2imVectorLanes, size);
      const auto first_at_or_after = [&](int64_t p) {
        return std::clamp<int64_t>(p <= first_p ? 0 : (p - first_p + stride - 1) / stride, 0, count);
      };
      const int64_t ow_begin = first_at_or_after(lo), ow_end = first_at_or_after(hi);
      if (ow_begin >= ow_end) continue;
      uint32_t lanes = 0;
      for (int64_t ow = ow_begin; ow < ow_end; ++ow) lanes |= uint32_t(1) << (first_p + ow * stride - lo);
      const int64_t first = plan.consecutive ? ow_begin - (first_p + ow_begin - lo) : ow_begin;
      plan.parts.push_back({static_cast<int32_t>(kw), static_cast<int32_t>(first), static_cast<uint16_t>(lanes),
                            static_cast<uint16_t>((uint32_t(1) << (ow_end - ow_begin)) - 1)});
    }
  }
  plan.vector_starts.push_back(static_cast<int64_t>(plan.parts.size()));
  return plan;
}

// For each of `rows` rows i: y + y_offsets[i] is a y row, src + src_offsets[i] the x row of kernel column 0 in cols
// (column kw's at + kw * column_stride); y_row[p] += src_row[kw][ow] over the plan's parts, then its folds.
struct Col2imVectors {
  const Col2imVectorPlan* plan;
  const float* src;
  int64_t column_stride;
  float* y;
  const int64_t* y_offsets;
  const int64_t* src_offsets;
  int64_t rows;
};

void col2im_vectors_avx512(const Col2imVectors& rows);

// The kernel of one ISA, or null where RowScatter adds each kernel column in turn.
using Col2imVectorsKernel = void (*)(const Col2imVectors&);

}  // namespace fastpad::cpu
