"""Loads the extension and registers, for each of the three ops, its fake kernel and its autograd formula.

Every backward is built only from the registered ops, so torch.compile traces it without graph breaks and
double backward works:
  conv             d/dinput = conv_transpose (same padding mode: the adjoint)   d/dweight = conv_weight_grad
  conv_transpose   d/dinput = conv                                              d/dweight = conv_weight_grad
  conv_weight_grad d/dinput = conv_transpose                                    d/dgrad_output = conv
"""
from __future__ import annotations

import torch

from . import _C  # noqa: F401  (loading the library registers the op schemas and kernels)
from ._geometry import PADDING_MODES, conv_out_size, effective_kernel, transposed_full_size

ops = torch.ops.fastpad


def output_memory_format(input: torch.Tensor) -> torch.memory_format:
    """The layout each op returns: channels_last when the input is (and is not also plain contiguous).
    Mirrors fastpad::output_memory_format in csrc/conv_params.cpp."""
    if input.dim() == 4 and not input.is_contiguous() and input.is_contiguous(memory_format=torch.channels_last):
        return torch.channels_last
    if input.dim() == 5 and not input.is_contiguous() and input.is_contiguous(memory_format=torch.channels_last_3d):
        return torch.channels_last_3d
    return torch.contiguous_format


def _empty_like_layout(input: torch.Tensor, shape) -> torch.Tensor:
    return torch.empty(shape, dtype=input.dtype, device=input.device, memory_format=output_memory_format(input))


def _pad_hi_for(in_size, out_size, pad_lo, kernel, stride, dilation):
    """The pad_hi that makes a conv over `in_size` produce exactly `out_size` positions."""
    return [(o - 1) * s + effective_kernel(k, d) - lo - i
            for i, o, lo, k, s, d in zip(in_size, out_size, pad_lo, kernel, stride, dilation)]


def _reduce_over_positions(grad: torch.Tensor) -> torch.Tensor:
    return grad.sum(dim=[0, *range(2, grad.dim())])


# ---- Argument checks of the fake kernels --------------------------------------------------------------------------
# Meta tensors and FakeTensorMode run the fake kernels instead of the C++ ones, so these repeat the TORCH_CHECKs of
# csrc/conv_params.cpp that decide whether a call is valid (not its int64 size bounds, which only the kernels need),
# with the same messages and the same RuntimeError.


def _require(condition, message: str) -> None:
    """Raises where `condition` is plainly False. A symbolic condition (dynamic shapes under torch.compile) is left to
    the kernel at run time: deciding it here would add a guard."""
    if condition is False:
        raise RuntimeError(message)


def _check_args(op, input, other, other_name, stride, dilation, groups, padding_mode, lists) -> int:
    """The checks all three ops share; `lists` holds (name, values, minimum or None) for the other per-dim int lists.
    Returns the number of spatial dims."""
    _require(3 <= input.dim() <= 5, f"{op}: input must be 3-d, 4-d or 5-d ([N, C, *spatial] with 1 to 3 spatial "
                                     f"dims), got shape {list(input.shape)}")
    _require(other.dim() == input.dim(), f"{op}: {other_name} must have {input.dim()} dims like input (shape "
                                         f"{list(input.shape)}), got {other.dim()}")
    _require(input.dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16),
             f"{op}: input dtype must be float32, float64, bfloat16 or float16, got {input.dtype}")
    _check_like_input(op, other_name, other, input)
    spatial = input.dim() - 2
    for name, values, minimum in (("stride", stride, 1), ("dilation", dilation, 1), *lists):
        _require(len(values) == spatial,
                 f"{op}: {name} must have {spatial} entries (one per spatial dim), got {list(values)}")
        for value in values if minimum is not None else ():
            _require(value >= minimum, f"{op}: every entry of {name} must be >= {minimum}, got {list(values)}")
    _require(groups > 0, f"{op}: groups must be positive, got {groups}")
    _require(padding_mode in PADDING_MODES, f"fastpad: padding_mode must be 'zeros', 'reflect', 'replicate' or "
                                            f"'circular', got '{padding_mode}'")
    return spatial


def _check_like_input(op, name, tensor, input) -> None:
    _require(tensor.dtype == input.dtype, f"{op}: {name} has dtype {tensor.dtype} but input has dtype {input.dtype}")
    _require(tensor.device == input.device, f"{op}: {name} is on {tensor.device} but input is on {input.device}")


def _check_groups(op, groups, channels) -> None:
    for count in channels:
        _require(count % groups == 0, f"{op}: groups={groups} must divide the channel counts, got {list(channels)}")


def _check_bias(op, bias, input, channels) -> None:
    if bias is not None:
        _check_like_input(op, "bias", bias, input)
        _require(bias.dim() == 1, f"{op}: bias must have shape [{channels}], got {list(bias.shape)}")
        _require(bias.shape[0] == channels, f"{op}: bias must have shape [{channels}], got {list(bias.shape)}")


def _check_spatial_sizes(op, name, shape) -> None:
    for size in shape[2:]:
        _require(size >= 1, f"{op}: {name} has an empty spatial dim, shape {list(shape)}")


def _check_mode_pads(op, padding_mode, sizes, pad_lo, pad_hi) -> None:
    """Reflect needs pads < size, circular pads <= size (csrc/conv_params.cpp: check_mode_pads)."""
    for dim, (size, lo, hi) in enumerate(zip(sizes, pad_lo, pad_hi)):
        for pad in (lo, hi):
            if padding_mode == "reflect":
                _require(pad < size, f"{op}: reflect padding needs pads < input size, got pads ({lo}, {hi}) for "
                                     f"size {size} in spatial dim {dim}")
            elif padding_mode == "circular":
                _require(pad <= size, f"{op}: circular padding needs pads <= input size, got pads ({lo}, {hi}) for "
                                      f"size {size} in spatial dim {dim}")


@torch.library.register_fake("fastpad::conv")
def _conv_fake(input, weight, bias, stride, pad_lo, pad_hi, dilation, groups, padding_mode):
    op = "fastpad.conv"
    _check_args(op, input, weight, "weight", stride, dilation, groups, padding_mode,
                [("pad_lo", pad_lo, 0), ("pad_hi", pad_hi, None)])
    in_channels, out_channels = input.shape[1], weight.shape[0]
    _require(out_channels >= 1, f"{op}: weight must have at least one output channel (dim 0), got shape "
                                f"{list(weight.shape)}")
    _check_groups(op, groups, [in_channels, out_channels])
    _require(weight.shape[1] * groups == in_channels, f"{op}: input has {in_channels} channels but weight "
                                                      f"{list(weight.shape)} with groups={groups} has {weight.shape[1]} "
                                                      f"input channels per group, expected {in_channels // groups}")
    _check_bias(op, bias, input, out_channels)
    _check_spatial_sizes(op, "weight", weight.shape)
    _check_spatial_sizes(op, "input", input.shape)
    sizes = []
    for dim, (i, lo, hi, k, s, d) in enumerate(zip(input.shape[2:], pad_lo, pad_hi, weight.shape[2:], stride,
                                                    dilation)):
        _require(i + lo + hi >= effective_kernel(k, d), f"{op}: the kernel (effective size {effective_kernel(k, d)}) "
                                                        f"is larger than the padded input ({i} + {lo} + {hi}) in "
                                                        f"spatial dim {dim}")
        sizes.append(conv_out_size(i, lo, hi, k, s, d))
    _check_mode_pads(op, padding_mode, input.shape[2:], pad_lo, pad_hi)
    return _empty_like_layout(input, (input.shape[0], out_channels, *sizes))


@torch.library.register_fake("fastpad::conv_transpose")
def _conv_transpose_fake(input, weight, bias, stride, crop_lo, out_size, dilation, groups, padding_mode="zeros"):
    op = "fastpad.conv_transpose"
    _check_args(op, input, weight, "weight", stride, dilation, groups, padding_mode,
                [("crop_lo", crop_lo, 0), ("out_size", out_size, 1)])
    in_channels, out_channels = input.shape[1], weight.shape[1] * groups
    _require(in_channels == weight.shape[0], f"{op}: input has {in_channels} channels but weight "
                                             f"{list(weight.shape)} expects {weight.shape[0]}")
    _require(in_channels >= 1, f"{op}: weight must have at least one input channel (dim 0), got shape "
                               f"{list(weight.shape)}")
    _check_groups(op, groups, [in_channels])
    _check_bias(op, bias, input, out_channels)
    _check_spatial_sizes(op, "weight", weight.shape)
    _check_spatial_sizes(op, "input", input.shape)
    crop_hi = [transposed_full_size(i, k, s, d) - lo - o
               for i, k, s, d, lo, o in zip(input.shape[2:], weight.shape[2:], stride, dilation, crop_lo, out_size)]
    _check_mode_pads(op, padding_mode, out_size, crop_lo, crop_hi)
    return _empty_like_layout(input, (input.shape[0], out_channels, *out_size))


@torch.library.register_fake("fastpad::conv_weight_grad")
def _conv_weight_grad_fake(input, grad_output, weight_shape, stride, pad_lo, dilation, groups, padding_mode):
    op = "fastpad.conv_weight_grad"
    _check_args(op, input, grad_output, "grad_output", stride, dilation, groups, padding_mode,
                [("pad_lo", pad_lo, 0)])
    _require(len(weight_shape) == input.dim(), f"{op}: weight_shape must have {input.dim()} entries, got "
                                               f"{list(weight_shape)}")
    for entry in weight_shape:
        _require(entry >= 1, f"{op}: every entry of weight_shape must be >= 1, got {list(weight_shape)}")
    in_channels, out_channels = input.shape[1], weight_shape[0]
    _check_groups(op, groups, [in_channels, out_channels])
    _require(weight_shape[1] * groups == in_channels, f"{op}: input has {in_channels} channels but weight_shape "
                                                      f"{list(weight_shape)} with groups={groups} has "
                                                      f"{weight_shape[1]} input channels per group, expected "
                                                      f"{in_channels // groups}")
    for dim, expected in ((0, input.shape[0]), (1, out_channels)):
        _require(grad_output.shape[dim] == expected, f"{op}: grad_output shape {list(grad_output.shape)} does not "
                                                     f"match batch {input.shape[0]} and {out_channels} output "
                                                     f"channels")
    _check_spatial_sizes(op, "input", input.shape)
    _check_spatial_sizes(op, "grad_output", grad_output.shape)
    pad_hi = _pad_hi_for(input.shape[2:], grad_output.shape[2:], pad_lo, weight_shape[2:], stride, dilation)
    _check_mode_pads(op, padding_mode, input.shape[2:], pad_lo, pad_hi)
    return input.new_empty(weight_shape)


def _conv_setup(ctx, inputs, output):
    input, weight, bias, stride, pad_lo, pad_hi, dilation, groups, padding_mode = inputs
    ctx.save_for_backward(input, weight)
    ctx.args = (stride, pad_lo, dilation, groups, padding_mode)
    ctx.has_bias = bias is not None


def _conv_backward(ctx, grad):
    input, weight = ctx.saved_tensors
    stride, pad_lo, dilation, groups, padding_mode = ctx.args
    grad_input = grad_weight = grad_bias = None
    if ctx.needs_input_grad[0]:
        grad_input = ops.conv_transpose(grad, weight, None, stride, pad_lo, list(input.shape[2:]), dilation, groups,
                                        padding_mode)
    if ctx.needs_input_grad[1]:
        grad_weight = ops.conv_weight_grad(input, grad, list(weight.shape), stride, pad_lo, dilation, groups,
                                           padding_mode)
    if ctx.has_bias and ctx.needs_input_grad[2]:
        grad_bias = _reduce_over_positions(grad)
    return grad_input, grad_weight, grad_bias, None, None, None, None, None, None


def _conv_transpose_setup(ctx, inputs, output):
    input, weight, bias, stride, crop_lo, out_size, dilation, groups, padding_mode = inputs
    ctx.save_for_backward(input, weight)
    ctx.args = (stride, crop_lo, out_size, dilation, groups, padding_mode)
    ctx.has_bias = bias is not None


def _conv_transpose_backward(ctx, grad):
    input, weight = ctx.saved_tensors
    stride, crop_lo, out_size, dilation, groups, padding_mode = ctx.args
    grad_input = grad_weight = grad_bias = None
    if ctx.needs_input_grad[0]:
        pad_hi = _pad_hi_for(out_size, input.shape[2:], crop_lo, weight.shape[2:], stride, dilation)
        grad_input = ops.conv(grad, weight, None, stride, crop_lo, pad_hi, dilation, groups, padding_mode)
    if ctx.needs_input_grad[1]:
        grad_weight = ops.conv_weight_grad(grad, input, list(weight.shape), stride, crop_lo, dilation, groups,
                                           padding_mode)
    if ctx.has_bias and ctx.needs_input_grad[2]:
        grad_bias = _reduce_over_positions(grad)
    return grad_input, grad_weight, grad_bias, None, None, None, None, None, None


def _conv_weight_grad_setup(ctx, inputs, output):
    input, grad_output, weight_shape, stride, pad_lo, dilation, groups, padding_mode = inputs
    ctx.save_for_backward(input, grad_output)
    ctx.args = (stride, pad_lo, dilation, groups, padding_mode)


def _conv_weight_grad_backward(ctx, grad_grad_weight):
    input, grad_output = ctx.saved_tensors
    stride, pad_lo, dilation, groups, padding_mode = ctx.args
    grad_input = grad_grad_output = None
    if ctx.needs_input_grad[0]:
        grad_input = ops.conv_transpose(grad_output, grad_grad_weight, None, stride, pad_lo, list(input.shape[2:]),
                                        dilation, groups, padding_mode)
    if ctx.needs_input_grad[1]:
        pad_hi = _pad_hi_for(input.shape[2:], grad_output.shape[2:], pad_lo, grad_grad_weight.shape[2:], stride,
                             dilation)
        grad_grad_output = ops.conv(input, grad_grad_weight, None, stride, pad_lo, pad_hi, dilation, groups,
                                    padding_mode)
    return grad_input, grad_grad_output, None, None, None, None, None, None


torch.library.register_autograd("fastpad::conv", _conv_backward, setup_context=_conv_setup)
torch.library.register_autograd("fastpad::conv_transpose", _conv_transpose_backward,
                                setup_context=_conv_transpose_setup)
torch.library.register_autograd("fastpad::conv_weight_grad", _conv_weight_grad_backward,
                                setup_context=_conv_weight_grad_setup)
