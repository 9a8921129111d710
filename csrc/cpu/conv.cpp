// fastpad::conv on CPU: y[o] = bias + sum_r w[r] * xpad[o*s - pad_lo + r*d], 1-3 spatial dims.
// Layout: contiguous N,C,spatial or channels_last (4-d/5-d); the output keeps the input's memory format.
// Padding is never materialised: taps in the padding read zero or their reflected/clamped/wrapped source.
// Depthwise problems go to the direct kernels of depthwise.cpp, the rest to a fused im2col + GEMM.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <vector>

#include "conv_params.h"
#include "cpu/depthwise.h"
#include "cpu/gemm_tiles.h"

namespace fastpad::cpu {
namespace {

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
  const auto bias_acc = bias.defined() ? bias.to(acc_dtype).view({groups, out_per_group}) : at::Tensor();
  const auto w_acc = channels_last ? weight.to(acc_dtype)
                                         .reshape({groups, out_per_group, in_per_group, taps})
                                         .permute({0, 3, 2, 1})
                                         .contiguous()
                                         .view({groups, reduce, out_per_group})
                                   : weight.to(acc_dtype).contiguous().view({groups, out_per_group, reduce});
  const auto y_flat = flatten_positions(y, channels_last);
  const TilePlan plan(g, channels_last, reduce * static_cast<int64_t>(sizeof(acc_t)));
  const scalar_t* x_data = x.const_data_ptr<scalar_t>();

  at::parallel_for(0, g.batch * groups * plan.tiles, 1, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> cols(reduce * plan.buffer_positions());
    for (int64_t item = begin; item < end; ++item) {
      const int64_t group = (item / plan.tiles) % groups, n = item / (plan.tiles * groups);
      const auto [unit_begin, unit_end, pixel_begin, tile_pixels] = plan.tile(item % plan.tiles);
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
  auto y = at::empty(tensor_shape(g.batch, g.out_channels, g.out_size, input.dim() - 2),
                     input.options().memory_format(format));
  if (y.numel() == 0) return y;
  const auto b = bias.has_value() && bias->defined() ? bias->contiguous() : at::Tensor();
  if (depthwise_supported(g, channels_last)) {
    depthwise_conv(g, x, weight, b, y, channels_last);
  } else {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, input.scalar_type(), "fastpad_conv_cpu",
                                    [&] { gemm_conv<scalar_t>(g, x, weight, b, y, channels_last); });
  }
  return y;
}

}  // namespace

TORCH_LIBRARY_IMPL(fastpad, CPU, m) {
  m.impl("conv", &conv_cpu);
}

}  // namespace fastpad::cpu
