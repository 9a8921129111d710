"""Autograd and compiler support: opcheck on the three ops, gradcheck / gradgradcheck in float64,
float32 gradients against the reference's autograd, the adjoint identities between the ops, and
torch.compile(fullgraph=True) of fastpad layers, static and dynamic."""

import time
from dataclasses import replace

import pytest
import torch

from torch._dynamo.utils import counters
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

import fastpad
from fastpad.bench.op_calls import RecordFastpadOps
from fastpad.cases import ConvCase
from fastpad.reference import output_and_grads
from code_paths import cpu_isa_limit, intra_op_threads, reduction_tiles_kernel, require_isa, strided_planes_or
from reference import (
    model_forward_backward,
    PADDING_MODES,
    as_tuple,
    assert_matches,
    assert_weight_grad_layout,
    conv_inputs,
    expected_conv,
    expected_conv_transpose,
    poison,
    relative_error,
)

ops = torch.ops.fastpad

# One geometry per row serves all three ops: conv(x) -> y, conv_transpose(gy) -> gx (its adjoint,
# with crop_lo = pad_lo and out_size = the size of x), conv_weight_grad(x, gy) -> gw.
OP_CONFIGS = {
    "1d_circular_s2": dict(size=(7,), c_in=3, c_out=4, groups=1, kernel=3, stride=[2], pad_lo=[2], pad_hi=[0],
                           dilation=[1], mode="circular"),
    "2d_zeros_groups2_asym": dict(size=(6, 7), c_in=4, c_out=4, groups=2, kernel=3, stride=[2, 2], pad_lo=[0, 1],
                                  pad_hi=[1, 2], dilation=[1, 1], mode="zeros"),
    "2d_reflect_depthwise_channels_last": dict(size=(6, 7), c_in=4, c_out=4, groups=4, kernel=3, stride=[1, 2],
                                               pad_lo=[1, 2], pad_hi=[2, 1], dilation=[1, 2], mode="reflect",
                                               channels_last=True),
    "3d_replicate_groups2": dict(size=(4, 5, 4), c_in=2, c_out=4, groups=2, kernel=2, stride=[1, 2, 1],
                                 pad_lo=[1, 0, 1], pad_hi=[0, 1, 1], dilation=[1, 1, 2], mode="replicate"),
}


def conv_output_size(cfg):
    nd = len(cfg["size"])
    return [(i + lo + hi - d * (k - 1) - 1) // s + 1
            for i, lo, hi, k, s, d in zip(cfg["size"], cfg["pad_lo"], cfg["pad_hi"], as_tuple(cfg["kernel"], nd),
                                          cfg["stride"], cfg["dilation"])]


def op_args(op_name, cfg, requires_grad, device="cpu", dtype=torch.float64):
    """Arguments of torch.ops.fastpad.<op_name> for one geometry, with fresh random tensors."""
    x, w, b = conv_inputs(cfg["size"], cfg["c_in"], cfg["c_out"], cfg["kernel"], cfg["groups"], dtype=dtype,
                          device=device)
    gy = torch.randn((x.shape[0], cfg["c_out"], *conv_output_size(cfg)), dtype=dtype, device=device)
    if cfg.get("channels_last"):
        x, gy = (t.to(memory_format=torch.channels_last) for t in (x, gy))
    b_in = torch.randn(cfg["c_in"], dtype=dtype, device=device)
    for t in (x, w, b, gy, b_in):
        t.requires_grad_(requires_grad)
    geometry = (cfg["dilation"], cfg["groups"], cfg["mode"])
    if op_name == "conv":
        return (x, w, b, cfg["stride"], cfg["pad_lo"], cfg["pad_hi"], *geometry)
    if op_name == "conv_transpose":
        return (gy, w, b_in, cfg["stride"], cfg["pad_lo"], list(cfg["size"]), *geometry)
    return (x, gy, list(w.shape), cfg["stride"], cfg["pad_lo"], *geometry)


@pytest.mark.parametrize("requires_grad", [False, True], ids=["no_grad", "requires_grad"])
@pytest.mark.parametrize("cfg", sorted(OP_CONFIGS))
@pytest.mark.parametrize("op_name", ["conv", "conv_transpose", "conv_weight_grad"])
def test_opcheck(op_name, cfg, requires_grad, device):
    args = op_args(op_name, OP_CONFIGS[cfg], requires_grad, device)
    torch.library.opcheck(getattr(ops, op_name).default, args)


def significant_strides(t):
    """Strides of the dims longer than 1: the ones that say anything about the layout."""
    return [stride for size, stride in zip(t.shape, t.stride()) if size > 1]


@pytest.mark.parametrize("kernel", [1, 3])
@pytest.mark.parametrize("cfg", sorted(OP_CONFIGS))
def test_fake_kernels_give_real_strides(cfg, kernel, device):
    from torch._subclasses.fake_tensor import FakeTensorMode

    for op_name in ("conv", "conv_transpose", "conv_weight_grad"):
        args = op_args(op_name, dict(OP_CONFIGS[cfg], kernel=kernel), False, device)
        real = getattr(ops, op_name)(*args)
        with FakeTensorMode() as mode:
            fake_args = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
            fake = getattr(ops, op_name)(*fake_args)
        assert (fake.shape, fake.dtype) == (real.shape, real.dtype), op_name
        assert significant_strides(fake) == significant_strides(real), f"{op_name}: {fake.stride()} != {real.stride()}"


# --------------------------------------------------------------------------------------------
# Adjoint identities: <conv(x), g> = <x, conv_transpose(g)> and <conv(x, w), g> = <w, conv_weight_grad(x, g)>,
# in every padding mode. They hold exactly in exact arithmetic, so float64 agrees to rounding.


@pytest.mark.parametrize("mode", PADDING_MODES)
@pytest.mark.parametrize("cfg", sorted(OP_CONFIGS))
def test_adjoint_identities(cfg, mode, device):
    cfg = dict(OP_CONFIGS[cfg], mode=mode)
    x, w, _, stride, pad_lo, pad_hi, dilation, groups, _ = op_args("conv", cfg, False, device)
    y = ops.conv(x, w, None, stride, pad_lo, pad_hi, dilation, groups, mode)
    g = torch.randn_like(y)
    gx = ops.conv_transpose(g, w, None, stride, pad_lo, list(x.shape[2:]), dilation, groups, mode)
    gw = ops.conv_weight_grad(x, g, list(w.shape), stride, pad_lo, dilation, groups, mode)
    lhs, scale = (y * g).sum().item(), (y * g).abs().sum().item()
    for rhs, name in (((x * gx).sum().item(), "conv_transpose"), ((w * gw).sum().item(), "conv_weight_grad")):
        assert abs(lhs - rhs) <= 1e-12 * scale, f"{name}: <conv(x), g> = {lhs} but the adjoint gives {rhs}"


# --------------------------------------------------------------------------------------------
# gradcheck in float64 through the public functions.

CONV_GRAD_CASES = {
    "same_s2": dict(stride=2, padding="same"),
    "dil2_groups2_pairs": dict(dilation=2, groups=2, padding=((0, 2), (2, 1))),
    "causal_stride_3_1": dict(stride=(3, 1), padding="causal"),
    "same_lower_even_kernel": dict(padding="same_lower", kernel=4),
}


def small_inputs(size, c_in=2, c_out=4, kernel=3, groups=1, transposed=False, device="cpu", requires_grad=True):
    x, w, b = conv_inputs(size, c_in, c_out, kernel, groups, batch=1, transposed=transposed, device=device)
    return tuple(t.requires_grad_(requires_grad) for t in (x, w, b))


@pytest.mark.parametrize("mode", PADDING_MODES)
@pytest.mark.parametrize("case", sorted(CONV_GRAD_CASES))
def test_gradcheck_conv2d(case, mode, device):
    kwargs = dict(CONV_GRAD_CASES[case])
    kernel = kwargs.pop("kernel", 3)
    inputs = small_inputs((5, 6), kernel=kernel, groups=kwargs.get("groups", 1), device=device)
    assert torch.autograd.gradcheck(lambda x, w, b: fastpad.conv2d(x, w, b, padding_mode=mode, **kwargs), inputs)


@pytest.mark.parametrize("nd, mode", [(1, "reflect"), (1, "circular"), (3, "circular"), (3, "reflect")])
def test_gradcheck_conv_1d_3d(nd, mode, device):
    size = {1: (9,), 3: (3, 4, 4)}[nd]
    conv = getattr(fastpad, f"conv{nd}d")
    inputs = small_inputs(size, kernel=2 if nd == 3 else 3, groups=2, device=device)
    assert torch.autograd.gradcheck(lambda x, w, b: conv(x, w, b, stride=2, groups=2, padding_mode=mode), inputs)


CONV_TRANSPOSE_GRAD_CASES = {
    "same_s2": dict(stride=2, padding="same"),
    "same_lower_k4_s2": dict(stride=2, padding="same_lower", kernel=4),
    "crop_pairs": dict(stride=(2, 1), padding=((0, 1), (1, 0))),
    "valid_output_padding": dict(stride=2, padding="valid", output_padding=1),
    "int_crop_output_padding_dilation": dict(stride=1, dilation=2, padding=1, output_padding=1),
    "k_eff_below_stride": dict(stride=3, padding="same", kernel=1),
    "groups2": dict(stride=2, padding="same", groups=2),
}


@pytest.mark.parametrize("case", sorted(CONV_TRANSPOSE_GRAD_CASES))
def test_gradcheck_conv_transpose2d(case, device):
    kwargs = dict(CONV_TRANSPOSE_GRAD_CASES[case])
    kernel = kwargs.pop("kernel", 3)
    inputs = small_inputs((3, 4), kernel=kernel, groups=kwargs.get("groups", 1), transposed=True, device=device)
    assert torch.autograd.gradcheck(lambda x, w, b: fastpad.conv_transpose2d(x, w, b, **kwargs), inputs)


@pytest.mark.parametrize("nd", [1, 3])
def test_gradcheck_conv_transpose_1d_3d(nd, device):
    size = {1: (5,), 3: (2, 3, 2)}[nd]
    conv_transpose = getattr(fastpad, f"conv_transpose{nd}d")
    inputs = small_inputs(size, kernel=2, transposed=True, device=device)
    assert torch.autograd.gradcheck(lambda x, w, b: conv_transpose(x, w, b, stride=2, padding="same"), inputs)


@pytest.mark.parametrize("mode", ["zeros", "reflect"])
def test_gradgradcheck_conv(mode, device):
    inputs = small_inputs((4, 5), c_in=2, c_out=2, groups=2, device=device)
    fn = lambda x, w, b: fastpad.conv2d(x, w, b, stride=2, padding="same", groups=2, padding_mode=mode)  # noqa: E731
    assert torch.autograd.gradgradcheck(fn, inputs)


def test_gradgradcheck_conv_transpose(device):
    inputs = small_inputs((3, 3), c_in=2, c_out=2, transposed=True, device=device)
    assert torch.autograd.gradgradcheck(lambda x, w, b: fastpad.conv_transpose2d(x, w, b, stride=2), inputs)


# --------------------------------------------------------------------------------------------
# float32 / bfloat16 gradients against the reference's autograd (computed in float64).


def compare_grads(fastpad_fn, reference_fn, inputs):
    """Input, weight and bias gradients of fastpad_fn against those of reference_fn in float64."""
    reference_inputs = [t.detach().double().requires_grad_() for t in inputs]
    reference_out = reference_fn(*reference_inputs)
    grad_output = torch.randn(reference_out.shape, dtype=inputs[0].dtype, device=inputs[0].device)
    got = torch.autograd.grad(fastpad_fn(*inputs), inputs, grad_output)
    expected = torch.autograd.grad(reference_out, reference_inputs, grad_output.double())
    for name, g, e in zip(("input", "weight", "bias"), got, expected):
        assert_matches(g, e, inputs[0].dtype, what=f"grad of {name}")


LOW_PRECISION = pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
GROUPINGS = ((1, 8, 6), (8, 8, 16))  # (groups, c_in, c_out): dense, and depthwise with multiplier 2


@LOW_PRECISION
@pytest.mark.parametrize("mode", PADDING_MODES)
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_conv_grads_vs_reference(nd, mode, dtype, device):
    size = {1: (33,), 2: (12, 13), 3: (6, 7, 5)}[nd]
    conv = getattr(fastpad, f"conv{nd}d")
    for groups, c_in, c_out in GROUPINGS:
        kwargs = dict(stride=2, padding="same", groups=groups, padding_mode=mode)
        inputs = [t.requires_grad_() for t in conv_inputs(size, c_in, c_out, 3, groups, dtype=dtype, device=device)]
        compare_grads(lambda x, w, b: conv(x, w, b, **kwargs), lambda x, w, b: expected_conv(x, w, b, **kwargs),
                      inputs)


@LOW_PRECISION
@pytest.mark.parametrize("padding", ["same", "same_lower", ((1, 0), (0, 2))])
def test_conv_transpose_grads_vs_reference(padding, dtype, device):
    for groups, c_in, c_out in GROUPINGS:
        kwargs = dict(stride=2, padding=padding, groups=groups, output_padding=1)
        x, w, b = conv_inputs((6, 7), c_in, c_out, 4, groups, transposed=True, dtype=dtype, device=device)
        inputs = [t.requires_grad_() for t in (x, w, b)]
        compare_grads(lambda x, w, b: fastpad.conv_transpose2d(x, w, b, **kwargs),
                      lambda x, w, b: expected_conv_transpose(x, w, b, **kwargs), inputs)


# (size, c_in, c_out, kernel, stride, groups, mode, dtype): NCHW weight gradients over images of few positions, which
# the CPU's phase planes reduce several images to a GEMM (a short last run of images: batch 7); 1-d and 2-d, grouped.
# Each has more positions over the batch than twice its output channels per group, so the tiles keep the transposed
# product (cpu_weight_grad_rows: see test_weight_gradients_over_few_positions_write_the_gradient_rows).
FEW_POSITION_WEIGHT_GRADS = [((9,), 24, 20, 4, 1, 1, "reflect", torch.float32),
                             ((5, 6), 16, 56, 3, 2, 4, "zeros", torch.float32),
                             ((4, 4), 12, 26, 2, 1, 2, "circular", torch.float64),
                             ((7,), 16, 28, 5, 1, 2, "replicate", torch.bfloat16)]


@pytest.mark.parametrize("isa", ["baseline", "avx2", "avx512"])
@pytest.mark.parametrize("size, c_in, c_out, kernel, stride, groups, mode, dtype", FEW_POSITION_WEIGHT_GRADS)
def test_weight_gradients_of_images_of_few_positions(size, c_in, c_out, kernel, stride, groups, mode, dtype, isa):
    """At each ISA: the GEMMs on torch's (baseline), on the AVX2 and on the AVX-512 reduction tiles."""
    require_isa(isa)
    x, _, _ = conv_inputs(size, c_in, c_out, kernel, groups, 7, dtype=dtype)
    nd = len(size)
    pads = [(kernel - 1, 0)] * nd  # causal: torch's symmetric padding cannot express it
    out_size = [(i + kernel - 1 - kernel) // stride + 1 for i in size]
    gy = torch.randn(7, c_out, *out_size, dtype=dtype)
    args = ([c_out, c_in // groups] + [kernel] * nd, [stride] * nd, [lo for lo, _ in pads], [1] * nd, groups, mode)
    w64 = torch.zeros(args[0], dtype=torch.float64, requires_grad=True)
    y64 = expected_conv(x.double(), w64, None, stride=stride, padding=pads, groups=groups, padding_mode=mode)
    (expected,) = torch.autograd.grad(y64, w64, gy.double())
    with cpu_isa_limit(isa):
        path = torch.ops.fastpad._conv_weight_grad_path(x, gy, *args, "cpu")
        assert path == reduction_tiles_kernel("cpu_phase_planes", dtype)
        poison(expected.shape, dtype)
        assert_matches(torch.ops.fastpad.conv_weight_grad(x, gy, *args), expected, dtype, what="weight gradient")


# (size, c_in, c_out, kernel, stride, dilation, batch, groups, mode, dtype): NCHW weight gradients over at most 128
# positions and at most twice their output channels per group, which the tiles write as the gradient's rows
# (kernel_paths.h's cpu_weight_grad_rows): one image, its rows 13 x 9 = 117 values (a masked last vector) and
# 37 output channels (blocks of 12 rows and one of 1); 5 images to one GEMM, grouped, bfloat16; 3 groups of one
# part each, 3-d with an output depth of 1, dilated; 128 positions exactly, split into two parts of channels.
WEIGHT_ROWS_GRADS = [((7, 7), 13, 37, 3, 1, 1, 1, 1, "replicate", torch.float32),
                     ((8,), 12, 40, 3, 1, 1, 5, 2, "circular", torch.bfloat16),
                     ((1, 6, 5), 9, 96, 3, 1, (1, 2, 1), 2, 3, "zeros", torch.float32),
                     ((8, 8), 16, 64, 1, 1, 1, 2, 1, "reflect", torch.float32)]


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize("size, c_in, c_out, kernel, stride, dilation, batch, groups, mode, dtype", WEIGHT_ROWS_GRADS)
def test_weight_gradients_over_few_positions_write_the_gradient_rows(size, c_in, c_out, kernel, stride, dilation,
                                                                     batch, groups, mode, dtype, isa):
    """cpu_phase_planes_rows_avx2/_avx512 against float64 autograd, the result poisoned first; one more position
    (or a float64 input) keeps the transposed product (or torch's GEMM)."""
    require_isa(isa)
    nd = len(size)
    dilation = as_tuple(dilation, nd)
    x, _, _ = conv_inputs(size, c_in, c_out, kernel, groups, batch, dtype=dtype)
    pads = [((kernel - 1) * d, 0) for d in dilation]  # causal: torch's symmetric padding cannot express it
    gy = torch.randn(batch, c_out, *[(i - 1) // stride + 1 for i in size], dtype=dtype)
    args = ([c_out, c_in // groups] + [kernel] * nd, [stride] * nd, [lo for lo, _ in pads], list(dilation), groups,
            mode)
    w64 = torch.zeros(args[0], dtype=torch.float64, requires_grad=True)
    y64 = expected_conv(x.double(), w64, None, stride=stride, padding=pads, dilation=dilation, groups=groups,
                        padding_mode=mode)
    (expected,) = torch.autograd.grad(y64, w64, gy.double())
    with cpu_isa_limit(isa):
        assert torch.ops.fastpad._conv_weight_grad_path(x, gy, *args, "cpu") == f"cpu_phase_planes_rows_{isa}"
        poison(expected.shape, dtype)
        grad = torch.ops.fastpad.conv_weight_grad(x, gy, *args)
        assert_matches(grad, expected, dtype, what="weight gradient")
        assert grad.is_contiguous() and grad.stride() == torch.empty(args[0]).stride()
        assert torch.ops.fastpad._conv_weight_grad_path(x.double(), gy.double(), *args, "cpu") == "cpu_phase_planes"
        longer = torch.cat([gy, gy[:1]])  # one more image: past 128 or twice the output channels per group
        assert torch.ops.fastpad._conv_weight_grad_path(torch.cat([x, x[:1]]), longer, *args,
                                                        "cpu") == f"cpu_phase_planes_{isa}"


# (size, c_in, c_out, kernel, stride, batch): channels-last weight gradients on the reduction tiles, which
# reduce a tile of im2col columns (512 KiB of them; replicate pads, which keep them off the tap GEMMs over x in place,
# kernel_paths.h's cpu_weight_grad_taps) over 64 positions at a time (conv_weight_grad.cpp's
# kWeightGradTilesDepth): 910 positions per tile (14 chunks and 14 left over, then a 20-position tile), a depth under
# one chunk (6 positions), 3-d, one row of 130 positions; and reductions over 4096 values, gathered and reduced by
# blocks of rows of taps (kWeightGradBlockMinPositions): 183 x 5 x 5 by blocks of 2, 2 and 1 rows of 915 values (a
# masked last vector), 3-d 160 x 3 x 3 x 3 by blocks of 4, 4 and 1 rows. One image of 20 x 20 positions, 298 -> 48
# channels k5: its 5 tiles are cut into 6 of equal size on 2 threads (kWeightGradBalanceMinJobsPerThread).
CHUNKED_WEIGHT_GRADS = [((30, 31), 16, 24, 3, 1, 2),
                        ((20, 20), 298, 48, 5, 1, 1),
                        ((3, 4), 24, 40, 3, 2, 3),
                        ((6, 7, 8), 16, 32, 2, 1, 2),
                        ((1, 130), 20, 36, 5, 1, 1),
                        ((6, 7), 183, 20, 5, 1, 2),
                        ((4, 4, 5), 160, 24, 3, 2, 1)]


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize("size, c_in, c_out, kernel, stride, batch", CHUNKED_WEIGHT_GRADS)
def test_channels_last_weight_gradients_reduce_in_chunks_of_positions(size, c_in, c_out, kernel, stride, batch, isa):
    require_isa(isa)
    nd = len(size)
    x, _, _ = conv_inputs(size, c_in, c_out, kernel, 1, batch, dtype=torch.float32)
    pads = [(1, kernel - 2)] * nd if kernel > 2 else [(0, 1)] * nd
    out_size = [(i + sum(p) - kernel) // stride + 1 for i, p in zip(size, pads)]
    gy = torch.randn(batch, c_out, *out_size)
    if nd > 1:
        memory_format = torch.channels_last if nd == 2 else torch.channels_last_3d
        x, gy = x.contiguous(memory_format=memory_format), gy.contiguous(memory_format=memory_format)
    args = ([c_out, c_in] + [kernel] * nd, [stride] * nd, [lo for lo, _ in pads], [1] * nd, 1, "replicate")
    w64 = torch.zeros(args[0], dtype=torch.float64, requires_grad=True)
    y64 = expected_conv(x.double(), w64, None, stride=stride, padding=pads, padding_mode="replicate")
    (expected,) = torch.autograd.grad(y64, w64, gy.double())
    with cpu_isa_limit(isa):
        path = torch.ops.fastpad._conv_weight_grad_path(x, gy, *args, "cpu")
        assert path == reduction_tiles_kernel("cpu_channels_last_gemm", torch.float32), (size, path)
        poison(expected.shape)
        assert_matches(torch.ops.fastpad.conv_weight_grad(x, gy, *args), expected, torch.float32,
                       what="weight gradient")


# (size, c_in, c_out, groups, kernel, stride, dilation, pads, mode, batch): channels-last float32 weight gradients as
# GEMMs per tap over x in place (kernel_paths.h's cpu_weight_grad_taps): 'same' k4 pads (1, 2), whose border taps sum
# fewer rows and shorter runs, in a band of rows over both images (conv_weight_grad.cpp's kWeightGradTapsBandBytes);
# stride 2 with dilation 2; two groups (a 1x1 stride-2 kernel, whose x copy to NCHW would not be repaid); a 1x1
# kernel, whose one tap cuts its 40 gradient rows and 48 columns into blocks for 2 threads (12-row blocks, then 32 and
# 16 columns); 3-d with a stride along h; a reflect conv that reads no padding.
TAP_GEMM_WEIGHT_GRADS = {
    "k4_same_band_over_two_images": ((16, 20), 64, 64, 1, (4, 4), (1, 1), 1, [(1, 2), (1, 2)], "zeros", 2),
    "s2_d2": ((21, 23), 32, 48, 1, (3, 3), (2, 2), 2, [(2, 1), (0, 2)], "zeros", 2),
    "grouped_1x1_s2": ((21, 23), 64, 48, 2, (1, 1), (2, 2), 1, [(0, 0), (0, 0)], "zeros", 2),
    "1x1_row_and_column_blocks": ((9, 10), 48, 40, 1, (1, 1), (1, 1), 1, [(0, 0), (0, 0)], "zeros", 3),
    "3d_strided": ((4, 12, 13), 16, 20, 1, (3, 3, 3), (1, 2, 1), 1, [(1, 1), (1, 1), (1, 1)], "zeros", 2),
    "reflect_reading_no_padding": ((12, 14), 32, 40, 1, (3, 3), (1, 1), 1, [(0, 0), (0, 0)], "reflect", 2),
}


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize("case", TAP_GEMM_WEIGHT_GRADS)
def test_channels_last_weight_gradients_run_a_gemm_per_tap_over_x(case, isa):
    require_isa(isa)
    size, c_in, c_out, groups, kernel, stride, dilation, pads, mode, batch = TAP_GEMM_WEIGHT_GRADS[case]
    nd = len(size)
    x, _, _ = conv_inputs(size, c_in, c_out, kernel, groups, batch=batch, dtype=torch.float32)
    out_size = [(i + lo + hi - dilation * (k - 1) - 1) // s + 1 for i, (lo, hi), k, s in zip(size, pads, kernel, stride)]
    gy = torch.randn(batch, c_out, *out_size)
    memory_format = torch.channels_last if nd == 2 else torch.channels_last_3d
    x, gy = x.contiguous(memory_format=memory_format), gy.contiguous(memory_format=memory_format)
    weight_shape = [c_out, c_in // groups, *kernel]
    args = (weight_shape, list(stride), [lo for lo, _ in pads], [dilation] * nd, groups, mode)
    w64 = torch.zeros(weight_shape, dtype=torch.float64, requires_grad=True)
    y64 = expected_conv(x.double(), w64, None, stride=stride, padding=pads, dilation=dilation, groups=groups,
                        padding_mode=mode)
    (expected,) = torch.autograd.grad(y64, w64, gy.double())
    with cpu_isa_limit(isa), intra_op_threads(2):
        assert torch.ops.fastpad._conv_weight_grad_path(x, gy, *args, "cpu") == f"cpu_channels_last_taps_{isa}"
        poison(expected.shape)
        grad = torch.ops.fastpad.conv_weight_grad(x, gy, *args)
    assert grad.is_contiguous(memory_format=memory_format)
    assert_matches(grad, expected, torch.float32, what="weight gradient")


# Channels-last 'same' k3 weight gradients past one bound of kernel_paths.h's cpu_weight_grad_taps each, which
# keep the im2col columns, and the same call just inside it, which takes the tap GEMMs: (size, c_in, c_out, dtype,
# mode) outside, then inside. 9 input channels fill 9 of 16 lanes on AVX2 and AVX-512 alike, 10 fill 10.
TAP_GEMM_BOUNDS = {
    "lane_use": (((20, 20), 9, 15, torch.float32, "zeros"), ((20, 20), 10, 15, torch.float32, "zeros")),
    "output_per_input_channels": (((20, 20), 16, 33, torch.float32, "zeros"),
                                  ((20, 20), 16, 32, torch.float32, "zeros")),
    "output_channels": (((10, 10), 200, 264, torch.float32, "zeros"), ((10, 10), 200, 256, torch.float32, "zeros")),
    "slice_positions": (((7, 9), 64, 64, torch.float32, "zeros"), ((8, 8), 64, 64, torch.float32, "zeros")),
    "float32_only": (((20, 20), 64, 64, torch.bfloat16, "zeros"), ((20, 20), 64, 64, torch.float32, "zeros")),
    "padding_read_in_zeros_only": (((20, 20), 64, 64, torch.float32, "reflect"),
                                   ((20, 20), 64, 64, torch.float32, "zeros")),
}


@pytest.mark.parametrize("bound", TAP_GEMM_BOUNDS)
def test_the_tap_gemms_leave_the_calls_past_their_bounds_to_the_im2col_columns(bound):
    require_isa("avx2")

    def path(size, c_in, c_out, dtype, mode):
        x = torch.randn(2, c_in, *size, dtype=dtype).contiguous(memory_format=torch.channels_last)
        gy = torch.randn(2, c_out, *size, dtype=dtype).contiguous(memory_format=torch.channels_last)
        return torch.ops.fastpad._conv_weight_grad_path(x, gy, [c_out, c_in, 3, 3], [1, 1], [1, 1], [1, 1], 1, mode,
                                                        "cpu")

    outside, inside = TAP_GEMM_BOUNDS[bound]
    assert path(*outside) == reduction_tiles_kernel("cpu_channels_last_gemm", outside[3])
    assert path(*inside) == reduction_tiles_kernel("cpu_channels_last_taps", inside[3])


# (size, c_in, c_out, groups, kernel, stride, dilation, pads, mode): grouped channels-last weight gradients on the
# GEMM over im2col columns (kernel_paths.h sends grouped ones there where an image has under 64 output positions or
# x's copy would not be repaid), whose tap sources each job resolves once for all its groups (gemm_tiles.h's
# im2col_sources_nhwc): 8 channels per group at stride 2 (seed 1's random066), a replicate k3x1 (seed 3's random024),
# reflect and circular pads that reach past the border, dilation, 3-d, and a reduction of 96 x 49 taps long enough to
# be taken by blocks of tap rows (kWeightGradBlockMinPositions).
GROUPED_CHANNELS_LAST_WEIGHT_GRADS = {
    "g8_k2_s2_valid": ((16, 16), 64, 64, 8, (2, 2), 2, 1, [(0, 0), (0, 0)], "zeros"),
    "g16_k3x1_s2_replicate": ((20, 14), 128, 128, 16, (3, 1), 2, 1, [(1, 1), (0, 0)], "replicate"),
    "g4_k3_reflect_dilated": ((7, 8), 12, 8, 4, (3, 3), 1, 2, [(2, 2), (1, 3)], "reflect"),
    "g2_k3_circular_asymmetric": ((9, 10), 6, 10, 2, (3, 3), 2, 1, [(0, 2), (2, 1)], "circular"),
    "g3_3d_zeros": ((3, 4, 4), 9, 6, 3, (2, 3, 2), 1, 1, [(1, 0), (1, 1), (0, 1)], "zeros"),
    "g2_k7_blocks_of_tap_rows": ((7, 7), 192, 16, 2, (7, 7), 1, 1, [(3, 3), (3, 3)], "zeros"),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16],
                         ids=["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("case", GROUPED_CHANNELS_LAST_WEIGHT_GRADS)
def test_grouped_channels_last_weight_gradients_share_the_tap_sources(case, dtype):
    size, c_in, c_out, groups, kernel, stride, dilation, pads, mode = GROUPED_CHANNELS_LAST_WEIGHT_GRADS[case]
    nd = len(size)
    x, _, _ = conv_inputs(size, c_in, c_out, kernel, groups, batch=2, dtype=dtype)
    out_size = [(i + lo + hi - dilation * (k - 1) - 1) // stride + 1 for i, (lo, hi), k in zip(size, pads, kernel)]
    gy = torch.randn(2, c_out, *out_size, dtype=dtype)
    memory_format = torch.channels_last if nd == 2 else torch.channels_last_3d
    x, gy = x.contiguous(memory_format=memory_format), gy.contiguous(memory_format=memory_format)
    weight_shape = [c_out, c_in // groups, *kernel]
    args = (weight_shape, [stride] * nd, [lo for lo, _ in pads], [dilation] * nd, groups, mode)
    assert torch.ops.fastpad._conv_weight_grad_path(x, gy, *args, "cpu") == reduction_tiles_kernel(
        "cpu_channels_last_gemm", dtype)
    w64 = torch.zeros(weight_shape, dtype=torch.float64, requires_grad=True)
    y64 = expected_conv(x.double(), w64, None, stride=stride, padding=pads, dilation=dilation, groups=groups,
                        padding_mode=mode)
    (expected,) = torch.autograd.grad(y64, w64, gy.double())
    poison(expected.shape, dtype)
    assert_matches(torch.ops.fastpad.conv_weight_grad(x, gy, *args), expected.to(dtype), dtype,
                   what="weight gradient")


def weight_grad_case(size, c_in, c_out, groups, kernel, stride, dilation, pads, mode, dtype):
    """Fresh NCHW x (batch 2) and grad_output of a conv with the same (lo, hi) pads on every dim, the conv_weight_grad
    op's arguments after those two, and the float64 reference weight gradient."""
    nd = len(size)
    x, _, _ = conv_inputs(size, c_in, c_out, kernel, groups, 2, dtype=dtype)
    out_size = [(i + sum(pads) - dilation * (kernel - 1) - 1) // stride + 1 for i in size]
    gy = torch.randn(2, c_out, *out_size, dtype=dtype)
    args = ([c_out, c_in // groups] + [kernel] * nd, [stride] * nd, [pads[0]] * nd, [dilation] * nd, groups, mode)
    w64 = torch.zeros(args[0], dtype=torch.float64, requires_grad=True)
    y64 = expected_conv(x.double(), w64, None, stride=stride, padding=[pads] * nd, dilation=dilation, groups=groups,
                        padding_mode=mode)
    (expected,) = torch.autograd.grad(y64, w64, gy.double())
    return x, gy, args, expected


def channels_last(t):
    return t.contiguous(memory_format=torch.channels_last if t.dim() == 4 else torch.channels_last_3d)


# (size, channels, multiplier, kernel, stride, dilation, pads, mode, expanded): channels-last depthwise weight
# gradients with a multiplier, from x's rows expanded in place where the output rows hold 28 positions or more or the
# output fewer than 64 (kernel_paths.h's cpu_depthwise_weight_grad_expanded: 31-wide rows, reflect with dilation 2; a
# 3-d 3 x 4 x 5 output), else from NCHW copies (rows of 12 at stride 2); under a 32-byte vector of output channels
# (3 x 2 in float32 and bfloat16) the NCHW kernel over the channels-last tensors (cpu_depthwise_strided_planes).
MULTIPLIER_WEIGHT_GRADS = [((9, 31), 8, 3, 3, 1, 2, (2, 2), "reflect", True),
                           ((5, 6, 7), 16, 2, 3, 1, 1, (0, 0), "zeros", True),
                           ((12, 40), 3, 2, 5, 1, 1, (2, 2), "replicate", True),
                           ((13, 24), 16, 2, 3, 2, 1, (1, 0), "circular", False)]


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=["float64", "float32", "bfloat16"])
@pytest.mark.parametrize("size, channels, multiplier, kernel, stride, dilation, pads, mode, expanded",
                         MULTIPLIER_WEIGHT_GRADS)
def test_channels_last_depthwise_weight_gradients_with_a_multiplier(size, channels, multiplier, kernel, stride,
                                                                    dilation, pads, mode, expanded, dtype, isa):
    """Against the float64 reference, with the path: depthwise.cpp's channels-last sums (on AVX-512 from 16 output
    channels in float32 and bfloat16: _avx512) where x's rows are expanded, the NCHW kernel on copies otherwise."""
    require_isa(isa)
    c_out = channels * multiplier
    x, gy, args, expected = weight_grad_case(size, channels, c_out, channels, kernel, stride, dilation, pads, mode,
                                             dtype)
    x, gy = channels_last(x), channels_last(gy)
    with cpu_isa_limit(isa):
        path = torch.ops.fastpad._conv_weight_grad_path(x, gy, *args, "cpu")
        wide = isa == "avx512" and expanded and dtype != torch.float64 and c_out >= 16
        assert path == strided_planes_or("cpu_depthwise" + ("_avx512" if wide else ""), dtype, c_out), (size, path)
        poison(expected.shape, dtype)
        assert_matches(torch.ops.fastpad.conv_weight_grad(x, gy, *args), expected, dtype, what="weight gradient")


# (size, groups, input channels per group, kernel, stride, dilation, pads, mode): channels-last weight gradients with
# one output channel per group, run as the depthwise weight gradient of the input against grad_output repeated per
# input channel (kernel_paths.h's cpu_depthwise_weight_grad_repeated): 2, 5 and 17 input channels per group (the
# tiles' blocks then end inside a repeated run, and the vector ending a block starts before it), strides, dilation,
# the four padding modes, 3-d; under a vector of input channels (3 x 2), a single vector (8 x 2) and more.
REPEATED_WEIGHT_GRADS = [((9, 31), 4, 2, 3, 1, 2, (2, 2), "reflect"),
                         ((5, 6, 7), 8, 2, 3, 1, 1, (0, 0), "zeros"),
                         ((12, 40), 3, 5, 5, 2, 1, (2, 2), "replicate"),
                         ((13, 24), 2, 17, 3, 2, 1, (1, 0), "circular"),
                         ((11, 30), 3, 2, 4, 1, 1, (1, 2), "zeros")]


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=["float64", "float32", "bfloat16"])
@pytest.mark.parametrize("size, groups, per_group, kernel, stride, dilation, pads, mode", REPEATED_WEIGHT_GRADS)
def test_channels_last_weight_gradients_of_one_output_channel_per_group(size, groups, per_group, kernel, stride,
                                                                        dilation, pads, mode, dtype, isa):
    """Against the float64 reference, outputs poisoned first, with the path: the depthwise weight gradient of x with
    each grad_output channel repeated over its group's input channels, each thread expanding its channels of each
    grad_output row (cpu_depthwise_repeated; on AVX-512 from 16 input channels in float32 and bfloat16: _avx512).
    NCHW keeps the other kernels."""
    require_isa(isa)
    c_in = groups * per_group
    x, gy, args, expected = weight_grad_case(size, c_in, groups, groups, kernel, stride, dilation, pads, mode, dtype)
    with cpu_isa_limit(isa):
        assert not torch.ops.fastpad._conv_weight_grad_path(x, gy, *args, "cpu").startswith("cpu_depthwise_repeated")
        x, gy = channels_last(x), channels_last(gy)
        path = torch.ops.fastpad._conv_weight_grad_path(x, gy, *args, "cpu")
        wide = isa == "avx512" and dtype != torch.float64 and c_in >= 16
        assert path == "cpu_depthwise_repeated" + ("_avx512" if wide else ""), (size, path)
        poison(expected.shape, dtype)
        assert_matches(torch.ops.fastpad.conv_weight_grad(x, gy, *args), expected, dtype, what="weight gradient")


# (size, channels, kernel, stride, dilation, pads, mode, blocks): NCHW depthwise weight gradients with multiplier 1,
# on the channel blocks where the channels fill 32-byte vectors to within an eighth and the output rows hold at most
# 512 positions (kernel_paths.h's cpu_depthwise_weight_grad_channel_blocks): B0's k5 s1 layer at 14 x 14; 40 channels
# (on AVX-512 a block of 32 and one of 16 ending at C, which writes only its last 8); 3-d with dilation 2; a causal
# 1-d row; and the NCHW kernel for 33 channels (5 vectors of 8 for 33), 7 (under a vector), and rows of 550 outputs.
NCHW_DEPTHWISE_WEIGHT_GRADS = [((14, 14), 48, 5, 1, 1, (2, 2), "zeros", True),
                               ((19, 21), 40, 3, 2, 1, (1, 1), "reflect", True),
                               ((9, 10, 11), 24, 3, 1, 2, (2, 2), "circular", True),
                               ((200,), 32, 4, 1, 1, (3, 0), "zeros", True),
                               ((60,), 33, 7, 3, 1, (3, 3), "replicate", False),
                               ((12, 12), 7, 3, 1, 1, (1, 1), "zeros", False),
                               ((1100,), 16, 3, 2, 1, (1, 1), "zeros", False)]


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16],
                         ids=["float64", "float32", "bfloat16", "float16"])
@pytest.mark.parametrize("size, channels, kernel, stride, dilation, pads, mode, blocks", NCHW_DEPTHWISE_WEIGHT_GRADS)
def test_nchw_depthwise_weight_gradients_on_channel_blocks(size, channels, kernel, stride, dilation, pads, mode,
                                                           blocks, dtype, isa):
    """Against the float64 reference, outputs poisoned first, with the path: NCHW depthwise weight gradients on the
    channel blocks (cpu_depthwise_channel_blocks; blocks of 16 channels on AVX-512 from 16 channels: _avx512), float
    accumulation only (float64 keeps the NCHW kernel, cpu_depthwise). On the blocks, the result is bitwise the
    channels-last kernel's on the same tensors: each channel's sums are the same products in the same order."""
    require_isa(isa)
    x, gy, args, expected = weight_grad_case(size, channels, channels, channels, kernel, stride, dilation, pads, mode,
                                             dtype)
    on_blocks = blocks and dtype != torch.float64
    wide = on_blocks and isa == "avx512" and channels >= 16
    expected_path = ("cpu_depthwise_channel_blocks" + ("_avx512" if wide else "")) if on_blocks else "cpu_depthwise"
    with cpu_isa_limit(isa):
        assert ops._conv_weight_grad_path(x, gy, *args, "cpu") == expected_path, (size, dtype, isa)
        poison(expected.shape, dtype)
        grad = ops.conv_weight_grad(x, gy, *args)
        assert_matches(grad, expected, dtype, what="weight gradient")
        if on_blocks and len(size) > 1:
            assert torch.equal(grad, ops.conv_weight_grad(channels_last(x), channels_last(gy), *args))


def test_nchw_depthwise_weight_gradient_on_channel_blocks_through_autograd():
    """B0's k5 s1 layer's shape (48 channels, 14 x 14), float32: the weight gradient of fastpad.conv2d's backward runs
    on the channel blocks and matches the float64 reference's."""
    x, gy, args, expected = weight_grad_case((14, 14), 48, 48, 48, 5, 1, 1, (2, 2), "zeros", torch.float32)
    assert ops._conv_weight_grad_path(x, gy, *args, "cpu").startswith("cpu_depthwise_channel_blocks")
    w = torch.randn(args[0], requires_grad=True)
    fastpad.conv2d(x, w, padding="same", groups=48).backward(gy)
    assert_matches(w.grad, expected, torch.float32, what="weight gradient")


def check_weight_gradient_over_a_long_sum(x, gy, weight_shape, groups, isa, path):
    """fastpad's float32 weight gradient of the 'valid' stride-1 conv of x to gy at `isa`, on `path`, against the
    float64 reference, its output poisoned first: within 3e-6, relative."""
    args = (list(weight_shape), [1, 1], [0, 0], [1, 1], groups, "zeros")
    w64 = torch.zeros(weight_shape, dtype=torch.float64, requires_grad=True)
    (expected,) = torch.autograd.grad(expected_conv(x.double(), w64, None, padding="valid", groups=groups), w64,
                                      gy.double())
    with cpu_isa_limit(isa):
        assert torch.ops.fastpad._conv_weight_grad_path(x, gy, *args, "cpu") == path
        poison(expected.shape, torch.float32)
        grad = torch.ops.fastpad.conv_weight_grad(x, gy, *args)
    error = relative_error(grad, expected)
    assert error < 3e-6, error


# (batch, size, channels, multiplier, kernel, isa, path): channels-last depthwise weight gradients that sum about
# 200 000 products each (random layer seed 2's random034: g7, 2 output channels per group, 1x1 over 6 x 189 x 189).
LONG_DEPTHWISE_WEIGHT_GRADS = [(6, (189, 189), 7, 2, 1, "avx512", "cpu_depthwise"),  # a vector and the one ending it
                               (2, (160, 160), 32, 1, 3, "avx512", "cpu_depthwise_avx512"),
                               (4, (220, 220), 3, 1, 3, "avx2", "cpu_depthwise_strided_planes")]  # the NCHW kernel


@pytest.mark.parametrize("batch, size, channels, multiplier, kernel, isa, path", LONG_DEPTHWISE_WEIGHT_GRADS)
def test_channels_last_depthwise_weight_gradients_over_long_sums(batch, size, channels, multiplier, kernel, isa, path):
    """Each output row's sums start from zero and are then added to the running sums (nhwc_tiles_kernel.h), so a
    float32 sum of 200 000 products stays within 3e-6 of the float64 reference, relative (torch's own float32 weight
    gradient of the first case: 1.9e-6; a running sum through every product: 0.6-1.3e-5)."""
    require_isa(isa)
    c_out = channels * multiplier
    x, _, _ = conv_inputs(size, channels, c_out, kernel, channels, batch, dtype=torch.float32)
    gy = torch.randn(batch, c_out, *[i - kernel + 1 for i in size])
    x, gy = x.contiguous(memory_format=torch.channels_last), gy.contiguous(memory_format=torch.channels_last)
    check_weight_gradient_over_a_long_sum(x, gy, [c_out, 1, kernel, kernel], channels, isa, path)


# (batch, in channels, out channels, size, layout, path): weight gradients on the reduction tiles that sum
# 120 000-214 000 products per value, channels-last on the GEMM over im2col columns (a stem's 3 input channels) and
# the tap GEMMs over x in place (16), NCHW on the phase planes.
LONG_TILE_WEIGHT_GRADS = [(6, 3, 8, 189, "channels_last", "cpu_channels_last_gemm_avx512"),
                          (6, 16, 16, 160, "channels_last", "cpu_channels_last_taps_avx512"),
                          (6, 16, 16, 160, "contiguous", "cpu_phase_planes_avx512")]


@pytest.mark.parametrize("batch, c_in, c_out, size, layout, path", LONG_TILE_WEIGHT_GRADS)
def test_weight_gradients_over_long_sums_on_the_reduction_tiles(batch, c_in, c_out, size, layout, path):
    """The reduction tiles sum each call's products from zero and then add them to what c holds
    (reduction_tiles_kernel.h), so a float32 3x3 weight gradient over 120 000-214 000 products per value stays within
    3e-6 of the float64 reference, relative (carried through c, the products took it to 4.9-7.0e-6)."""
    require_isa("avx512")
    x, w, _ = conv_inputs((size, size), c_in, c_out, 3, 1, batch, dtype=torch.float32)
    gy = torch.randn(batch, c_out, size - 2, size - 2)
    if layout == "channels_last":
        x, gy = x.contiguous(memory_format=torch.channels_last), gy.contiguous(memory_format=torch.channels_last)
    check_weight_gradient_over_a_long_sum(x, gy, w.shape, 1, "avx512", path)


class SumShapes(TorchDispatchMode):
    """The shapes of the tensors torch sums (aten.sum) while the mode is on."""

    def __init__(self):
        super().__init__()
        self.shapes = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket is torch.ops.aten.sum:
            self.shapes.append(tuple(args[0].shape))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("shape", [(3, 5, 16, 19), (3, 5, 17, 19), (2, 14, 5, 7, 11), (1, 33, 7, 9), (2, 32, 5, 6),
                                   (2, 65, 5, 6), (4, 1, 6, 6)])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=["float64", "float32", "bfloat16"])
def test_channels_last_bias_gradients_of_few_channels_sum_rows_of_pixels(shape, dtype):
    """A channels-last CPU bias gradient with up to 64 channels, not a power of two, is summed as rows of 256 values
    (whole pixels), then the row's pixels, plus the pixels past the last whole row (autograd.cpp's
    reduce_over_positions): 5 channels (51 pixels a row: of 912, 45 left over; of 969, none), 3-d (14 channels: 42
    rows of 18 pixels and 14 left over), 33 (8 rows of 7 pixels and 7 left over), against the float64 sum; 32 and 65
    channels, and one channel (contiguous as well), take torch's plain sum. The sums asked of torch are recorded to
    tell the two apart."""
    memory_format = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
    x = torch.randn(shape, dtype=dtype).to(memory_format=memory_format)
    w = torch.randn(shape[1], 1, *([3] * (len(shape) - 2)), dtype=dtype)
    b = torch.randn(shape[1], dtype=dtype, requires_grad=True)
    y = fastpad.conv2d(x, w, b, padding="same", groups=shape[1]) if len(shape) == 4 else fastpad.conv3d(
        x, w, b, padding="same", groups=shape[1])
    grad = torch.randn(y.shape, dtype=dtype).to(memory_format=memory_format)
    with SumShapes() as sums:
        (grad_bias,) = torch.autograd.grad(y, [b], grad)
    folded = shape[1] <= 64 and shape[1] & (shape[1] - 1) != 0
    row = 256 // shape[1] * shape[1]
    assert any(list(s) == [s[0], row] for s in sums.shapes) == folded, sums.shapes
    expected = grad.double().sum([0] + list(range(2, len(shape))))
    assert_matches(grad_bias, expected, dtype, what="bias gradient")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_16_bit_bias_gradient_sums_in_float(dtype, device):
    """The bias gradient over 508 x 508 positions is their sum rounded once (a fuzz case: torch's bfloat16 sum on CPU
    gave 88 where the exact sum of these values is 86.68)."""
    generator = torch.Generator().manual_seed(1114415155)
    x, w, b = (torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype=dtype, device=device)
               for shape in ((1, 1, 127, 127), (1, 1, 4, 4), (1,)))
    b.requires_grad_()
    y = fastpad.conv_transpose2d(x, w, b, stride=4, padding="valid")
    grad = torch.randn(y.shape, generator=generator, dtype=torch.float64).to(dtype=dtype, device=device)
    (grad_bias,) = torch.autograd.grad(y, [b], grad)
    assert grad_bias.item() == grad.double().sum().to(dtype).item()


@pytest.mark.parametrize("mode", PADDING_MODES)
def test_batch_zero_grads(mode, device):
    """An empty batch gives empty input grads and exactly-zero weight and bias grads (not uninitialised memory)."""
    kwargs = dict(stride=2, groups=2, padding="same")
    x, w, b = conv_inputs((5, 6), 4, 6, 3, 2, batch=0, device=device)
    poison(w.shape, w.dtype, w.device)
    compare_grads(lambda x, w, b: fastpad.conv2d(x, w, b, padding_mode=mode, **kwargs),
                  lambda x, w, b: expected_conv(x, w, b, padding_mode=mode, **kwargs),
                  [t.requires_grad_() for t in (x, w, b)])
    x, w, b = conv_inputs((5, 6), 4, 6, 3, 2, batch=0, transposed=True, device=device)
    poison(w.shape, w.dtype, w.device)
    compare_grads(lambda x, w, b: fastpad.conv_transpose2d(x, w, b, **kwargs),
                  lambda x, w, b: expected_conv_transpose(x, w, b, **kwargs), [t.requires_grad_() for t in (x, w, b)])


def test_channels_last_grads_vs_reference(device):
    x, w, b = conv_inputs((9, 10), 8, 8, 3, 8, device=device, dtype=torch.float32)
    x = x.to(memory_format=torch.channels_last)
    inputs = [t.requires_grad_() for t in (x, w, b)]
    kwargs = dict(stride=2, padding="same", groups=8, padding_mode="reflect")
    compare_grads(lambda x, w, b: fastpad.conv2d(x, w, b, **kwargs), lambda x, w, b: expected_conv(x, w, b, **kwargs),
                  inputs)


# --------------------------------------------------------------------------------------------
# torch.compile(fullgraph=True) of fastpad layers, forward and backward, against eager.


def make_model(device):
    return torch.nn.Sequential(
        fastpad.nn.Conv2d(3, 8, 3, stride=2, padding="same"),
        torch.nn.ReLU(),
        fastpad.nn.Conv2d(8, 8, 3, groups=8, padding="same", padding_mode="reflect"),
        fastpad.nn.ConvTranspose2d(8, 4, 3, stride=2, padding="same"),
    ).to(device)


def assert_compiled_matches_eager(model, compiled, sizes, device):
    for size in sizes:
        x = torch.randn(2, 3, *size, device=device)
        eager, got = model_forward_backward(model, x), model_forward_backward(compiled, x)
        assert eager[0].shape[2:] == tuple(2 * -(-i // 2) for i in size)
        for name, g, e in zip(["output", "input grad"] + [n for n, _ in model.named_parameters()], got, eager):
            assert relative_error(g, e) < 1e-5, f"{name} at size {size}: compiled differs from eager"


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_compile_fullgraph(dynamic, device):
    torch._dynamo.reset()
    model = make_model(device)
    compiled = torch.compile(model, fullgraph=True, dynamic=dynamic)
    start = time.perf_counter()
    sizes = [(15, 16), (16, 17), (21, 20)] if dynamic else [(15, 16)]
    counters.clear()
    assert_compiled_matches_eager(model, compiled, sizes, device)
    assert time.perf_counter() - start < 120, "compilation took too long"
    if dynamic:  # the padding is symbolic: sizes of another parity reuse the graph instead of recompiling
        assert counters["stats"]["unique_graphs"] < len(sizes), dict(counters["stats"])


# (case, the weight-gradient path it reaches on this machine's widest ISA): channels-last on the GEMM's tiles (rows
# written untransposed), depthwise (size-1 dims: channels-last and contiguous strides differ only there), a 1x1 kernel,
# grouped on NCHW copies (the tap dots), 3-d; and an NCHW input, whose gradient stays contiguous.
WEIGHT_GRAD_LAYOUT_CASES = [
    ConvCase(False, (9, 10), 24, 20, 3, 1, "same", padding_mode="reflect", layout="channels_last"),
    ConvCase(False, (9, 10), 16, 16, 3, 2, "same", groups=16, layout="channels_last"),
    ConvCase(False, (9, 10), 24, 20, 1, 1, "valid", layout="channels_last"),
    ConvCase(False, (20, 21), 12, 6, 3, 2, "same", groups=3, padding_mode="replicate", layout="channels_last"),
    ConvCase(False, (5, 6, 7), 8, 12, 3, 1, "same", layout="channels_last"),
    ConvCase(False, (9, 10), 24, 20, 3, 1, "same", padding_mode="reflect"),
]


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16"])
@pytest.mark.parametrize("case", WEIGHT_GRAD_LAYOUT_CASES, ids=ConvCase.describe)
def test_weight_gradients_come_back_in_the_input_layout(case, dtype):
    """conv_weight_grad returns its gradient in its input's layout with the strides torch.empty gives that layout (the
    fake kernel's, size-1 dims included), so that a channels-last weight's AccumulateGrad takes it without a copy into
    the weight's strides (0.5 ms of a 1 x 438 x 12 x 12 -> 187 k3 layer's 4.8 ms forward+backward). Values against
    the float64 reference through the public function; the op's own output and its fake kernel's strides compared."""
    case = replace(case, dtype=dtype)
    x, w, b = case.random_inputs()
    if case.layout == "channels_last":
        w = w.to(memory_format=torch.channels_last if w.dim() == 4 else torch.channels_last_3d)
    grad_output = {}

    def draw(output):
        grad_output.setdefault("value", torch.randn_like(output))
        return grad_output["value"].to(output.dtype)

    with RecordFastpadOps() as record:
        _, (_, mine, _) = output_and_grads(case.fastpad_function(), [x, w, b], draw)
    _, (_, theirs, _) = output_and_grads(case.reference_function(), [x, w, b], draw)
    assert_matches(mine, theirs, x.dtype)
    [args] = [args for op, args in record.calls if op == "conv_weight_grad"]
    poison(w.shape, x.dtype)
    grad = ops.conv_weight_grad(*args)
    assert_weight_grad_layout(x, grad)
    with FakeTensorMode() as mode:
        fake_args = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
        assert ops.conv_weight_grad(*fake_args).stride() == grad.stride()
    torch.testing.assert_close(grad, mine, rtol=0, atol=0)
    if case.layout == "channels_last":  # what autograd hands a channels-last weight is in its strides: no copy
        assert mine.stride() == w.stride()
