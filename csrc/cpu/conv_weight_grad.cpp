// fastpad::conv_weight_grad on CPU: gw[r] = sum_o grad_output[o] * xpad[o*s - pad_lo + r*d] (conv's and
// conv_transpose's weight gradient). Layout: contiguous or channels_last input and grad_output; the result is
// contiguous in the weight's shape. Padding is resolved inside the fused im2col tiles, never materialised.
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

// The reduction over images and output tiles is split into a fixed number of chunks, each summing into its own
// partial gradient, then the partials are added in chunk order: bitwise reproducible for a fixed thread count.
// NCHW: partial[Cg_out, Cg_in*K] += gy[Cg_out, tile] @ cols[Cg_in*K, tile]^T;
// channels-last: partial[Cg_out, K*Cg_in] += gy[tile, Cg_out]^T @ cols[tile, K*Cg_in].
template <typename scalar_t>
at::Tensor weight_grad_gemm(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& grad_output,
                            bool channels_last) {
  using acc_t = acc_type<scalar_t>;
  const auto acc_dtype = c10::CppTypeToScalarType<acc_t>::value;
  const int64_t groups = g.groups, in_per_group = g.in_channels_per_group(),
                out_per_group = g.out_channels_per_group(), taps = g.kernel_volume();
  const int64_t reduce = in_per_group * taps;
  const auto gy_flat = flatten_positions(grad_output, channels_last);
  const TilePlan plan(g, channels_last, reduce * static_cast<int64_t>(sizeof(acc_t)));
  const int64_t work = g.batch * plan.tiles;  // (image, tile) pairs to reduce over
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), work));
  auto partial = at::zeros({chunks, groups, out_per_group, reduce}, x.options().dtype(acc_dtype));
  const scalar_t* x_data = x.const_data_ptr<scalar_t>();

  at::parallel_for(0, chunks * groups, 1, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> cols(reduce * plan.buffer_positions());
    for (int64_t item = begin; item < end; ++item) {
      const int64_t chunk = item / groups, group = item % groups;
      auto acc = partial[chunk][group];
      for (int64_t job = chunk * work / chunks; job < (chunk + 1) * work / chunks; ++job) {
        const int64_t n = job / plan.tiles;
        const auto [unit_begin, unit_end, pixel_begin, tile_pixels] = plan.tile(job % plan.tiles);
        if (channels_last) {
          im2col_nhwc(g, x_data + n * g.in_volume() * g.in_channels, group, unit_begin, unit_end, cols.data());
          const auto gy = gy_flat[n].narrow(0, pixel_begin, tile_pixels).narrow(1, group * out_per_group, out_per_group);
          acc.addmm_(gy.to(acc_dtype).t(), wrap_buffer(cols.data(), {tile_pixels, reduce}));
        } else {
          im2col_nchw(g, x_data + (n * g.in_channels + group * in_per_group) * g.in_volume(), unit_begin, unit_end,
                      cols.data());
          const auto gy = gy_flat[n].narrow(0, group * out_per_group, out_per_group).narrow(1, pixel_begin, tile_pixels);
          acc.addmm_(gy.to(acc_dtype), wrap_buffer(cols.data(), {reduce, tile_pixels}).t());
        }
      }
    }
  });

  const auto total = partial.sum(0);
  if (channels_last) {
    // [G, Cg_out, K, Cg_in] -> [G * Cg_out, Cg_in, K]
    return total.view({groups * out_per_group, taps, in_per_group}).transpose(1, 2);
  }
  return total.view({groups * out_per_group, in_per_group, taps});
}

at::Tensor conv_weight_grad_cpu(const at::Tensor& input, const at::Tensor& grad_output, at::IntArrayRef weight_shape,
                                at::IntArrayRef stride, at::IntArrayRef pad_lo, at::IntArrayRef dilation,
                                int64_t groups, c10::string_view padding_mode) {
  // The ATen calls inside the kernel work on plain tensors: autograd is this op's own registration.
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  const ConvGeometry g = conv_weight_grad_geometry(input, grad_output, weight_shape, stride, pad_lo, dilation, groups,
                                                   padding_mode);
  const auto format = output_memory_format(input);
  const bool channels_last = format != at::MemoryFormat::Contiguous;
  if (g.batch == 0) return at::zeros(weight_shape, input.options());
  const auto x = input.contiguous(format);
  const auto gy = grad_output.contiguous(format);
  at::Tensor grad;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, input.scalar_type(), "fastpad_conv_weight_grad_cpu", [&] {
    grad = depthwise_supported(g, channels_last) ? depthwise_weight_grad(g, x, gy, channels_last)
                                                 : weight_grad_gemm<scalar_t>(g, x, gy, channels_last);
  });
  // A fresh tensor, so the strides are the canonical contiguous ones even where a dim has size 1.
  auto result = at::empty(weight_shape, input.options());
  result.copy_(grad.reshape(weight_shape));
  return result;
}

}  // namespace

TORCH_LIBRARY_IMPL(fastpad, CPU, m) {
  m.impl("conv_weight_grad", &conv_weight_grad_cpu);
}

}  // namespace fastpad::cpu
