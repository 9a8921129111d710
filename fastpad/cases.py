"""One record of a convolution case, shared by everything that describes one: the reference, `python -m fastpad
check`, the benchmark suite (fastpad/bench), and the tests (the fuzz, the kernel-path calls, the CUDA tables).

A `ConvCase` is one call of the public API, fastpad.conv{1,2,3}d or fastpad.conv_transpose{1,2,3}d: the op, the
sizes, and the arguments exactly as a user passes them (the padding spec unresolved; kernel, stride, dilation and
output_padding an int for every dimension or a tuple per dimension), plus the dtype and memory layout of the input.
It gives that call as a function (x, weight, bias) -> output, the reference function of the same call
(fastpad/reference.py, with the pads or crops of fastpad/_geometry.py), and fresh random inputs.
"""
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple, Union

import torch

from fastpad.reference import reference_conv, reference_conv_transpose

IntOrTuple = Union[int, Tuple[int, ...]]
Padding = Union[str, int, Tuple[int, ...], Tuple[Tuple[int, int], ...]]

# Memory layouts of an input: channels_last(_3d) exists for 2-d and 3-d convolutions only (elsewhere it is plain
# contiguous); "strided" is a non-contiguous view of the same values; "expanded" repeats the first batch entry with
# stride 0, as a broadcast input does.
LAYOUTS = ("contiguous", "channels_last", "strided", "expanded")
CHANNELS_LAST_FORMAT = {4: torch.channels_last, 5: torch.channels_last_3d}


def dtype_name(dtype: torch.dtype) -> str:
    """The name ConvCase.dtype takes for a torch dtype: torch.float32 -> 'float32'."""
    return str(dtype).replace("torch.", "")


def arrange(tensor: torch.Tensor, layout: str) -> torch.Tensor:
    """`tensor` in `layout` (one of LAYOUTS), with the same values.

    The strided view lies inside a tensor twice as wide in the last dimension whose other elements are NaN, so a
    kernel that reads past the view's elements turns its output into NaN.
    """
    if layout == "channels_last":
        memory_format = CHANNELS_LAST_FORMAT.get(tensor.dim())
        return tensor.contiguous(memory_format=memory_format) if memory_format else tensor.contiguous()
    if layout == "strided":
        wide = tensor.new_full(tensor.shape[:-1] + (2 * tensor.shape[-1],), float("nan"))
        wide[..., 1::2] = tensor
        return wide[..., 1::2]
    if layout == "expanded":
        return tensor[:1].expand(tensor.shape)
    if layout != "contiguous":
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    return tensor.contiguous()


@dataclass(frozen=True)
class ConvCase:
    """One call of fastpad's public API on inputs of one shape, dtype and layout.

    For a transposed convolution, in_channels and out_channels are the op's own (weight [in, out/groups, *kernel]),
    padding is its crop spec, and padding_mode stays "zeros".
    """
    transposed: bool
    size: Tuple[int, ...]  # the input's spatial size; its length is the number of spatial dimensions
    in_channels: int
    out_channels: int
    kernel: IntOrTuple
    stride: IntOrTuple = 1
    padding: Padding = "same"
    dilation: IntOrTuple = 1
    groups: int = 1
    padding_mode: str = "zeros"  # convolution only
    output_padding: IntOrTuple = 0  # transposed convolution only
    batch: int = 2
    bias: bool = True
    dtype: str = "float32"
    layout: str = "contiguous"  # of the input

    @property
    def dims(self) -> int:
        return len(self.size)

    @property
    def op_name(self) -> str:
        return f"conv_transpose{self.dims}d" if self.transposed else f"conv{self.dims}d"

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    def per_dim(self, value: IntOrTuple) -> Tuple[int, ...]:
        """An int for every spatial dimension, or a tuple per dimension, as a tuple."""
        return (value,) * self.dims if isinstance(value, int) else tuple(value)

    def input_shape(self) -> Tuple[int, ...]:
        return (self.batch, self.in_channels) + tuple(self.size)

    def weight_shape(self) -> Tuple[int, ...]:
        channels = ((self.in_channels, self.out_channels // self.groups) if self.transposed
                    else (self.out_channels, self.in_channels // self.groups))
        return channels + self.per_dim(self.kernel)

    def kwargs(self) -> dict:
        """The keyword arguments of the public API call."""
        kwargs = dict(stride=self.stride, padding=self.padding, dilation=self.dilation, groups=self.groups)
        if self.transposed:
            kwargs["output_padding"] = self.output_padding
        else:
            kwargs["padding_mode"] = self.padding_mode
        return kwargs

    def fastpad_function(self) -> Callable:
        """fastpad's public API for this case: (x, weight, bias) -> output."""
        import fastpad

        op, kwargs = getattr(fastpad, self.op_name), self.kwargs()
        return lambda x, w, b: op(x, w, b, **kwargs)

    def pads(self) -> List[Tuple[int, int]]:
        """The (lo, hi) pads of a convolution per spatial dimension, from fastpad/_geometry.py. Explicit (lo, hi)
        pairs are taken as they are, unchecked: the ops also take a negative pad_hi (a crop), which op-level tests use
        and the public API refuses."""
        from fastpad._geometry import conv_pads

        if not isinstance(self.padding, (str, int)) and all(isinstance(pair, (tuple, list)) for pair in self.padding):
            return [tuple(pair) for pair in self.padding]

        return conv_pads(self.padding, list(self.size), list(self.per_dim(self.kernel)), self.per_dim(self.stride),
                         self.per_dim(self.dilation))

    def conv_output_size(self) -> List[int]:
        """The spatial size of a convolution's output (not a transposed one's)."""
        from fastpad._geometry import conv_out_size

        return [conv_out_size(i, lo, hi, k, s, d) for i, (lo, hi), k, s, d in
                zip(self.size, self.pads(), self.per_dim(self.kernel), self.per_dim(self.stride),
                    self.per_dim(self.dilation))]

    def crops(self) -> Tuple[List[int], List[int]]:
        """(crop_lo, out_size) of a transposed convolution per spatial dimension, from fastpad/_geometry.py."""
        from fastpad._geometry import transposed_crops

        return transposed_crops(self.padding, list(self.size), list(self.per_dim(self.kernel)),
                                self.per_dim(self.stride), self.per_dim(self.dilation),
                                self.per_dim(self.output_padding))

    def conv_op_arguments(self) -> tuple:
        """The arguments after (input, weight, bias) of the fastpad::conv op for this convolution: (stride, pad_lo,
        pad_hi, dilation, groups, padding_mode), the pads resolved."""
        pads = self.pads()
        return (list(self.per_dim(self.stride)), [lo for lo, _ in pads], [hi for _, hi in pads],
                list(self.per_dim(self.dilation)), self.groups, self.padding_mode)

    def reference_function(self) -> Callable:
        """The reference (fastpad/reference.py) of this case: (x, weight, bias) -> output, built with plain torch ops
        and a padded (or full, then cropped) intermediate."""
        stride, dilation = list(self.per_dim(self.stride)), list(self.per_dim(self.dilation))
        if self.transposed:
            crop_lo, out_size = self.crops()
            return lambda x, w, b: reference_conv_transpose(x, w, b, stride, crop_lo, out_size, dilation, self.groups)
        pads = self.pads()
        return lambda x, w, b: reference_conv(x, w, b, stride, pads, dilation, self.groups, self.padding_mode)

    def random_inputs(self, generator: Optional[torch.Generator] = None, device="cpu",
                      weight_scale: float = 1.0) -> Tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
        """Fresh standard-normal (x, weight, bias) of this case's shapes and dtype on `device` (bias None without
        one), x arranged in the case's layout, the weight multiplied by weight_scale. With a generator, the values are
        drawn in float64 on the CPU, so a seed gives the same values on every device and in every dtype; without one,
        they are drawn where they live, from torch's global generator."""
        def randn(shape: Sequence[int]) -> torch.Tensor:
            if generator is None:
                return torch.randn(tuple(shape), dtype=self.torch_dtype, device=device)
            return torch.randn(tuple(shape), generator=generator, dtype=torch.float64).to(device, self.torch_dtype)

        x, w = randn(self.input_shape()), randn(self.weight_shape())
        b = randn((self.out_channels,)) if self.bias else None
        return arrange(x, self.layout), w if weight_scale == 1 else w * weight_scale, b

    def describe(self) -> str:
        """e.g. "conv2d 8x96x112x112->96 k3 s2 'same' g96 no bias float32 channels_last" """
        return " ".join([self.op_name, self.shape_text(), self.dtype, self.layout])

    def shape_text(self) -> str:
        """The shapes and arguments, e.g. "8x96x112x112->96 k3 s2 'same' g96 no bias" """
        def compact(value):
            return str(value) if isinstance(value, (int, str)) else "x".join(map(str, value))

        parts = ["x".join(map(str, self.input_shape())) + f"->{self.out_channels}", f"k{compact(self.kernel)}",
                 f"s{compact(self.stride)}", repr(self.padding)]
        if self.per_dim(self.dilation) != (1,) * self.dims:
            parts.append(f"d{compact(self.dilation)}")
        if self.groups != 1:
            parts.append(f"g{self.groups}")
        if self.padding_mode != "zeros":
            parts.append(self.padding_mode)
        if self.transposed and self.per_dim(self.output_padding) != (0,) * self.dims:
            parts.append(f"output_padding={compact(self.output_padding)}")
        if not self.bias:
            parts.append("no bias")
        return " ".join(parts)
