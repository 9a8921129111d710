// The CUDA ops' bindings: the tensor side of each op (checks, outputs, the kernel path, the launch struct), then the
// torch-free launcher (cuda/launchers.h). They take the stream to launch on and return the path taken, so that the
// same code serves the CUDA build (cuda/register.cpp: device guard, current stream) and the CUDA execution shim's tests
// (tests/cuda_sim/sim_ops.cpp: CPU tensors, kernels on CPU fibers). sm80 says whether the GPU has cp.async and
// the bfloat16 and TF32 mma.sync (compute capability 8.0 or later; the shim emulates them). Whether float32 may run
// on TF32 tensor cores the bindings read from torch (tf32_allowed() in conv_params.h).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>
#include <cuda_runtime_api.h>

#include <optional>
#include <utility>

#include "kernel_paths.h"

namespace fastpad::cuda {

std::pair<at::Tensor, ConvPath> conv_binding(const at::Tensor& input, const at::Tensor& weight,
                                             const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                             at::IntArrayRef pad_lo, at::IntArrayRef pad_hi, at::IntArrayRef dilation,
                                             int64_t groups, c10::string_view padding_mode, bool sm80,
                                             cudaStream_t stream);

std::pair<at::Tensor, ConvTransposePath> conv_transpose_binding(
    const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
    at::IntArrayRef crop_lo, at::IntArrayRef out_size, at::IntArrayRef dilation, int64_t groups,
    c10::string_view padding_mode, bool sm80, cudaStream_t stream);

std::pair<at::Tensor, WeightGradPath> conv_weight_grad_binding(const at::Tensor& input,
                                                                const at::Tensor& grad_output,
                                                                at::IntArrayRef weight_shape, at::IntArrayRef stride,
                                                                at::IntArrayRef pad_lo, at::IntArrayRef dilation,
                                                                int64_t groups, c10::string_view padding_mode,
                                                                bool sm80, cudaStream_t stream);

}  // namespace fastpad::cuda
