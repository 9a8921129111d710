// fastpad._C.conv and fastpad._C.conv_transpose: the public functions' eager calls of the two ops, through the same
// typed dispatcher handles the autograd and autocast kernels use, without torch.ops' boxed call. torch.ops converts
// the 9 arguments to IValues against the schema and back (about 4 us of a 12 us call of a 1x79x8x8 1x1 conv on one
// core of a Zen 4); a direct call reads them here. The dispatcher still runs every key (autograd, autocast, dispatch
// modes, vmap), so only what torch.ops does in Python is skipped: __torch_function__, which a call with a tensor
// subclass or under a torch function mode asks for, and the Python dispatcher (tracing). Those calls get
// NotImplemented back, and fastpad/functional.py makes them through torch.ops.
#include <ATen/PythonTorchFunctionTLS.h>
#include <Python.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <optional>
#include <vector>

#include "eager_calls.h"
#include "op_handles.h"

namespace fastpad {
namespace {

// Whether `object` is a tensor that asks for no __torch_function__: a plain tensor, or a subclass whose
// __torch_function__ is torch's disabled one (nn.Parameter).
bool plain_tensor(PyObject* object) {
  if (THPVariable_CheckExact(object)) return true;
  if (!THPVariable_Check(object)) return false;
  static PyObject* const disabled = [] {
    PyObject* torch_c = PyImport_ImportModule("torch._C");
    PyObject* impl = torch_c ? PyObject_GetAttrString(torch_c, "_disabled_torch_function_impl") : nullptr;
    Py_XDECREF(torch_c);
    PyErr_Clear();
    return impl;  // kept for the process's life
  }();
  PyObject* impl = PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(object)), "__torch_function__");
  if (impl == nullptr) {
    PyErr_Clear();
    return false;
  }
  const bool is_disabled = impl == disabled;
  Py_DECREF(impl);
  return is_disabled;
}

// A list or tuple of Python ints (functional.py hands the ops lists), or nullopt for anything else.
std::optional<std::vector<int64_t>> int_list(PyObject* object) {
  if (!PyList_Check(object) && !PyTuple_Check(object)) return std::nullopt;
  PyObject* const* items = PySequence_Fast_ITEMS(object);
  const Py_ssize_t count = PySequence_Fast_GET_SIZE(object);
  std::vector<int64_t> values(count);
  for (Py_ssize_t i = 0; i < count; ++i) {
    if (!PyLong_CheckExact(items[i])) return std::nullopt;
    int overflow = 0;
    values[i] = PyLong_AsLongLongAndOverflow(items[i], &overflow);
    if (overflow != 0) return std::nullopt;
  }
  return values;
}

std::vector<c10::SymInt> sym_ints(const std::vector<int64_t>& values) {
  return std::vector<c10::SymInt>(values.begin(), values.end());
}

// (input, weight, bias, stride, two int lists, dilation, groups, padding_mode): op's result, or NotImplemented where
// the call needs torch.ops (see the top) or its arguments are not of the types functional.py passes.
PyObject* call_op(const char* name, const c10::TypedOperatorHandle<ConvSignature>& op, PyObject* const* args,
                  Py_ssize_t count) {
  HANDLE_TH_ERRORS
  if (count != 9) {
    PyErr_Format(PyExc_TypeError, "fastpad._C.%s takes 9 arguments, got %zd", name, count);
    return nullptr;
  }
  PyObject *input = args[0], *weight = args[1], *bias = args[2];
  const bool plain = plain_tensor(input) && plain_tensor(weight) && (bias == Py_None || plain_tensor(bias)) &&
                     !at::impl::torch_function_mode_enabled() &&
                     !c10::impl::tls_is_dispatch_key_included(c10::DispatchKey::PythonDispatcher);
  const auto stride = int_list(args[3]), first = int_list(args[4]), second = int_list(args[5]),
             dilation = int_list(args[6]);
  if (!plain || !stride || !first || !second || !dilation || !PyLong_CheckExact(args[7]) ||
      !PyUnicode_Check(args[8])) {
    Py_RETURN_NOTIMPLEMENTED;
  }
  const int64_t groups = PyLong_AsLongLong(args[7]);
  if (groups == -1 && PyErr_Occurred()) return nullptr;
  Py_ssize_t mode_length = 0;
  const char* mode = PyUnicode_AsUTF8AndSize(args[8], &mode_length);
  if (mode == nullptr) return nullptr;
  const at::Tensor& x = THPVariable_Unpack(input);
  const at::Tensor& w = THPVariable_Unpack(weight);
  const std::optional<at::Tensor> b = bias == Py_None ? std::nullopt : std::optional(THPVariable_Unpack(bias));
  const auto first_values = sym_ints(*first), second_values = sym_ints(*second);
  at::Tensor result;
  {
    pybind11::gil_scoped_release no_gil;  // as torch.ops releases it
    result = op.call(x, w, b, *stride, first_values, second_values, *dilation, groups,
                     c10::string_view(mode, mode_length));
  }
  return THPVariable_Wrap(std::move(result));
  END_HANDLE_TH_ERRORS
}

PyObject* conv(PyObject* /*module*/, PyObject* const* args, Py_ssize_t count) {
  static const auto op = find_op<ConvSignature>(kConv);
  return call_op("conv", op, args, count);
}

PyObject* conv_transpose(PyObject* /*module*/, PyObject* const* args, Py_ssize_t count) {
  static const auto op = find_op<ConvSignature>(kConvTranspose);
  return call_op("conv_transpose", op, args, count);
}

PyMethodDef methods[] = {
    {"conv", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&conv)), METH_FASTCALL,
     "conv(input, weight, bias, stride, pad_lo, pad_hi, dilation, groups, padding_mode): torch.ops.fastpad.conv's "
     "eager call, or NotImplemented where it needs torch.ops"},
    {"conv_transpose", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&conv_transpose)), METH_FASTCALL,
     "conv_transpose(input, weight, bias, stride, crop_lo, out_size, dilation, groups, padding_mode): "
     "torch.ops.fastpad.conv_transpose's eager call, or NotImplemented where it needs torch.ops"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

PyMethodDef* eager_call_methods() { return methods; }

}  // namespace fastpad
