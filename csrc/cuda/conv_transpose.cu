// fastpad::conv_transpose on CUDA: y[p] = bias + sum of x[i] * w[r] over i*s + r*d - crop_lo = p, 1-3 spatial dims;
// with a padding mode other than zeros, also over the padded positions q that read p (the adjoint of conv).
// Layout: any input strides, read in place; the output keeps the input's format. No zero-inserted or padded copy.
// Phase decomposition: the outputs p = phase + j*s of one stride phase are reached by one fixed residue class of taps,
// so each phase is an implicit GEMM over exactly those taps (cuda/implicit_gemm.cuh), never over inserted zeros.
// Fewer than kPhaseGemmMinChannels input channels per group (depthwise, and narrow grouped layers) run a direct
// gather instead, which also folds padded positions back. Stride 1 in zeros mode is a conv (stride_one_transpose_as_conv
// in geometry.h), which 16-bit channels-last inputs on sm_80+ run on the pipelined tensor-core GEMM
// (cuda/pipelined_gemm.cuh) with the weight the binding reorders.
// After the phase GEMMs (or the pipelined conv), a gather pass folds padded positions back (modes other than zeros)
// and, for a weight with an inf or NaN, recomputes the outputs where a GEMM multiplied it by a zero loaded outside x. Torch-free: the binding
// (cuda/bindings.cpp) picks the path and computes the weight_finite flag.
#include "cuda/implicit_gemm.cuh"
#include "cuda/launchers.h"
#include "cuda/pipelined_gemm.cuh"

namespace fastpad::cuda {
namespace {

// One thread per y element, in y's memory order: transpose_gather_element's pass. `weight_finite` (a device flag,
// read without a host sync) says whether the weight is all finite; nullptr for the full pass, which needs no flag.
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads, 1)  // the gather's per-dimension tap ranges spill at 128 registers
    transpose_gather_kernel(const ConvGeometry g, const scalar_t* x, const Strides xs, const scalar_t* w,
                            const scalar_t* bias, scalar_t* y, const Strides ys, bool channels_last, GatherPass pass,
                            const bool* weight_finite) {
  const bool finite = weight_finite == nullptr || *weight_finite;
  if (pass == GatherPass::AfterPhaseGemm && g.mode == PaddingMode::Zeros && finite) return;  // nothing to complete
  const int64_t total = g.batch * g.conv_in_channels * g.conv_in_volume();
  for (int64_t index = blockIdx.x * int64_t{kThreads} + threadIdx.x; index < total;
       index += int64_t{gridDim.x} * kThreads) {
    transpose_gather_element(g, x, xs, w, bias, y, ys, channels_last, pass, finite, index);
  }
}

template <typename scalar_t>
void launch_conv_transpose_typed(const ConvTransposeLaunch& a) {
  const ConvGeometry& g = a.g;
  const auto* x = static_cast<const scalar_t*>(a.x);
  const auto* w = static_cast<const scalar_t*>(a.w);
  const auto* bias = static_cast<const scalar_t*>(a.bias);
  auto* y = static_cast<scalar_t*>(a.y);
  const auto gather = [&](GatherPass pass, const bool* weight_finite) {
    launch(a.stream, transpose_gather_kernel<scalar_t>,
           grid_for(g.batch * g.conv_in_channels * g.conv_in_volume(), kThreads), 0, g, x, a.xs, w, bias, y, a.ys,
           a.channels_last, pass, weight_finite);
  };
  switch (a.path) {
    case ConvTransposePath::CudaPipelinedGemm:
      if constexpr (is_16_bit<scalar_t>) {
        if (a.weight_finite == nullptr || a.conv_weight == nullptr) {
          throw std::invalid_argument("fastpad conv_transpose: the pipelined GEMM needs weight_finite and conv_weight");
        }
        run_pipelined_conv(a.stream, stride_one_transpose_as_conv(g), x, a.xs,
                           static_cast<const scalar_t*>(a.conv_weight), bias, y, a.ys);
        gather(GatherPass::AfterPhaseGemm, a.weight_finite);  // outputs where an inf or NaN met a padding zero
        return;
      }
      break;
    case ConvTransposePath::CudaDirectGather:
      gather(GatherPass::Full, nullptr);
      return;
    case ConvTransposePath::CudaPhaseGemm:
    case ConvTransposePath::CudaPhaseGemmFold:
      if (a.weight_finite == nullptr) {
        throw std::invalid_argument("fastpad conv_transpose: the phase GEMMs need the weight_finite flag");
      }
      run_implicit_gemm(a.stream, make_phase_problem(g, x, a.xs, w, bias, y, a.ys));
      gather(GatherPass::AfterPhaseGemm, a.weight_finite);
      return;
    default:
      break;
  }
  throw std::invalid_argument(std::string("fastpad conv_transpose: no CUDA kernel for path ") + path_name(a.path) +
                              " in this dtype");
}

}  // namespace

void launch_conv_transpose(const ConvTransposeLaunch& a) {
  dispatch_scalar_type(a.dtype,
                       [&](auto* type) { launch_conv_transpose_typed<std::remove_pointer_t<decltype(type)>>(a); });
}

}  // namespace fastpad::cuda
