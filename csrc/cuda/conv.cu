// fastpad::conv on CUDA: y[o] = bias + sum_r w[r] * xpad[o*s - pad_lo + r*d], 1-3 spatial dims.
// Layout: any input strides (contiguous, channels_last, strided), read in place; the output keeps the input's format.
// Padding is never materialised: every tap in the padding reads zero or its reflected/clamped/wrapped source.
// Depthwise layers (one input channel per group) run direct kernels, through an input patch with its halo in shared
// memory for contiguous layouts; every other layer is an implicit GEMM (cuda/implicit_gemm.cuh).
#include <ATen/Dispatch.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "conv_params.h"
#include "cuda/implicit_gemm.cuh"

namespace fastpad::cuda {
namespace {

// Depthwise, contiguous layouts: a block computes one tile of an output plane (one thread per output). Per depth tap,
// it first stages the input patch the tile reads, halo included and padding resolved, in shared memory; every
// (kh, kw) tap then reads it there (cuda/problems.h has the index math).
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    depthwise_halo_kernel(const ConvGeometry g, const HaloPlan plan, const scalar_t* x, const Strides xs,
                          const scalar_t* w, const scalar_t* bias, scalar_t* y, const Strides ys) {
  using acc_t = acc_type<scalar_t>;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  acc_t* patch = reinterpret_cast<acc_t*>(shared_bytes);
  const int ty = threadIdx.x / plan.tile_w, tx = threadIdx.x % plan.tile_w;
  for (int64_t item = blockIdx.x; item < plan.tiles; item += gridDim.x) {
    const HaloItem it = halo_item(g, plan, item);
    acc_t sum = bias != nullptr ? load<acc_t>(bias, it.c) : acc_t(0);
    for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
      const int64_t id = g.tap_source(0, it.od, kd);
      if (id < 0) continue;  // the whole depth slice is zero padding (the same for the whole block)
      __syncthreads();       // every thread is done reading the previous patch
      for (int e = threadIdx.x; e < plan.patch_h * plan.patch_w; e += kThreads) {
        patch[e] = halo_patch_element(g, plan, x, xs, it, id, e);
      }
      __syncthreads();
      sum += halo_patch_taps(g, plan, w, patch, it.c, kd, ty, tx);
    }
    halo_store(g, it, ty, tx, sum, y, ys);
  }
}

// One thread per output element, in the output's memory order (consecutive threads write consecutive addresses).
// Serves channels_last depthwise layers and depthwise layers whose patch would not fit in shared memory.
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    direct_conv_kernel(const ConvGeometry g, const scalar_t* x, const Strides xs, const scalar_t* w,
                       const scalar_t* bias, scalar_t* y, const Strides ys, bool channels_last) {
  const int64_t total = g.batch * g.out_channels * g.out_volume();
  for (int64_t index = blockIdx.x * int64_t{kThreads} + threadIdx.x; index < total;
       index += int64_t{gridDim.x} * kThreads) {
    direct_conv_element(g, x, xs, w, bias, y, ys, channels_last, index);
  }
}

at::Tensor conv_cuda(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                     at::IntArrayRef stride, at::IntArrayRef pad_lo, at::IntArrayRef pad_hi, at::IntArrayRef dilation,
                     int64_t groups, c10::string_view padding_mode) {
  // The ATen calls inside the kernel work on plain tensors: autograd is this op's own registration.
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  const ConvGeometry g = conv_geometry(input, weight, bias, stride, pad_lo, pad_hi, dilation, groups, padding_mode);
  const c10::cuda::CUDAGuard device_guard(input.device());
  const auto format = output_memory_format(input);
  auto y = at::empty(tensor_shape(g.batch, g.out_channels, g.out_size, input.dim() - 2),
                     input.options().memory_format(format));
  if (y.numel() == 0) return y;
  const auto w = weight.contiguous();
  const auto b = bias.has_value() && bias->defined() ? bias->contiguous() : at::Tensor();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, input.scalar_type(), "fastpad_conv_cuda", [&] {
    const scalar_t* x_data = input.const_data_ptr<scalar_t>();
    const scalar_t* w_data = w.const_data_ptr<scalar_t>();
    const scalar_t* bias_data = b.defined() ? b.const_data_ptr<scalar_t>() : nullptr;
    scalar_t* y_data = y.mutable_data_ptr<scalar_t>();
    const Strides xs = strides_of(input), ys = strides_of(y);
    const bool channels_last = format != at::MemoryFormat::Contiguous;
    if (g.in_channels_per_group() != 1) {
      run_implicit_gemm(make_conv_problem(g, x_data, xs, w_data, bias_data, y_data, ys));
      return;
    }
    const HaloPlan plan = halo_plan(g, sizeof(acc_type<scalar_t>));
    if (!channels_last && plan.fits) {
      const size_t patch_bytes = size_t(plan.patch_h) * plan.patch_w * sizeof(acc_type<scalar_t>);
      launch(depthwise_halo_kernel<scalar_t>, grid_for(plan.tiles), patch_bytes, g, plan, x_data, xs, w_data,
             bias_data, y_data, ys);
    } else {
      launch(direct_conv_kernel<scalar_t>, grid_for(y.numel(), kThreads), 0, g, x_data, xs, w_data, bias_data, y_data,
             ys, channels_last);
    }
  });
  return y;
}

}  // namespace

TORCH_LIBRARY_IMPL(fastpad, CUDA, m) {
  m.impl("conv", &conv_cuda);
}

}  // namespace fastpad::cuda
