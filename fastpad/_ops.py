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
from ._geometry import conv_out_size, effective_kernel

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


@torch.library.register_fake("fastpad::conv")
def _conv_fake(input, weight, bias, stride, pad_lo, pad_hi, dilation, groups, padding_mode):
    sizes = [conv_out_size(i, lo, hi, k, s, d)
             for i, lo, hi, k, s, d in zip(input.shape[2:], pad_lo, pad_hi, weight.shape[2:], stride, dilation)]
    return _empty_like_layout(input, (input.shape[0], weight.shape[0], *sizes))


@torch.library.register_fake("fastpad::conv_transpose")
def _conv_transpose_fake(input, weight, bias, stride, crop_lo, out_size, dilation, groups, padding_mode="zeros"):
    return _empty_like_layout(input, (input.shape[0], weight.shape[1] * groups, *out_size))


@torch.library.register_fake("fastpad::conv_weight_grad")
def _conv_weight_grad_fake(input, grad_output, weight_shape, stride, pad_lo, dilation, groups, padding_mode):
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
