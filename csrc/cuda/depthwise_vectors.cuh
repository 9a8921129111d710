// The steps the two depthwise channel-vector kernels share (conv.cu: depthwise_vectors_kernel; conv_transpose.cu:
// depthwise_transpose_vectors_kernel): the bias a sum starts at, the copy of a patch of x into shared memory by 16-byte
// cp.async, the multiply-add of one tap and the 16-byte store. The kernels differ only in which x positions a patch
// and a tap read. Layout: channels contiguous in aligned 16-byte vectors (ChannelVector); plans in cuda/problems.h.
#pragma once

#include <cstdint>

#include "cuda/launch.cuh"
#include "cuda/problems.h"
#include "cuda/tensor_core_ptx.cuh"

namespace fastpad::cuda {

// This thread's part of a block: channel vector `vector` of the block's kDepthwiseVectorsPerBlock (consecutive threads
// take consecutive vectors, as copy_vector_patch lays the patch out) at position (ty, tx) of the output tile.
struct VectorThread {
  int vector;
  int ty;
  int tx;
};

__device__ __forceinline__ VectorThread vector_thread(const PatchTile& plan) {
  const int position = threadIdx.x / kDepthwiseVectorsPerBlock;
  return {static_cast<int>(threadIdx.x % kDepthwiseVectorsPerBlock), position / plan.tile_w, position % plan.tile_w};
}

// The sum of channels c0 .. c0 + lanes, started at their bias (zero without one, or past the channels).
template <typename acc_t, typename scalar_t, int kLanes>
__device__ __forceinline__ void start_vector_sum(acc_t (&sum)[kLanes], const scalar_t* bias, int64_t c0,
                                                 int64_t channels) {
  for (int j = 0; j < kLanes; ++j) sum[j] = bias != nullptr && c0 < channels ? load<acc_t>(bias, c0 + j) : acc_t(0);
}

// Copies the block's patch ([patch_h * patch_w][kDepthwiseVectorsPerBlock] vectors) of x's depth `depth` in image n
// into shared memory: patch row ph and column pw come from x row source_row(ph) and column source_column(pw), or are
// zero where either is -1 (or past the channels). Returns once every thread is done with the previous patch, and the
// whole block's copies have landed.
template <typename scalar_t, typename SourceRow, typename SourceColumn>
__device__ __forceinline__ void copy_vector_patch(ChannelVector<scalar_t>* patch, const PatchTile& plan,
                                                  const scalar_t* x, const Strides& xs, int64_t n, int64_t depth,
                                                  int64_t channel_block, int64_t channels, SourceRow source_row,
                                                  SourceColumn source_column) {
  constexpr int kLanes = ChannelVector<scalar_t>::kLanes;
  __syncthreads();  // every thread is done reading the previous patch
  for (int e = threadIdx.x; e < plan.patch_h * plan.patch_w * kDepthwiseVectorsPerBlock; e += kThreads) {
    const int p = e / kDepthwiseVectorsPerBlock, v = e % kDepthwiseVectorsPerBlock;
    const int64_t row = source_row(p / plan.patch_w), column = source_column(p % plan.patch_w);
    const int64_t c = (channel_block * kDepthwiseVectorsPerBlock + v) * kLanes;
    const bool valid = row >= 0 && column >= 0 && c < channels;
    const scalar_t* source =
        valid ? x + n * xs.batch + depth * xs.spatial[0] + row * xs.spatial[1] + column * xs.spatial[2] + c : x;
    cp_async_zfill_16(&patch[e], source, valid);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
}

// sum += the patch vector `in` times the 16-byte vector of the weight at `weight` (the tap's row of [taps][C], at the
// thread's channels). Both are copied whole first: read lane by lane, nvcc split the shared-memory load.
template <typename acc_t, typename scalar_t, int kLanes>
__device__ __forceinline__ void add_vector_tap(acc_t (&sum)[kLanes], const ChannelVector<scalar_t>* patch_vector,
                                               const scalar_t* weight) {
  const ChannelVector<scalar_t> in = *patch_vector;
  const auto w = *reinterpret_cast<const ChannelVector<scalar_t>*>(weight);
  for (int j = 0; j < kLanes; ++j) sum[j] += load<acc_t>(in.lane, j) * load<acc_t>(w.lane, j);
}

// y[0 .. lanes) = sum, in one 16-byte store.
template <typename acc_t, typename scalar_t, int kLanes>
__device__ __forceinline__ void store_vector_sum(scalar_t* y, const acc_t (&sum)[kLanes]) {
  scalar_t out[kLanes];
  for (int j = 0; j < kLanes; ++j) out[j] = static_cast<scalar_t>(sum[j]);
  store_global_16(y, out);
}

}  // namespace fastpad::cuda
