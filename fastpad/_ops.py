"""Loads the extension and registers, for each of the three ops, its fake kernel (for meta tensors, FakeTensorMode
and torch.compile). Their autograd formulas are C++ kernels at the Autograd dispatch key (csrc/autograd.cpp), built
only from the three ops, so torch.compile traces the backward without graph breaks and double backward works.
"""
from __future__ import annotations

import torch

from . import _C  # noqa: F401  (loading the library registers the op schemas and kernels)
from . import _geometry
from ._geometry import Report, effective_kernel, transposed_full_size

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


# ---- The fake kernels ---------------------------------------------------------------------------------------------
# Meta tensors and FakeTensorMode run the fake kernels instead of the C++ ones, so these run the checks of
# csrc/conv_params.cpp that decide whether a call is valid: those of fastpad/_geometry.py, which the public functions
# share, and the few that only the ops have (ranks, the per-dim lists, empty spatial dims, conv_weight_grad's
# weight_shape and grad_output). Their Reports raise csrc/conv_params.cpp's RuntimeError with its messages.
_CONV = Report("fastpad.conv", public=False)
_CONV_TRANSPOSE = Report("fastpad.conv_transpose", public=False)
_CONV_WEIGHT_GRAD = Report("fastpad.conv_weight_grad", public=False)


def _check_args(report, input, other, other_name, stride, dilation, padding_mode, lists) -> None:
    """The checks all three ops begin with; `lists` holds (name, values, minimum or None) for the other per-dim int
    lists."""
    if report.failed(3 <= input.dim() <= 5):
        raise report.error(ValueError, f"input must be 3-d, 4-d or 5-d ([N, C, *spatial] with 1 to 3 spatial dims), "
                                       f"got shape {report.shape(input.shape)}")
    if report.failed(other.dim() == input.dim()):
        raise report.error(ValueError, f"{other_name} must have {input.dim()} dims like input (shape "
                                       f"{report.shape(input.shape)}), got {other.dim()}")
    _geometry.check_tensor_pair(report, input, other_name, other)
    for name, values, minimum in (("stride", stride, 1), ("dilation", dilation, 1), *lists):
        _geometry.check_ints(report, name, values, input.dim() - 2, minimum)
    _geometry.check_padding_mode(report, padding_mode)


def _check_spatial_sizes(report, name, shape) -> None:
    for size in shape[2:]:
        if report.failed(size >= 1):
            raise report.error(ValueError, f"{name} has an empty spatial dim, shape {report.shape(shape)}")


@torch.library.register_fake("fastpad::conv")
def _conv_fake(input, weight, bias, stride, pad_lo, pad_hi, dilation, groups, padding_mode):
    report = _CONV
    _check_args(report, input, weight, "weight", stride, dilation, padding_mode,
                [("pad_lo", pad_lo, 0), ("pad_hi", pad_hi, None)])
    out_channels = _geometry.check_conv_tensors(report, input, weight, bias, groups)
    _check_spatial_sizes(report, "weight", weight.shape)
    _check_spatial_sizes(report, "input", input.shape)
    sizes = _geometry.conv_output_sizes(report, input.shape[2:], weight.shape[2:], stride, dilation, pad_lo, pad_hi,
                                        padding_mode)
    return _empty_like_layout(input, (input.shape[0], out_channels, *sizes))


@torch.library.register_fake("fastpad::conv_transpose")
def _conv_transpose_fake(input, weight, bias, stride, crop_lo, out_size, dilation, groups, padding_mode="zeros"):
    report = _CONV_TRANSPOSE
    _check_args(report, input, weight, "weight", stride, dilation, padding_mode,
                [("crop_lo", crop_lo, 0), ("out_size", out_size, 1)])
    out_channels = _geometry.check_conv_transpose_tensors(report, input, weight, bias, groups)
    _check_spatial_sizes(report, "weight", weight.shape)
    _check_spatial_sizes(report, "input", input.shape)
    crop_hi = [transposed_full_size(i, k, s, d) - lo - o
               for i, k, s, d, lo, o in zip(input.shape[2:], weight.shape[2:], stride, dilation, crop_lo, out_size)]
    _geometry.check_mode_pads(report, padding_mode, out_size, crop_lo, crop_hi)
    return _empty_like_layout(input, (input.shape[0], out_channels, *out_size))


@torch.library.register_fake("fastpad::conv_weight_grad")
def _conv_weight_grad_fake(input, grad_output, weight_shape, stride, pad_lo, dilation, groups, padding_mode):
    report = _CONV_WEIGHT_GRAD
    _check_args(report, input, grad_output, "grad_output", stride, dilation, padding_mode, [("pad_lo", pad_lo, 0)])
    if report.failed(len(weight_shape) == input.dim()):
        raise report.error(ValueError, f"weight_shape must have {input.dim()} entries, got "
                                       f"{report.shape(weight_shape)}")
    _geometry.check_ints(report, "weight_shape", weight_shape, input.dim(), 1)
    _geometry.check_input_channels(report, input, "weight_shape", weight_shape, groups)
    out_channels = weight_shape[0]
    for dim, expected in ((0, input.shape[0]), (1, out_channels)):
        if report.failed(grad_output.shape[dim] == expected):
            raise report.error(ValueError, f"grad_output shape {report.shape(grad_output.shape)} does not match "
                                           f"batch {input.shape[0]} and {out_channels} output channels")
    _check_spatial_sizes(report, "input", input.shape)
    _check_spatial_sizes(report, "grad_output", grad_output.shape)
    pad_hi = _pad_hi_for(input.shape[2:], grad_output.shape[2:], pad_lo, weight_shape[2:], stride, dilation)
    _geometry.check_mode_pads(report, padding_mode, input.shape[2:], pad_lo, pad_hi)
    return _empty_like_layout(input, weight_shape)  # in the input's layout, as every op's output
