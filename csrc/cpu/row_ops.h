// Small primitives of the CPU kernels: vectorised multiply-adds, the scatter-add of a strided run onto a row of the
// implicitly padded input (positions outside the row resolved by the padding mode, with a predicate on the borders
// only), and iteration over the taps of an output pixel.
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "geometry.h"

namespace fastpad::cpu {

template <typename scalar_t>
using acc_type = at::opmath_type<scalar_t>;

// A kernel's scratch buffer of n elements left uninitialized, for a buffer whose every element is written before it
// is read. std::vector<T>(n) zeroes its elements: a pass over the whole buffer per thread and call, which also evicts
// what the kernel has in L2 (the NCHW weight gradient's 4 MiB band of columns per thread: 19% of a 1-d 314 -> 50 k6
// s3 weight gradient's time, 2 cores, Zen 4).
template <typename T>
std::unique_ptr<T[]> uninitialized_buffer(int64_t n) {
  static_assert(std::is_trivially_default_constructible_v<T>, "new T[n] leaves only trivial types uninitialized");
  std::unique_ptr<T[]> buffer(new T[n]);
#if defined(__SANITIZE_ADDRESS__)
  // The sanitizer build fills it with NaN, so that an element read before it is written reaches the output.
  std::fill_n(buffer.get(), n, std::numeric_limits<T>::quiet_NaN());
#endif
  return buffer;
}

// Calls f(std::integral_constant<int64_t, n>()) for a run length n in [1, kFixedRunMax], so that a loop over n values
// has a length the compiler knows (unrolled, vectorised, no call), and returns whether it did; longer runs are the
// caller's. Channels-last copies of a few channels per pixel spend most of their time per call otherwise (a 3-d conv
// over 7 channels: its phase planes' gather 38% of the conv's time through at::vec::convert per pixel).
constexpr int64_t kFixedRunMax = 16;
template <int64_t kN = 1, typename F>
inline bool with_fixed_run(int64_t n, F&& f) {
  if constexpr (kN > kFixedRunMax) {
    return false;
  } else {
    if (n != kN) return with_fixed_run<kN + 1>(n, std::forward<F>(f));
    f(std::integral_constant<int64_t, kN>());
    return true;
  }
}

// y[i] += a * x[i] for i in [0, n).
template <typename acc_t>
inline void axpy(acc_t* y, acc_t a, const acc_t* x, int64_t n) {
  using Vec = at::vec::Vectorized<acc_t>;
  const Vec va(a);
  int64_t i = 0;
  for (; i + Vec::size() <= n; i += Vec::size()) {
    at::vec::fmadd(va, Vec::loadu(x + i), Vec::loadu(y + i)).store(y + i);
  }
  for (; i < n; ++i) y[i] += a * x[i];
}

// Scatter-add of a strided run: row[p] += src[t] where p = start + t*step resolved by the padding mode
// (dropped where the mode reads zero, folded onto the mirrored/clamped/wrapped position otherwise). The resolution
// depends only on the run's start, step, count and the row's size, so a run that repeats over many rows (a transposed
// conv's col2im: each tap's whole x rows) resolves it once.
class RowScatter {
 public:
  RowScatter(int64_t size, int64_t start, int64_t step, int64_t count, PaddingMode mode) : step_(step) {
    const InteriorRange interior = interior_range(start, step, count, size);
    interior_first_ = interior.first;
    interior_count_ = interior.last - interior.first;
    first_index_ = start + interior.first * step;
    for (int64_t t = 0; t < interior.first; ++t) borders_.push_back({t, source_index(start + t * step, size, mode)});
    for (int64_t t = interior.last; t < count; ++t) borders_.push_back({t, source_index(start + t * step, size, mode)});
  }

  // f(t, index) for each term outside the row that the padding mode folds back in (cpu/col2im_vectors.h's folds).
  template <typename F>
  void for_each_fold(F&& f) const {
    for (const Border& border : borders_) {
      if (border.index >= 0) f(border.t, border.index);
    }
  }

  template <typename acc_t>
  void add(acc_t* row, const acc_t* src) const {
    const auto add_border = [&](const Border& border) {
      if (border.index >= 0) row[border.index] += src[border.t];
    };
    // The first interior_first_ borders precede the interior (t < interior_first_), the rest follow it.
    const auto before_end = borders_.begin() + interior_first_;
    for (auto border = borders_.begin(); border != before_end; ++border) add_border(*border);
    if (step_ == 1) {
      axpy(row + first_index_, acc_t(1), src + interior_first_, interior_count_);
    } else {
      acc_t* p = row + first_index_;
      const acc_t* s = src + interior_first_;
      for (int64_t t = 0; t < interior_count_; ++t) p[t * step_] += s[t];
    }
    for (auto border = before_end; border != borders_.end(); ++border) add_border(*border);
  }

 private:
  struct Border {
    int64_t t, index;  // src[t] adds onto row[index] (index -1: dropped)
  };
  std::vector<Border> borders_;  // the run's terms outside the row, in order of t
  int64_t step_, interior_first_ = 0, interior_count_ = 0, first_index_ = 0;
};

// One vector of acc_t from p, converted from its storage type.
template <typename acc_t, typename scalar_t>
inline at::vec::Vectorized<acc_t> load_vector(const scalar_t* p) {
  using Vec = at::vec::Vectorized<acc_t>;
  if constexpr (std::is_same_v<scalar_t, acc_t>) {
    return Vec::loadu(p);
  } else {
    Vec v;
    at::vec::load_to_float(p, v);
    return v;
  }
}

// acc[i] += w[i] * x[i] for i in [0, n), converting x from its storage type.
template <typename scalar_t, typename acc_t>
inline void multiply_add(acc_t* acc, const acc_t* w, const scalar_t* x, int64_t n) {
  using Vec = at::vec::Vectorized<acc_t>;
  int64_t i = 0;
  for (; i + Vec::size() <= n; i += Vec::size()) {
    at::vec::fmadd(Vec::loadu(w + i), load_vector<acc_t>(x + i), Vec::loadu(acc + i)).store(acc + i);
  }
  for (; i < n; ++i) acc[i] += w[i] * static_cast<acc_t>(x[i]);
}

// acc[i] += sum over k < runs of w[k * w_stride + i] * x[k * x_stride + i], for i in [0, n): the runs in turn into a
// vector held in registers, so acc is read and written once (the same order of fused multiply-adds as a multiply_add
// per run).
template <typename acc_t>
inline void multiply_add_runs(acc_t* acc, const acc_t* w, int64_t w_stride, const acc_t* x, int64_t x_stride,
                              int64_t runs, int64_t n) {
  using Vec = at::vec::Vectorized<acc_t>;
  int64_t i = 0;
  for (; i + Vec::size() <= n; i += Vec::size()) {
    Vec sum = Vec::loadu(acc + i);
    for (int64_t k = 0; k < runs; ++k) {
      sum = at::vec::fmadd(Vec::loadu(w + k * w_stride + i), Vec::loadu(x + k * x_stride + i), sum);
    }
    sum.store(acc + i);
  }
  if (i < n) {  // the last part of a vector
    const int64_t rest = n - i;
    Vec sum = Vec::loadu(acc + i, rest);
    for (int64_t k = 0; k < runs; ++k) {
      sum = at::vec::fmadd(Vec::loadu(w + k * w_stride + i, rest), Vec::loadu(x + k * x_stride + i, rest), sum);
    }
    sum.store(acc + i, rest);
  }
}

// Calls body(kd, kh, in_row) for every tap row of output row (od, oh) that reads the input side
// (rows in zero padding are skipped; the other modes resolve to a real row).
template <typename Body>
void for_each_tap_row(const ConvGeometry& g, int64_t od, int64_t oh, const Body& body) {
  for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
    const int64_t id = g.tap_source(0, od, kd);
    if (id < 0) continue;
    for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
      const int64_t ih = g.tap_source(1, oh, kh);
      if (ih >= 0) body(kd, kh, id * g.conv_in_sizes[1] + ih);
    }
  }
}

// columns[ow * kw_count + kw] for ow < width: the input column tap kw of output column ow reads (g.tap_source: -1 in
// zero padding), -1 for the positions past out_w.
inline std::vector<int64_t> tap_columns(const ConvGeometry& g, int64_t width) {
  const int64_t kw_count = g.kernel[2];
  std::vector<int64_t> columns(width * kw_count, -1);
  for (int64_t ow = 0; ow < std::min(width, g.conv_out_sizes[2]); ++ow) {
    for (int64_t kw = 0; kw < kw_count; ++kw) columns[ow * kw_count + kw] = g.tap_source(2, ow, kw);
  }
  return columns;
}

// Calls body(tap, in_pixel) for every tap of output pixel (od, oh, ow) that reads the input side.
template <typename Body>
void for_each_tap_pixel(const ConvGeometry& g, int64_t od, int64_t oh, int64_t ow, const Body& body) {
  for_each_tap_row(g, od, oh, [&](int64_t kd, int64_t kh, int64_t in_row) {
    for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
      const int64_t iw = g.tap_source(2, ow, kw);
      if (iw >= 0) body((kd * g.kernel[1] + kh) * g.kernel[2] + kw, in_row * g.conv_in_sizes[2] + iw);
    }
  });
}

// dst[(i * positions + p) * pitch + c] = src[i * image_stride + c * channel_stride + p] in float, for i < images,
// p < positions, c < channels: a band of NCHW grad_output as rows of channels (and the partial back as rows of the
// weight; a transposed conv's weight as rows of its x channels, conv_transpose.cpp). float by 8 x 8 blocks through
// registers (at::vec's transpose: AVX2 shuffles where the build has AVX2); the channels past them, and 16-bit types,
// by runs of kRun positions, so that each source line is read whole and the kRun destination rows being written stay
// in L1 (torch's strided copy, and then this scalar loop for float, took as long as the GEMM they fed on HiFi-GAN's
// k4 s2 weight gradient).
template <typename scalar_t>
void transpose_to_rows(const scalar_t* src, int64_t image_stride, int64_t channel_stride, int64_t images,
                       int64_t positions, int64_t channels, float* dst, int64_t pitch) {
  constexpr int64_t kBlock = 8, kRun = 16;
  for (int64_t i = 0; i < images; ++i, src += image_stride, dst += positions * pitch) {
    int64_t c0 = 0;
    if constexpr (std::is_same_v<scalar_t, float>) {
      for (; c0 + kBlock <= channels && positions >= kBlock; c0 += kBlock) {
        int64_t p0 = 0;
        for (; p0 + kBlock <= positions; p0 += kBlock) {
          at::vec::transpose_mxn<float, kBlock, kBlock>(src + c0 * channel_stride + p0, channel_stride,
                                                        dst + p0 * pitch + c0, pitch);
        }
        for (; p0 < positions; ++p0) {
          for (int64_t c = c0; c < c0 + kBlock; ++c) dst[p0 * pitch + c] = src[c * channel_stride + p0];
        }
      }
    }
    for (int64_t p0 = 0; p0 < positions; p0 += kRun) {
      const int64_t run = std::min(kRun, positions - p0);
      for (int64_t c = c0; c < channels; ++c) {
        const scalar_t* from = src + c * channel_stride + p0;
        float* to = dst + p0 * pitch + c;
        for (int64_t p = 0; p < run; ++p) to[p * pitch] = static_cast<float>(from[p]);
      }
    }
  }
}

}  // namespace fastpad::cpu
