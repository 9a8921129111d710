// Autocast (AMP) for the three ops, as torch does for its own convolutions: inside torch.autocast they run in the
// autocast dtype of the device (float16 or bfloat16, on CPU and on CUDA). Floating-point tensors other than float64 are
// cast (through autocast's weight cache), then the op runs again below the autocast key.
#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include "op_handles.h"

namespace fastpad {
namespace {

// Casts as autocast would, for the ops of `device`, and keeps autocast off while the op runs.
template <c10::DeviceType device>
struct AutocastScope {
  c10::impl::ExcludeDispatchKeyGuard no_autocast{at::autocast::get_autocast_dispatch_key_from_device_type(device)};
  at::ScalarType dtype = at::autocast::get_lower_precision_fp_from_device_type(device);

  at::Tensor cast(const at::Tensor& tensor) const { return at::autocast::cached_cast(dtype, tensor, device); }
  std::optional<at::Tensor> cast(const std::optional<at::Tensor>& tensor) const {
    return at::autocast::cached_cast(dtype, tensor, device);
  }
};

template <c10::DeviceType device, const char* op_name>
at::Tensor conv_autocast(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                         at::IntArrayRef stride, c10::SymIntArrayRef pad_lo_or_crop_lo,
                         c10::SymIntArrayRef pad_hi_or_out_size, at::IntArrayRef dilation, int64_t groups,
                         c10::string_view padding_mode) {
  static const auto op = find_op<ConvSignature>(op_name);
  AutocastScope<device> scope;
  return op.call(scope.cast(input), scope.cast(weight), scope.cast(bias), stride, pad_lo_or_crop_lo,
                 pad_hi_or_out_size, dilation, groups, padding_mode);
}

template <c10::DeviceType device>
at::Tensor conv_weight_grad_autocast(const at::Tensor& input, const at::Tensor& grad_output,
                                     at::IntArrayRef weight_shape, at::IntArrayRef stride, c10::SymIntArrayRef pad_lo,
                                     at::IntArrayRef dilation, int64_t groups, c10::string_view padding_mode) {
  static const auto op = find_op<WeightGradSignature>(kConvWeightGrad);
  AutocastScope<device> scope;
  return op.call(scope.cast(input), scope.cast(grad_output), weight_shape, stride, pad_lo, dilation, groups,
                 padding_mode);
}

}  // namespace

TORCH_LIBRARY_IMPL(fastpad, AutocastCPU, m) {
  m.impl("conv", &conv_autocast<c10::DeviceType::CPU, kConv>);
  m.impl("conv_transpose", &conv_autocast<c10::DeviceType::CPU, kConvTranspose>);
  m.impl("conv_weight_grad", &conv_weight_grad_autocast<c10::DeviceType::CPU>);
}

TORCH_LIBRARY_IMPL(fastpad, AutocastCUDA, m) {
  m.impl("conv", &conv_autocast<c10::DeviceType::CUDA, kConv>);
  m.impl("conv_transpose", &conv_autocast<c10::DeviceType::CUDA, kConvTranspose>);
  m.impl("conv_weight_grad", &conv_weight_grad_autocast<c10::DeviceType::CUDA>);
}

}  // namespace fastpad
