"""The semantics contract of DESIGN.md section 2, written with plain torch ops.

Convolution: `F.pad` + `F.conv{1,2,3}d`. Transposed convolution: the full `F.conv_transpose{1,2,3}d` (no padding,
no bias), cropped to `[crop_lo, crop_lo + out_size)` per spatial dimension, zero-extended where that window leaves
the full output, plus the bias. These functions build the padded (or full) tensor that fastpad avoids: they are the
yardstick for `python -m fastpad check` and the "F.pad + conv" baseline of `python -m fastpad bench`.
"""
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

CONV_BY_DIMS = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
CONV_TRANSPOSE_BY_DIMS = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}
F_PAD_MODE = {"zeros": "constant", "reflect": "reflect", "replicate": "replicate", "circular": "circular"}


def f_pad_argument(pads: Sequence[Tuple[int, int]]) -> list:
    """(lo, hi) pairs in dimension order -> the flat list F.pad takes (last dimension first)."""
    return [int(amount) for lo_hi in reversed(list(pads)) for amount in lo_hi]


def spatial_dims(x: torch.Tensor) -> int:
    return x.dim() - 2


def reference_conv(x, w, b, stride, pads, dilation, groups, padding_mode="zeros") -> torch.Tensor:
    """F.pad(x, pads, padding_mode) followed by an unpadded torch convolution."""
    padded = F.pad(x, f_pad_argument(pads), mode=F_PAD_MODE[padding_mode])
    return CONV_BY_DIMS[spatial_dims(x)](padded, w, b, stride, 0, dilation, groups)


def crop_or_extend(full: torch.Tensor, crop_lo: Sequence[int], out_size: Sequence[int]) -> torch.Tensor:
    """The window [crop_lo, crop_lo + out_size) of every spatial dimension, zeros where it leaves `full`.

    Zero-extends first (F.pad with positive amounts), then narrows to the window, so a window that starts past
    the end of `full` (a crop larger than the full extent) is all zeros rather than an error.
    """
    extents = full.shape[2:]
    extend = [(max(0, -lo), max(0, lo + size - extent)) for lo, size, extent in zip(crop_lo, out_size, extents)]
    out = F.pad(full, f_pad_argument(extend))
    for dim, (lo, size, (before, _)) in enumerate(zip(crop_lo, out_size, extend), start=2):
        out = out.narrow(dim, lo + before, size)
    return out


def reference_conv_transpose(x, w, b, stride, crop_lo, out_size, dilation, groups) -> torch.Tensor:
    """The full transposed convolution, cropped or zero-extended to out_size, then the bias."""
    dims = spatial_dims(x)
    full = CONV_TRANSPOSE_BY_DIMS[dims](x, w, None, stride, 0, 0, groups, dilation)
    out = crop_or_extend(full, crop_lo, out_size)
    if b is not None:
        out = out + b.reshape((1, -1) + (1,) * dims)
    return out


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """||actual - expected|| / ||expected|| in float64; the plain norm of the difference when expected is zero."""
    if actual.shape != expected.shape:
        return float("inf")
    difference = torch.linalg.vector_norm(actual.detach().double() - expected.detach().double()).item()
    scale = torch.linalg.vector_norm(expected.detach().double()).item()
    return difference / scale if scale > 0 else difference


def output_and_grads(
    function: Callable[..., torch.Tensor],
    inputs: Sequence[Optional[torch.Tensor]],
    grad_output_of: Callable[[torch.Tensor], torch.Tensor],
) -> Tuple[torch.Tensor, list]:
    """Run function(*inputs) and backpropagate grad_output_of(output) into every input that is not None.

    Returns the detached output and the gradients in input order (None where the input is None).
    """
    leaves = [None if t is None else t.detach().requires_grad_() for t in inputs]
    output = function(*leaves)
    present = [t for t in leaves if t is not None]
    grads = iter(torch.autograd.grad(output, present, grad_output_of(output)))
    return output.detach(), [None if t is None else next(grads) for t in leaves]


@dataclass(frozen=True)
class ConvCall:
    """One call of fastpad's public API, fastpad.conv{dims}d or fastpad.conv_transpose{dims}d, with these arguments.

    It gives that call as a function (x, weight, bias) -> output, and the reference function for the same call,
    whose pads or crops come from fastpad._geometry. stride, dilation and output_padding apply to every dimension.
    """
    transposed: bool
    dims: int
    kernel: Tuple[int, ...]
    stride: int
    padding: object
    dilation: int = 1
    groups: int = 1
    padding_mode: str = "zeros"
    output_padding: int = 0

    @property
    def op_name(self) -> str:
        return f"conv_transpose{self.dims}d" if self.transposed else f"conv{self.dims}d"

    def per_dim(self, value: int) -> List[int]:
        return [value] * self.dims

    def fastpad_function(self) -> Callable:
        import fastpad

        op = getattr(fastpad, self.op_name)
        common = dict(stride=self.stride, padding=self.padding, dilation=self.dilation, groups=self.groups)
        if self.transposed:
            return lambda x, w, b: op(x, w, b, output_padding=self.output_padding, **common)
        return lambda x, w, b: op(x, w, b, padding_mode=self.padding_mode, **common)

    def pads(self, input_size: Sequence[int]) -> List[Tuple[int, int]]:
        """The (lo, hi) pads of a convolution, per spatial dimension."""
        from fastpad._geometry import conv_pads

        return conv_pads(self.padding, list(input_size), list(self.kernel), self.per_dim(self.stride),
                         self.per_dim(self.dilation))

    def crops(self, input_size: Sequence[int]) -> Tuple[List[int], List[int]]:
        """(crop_lo, out_size) of a transposed convolution, per spatial dimension."""
        from fastpad._geometry import transposed_crops

        return transposed_crops(self.padding, list(input_size), list(self.kernel), self.per_dim(self.stride),
                                self.per_dim(self.dilation), self.per_dim(self.output_padding))

    def reference_function(self, input_size: Sequence[int]) -> Callable:
        stride, dilation = self.per_dim(self.stride), self.per_dim(self.dilation)
        if self.transposed:
            crop_lo, out_size = self.crops(input_size)
            return lambda x, w, b: reference_conv_transpose(x, w, b, stride, crop_lo, out_size, dilation, self.groups)
        pads = self.pads(input_size)
        return lambda x, w, b: reference_conv(x, w, b, stride, pads, dilation, self.groups, self.padding_mode)
