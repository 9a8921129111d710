"""The padding formulas of docs/DESIGN.md section 2 and the argument checks of the ops, in one place.

Used by the public functions, the fake kernels and the tests. Every function works on plain ints and on
torch SymInts (under torch.compile with dynamic shapes), so no Python `max`/`ceil` on sizes here.
"""
from __future__ import annotations

import warnings
from typing import List, Optional, Sequence, Tuple, Union

import torch

PaddingArg = Union[str, int, Sequence[int], Sequence[Sequence[int]]]
PadPair = Tuple[int, int]

CONV_PADDING_STRINGS = ("same", "same_lower", "valid", "causal")
TRANSPOSED_PADDING_STRINGS = ("same", "same_lower", "valid")
PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _onnx_flags_reader():
    """torch.onnx.is_in_onnx_export less its two imports per call (0.9 us of a 12 us call): a reader of the same two
    flags, where this torch version keeps them there, else torch's function itself."""
    try:
        from torch.onnx._internal.exporter import _flags
        from torch.onnx._internal.torchscript_exporter._globals import GLOBALS
    except ImportError:
        return torch.onnx.is_in_onnx_export
    if not (hasattr(GLOBALS, "in_onnx_export") and hasattr(_flags, "_is_onnx_exporting")):
        return torch.onnx.is_in_onnx_export
    return lambda: GLOBALS.in_onnx_export or _flags._is_onnx_exporting


_read_onnx_flags = _onnx_flags_reader()


def onnx_exporting() -> bool:
    """torch.onnx.is_in_onnx_export(), asked on every public call."""
    # torch.compile knows torch's function (and refuses to trace the flags' module): it gets that one.
    if torch.compiler.is_compiling():
        return torch.onnx.is_in_onnx_export()
    return _read_onnx_flags()


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
    if onnx_exporting():
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


# ---- Argument checks ----------------------------------------------------------------------------------------------
# Each check of the ops' arguments is written once, here, for two callers: the fake kernels (fastpad/_ops.py), which
# repeat the TORCH_CHECKs of csrc/conv_params.cpp that decide whether a call is valid (not its int64 size bounds,
# which only the kernels need), and the public functions and modules (fastpad/functional.py, fastpad/nn.py), which
# check their arguments before they call an op. A Report says how a failed check raises for its caller.


class Report:
    """How a failed check raises, with `name` (the op, function or module; None: no name) opening its message.

    public=False, the fake kernels: RuntimeError with the message of csrc/conv_params.cpp, shapes written as lists. A
    symbolic condition (dynamic shapes under torch.compile) is left to the kernel at run time: deciding it would add a
    guard. public=True: ValueError or TypeError, as the check says, shapes written as tuples; every condition is
    decided, as any shape check in a traced Python function is (a guard where it is symbolic). autocast: the call
    comes before torch.autocast casts its tensors to one dtype (csrc/autocast.cpp), so their dtypes may differ."""

    def __init__(self, name: Optional[str], public: bool, autocast: bool = False) -> None:
        self.name = name
        self.public = public
        self.autocast = autocast

    def failed(self, condition) -> bool:
        return not condition if self.public else condition is False

    def error(self, kind: type, message: str) -> Exception:
        message = f"{self.name}: {message}" if self.name else message
        return kind(message) if self.public else RuntimeError(message)

    def shape(self, values) -> Union[tuple, list]:
        return tuple(values) if self.public else list(values)


# The parsing of the padding forms, which the public functions, the modules and same_padding share, names none of them.
_UNNAMED = Report(None, public=True)

FLOAT_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


def check_ints(report: Report, name: str, values, count: int, minimum: Optional[int] = None) -> None:
    """`values` has one entry per spatial dim (`count`), each >= minimum unless that is None."""
    if report.failed(len(values) == count):
        raise report.error(ValueError, f"{name} must have {count} entries (one per spatial dim), got "
                                       f"{report.shape(values)}")
    for value in values if minimum is not None else ():
        if report.failed(value >= minimum):
            raise report.error(ValueError, f"every entry of {name} must be >= {minimum}, got {report.shape(values)}")


def check_padding_mode(report: Report, padding_mode, modes: Sequence[str] = PADDING_MODES) -> None:
    if report.failed(padding_mode in modes):
        names = [repr(mode) for mode in modes]
        allowed = f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else names[0]
        raise report.error(ValueError, f"padding_mode must be {allowed}, got {padding_mode!r}")


def check_tensor_pair(report: Report, input: torch.Tensor, name: str, other: torch.Tensor) -> None:
    """input has a dtype the ops take, and `other` (weight, grad_output) has input's dtype and device."""
    if report.failed(input.dtype in FLOAT_DTYPES):
        raise report.error(TypeError, f"input dtype must be float32, float64, bfloat16 or float16, got {input.dtype}")
    check_like_input(report, name, other, input)


def check_like_input(report: Report, name: str, tensor: torch.Tensor, input: torch.Tensor) -> None:
    """`tensor` has input's dtype (but see Report.autocast) and device."""
    if not report.autocast and report.failed(tensor.dtype == input.dtype):
        raise report.error(TypeError, f"{name} has dtype {tensor.dtype} but input has dtype {input.dtype}")
    if report.failed(tensor.device == input.device):
        raise report.error(ValueError, f"{name} is on {tensor.device} but input is on {input.device}")


def check_groups(report: Report, groups, channels: Sequence) -> None:
    """groups is a positive int (the ops' schemas make it an int) that divides each of the channel counts."""
    if report.failed(isinstance(groups, int) and not isinstance(groups, bool)):
        raise report.error(TypeError, f"groups must be an int, got {groups!r}")
    if report.failed(groups > 0):
        raise report.error(ValueError, f"groups must be positive, got {groups}")
    for count in channels:
        if report.failed(count % groups == 0):
            raise report.error(ValueError, f"groups={groups} must divide the channel counts, got "
                                           f"{report.shape(channels)}")


def check_bias(report: Report, bias: Optional[torch.Tensor], input: torch.Tensor, channels) -> None:
    if bias is not None:
        check_like_input(report, "bias", bias, input)
        if report.failed(bias.dim() == 1 and bias.shape[0] == channels):
            raise report.error(ValueError, f"bias must have shape {report.shape([channels])}, got "
                                           f"{report.shape(bias.shape)}")


def check_input_channels(report: Report, input: torch.Tensor, weight_name: str, weight_shape, groups) -> None:
    """conv and conv_weight_grad: input [N, C_in, *spatial] and a weight [C_out, C_in / groups, *kernel]."""
    in_channels, out_channels = input.shape[1], weight_shape[0]
    check_groups(report, groups, [in_channels, out_channels])
    if report.failed(weight_shape[1] * groups == in_channels):
        raise report.error(ValueError, f"input has {in_channels} channels but {weight_name} "
                                       f"{report.shape(weight_shape)} with groups={groups} has {weight_shape[1]} "
                                       f"input channels per group, expected {in_channels // groups}")


def check_conv_tensors(report: Report, input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                       groups) -> int:
    """conv's channel counts, groups and bias. Returns the output channel count."""
    out_channels = weight.shape[0]
    # As in torch. Zero input channels are fine (the output is the bias).
    if report.failed(out_channels >= 1):
        raise report.error(ValueError, f"weight must have at least one output channel (dim 0), got shape "
                                       f"{report.shape(weight.shape)}")
    check_input_channels(report, input, "weight", weight.shape, groups)
    check_bias(report, bias, input, out_channels)
    return out_channels


def check_conv_transpose_tensors(report: Report, input: torch.Tensor, weight: torch.Tensor,
                                 bias: Optional[torch.Tensor], groups) -> int:
    """conv_transpose's channel counts (weight [C_in, C_out / groups, *kernel]), groups and bias. Returns the output
    channel count."""
    in_channels = input.shape[1]
    if report.failed(in_channels == weight.shape[0]):
        raise report.error(ValueError, f"input has {in_channels} channels but weight {report.shape(weight.shape)} "
                                       f"expects {weight.shape[0]}")
    # As in torch. Zero output channels are fine (the output is empty).
    if report.failed(in_channels >= 1):
        raise report.error(ValueError, f"weight must have at least one input channel (dim 0), got shape "
                                       f"{report.shape(weight.shape)}")
    check_groups(report, groups, [in_channels])
    out_channels = weight.shape[1] * groups
    check_bias(report, bias, input, out_channels)
    return out_channels


def check_mode_pads(report: Report, padding_mode: str, sizes, pad_lo, pad_hi, pad_bounds=None) -> None:
    """The padding modes other than zeros read real input positions, so they carry torch's limits: reflect needs
    pads < size, circular pads <= size. pad_bounds, where given, bounds both pads of each dim without comparing them
    (padding='same': k_eff // 2): a dim larger than its bound meets both limits, which is then decided on the size
    alone, as comparing the pads of a symbolic size would guard on its parity (a recompile per parity, and a range
    torch.export cannot prove)."""
    if padding_mode not in ("reflect", "circular"):
        return
    for dim, (size, lo, hi) in enumerate(zip(sizes, pad_lo, pad_hi)):
        if pad_bounds is not None and not report.failed(size > pad_bounds[dim]):
            continue
        for pad in (lo, hi):
            if padding_mode == "reflect" and report.failed(pad < size):
                raise report.error(ValueError, f"reflect padding needs pads < input size, got pads ({lo}, {hi}) for "
                                               f"size {size} in spatial dim {dim}")
            if padding_mode == "circular" and report.failed(pad <= size):
                raise report.error(ValueError, f"circular padding needs pads <= input size, got pads ({lo}, {hi}) "
                                               f"for size {size} in spatial dim {dim}")


def conv_output_sizes(report: Report, sizes, kernel, stride, dilation, pad_lo, pad_hi, padding_mode: str,
                      pad_bounds=None) -> list:
    """The conv's output size per spatial dim, after checking that the kernel fits in the padded input and the pads
    meet padding_mode's limits (check_mode_pads, which takes pad_bounds)."""
    out_sizes = []
    for dim, (size, lo, hi, k, s, d) in enumerate(zip(sizes, pad_lo, pad_hi, kernel, stride, dilation)):
        out_size = conv_out_size(size, lo, hi, k, s, d)
        if report.failed(out_size >= 1):
            raise report.error(ValueError, f"the kernel (effective size {effective_kernel(k, d)}) is larger than the "
                                           f"padded input ({size} + {lo} + {hi}) in spatial dim {dim}")
        out_sizes.append(out_size)
    check_mode_pads(report, padding_mode, sizes, pad_lo, pad_hi, pad_bounds)
    return out_sizes


def expand_ints(report: Report, name: str, value, count: int, minimum: int) -> Tuple[int, ...]:
    """An int (broadcast) or a sequence of `count` ints, each >= minimum; raises naming `name` otherwise."""
    if isinstance(value, (int, torch.SymInt)) and not isinstance(value, bool):
        values = (value,) * count
    elif isinstance(value, Sequence) and not isinstance(value, str) and all(
        isinstance(v, (int, torch.SymInt)) and not isinstance(v, bool) for v in value
    ):
        values = tuple(value)
    else:
        raise report.error(TypeError, f"{name} must be an int or a sequence of {count} ints, got {value!r}")
    check_ints(report, name, values, count, minimum)
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
            lo_hi = expand_ints(_UNNAMED, "padding", pair, 2, 0) if len(pair) == 2 else None
            if lo_hi is None:
                raise ValueError(f"padding pairs must be (lo, hi), got {pair!r} in {padding!r}")
            pairs.append(lo_hi)
        return pairs
    return [(p, p) for p in expand_ints(_UNNAMED, "padding", padding, count, 0)]


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
    kernels = expand_ints(_UNNAMED, "kernel_size", kernel_size, count, 1)
    strides = expand_ints(_UNNAMED, "stride", stride, count, 1)
    dilations = expand_ints(_UNNAMED, "dilation", dilation, count, 1)
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
