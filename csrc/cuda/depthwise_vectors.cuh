// The depthwise channel-vector kernel that conv (cuda_depthwise_vectors) and conv_transpose (the same path, in zeros
// mode, as the convs its stride phases are) share. Layout: channels contiguous in aligned 16-byte vectors
// (ChannelVector: channels_last, whole vectors); the weight [taps][C], reordered by the binding. Plan in
// cuda/problems.h.
#pragma once

#include <cstdint>

#include "cuda/launch.cuh"
#include "cuda/problems.h"
#include "cuda/tensor_core_ptx.cuh"

namespace fastpad::cuda {

// Depthwise (one output channel per input channel), channels in vectors: each thread sums kDepthwiseStrip consecutive
// outputs of one row (DepthwiseVectorPlan) for one vector of channels, over every tap, reading x and the weight from
// global memory 16 bytes at a time; the strips' overlapping reads of x are served by the L1 cache. Each tap's weight
// vector is loaded and widened once for the strip's outputs.
// The version it replaces staged an input patch in shared memory per block and gave each thread one output: its index
// math per patch element and per tap took 1790 warp instructions per thread for 72 multiply-adds (Nsight Compute on
// an H200, tf_efficientnet_b0's k3 s2 96-channel layer in bfloat16 at batch 256: 893 us, 18% of the DRAM bandwidth,
// issue-bound at 25% occupancy).
// kSkipTapsOutside (conv_transpose's stride phases): taps outside x are left out of the sums, not multiplied by a zero,
// so that an inf or NaN weight gives torch's transposed conv's result; conv multiplies the padding's zeros, as F.pad +
// conv does. Other padding modes read the position their source_index resolves to.
template <typename scalar_t, bool kSkipTapsOutside>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    depthwise_vectors_kernel(const ConvGeometry g, const DepthwiseVectorPlan plan, const scalar_t* x, const Strides xs,
                             const scalar_t* w, const scalar_t* bias, scalar_t* y, const Strides ys) {
  using acc_t = acc_type<scalar_t>;
  using Vector = ChannelVector<scalar_t>;
  constexpr int kLanes = Vector::kLanes;
  const int64_t channels = g.conv_out_channels;
  for (int64_t item = blockIdx.x * int64_t{kThreads} + threadIdx.x; item < plan.items;
       item += int64_t{gridDim.x} * kThreads) {
    const DepthwiseStrip s = depthwise_strip(g, plan, item);
    const int64_t c0 = s.vector * kLanes;
    acc_t sum[kDepthwiseStrip][kLanes];
#pragma unroll
    for (int j = 0; j < kDepthwiseStrip; ++j) {
#pragma unroll
      for (int l = 0; l < kLanes; ++l) sum[j][l] = bias != nullptr ? load<acc_t>(bias, c0 + l) : acc_t(0);
    }
    const scalar_t* x_image = x + s.n * xs.batch + c0;
    const scalar_t* w_tap = w + c0;  // tap (kd, kh, kw)'s vector, taps in order
    for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
      const int64_t id = g.tap_source(0, s.od, kd);
      for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
        const int64_t ih = id < 0 ? -1 : g.tap_source(1, s.oh, kh);
        if (kSkipTapsOutside && ih < 0) {
          w_tap += g.kernel[2] * channels;
          continue;
        }
        const scalar_t* x_row = ih < 0 ? x_image : x_image + id * xs.spatial[0] + ih * xs.spatial[1];
        for (int64_t kw = 0; kw < g.kernel[2]; ++kw, w_tap += channels) {
          const Vector w_vector = load_global_16<Vector>(w_tap);
          acc_t weight[kLanes];
#pragma unroll
          for (int l = 0; l < kLanes; ++l) weight[l] = load<acc_t>(w_vector.lane, l);
          const int64_t first = g.tap_position(2, s.ow0, kw);
#pragma unroll
          for (int j = 0; j < kDepthwiseStrip; ++j) {
            const int64_t iw = ih < 0 ? -1 : source_index(first + j * g.stride[2], g.conv_in_sizes[2], g.mode);
            if (kSkipTapsOutside && iw < 0) continue;
            // Outside x (conv): the padding's zero, multiplied like any input.
            const Vector in = iw < 0 ? Vector{} : load_global_16<Vector>(x_row + iw * xs.spatial[2]);
#pragma unroll
            for (int l = 0; l < kLanes; ++l) sum[j][l] += load<acc_t>(in.lane, l) * weight[l];
          }
        }
      }
    }
    scalar_t* y_row = y + s.n * ys.batch + s.od * ys.spatial[0] + s.oh * ys.spatial[1] + c0;
#pragma unroll
    for (int j = 0; j < kDepthwiseStrip; ++j) {
      if (s.ow0 + j >= g.conv_out_sizes[2]) break;
      scalar_t out[kLanes];
#pragma unroll
      for (int l = 0; l < kLanes; ++l) out[l] = static_cast<scalar_t>(sum[j][l]);
      store_global_16(y_row + (s.ow0 + j) * ys.spatial[2], out);
    }
  }
}

}  // namespace fastpad::cuda
