"""Drop-in convolution layers with fused padding.

Same constructor arguments, parameter names, shapes and default initialisation as torch.nn, so state_dicts
load both ways; `padding` defaults to "same" and is resolved per call from the input's actual size.
"""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import nn
from torch.nn import init

from . import _geometry, functional
from ._geometry import PaddingArg


class _FusedConvNd(nn.Module):
    spatial_dims: int
    transposed: bool

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding: PaddingArg = "same",
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros", output_padding=0,
                 device=None, dtype=None) -> None:
        super().__init__()
        report = _geometry.Report(type(self).__name__, public=True)
        n = self.spatial_dims
        _geometry.check_groups(report, groups, (in_channels, out_channels))
        modes = ("zeros",) if self.transposed else _geometry.PADDING_MODES  # conv_transpose_nd always pads with zeros
        _geometry.check_padding_mode(report, padding_mode, modes)
        _geometry.check_padding(padding, n, self.transposed)
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _geometry.expand_ints(report, "kernel_size", kernel_size, n, 1)
        self.stride = _geometry.expand_ints(report, "stride", stride, n, 1)
        self.dilation = _geometry.expand_ints(report, "dilation", dilation, n, 1)
        self.output_padding = _geometry.expand_ints(report, "output_padding", output_padding, n, 0)
        self.padding = padding
        self.groups = groups
        self.padding_mode = padding_mode
        if self.transposed:
            weight_shape = (in_channels, out_channels // groups, *self.kernel_size)
        else:
            weight_shape = (out_channels, in_channels // groups, *self.kernel_size)
        factory = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(torch.empty(weight_shape, **factory))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_channels, **factory))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # The same draws, in the same order, as torch.nn's _ConvNd.reset_parameters.
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def _check_input(self, input: torch.Tensor) -> None:
        if input.dim() != self.spatial_dims + 2 or input.shape[1] != self.in_channels:
            raise ValueError(f"{type(self).__name__}: expected input [N, {self.in_channels}, *spatial] with "
                             f"{self.spatial_dims} spatial dims (in_channels={self.in_channels}), "
                             f"got shape {tuple(input.shape)}")

    def extra_repr(self) -> str:
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding!r}")
        if any(d != 1 for d in self.dilation):
            text += f", dilation={self.dilation}"
        if any(p != 0 for p in self.output_padding):
            text += f", output_padding={self.output_padding}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        if self.padding_mode != "zeros":
            text += f", padding_mode={self.padding_mode!r}"
        return text


class _FusedConv(_FusedConvNd):
    transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding: PaddingArg = "same",
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None,
                 dtype=None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device=device, dtype=dtype)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        self._check_input(input)
        return functional.conv_nd(self.spatial_dims, input, self.weight, self.bias, self.stride, self.padding,
                                  self.dilation, self.groups, self.padding_mode)


class _FusedConvTranspose(_FusedConvNd):
    transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding: PaddingArg = "same",
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros",
                 device=None, dtype=None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, output_padding, device=device, dtype=dtype)

    def forward(self, input: torch.Tensor, output_size: Optional[list] = None) -> torch.Tensor:
        if output_size is not None:
            raise ValueError(f"{type(self).__name__}: output_size is not supported; use padding and output_padding")
        self._check_input(input)
        return functional.conv_transpose_nd(self.spatial_dims, input, self.weight, self.bias, self.stride,
                                            self.padding, self.output_padding, self.groups, self.dilation)


class Conv1d(_FusedConv):
    """torch.nn.Conv1d with fused padding (default padding="same"; "causal" for causal audio/sequence convs)."""
    spatial_dims = 1


class Conv2d(_FusedConv):
    """torch.nn.Conv2d with fused padding; padding="same" is TF/Keras SAME for any stride.

    >>> layer = Conv2d(3, 32, 3, stride=2)          # tf_efficientnet stem
    >>> layer(torch.randn(1, 3, 225, 225)).shape
    torch.Size([1, 32, 113, 113])
    """
    spatial_dims = 2


class Conv3d(_FusedConv):
    """torch.nn.Conv3d with fused padding."""
    spatial_dims = 3


class ConvTranspose1d(_FusedConvTranspose):
    """torch.nn.ConvTranspose1d with the crop fused; padding="same" gives out = in * stride."""
    spatial_dims = 1


class ConvTranspose2d(_FusedConvTranspose):
    """torch.nn.ConvTranspose2d with the crop fused; padding="same" is TF conv2d_transpose SAME (out = in * stride)."""
    spatial_dims = 2


class ConvTranspose3d(_FusedConvTranspose):
    """torch.nn.ConvTranspose3d with the crop fused."""
    spatial_dims = 3


__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]
