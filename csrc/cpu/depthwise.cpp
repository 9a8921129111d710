// Direct depthwise kernels (see depthwise.h). Naming: in every op the "input side" tensor is indexed by
// g.in_size / g.in_channels (conv input, transposed output) and the "output side" by g.out_size / g.out_channels
// (conv output, transposed input, grad_output). Output-side channel c belongs to input-side channel c / m.
#include "cpu/depthwise.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "cpu/row_ops.h"

namespace fastpad::cpu {
namespace {

// The padded window of one input-side row split into `stride` phase rows: phase r holds padded positions
// r, r + s, r + 2s, ... so that tap kw (offset q = kw * d) of all output positions of a row is the contiguous
// run phase[q % s][q / s, q / s + out_w). Forward and weight gradient gather into it; the transposed op
// accumulates into it and scatters it back (the adjoint).
template <typename acc_t>
class PhaseRows {
 public:
  explicit PhaseRows(const ConvGeometry& g)
      : g_(g),
        stride_(g.stride[2]),
        length_(g.out_size[2] + ((g.kernel[2] - 1) * g.dilation[2]) / g.stride[2]),
        used_(stride_, false),
        data_(stride_ * length_) {
    for (int64_t kw = 0; kw < g.kernel[2]; ++kw) used_[(kw * g.dilation[2]) % stride_] = true;
  }

  template <typename scalar_t>
  void gather(const scalar_t* row) {
    for (int64_t r = 0; r < stride_; ++r) {
      if (used_[r]) gather_row(phase(r), row, g_.in_size[2], r - g_.pad_lo[2], stride_, length_, g_.mode);
    }
  }

  void zero() { std::fill(data_.begin(), data_.end(), acc_t(0)); }

  void scatter_add(acc_t* row) {
    for (int64_t r = 0; r < stride_; ++r) {
      if (used_[r]) scatter_add_row(row, g_.in_size[2], phase(r), r - g_.pad_lo[2], stride_, length_, g_.mode);
    }
  }

  acc_t* tap(int64_t kw) {
    const int64_t offset = kw * g_.dilation[2];
    return phase(offset % stride_) + offset / stride_;
  }

 private:
  acc_t* phase(int64_t r) { return data_.data() + r * length_; }

  const ConvGeometry& g_;
  int64_t stride_, length_;
  std::vector<bool> used_;
  std::vector<acc_t> data_;
};

template <typename acc_t>
acc_t dot(const acc_t* a, const acc_t* b, int64_t n) {
  using Vec = at::vec::Vectorized<acc_t>;
  Vec sum(acc_t(0));
  int64_t i = 0;
  for (; i + Vec::size() <= n; i += Vec::size()) sum = at::vec::fmadd(Vec::loadu(a + i), Vec::loadu(b + i), sum);
  acc_t lanes[Vec::size()];
  sum.store(lanes);
  acc_t total = std::accumulate(lanes, lanes + Vec::size(), acc_t(0));
  for (; i < n; ++i) total += a[i] * b[i];
  return total;
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
      if (ih >= 0) body(kd, kh, id * g.in_size[1] + ih);
    }
  }
}

// Calls body(tap, in_pixel) for every tap of output pixel (od, oh, ow) that reads the input side.
template <typename Body>
void for_each_tap_pixel(const ConvGeometry& g, int64_t od, int64_t oh, int64_t ow, const Body& body) {
  for_each_tap_row(g, od, oh, [&](int64_t kd, int64_t kh, int64_t in_row) {
    for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
      const int64_t iw = g.tap_source(2, ow, kw);
      if (iw >= 0) body((kd * g.kernel[1] + kh) * g.kernel[2] + kw, in_row * g.in_size[2] + iw);
    }
  });
}

// The taps of output-side channel c, converted to the accumulation type.
template <typename scalar_t, typename acc_t>
void load_taps(const scalar_t* w, int64_t c, std::vector<acc_t>& taps) {
  const int64_t count = static_cast<int64_t>(taps.size());
  std::transform(w + c * count, w + (c + 1) * count, taps.begin(), [](scalar_t v) { return static_cast<acc_t>(v); });
}

// Channel blocks for the channels-last kernels: one per thread, a whole number of vectors each.
template <typename acc_t>
int64_t channel_block(int64_t channels) {
  const int64_t lanes = at::vec::Vectorized<acc_t>::size();
  const int64_t per_thread = (channels + at::get_num_threads() - 1) / at::get_num_threads();
  return std::max<int64_t>(lanes, (per_thread + lanes - 1) / lanes * lanes);
}

// ---- NCHW -------------------------------------------------------------------------------------------------

template <typename scalar_t>
void conv_nchw(const ConvGeometry& g, const scalar_t* x, const scalar_t* w, const scalar_t* bias, scalar_t* y) {
  using acc_t = acc_type<scalar_t>;
  const int64_t out_h = g.out_size[1], out_w = g.out_size[2], taps = g.kernel_volume();
  const int64_t multiplier = g.out_channels_per_group();
  at::parallel_for(0, g.batch * g.out_channels, 1, [&](int64_t begin, int64_t end) {
    PhaseRows<acc_t> phases(g);
    std::vector<acc_t> acc(out_w), weights(taps);
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t c = plane % g.out_channels, n = plane / g.out_channels;
      const scalar_t* x_plane = x + (n * g.in_channels + c / multiplier) * g.in_volume();
      load_taps(w, c, weights);
      for (int64_t row = 0; row < g.out_size[0] * out_h; ++row) {
        std::fill(acc.begin(), acc.end(), bias ? acc_t(bias[c]) : acc_t(0));
        for_each_tap_row(g, row / out_h, row % out_h, [&](int64_t kd, int64_t kh, int64_t in_row) {
          phases.gather(x_plane + in_row * g.in_size[2]);
          for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
            axpy(acc.data(), weights[(kd * g.kernel[1] + kh) * g.kernel[2] + kw], phases.tap(kw), out_w);
          }
        });
        at::vec::convert(acc.data(), y + (plane * g.out_size[0] * out_h + row) * out_w, out_w);
      }
    }
  });
}

// y_acc (input side) += scatter of x (output side): per x row and tap row, the taps accumulate into phase rows,
// which are then added into the target row. Parallel over y planes, each written by one thread.
template <typename scalar_t>
void conv_transpose_nchw(const ConvGeometry& g, const scalar_t* x, const scalar_t* w, acc_type<scalar_t>* y_acc) {
  using acc_t = acc_type<scalar_t>;
  const int64_t out_h = g.out_size[1], out_w = g.out_size[2], taps = g.kernel_volume();
  const int64_t multiplier = g.out_channels_per_group();
  at::parallel_for(0, g.batch * g.in_channels, 1, [&](int64_t begin, int64_t end) {
    PhaseRows<acc_t> phases(g);
    std::vector<acc_t> x_row(out_w), weights(taps);
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t c = plane % g.in_channels, n = plane / g.in_channels;
      acc_t* y_plane = y_acc + plane * g.in_volume();
      for (int64_t j = 0; j < multiplier; ++j) {
        const int64_t c_out = c * multiplier + j;
        const scalar_t* x_plane = x + (n * g.out_channels + c_out) * g.out_volume();
        load_taps(w, c_out, weights);
        for (int64_t row = 0; row < g.out_size[0] * out_h; ++row) {
          at::vec::convert(x_plane + row * out_w, x_row.data(), out_w);
          for_each_tap_row(g, row / out_h, row % out_h, [&](int64_t kd, int64_t kh, int64_t in_row) {
            phases.zero();
            for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
              axpy(phases.tap(kw), weights[(kd * g.kernel[1] + kh) * g.kernel[2] + kw], x_row.data(), out_w);
            }
            phases.scatter_add(y_plane + in_row * g.in_size[2]);
          });
        }
      }
    }
  });
}

// gw[c, tap] = sum over images and output positions of gy * the tap's padded input. Parallel over channels, each
// summed by one thread in a fixed order.
template <typename scalar_t>
void weight_grad_nchw(const ConvGeometry& g, const scalar_t* x, const scalar_t* gy, acc_type<scalar_t>* gw) {
  using acc_t = acc_type<scalar_t>;
  const int64_t out_h = g.out_size[1], out_w = g.out_size[2], taps = g.kernel_volume();
  const int64_t multiplier = g.out_channels_per_group();
  at::parallel_for(0, g.out_channels, 1, [&](int64_t begin, int64_t end) {
    PhaseRows<acc_t> phases(g);
    std::vector<acc_t> gy_row(out_w);
    for (int64_t c = begin; c < end; ++c) {
      acc_t* acc = gw + c * taps;
      std::fill(acc, acc + taps, acc_t(0));
      for (int64_t n = 0; n < g.batch; ++n) {
        const scalar_t* x_plane = x + (n * g.in_channels + c / multiplier) * g.in_volume();
        const scalar_t* gy_plane = gy + (n * g.out_channels + c) * g.out_volume();
        for (int64_t row = 0; row < g.out_size[0] * out_h; ++row) {
          at::vec::convert(gy_plane + row * out_w, gy_row.data(), out_w);
          for_each_tap_row(g, row / out_h, row % out_h, [&](int64_t kd, int64_t kh, int64_t in_row) {
            phases.gather(x_plane + in_row * g.in_size[2]);
            for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
              acc[(kd * g.kernel[1] + kh) * g.kernel[2] + kw] += dot(gy_row.data(), phases.tap(kw), out_w);
            }
          });
        }
      }
    }
  });
}

// ---- channels-last (multiplier 1) --------------------------------------------------------------------------
// `w_taps` is the weight transposed to [taps, C] in the accumulation type; every inner loop is a vector over C.

template <typename scalar_t>
void conv_nhwc(const ConvGeometry& g, const scalar_t* x, const acc_type<scalar_t>* w_taps,
               const acc_type<scalar_t>* bias, scalar_t* y) {
  using acc_t = acc_type<scalar_t>;
  const int64_t channels = g.out_channels, out_h = g.out_size[1], out_w = g.out_size[2];
  at::parallel_for(0, g.batch * g.out_size[0] * out_h, 1, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(channels);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t oh = item % out_h, od = (item / out_h) % g.out_size[0], n = item / (out_h * g.out_size[0]);
      const scalar_t* x_image = x + n * g.in_volume() * channels;
      for (int64_t ow = 0; ow < out_w; ++ow) {
        if (bias) {
          std::copy(bias, bias + channels, acc.begin());
        } else {
          std::fill(acc.begin(), acc.end(), acc_t(0));
        }
        for_each_tap_pixel(g, od, oh, ow, [&](int64_t tap, int64_t in_pixel) {
          multiply_add(acc.data(), w_taps + tap * channels, x_image + in_pixel * channels, channels);
        });
        at::vec::convert(acc.data(), y + (item * out_w + ow) * channels, channels);
      }
    }
  });
}

// Parallel over (image, channel block): each block of y is written by one thread.
template <typename scalar_t>
void conv_transpose_nhwc(const ConvGeometry& g, const scalar_t* x, const acc_type<scalar_t>* w_taps,
                         acc_type<scalar_t>* y_acc) {
  using acc_t = acc_type<scalar_t>;
  const int64_t channels = g.in_channels, out_h = g.out_size[1], out_w = g.out_size[2];
  const int64_t block = channel_block<acc_t>(channels), blocks = (channels + block - 1) / block;
  at::parallel_for(0, g.batch * blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t n = item / blocks, c0 = (item % blocks) * block, len = std::min(block, channels - c0);
      acc_t* y_image = y_acc + n * g.in_volume() * channels + c0;
      for (int64_t pixel = 0; pixel < g.out_volume(); ++pixel) {
        const scalar_t* x_pixel = x + (n * g.out_volume() + pixel) * channels + c0;
        for_each_tap_pixel(g, pixel / (out_w * out_h), (pixel / out_w) % out_h, pixel % out_w,
                           [&](int64_t tap, int64_t in_pixel) {
                             multiply_add(y_image + in_pixel * channels, w_taps + tap * channels + c0, x_pixel, len);
                           });
      }
    }
  });
}

// Parallel over channel blocks; each channel sums over (image, pixel, tap) in the same order whatever the blocking,
// so the result is bitwise independent of the thread count.
template <typename scalar_t>
void weight_grad_nhwc(const ConvGeometry& g, const scalar_t* x, const scalar_t* gy, acc_type<scalar_t>* gw) {
  using acc_t = acc_type<scalar_t>;
  const int64_t channels = g.out_channels, out_h = g.out_size[1], out_w = g.out_size[2], taps = g.kernel_volume();
  const int64_t block = channel_block<acc_t>(channels), blocks = (channels + block - 1) / block;
  at::parallel_for(0, blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(taps * block), gy_pixel(block);
    for (int64_t b = begin; b < end; ++b) {
      const int64_t c0 = b * block, len = std::min(block, channels - c0);
      std::fill(acc.begin(), acc.end(), acc_t(0));
      for (int64_t n = 0; n < g.batch; ++n) {
        const scalar_t* x_image = x + n * g.in_volume() * channels + c0;
        for (int64_t pixel = 0; pixel < g.out_volume(); ++pixel) {
          at::vec::convert(gy + (n * g.out_volume() + pixel) * channels + c0, gy_pixel.data(), len);
          for_each_tap_pixel(g, pixel / (out_w * out_h), (pixel / out_w) % out_h, pixel % out_w,
                             [&](int64_t tap, int64_t in_pixel) {
                               multiply_add(acc.data() + tap * block, gy_pixel.data(), x_image + in_pixel * channels,
                                            len);
                             });
        }
      }
      for (int64_t c = 0; c < len; ++c) {
        for (int64_t tap = 0; tap < taps; ++tap) gw[(c0 + c) * taps + tap] = acc[tap * block + c];
      }
    }
  });
}

// The weight as [taps, C] in the accumulation type, for the channels-last kernels.
at::Tensor weight_by_tap(const at::Tensor& weight, at::ScalarType acc_dtype) {
  return weight.to(acc_dtype).reshape({weight.size(0), -1}).t().contiguous();
}

}  // namespace

void depthwise_conv(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                    at::Tensor& y, bool channels_last) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "fastpad_depthwise_conv", [&] {
    using acc_t = acc_type<scalar_t>;
    if (channels_last) {
      const auto acc_dtype = c10::CppTypeToScalarType<acc_t>::value;
      const auto w_taps = weight_by_tap(weight, acc_dtype);
      const auto b_acc = bias.defined() ? bias.to(acc_dtype) : at::Tensor();
      conv_nhwc<scalar_t>(g, x.const_data_ptr<scalar_t>(), w_taps.const_data_ptr<acc_t>(),
                          b_acc.defined() ? b_acc.const_data_ptr<acc_t>() : nullptr, y.mutable_data_ptr<scalar_t>());
    } else {
      const auto w = weight.contiguous();
      conv_nchw<scalar_t>(g, x.const_data_ptr<scalar_t>(), w.const_data_ptr<scalar_t>(),
                          bias.defined() ? bias.const_data_ptr<scalar_t>() : nullptr, y.mutable_data_ptr<scalar_t>());
    }
  });
}

void depthwise_conv_transpose(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& weight,
                              at::Tensor& y_acc, bool channels_last) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "fastpad_depthwise_conv_transpose", [&] {
    using acc_t = acc_type<scalar_t>;
    if (channels_last) {
      const auto w_taps = weight_by_tap(weight, y_acc.scalar_type());
      conv_transpose_nhwc<scalar_t>(g, x.const_data_ptr<scalar_t>(), w_taps.const_data_ptr<acc_t>(),
                                    y_acc.mutable_data_ptr<acc_t>());
    } else {
      const auto w = weight.contiguous();
      conv_transpose_nchw<scalar_t>(g, x.const_data_ptr<scalar_t>(), w.const_data_ptr<scalar_t>(),
                                    y_acc.mutable_data_ptr<acc_t>());
    }
  });
}

at::Tensor depthwise_weight_grad(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& grad_output,
                                 bool channels_last) {
  at::Tensor grad;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "fastpad_depthwise_weight_grad", [&] {
    using acc_t = acc_type<scalar_t>;
    grad = at::empty({g.out_channels, 1, g.kernel_volume()}, x.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
    const auto weight_grad = channels_last ? weight_grad_nhwc<scalar_t> : weight_grad_nchw<scalar_t>;
    weight_grad(g, x.const_data_ptr<scalar_t>(), grad_output.const_data_ptr<scalar_t>(), grad.mutable_data_ptr<acc_t>());
  });
  return grad;
}

}  // namespace fastpad::cpu
