"""Test helpers around the semantics contract of docs/DESIGN.md section 2.

- Convolution: F.pad (any padding mode) followed by F.conv{1,2,3}d with padding=0.
- Transposed convolution: the full F.conv_transpose{1,2,3}d (padding=0, no bias), cropped per
  dimension to [crop_lo, crop_lo + out_size), zero-extended past the end, then the bias added.

The reference convolutions and the tolerance table live in fastpad/reference.py (shared with `python -m fastpad check`
and `bench`); the pad and crop rules below are written again on purpose, without fastpad's own geometry, as an independent oracle.
"""

import math

import torch

from fastpad.reference import reference_conv, reference_conv_transpose, relative_error, tolerance  # noqa: F401

PADDING_MODES = ("zeros", "reflect", "replicate", "circular")
PADDING_STRINGS = ("same", "same_lower", "valid", "causal")
# (c_in, c_out, groups): two groups, depthwise, and depthwise with channel multiplier 2
GROUP_CASES = {"groups2": (4, 6, 2), "depthwise": (4, 4, 4), "depthwise_x2": (4, 8, 4)}
# Explicit padding per number of spatial dims (crops for transposed convs): an int, a tuple of ints, (lo, hi) pairs
EXPLICIT_PADDINGS = {
    1: {"int": 2, "tuple": (1,), "pairs": ((0, 2),)},
    2: {"int": 1, "tuple": (2, 1), "pairs": ((0, 1), (2, 3))},
    3: {"int": 1, "tuple": (1, 0, 2), "pairs": ((2, 0), (0, 1), (1, 1))},
}
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])

def assert_matches(actual, expected, dtype=None, what="output"):
    """Same shape and dtype, no NaN/inf where the reference is finite, relative error within tolerance.
    Returns the relative error."""
    dtype = dtype or actual.dtype
    assert actual.dtype == dtype, f"{what}: dtype {actual.dtype} != {dtype}"
    assert actual.device == expected.device, f"{what}: device {actual.device} != {expected.device}"
    assert actual.shape == expected.shape, f"{what}: shape {tuple(actual.shape)} != reference {tuple(expected.shape)}"
    if expected.isfinite().all():
        assert actual.isfinite().all(), f"{what}: non-finite values (unwritten or poisoned elements?)"
    err = relative_error(actual, expected)
    assert err <= tolerance(dtype), f"{what}: relative error {err:.3g} > {tolerance(dtype):.1g} ({dtype})"
    return err


def tf32_rounded(t):
    """float32 t as cvt.rna.tf32.f32 rounds it for the TF32 tensor cores: to nearest on the 10 mantissa bits TF32
    keeps, ties away from zero (finite values). Adding half a unit of the last kept bit to the sign-and-magnitude bit
    pattern and clearing the 13 dropped bits does exactly that."""
    bits = t.contiguous().view(torch.int32).to(torch.int64)
    return ((bits + 0x1000) & ~0x1FFF).to(torch.int32).view(torch.float32)


def poison(shape, dtype=torch.float32, device="cpu", blocks=8):
    """Leaves freed allocator blocks of `shape` filled with NaN: an output the kernel allocates next
    usually reuses one, so any element the kernel forgets to write shows up as NaN."""
    if math.prod(shape) > 0:
        filled = [torch.full(tuple(shape), float("nan"), dtype=dtype, device=device) for _ in range(blocks)]
        del filled


# --------------------------------------------------------------------------------------------
# Geometry (docs/DESIGN.md section 2), independent of fastpad/_geometry.py.


def as_tuple(value, n):
    if isinstance(value, int):
        return (value,) * n
    value = tuple(value)
    assert len(value) == n, (value, n)
    return value


def effective_kernel(k, d):
    return d * (k - 1) + 1


def same_pads(i, k, s, d, lower=False):
    out = -(-i // s)
    total = max(0, (out - 1) * s + effective_kernel(k, d) - i)
    lo = total // 2
    hi = total - lo
    return (hi, lo) if lower else (lo, hi)


def resolve_pads(padding, input_size, kernel, stride, dilation):
    """The (lo, hi) pads per spatial dim that the public conv API must use for `padding`."""
    n = len(input_size)
    kernel, stride, dilation = as_tuple(kernel, n), as_tuple(stride, n), as_tuple(dilation, n)
    if padding in ("same", "same_lower"):
        lower = padding == "same_lower"
        return [same_pads(i, k, s, d, lower) for i, k, s, d in zip(input_size, kernel, stride, dilation)]
    if padding == "valid":
        return [(0, 0)] * n
    if padding == "causal":
        return [(effective_kernel(k, d) - 1, 0) for k, d in zip(kernel, dilation)]
    if isinstance(padding, int):
        return [(padding, padding)] * n
    padding = tuple(padding)
    if all(isinstance(p, int) for p in padding):
        return [(p, p) for p in as_tuple(padding, n)]
    return [tuple(p) for p in padding]


def conv_out_size(i, lo, hi, k, s, d):
    return (i + lo + hi - effective_kernel(k, d)) // s + 1


def resolve_crops(padding, input_size, kernel, stride, dilation, output_padding=0):
    """(crop_lo, out_size) per spatial dim that the public conv_transpose API must use."""
    n = len(input_size)
    kernel, stride, dilation = as_tuple(kernel, n), as_tuple(stride, n), as_tuple(dilation, n)
    output_padding = as_tuple(output_padding, n)
    crop_lo, out_size = [], []
    for dim, (i, k, s, d, op) in enumerate(zip(input_size, kernel, stride, dilation, output_padding)):
        full = (i - 1) * s + effective_kernel(k, d)
        if padding in ("same", "same_lower"):
            total = max(effective_kernel(k, d) - s, 0)
            lo = total // 2 if padding == "same" else total - total // 2
            crop_lo.append(lo)
            out_size.append(i * s + op)
            continue
        if padding == "valid":
            lo, hi = 0, 0
        else:
            lo, hi = resolve_pads(padding, input_size, kernel, stride, dilation)[dim]
        crop_lo.append(lo)
        out_size.append(full - lo - hi + op)
    return crop_lo, out_size


# --------------------------------------------------------------------------------------------
# The public-API references, with pads and crops from the geometry above.


def _double(t):
    return None if t is None else t.double()  # keeps the autograd graph: the reference is differentiable


def expected_conv(x, w, b=None, stride=1, padding="same", dilation=1, groups=1, padding_mode="zeros"):
    """The float64 reference for fastpad.conv{n}d called with the same (public API) arguments."""
    nd = x.dim() - 2
    stride, dilation = as_tuple(stride, nd), as_tuple(dilation, nd)
    pads = resolve_pads(padding, x.shape[2:], w.shape[2:], stride, dilation)
    return reference_conv(_double(x), _double(w), _double(b), stride, pads, dilation, groups, padding_mode)


def expected_conv_transpose(x, w, b=None, stride=1, padding="same", output_padding=0, groups=1, dilation=1):
    """The float64 reference for fastpad.conv_transpose{n}d called with the same arguments."""
    nd = x.dim() - 2
    stride, dilation = as_tuple(stride, nd), as_tuple(dilation, nd)
    crop_lo, out_size = resolve_crops(padding, x.shape[2:], w.shape[2:], stride, dilation, output_padding)
    return reference_conv_transpose(_double(x), _double(w), _double(b), stride, crop_lo, out_size, dilation, groups)


def pads_supported(pads, input_size, padding_mode):
    """Whether F.pad accepts these pads in this mode (reflect: pad < size; circular: pad <= size)."""
    for (lo, hi), i in zip(pads, input_size):
        if padding_mode == "reflect" and max(lo, hi) >= i:
            return False
        if padding_mode == "circular" and max(lo, hi) > i:
            return False
    return True


# --------------------------------------------------------------------------------------------
# Random inputs, and fastpad checked against the reference.


def conv_inputs(size, c_in=4, c_out=6, kernel=3, groups=1, batch=2, bias=True, transposed=False,
                dtype=torch.float64, device="cpu"):
    """Fresh random (x, w, b) for a conv (weight [C_out, C_in/g, *k]) or a transposed conv
    (weight [C_in, C_out/g, *k]) over spatial `size`."""
    nd = len(size)
    kernel = as_tuple(kernel, nd)
    w_shape = (c_in, c_out // groups) if transposed else (c_out, c_in // groups)
    x = torch.randn((batch, c_in) + tuple(size), dtype=dtype, device=device)
    w = torch.randn(w_shape + kernel, dtype=dtype, device=device)
    b = torch.randn(c_out, dtype=dtype, device=device) if bias else None
    return x, w, b


def _check(name, expected_fn, x, w, b=None, **kwargs):
    """Runs fastpad.<name>{n}d(x, w, b, **kwargs) on a poisoned allocator and compares it with expected_fn."""
    import fastpad

    expected = expected_fn(x, w, b, **kwargs)
    poison(expected.shape, x.dtype, x.device)
    y = getattr(fastpad, f"{name}{x.dim() - 2}d")(x, w, b, **kwargs)
    assert_matches(y, expected, x.dtype)
    return y


def check_conv(x, w, b=None, **kwargs):
    """fastpad.conv{n}d(x, w, b, **kwargs) against the reference; returns fastpad's output."""
    return _check("conv", expected_conv, x, w, b, **kwargs)


def check_conv_transpose(x, w, b=None, **kwargs):
    """fastpad.conv_transpose{n}d(x, w, b, **kwargs) against the reference; returns fastpad's output."""
    return _check("conv_transpose", expected_conv_transpose, x, w, b, **kwargs)


CHANNELS_LAST = {4: torch.channels_last, 5: torch.channels_last_3d}


def output_memory_format(x):
    """The layout every op writes its output in: channels_last(_3d) where x is and is not plain contiguous."""
    fmt = CHANNELS_LAST.get(x.dim())
    if fmt is not None and x.is_contiguous(memory_format=fmt) and not x.is_contiguous():
        return fmt
    return torch.contiguous_format


def assert_memory_format_kept(x, y):
    """The output is channels_last(_3d) iff the input is channels_last and not plain contiguous."""
    fmt = output_memory_format(x)
    assert y.is_contiguous(memory_format=fmt), f"output strides {y.stride()} are not {fmt}"


def assert_weight_grad_layout(x, gw):
    """conv_weight_grad's result is in its input's layout, with the strides torch.empty gives it (size-1 dims too)."""
    expected = torch.empty(gw.shape, memory_format=output_memory_format(x)).stride()
    assert gw.stride() == expected, f"weight gradient strides {gw.stride()}, expected {expected}"


def model_forward_backward(model, x):
    """A model's output, input gradient and parameter gradients for the loss sum(y^2)."""
    model.zero_grad(set_to_none=True)
    x = x.detach().requires_grad_()
    y = model(x)
    y.square().sum().backward()
    return [y.detach(), x.grad] + [p.grad for p in model.parameters()]
