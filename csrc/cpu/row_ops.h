// Small primitives of the CPU kernels: vectorised multiply-adds, the scatter-add of a strided run onto a row of the
// implicitly padded input (positions outside the row resolved by the padding mode, with a predicate on the borders
// only), and iteration over the taps of an output pixel.
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <type_traits>

#include "geometry.h"

namespace fastpad::cpu {

template <typename scalar_t>
using acc_type = at::opmath_type<scalar_t>;

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
// (dropped where the mode reads zero, folded onto the mirrored/clamped/wrapped position otherwise).
template <typename acc_t>
inline void scatter_add_row(acc_t* row, int64_t size, const acc_t* src, int64_t start, int64_t step, int64_t count,
                            PaddingMode mode) {
  const InteriorRange interior = interior_range(start, step, count, size);
  const auto add_padded = [&](int64_t t) {
    const int64_t i = source_index(start + t * step, size, mode);
    if (i >= 0) row[i] += src[t];
  };
  for (int64_t t = 0; t < interior.first; ++t) add_padded(t);
  const int64_t first_index = start + interior.first * step;
  const int64_t interior_count = interior.last - interior.first;
  if (step == 1) {
    axpy(row + first_index, acc_t(1), src + interior.first, interior_count);
  } else {
    acc_t* p = row + first_index;
    const acc_t* s = src + interior.first;
    for (int64_t t = 0; t < interior_count; ++t) p[t * step] += s[t];
  }
  for (int64_t t = interior.last; t < count; ++t) add_padded(t);
}

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

}  // namespace fastpad::cpu
