// Launching fastpad's CUDA kernels: grid sizing, the block's dynamic shared memory, and a checked launch on the
// stream the binding passes. Under the CUDA execution shim (FASTPAD_CUDA_SIM, tests/cuda_sim/) the same launches run
// on CPU fibers instead: this header is the one place where the two builds differ.
// Layout and padding: none here (see the kernels).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "cuda/indexing.h"

namespace fastpad::cuda {

// Kernels loop over their work items with a grid stride, so a grid never exceeds this many blocks.
constexpr int64_t kMaxBlocks = int64_t{1} << 20;

inline unsigned int grid_for(int64_t items, int64_t per_block = 1) {
  const int64_t blocks = (items + per_block - 1) / per_block;
  return static_cast<unsigned int>(std::clamp<int64_t>(blocks, 1, kMaxBlocks));
}

// The block's dynamic shared memory: `shared_bytes` of the launch, 16-byte aligned.
__device__ __forceinline__ unsigned char* dynamic_shared_memory() {
#ifdef FASTPAD_CUDA_SIM
  return ::cuda_sim::dynamic_shared();
#else
  extern __shared__ __align__(16) unsigned char bytes[];
  return bytes;
#endif
}

// The dynamic shared memory a kernel may use without opting in.
constexpr size_t kDefaultDynamicSharedBytes = 48 * 1024;

// Launches `kernel` with kThreads threads per block on `stream` and checks the launch; a failure throws.
template <typename Kernel, typename... Args>
void launch(cudaStream_t stream, Kernel kernel, unsigned int blocks, size_t shared_bytes, Args&&... args) {
#ifdef FASTPAD_CUDA_SIM
  (void)stream;
  ::cuda_sim::launch(kernel, blocks, kThreads, shared_bytes, std::forward<Args>(args)...);
#else
  if (shared_bytes > kDefaultDynamicSharedBytes) {  // more needs the kernel's opt-in (sm_80: up to 163 KiB)
    const cudaError_t error =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes));
    if (error != cudaSuccess) {
      throw std::runtime_error(std::string("fastpad: CUDA kernel shared memory opt-in failed: ") +
                               cudaGetErrorString(error));
    }
  }
  kernel<<<blocks, kThreads, shared_bytes, stream>>>(std::forward<Args>(args)...);
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) {
    throw std::runtime_error(std::string("fastpad: CUDA kernel launch failed: ") + cudaGetErrorString(error));
  }
#endif
}

}  // namespace fastpad::cuda
