// Typed handles to fastpad's three ops through the dispatcher, for the public functions' eager calls (eager_calls.cpp)
// and the C++ kernels that call the ops again at another dispatch key: autocast (autocast.cpp) and autograd
// (autograd.cpp).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace fastpad {

template <typename Signature>
c10::TypedOperatorHandle<Signature> find_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

// conv and conv_transpose share a signature: (input, weight, bias, stride, two SymInt lists, dilation, groups, mode),
// the two lists being (pad_lo, pad_hi) for conv and (crop_lo, out_size) for conv_transpose.
using ConvSignature = at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&, at::IntArrayRef,
                                 c10::SymIntArrayRef, c10::SymIntArrayRef, at::IntArrayRef, int64_t, c10::string_view);
using WeightGradSignature = at::Tensor(const at::Tensor&, const at::Tensor&, at::IntArrayRef, at::IntArrayRef,
                                       c10::SymIntArrayRef, at::IntArrayRef, int64_t, c10::string_view);

constexpr char kConv[] = "fastpad::conv";
constexpr char kConvTranspose[] = "fastpad::conv_transpose";
constexpr char kConvWeightGrad[] = "fastpad::conv_weight_grad";

}  // namespace fastpad
