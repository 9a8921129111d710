// Registers the CUDA kernels of fastpad's three ops: each runs its binding (cuda/bindings.cpp) under a device guard,
// on the current stream of the input's device.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "cuda/bindings.h"

namespace fastpad::cuda {
namespace {

// Whether the current device has cp.async and the bfloat16 and TF32 mma.sync: compute capability 8.0 or later.
bool current_device_is_sm80() {
  int device = 0, major = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major >= 8;
}

at::Tensor conv_cuda(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                     at::IntArrayRef stride, at::IntArrayRef pad_lo, at::IntArrayRef pad_hi, at::IntArrayRef dilation,
                     int64_t groups, c10::string_view padding_mode) {
  const c10::cuda::CUDAGuard device_guard(input.device());
  return conv_binding(input, weight, bias, stride, pad_lo, pad_hi, dilation, groups, padding_mode,
                      current_device_is_sm80(),
                      c10::cuda::getCurrentCUDAStream())
      .first;
}

at::Tensor conv_transpose_cuda(const at::Tensor& input, const at::Tensor& weight,
                               const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                               at::IntArrayRef crop_lo, at::IntArrayRef out_size, at::IntArrayRef dilation,
                               int64_t groups, c10::string_view padding_mode) {
  const c10::cuda::CUDAGuard device_guard(input.device());
  return conv_transpose_binding(input, weight, bias, stride, crop_lo, out_size, dilation, groups, padding_mode,
                                current_device_is_sm80(), c10::cuda::getCurrentCUDAStream())
      .first;
}

at::Tensor conv_weight_grad_cuda(const at::Tensor& input, const at::Tensor& grad_output, at::IntArrayRef weight_shape,
                                 at::IntArrayRef stride, at::IntArrayRef pad_lo, at::IntArrayRef dilation,
                                 int64_t groups, c10::string_view padding_mode) {
  const c10::cuda::CUDAGuard device_guard(input.device());
  return conv_weight_grad_binding(input, grad_output, weight_shape, stride, pad_lo, dilation, groups, padding_mode,
                                  current_device_is_sm80(), c10::cuda::getCurrentCUDAStream())
      .first;
}

}  // namespace

TORCH_LIBRARY_IMPL(fastpad, CUDA, m) {
  m.impl("conv", &conv_cuda);
  m.impl("conv_transpose", &conv_transpose_cuda);
  m.impl("conv_weight_grad", &conv_weight_grad_cuda);
}

}  // namespace fastpad::cuda
