// Launching fastpad's CUDA kernels: grid sizing, the block's dynamic shared memory, and a checked launch on the
// stream the binding passes. Under the CUDA execution shim (FASTPAD_CUDA_SIM, tests/cuda_sim/) the same launches run
// on CPU fibers instead: this header is the one place where the two builds differ.
// Layout and padding: none here (see the kernels).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <map>
#include <mutex>
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

#ifndef FASTPAD_CUDA_SIM
inline void check_cuda(cudaError_t error, const char* what) {
  if (error != cudaSuccess) throw std::runtime_error(std::string("fastpad: ") + what + ": " + cudaGetErrorString(error));
}

// Opts `kernel` into `bytes` of dynamic shared memory on the current device (sm_80: up to 163 KiB). The attribute
// belongs to the kernel on its device, so the driver is called only when a kernel asks a device for more than before.
inline void opt_into_shared_bytes(const void* kernel, size_t bytes) {
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, size_t> granted;  // (kernel, device) -> bytes
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  const std::lock_guard<std::mutex> lock(mutex);
  size_t& current = granted[{kernel, device}];
  if (bytes <= current) return;
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
             "CUDA kernel shared memory opt-in failed");
  current = bytes;
}
#endif

// Launches `kernel` with kThreads threads per block on `stream` and checks the launch; a failure throws.
template <typename Kernel, typename... Args>
void launch(cudaStream_t stream, Kernel kernel, unsigned int blocks, size_t shared_bytes, Args&&... args) {
#ifdef FASTPAD_CUDA_SIM
  (void)stream;
  ::cuda_sim::launch(kernel, blocks, kThreads, shared_bytes, std::forward<Args>(args)...);
#else
  if (shared_bytes > kDefaultDynamicSharedBytes) {
    opt_into_shared_bytes(reinterpret_cast<const void*>(kernel), shared_bytes);
  }
  kernel<<<blocks, kThreads, shared_bytes, stream>>>(std::forward<Args>(args)...);
  check_cuda(cudaGetLastError(), "CUDA kernel launch failed");
#endif
}

}  // namespace fastpad::cuda
