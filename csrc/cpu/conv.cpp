// fastpad::conv on CPU: y[o] = bias + sum_r w[r] * xpad[o*s - pad_lo + r*d], 1-3 spatial dims.
// Layout: contiguous N,C,spatial or channels_last (4-d/5-d); the output keeps the input's memory format.
// Padding is never materialised: taps in the padding read zero or their reflected/clamped/wrapped source.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <vector>

#include "conv_params.h"
#include "cpu/gemm_tiles.h"
#include "cpu/row_ops.h"

namespace fastpad::cpu {
namespace {

// Depthwise (one input channel per group), NCHW. Each output row accumulates in a vector of the
// accumulation type. For every input row a tap row touches, the padded row is gathered once into
// `stride` phase rows (phase r holds padded positions r, r+s, r+2s, ...), so that every tap is a
// contiguous, vectorised multiply-add whatever the stride.
template <typename scalar_t>
void depthwise_nchw(const ConvGeometry& g, const scalar_t* x, const scalar_t* w, const scalar_t* bias, scalar_t* y) {
  using acc_t = acc_type<scalar_t>;
  const int64_t in_h = g.in_size[1], in_w = g.in_size[2];
  const int64_t out_d = g.out_size[0], out_h = g.out_size[1], out_w = g.out_size[2];
  const int64_t stride = g.stride[2], dilation = g.dilation[2], kernel_w = g.kernel[2];
  const int64_t multiplier = g.out_channels_per_group();
  const int64_t taps = g.kernel_volume();
  const int64_t phase_len = out_w + ((kernel_w - 1) * dilation) / stride;
  std::vector<bool> phase_used(stride, false);
  for (int64_t kw = 0; kw < kernel_w; ++kw) phase_used[(kw * dilation) % stride] = true;

  at::parallel_for(0, g.batch * g.out_channels * out_d, 1, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(out_w), phases(stride * phase_len), weights(taps);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t od = item % out_d;
      const int64_t c = (item / out_d) % g.out_channels;
      const int64_t n = item / (out_d * g.out_channels);
      const scalar_t* plane = x + (n * g.in_channels + c / multiplier) * g.in_volume();
      for (int64_t r = 0; r < taps; ++r) weights[r] = static_cast<acc_t>(w[c * taps + r]);
      const acc_t bias_value = bias ? static_cast<acc_t>(bias[c]) : acc_t(0);
      scalar_t* y_plane = y + ((n * g.out_channels + c) * out_d + od) * out_h * out_w;
      for (int64_t oh = 0; oh < out_h; ++oh) {
        std::fill(acc.begin(), acc.end(), bias_value);
        for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
          const int64_t id = g.tap_source(0, od, kd);
          if (id < 0) continue;
          for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
            const int64_t ih = g.tap_source(1, oh, kh);
            if (ih < 0) continue;
            const scalar_t* row = plane + (id * in_h + ih) * in_w;
            for (int64_t r = 0; r < stride; ++r) {
              if (phase_used[r]) {
                gather_row(phases.data() + r * phase_len, row, in_w, r - g.pad_lo[2], stride, phase_len, g.mode);
              }
            }
            const acc_t* tap_weights = weights.data() + (kd * g.kernel[1] + kh) * kernel_w;
            for (int64_t kw = 0; kw < kernel_w; ++kw) {
              const int64_t offset = kw * dilation;
              axpy(acc.data(), tap_weights[kw], phases.data() + (offset % stride) * phase_len + offset / stride,
                   out_w);
            }
          }
        }
        at::vec::convert(acc.data(), y_plane + oh * out_w, out_w);
      }
    }
  });
}

// Depthwise with channel multiplier 1, channels-last: vectorised along C, one output pixel at a time.
// `w_taps` is the weight transposed to [taps, C] in the accumulation type.
template <typename scalar_t>
void depthwise_nhwc(const ConvGeometry& g, const scalar_t* x, const acc_type<scalar_t>* w_taps,
                    const acc_type<scalar_t>* bias, scalar_t* y) {
  using acc_t = acc_type<scalar_t>;
  const int64_t channels = g.out_channels;
  const int64_t in_h = g.in_size[1], in_w = g.in_size[2];
  const int64_t out_d = g.out_size[0], out_h = g.out_size[1], out_w = g.out_size[2];
  at::parallel_for(0, g.batch * out_d * out_h, 1, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(channels);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t oh = item % out_h, od = (item / out_h) % out_d, n = item / (out_h * out_d);
      const scalar_t* x_image = x + n * g.in_volume() * channels;
      for (int64_t ow = 0; ow < out_w; ++ow) {
        if (bias) {
          std::copy(bias, bias + channels, acc.begin());
        } else {
          std::fill(acc.begin(), acc.end(), acc_t(0));
        }
        for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
          const int64_t id = g.tap_source(0, od, kd);
          if (id < 0) continue;
          for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
            const int64_t ih = g.tap_source(1, oh, kh);
            if (ih < 0) continue;
            for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
              const int64_t iw = g.tap_source(2, ow, kw);
              if (iw < 0) continue;
              const int64_t tap = (kd * g.kernel[1] + kh) * g.kernel[2] + kw;
              multiply_add(acc.data(), w_taps + tap * channels, x_image + ((id * in_h + ih) * in_w + iw) * channels,
                           channels);
            }
          }
        }
        at::vec::convert(acc.data(), y + (item * out_w + ow) * channels, channels);
      }
    }
  });
}

// Dense and grouped: per (image, group, tile of output positions), a fused im2col tile and one GEMM
// straight into the output. NCHW: y[Cg_out, tile] = W[Cg_out, Cg_in*K] @ cols[Cg_in*K, tile];
// channels-last: y[tile, Cg_out] = cols[tile, K*Cg_in] @ W[K*Cg_in, Cg_out].
template <typename scalar_t>
void gemm_conv(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
               at::Tensor& y, bool channels_last) {
  using acc_t = acc_type<scalar_t>;
  const auto acc_dtype = c10::CppTypeToScalarType<acc_t>::value;
  const int64_t groups = g.groups, in_per_group = g.in_channels_per_group(),
                out_per_group = g.out_channels_per_group(), taps = g.kernel_volume();
  const int64_t reduce = in_per_group * taps;
  const int64_t out_w = g.out_size[2], pixels = g.out_volume();
  const auto bias_acc = bias.defined() ? bias.to(acc_dtype).view({groups, out_per_group}) : at::Tensor();
  const auto w_acc = channels_last ? weight.to(acc_dtype)
                                         .reshape({groups, out_per_group, in_per_group, taps})
                                         .permute({0, 3, 2, 1})
                                         .contiguous()
                                         .view({groups, reduce, out_per_group})
                                   : weight.to(acc_dtype).contiguous().view({groups, out_per_group, reduce});
  // Output viewed as [N, C_out, pixels] (NCHW) or [N, pixels, C_out] (channels-last); no copy either way.
  const auto y_flat = channels_last ? y.movedim(1, -1).reshape({g.batch, pixels, g.out_channels})
                                    : y.view({g.batch, g.out_channels, pixels});
  // Tile unit: one output row (NCHW) or one output pixel (channels-last).
  const int64_t unit_len = channels_last ? 1 : out_w;
  const int64_t total_units = pixels / unit_len;
  const int64_t units = units_per_tile(reduce * unit_len * static_cast<int64_t>(sizeof(acc_t)), total_units);
  const int64_t tiles = (total_units + units - 1) / units;
  const scalar_t* x_data = x.const_data_ptr<scalar_t>();

  at::parallel_for(0, g.batch * groups * tiles, 1, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> cols(reduce * units * unit_len);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t tile = item % tiles, group = (item / tiles) % groups, n = item / (tiles * groups);
      const int64_t unit_begin = tile * units, unit_end = std::min(unit_begin + units, total_units);
      const int64_t pixel_begin = unit_begin * unit_len, tile_pixels = (unit_end - unit_begin) * unit_len;
      const auto group_bias = bias_acc.defined() ? bias_acc[group] : at::Tensor();
      if (channels_last) {
        im2col_nhwc(g, x_data + n * g.in_volume() * g.in_channels, group, unit_begin, unit_end, cols.data());
        const auto out = y_flat[n].narrow(0, pixel_begin, tile_pixels).narrow(1, group * out_per_group, out_per_group);
        matmul_into(out, wrap_buffer(cols.data(), {tile_pixels, reduce}), w_acc[group],
                    group_bias.defined() ? group_bias.view({1, out_per_group}) : group_bias);
      } else {
        const scalar_t* x_group = x_data + (n * g.in_channels + group * in_per_group) * g.in_volume();
        im2col_nchw(g, x_group, unit_begin, unit_end, cols.data());
        const auto out = y_flat[n].narrow(0, group * out_per_group, out_per_group).narrow(1, pixel_begin, tile_pixels);
        matmul_into(out, w_acc[group], wrap_buffer(cols.data(), {reduce, tile_pixels}),
                    group_bias.defined() ? group_bias.view({out_per_group, 1}) : group_bias);
      }
    }
  });
}

at::Tensor conv_cpu(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                    at::IntArrayRef stride, at::IntArrayRef pad_lo, at::IntArrayRef pad_hi, at::IntArrayRef dilation,
                    int64_t groups, c10::string_view padding_mode) {
  // The ATen calls inside the kernel work on plain tensors: autograd is this op's own registration.
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  const ConvGeometry g =
      conv_geometry(input, weight, bias, stride, pad_lo, pad_hi, dilation, groups, padding_mode);
  const auto format = output_memory_format(input);
  const bool channels_last = format != at::MemoryFormat::Contiguous;
  const auto x = input.contiguous(format);
  auto y = at::empty(spatial_shape(g.batch, g.out_channels, g, input.dim() - 2, /*which_in=*/false),
                     input.options().memory_format(format));
  if (y.numel() == 0) return y;
  const auto b = bias.has_value() && bias->defined() ? bias->contiguous() : at::Tensor();
  const bool depthwise = g.in_channels_per_group() == 1;

  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, input.scalar_type(), "fastpad_conv_cpu", [&] {
    using acc_t = acc_type<scalar_t>;
    const auto acc_dtype = c10::CppTypeToScalarType<acc_t>::value;
    if (depthwise && !channels_last) {
      const auto w = weight.contiguous();
      depthwise_nchw<scalar_t>(g, x.const_data_ptr<scalar_t>(), w.const_data_ptr<scalar_t>(),
                               b.defined() ? b.const_data_ptr<scalar_t>() : nullptr, y.mutable_data_ptr<scalar_t>());
    } else if (depthwise && g.out_channels_per_group() == 1) {
      const auto w_taps = weight.to(acc_dtype).reshape({g.out_channels, g.kernel_volume()}).t().contiguous();
      const auto b_acc = b.defined() ? b.to(acc_dtype) : at::Tensor();
      depthwise_nhwc<scalar_t>(g, x.const_data_ptr<scalar_t>(), w_taps.const_data_ptr<acc_t>(),
                               b_acc.defined() ? b_acc.const_data_ptr<acc_t>() : nullptr,
                               y.mutable_data_ptr<scalar_t>());
    } else {
      gemm_conv<scalar_t>(g, x, weight, b, y, channels_last);
    }
  });
  return y;
}

}  // namespace

TORCH_LIBRARY_IMPL(fastpad, CPU, m) {
  m.impl("conv", &conv_cpu);
}

}  // namespace fastpad::cpu
