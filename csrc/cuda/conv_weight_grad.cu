// fastpad::conv_weight_grad on CUDA: gw[r] = sum over images and outputs o of gy[o] * xpad[o*s - pad_lo + r*d].
// Layout: any strides for input and grad_output, read in place; the result is a contiguous weight_shape tensor.
// Padding is never materialised: each tap reads the padded input through source_index. The reduction order is fixed
// (no atomics), so results are deterministic: depthwise layers with channel vectors sum per split of the positions into
// a workspace, added in order; other depthwise layers reduce per (channel, tap) in one block; the others run
// a split-K GEMM whose per-split partial sums, in the caller's workspace, are then added in a fixed order: the
// pipelined tensor-core GEMM (cuda/pipelined_gemm.cuh) for 16-bit (or TF32) channels-last tensors with whole 16-byte
// channel vectors on sm_80+, else the implicit GEMM (cuda/implicit_gemm.cuh). Torch-free: the binding (cuda/bindings.cpp) picks the path and allocates the workspace.
#include "cuda/implicit_gemm.cuh"
#include "cuda/launchers.h"
#include "cuda/pipelined_gemm.cuh"

namespace fastpad::cuda {
namespace {

// grad[i] = sum over s of partial[s, i], in order.
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
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
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    depthwise_weight_grad_kernel(const ConvGeometry g, const scalar_t* x, const Strides xs, const scalar_t* gy,
                                 const Strides gys, scalar_t* grad) {
  using acc_t = acc_type<scalar_t>;
  __shared__ acc_t partial[kThreads];
  const int64_t taps = g.kernel_volume(), reduce = g.batch * g.conv_out_volume(), items = g.conv_out_channels * taps;
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

// r = the tap after r (kd, kh, kw) in row-major order over `kernel`.
__device__ __forceinline__ void step_tap(int (&r)[kMaxSpatial], const int64_t* kernel) {
  if (++r[2] < kernel[2]) return;
  r[2] = 0;
  if (++r[1] < kernel[1]) return;
  r[1] = 0;
  ++r[0];
}

// Depthwise, x and grad_output in channel vectors (DepthwiseGradVectorPlan in cuda/problems.h): each thread sums its
// channel vector's products over its positions of one split, for a group of taps at once; then the
// block adds its slots' sums per (channel, tap), slot by slot, into the split's row of the workspace.
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    depthwise_weight_grad_vectors_kernel(const ConvGeometry g, const DepthwiseGradVectorPlan plan, const scalar_t* x,
                                         const Strides xs, const scalar_t* gy, const Strides gys,
                                         const PositionSteps steps, const InteriorOutputs interior_outputs,
                                         acc_type<scalar_t>* partial) {
  using acc_t = acc_type<scalar_t>;
  using Vector = ChannelVector<scalar_t>;
  constexpr int kLanes = Vector::kLanes, kTaps = weight_grad_vector_taps(sizeof(scalar_t));
  __shared__ acc_t slot_sums[kThreads * kLanes];
  __shared__ int64_t tap_offsets[kTaps];
  const int64_t taps = g.kernel_volume(), channels = g.conv_out_channels, positions = g.batch * g.conv_out_volume();
  const int vector = static_cast<int>(threadIdx.x) % plan.block_vectors;
  const int slot = static_cast<int>(threadIdx.x) / plan.block_vectors;
  for (int64_t item = blockIdx.x; item < plan.items(); item += gridDim.x) {
    const int64_t vector_block = item % plan.vector_blocks, rest = item / plan.vector_blocks;
    const int64_t tap0 = rest % plan.tap_groups * kTaps, split = rest / plan.tap_groups;
    const int64_t c0 = (vector_block * plan.block_vectors + vector) * kLanes;
    acc_t sum[kTaps][kLanes] = {};
    // The group's first tap (kd, kh, kw), decoded once per item; the positions with a tap in the padding step to the
    // next ones in the loop below (kernel sizes fit an int), not divided out per position.
    int first_tap[kMaxSpatial];
    {
      int64_t r[kMaxSpatial];
      unflatten(tap0, g.kernel, r);
      for (int d = 0; d < kMaxSpatial; ++d) first_tap[d] = static_cast<int>(r[d]);
    }
    // x's offset from a position's corner o * stride to each tap of the group, for the positions whose taps all lie
    // inside x: the same for every thread of the block.
    if (static_cast<int>(threadIdx.x) < kTaps) {
      int64_t r[kMaxSpatial];
      unflatten(std::min(tap0 + threadIdx.x, taps - 1), g.kernel, r);
      tap_offsets[threadIdx.x] = tap_offset(g, xs, r);
    }
    __syncthreads();
    const auto accumulate = [&](int t, const Vector& dy, const scalar_t* x_tap) {
      const Vector in = load_global_16<Vector>(x_tap);
#pragma unroll
      for (int j = 0; j < kLanes; ++j) sum[t][j] += load<acc_t>(dy.lane, j) * load<acc_t>(in.lane, j);
    };
    if (slot < plan.slots && c0 < channels) {
      const int64_t end = (split + 1) * plan.split_size < positions ? (split + 1) * plan.split_size : positions;
      // This slot's positions, plan.slots apart (steps): decoded once, then moved on by adds.
      const int64_t begin = split * plan.split_size + slot;
      PositionCursor at = position_cursor(g, xs, gys, begin < end ? begin : 0);
      for (int64_t left = begin < end ? ceil_div(end - begin, plan.slots) : 0; left > 0;
           --left, at.advance(steps, g.conv_out_sizes)) {
        const Vector dy = load_global_16<Vector>(gy + at.gy + c0);
        if (at.within(interior_outputs.range)) {  // every tap inside x: its x is the corner's plus its offset
          const scalar_t* x_corner = x + at.x + c0;
#pragma unroll
          for (int t = 0; t < kTaps; ++t) {
            if (tap0 + t >= taps) break;
            accumulate(t, dy, x_corner + tap_offsets[t]);
          }
          continue;
        }
        int r[kMaxSpatial] = {first_tap[0], first_tap[1], first_tap[2]};
#pragma unroll
        for (int t = 0; t < kTaps; ++t, step_tap(r, g.kernel)) {
          if (tap0 + t >= taps) break;
          bool reads_x;
          const int64_t offset = at.x + c0 + at.padded_tap_offset(g, xs, r, reads_x);
          if (reads_x) accumulate(t, dy, x + offset);
        }
      }
    }
#pragma unroll
    for (int t = 0; t < kTaps; ++t) {
      if (tap0 + t >= taps) break;  // the same for every thread of the block
#pragma unroll
      for (int j = 0; j < kLanes; ++j) slot_sums[threadIdx.x * kLanes + j] = sum[t][j];
      __syncthreads();
      if (static_cast<int>(threadIdx.x) < plan.block_vectors * kLanes) {
        const int v = static_cast<int>(threadIdx.x) / kLanes, j = static_cast<int>(threadIdx.x) % kLanes;
        acc_t total = 0;
        for (int s = 0; s < plan.slots; ++s) total += slot_sums[(s * plan.block_vectors + v) * kLanes + j];
        const int64_t c = (vector_block * plan.block_vectors + v) * kLanes + j;
        if (c < channels) partial[(split * channels + c) * taps + tap0 + t] = total;
      }
      __syncthreads();  // slot_sums is read before the next tap overwrites it
    }
  }
}

template <typename scalar_t>
void launch_conv_weight_grad_typed(const WeightGradLaunch& a) {
  using acc_t = acc_type<scalar_t>;
  const ConvGeometry& g = a.g;
  const auto* x = static_cast<const scalar_t*>(a.x);
  const auto* gy = static_cast<const scalar_t*>(a.gy);
  auto* grad = static_cast<scalar_t*>(a.grad);
  const int64_t grad_elements = g.conv_out_channels * g.conv_in_channels_per_group() * g.kernel_volume();
  const auto add_splits = [&](int64_t splits) {  // grad = the workspace's per-split partial gradients, added in order
    launch(a.stream, sum_splits_kernel<scalar_t>, grid_for(grad_elements, kThreads), 0,
           static_cast<const acc_t*>(a.workspace), splits, grad_elements, grad);
  };
  switch (a.path) {
    case WeightGradPath::CudaDepthwiseVectors: {
      const DepthwiseGradVectorPlan plan = depthwise_grad_vector_plan(g, sizeof(scalar_t));
      launch(a.stream, depthwise_weight_grad_vectors_kernel<scalar_t>, grid_for(plan.items()), 0, g, plan, x, a.xs,
             gy, a.gys, position_steps(g, a.xs, a.gys, plan.slots), interior_outputs(g),
             static_cast<acc_t*>(a.workspace));
      add_splits(plan.splits);
      return;
    }
    case WeightGradPath::CudaDepthwiseReduction:
      launch(a.stream, depthwise_weight_grad_kernel<scalar_t>, grid_for(grad_elements), 0, g, x, a.xs, gy, a.gys,
             grad);
      return;
    case WeightGradPath::CudaSplitKGemm:
    case WeightGradPath::CudaPipelinedGemm: {
      auto problem = make_weight_grad_problem(g, x, a.xs, gy, a.gys);  // the tiles and splits of both GEMMs
      problem.partial = static_cast<acc_t*>(a.workspace);
      if (a.path == WeightGradPath::CudaSplitKGemm) {
        run_implicit_gemm(a.stream, problem);
      } else if constexpr (kPipelinedType<scalar_t>) {
        launch(a.stream, pipelined_weight_grad_kernel<scalar_t>, grid_for(problem.items()),
               weight_grad_shared_bytes<scalar_t>(),
               g, x, a.xs, gy, a.gys,
               position_steps(g, a.xs, a.gys, kWeightGradTileK<scalar_t>),
               problem.partial, problem.splits, problem.split_size);
      } else {
        break;
      }
      add_splits(problem.splits);
      return;
    }
    default:
      break;
  }
  throw std::invalid_argument(std::string("fastpad conv_weight_grad: no CUDA kernel for path ") + path_name(a.path) +
                              " in this dtype");
}

}  // namespace

int64_t weight_grad_workspace_elements(const WeightGradLaunch& a) {
  const int64_t grad_elements = a.g.conv_out_channels * a.g.conv_in_channels_per_group() * a.g.kernel_volume();
  switch (a.path) {
    case WeightGradPath::CudaDepthwiseVectors: {
      int64_t element_bytes = 0;
      dispatch_scalar_type(a.dtype, [&](auto* type) { element_bytes = sizeof(*type); });
      return depthwise_grad_vector_plan(a.g, element_bytes).splits * grad_elements;
    }
    case WeightGradPath::CudaSplitKGemm:
    case WeightGradPath::CudaPipelinedGemm:
      return make_weight_grad_problem<float>(a.g, nullptr, a.xs, nullptr, a.gys).splits * grad_elements;
    default:
      return 0;
  }
}

void launch_conv_weight_grad(const WeightGradLaunch& a) {
  dispatch_scalar_type(a.dtype,
                       [&](auto* type) { launch_conv_weight_grad_typed<std::remove_pointer_t<decltype(type)>>(a); });
}

}  // namespace fastpad::cuda
