"""Public convolution functions: argument normalisation and checks, then one call of a fastpad op: in eager mode
through fastpad._C (csrc/eager_calls.cpp), which skips torch.ops' boxed call, else through torch.ops.

The padding is resolved per call from the actual input size (docs/DESIGN.md section 2) and handed to the op as
numeric pads; the kernels never build the padded input.
"""
from __future__ import annotations

from typing import Optional, Sequence, Union

import torch
from torch import Tensor

from . import _C, _geometry, _onnx
from . import _ops  # noqa: F401  (registers the ops, their fake kernels and autograd)
from ._geometry import PaddingArg

IntArg = Union[int, Sequence[int]]


def _check_tensors(fn: str, input, weight, spatial_dims: int) -> _geometry.Report:
    """Checks that input and weight are tensors with `spatial_dims` spatial dims (the ops take any of 1 to 3) and
    agree in dtype and device. Returns the Report of the checks that follow."""
    rank = spatial_dims + 2
    for name, tensor in (("input", input), ("weight", weight)):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{fn}: {name} must be a torch.Tensor, got {type(tensor).__name__}")
        if tensor.dim() != rank:
            raise ValueError(f"{fn}: {name} must be {rank}-d ([N, C, *spatial] with {spatial_dims} spatial dims), "
                             f"got shape {tuple(tensor.shape)}")
    # Under torch.autocast the op casts its inputs to one dtype itself (csrc/autocast.cpp), as torch's convs do.
    report = _geometry.Report(fn, public=True, autocast=_autocast_on(input))
    _geometry.check_tensor_pair(report, input, "weight", weight)
    return report


# Calls whose checks passed, memoised: the op arguments the checks resolved, per key of everything they read (the
# shapes, dtypes and devices of the tensors, whether autocast is on, and the repr of the other arguments, which tells
# 2 from 2.0 and True). A layer called again with inputs of the same shape then skips the checks, which took about
# 70 us against the 12 us of torch's own convolution of a 1x4x8x8 input (2-core CPU). Calls under torch.compile, whose
# shapes may be symbolic, are checked every time.
_RESOLVED: dict = {}
_RESOLVED_LIMIT = 4096


def _resolved(key: tuple, resolve):
    """resolve(), or its result for an earlier call with the same key."""
    if torch.compiler.is_compiling():
        return resolve()
    try:
        return _RESOLVED[key]
    except KeyError:
        pass
    except TypeError:  # a tensor argument that is neither a tensor nor hashable: the checks raise
        return resolve()
    value = resolve()
    if len(_RESOLVED) >= _RESOLVED_LIMIT:
        _RESOLVED.clear()
    _RESOLVED[key] = value
    return value


def _tensor_key(tensor) -> tuple:
    """What the checks read of a tensor argument (anything else, e.g. None, stands for itself)."""
    if isinstance(tensor, torch.Tensor):
        return tensor.shape, tensor.dtype, tensor.device
    return (tensor,)


def _call_key(fn: str, input, weight, bias, arguments: tuple) -> tuple:
    """The memo key of a public call: everything its checks read."""
    return (fn, _tensor_key(input), _tensor_key(weight), _tensor_key(bias), repr(arguments),
            isinstance(input, torch.Tensor) and _autocast_on(input))


def _device_type(tensor: Tensor) -> str:
    # Tensor.device.type costs 0.2 us, twice the rest of _autocast_on: the common devices are asked for directly.
    return "cpu" if tensor.is_cpu else "cuda" if tensor.is_cuda else tensor.device.type


def _autocast_on(input) -> bool:
    # Devices without autocast (meta) must not be asked: torch.is_autocast_enabled raises for them. CPU and CUDA always
    # have it; asking torch.amp.is_autocast_available breaks torch.compile's graph on some torch versions (2.11).
    device_type = _device_type(input)
    if device_type not in ("cpu", "cuda") and not torch.amp.is_autocast_available(device_type):
        return False
    return torch.is_autocast_enabled(device_type)


def _conv_arguments(spatial_dims, input, weight, bias, stride, padding, dilation, groups, padding_mode):
    """Checks a conv call and resolves its padding: (stride, dilation, pads, pad_lo, pad_hi) as lists, pads one
    (lo, hi) per dim."""
    fn = f"fastpad.conv{spatial_dims}d"
    report = _check_tensors(fn, input, weight, spatial_dims)
    _geometry.check_conv_tensors(report, input, weight, bias, groups)
    stride = _geometry.expand_ints(report, "stride", stride, spatial_dims, 1)
    dilation = _geometry.expand_ints(report, "dilation", dilation, spatial_dims, 1)
    _geometry.check_padding_mode(report, padding_mode)
    input_size, kernel = _geometry.spatial_sizes(input), _geometry.spatial_sizes(weight)
    pads = _geometry.conv_pads(padding, input_size, kernel, stride, dilation)
    pad_lo, pad_hi = [lo for lo, _ in pads], [hi for _, hi in pads]
    # Neither side of a 'same' pad exceeds k_eff // 2: the total is at most k_eff - 1.
    pad_bounds = ([_geometry.effective_kernel(k, d) // 2 for k, d in zip(kernel, dilation)]
                  if padding in ("same", "same_lower") else None)
    _geometry.conv_output_sizes(report, input_size, kernel, stride, dilation, pad_lo, pad_hi, padding_mode, pad_bounds)
    return stride, dilation, pads, pad_lo, pad_hi


def conv_nd(spatial_dims: int, input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntArg = 1,
            padding: PaddingArg = "same", dilation: IntArg = 1, groups: int = 1,
            padding_mode: str = "zeros") -> Tensor:
    key = _call_key(f"conv{spatial_dims}d", input, weight, bias, (stride, padding, dilation, groups, padding_mode))
    stride, dilation, pads, pad_lo, pad_hi = _resolved(
        key, lambda: _conv_arguments(spatial_dims, input, weight, bias, stride, padding, dilation, groups,
                                     padding_mode))
    if _geometry.onnx_exporting():  # keeps 'same' size-independent in the graph (auto_pad, or pads from Shape)
        return _onnx.conv(input, weight, bias, stride, pads, padding, dilation, groups, padding_mode)
    if not torch.compiler.is_compiling():
        output = _C.conv(input, weight, bias, stride, pad_lo, pad_hi, dilation, groups, padding_mode)
        if output is not NotImplemented:
            return output
    return torch.ops.fastpad.conv(input, weight, bias, stride, pad_lo, pad_hi, dilation, groups, padding_mode)


def _conv_transpose_arguments(spatial_dims, input, weight, bias, stride, padding, output_padding, groups, dilation):
    """Checks a conv_transpose call and resolves its crop: (stride, dilation, crop_lo, out_size) as lists."""
    fn = f"fastpad.conv_transpose{spatial_dims}d"
    report = _check_tensors(fn, input, weight, spatial_dims)
    _geometry.check_conv_transpose_tensors(report, input, weight, bias, groups)
    stride = _geometry.expand_ints(report, "stride", stride, spatial_dims, 1)
    dilation = _geometry.expand_ints(report, "dilation", dilation, spatial_dims, 1)
    output_padding = _geometry.expand_ints(report, "output_padding", output_padding, spatial_dims, 0)
    for extra, s, d in zip(output_padding, stride, dilation):
        if extra >= max(s, d):
            raise ValueError(f"{fn}: output_padding must be smaller than max(stride, dilation) in every dim, got "
                             f"output_padding={output_padding}, stride={stride}, dilation={dilation}")
    try:
        crop_lo, out_size = _geometry.transposed_crops(padding, _geometry.spatial_sizes(input),
                                                       _geometry.spatial_sizes(weight), stride, dilation,
                                                       output_padding)
    except (ValueError, TypeError) as error:
        raise type(error)(f"{fn}: {error}") from None
    return stride, dilation, crop_lo, out_size


def conv_transpose_nd(spatial_dims: int, input: Tensor, weight: Tensor, bias: Optional[Tensor] = None,
                      stride: IntArg = 1, padding: PaddingArg = "same", output_padding: IntArg = 0, groups: int = 1,
                      dilation: IntArg = 1) -> Tensor:
    key = _call_key(f"conv_transpose{spatial_dims}d", input, weight, bias,
                    (stride, padding, output_padding, groups, dilation))
    stride, dilation, crop_lo, out_size = _resolved(
        key, lambda: _conv_transpose_arguments(spatial_dims, input, weight, bias, stride, padding, output_padding,
                                               groups, dilation))
    if _geometry.onnx_exporting():
        return _onnx.conv_transpose(input, weight, bias, stride, crop_lo, out_size, dilation, groups)
    if not torch.compiler.is_compiling():
        output = _C.conv_transpose(input, weight, bias, stride, crop_lo, out_size, dilation, groups, "zeros")
        if output is not NotImplemented:
            return output
    return torch.ops.fastpad.conv_transpose(input, weight, bias, stride, crop_lo, out_size, dilation, groups, "zeros")


def conv1d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntArg = 1,
           padding: PaddingArg = "same", dilation: IntArg = 1, groups: int = 1, padding_mode: str = "zeros") -> Tensor:
    """1-d convolution with fused padding; `padding="causal"` pads k_eff - 1 at the start only. See `conv2d`.

    >>> x, w = torch.randn(2, 64, 1000), torch.randn(64, 1, 4)
    >>> conv1d(x, w, padding="causal", groups=64).shape   # Mamba-style causal depthwise conv
    torch.Size([2, 64, 1000])
    """
    return conv_nd(1, input, weight, bias, stride, padding, dilation, groups, padding_mode)


def conv2d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntArg = 1,
           padding: PaddingArg = "same", dilation: IntArg = 1, groups: int = 1, padding_mode: str = "zeros") -> Tensor:
    """2-d convolution whose padding is fused into the kernel (no padded copy of the input).

    padding: "same" (TF/Keras SAME, any stride), "same_lower", "valid", "causal", an int or tuple of ints
    (torch meaning), or one (lo, hi) pair per spatial dim. padding_mode: zeros, reflect, replicate, circular.
    Equal to F.conv2d(F.pad(input, pads, mode), weight, bias, stride, 0, dilation, groups).

    >>> x, w = torch.randn(1, 3, 224, 224), torch.randn(32, 3, 3, 3)
    >>> conv2d(x, w, stride=2).shape
    torch.Size([1, 32, 112, 112])
    """
    return conv_nd(2, input, weight, bias, stride, padding, dilation, groups, padding_mode)


def conv3d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntArg = 1,
           padding: PaddingArg = "same", dilation: IntArg = 1, groups: int = 1, padding_mode: str = "zeros") -> Tensor:
    """3-d convolution with fused padding. See `conv2d`.

    >>> x, w = torch.randn(1, 4, 9, 16, 16), torch.randn(8, 4, 3, 3, 3)
    >>> conv3d(x, w, stride=2).shape                       # 'same': ceil(size / stride)
    torch.Size([1, 8, 5, 8, 8])
    """
    return conv_nd(3, input, weight, bias, stride, padding, dilation, groups, padding_mode)


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntArg = 1,
                     padding: PaddingArg = "same", output_padding: IntArg = 0, groups: int = 1,
                     dilation: IntArg = 1) -> Tensor:
    """1-d transposed convolution with the crop fused. See `conv_transpose2d`.

    >>> x, w = torch.randn(1, 32, 50), torch.randn(32, 16, 16)
    >>> conv_transpose1d(x, w, stride=8).shape             # HiFi-GAN-style upsampling: out = in * stride
    torch.Size([1, 16, 400])
    """
    return conv_transpose_nd(1, input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntArg = 1,
                     padding: PaddingArg = "same", output_padding: IntArg = 0, groups: int = 1,
                     dilation: IntArg = 1) -> Tensor:
    """2-d transposed convolution whose crop is fused into the kernel.

    padding: "same" (out = in*stride, TF conv2d_transpose SAME), "same_lower", "valid" (the full output),
    an int or tuple of ints (torch meaning: crop both sides), or one (lo, hi) crop pair per spatial dim.

    >>> x, w = torch.randn(1, 128, 64, 64), torch.randn(128, 64, 4, 4)
    >>> conv_transpose2d(x, w, stride=2).shape
    torch.Size([1, 64, 128, 128])
    """
    return conv_transpose_nd(2, input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose3d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntArg = 1,
                     padding: PaddingArg = "same", output_padding: IntArg = 0, groups: int = 1,
                     dilation: IntArg = 1) -> Tensor:
    """3-d transposed convolution with the crop fused. See `conv_transpose2d`.

    >>> x, w = torch.randn(1, 8, 4, 5, 6), torch.randn(8, 4, 3, 3, 3)
    >>> conv_transpose3d(x, w, stride=2).shape
    torch.Size([1, 4, 8, 10, 12])
    """
    return conv_transpose_nd(3, input, weight, bias, stride, padding, output_padding, groups, dilation)
