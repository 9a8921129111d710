// Registers the CUDA kernels of fastpad's three ops: each runs its binding (cuda/bindings.cpp) under a device guard,
// on the current stream of the input's device.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <array>
#include <atomic>

#include "cuda/bindings.h"

namespace fastpad::cuda {
namespace {

// Whether the current device has cp.async and the bfloat16 and TF32 mma.sync: compute capability 8.0 or later. The
// runtime is asked once per device; the answer is kept for the process.
bool current_device_is_sm80() {
  static std::array<std::atomic<int8_t>, C10_COMPILE_TIME_MAX_GPUS> answers{};  // 0: not asked yet, 1: no, 2: yes
  const c10::DeviceIndex device = c10::cuda::current_device();
  std::atomic<int8_t>& answer = answers.at(device);
  if (answer.load(std::memory_order_relaxed) == 0) {
    int major = 0;
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    answer.store(major >= 8 ? 2 : 1, std::memory_order_relaxed);
  }
  return answer.load(std::memory_order_relaxed) == 2;
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
