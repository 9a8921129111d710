// Launching fastpad's CUDA kernels: grid sizing and a launch on the current stream, checked.
// Layout and padding: none here (see the kernels).
#pragma once

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <utility>

#include "cuda/indexing.h"

namespace fastpad::cuda {

// Kernels loop over their work items with a grid stride, so a grid never exceeds this many blocks.
constexpr int64_t kMaxBlocks = int64_t{1} << 20;

inline unsigned int grid_for(int64_t items, int64_t per_block = 1) {
  const int64_t blocks = (items + per_block - 1) / per_block;
  return static_cast<unsigned int>(std::clamp<int64_t>(blocks, 1, kMaxBlocks));
}

// Launches `kernel` on the current stream of the current device (the caller holds a device guard) and checks it.
template <typename Kernel, typename... Args>
void launch(Kernel kernel, unsigned int blocks, size_t shared_bytes, Args&&... args) {
  kernel<<<blocks, kThreads, shared_bytes, c10::cuda::getCurrentCUDAStream()>>>(std::forward<Args>(args)...);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace fastpad::cuda
