// fastpad::conv on CPU: y[o] = bias + sum_r w[r] * xpad[o*s - pad_lo + r*d], 1-3 spatial dims.
// Layout: contiguous N,C,spatial or channels_last (4-d/5-d); the output keeps the input's memory format.
// Padding is never materialised: taps in the padding read zero or their reflected/clamped/wrapped source.
// Depthwise problems go to the direct kernels of depthwise.cpp; the rest to GEMMs over phase planes (NCHW) or a
// fused im2col + GEMM (channels-last).
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <vector>

#include "conv_params.h"
#include "cpu/depthwise.h"
#include "cpu/gemm_tiles.h"
#include "cpu/phase_planes.h"

namespace fastpad::cpu {
namespace {

// Channels-last dense and grouped: per (image, group, tile of output pixels), a fused im2col tile and one GEMM
// straight into the output: y[tile, Cg_out] = cols[tile, K*Cg_in] @ W[K*Cg_in, Cg_out].
template <typename scalar_t>
void gemm_conv_nhwc(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                    at::Tensor& y) {
  using acc_t = acc_type<scalar_t>;
  const auto acc_dtype = c10::CppTypeToScalarType<acc_t>::value;
  const int64_t groups = g.groups, in_per_group = g.in_channels_per_group(),
                out_per_group = g.out_channels_per_group(), taps = g.kernel_volume();
  const int64_t reduce = in_per_group * taps;
  const auto bias_acc = bias.defined() ? bias.to(acc_dtype).view({groups, 1, out_per_group}) : at::Tensor();
  const auto w_acc = weight.to(acc_dtype)
                         .reshape({groups, out_per_group, in_per_group, taps})
                         .permute({0, 3, 2, 1})
                         .contiguous()
                         .view({groups, reduce, out_per_group});
  const auto y_flat = flatten_positions(y, /*channels_last=*/true);
  const TilePlan plan(g, /*channels_last=*/true, reduce * static_cast<int64_t>(sizeof(acc_t)));
  const scalar_t* x_data = x.const_data_ptr<scalar_t>();

  at::parallel_for(0, g.batch * groups * plan.tiles, 1, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> cols(reduce * plan.buffer_positions());
    for (int64_t item = begin; item < end; ++item) {
      const int64_t group = (item / plan.tiles) % groups, n = item / (plan.tiles * groups);
      const auto [unit_begin, unit_end, pixel_begin, tile_pixels] = plan.tile(item % plan.tiles);
      im2col_nhwc(g, x_data + n * g.in_volume() * g.in_channels, group, unit_begin, unit_end, cols.data());
      const auto out = y_flat[n].narrow(0, pixel_begin, tile_pixels).narrow(1, group * out_per_group, out_per_group);
      matmul_into(out, wrap_buffer(cols.data(), {tile_pixels, reduce}), w_acc[group],
                  bias_acc.defined() ? bias_acc[group] : at::Tensor());
    }
  });
}

// NCHW dense and grouped, per (image, group, band of output rows): the group's input channels become phase planes
// (cpu/phase_planes.h), and out[Cg_out, band] accumulates one GEMM per (kh, kw) tap read straight off the planes,
// W_tap[Cg_out, Cg_in] @ planes_tap[Cg_in, band]: no im2col at all. With few input channels the taps are copied
// into columns first, so that one GEMM reduces over channels and taps together (K = Cg_in * kh * kw).
template <typename scalar_t>
void phase_plane_conv_nchw(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& weight,
                           const at::Tensor& bias, at::Tensor& y) {
  using acc_t = acc_type<scalar_t>;
  const auto acc_dtype = c10::CppTypeToScalarType<acc_t>::value;
  const int64_t groups = g.groups, c_in = g.in_channels_per_group(), c_out = g.out_channels_per_group();
  const int64_t taps_2d = g.kernel[1] * g.kernel[2], slice = g.in_size[1] * g.in_size[2];
  const int64_t out_w = g.out_size[2], out_slice = g.out_size[1] * out_w;
  const bool tap_gemms = c_in >= kTapGemmMinChannels;
  // Tap GEMMs: [groups, kd, kh*kw, Cg_out, Cg_in]. Columns: [groups, kd, Cg_out, Cg_in * kh*kw].
  const auto w5 = weight.to(acc_dtype).reshape({groups, c_out, c_in, g.kernel[0], taps_2d});
  const at::Tensor w_acc = (tap_gemms ? w5.permute({0, 3, 4, 1, 2}) : w5.permute({0, 3, 1, 2, 4})).contiguous();
  const acc_t* w_data = w_acc.const_data_ptr<acc_t>();
  const at::Tensor bias_acc = bias.defined() ? bias.to(acc_dtype) : at::Tensor();
  const acc_t* bias_data = bias_acc.defined() ? bias_acc.const_data_ptr<acc_t>() : nullptr;
  const scalar_t* x_data = x.const_data_ptr<scalar_t>();
  scalar_t* y_data = y.mutable_data_ptr<scalar_t>();
  // The band's own buffers: out[Cg_out, band], plus the columns when they are used.
  const int64_t bytes_per_position = (c_out + (tap_gemms ? 0 : c_in * taps_2d)) * static_cast<int64_t>(sizeof(acc_t));
  const int64_t bands = PhasePlanes<acc_t>(g, c_in, kGemmPhasePlaneBytes, bytes_per_position).bands();

  at::parallel_for(0, g.batch * groups * bands, 1, [&](int64_t begin, int64_t end) {
    PhasePlanes<acc_t> planes(g, c_in, kGemmPhasePlaneBytes, bytes_per_position);
    const int64_t band_size = planes.band_buffer_size();
    std::vector<acc_t> out(c_out * band_size), cols(tap_gemms ? 0 : c_in * taps_2d * band_size);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t b = item % bands, group = (item / bands) % groups, n = item / (bands * groups);
      const int64_t row0 = planes.band_begin(b), rows = planes.band_end(b) - row0, n_pos = planes.positions(rows);
      auto out_view = at::from_blob(out.data(), {c_out, n_pos}, {band_size, 1}, at::TensorOptions(acc_dtype));
      for (int64_t od = 0; od < g.out_size[0]; ++od) {
        for (int64_t co = 0; co < c_out; ++co) {
          std::fill_n(out.data() + co * band_size, n_pos, bias_data ? bias_data[group * c_out + co] : acc_t(0));
        }
        for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
          const int64_t id = g.tap_source(0, od, kd);
          if (id < 0) continue;
          for (int64_t ci = 0; ci < c_in; ++ci) {
            planes.gather(x_data + (n * g.in_channels + group * c_in + ci) * g.in_volume() + id * slice, row0, rows, ci);
          }
          const acc_t* w_kd = w_data + (group * g.kernel[0] + kd) * taps_2d * c_out * c_in;
          if (tap_gemms) {
            for (int64_t tap = 0; tap < taps_2d; ++tap) {
              const auto w_tap = wrap_buffer(const_cast<acc_t*>(w_kd) + tap * c_out * c_in, {c_out, c_in});
              out_view.addmm_(w_tap, at::from_blob(planes.tap(tap / g.kernel[2], tap % g.kernel[2]), {c_in, n_pos},
                                                   {planes.channel_stride(), 1}, at::TensorOptions(acc_dtype)));
            }
          } else {
            for (int64_t ci = 0; ci < c_in; ++ci) {
              for (int64_t tap = 0; tap < taps_2d; ++tap) {
                const acc_t* src = planes.tap(tap / g.kernel[2], tap % g.kernel[2]) + ci * planes.channel_stride();
                std::copy_n(src, n_pos, cols.data() + (ci * taps_2d + tap) * band_size);
              }
            }
            out_view.addmm_(wrap_buffer(const_cast<acc_t*>(w_kd), {c_out, c_in * taps_2d}),
                            at::from_blob(cols.data(), {c_in * taps_2d, n_pos}, {band_size, 1},
                                          at::TensorOptions(acc_dtype)));
          }
        }
        for (int64_t co = 0; co < c_out; ++co) {
          scalar_t* y_slice = y_data + ((n * g.out_channels + group * c_out + co) * g.out_size[0] + od) * out_slice;
          store_band(y_slice, out.data() + co * band_size, row0, rows, planes.pitch(), out_w);
        }
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
  auto y = at::empty(tensor_shape(g.batch, g.out_channels, g.out_size, input.dim() - 2),
                     input.options().memory_format(format));
  if (y.numel() == 0) return y;
  const auto b = bias.has_value() && bias->defined() ? bias->contiguous() : at::Tensor();
  if (depthwise_supported(g, channels_last)) {
    depthwise_conv(g, x, weight, b, y, channels_last);
  } else {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, input.scalar_type(), "fastpad_conv_cpu", [&] {
      if (channels_last) {
        gemm_conv_nhwc<scalar_t>(g, x, weight, b, y);
      } else {
        phase_plane_conv_nchw<scalar_t>(g, x, weight, b, y);
      }
    });
  }
  return y;
}

}  // namespace

TORCH_LIBRARY_IMPL(fastpad, CPU, m) {
  m.impl("conv", &conv_cpu);
}

}  // namespace fastpad::cpu
