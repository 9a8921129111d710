// The depthwise rows kernel that conv (cuda_depthwise_rows) and conv_transpose (the same path, at stride 1 in zeros
// mode, as the conv its one stride phase is) share. Layout: any strides along the row; plan in cuda/problems.h.
#pragma once

#include <cstdint>

#include "cuda/launch.cuh"
#include "cuda/problems.h"

namespace fastpad::cuda {

// Depthwise 1-d rows (RowPlan in cuda/problems.h): a block stages the input span of kRowOutputs consecutive outputs
// of one (image, channel) row in shared memory, padding resolved; each thread then sums the taps of its
// kRowOutputsPerThread outputs, kThreads apart, so that a warp's shared reads are consecutive at stride 1.
// kSkipTapsOutside (conv_transpose, run as the conv its one stride phase is): taps outside the input are left out of
// the sum, not multiplied by a zero, so that an inf or NaN weight gives torch's transposed conv's result; conv
// multiplies the padding's zeros, as F.pad + conv does.
template <typename scalar_t, bool kSkipTapsOutside>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    depthwise_rows_kernel(const ConvGeometry g, const RowPlan plan, const scalar_t* x, const Strides xs,
                          const scalar_t* w, const scalar_t* bias, scalar_t* y, const Strides ys) {
  using acc_t = acc_type<scalar_t>;
  acc_t* span = reinterpret_cast<acc_t*>(dynamic_shared_memory());
  const int64_t outputs = g.conv_out_sizes[2], taps = g.kernel[2], stride = g.stride[2], dilation = g.dilation[2];
  for (int64_t item = blockIdx.x; item < plan.tiles; item += gridDim.x) {
    const int64_t row_tile = item % plan.row_tiles, rest = item / plan.row_tiles;
    const int64_t c = rest % g.conv_out_channels, n = rest / g.conv_out_channels;
    const int64_t o0 = row_tile * kRowOutputs, first = g.tap_position(2, o0, 0);
    const scalar_t* x_row = x + n * xs.batch + c / g.conv_out_channels_per_group() * xs.channel;
    __syncthreads();  // every thread is done reading the previous span
    for (int e = threadIdx.x; e < plan.span; e += kThreads) {
      const int64_t source = source_index(first + e, g.conv_in_sizes[2], g.mode);
      span[e] = source < 0 ? acc_t(0) : load<acc_t>(x_row, source * xs.spatial[2]);
    }
    __syncthreads();
    const acc_t b = bias != nullptr ? load<acc_t>(bias, c) : acc_t(0);
    const scalar_t* w_row = w + c * taps;
#pragma unroll
    for (int j = 0; j < kRowOutputsPerThread; ++j) {
      const int64_t local = threadIdx.x + int64_t{j} * kThreads;
      if (o0 + local >= outputs) break;
      const acc_t* in = span + local * stride;
      acc_t sum = b;
      for (int64_t r = 0; r < taps; ++r) {
        if (kSkipTapsOutside) {
          const int64_t source = first + local * stride + r * dilation;
          if (source < 0 || source >= g.conv_in_sizes[2]) continue;
        }
        sum += load<acc_t>(w_row, r) * in[r * dilation];
      }
      y[n * ys.batch + c * ys.channel + (o0 + local) * ys.spatial[2]] = static_cast<scalar_t>(sum);
    }
  }
}

}  // namespace fastpad::cuda
