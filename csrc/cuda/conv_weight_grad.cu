// fastpad::conv_weight_grad on CUDA: gw[r] = sum over images and outputs o of gy[o] * xpad[o*s - pad_lo + r*d].
// Layout: any strides for input and grad_output, read in place; the result is a contiguous weight_shape tensor.
// Padding is never materialised: each tap reads the padded input through source_index. The reduction order is fixed
// (no atomics), so results are deterministic: depthwise layers reduce per (channel, tap) in one block; the others run
// a split-K implicit GEMM (cuda/implicit_gemm.cuh) whose per-split partial sums are then added in a fixed order.
#include <ATen/Dispatch.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "conv_params.h"
#include "cuda/implicit_gemm.cuh"

namespace fastpad::cuda {
namespace {

// grad[i] = sum over s of partial[s, i], in order.
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    sum_splits_kernel(const acc_type<scalar_t>* partial, int64_t splits, int64_t total, scalar_t* grad) {
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < total; i += int64_t{gridDim.x} * kThreads) {
    acc_type<scalar_t> sum = 0;
    for (int64_t s = 0; s < splits; ++s) sum += partial[s * total + i];
    grad[i] = static_cast<scalar_t>(sum);
  }
}

// Depthwise: one block per (output channel, tap) reduces gy * xpad over images and output positions
// (depthwise_weight_grad_term), each thread over a fixed stride of them, then over its threads as a tree.
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    depthwise_weight_grad_kernel(const ConvGeometry g, const scalar_t* x, const Strides xs, const scalar_t* gy,
                                 const Strides gys, scalar_t* grad) {
  using acc_t = acc_type<scalar_t>;
  __shared__ acc_t partial[kThreads];
  const int64_t taps = g.kernel_volume(), reduce = g.batch * g.out_volume(), items = g.out_channels * taps;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    int64_t r[kMaxSpatial];
    const int64_t channel = unflatten(item, g.kernel, r);
    acc_t sum = 0;
    for (int64_t k = threadIdx.x; k < reduce; k += kThreads) {
      sum += depthwise_weight_grad_term(g, x, xs, gy, gys, channel, r, k);
    }
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int width = kThreads / 2; width > 0; width /= 2) {
      if (threadIdx.x < width) partial[threadIdx.x] += partial[threadIdx.x + width];
      __syncthreads();
    }
    if (threadIdx.x == 0) grad[item] = static_cast<scalar_t>(partial[0]);
    __syncthreads();  // partial[0] is read before the next item overwrites it
  }
}

at::Tensor conv_weight_grad_cuda(const at::Tensor& input, const at::Tensor& grad_output, at::IntArrayRef weight_shape,
                                 at::IntArrayRef stride, at::IntArrayRef pad_lo, at::IntArrayRef dilation,
                                 int64_t groups, c10::string_view padding_mode) {
  // The ATen calls inside the kernel work on plain tensors: autograd is this op's own registration.
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  const ConvGeometry g = conv_weight_grad_geometry(input, grad_output, weight_shape, stride, pad_lo, dilation, groups,
                                                   padding_mode);
  const c10::cuda::CUDAGuard device_guard(input.device());
  if (g.batch == 0) return at::zeros(weight_shape, input.options());
  auto grad = at::empty(weight_shape, input.options());  // contiguous: [C_out, C_in / groups * taps]
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, input.scalar_type(), "fastpad_conv_weight_grad_cuda", [&] {
    using acc_t = acc_type<scalar_t>;
    const scalar_t* x_data = input.const_data_ptr<scalar_t>();
    const scalar_t* gy_data = grad_output.const_data_ptr<scalar_t>();
    const Strides xs = strides_of(input), gys = strides_of(grad_output);
    if (g.in_channels_per_group() == 1) {
      launch(depthwise_weight_grad_kernel<scalar_t>, grid_for(grad.numel()), 0, g, x_data, xs, gy_data, gys,
             grad.mutable_data_ptr<scalar_t>());
      return;
    }
    auto problem = make_weight_grad_problem(g, x_data, xs, gy_data, gys);
    auto partial =
        at::empty({problem.splits, grad.numel()}, input.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
    problem.partial = partial.mutable_data_ptr<acc_t>();
    run_implicit_gemm(problem);
    launch(sum_splits_kernel<scalar_t>, grid_for(grad.numel(), kThreads), 0, partial.const_data_ptr<acc_t>(),
           problem.splits, grad.numel(), grad.mutable_data_ptr<scalar_t>());
  });
  return grad;
}

}  // namespace

TORCH_LIBRARY_IMPL(fastpad, CUDA, m) {
  m.impl("conv_weight_grad", &conv_weight_grad_cuda);
}

}  // namespace fastpad::cuda
