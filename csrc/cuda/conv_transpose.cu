// fastpad::conv_transpose on CUDA: y[p] = bias + sum of x[i] * w[r] over i*s + r*d - crop_lo = p, 1-3 spatial dims;
// with a padding mode other than zeros, also over the padded positions q that read p (the adjoint of conv).
// Layout: any input strides, read in place; the output keeps the input's format. No zero-inserted or padded copy.
// Phase decomposition: the outputs p = phase + j*s of one stride phase are reached by one fixed residue class of taps,
// so each phase is an implicit GEMM over exactly those taps (cuda/implicit_gemm.cuh), never over inserted zeros.
// Few input channels per group (depthwise) run a direct gather instead, which also folds padded positions back.
// After the phase GEMMs, a gather pass folds padded positions back (modes other than zeros) and, for a weight with an
// inf or NaN, recomputes the outputs where a GEMM multiplied it by a zero loaded outside x.
#include <ATen/Dispatch.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/all.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/isfinite.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "conv_params.h"
#include "cuda/implicit_gemm.cuh"

namespace fastpad::cuda {
namespace {

// One thread per y element, in y's memory order: transpose_gather_element's pass. `weight_finite` (a device flag,
// read without a host sync) says whether the weight is all finite; nullptr for the full pass, which needs no flag.
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    transpose_gather_kernel(const ConvGeometry g, const scalar_t* x, const Strides xs, const scalar_t* w,
                            const scalar_t* bias, scalar_t* y, const Strides ys, bool channels_last, GatherPass pass,
                            const bool* weight_finite) {
  const bool finite = weight_finite == nullptr || *weight_finite;
  if (pass == GatherPass::AfterPhaseGemm && g.mode == PaddingMode::Zeros && finite) return;  // nothing to complete
  const int64_t total = g.batch * g.in_channels * g.in_volume();
  for (int64_t index = blockIdx.x * int64_t{kThreads} + threadIdx.x; index < total;
       index += int64_t{gridDim.x} * kThreads) {
    transpose_gather_element(g, x, xs, w, bias, y, ys, channels_last, pass, finite, index);
  }
}

at::Tensor conv_transpose_cuda(const at::Tensor& input, const at::Tensor& weight,
                               const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                               at::IntArrayRef crop_lo, at::IntArrayRef out_size, at::IntArrayRef dilation,
                               int64_t groups, c10::string_view padding_mode) {
  // The ATen calls inside the kernel work on plain tensors: autograd is this op's own registration.
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  const ConvGeometry g =
      conv_transpose_geometry(input, weight, bias, stride, crop_lo, out_size, dilation, groups, padding_mode);
  const c10::cuda::CUDAGuard device_guard(input.device());
  const auto format = output_memory_format(input);
  const bool channels_last = format != at::MemoryFormat::Contiguous;
  auto y = at::empty(tensor_shape(g.batch, g.in_channels, g.in_size, input.dim() - 2),
                     input.options().memory_format(format));
  if (y.numel() == 0) return y;
  const auto w = weight.contiguous();
  const auto b = bias.has_value() && bias->defined() ? bias->contiguous() : at::Tensor();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, input.scalar_type(), "fastpad_conv_transpose_cuda", [&] {
    const scalar_t* x_data = input.const_data_ptr<scalar_t>();
    const scalar_t* w_data = w.const_data_ptr<scalar_t>();
    const scalar_t* bias_data = b.defined() ? b.const_data_ptr<scalar_t>() : nullptr;
    scalar_t* y_data = y.mutable_data_ptr<scalar_t>();
    const Strides xs = strides_of(input), ys = strides_of(y);
    const auto gather = [&](GatherPass pass, const bool* weight_finite) {
      launch(transpose_gather_kernel<scalar_t>, grid_for(y.numel(), kThreads), 0, g, x_data, xs, w_data, bias_data,
             y_data, ys, channels_last, pass, weight_finite);
    };
    if (g.out_channels_per_group() < kPhaseGemmMinChannels) {
      gather(GatherPass::Full, nullptr);
      return;
    }
    run_implicit_gemm(make_phase_problem(g, x_data, xs, w_data, bias_data, y_data, ys));
    const at::Tensor weight_finite = at::isfinite(w).all();  // stays on the device: no sync, CUDA graphs capture it
    gather(GatherPass::AfterPhaseGemm, weight_finite.const_data_ptr<bool>());
  });
  return y;
}

}  // namespace

TORCH_LIBRARY_IMPL(fastpad, CUDA, m) {
  m.impl("conv_transpose", &conv_transpose_cuda);
}

}  // namespace fastpad::cuda
