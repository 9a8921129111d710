// The one library definition: the schemas of fastpad's three ops (docs/DESIGN.md section 3).
// Kernels register per backend in csrc/cpu and csrc/cuda, autograd in csrc/autograd.cpp, autocast in csrc/autocast.cpp,
// fake kernels in fastpad/_ops.py.
#include <Python.h>
#include <torch/library.h>

#include "eager_calls.h"

// Importing fastpad._C loads this library, which registers the ops; the module holds the ops' eager calls.
extern "C" PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, fastpad::eager_call_methods()};
  return PyModule_Create(&module_def);
}

// The kernels take any strides and pick their layout from the input's (channels_last or contiguous), so inductor may
// hand them the layout it chose for the graph (channels_last around CPU convolutions) instead of copying to eager's.
constexpr at::Tag kAnyLayout = at::Tag::flexible_layout;

TORCH_LIBRARY(fastpad, m) {
  // y[o] = bias + sum_r w[r] * xpad[o*s - pad_lo + r*d]; xpad resolves positions outside the input by padding_mode.
  m.def(
      "conv(Tensor input, Tensor weight, Tensor? bias, int[] stride, SymInt[] pad_lo, SymInt[] pad_hi, "
      "int[] dilation, int groups, str padding_mode) -> Tensor",
      {kAnyLayout});
  // Scatter of x[i] * w[r] to p = i*s + r*d - crop_lo, kept where 0 <= p < out_size (zeros), or folded back onto
  // the position padding_mode reads p from: the exact adjoint of conv, which makes it conv's input gradient.
  m.def(
      "conv_transpose(Tensor input, Tensor weight, Tensor? bias, int[] stride, SymInt[] crop_lo, SymInt[] out_size, "
      "int[] dilation, int groups, str padding_mode=\"zeros\") -> Tensor",
      {kAnyLayout});
  // gw[r] = sum_o grad_output[o] * xpad[o*s - pad_lo + r*d]: the weight gradient of conv and of conv_transpose.
  m.def(
      "conv_weight_grad(Tensor input, Tensor grad_output, int[] weight_shape, int[] stride, SymInt[] pad_lo, "
      "int[] dilation, int groups, str padding_mode) -> Tensor",
      {kAnyLayout});
  // Private: the kernel path each op takes for these arguments on `backend` ("cpu" or "cuda", whatever device the
  // tensors are on), as kernel_paths.h chooses it. Tests assert the path a case reaches with these.
  m.def(
      "_conv_path(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] pad_lo, int[] pad_hi, "
      "int[] dilation, int groups, str padding_mode, str backend) -> str");
  m.def(
      "_conv_transpose_path(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] crop_lo, int[] out_size, "
      "int[] dilation, int groups, str padding_mode, str backend) -> str");
  m.def(
      "_conv_weight_grad_path(Tensor input, Tensor grad_output, int[] weight_shape, int[] stride, int[] pad_lo, "
      "int[] dilation, int groups, str padding_mode, str backend) -> str");
}
