// Autograd for the three ops at the Autograd dispatch key, in C++: an op called with a tensor that requires grad runs
// below the key and records this backward, itself built only from the three ops (called again through the dispatcher,
// so torch.compile traces it and double backward works):
//   conv             d/dinput = conv_transpose (same padding mode: the adjoint)   d/dweight = conv_weight_grad
//   conv_transpose   d/dinput = conv                                              d/dweight = conv_weight_grad
//   conv_weight_grad d/dinput = conv_transpose                                    d/dgrad_output = conv
// Written in Python (torch.library.register_autograd), the same formulas cost about 185 us of interpreter and
// dispatch per forward + backward of a small layer (1x4x8x8, 3x3: 283 us against 58 us for the three kernels).
#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <vector>

#include "conv_params.h"
#include "geometry.h"
#include "op_handles.h"

namespace fastpad {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor call_conv(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                     at::IntArrayRef stride, c10::SymIntArrayRef pad_lo, c10::SymIntArrayRef pad_hi,
                     at::IntArrayRef dilation, int64_t groups, c10::string_view padding_mode) {
  static const auto op = find_op<ConvSignature>(kConv);
  return op.call(input, weight, bias, stride, pad_lo, pad_hi, dilation, groups, padding_mode);
}

at::Tensor call_conv_transpose(const at::Tensor& input, const at::Tensor& weight,
                               const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                               c10::SymIntArrayRef crop_lo, c10::SymIntArrayRef out_size, at::IntArrayRef dilation,
                               int64_t groups, c10::string_view padding_mode) {
  static const auto op = find_op<ConvSignature>(kConvTranspose);
  return op.call(input, weight, bias, stride, crop_lo, out_size, dilation, groups, padding_mode);
}

at::Tensor call_conv_weight_grad(const at::Tensor& input, const at::Tensor& grad_output, at::IntArrayRef weight_shape,
                                 at::IntArrayRef stride, c10::SymIntArrayRef pad_lo, at::IntArrayRef dilation,
                                 int64_t groups, c10::string_view padding_mode) {
  static const auto op = find_op<WeightGradSignature>(kConvWeightGrad);
  return op.call(input, grad_output, weight_shape, stride, pad_lo, dilation, groups, padding_mode);
}

// The SymInt lists (pads, crops, out_size) arrive as c10::SymInt, which holds an int below -2^62 as a constant
// symbolic node that no kernel taking ints accepts: such an entry is refused here, named with its value.
void check_concrete_range(const char* op, const char* name, c10::SymIntArrayRef values) {
  for (const auto& value : values) {
    if (!value.is_heap_allocated()) continue;
    const auto constant = value.maybe_as_int();
    TORCH_CHECK(!constant.has_value(), op, ": every entry of ", name, " must be > -2^62, got ", *constant);
  }
}

// A weight's shape as the ints conv_weight_grad takes (guarded where torch.compile made it symbolic).
std::vector<int64_t> weight_shape_of(const at::Tensor& weight) {
  std::vector<int64_t> shape;
  for (const auto& size : weight.sym_sizes()) shape.push_back(size.guard_int(__FILE__, __LINE__));
  return shape;
}

// The pad_hi that makes a conv over `in_size` produce exactly `out_size` positions: geometry.h's
// transposed_full_size - pad_lo - in_size, on SymInts (fastpad/_ops.py's _pad_hi_for for the fake kernels).
std::vector<c10::SymInt> pad_hi_for(c10::SymIntArrayRef in_size, c10::SymIntArrayRef out_size,
                                    c10::SymIntArrayRef pad_lo, at::IntArrayRef kernel, at::IntArrayRef stride,
                                    at::IntArrayRef dilation) {
  std::vector<c10::SymInt> pad_hi;
  for (size_t d = 0; d < in_size.size(); ++d) {
    pad_hi.push_back((out_size[d] - 1) * stride[d] + effective_kernel(kernel[d], dilation[d]) - pad_lo[d] - in_size[d]);
  }
  return pad_hi;
}

// The bias gradient: grad summed over the batch and positions, in float32 for bfloat16 and float16 (torch's own CPU
// sum of bfloat16 gave 88 for 508 x 508 values whose exact sum is 86.68, a 1.5% error).
// A channels-last CPU grad with up to kFoldedSumMaxChannels channels, not a power of two, is summed as rows of
// kFoldedSumRowValues values (whole pixels), then the row's pixels: torch's CPU sum over the batch and positions of a
// channels-last tensor is fast where C is a power of two, and otherwise runs along rows of C values (float32, 2 cores,
// interleaved: 6x14x189x189 2.9 ms, 0.80 ms as rows; 8xCx56x56 with C = 3-56 not powers of two 1.07-3.6x faster as
// rows, with C = 8-64 powers of two 0.66-1.08x). Symbolic sizes (torch.compile) keep the plain sum.
constexpr int64_t kFoldedSumMaxChannels = 64;
constexpr int64_t kFoldedSumRowValues = 256;
at::Tensor reduce_over_positions(const at::Tensor& grad) {
  const bool reduced_precision = grad.scalar_type() == at::kBFloat16 || grad.scalar_type() == at::kHalf;
  const auto sum_type = reduced_precision ? at::kFloat : grad.scalar_type();
  const bool folded = grad.is_cpu() && !grad.unsafeGetTensorImpl()->has_symbolic_sizes_strides() &&
                      output_memory_format(grad) != at::MemoryFormat::Contiguous &&
                      grad.size(1) <= kFoldedSumMaxChannels && (grad.size(1) & (grad.size(1) - 1)) != 0;
  at::Tensor sums;
  if (folded) {
    const int64_t channels = grad.size(1);
    const auto pixels = grad.movedim(1, -1).reshape({-1, channels});  // a view: channels-last
    const int64_t per_row = kFoldedSumRowValues / channels, whole = pixels.size(0) / per_row * per_row;
    const auto rows = pixels.narrow(0, 0, whole).reshape({whole / per_row, per_row * channels});
    sums = rows.sum(0, /*keepdim=*/false, sum_type).view({per_row, channels}).sum(0);
    if (whole < pixels.size(0)) {
      sums = sums + pixels.narrow(0, whole, pixels.size(0) - whole).sum(0, /*keepdim=*/false, sum_type);
    }
  } else {
    std::vector<int64_t> dims{0};
    for (int64_t d = 2; d < grad.dim(); ++d) dims.push_back(d);
    sums = grad.sum(dims, /*keepdim=*/false, sum_type);
  }
  return reduced_precision ? sums.to(grad.scalar_type()) : sums;
}

// The arguments every op shares after its tensors and its two SymInt lists, kept for the backward.
void save_arguments(AutogradContext* ctx, at::IntArrayRef stride, c10::SymIntArrayRef pad_lo, at::IntArrayRef dilation,
                    int64_t groups, c10::string_view padding_mode) {
  ctx->saved_data["stride"] = stride.vec();
  ctx->saved_data["pad_lo"] = pad_lo.vec();
  ctx->saved_data["dilation"] = dilation.vec();
  ctx->saved_data["groups"] = groups;
  ctx->saved_data["padding_mode"] = std::string(padding_mode);
}

struct SavedArguments {
  std::vector<int64_t> stride;
  std::vector<c10::SymInt> pad_lo;
  std::vector<int64_t> dilation;
  int64_t groups;
  std::string padding_mode;

  explicit SavedArguments(AutogradContext* ctx)
      : stride(ctx->saved_data["stride"].toIntVector()),
        pad_lo(ctx->saved_data["pad_lo"].toSymIntVector()),
        dilation(ctx->saved_data["dilation"].toIntVector()),
        groups(ctx->saved_data["groups"].toInt()),
        padding_mode(ctx->saved_data["padding_mode"].toStringRef()) {}
};

// The weight and bias gradients of conv and of conv_transpose: conv_weight_grad of the conv's input and the gradient
// of its output (for conv_transpose, the gradient of its own output is the conv's input, its input the conv's output
// side), and the sum of `grad`, the gradient of the op's output, where the op had a bias.
void weight_and_bias_grads(AutogradContext* ctx, const SavedArguments& a, const at::Tensor& conv_input,
                           const at::Tensor& conv_output_grad, const at::Tensor& weight, const at::Tensor& grad,
                           variable_list& grads) {
  if (ctx->needs_input_grad(1)) {
    grads[1] = call_conv_weight_grad(conv_input, conv_output_grad, weight_shape_of(weight), a.stride, a.pad_lo,
                                     a.dilation, a.groups, a.padding_mode);
  }
  if (ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(2)) grads[2] = reduce_over_positions(grad);
}

struct Conv : public torch::autograd::Function<Conv> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias, at::IntArrayRef stride, c10::SymIntArrayRef pad_lo,
                            c10::SymIntArrayRef pad_hi, at::IntArrayRef dilation, int64_t groups,
                            c10::string_view padding_mode) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    ctx->save_for_backward({input, weight});
    save_arguments(ctx, stride, pad_lo, dilation, groups, padding_mode);
    ctx->saved_data["has_bias"] = bias.has_value() && bias->defined();
    return call_conv(input, weight, bias, stride, pad_lo, pad_hi, dilation, groups, padding_mode);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &input = saved[0], &weight = saved[1], &grad = grad_outputs[0];
    const SavedArguments a(ctx);
    variable_list grads(9);  // one per argument; the int lists, groups and padding_mode take none
    if (ctx->needs_input_grad(0)) {
      grads[0] = call_conv_transpose(grad, weight, std::nullopt, a.stride, a.pad_lo, input.sym_sizes().slice(2),
                                     a.dilation, a.groups, a.padding_mode);
    }
    weight_and_bias_grads(ctx, a, input, grad, weight, grad, grads);
    return grads;
  }
};

struct ConvTranspose : public torch::autograd::Function<ConvTranspose> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                            c10::SymIntArrayRef crop_lo, c10::SymIntArrayRef out_size, at::IntArrayRef dilation,
                            int64_t groups, c10::string_view padding_mode) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    ctx->save_for_backward({input, weight});
    save_arguments(ctx, stride, crop_lo, dilation, groups, padding_mode);
    ctx->saved_data["out_size"] = out_size.vec();
    ctx->saved_data["has_bias"] = bias.has_value() && bias->defined();
    return call_conv_transpose(input, weight, bias, stride, crop_lo, out_size, dilation, groups, padding_mode);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &input = saved[0], &weight = saved[1], &grad = grad_outputs[0];
    const SavedArguments a(ctx);
    variable_list grads(9);
    if (ctx->needs_input_grad(0)) {
      const auto out_size = ctx->saved_data["out_size"].toSymIntVector();
      const auto shape = weight_shape_of(weight);
      const auto pad_hi = pad_hi_for(out_size, input.sym_sizes().slice(2), a.pad_lo, at::IntArrayRef(shape).slice(2),
                                     a.stride, a.dilation);
      grads[0] = call_conv(grad, weight, std::nullopt, a.stride, a.pad_lo, pad_hi, a.dilation, a.groups,
                           a.padding_mode);
    }
    weight_and_bias_grads(ctx, a, grad, input, weight, grad, grads);
    return grads;
  }
};

struct ConvWeightGrad : public torch::autograd::Function<ConvWeightGrad> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& grad_output,
                            at::IntArrayRef weight_shape, at::IntArrayRef stride, c10::SymIntArrayRef pad_lo,
                            at::IntArrayRef dilation, int64_t groups, c10::string_view padding_mode) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    ctx->save_for_backward({input, grad_output});
    save_arguments(ctx, stride, pad_lo, dilation, groups, padding_mode);
    return call_conv_weight_grad(input, grad_output, weight_shape, stride, pad_lo, dilation, groups, padding_mode);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &input = saved[0], &grad_output = saved[1], &grad_grad_weight = grad_outputs[0];
    const SavedArguments a(ctx);
    variable_list grads(8);
    if (ctx->needs_input_grad(0)) {
      grads[0] = call_conv_transpose(grad_output, grad_grad_weight, std::nullopt, a.stride, a.pad_lo,
                                     input.sym_sizes().slice(2), a.dilation, a.groups, a.padding_mode);
    }
    if (ctx->needs_input_grad(1)) {
      const auto shape = weight_shape_of(grad_grad_weight);
      const auto pad_hi = pad_hi_for(input.sym_sizes().slice(2), grad_output.sym_sizes().slice(2), a.pad_lo,
                                     at::IntArrayRef(shape).slice(2), a.stride, a.dilation);
      grads[1] = call_conv(input, grad_grad_weight, std::nullopt, a.stride, a.pad_lo, pad_hi, a.dilation, a.groups,
                           a.padding_mode);
    }
    return grads;
  }
};

// Whether a call records a backward: grad mode on and a tensor that requires grad, as torch's own ops decide, or a
// tensor with a forward-mode gradient (which Function::apply refuses, as it did). Other calls run the op below the
// Autograd key directly, skipping Function::apply's bookkeeping (about 1.5 us of a 12 us call of a 1x79x8x8 1x1 conv
// on one core of a Zen 4, under torch.no_grad).
bool records_backward(const at::Tensor& first, const at::Tensor& second, const std::optional<at::Tensor>& third) {
  const bool grad_mode = at::GradMode::is_enabled();
  const auto records = [grad_mode](const at::Tensor& t) {
    return t.defined() && ((grad_mode && t.requires_grad()) || t._fw_grad(/*level=*/0).defined());
  };
  return records(first) || records(second) || (third.has_value() && records(*third));
}

at::Tensor conv_autograd(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                         at::IntArrayRef stride, c10::SymIntArrayRef pad_lo, c10::SymIntArrayRef pad_hi,
                         at::IntArrayRef dilation, int64_t groups, c10::string_view padding_mode) {
  check_concrete_range("fastpad.conv", "pad_lo", pad_lo);
  check_concrete_range("fastpad.conv", "pad_hi", pad_hi);
  if (!records_backward(input, weight, bias)) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return call_conv(input, weight, bias, stride, pad_lo, pad_hi, dilation, groups, padding_mode);
  }
  return Conv::apply(input, weight, bias, stride, pad_lo, pad_hi, dilation, groups, padding_mode);
}

at::Tensor conv_transpose_autograd(const at::Tensor& input, const at::Tensor& weight,
                                   const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                   c10::SymIntArrayRef crop_lo, c10::SymIntArrayRef out_size, at::IntArrayRef dilation,
                                   int64_t groups, c10::string_view padding_mode) {
  check_concrete_range("fastpad.conv_transpose", "crop_lo", crop_lo);
  check_concrete_range("fastpad.conv_transpose", "out_size", out_size);
  if (!records_backward(input, weight, bias)) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return call_conv_transpose(input, weight, bias, stride, crop_lo, out_size, dilation, groups, padding_mode);
  }
  return ConvTranspose::apply(input, weight, bias, stride, crop_lo, out_size, dilation, groups, padding_mode);
}

at::Tensor conv_weight_grad_autograd(const at::Tensor& input, const at::Tensor& grad_output,
                                     at::IntArrayRef weight_shape, at::IntArrayRef stride, c10::SymIntArrayRef pad_lo,
                                     at::IntArrayRef dilation, int64_t groups, c10::string_view padding_mode) {
  check_concrete_range("fastpad.conv_weight_grad", "pad_lo", pad_lo);
  if (!records_backward(input, grad_output, std::nullopt)) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return call_conv_weight_grad(input, grad_output, weight_shape, stride, pad_lo, dilation, groups, padding_mode);
  }
  return ConvWeightGrad::apply(input, grad_output, weight_shape, stride, pad_lo, dilation, groups, padding_mode);
}

}  // namespace

TORCH_LIBRARY_IMPL(fastpad, Autograd, m) {
  m.impl("conv", &conv_autograd);
  m.impl("conv_transpose", &conv_transpose_autograd);
  m.impl("conv_weight_grad", &conv_weight_grad_autograd);
}

}  // namespace fastpad
