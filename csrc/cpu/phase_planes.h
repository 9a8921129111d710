// Phase planes: the implicitly padded input of one (H, W) slice, for a band of output rows, split by stride phase
// so that every tap of every output position in the band is one contiguous run.
//
// Phase plane (ph, pw) holds padded positions (row * s_h + ph, col * s_w + pw). Tap (kh, kw) has padded offset
// (kh * d_h, kw * d_w), so for output (oh, ow) it reads phase ((kh*d_h) % s_h, (kw*d_w) % s_w) at
// (oh + (kh*d_h) / s_h, ow + (kw*d_w) / s_w). With the band's outputs flattened at the phase planes' row pitch,
// t = (oh - band_begin) * pitch + ow, a tap reads all of them at t + tap_offset: the kernels become long
// vector loops with no index math and no predicate. Columns ow >= out_w of the flattened band are computed and
// discarded (pitch - out_w extra columns per row, a few percent on typical layers).
//
// Only this cache-sized band buffer is ever padded; the padding mode is resolved by gather_row (rows) and
// source_index (columns) while filling it, and scatter_add is its exact adjoint.
#pragma once

#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <vector>

#include "cpu/row_ops.h"
#include "geometry.h"

namespace fastpad::cpu {

// Target size of one thread's phase planes: a band of output rows is chosen to fit it (L2-resident).
constexpr int64_t kPhasePlaneBytes = 256 * 1024;

template <typename acc_t>
class PhasePlanes {
 public:
  using Vec = at::vec::Vectorized<acc_t>;

  explicit PhasePlanes(const ConvGeometry& g)
      : g_(g),
        stride_h_(g.stride[1]),
        stride_w_(g.stride[2]),
        extra_rows_(((g.kernel[1] - 1) * g.dilation[1]) / g.stride[1]),
        pitch_(g.out_size[2] + ((g.kernel[2] - 1) * g.dilation[2]) / g.stride[2]),
        used_(stride_h_ * stride_w_, false) {
    const int64_t phases = stride_h_ * stride_w_;
    const int64_t row_bytes = phases * pitch_ * static_cast<int64_t>(sizeof(acc_t));
    band_rows_ = std::clamp<int64_t>(kPhasePlaneBytes / row_bytes - extra_rows_, 1, g.out_size[1]);
    plane_rows_ = band_rows_ + extra_rows_;
    // Vector loops run over a whole number of vectors, so every buffer has one vector (plus the widest tap
    // offset past the last phase row) of zeroed slack; those lanes land in discarded columns.
    plane_size_ = plane_rows_ * pitch_ + ((g.kernel[2] - 1) * g.dilation[2]) / g.stride[2] + Vec::size();
    data_.assign(phases * plane_size_, acc_t(0));
    for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
      for (int64_t kw = 0; kw < g.kernel[2]; ++kw) used_[phase_index(kh, kw)] = true;
    }
  }

  int64_t pitch() const { return pitch_; }
  int64_t band_rows() const { return band_rows_; }
  int64_t bands() const { return (g_.out_size[1] + band_rows_ - 1) / band_rows_; }
  // Output rows [begin, end) of band b.
  int64_t band_begin(int64_t b) const { return b * band_rows_; }
  int64_t band_end(int64_t b) const { return std::min(band_begin(b) + band_rows_, g_.out_size[1]); }
  // Flattened positions a vector loop covers for a band of `rows` output rows: a whole number of vectors.
  int64_t positions(int64_t rows) const { return (rows * pitch_ + Vec::size() - 1) / Vec::size() * Vec::size(); }
  // Buffer size for a flattened band of outputs at this pitch, slack included.
  int64_t band_buffer_size() const { return positions(band_rows_); }

  // Fills the phase planes for output rows starting at `band_begin` from one (H, W) input slice.
  template <typename scalar_t>
  void gather(const scalar_t* slice, int64_t band_begin, int64_t rows) {
    for_each_phase_row(band_begin, rows, [&](acc_t* dst, int64_t in_row, int64_t column_start) {
      gather_row(dst, in_row < 0 ? static_cast<const scalar_t*>(nullptr) : slice + in_row * g_.in_size[2],
                 g_.in_size[2], column_start, stride_w_, pitch_, g_.mode);
    });
  }

  void zero() { std::fill(data_.begin(), data_.end(), acc_t(0)); }

  // Adjoint of gather: adds every phase position of the band back onto the input slice position it was read
  // from (dropped where the mode reads zero).
  void scatter_add(acc_t* slice, int64_t band_begin, int64_t rows) {
    for_each_phase_row(band_begin, rows, [&](acc_t* src, int64_t in_row, int64_t column_start) {
      if (in_row >= 0) {
        scatter_add_row(slice + in_row * g_.in_size[2], g_.in_size[2], src, column_start, stride_w_, pitch_, g_.mode);
      }
    });
  }

  // Tap (kh, kw) of flattened output position t is tap(kh, kw)[t].
  acc_t* tap(int64_t kh, int64_t kw) {
    return data_.data() + phase_index(kh, kw) * plane_size_ + ((kh * g_.dilation[1]) / stride_h_) * pitch_ +
           (kw * g_.dilation[2]) / stride_w_;
  }

 private:
  int64_t phase_index(int64_t kh, int64_t kw) const {
    return ((kh * g_.dilation[1]) % stride_h_) * stride_w_ + (kw * g_.dilation[2]) % stride_w_;
  }

  // body(phase_row, input_row, column_start) for every phase row the band reads: input_row is the resolved
  // source row (-1: zero padding), column_start the input column of the phase row's first element.
  template <typename Body>
  void for_each_phase_row(int64_t band_begin, int64_t rows, const Body& body) {
    for (int64_t ph = 0; ph < stride_h_; ++ph) {
      for (int64_t pw = 0; pw < stride_w_; ++pw) {
        if (!used_[ph * stride_w_ + pw]) continue;
        acc_t* plane = data_.data() + (ph * stride_w_ + pw) * plane_size_;
        for (int64_t i = 0; i < rows + extra_rows_; ++i) {
          const int64_t in_row =
              source_index((band_begin + i) * stride_h_ + ph - g_.pad_lo[1], g_.in_size[1], g_.mode);
          body(plane + i * pitch_, in_row, pw - g_.pad_lo[2]);
        }
      }
    }
  }

  const ConvGeometry& g_;
  int64_t stride_h_, stride_w_, extra_rows_, pitch_;
  int64_t band_rows_ = 1, plane_rows_ = 1, plane_size_ = 0;
  std::vector<bool> used_;
  std::vector<acc_t> data_;
};

}  // namespace fastpad::cpu
