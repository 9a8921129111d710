// fastpad::conv on CUDA: y[o] = bias + sum_r w[r] * xpad[o*s - pad_lo + r*d], 1-3 spatial dims.
// Layout: any input strides (contiguous, channels_last, strided), read in place; the output keeps the input's format.
// Padding is never materialised: every tap in the padding reads zero or its reflected/clamped/wrapped source.
// Depthwise layers (one input channel per group) run direct kernels, through an input patch with its halo in shared
// memory for contiguous layouts (single rows, 1-d layers: a span of the row, cuda/depthwise_rows.cuh), and,
// channels-last, strips of outputs per 16-byte channel vector (cuda/depthwise_vectors.cuh, sm_80+).
// Stems (one group of at most 4 input channels) sum each output directly (few_channels_kernel). 16-bit channels-last
// layers on sm_80+ run the pipelined tensor-core GEMM (cuda/pipelined_gemm.cuh); every other layer is an implicit GEMM
// (cuda/implicit_gemm.cuh). The path comes
// from kernel_paths.h, chosen by the binding (cuda/bindings.cpp); this file is torch-free.
#include "cuda/depthwise_rows.cuh"
#include "cuda/depthwise_vectors.cuh"
#include "cuda/implicit_gemm.cuh"
#include "cuda/launchers.h"
#include "cuda/pipelined_gemm.cuh"

namespace fastpad::cuda {
namespace {

// Depthwise, contiguous layouts: a block computes one tile of an output plane (one thread per output). Per depth tap,
// it first stages the input patch the tile reads, halo included and padding resolved, in shared memory; every
// (kh, kw) tap then reads it there (cuda/problems.h has the index math).
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    depthwise_halo_kernel(const ConvGeometry g, const HaloPlan plan, const scalar_t* x, const Strides xs,
                          const scalar_t* w, const scalar_t* bias, scalar_t* y, const Strides ys) {
  using acc_t = acc_type<scalar_t>;
  acc_t* patch = reinterpret_cast<acc_t*>(dynamic_shared_memory());
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

// Few input channels in one group (an RGB stem; FewChannelsPlan): each thread sums kFewChannelsOutputs output channels
// of one output position over every tap and input channel, reading each x value once (the padding's zeros multiplied,
// as F.pad + conv multiplies them) and the chunk's weights 16 bytes at a time from w ([taps][C_in][padded_out] in the
// accumulation type, the binding's copy). The threads of a warp take consecutive positions of one chunk: their x loads
// are neighbours and their weight loads the same addresses.
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    few_channels_kernel(const ConvGeometry g, const FewChannelsPlan plan, const scalar_t* x, const Strides xs,
                        const acc_type<scalar_t>* w, const scalar_t* bias, scalar_t* y, const Strides ys) {
  using acc_t = acc_type<scalar_t>;
  using Vector = ChannelVector<acc_t>;
  constexpr int kLanes = Vector::kLanes, kVectors = kFewChannelsOutputs / kLanes;
  const int64_t c_in = g.conv_in_channels, c_out = g.conv_out_channels;
  for (int64_t item = blockIdx.x * int64_t{kThreads} + threadIdx.x; item < plan.items;
       item += int64_t{gridDim.x} * kThreads) {
    const QuotientRemainder chunk_position = divide(item, plan.positions);
    const int64_t c0 = chunk_position.quotient * kFewChannelsOutputs;
    int64_t o[kMaxSpatial];
    const int64_t n = unflatten(chunk_position.remainder, g.conv_out_sizes, o);
    acc_t sum[kFewChannelsOutputs];
#pragma unroll
    for (int j = 0; j < kFewChannelsOutputs; ++j) {
      sum[j] = bias != nullptr && c0 + j < c_out ? load<acc_t>(bias, c0 + j) : acc_t(0);
    }
    const scalar_t* x_image = x + n * xs.batch;
    const acc_t* w_row = w + c0;  // (tap, input channel) rows in order, each padded_out long
    for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
      const int64_t id = g.tap_source(0, o[0], kd);
      for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
        const int64_t ih = id < 0 ? -1 : g.tap_source(1, o[1], kh);
        for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
          const int64_t iw = ih < 0 ? -1 : g.tap_source(2, o[2], kw);
          const scalar_t* x_at =
              iw < 0 ? x_image : x_image + id * xs.spatial[0] + ih * xs.spatial[1] + iw * xs.spatial[2];
          for (int64_t ci = 0; ci < c_in; ++ci, w_row += plan.padded_out) {
            const acc_t value = iw < 0 ? acc_t(0) : load<acc_t>(x_at, ci * xs.channel);
#pragma unroll
            for (int v = 0; v < kVectors; ++v) {
              const Vector weights = load_global_16<Vector>(w_row + v * kLanes);
#pragma unroll
              for (int l = 0; l < kLanes; ++l) sum[v * kLanes + l] += value * weights.lane[l];
            }
          }
        }
      }
    }
    scalar_t* y_at = y + n * ys.batch + ys.position(o);
#pragma unroll
    for (int j = 0; j < kFewChannelsOutputs; ++j) {
      if (c0 + j < c_out) y_at[(c0 + j) * ys.channel] = static_cast<scalar_t>(sum[j]);
    }
  }
}

// One thread per output element, in the output's memory order (consecutive threads write consecutive addresses).
// Serves channels_last depthwise layers and depthwise layers whose patch would not fit in shared memory.
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    direct_conv_kernel(const ConvGeometry g, const scalar_t* x, const Strides xs, const scalar_t* w,
                       const scalar_t* bias, scalar_t* y, const Strides ys, bool channels_last) {
  const int64_t total = g.batch * g.conv_out_channels * g.conv_out_volume();
  for (int64_t index = blockIdx.x * int64_t{kThreads} + threadIdx.x; index < total;
       index += int64_t{gridDim.x} * kThreads) {
    direct_conv_element(g, x, xs, w, bias, y, ys, channels_last, index);
  }
}

template <typename scalar_t>
void launch_conv_typed(const ConvLaunch& a) {
  const ConvGeometry& g = a.g;
  const auto* x = static_cast<const scalar_t*>(a.x);
  const auto* w = static_cast<const scalar_t*>(a.w);
  const auto* bias = static_cast<const scalar_t*>(a.bias);
  auto* y = static_cast<scalar_t*>(a.y);
  switch (a.path) {
    case ConvPath::CudaPipelinedGemm:
      if constexpr (kPipelinedType<scalar_t>) {
        run_pipelined_conv(a.stream, g, x, a.xs, w, bias, y, a.ys);
        return;
      }
      break;
    case ConvPath::CudaImplicitGemm:
      run_implicit_gemm(a.stream, make_conv_problem(g, x, a.xs, w, bias, y, a.ys));
      return;
    case ConvPath::CudaDepthwiseHalo: {
      const HaloPlan plan = halo_plan(g, sizeof(acc_type<scalar_t>));
      const size_t patch_bytes = size_t(plan.patch_h) * plan.patch_w * sizeof(acc_type<scalar_t>);
      launch(a.stream, depthwise_halo_kernel<scalar_t>, grid_for(plan.tiles), patch_bytes, g, plan, x, a.xs, w, bias,
             y, a.ys);
      return;
    }
    case ConvPath::CudaDepthwiseRows: {
      const RowPlan plan = row_plan(g, sizeof(acc_type<scalar_t>));
      launch(a.stream, depthwise_rows_kernel<scalar_t, /*kSkipTapsOutside=*/false>, grid_for(plan.tiles),
             plan.span * sizeof(acc_type<scalar_t>), g, plan, x, a.xs, w, bias, y, a.ys);
      return;
    }
    case ConvPath::CudaFewChannels: {
      const FewChannelsPlan plan = few_channels_plan(g);
      launch(a.stream, few_channels_kernel<scalar_t>, grid_for(plan.items, kThreads), 0, g, plan, x, a.xs,
             static_cast<const acc_type<scalar_t>*>(a.w), bias, y, a.ys);
      return;
    }
    case ConvPath::CudaDepthwiseVectors: {
      const DepthwiseVectorPlan plan = depthwise_vector_plan(g, sizeof(scalar_t));
      launch(a.stream, depthwise_vectors_kernel<scalar_t, /*kSkipTapsOutside=*/false>, grid_for(plan.items, kThreads),
             0, g, plan, x, a.xs, w, bias, y, a.ys);
      return;
    }
    case ConvPath::CudaDirect:
      launch(a.stream, direct_conv_kernel<scalar_t>,
             grid_for(g.batch * g.conv_out_channels * g.conv_out_volume(), kThreads), 0, g, x, a.xs, w, bias, y, a.ys,
             a.channels_last);
      return;
    default:
      break;
  }
  throw std::invalid_argument(std::string("fastpad conv: no CUDA kernel for path ") + path_name(a.path) +
                              " in this dtype");
}

}  // namespace

void launch_conv(const ConvLaunch& a) {
  dispatch_scalar_type(a.dtype, [&](auto* type) { launch_conv_typed<std::remove_pointer_t<decltype(type)>>(a); });
}

}  // namespace fastpad::cuda
