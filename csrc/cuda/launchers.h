// The torch-free interface of fastpad's CUDA kernels: one plain struct of arguments per op and one launcher that takes
// only that struct. The bindings (cuda/bindings.cpp) check the tensors, allocate the outputs, pick the kernel path
// (kernel_paths.h) and fill the struct; the launchers (conv.cu, conv_transpose.cu, conv_weight_grad.cu) dispatch on
// the dtype and the path and launch. Under the CUDA execution shim the same launchers run on CPU.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/indexing.h"
#include "kernel_paths.h"

namespace fastpad::cuda {

enum class ScalarType { Float64, Float32, Float16, BFloat16 };

// conv: y = bias + conv(x, w). x, y: [N, C, *spatial] through their strides; bias nullptr or [C_out]. w contiguous:
// [C_out, C_in / groups, *kernel], or [C_out, *kernel, C_in / groups] for the pipelined GEMM, or [taps, C] for the
// depthwise vector kernel.
struct ConvLaunch {
  ConvGeometry g;
  ConvPath path;
  ScalarType dtype;
  const void* x;
  Strides xs;
  const void* w;
  const void* bias;
  void* y;
  Strides ys;
  bool channels_last;  // y's layout: the direct kernels walk y in its memory order
  cudaStream_t stream;
};

// conv_transpose, in conv_transpose_geometry's terms. weight_finite: a device flag saying whether w holds no inf or
// NaN, read by the kernels without a host sync (the GEMM paths need it; nullptr otherwise). kernel_weight: the weight
// as the path's kernel reads it, contiguous: for the pipelined GEMM the weights of the convs the stride phases are,
// each [C_y, *its taps, C_x / groups] (transpose_phase_weight, tap-major), one after the other in phase order; for the
// depthwise vector kernel the same phases' weights, each [its taps, C]; nullptr otherwise.
struct ConvTransposeLaunch {
  ConvGeometry g;
  ConvTransposePath path;
  ScalarType dtype;
  const void* x;
  Strides xs;
  const void* w;
  const void* kernel_weight;
  const void* bias;
  void* y;
  Strides ys;
  bool channels_last;
  const bool* weight_finite;
  cudaStream_t stream;
};

// conv_weight_grad: grad (contiguous, the weight's shape) from x and gy. The split-K path needs a workspace of
// weight_grad_workspace_elements() accumulators (float32, or float64 for float64), allocated by the caller.
struct WeightGradLaunch {
  ConvGeometry g;
  WeightGradPath path;
  ScalarType dtype;
  const void* x;
  Strides xs;
  const void* gy;
  Strides gys;
  void* grad;
  void* workspace;
  cudaStream_t stream;
};

void launch_conv(const ConvLaunch& a);
void launch_conv_transpose(const ConvTransposeLaunch& a);
int64_t weight_grad_workspace_elements(const WeightGradLaunch& a);
void launch_conv_weight_grad(const WeightGradLaunch& a);

// Calls f with a null pointer of the element type of `dtype` (the launchers' dtype dispatch).
template <typename F>
void dispatch_scalar_type(ScalarType dtype, F&& f) {
  switch (dtype) {
    case ScalarType::Float64: return f(static_cast<double*>(nullptr));
    case ScalarType::Float32: return f(static_cast<float*>(nullptr));
    case ScalarType::Float16: return f(static_cast<c10::Half*>(nullptr));
    case ScalarType::BFloat16: return f(static_cast<c10::BFloat16*>(nullptr));
  }
}

}  // namespace fastpad::cuda
