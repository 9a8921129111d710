// fastpad::conv_transpose on CUDA: y[p] = bias + sum of x[i] * w[r] over i*s + r*d - crop_lo = p, 1-3 spatial dims;
// with a padding mode other than zeros, also over the padded positions q that read p (the adjoint of conv).
// Layout: any input strides, read in place; the output keeps the input's format. No zero-inserted or padded copy.
// Phase decomposition: the outputs p = phase + j*s of one stride phase are reached by one fixed residue class of taps,
// so each phase is an implicit GEMM over exactly those taps (cuda/implicit_gemm.cuh), never over inserted zeros.
// Fewer than kPhaseGemmMinChannels input channels per group (depthwise, and narrow grouped layers) run a direct
// gather instead, which also folds padded positions back. Each stride phase is itself a conv
// (transpose_phase_as_conv in geometry.h), which channels-last inputs in 16-bit (or float32 with TF32) on sm_80+ run
// on the pipelined tensor-core GEMM (cuda/pipelined_gemm.cuh), one launch per phase, with the weights the binding
// reorders. Depthwise layers in zeros mode whose channels come in 16-byte vectors (channels_last, sm_80+) run the
// convs their stride phases are on the channel-vector kernel (cuda/depthwise_vectors.cuh); 1-d depthwise layers at
// stride 1 in zeros mode run the conv their one stride phase is on the rows kernel (cuda/depthwise_rows.cuh); both
// leave taps outside x out of the sums.
// After the phase GEMMs (or the pipelined phases), a gather pass folds padded positions back (modes other than zeros)
// and, for a weight with an inf or NaN, recomputes the outputs where a GEMM multiplied it by a zero loaded outside x.
// Torch-free: the binding (cuda/bindings.cpp) picks the path and computes the weight_finite flag.
#include "cuda/depthwise_rows.cuh"
#include "cuda/depthwise_vectors.cuh"
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

// run(phase, phase_weight, phase_y, phase_ys) for each stride phase of g that reaches a y position: the conv the phase
// is (transpose_phase_as_conv), its weight (the phases' weights lie one after the other in a.kernel_weight, as the
// binding's phase_weights packs them), y at the phase's first position and y's strides a stride apart.
template <typename scalar_t, typename Run>
void for_each_phase(const ConvGeometry& g, const ConvTransposeLaunch& a, Run run) {
  const auto* phase_weight = static_cast<const scalar_t*>(a.kernel_weight);
  auto* y = static_cast<scalar_t*>(a.y);
  for (int64_t phase = 0; phase < transpose_phase_count(g); ++phase) {
    const TransposePhase t = transpose_phase_as_conv(g, phase);
    Strides phase_ys = a.ys;
    int64_t y_offset = 0;
    for (int d = 0; d < kMaxSpatial; ++d) {
      y_offset += t.y_first[d] * a.ys.spatial[d];
      phase_ys.spatial[d] *= g.stride[d];
    }
    if (t.conv.conv_out_volume() > 0) run(t.conv, phase_weight, y + y_offset, phase_ys);
    phase_weight += t.conv.conv_out_channels * t.conv.conv_in_channels_per_group() * t.conv.kernel_volume();
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
    // In zeros mode the pass after the phase GEMMs has work only for a weight with an inf or NaN, which the kernel
    // reads from the device flag: enough blocks to fill the GPU once, which return at once for a finite weight (a
    // block per 256 y elements, 1M blocks for the U-Net's k4 s2 layer at batch 256, took 1.7 ms on an H200 to return).
    const bool completion_only = pass == GatherPass::AfterPhaseGemm && g.mode == PaddingMode::Zeros;
    const int64_t elements = g.batch * g.conv_in_channels * g.conv_in_volume();
    launch(a.stream, transpose_gather_kernel<scalar_t>,
           completion_only ? grid_for(std::min(ceil_div(elements, int64_t{kThreads}), kPipelineTargetBlocks))
                           : grid_for(elements, kThreads),
           0, g, x, a.xs, w, bias, y, a.ys, a.channels_last, pass, weight_finite);
  };
  switch (a.path) {
    case ConvTransposePath::CudaDepthwiseVectors:
      // The vector kernel runs the conv each stride phase is, on the phase's y positions, taps outside x skipped.
      for_each_phase<scalar_t>(g, a, [&](const ConvGeometry& phase, const scalar_t* phase_weight, scalar_t* phase_y,
                               const Strides& phase_ys) {
        const DepthwiseVectorPlan plan = depthwise_vector_plan(phase, sizeof(scalar_t));
        launch(a.stream, depthwise_vectors_kernel<scalar_t, /*kSkipTapsOutside=*/true>,
               grid_for(plan.items, kThreads), 0, phase, plan, x, a.xs, phase_weight, bias, phase_y, phase_ys);
      });
      return;
    case ConvTransposePath::CudaDepthwiseRows: {
      // At stride 1 the one stride phase covers every y position, from the first, with the flipped weight.
      const ConvGeometry phase = transpose_phase_as_conv(g, 0).conv;
      const RowPlan plan = row_plan(phase, sizeof(acc_type<scalar_t>));
      launch(a.stream, depthwise_rows_kernel<scalar_t, /*kSkipTapsOutside=*/true>, grid_for(plan.tiles),
             plan.span * sizeof(acc_type<scalar_t>), phase, plan, x, a.xs,
             static_cast<const scalar_t*>(a.kernel_weight), bias, y, a.ys);
      return;
    }
    case ConvTransposePath::CudaPipelinedGemm:
      if constexpr (kPipelinedType<scalar_t>) {
        if (a.weight_finite == nullptr || a.kernel_weight == nullptr) {
          throw std::invalid_argument(
              "fastpad conv_transpose: the pipelined GEMM needs weight_finite and kernel_weight");
        }
        for_each_phase<scalar_t>(g, a, [&](const ConvGeometry& phase, const scalar_t* phase_weight, scalar_t* phase_y,
                                 const Strides& phase_ys) {
          run_pipelined_conv(a.stream, phase, x, a.xs, phase_weight, bias, phase_y, phase_ys);
        });
        gather(GatherPass::AfterPhaseGemm, a.weight_finite);  // padding folds; outputs where inf or NaN met a zero
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
