// torch.ops.fastpad_cuda_sim.{conv, conv_transpose, conv_weight_grad}: fastpad's CUDA bindings (csrc/cuda/bindings.cpp)
// on CPU tensors, calling the CUDA launchers and kernels compiled as C++ under the execution shim (cuda_sim.h, in the
// library this extension links). Each returns its result and the name of the kernel path that ran. The bindings are
// told the GPU is sm_80 or later: the shim emulates cp.async, ldmatrix and mma.sync.
#include <torch/library.h>

#include <string>
#include <tuple>

#include "cuda/bindings.h"

namespace fastpad::cuda {
namespace {

std::tuple<at::Tensor, std::string> sim_conv(const at::Tensor& input, const at::Tensor& weight,
                                             const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                             at::IntArrayRef pad_lo, at::IntArrayRef pad_hi, at::IntArrayRef dilation,
                                             int64_t groups, c10::string_view padding_mode) {
  auto [y, path] =
      conv_binding(input, weight, bias, stride, pad_lo, pad_hi, dilation, groups, padding_mode, true, nullptr);
  return {y, path_name(path)};
}

std::tuple<at::Tensor, std::string> sim_conv_transpose(const at::Tensor& input, const at::Tensor& weight,
                                                       const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                                       at::IntArrayRef crop_lo, at::IntArrayRef out_size,
                                                       at::IntArrayRef dilation, int64_t groups,
                                                       c10::string_view padding_mode) {
  auto [y, path] = conv_transpose_binding(input, weight, bias, stride, crop_lo, out_size, dilation, groups,
                                          padding_mode, true, nullptr);
  return {y, path_name(path)};
}

std::tuple<at::Tensor, std::string> sim_conv_weight_grad(const at::Tensor& input, const at::Tensor& grad_output,
                                                         at::IntArrayRef weight_shape, at::IntArrayRef stride,
                                                         at::IntArrayRef pad_lo, at::IntArrayRef dilation,
                                                         int64_t groups, c10::string_view padding_mode) {
  auto [grad, path] = conv_weight_grad_binding(input, grad_output, weight_shape, stride, pad_lo, dilation, groups,
                                               padding_mode, true, nullptr);
  return {grad, path_name(path)};
}

}  // namespace

TORCH_LIBRARY(fastpad_cuda_sim, m) {
  m.def(
      "conv(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] pad_lo, int[] pad_hi, int[] dilation, "
      "int groups, str padding_mode) -> (Tensor, str)");
  m.def(
      "conv_transpose(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] crop_lo, int[] out_size, "
      "int[] dilation, int groups, str padding_mode) -> (Tensor, str)");
  m.def(
      "conv_weight_grad(Tensor input, Tensor grad_output, int[] weight_shape, int[] stride, int[] pad_lo, "
      "int[] dilation, int groups, str padding_mode) -> (Tensor, str)");
}

TORCH_LIBRARY_IMPL(fastpad_cuda_sim, CPU, m) {
  m.impl("conv", &sim_conv);
  m.impl("conv_transpose", &sim_conv_transpose);
  m.impl("conv_weight_grad", &sim_conv_weight_grad);
}

}  // namespace fastpad::cuda
