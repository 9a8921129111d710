"""The padding formulas of docs/DESIGN.md section 2, in one place.

Used by the public functions, the fake kernels and the tests. Every function works on plain ints and on
torch SymInts (under torch.compile with dynamic shapes), so no Python `max`/`ceil` on sizes here.
"""
from __future__ import annotations

import warnings
from typing import List, Sequence, Tuple, Union

import torch

PaddingArg = Union[str, int, Sequence[int], Sequence[Sequence[int]]]
PadPair = Tuple[int, int]

CONV_PADDING_STRINGS = ("same", "same_lower", "valid", "causal")
TRANSPOSED_PADDING_STRINGS = ("same", "same_lower", "valid")
PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def spatial_sizes(tensor: torch.Tensor) -> Sequence:
    """tensor.shape[2:]. torch.jit.trace (and the TorchScript ONNX exporter) hands sizes out as 0-d tensors; there
    they become ints, so a traced graph holds the pads of the size it was traced at, as any Python shape arithmetic
    does under tracing."""
    sizes = tensor.shape[2:]
    if not torch.jit.is_tracing():
        return sizes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        return tuple(int(size) for size in sizes)


def effective_kernel(kernel: int, dilation: int) -> int:
    return dilation * (kernel - 1) + 1


def ceil_div(a, b):
    return -((-a) // b)


def conv_out_size(size, pad_lo, pad_hi, kernel: int, stride: int, dilation: int):
    """out = floor((i + lo + hi - k_eff) / s) + 1"""
    return (size + pad_lo + pad_hi - effective_kernel(kernel, dilation)) // stride + 1


def transposed_full_size(size, kernel: int, stride: int, dilation: int):
    """Uncropped transposed-convolution output: (i - 1) * s + k_eff."""
    return (size - 1) * stride + effective_kernel(kernel, dilation)


def _same_pair(size, kernel: int, stride: int, dilation: int, lower: bool) -> PadPair:
    k_eff = effective_kernel(kernel, dilation)
    if torch.onnx.is_in_onnx_export():
        # The same number, (ceil(i/s) - 1)*s + k_eff - i, without floor division of a negative SymInt: the ONNX
        # exporter turns `//` into Div, which truncates, and `%` into Mod, which is right. (Inductor in torch 2.13
        # cannot compile this Mod form, hence two spellings.)
        total = k_eff - stride + (-size) % stride
    else:
        total = (ceil_div(size, stride) - 1) * stride + k_eff - size
    # The max(0, ...) matters only where k_eff < s: otherwise total = k_eff - s + ((-i) mod s) >= 0 (k_eff and s are
    # ints, so choosing costs no guard). Without the max, a SymInt size gives the conv an output size
    # (i + total - k_eff) // s + 1 that simplifies to exactly ceil(i/s): later sizes stay short expressions with exact
    # ranges, so torch.export proves its checks down to the smallest valid size and a saved program loads quickly.
    if k_eff < stride:
        total = torch.sym_max(0, total)
    small = total // 2
    return (total - small, small) if lower else (small, total - small)


def expand_ints(name: str, value, count: int, minimum: int) -> Tuple[int, ...]:
    """An int (broadcast) or a sequence of `count` ints, each >= minimum; raises naming `name` otherwise."""
    if isinstance(value, (int, torch.SymInt)) and not isinstance(value, bool):
        values = (value,) * count
    elif isinstance(value, Sequence) and not isinstance(value, str) and all(
        isinstance(v, (int, torch.SymInt)) and not isinstance(v, bool) for v in value
    ):
        values = tuple(value)
    else:
        raise TypeError(f"{name} must be an int or a sequence of {count} ints, got {value!r}")
    if len(values) != count:
        raise ValueError(f"{name} must have {count} entries (one per spatial dim), got {value!r}")
    for v in values:
        if v < minimum:
            raise ValueError(f"{name} entries must be >= {minimum}, got {value!r}")
    return values


def _explicit_pairs(padding, count: int) -> List[PadPair]:
    """Ints (torch meaning: symmetric) or one (lo, hi) pair per spatial dim."""
    if isinstance(padding, Sequence) and not isinstance(padding, str) and len(padding) > 0 and all(
        isinstance(p, Sequence) and not isinstance(p, str) for p in padding
    ):
        if len(padding) != count:
            raise ValueError(f"padding needs {count} (lo, hi) pairs (one per spatial dim), got {padding!r}")
        pairs = []
        for pair in padding:
            lo_hi = expand_ints("padding", pair, 2, 0) if len(pair) == 2 else None
            if lo_hi is None:
                raise ValueError(f"padding pairs must be (lo, hi), got {pair!r} in {padding!r}")
            pairs.append(lo_hi)
        return pairs
    return [(p, p) for p in expand_ints("padding", padding, count, 0)]


def check_padding_string(padding: str, transposed: bool) -> None:
    allowed = TRANSPOSED_PADDING_STRINGS if transposed else CONV_PADDING_STRINGS
    if padding not in allowed:
        kind = "transposed convolutions" if transposed else "convolutions"
        raise ValueError(f"padding={padding!r} is not supported for {kind}; use one of {allowed}, an int, "
                         f"a tuple of ints or a tuple of (lo, hi) pairs")


def check_padding(padding: PaddingArg, count: int, transposed: bool) -> None:
    """Validates the form of a padding argument without knowing the input size (for module constructors)."""
    if isinstance(padding, str):
        check_padding_string(padding, transposed)
    else:
        _explicit_pairs(padding, count)


def same_padding(input_size, kernel_size, stride=1, dilation=1, lower: bool = False) -> List[PadPair]:
    """TF/Keras/JAX 'SAME' (ONNX SAME_UPPER) pads, or SAME_LOWER with lower=True: one (lo, hi) pair per dim.

    out = ceil(i/s); total = max(0, (out-1)*s + k_eff - i); lo = total // 2 (hi gets the odd pixel).

    >>> same_padding(224, 7, stride=2)
    [(2, 3)]
    """
    sizes = (input_size,) if isinstance(input_size, (int, torch.SymInt)) else tuple(input_size)
    count = len(sizes)
    kernels = expand_ints("kernel_size", kernel_size, count, 1)
    strides = expand_ints("stride", stride, count, 1)
    dilations = expand_ints("dilation", dilation, count, 1)
    return [_same_pair(i, k, s, d, lower) for i, k, s, d in zip(sizes, kernels, strides, dilations)]


def conv_pads(padding: PaddingArg, input_size, kernel_size, stride, dilation) -> List[PadPair]:
    """The (lo, hi) pad of every spatial dim for a convolution's `padding` argument."""
    count = len(input_size)
    if isinstance(padding, str):
        check_padding_string(padding, transposed=False)
        if padding in ("same", "same_lower"):
            return same_padding(input_size, kernel_size, stride, dilation, lower=padding == "same_lower")
        if padding == "valid":
            return [(0, 0)] * count
        return [(effective_kernel(k, d) - 1, 0) for k, d in zip(kernel_size, dilation)]  # causal
    return _explicit_pairs(padding, count)


def transposed_crops(padding: PaddingArg, input_size, kernel_size, stride, dilation, output_padding):
    """(crop_lo, out_size) per spatial dim for a transposed convolution's `padding` argument.

    The full output has (i-1)*s + k_eff positions; crop (lo, hi) keeps full - lo - hi + output_padding of them
    starting at lo. 'same' gives out = i*s with lo = max(k_eff - s, 0) // 2 (TF conv2d_transpose SAME); where
    k_eff < s the output extends past the full result with positions that hold only the bias.
    """
    if isinstance(padding, str):
        check_padding_string(padding, transposed=True)
        pairs = None
    else:
        pairs = _explicit_pairs(padding, len(input_size))
    crop_lo, out_size = [], []
    for dim, size in enumerate(input_size):
        k, s, d, extra = kernel_size[dim], stride[dim], dilation[dim], output_padding[dim]
        full = transposed_full_size(size, k, s, d)
        if pairs is None:
            if padding == "valid":
                lo, out = 0, full
            else:
                total = max(effective_kernel(k, d) - s, 0)
                lo = total // 2 if padding == "same" else total - total // 2
                out = size * s
        else:
            lo, hi = pairs[dim]
            out = full - lo - hi
        out = out + extra
        if out < 1:
            raise ValueError(f"padding={padding!r} crops away the whole output in spatial dim {dim} "
                             f"(full size {full}, output size {out})")
        crop_lo.append(lo)
        out_size.append(out)
    return crop_lo, out_size
