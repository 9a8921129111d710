// fastpad::conv_transpose on CUDA: y[p] = bias + sum of x[i] * w[r] over i*s + r*d - crop_lo = p, 1-3 spatial dims;
// with a padding mode other than zeros, also over the padded positions q that read p (the adjoint of conv).
// Layout: any input strides, read in place; the output keeps the input's format. No zero-inserted or padded copy.
// Phase decomposition: the outputs p = phase + j*s of one stride phase are reached by one fixed residue class of taps,
// so each phase is an implicit GEMM over exactly those taps (cuda/implicit_gemm.cuh), never over inserted zeros.
// Fewer than kPhaseGemmMinChannels input channels per group (depthwise, and narrow grouped layers) run a direct
// gather instead, which also folds padded positions back. Each stride phase is itself a conv
// (transpose_phase_as_conv in geometry.h), which channels-last inputs in 16-bit (or float32 with TF32) on sm_80+ run
// on the pipelined tensor-core GEMM (cuda/pipelined_gemm.cuh), one launch per phase, with the weights the binding
// reorders. Depthwise layers in zeros mode whose
// channels come in 16-byte vectors (channels_last, sm_80+) gather through an x patch in shared memory, 16 bytes at a
// time (cuda/depthwise_vectors.cuh); 1-d depthwise layers at stride 1 in zeros mode run the conv their one stride phase
// is on the rows kernel (cuda/depthwise_rows.cuh), taps outside x left out of the sums.
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

// Depthwise conv_transpose (one y channel per x channel) in zeros mode, channels in aligned 16-byte vectors: the
// adjoint of conv.cu's depthwise_vectors_kernel. A block computes a tile of y positions for kDepthwiseVectorsPerBlock
// channel vectors. Per depth tap reaching its y depth it copies the patch of x the tile reads into shared memory with
// 16-byte cp.async; each thread then sums, for one y position and one vector of channels, x[(p + pad_lo - r * d) / s]
// * w[r] over the taps r whose quotient is exact and lands inside x. Taps that land outside x are skipped, not
// multiplied by a zero, so an inf or NaN weight gives what torch gives.
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    depthwise_transpose_vectors_kernel(const ConvGeometry g, const DepthwiseVectorPlan plan, const scalar_t* x,
                                       const Strides xs, const scalar_t* w, const scalar_t* bias, scalar_t* y,
                                       const Strides ys) {
  using acc_t = acc_type<scalar_t>;
  constexpr int kLanes = ChannelVector<scalar_t>::kLanes;
  auto* patch = reinterpret_cast<ChannelVector<scalar_t>*>(dynamic_shared_memory());
  const int64_t channels = g.conv_in_channels;
  const auto [vector, ty, tx] = vector_thread(plan);
  // x position i along dim d, or -1 outside x.
  const auto inside_x = [&](int d, int64_t i) -> int64_t { return i >= 0 && i < g.conv_out_sizes[d] ? i : -1; };
  // The x position tap r of y position p reads along dim d, or -1 when it reads none (not exact, or outside x).
  const auto x_position = [&](int d, int64_t p, int64_t r) -> int64_t {
    const int64_t offset = p + g.pad_lo[d] - r * g.dilation[d];
    const int64_t i = floor_div(offset, g.stride[d]);
    return i * g.stride[d] == offset ? inside_x(d, i) : -1;
  };
  for (int64_t item = blockIdx.x; item < plan.tiles; item += gridDim.x) {
    const DepthwiseVectorItem it = depthwise_vector_item(g.conv_in_sizes, plan, item);
    const int64_t c0 = (it.channel_block * kDepthwiseVectorsPerBlock + vector) * kLanes;  // this thread's channels
    // The first x row and column the tile reads: ceil((row0 + pad_lo - (k - 1) d) / s).
    const int64_t x_row0 = -floor_div(-(it.row0 + g.pad_lo[1] - (g.kernel[1] - 1) * g.dilation[1]), g.stride[1]);
    const int64_t x_col0 = -floor_div(-(it.col0 + g.pad_lo[2] - (g.kernel[2] - 1) * g.dilation[2]), g.stride[2]);
    const int64_t oh = it.row0 + ty, ow = it.col0 + tx;
    acc_t sum[kLanes];
    start_vector_sum(sum, bias, c0, channels);
    for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
      const int64_t id = x_position(0, it.od, kd);
      if (id < 0) continue;  // the same for the whole block
      copy_vector_patch(
          patch, plan, x, xs, it.n, id, it.channel_block, channels,
          [&](int64_t ph) { return inside_x(1, x_row0 + ph); }, [&](int64_t pw) { return inside_x(2, x_col0 + pw); });
      if (c0 >= channels) continue;
      for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
        const int64_t ih = x_position(1, oh, kh);
        if (ih < 0) continue;
        for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
          const int64_t iw = x_position(2, ow, kw);
          if (iw < 0) continue;
          add_vector_tap(sum, &patch[((ih - x_row0) * plan.patch_w + iw - x_col0) * kDepthwiseVectorsPerBlock + vector],
                         w + ((kd * g.kernel[1] + kh) * g.kernel[2] + kw) * channels + c0);
        }
      }
    }
    if (c0 >= channels || oh >= g.conv_in_sizes[1] || ow >= g.conv_in_sizes[2]) continue;
    store_vector_sum(y + it.n * ys.batch + it.od * ys.spatial[0] + oh * ys.spatial[1] + ow * ys.spatial[2] + c0, sum);
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
    case ConvTransposePath::CudaDepthwiseVectors: {
      const DepthwiseVectorPlan plan = depthwise_vector_plan(g, sizeof(scalar_t), /*transposed=*/true);
      const size_t patch_bytes = size_t(plan.patch_h) * plan.patch_w * kDepthwiseVectorsPerBlock * kVectorBytes;
      launch(a.stream, depthwise_transpose_vectors_kernel<scalar_t>, grid_for(plan.tiles), patch_bytes, g, plan, x,
             a.xs, static_cast<const scalar_t*>(a.kernel_weight), bias, y, a.ys);
      return;
    }
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
        // One conv per stride phase, writing the phase's y positions (a stride apart) with its own weight.
        const auto* phase_weight = static_cast<const scalar_t*>(a.kernel_weight);
        for (int64_t phase = 0; phase < transpose_phase_count(g); ++phase) {
          const TransposePhase t = transpose_phase_as_conv(g, phase);
          Strides phase_ys = a.ys;
          int64_t y_offset = 0;
          for (int d = 0; d < kMaxSpatial; ++d) {
            y_offset += t.y_first[d] * a.ys.spatial[d];
            phase_ys.spatial[d] *= g.stride[d];
          }
          if (t.conv.conv_out_volume() > 0) {
            run_pipelined_conv(a.stream, t.conv, x, a.xs, phase_weight, bias, y + y_offset, phase_ys);
          }
          phase_weight += t.conv.conv_out_channels * t.conv.conv_in_channels_per_group() * t.conv.kernel_volume();
        }
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
