"""CUDA-only tests: what fastpad's CUDA kernels (csrc/cuda) need beyond the device-parametrized reference tests.

The generic tests (test_conv.py, test_conv_transpose.py, test_autograd.py, ...) already run on every device through
the `device` fixture. This module aims at the CUDA kernel paths and at what only CUDA has:

- conv: depthwise (one input channel per group, with or without a channel multiplier) on contiguous input goes to a
  shared-memory halo tile kernel (256 outputs per tile: 8x32, narrower and taller for narrow outputs, 1x256 when the
  output height is 1, i.e. 1-d); depthwise channels_last, and depthwise whose input patch does not fit shared memory
  (huge stride or dilation), go to a direct kernel; everything else to an implicit GEMM with 64x64 output tiles
  (M = batch * output positions, N = output channels per group, K = input channels per group * taps), K steps of 16
  (float32 and float64, FMA) or 32 (float16 and bfloat16, tensor cores, float32 accumulation).
- conv_transpose: fewer than 4 input channels per group (weight.size(0) / groups) -> a direct gather kernel (every
  padding mode); else one implicit GEMM per stride phase, plus a fold kernel for padding modes other than zeros.
- conv_weight_grad: depthwise -> a block reduction per (channel, tap); else a split-K implicit GEMM
  (M = output channels per group, N = input channels per group * taps, K = batch * output positions) with a
  deterministic reduction of the partial sums.

The cases cross those tiles (channels > 64, M > 64, K > 32 with remainders), use odd sizes, strides 1-3, dilations
1-2, asymmetric pads, every padding mode, groups, 1-d/2-d/3-d, batch 0 and 1, channels_last (4-d and 5-d),
non-contiguous and expanded inputs and all four dtypes. Every result is compared with the float64 reference
(tests/reference.py) on fresh random inputs, each output poisoned with NaN first (the CUDA caching allocator hands
the poisoned block to the kernel's output), with the tolerances of docs/DESIGN.md section 7. Then: opcheck, gradcheck,
torch.compile (fullgraph, and mode="reduce-overhead", i.e. CUDA graphs), an explicit torch.cuda.graph capture on a
side stream, a non-default stream, a second GPU, bitwise determinism and (marker bigmem) int64 indexing.

Running it:

    python -m pytest tests/test_cuda.py -q            # the whole module skips without CUDA
    python -m pytest tests/test_cuda.py -q -m bigmem  # adds the int64-indexing tests (needs >= 40 GiB free on the GPU)

Environment variables:

- FASTPAD_CUDA_TESTS_ON_CPU=1 runs this module on the CPU kernels instead (DEVICE = "cpu"). It checks the tests' own
  logic (references, geometry, tolerances) on a machine without a GPU; what only CUDA has (streams, CUDA graphs,
  several GPUs, the bigmem tests) skips there.
- FASTPAD_CUDA_TESTS_CPU_REFERENCE=1 computes the float64 references on the CPU and compares there, so that on the
  GPU only fastpad's kernels and a few copies and fills run. scripts/gpu_check.sh sets it under compute-sanitizer,
  which then instruments fastpad's kernels rather than cuDNN's.

test_kernel_paths_small has one small case per kernel path; scripts/gpu_check.sh runs it under compute-sanitizer.
"""

import math
import os
from dataclasses import replace

import pytest
import torch
from torch._dynamo.utils import counters

import fastpad
from fastpad.cases import ConvCase, arrange, dtype_name
from reference import (
    model_forward_backward,
    CHANNELS_LAST,
    PADDING_MODES,
    assert_matches,
    assert_memory_format_kept,
    assert_weight_grad_layout,
    expected_conv_transpose,
    pads_supported,
    poison,
    reference_conv,
    relative_error,
    tf32_rounded,
    tolerance,
)

ops = torch.ops.fastpad

ON_CPU = os.environ.get("FASTPAD_CUDA_TESTS_ON_CPU") == "1"
DEVICE = "cpu" if ON_CPU else "cuda"
# Where the float64 references are computed (and results compared).
REFERENCE_DEVICE = "cpu" if os.environ.get("FASTPAD_CUDA_TESTS_CPU_REFERENCE") == "1" else DEVICE

pytestmark = pytest.mark.skipif(
    not ON_CPU and not torch.cuda.is_available(),
    reason="CUDA-only tests: torch.cuda.is_available() is False (FASTPAD_CUDA_TESTS_ON_CPU=1 runs them on the CPU "
           "to check the tests' own logic)")
cuda_only = pytest.mark.skipif(DEVICE != "cuda", reason="needs a real CUDA device (streams, CUDA graphs, GPUs)")

DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
INT_OF_WIDTH = {torch.float64: torch.int64, torch.float32: torch.int32, torch.bfloat16: torch.int16,
                torch.float16: torch.int16}
GiB = 1 << 30


# --------------------------------------------------------------------------------------------
# One conv geometry, and the three ops checked on it.


def conv_case(size, c_in, c_out, kernel, pads=None, **arguments):
    """A convolution case (fastpad/cases.py) with explicit (lo, hi) pads per spatial dim (None: no padding). The
    same geometry drives all three ops: conv(x) -> y, conv_transpose(gy) -> x's gradient (the adjoint: crop_lo =
    pad_lo, out_size = x's size, and the padding mode folded back), conv_weight_grad(x, gy) -> w's gradient."""
    return ConvCase(False, tuple(size), c_in, c_out, kernel, padding=0 if pads is None else pads, **arguments)


def supports(g, mode):
    """Whether F.pad takes g's pads in this padding mode."""
    return pads_supported(g.pads(), g.size, mode)


def random_like_layout(shape, dtype, like):
    """Fresh standard-normal values of `shape` in the memory format of `like` (channels_last or contiguous)."""
    fmt = CHANNELS_LAST.get(len(shape))
    channels_last = fmt is not None and like.is_contiguous(memory_format=fmt) and not like.is_contiguous()
    t = torch.randn(shape, dtype=dtype, device=like.device)
    return t.contiguous(memory_format=fmt) if channels_last else t


def to_reference(t, requires_grad=False):
    """A float64 copy on the reference device (keeps no autograd link to `t`)."""
    if t is None:
        return None
    return t.detach().to(REFERENCE_DEVICE, torch.float64).requires_grad_(requires_grad)


def assert_close_to_reference(actual, expected, dtype, what):
    """assert_matches, on the reference device."""
    return assert_matches(actual.detach().to(expected.device), expected.detach(), dtype, what)


def conv_make_inputs(g, dtype, layout="contiguous", bias=True):
    """Fresh random (x, w, b) of case g in this dtype, x in `layout`."""
    return replace(g, dtype=dtype_name(dtype), layout=layout, bias=bias).random_inputs(device=DEVICE)


def op_geometry(g):
    """(stride, pad_lo, pad_hi, dilation) of case g, as the ops take them."""
    return g.conv_op_arguments()[:4]


def run_ops(g, mode, x, w, b, gy):
    """The three ops on geometry g: (y, x's gradient, w's gradient)."""
    stride, pad_lo, pad_hi, dilation = op_geometry(g)
    y = ops.conv(x, w, b, stride, pad_lo, pad_hi, dilation, g.groups, mode)
    gx = ops.conv_transpose(gy, w, None, stride, pad_lo, list(x.shape[2:]), dilation, g.groups, mode)
    gw = ops.conv_weight_grad(x, gy, list(w.shape), stride, pad_lo, dilation, g.groups, mode)
    return y, gx, gw


def reference_ops(g, mode, x, w, b, gy):
    """The float64 reference of run_ops: F.pad + F.conv, and its autograd for the two gradients."""
    x64, w64 = to_reference(x, True), to_reference(w, True)
    y64 = reference_conv(x64, w64, to_reference(b), list(g.per_dim(g.stride)), g.pads(),
                         list(g.per_dim(g.dilation)), g.groups, mode)
    gx64, gw64 = torch.autograd.grad(y64, (x64, w64), to_reference(gy))
    return y64.detach(), gx64, gw64


def output_shape(g):
    """The conv's output shape (docs/DESIGN.md section 2: out = floor((i + lo + hi - k_eff) / s) + 1)."""
    sizes = [(i + lo + hi - d * (k - 1) - 1) // s + 1
             for i, (lo, hi), k, s, d in zip(g.size, g.pads(), g.per_dim(g.kernel), g.per_dim(g.stride),
                                            g.per_dim(g.dilation))]
    return (g.batch, g.out_channels, *sizes)


def check_ops(g, mode, dtype, layout="contiguous", x=None, w=None, b=None, gy=None, bias=True):
    """Runs the three ops on geometry g, each on a poisoned allocator, against the float64 reference; checks the
    output memory formats. Inputs default to fresh random ones (x in `layout`, gy in the output's layout).
    Returns (y, gx, gw)."""
    assert supports(g, mode), f"bad test case: {mode} pads {g.pads()} for size {g.size}"
    if x is None:
        x, w, b = conv_make_inputs(g, dtype, layout, bias)
    if gy is None:
        gy = random_like_layout(output_shape(g), dtype, x)
    expected_y, expected_gx, expected_gw = reference_ops(g, mode, x, w, b, gy)
    stride, pad_lo, pad_hi, dilation = op_geometry(g)

    poison(expected_y.shape, dtype, DEVICE)
    y = ops.conv(x, w, b, stride, pad_lo, pad_hi, dilation, g.groups, mode)
    assert_close_to_reference(y, expected_y, dtype, "conv output")
    assert_memory_format_kept(x, y)

    poison(x.shape, dtype, DEVICE)
    gx = ops.conv_transpose(gy, w, None, stride, pad_lo, list(x.shape[2:]), dilation, g.groups, mode)
    assert_close_to_reference(gx, expected_gx, dtype, "conv_transpose (input gradient)")
    assert_memory_format_kept(gy, gx)

    poison(w.shape, dtype, DEVICE)
    gw = ops.conv_weight_grad(x, gy, list(w.shape), stride, pad_lo, dilation, g.groups, mode)
    assert_close_to_reference(gw, expected_gw, dtype, "conv_weight_grad")
    assert_weight_grad_layout(x, gw)
    return y, gx, gw


def cases_by_mode_and_dtype(table, layouts=(None,)):
    """pytest params (name, mode, dtype[, layout]) for every case of `table` whose pads `mode` accepts (F.pad's
    rules), in every dtype (and every layout of `layouts` the case has: channels_last needs 2-d or 3-d)."""
    params = []
    for name, entry in table.items():
        g = entry[0] if isinstance(entry, tuple) else entry
        for layout in layouts:
            if layout == "channels_last" and g.dims == 1:
                continue
            for mode in PADDING_MODES:
                if not supports(g, mode):
                    continue
                for dtype in DTYPES:
                    if layout is None:
                        params.append(pytest.param(name, mode, dtype, id=f"{name}-{mode}-{dtype}"))
                    else:
                        params.append(pytest.param(name, mode, dtype, layout, id=f"{name}-{layout}-{mode}-{dtype}"))
    return params


# --------------------------------------------------------------------------------------------
# conv: depthwise on contiguous input -> the shared-memory halo tile kernel (8x32 outputs), and for single rows (1-d,
# or one output row from a kernel one row high) the rows kernel (2048 outputs of a row per block).

HALO_CASES = {
    # 19x70 outputs: 3x3 tiles, the last row and column of tiles partial
    "2d_k3_19x70": conv_case((19, 70), 3, 3, 3, groups=3, pads=((1, 1), (1, 1))),
    "2d_k5_s2_asym": conv_case((33, 97), 5, 5, 5, groups=5, stride=2, pads=((0, 3), (4, 1))),
    "2d_x2_s3_d2": conv_case((26, 100), 4, 8, 3, groups=4, stride=3, dilation=2, pads=((2, 1), (0, 2))),
    "2d_x4_k7x3_causal_h": conv_case((17, 65), 2, 8, (7, 3), groups=2, stride=(1, 2), dilation=(2, 1),
                                pads=((12, 0), (1, 1))),
    # output height 1: the 1x256 tiles, 266 outputs wide
    "2d_out_height_1": conv_case((3, 530), 3, 3, 3, groups=3, stride=(1, 2), pads=((0, 0), (1, 2))),
    "2d_input_height_1_x2": conv_case((1, 300), 2, 4, (1, 4), groups=2, pads=((0, 0), (2, 1))),
    "1d_k4_causal_700": conv_case((700,), 6, 6, 4, groups=6, pads=((3, 0),)),
    "1d_x2_s3_d2_1001": conv_case((1001,), 3, 6, 5, groups=3, stride=3, dilation=2, pads=((4, 5),)),
    # rows longer than one block's 2048 outputs; at stride 4 a float64 span (8196 values) exceeds 48 KiB: halo tiles
    "1d_k4_causal_5000": conv_case((5000,), 4, 4, 4, groups=4, pads=((3, 0),)),
    "1d_s4_k8_9000": conv_case((9000,), 2, 2, 8, groups=2, stride=4, pads=((2, 2),)),
    "3d_x2": conv_case((5, 12, 40), 4, 8, 3, groups=4, stride=(1, 2, 1), dilation=(1, 1, 2),
                       pads=((1, 1), (0, 2), (2, 2))),
    # 5 outputs wide: 8x32 tiles the other way round (8 wide, 32 high), 70 rows of them
    "2d_narrow_out_w5": conv_case((70, 9), 3, 3, 3, groups=3, stride=(1, 2), pads=((1, 1), (1, 1))),
    "2d_k1_s2_pads_only_outputs": conv_case((9, 33), 4, 4, 1, groups=4, stride=2, pads=((1, 0), (0, 1))),
    "2d_tiny_2x3": conv_case((2, 3), 2, 2, 3, groups=2, stride=2, pads=((1, 1), (2, 1))),
    "2d_batch1_s2_d2": conv_case((40, 41), 6, 6, 3, groups=6, stride=2, dilation=2, pads=((2, 1), (1, 2)), batch=1),
}


@pytest.mark.parametrize("name, mode, dtype", cases_by_mode_and_dtype(HALO_CASES))
def test_depthwise_halo_tiles(name, mode, dtype):
    check_ops(HALO_CASES[name], mode, DTYPES[dtype])


# --------------------------------------------------------------------------------------------
# conv: depthwise channels_last, and depthwise whose input patch does not fit shared memory -> the direct kernel.

DIRECT_CASES = {
    "channels_last_2d_c24": (conv_case((13, 37), 24, 24, 3, groups=24, pads=((1, 1), (0, 2))), "channels_last"),
    "channels_last_2d_x2_k5_s2_d2": (conv_case((15, 22), 5, 10, 5, groups=5, stride=2, dilation=2,
                                               pads=((4, 3), (2, 5))), "channels_last"),
    "channels_last_2d_c70_s3": (conv_case((11, 12), 70, 70, 3, groups=70, stride=3, pads=((2, 0), (1, 1))),
                                "channels_last"),
    "channels_last_3d_x2": (conv_case((4, 9, 11), 8, 16, 3, groups=8, stride=(1, 2, 2), pads=((1, 1), (1, 0), (0, 2))),
                            "channels_last"),
    # an 8x32 tile of outputs reads a (7 + 161) x (31 + 161) input patch
    "big_patch_dilation40_200x200": (conv_case((200, 200), 3, 3, 5, groups=3, dilation=40, pads=((80, 80), (70, 90)),
                                          batch=1), "contiguous"),
    # an 8x32 tile reads (7*16 + 3) x (31*24 + 3)
    "big_patch_stride16x24": (conv_case((150, 700), 2, 2, 3, groups=2, stride=(16, 24), pads=((1, 1), (0, 2)), batch=1),
                              "contiguous"),
    # a 1x256 tile reads 255*200 + 5 samples
    "big_patch_1d_stride200": (conv_case((6000,), 2, 4, 3, groups=2, stride=200, dilation=2, pads=((2, 1),)),
                               "contiguous"),
}


@pytest.mark.parametrize("name, mode, dtype", cases_by_mode_and_dtype(DIRECT_CASES))
def test_depthwise_direct(name, mode, dtype):
    g, layout = DIRECT_CASES[name]
    check_ops(g, mode, DTYPES[dtype], layout)


# --------------------------------------------------------------------------------------------
# conv: everything else -> the implicit GEMM (64x64 output tiles, K steps of 16 or 32). The same geometries send
# conv_transpose (as the input gradient) to the phase GEMM + fold when c_out / groups >= 4, else to the gather
# kernel, and conv_weight_grad to the split-K GEMM.

GEMM_CASES = {
    "2d_c70_c72_k3": conv_case((15, 17), 70, 72, 3, pads=((1, 1), (0, 2))),  # N > 64, K = 630
    "2d_stem_c3_c130_k7_s2": conv_case((23, 24), 3, 130, 7, stride=2, pads=((3, 3), (2, 3))),  # K = 147, N = 130
    "2d_c130_c3_k1": conv_case((11, 13), 130, 3, 1, pads=((0, 1), (1, 0))),  # K = 130, N = 3: gather backward
    "2d_g2_c34_c66_s2_d2": conv_case((20, 21), 34, 66, 3, groups=2, stride=2, dilation=2, pads=((2, 2), (1, 3))),
    "2d_g3_c12_c9_k2x4_s3": conv_case((10, 31), 12, 9, (2, 4), groups=3, stride=3, pads=((1, 0), (2, 1))),  # k_eff < s
    "2d_g4_c8_c12_two_per_group": conv_case((9, 14), 8, 12, 3, groups=4, stride=(2, 1), pads=((0, 2), (1, 1))),
    "2d_k1_s2": conv_case((9, 10), 8, 8, 1, stride=2, pads=((0, 1), (1, 1))),  # k_eff < s: phases with no tap
    "2d_1x1_input": conv_case((1, 1), 17, 65, 3, pads=((1, 1), (1, 1))),  # every tap but one in the padding
    "2d_replicate_pads_past_input": conv_case((3, 4), 8, 8, 3, pads=((7, 5), (3, 4))),  # zeros and replicate only
    "2d_circular_pads_equal_size": conv_case((4, 5), 8, 8, 3, stride=(1, 2), pads=((4, 4), (5, 0))),
    "1d_c20_c36_k7_s2": conv_case((301,), 20, 36, 7, stride=2, pads=((3, 4),)),
    "1d_c64_c64_d2_causal": conv_case((97,), 64, 64, 3, dilation=2, pads=((4, 0),), batch=3),
    "3d_c9_c70": conv_case((6, 7, 9), 9, 70, 3, stride=(2, 1, 2), dilation=(1, 2, 1), pads=((1, 1), (2, 2), (0, 2))),
    "3d_g2_c16_c16_k2": conv_case((5, 6, 7), 16, 16, 2, groups=2, stride=(1, 2, 3), pads=((1, 0), (0, 1), (1, 1))),
    # the weight gradient's K = 4 * 40 * 45 = 7200 positions, split into chunks; M = 70, N = 72
    "2d_weight_grad_long_k": conv_case((40, 45), 8, 70, 3, batch=4, pads=((1, 1), (1, 1))),
}
LAYOUTS = ("contiguous", "channels_last")


@pytest.mark.parametrize("name, mode, dtype, layout", cases_by_mode_and_dtype(GEMM_CASES, LAYOUTS))
def test_implicit_gemm(name, mode, dtype, layout):
    check_ops(GEMM_CASES[name], mode, DTYPES[dtype], layout)


# --------------------------------------------------------------------------------------------
# conv_transpose through the public functions (zeros), forward and backward: the gather kernel (< 4 input
# channels per group) and the phase GEMM, with k_eff < stride, output_padding, crops, groups, 1-d/2-d/3-d.

TRANSPOSED = {
    "gather_c3_c8_k4_s2_same": ConvCase(True, (9, 13), 3, 8, 4, stride=2),
    "gather_g2_c6_c6_s3_valid_op2": ConvCase(True, (7, 8), 6, 6, 3, groups=2, stride=3, padding="valid",
                                             output_padding=2),
    "gather_depthwise_k4_s2": ConvCase(True, (11, 12), 8, 8, 4, groups=8, stride=2),
    "gather_1d_depthwise_x2_k16_s8": ConvCase(True, (33,), 4, 8, 16, groups=4, stride=8),
    "gather_3d_c2_c4_k2_s2": ConvCase(True, (3, 4, 4), 2, 4, 2, stride=2, padding="valid"),
    "gemm_c70_c66_k3_s2": ConvCase(True, (9, 10), 70, 66, 3, stride=2),
    "gemm_c66_c130_k4_s2_pairs": ConvCase(True, (6, 7), 66, 130, 4, stride=2, padding=((1, 0), (0, 2))),
    "gemm_k1_s3_bias_only_positions": ConvCase(True, (5, 6), 8, 5, 1, stride=3),
    "gemm_d2_s3_crop1_op1": ConvCase(True, (6, 7), 8, 12, 3, stride=3, dilation=2, padding=1, output_padding=1),
    "gemm_g2_c40_c24_s2_same_lower": ConvCase(True, (8, 9), 40, 24, 3, groups=2, stride=2, padding="same_lower"),
    "gemm_1d_c16_c20_k8_s4": ConvCase(True, (40,), 16, 20, 8, stride=4),
    "gemm_3d_c8_c6_s122": ConvCase(True, (3, 4, 5), 8, 6, 3, stride=(1, 2, 2)),
    "gemm_batch1_c64_c64_s2": ConvCase(True, (12, 13), 64, 64, 3, batch=1, stride=2),
}


def check_public_forward_backward(fn, reference_fn, x, w, b):
    """fn(x, w, b) and its input, weight and bias gradients, each on a poisoned allocator, against the float64
    reference_fn and its autograd. Returns the output."""
    dtype = x.dtype
    leaves = [t.detach().requires_grad_() for t in (x, w, b)]
    reference_leaves = [to_reference(t, True) for t in (x, w, b)]
    expected = reference_fn(*reference_leaves)
    poison(expected.shape, dtype, DEVICE)
    y = fn(*leaves)
    assert_close_to_reference(y, expected, dtype, "output")
    assert_memory_format_kept(x, y)
    gy = random_like_layout(expected.shape, dtype, y)
    expected_grads = torch.autograd.grad(expected, reference_leaves, to_reference(gy))
    for t in (x, w):
        poison(t.shape, dtype, DEVICE)
    grads = torch.autograd.grad(y, leaves, gy)
    for name, got, want in zip(("input", "weight", "bias"), grads, expected_grads):
        assert_close_to_reference(got, want, dtype, f"gradient of {name}")
    assert_memory_format_kept(x, grads[0])
    return y


@pytest.mark.parametrize("name, layout, dtype", [
    pytest.param(name, layout, dtype, id=f"{name}-{layout}-{dtype}") for name, case in TRANSPOSED.items()
    for layout in LAYOUTS if layout == "contiguous" or case.dims > 1 for dtype in DTYPES])
def test_conv_transpose_public(name, layout, dtype):
    case = replace(TRANSPOSED[name], layout=layout, dtype=dtype)
    check_public_forward_backward(case.fastpad_function(),
                                  lambda x, w, b: expected_conv_transpose(x, w, b, **case.kwargs()),
                                  *case.random_inputs(device=DEVICE))



# --------------------------------------------------------------------------------------------
# Layouts: non-contiguous and expanded (stride 0) inputs, weights and output gradients, on each kernel path.

VIEWS = {  # 4-d input [2, C, 9, 11] from randn(*shape), not contiguous in any memory format (or expanded)
    "transposed_hw": lambda randn, c: randn(2, c, 11, 9).transpose(2, 3),
    "strided_w": lambda randn, c: randn(2, c, 9, 22)[..., ::2],
    "strided_c": lambda randn, c: randn(2, 2 * c, 9, 11)[:, ::2],
    "offset_slice": lambda randn, c: randn(3, c, 10, 12)[1:, :, 1:, :-1],
    "channels_last_strided_w": lambda randn, c: randn(2, c, 9, 22).contiguous(memory_format=torch.channels_last)[
        ..., ::2],
    "expanded_batch": lambda randn, c: randn(1, c, 9, 11).expand(2, c, 9, 11),
    "expanded_channels": lambda randn, c: randn(2, 1, 9, 11).expand(2, c, 9, 11),
    "expanded_width": lambda randn, c: randn(2, c, 9, 1).expand(2, c, 9, 11),
}
VIEW_PATHS = {  # geometries over a [2, C, 9, 11] input
    "depthwise_x2": conv_case((9, 11), 8, 16, 3, groups=8, stride=(1, 2), pads=((1, 1), (2, 0))),
    "dense_c8_c70": conv_case((9, 11), 8, 70, 3, stride=2, dilation=(1, 2), pads=((0, 2), (2, 1))),
    "grouped_c8_c6": conv_case((9, 11), 8, 6, 3, groups=2, pads=((2, 0), (1, 1))),
}


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("mode", ["zeros", "reflect", "circular"])
@pytest.mark.parametrize("path", list(VIEW_PATHS))
@pytest.mark.parametrize("view", list(VIEWS))
def test_non_contiguous_and_expanded(view, path, mode, dtype):
    g, dtype = VIEW_PATHS[path], DTYPES[dtype]
    x = VIEWS[view](lambda *shape: torch.randn(shape, dtype=dtype, device=DEVICE), g.in_channels)
    assert x.shape == (2, g.in_channels, 9, 11)
    assert not x.is_contiguous() and not x.is_contiguous(memory_format=torch.channels_last)
    kernel = g.per_dim(g.kernel)
    # weight [C_out, C_in/g, kh, kw] as a view of a transposed, wider tensor
    w = torch.randn(g.out_channels, 2 * (g.in_channels // g.groups), kernel[1], kernel[0], dtype=dtype,
                    device=DEVICE).transpose(2, 3)[:, ::2]
    b = torch.randn(g.out_channels, dtype=dtype, device=DEVICE)
    shape = output_shape(g)
    gy = torch.randn(*shape[:-1], 2 * shape[-1], dtype=dtype, device=DEVICE)[..., ::2]
    check_ops(g, mode, dtype, x=x, w=w, b=b, gy=gy)


# --------------------------------------------------------------------------------------------
# Batch 0 and 1 on each path: an empty batch gives empty outputs and an exactly zero weight gradient.

BATCH_PATHS = {
    "halo_2d": (conv_case((10, 40), 4, 8, 3, groups=4, stride=2, pads=((1, 1), (0, 1))), "contiguous"),
    "rows_1d": (conv_case((300,), 4, 4, 5, groups=4, pads=((4, 0),)), "contiguous"),
    "direct_channels_last": (conv_case((10, 11), 8, 8, 3, groups=8, pads=((2, 0), (1, 1))), "channels_last"),
    "gemm_2d": (conv_case((9, 10), 12, 70, 3, stride=2, pads=((1, 1), (0, 1))), "contiguous"),
    "gemm_3d_channels_last": (conv_case((3, 4, 5), 6, 8, 3, groups=2, pads=((1, 1), (1, 1), (2, 0))), "channels_last"),
    "gemm_c3_out_gather_backward": (conv_case((9, 10), 12, 3, 3, pads=((1, 1), (1, 1))), "contiguous"),
}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("mode", PADDING_MODES)
@pytest.mark.parametrize("batch", [0, 1])
@pytest.mark.parametrize("path", list(BATCH_PATHS))
def test_batch_zero_and_one(path, batch, mode, dtype):
    g, layout = BATCH_PATHS[path]
    g = replace(g, batch=batch)
    y, gx, gw = check_ops(g, mode, DTYPES[dtype], layout)
    assert y.shape[0] == gx.shape[0] == batch
    if batch == 0:
        assert y.numel() == 0 and gx.numel() == 0
        assert (gw == 0).all(), "an empty batch must give an exactly zero weight gradient"


# --------------------------------------------------------------------------------------------
# One small case per kernel path (scripts/gpu_check.sh runs these under compute-sanitizer memcheck and racecheck).
# The same cases serve the stream, CUDA-graph, device-guard and determinism tests below.
# name: (geometry, padding mode, dtype, layout)

PATHS = {
    "halo_2d": (conv_case((11, 40), 3, 6, 3, groups=3, pads=((1, 1), (2, 0))), "reflect", torch.float32, "contiguous"),
    "rows_1d": (conv_case((300,), 4, 4, 4, groups=4, pads=((3, 0),)), "replicate", torch.float32, "contiguous"),
    # zeros mode: the input gradient on the rows kernel too (stride 1), 2500 outputs in two blocks per row
    "rows_1d_causal": (conv_case((2500,), 8, 8, 4, groups=8, dilation=2, pads=((6, 0),)), "zeros", torch.bfloat16,
                       "contiguous"),
    "halo_3d": (conv_case((3, 9, 35), 2, 4, 3, groups=2, stride=(1, 1, 2), pads=((1, 1), (1, 1), (1, 1))), "circular",
                torch.float16, "contiguous"),
    "direct_channels_last": (conv_case((9, 10), 16, 32, 3, groups=16, stride=2, pads=((1, 1), (0, 2))), "circular",
                             torch.bfloat16, "channels_last"),
    "depthwise_vectors": (conv_case((20, 24), 32, 32, 5, groups=32, stride=2, pads=((1, 2), (1, 2))), "zeros",
                          torch.bfloat16, "channels_last"),
    # 264 channels, float32: 66 channel vectors in 3 blocks (the last of 2), 15 taps in 2 groups, 5 position splits.
    "wgrad_depthwise_vectors": (conv_case((14, 13), 264, 264, (5, 3), groups=264, batch=2, pads=((2, 1), (0, 2))),
                                "reflect", torch.float32, "channels_last"),
    "direct_big_patch": (conv_case((100, 400), 2, 2, 3, groups=2, stride=12, pads=((1, 1), (1, 1))), "reflect",
                         torch.float64, "contiguous"),
    "gemm_float32": (conv_case((9, 10), 20, 70, 3, pads=((1, 1), (0, 2))), "zeros", torch.float32, "contiguous"),
    "gemm_float16": (conv_case((7, 9), 20, 66, 3, stride=2, pads=((1, 2), (1, 1))), "reflect", torch.float16,
                     "channels_last"),
    "pipelined_float16": (conv_case((7, 9), 40, 66, 3, stride=2, pads=((1, 2), (1, 1))), "reflect", torch.float16,
                          "channels_last"),
    "pipelined_bfloat16": (conv_case((12, 10), 32, 32, 3, groups=2, batch=3, pads=((0, 1), (2, 1))), "zeros",
                           torch.bfloat16, "channels_last"),
    "pipelined_phases": (conv_case((12, 10), 16, 32, 4, stride=2, pads=((1, 2), (1, 2))), "reflect", torch.bfloat16,
                         "channels_last"),
    # An RGB stem: conv sums its 3 input channels directly (cuda_few_channels, 24 output channels: a chunk and a
    # half); its weight gradient pads them to one 16-byte vector for the pipelined GEMM (cuda_pipelined_channels).
    "stem": (conv_case((15, 17), 3, 24, 3, stride=2, pads=((0, 1), (1, 1))), "reflect", torch.bfloat16,
             "channels_last"),
    # 6 input channels: conv too pads them to one vector (8) for the pipelined GEMM.
    "pipelined_padded_channels": (conv_case((15, 17), 6, 32, 3, stride=2, pads=((0, 1), (1, 1))), "zeros",
                                  torch.bfloat16, "channels_last"),
    "gemm_bfloat16": (conv_case((6, 5, 7), 18, 20, 3, groups=2, pads=((1, 1), (0, 2), (2, 0))), "replicate",
                      torch.bfloat16, "contiguous"),
    "gemm_fold_reflect": (conv_case((8, 9), 6, 8, 3, stride=2, pads=((2, 1), (1, 2))), "reflect", torch.float32,
                          "contiguous"),
    "gather_circular": (conv_case((8, 9), 6, 3, 3, stride=3, pads=((2, 2), (3, 1))), "circular", torch.float32,
                        "contiguous"),
    "wgrad_depthwise": (conv_case((32, 48), 8, 8, 3, groups=8, batch=4, pads=((1, 1), (1, 1))), "zeros", torch.float32,
                        "contiguous"),
    "wgrad_split_k": (conv_case((24, 40), 12, 72, 3, batch=4, pads=((1, 1), (1, 1))), "replicate", torch.float32,
                      "contiguous"),
}


# The CUDA kernel path (kernel_paths.h) each PATHS case reaches: conv, its input gradient (conv_transpose) and
# conv_weight_grad. tests/test_kernel_paths.py checks these on any machine, through the private path ops.
HALO, DIRECT, GEMM, VECTORS = "cuda_depthwise_halo", "cuda_direct", "cuda_implicit_gemm", "cuda_depthwise_vectors"
ROWS, FEW = "cuda_depthwise_rows", "cuda_few_channels"
PIPELINED = "cuda_pipelined_gemm"
GATHER, PHASE, FOLD = "cuda_direct_gather", "cuda_phase_gemm", "cuda_phase_gemm_fold"
REDUCTION, SPLIT_K = "cuda_depthwise_reduction", "cuda_split_k_gemm"
CUDA_KERNELS = {
    "halo_2d": (HALO, GATHER, REDUCTION),
    "rows_1d": (ROWS, GATHER, REDUCTION),  # replicate: the transposed rows kernel folds no padding back
    "rows_1d_causal": (ROWS, ROWS, REDUCTION),
    "halo_3d": (HALO, GATHER, REDUCTION),
    "direct_channels_last": (DIRECT, GATHER, REDUCTION),  # two output channels per input channel
    "depthwise_vectors": (VECTORS, VECTORS, VECTORS),
    "wgrad_depthwise_vectors": (VECTORS, GATHER, VECTORS),  # reflect: the transposed vector kernel folds no padding
    "direct_big_patch": (DIRECT, GATHER, REDUCTION),
    "gemm_float32": (GEMM, PHASE, SPLIT_K),
    "gemm_float16": (GEMM, FOLD, SPLIT_K),  # 20 input channels: not whole 16-byte vectors
    "pipelined_float16": (PIPELINED, FOLD, SPLIT_K),
    "pipelined_bfloat16": (PIPELINED, PIPELINED, PIPELINED),
    "pipelined_phases": (PIPELINED, PIPELINED, PIPELINED),  # conv_transpose: 4 stride phases, then reflect's folds
    "stem": (FEW, PIPELINED, PIPELINED),  # the weight gradient on x padded to 8 channels
    "pipelined_padded_channels": (PIPELINED, PIPELINED, PIPELINED),  # x padded to 8 channels (conv, weight gradient)
    "gemm_bfloat16": (GEMM, FOLD, SPLIT_K),
    "gemm_fold_reflect": (GEMM, FOLD, SPLIT_K),
    "gather_circular": (GEMM, GATHER, SPLIT_K),
    "wgrad_depthwise": (HALO, GATHER, REDUCTION),
    "wgrad_split_k": (GEMM, FOLD, SPLIT_K),
}


def cuda_kernels_reached(path, device=None):
    """The CUDA kernel path of each op of PATHS[path], as the private path ops report kernel_paths.h's choice (for
    tensors on any device)."""
    g, mode, dtype, layout = PATHS[path]
    x, w, b = replace(g, dtype=dtype_name(dtype)).random_inputs(device=device or DEVICE)
    x = arrange(x, layout)
    gy = random_like_layout(output_shape(g), dtype, x)
    stride, pad_lo, pad_hi, dilation = op_geometry(g)
    return (ops._conv_path(x, w, b, stride, pad_lo, pad_hi, dilation, g.groups, mode, "cuda"),
            ops._conv_transpose_path(gy, w, None, stride, pad_lo, list(x.shape[2:]), dilation, g.groups, mode, "cuda"),
            ops._conv_weight_grad_path(x, gy, list(w.shape), stride, pad_lo, dilation, g.groups, mode, "cuda"))


@pytest.mark.parametrize("path", list(PATHS))
def test_kernel_paths_small(path):
    g, mode, dtype, layout = PATHS[path]
    assert cuda_kernels_reached(path) == CUDA_KERNELS[path]
    check_ops(g, mode, dtype, layout)


@cuda_only
@pytest.mark.parametrize("mode", ["zeros", "reflect"])
def test_tf32_pipelined_gemm(tf32, mode):
    """float32 channels_last with torch.backends.cudnn.allow_tf32 (torch's default for its own CUDA convs): conv,
    its input gradient (the stride phases, then the padding mode's folds) and its weight gradient run the pipelined
    GEMMs on TF32 tensor cores. Their result is the float64 reference on the inputs rounded to TF32 (cvt.rna) to float32 accumulation (the
    folds of reflect's padding are added in float32), not the float32 result."""
    g = conv_case((12, 10), 32, 48, 3, batch=3, stride=(1, 2), pads=((0, 1), (2, 1)))
    x, w, b = conv_make_inputs(g, torch.float32, "channels_last")
    gy = random_like_layout(output_shape(g), torch.float32, x)
    stride, pad_lo, pad_hi, dilation = op_geometry(g)
    assert ops._conv_path(x, w, b, stride, pad_lo, pad_hi, dilation, g.groups, mode, "cuda") == PIPELINED
    assert ops._conv_transpose_path(gy, w, None, stride, pad_lo, list(x.shape[2:]), dilation, g.groups, mode,
                                    "cuda") == PIPELINED
    poison(output_shape(g), torch.float32, DEVICE, blocks=2)
    poison(tuple(x.shape), torch.float32, DEVICE, blocks=2)
    assert ops._conv_weight_grad_path(x, gy, list(w.shape), stride, pad_lo, dilation, g.groups, mode,
                                      "cuda") == PIPELINED
    y, gx, gw = run_ops(g, mode, x, w, b, gy)
    y_tf32, _, gw_tf32 = reference_ops(g, mode, tf32_rounded(x), tf32_rounded(w), b, tf32_rounded(gy))
    y_exact, gx_exact, gw_exact = reference_ops(g, mode, x, w, b, gy)
    # The input gradient's phases are TF32 GEMMs; a padding mode's folds are the gather pass's, in float32.
    _, gx_phases_tf32, _ = reference_ops(g, "zeros", tf32_rounded(x), tf32_rounded(w), b, tf32_rounded(gy))
    gx_tf32 = gx_phases_tf32 + gx_exact - reference_ops(g, "zeros", x, w, b, gy)[1]
    assert_close_to_reference(y, y_tf32, torch.float32, "conv")
    assert relative_error(y.to(y_exact.device), y_exact) > 10 * tolerance(torch.float32)  # TF32 ran
    assert_close_to_reference(gx, gx_tf32, torch.float32, "conv_transpose")
    assert_close_to_reference(gw, gw_tf32, torch.float32, "conv_weight_grad")
    assert relative_error(gw.to(gw_exact.device), gw_exact) > 10 * tolerance(torch.float32)
    assert relative_error(gx.to(gx_exact.device), gx_exact) > 10 * tolerance(torch.float32)


def path_inputs(path):
    """Fresh (x, w, b, gy) for PATHS[path], gy in the output's layout."""
    g, mode, dtype, layout = PATHS[path]
    x, w, b = conv_make_inputs(g, dtype, layout)
    return x, w, b, random_like_layout(output_shape(g), dtype, x)


def check_path_results(path, inputs, results):
    """results = run_ops(...) on `inputs` against the reference."""
    g, mode, dtype, _ = PATHS[path]
    for got, want, what in zip(results, reference_ops(g, mode, *inputs), ("conv", "conv_transpose", "weight grad")):
        assert_close_to_reference(got, want, dtype, f"{path}: {what}")


# --------------------------------------------------------------------------------------------
# Determinism: identical calls are bitwise identical, the split-K weight gradient and the depthwise block reduction
# (long reductions) included.


def bitwise_equal(a, b):
    return (a.dtype == b.dtype and a.shape == b.shape
            and torch.equal(a.view(INT_OF_WIDTH[a.dtype]), b.view(INT_OF_WIDTH[b.dtype])))


DETERMINISM_PATHS = dict(PATHS)
DETERMINISM_PATHS.update({
    # K = 8 * 64 * 64 = 32768 positions per (channel, tap)
    "wgrad_depthwise_long": (conv_case((64, 64), 16, 32, 3, groups=16, batch=8, pads=((1, 1), (1, 1))), "reflect",
                             torch.float32, "contiguous"),
    # M = 80, N = 16 * 9, K = 8 * 48 * 48 = 18432
    "wgrad_split_k_long": (conv_case((48, 48), 16, 80, 3, batch=8, pads=((1, 1), (1, 1))), "zeros", torch.float32,
                           "contiguous"),
    "wgrad_split_k_long_channels_last": (conv_case((48, 48), 16, 80, 3, batch=8, stride=2, pads=((0, 1), (1, 0))),
                                         "circular", torch.float32, "channels_last"),
})


@pytest.mark.parametrize("path, dtype", [
    pytest.param(path, dtype, id=f"{path}-{dtype}") for path, (_, _, path_dtype, _) in DETERMINISM_PATHS.items()
    for dtype in DTYPES if DTYPES[dtype] in (path_dtype, torch.float32, torch.bfloat16, torch.float16)])
def test_repeated_calls_are_bitwise_identical(path, dtype):
    g, mode, _, layout = DETERMINISM_PATHS[path]
    dtype = DTYPES[dtype]
    x, w, b = conv_make_inputs(g, dtype, layout)
    gy = random_like_layout(output_shape(g), dtype, x)
    first = run_ops(g, mode, x, w, b, gy)
    for call in range(2, 4):
        for t in first:
            poison(t.shape, dtype, DEVICE, blocks=2)
        again = run_ops(g, mode, x, w, b, gy)
        for name, result, first_result in zip(("conv", "conv_transpose", "conv_weight_grad"), again, first):
            assert bitwise_equal(result, first_result), f"{path} {dtype}: {name} call {call} differs from call 1"
    for got, want, what in zip(first, reference_ops(g, mode, x, w, b, gy), ("conv", "conv_transpose", "weight grad")):
        assert_close_to_reference(got, want, dtype, what)


# --------------------------------------------------------------------------------------------
# opcheck on geometries test_autograd.py's OP_CONFIGS lacks: float16 and bfloat16, the halo kernel, channels_last
# 4-d and 5-d dense and grouped, 1-d.

OPCHECK_CONFIGS = {  # geometry, padding mode, dtype, layout
    "2d_depthwise_x2_halo_float16_reflect": (conv_case((9, 35), 4, 8, 3, groups=4, stride=(2, 1),
                                                       pads=((1, 2), (0, 2))), "reflect", torch.float16, "contiguous"),
    "2d_dense_channels_last_bfloat16_circular": (conv_case((7, 9), 6, 5, 3, dilation=2, pads=((2, 2), (3, 1))),
                                                 "circular", torch.bfloat16, "channels_last"),
    "3d_grouped_channels_last_float32_replicate": (conv_case((3, 4, 5), 4, 8, 2, groups=2, stride=(1, 2, 1),
                                                        pads=((1, 0), (0, 1), (1, 1))), "replicate", torch.float32,
                                                   "channels_last"),
    "1d_dense_float16_s3": (conv_case((11,), 5, 6, 4, stride=3, pads=((3, 1),)), "zeros", torch.float16, "contiguous"),
}


def opcheck_args(op_name, config, requires_grad):
    g, mode, dtype, layout = OPCHECK_CONFIGS[config]
    x, w, b = conv_make_inputs(g, dtype, layout)
    gy = random_like_layout(output_shape(g), dtype, x)
    b_in = torch.randn(g.in_channels, dtype=dtype, device=DEVICE)
    for t in (x, w, b, gy, b_in):
        t.requires_grad_(requires_grad)
    stride, pad_lo, pad_hi, dilation = op_geometry(g)
    if op_name == "conv":
        return (x, w, b, stride, pad_lo, pad_hi, dilation, g.groups, mode)
    if op_name == "conv_transpose":
        return (gy, w, b_in, stride, pad_lo, list(g.size), dilation, g.groups, mode)
    return (x, gy, list(w.shape), stride, pad_lo, dilation, g.groups, mode)


@pytest.mark.parametrize("requires_grad", [False, True], ids=["no_grad", "requires_grad"])
@pytest.mark.parametrize("config", list(OPCHECK_CONFIGS))
@pytest.mark.parametrize("op_name", ["conv", "conv_transpose", "conv_weight_grad"])
def test_opcheck(op_name, config, requires_grad):
    torch.library.opcheck(getattr(ops, op_name).default, opcheck_args(op_name, config, requires_grad))

# --------------------------------------------------------------------------------------------
# gradcheck in float64 through the public functions (and conv_transpose's padding modes through the op): what
# test_autograd.py lacks, i.e. channels_last, depthwise without multiplier, replicate in 1-d and 3-d, several input
# channels per group with fewer than 4 output channels per group (the gather kernel in the backward), reflect pads
# of size - 1.

def gradcheck_case(transposed, size, c_in, c_out, kernel, **arguments):
    """A float64 case of batch 1 (fastpad/cases.py), small enough for gradcheck."""
    return ConvCase(transposed, size, c_in, c_out, kernel, batch=1, dtype="float64", **arguments)


GRADCHECK_CONV = {
    "2d_depthwise_replicate_channels_last": gradcheck_case(False, (5, 6), 3, 3, 3, groups=3, stride=2,
                                                           padding_mode="replicate", layout="channels_last"),
    "2d_dense_c3_c5_reflect_channels_last": gradcheck_case(False, (5, 6), 3, 5, 3, stride=(1, 2),
                                                           padding=((2, 0), (1, 2)), padding_mode="reflect",
                                                           layout="channels_last"),
    "2d_g2_c4_c4_circular_dilated": gradcheck_case(False, (5, 7), 4, 4, 3, groups=2, dilation=2,
                                                   padding=((2, 2), (3, 1)), padding_mode="circular"),
    "2d_depthwise_reflect_pads_size_minus_1": gradcheck_case(False, (4, 5), 2, 2, 3, groups=2, dilation=2,
                                                             padding=((3, 1), (2, 4)), padding_mode="reflect"),
    "1d_depthwise_replicate_causal": gradcheck_case(False, (9,), 3, 3, 3, groups=3, dilation=2, padding="causal",
                                                    padding_mode="replicate"),
    "3d_g2_c4_c8_replicate_channels_last": gradcheck_case(False, (3, 4, 4), 4, 8, 2, groups=2, stride=(1, 2, 1),
                                                          padding_mode="replicate", layout="channels_last"),
}


@pytest.mark.parametrize("name", list(GRADCHECK_CONV))
def test_gradcheck_conv(name):
    case = GRADCHECK_CONV[name]
    inputs = [t.requires_grad_() for t in case.random_inputs(device=DEVICE)]
    assert torch.autograd.gradcheck(case.fastpad_function(), inputs)


GRADCHECK_CONV_TRANSPOSE = {
    "2d_g2_c8_gemm_channels_last": gradcheck_case(True, (3, 4), 8, 4, 3, groups=2, stride=2,
                                                  layout="channels_last"),
    "2d_depthwise_gather_channels_last": gradcheck_case(True, (3, 4), 3, 3, 4, groups=3, stride=2,
                                                        padding="same_lower", layout="channels_last"),
    "1d_k2_s3_bias_only_positions": gradcheck_case(True, (4,), 4, 3, 2, stride=3, output_padding=1),
}


@pytest.mark.parametrize("name", list(GRADCHECK_CONV_TRANSPOSE))
def test_gradcheck_conv_transpose(name):
    case = GRADCHECK_CONV_TRANSPOSE[name]
    inputs = [t.requires_grad_() for t in case.random_inputs(device=DEVICE)]
    assert torch.autograd.gradcheck(case.fastpad_function(), inputs)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("per_group", [2, 4], ids=["gather", "gemm_fold"])
def test_gradcheck_conv_transpose_op_padding_modes(per_group, mode):
    """conv_transpose with a padding mode folds the padded positions back (the op conv's backward calls)."""
    g = conv_case((5, 6), 2, 2 * per_group, 3, groups=2, stride=(2, 1), pads=((2, 1), (1, 2)), batch=1)
    stride, pad_lo, _, dilation = op_geometry(g)
    gy = torch.randn(output_shape(g), dtype=torch.float64, device=DEVICE, requires_grad=True)
    w = torch.randn(g.weight_shape(), dtype=torch.float64, device=DEVICE, requires_grad=True)
    b = torch.randn(g.in_channels, dtype=torch.float64, device=DEVICE, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda gy, w, b: ops.conv_transpose(gy, w, b, stride, pad_lo, list(g.size), dilation, g.groups, mode),
        (gy, w, b))


@pytest.mark.parametrize("mode", PADDING_MODES)
@pytest.mark.parametrize("per_group", [2, 4], ids=["gather", "phase_gemm"])
def test_conv_transpose_with_non_finite_weights_matches_the_cpu_op(per_group, mode):
    """An inf or NaN weight gives the infs and NaNs of the CPU op (which matches torch) and no more: the phase GEMM
    multiplies weights by zeros it loads for taps outside x, and the gather pass recomputes those outputs."""
    g = conv_case((6, 7), 4, 2 * per_group, 3, groups=2, stride=(2, 2), pads=((1, 2), (2, 1)), batch=2)
    stride, pad_lo, _, dilation = op_geometry(g)
    gy = torch.randn(output_shape(g), dtype=torch.float64)
    w = torch.randn(g.out_channels, g.in_channels // g.groups, 3, 3, dtype=torch.float64)
    w[1, 0, 0, 0], w[2, 1, 2, 1], w[3, 0, 1, 2] = float("inf"), float("nan"), float("-inf")
    b = torch.randn(g.in_channels, dtype=torch.float64)
    args = (stride, pad_lo, list(g.size), dilation, g.groups, mode)
    expected = ops.conv_transpose(gy, w, b, *args)
    assert expected.isfinite().any() and not expected.isfinite().all()
    poison(expected.shape, torch.float64, DEVICE)
    actual = ops.conv_transpose(gy.to(DEVICE), w.to(DEVICE), b.to(DEVICE), *args)
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------------------------
# torch.compile: fullgraph forward + backward, and mode="reduce-overhead" (CUDA graphs).


def compile_model():
    """Layers that reach each kernel path (on CUDA): the dense GEMM (72 output channels), depthwise with a
    multiplier, a 1x1 conv whose extra rows and columns read only padding, the transposed gather (3 input channels)
    and the transposed phase GEMM."""
    return torch.nn.Sequential(
        fastpad.nn.Conv2d(3, 72, 3, stride=2, padding="same", padding_mode="reflect"),
        torch.nn.SiLU(),
        fastpad.nn.Conv2d(72, 144, 5, groups=72, padding="causal", dilation=(1, 2), padding_mode="replicate"),
        fastpad.nn.Conv2d(144, 3, 1, padding=((0, 1), (1, 0)), padding_mode="circular"),
        fastpad.nn.ConvTranspose2d(3, 8, 4, stride=2),
        torch.nn.ReLU(),
        fastpad.nn.ConvTranspose2d(8, 4, 3, stride=2, padding="same_lower", output_padding=1),
    ).to(DEVICE)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_compile_fullgraph_forward_backward(layout):
    torch._dynamo.reset()
    model = compile_model()
    if layout == "channels_last":
        model = model.to(memory_format=torch.channels_last)
    compiled = torch.compile(model, fullgraph=True)
    names = ["output", "input grad"] + [name for name, _ in model.named_parameters()]
    for _ in range(2):  # the second call runs the cached graph on new values
        x = arrange(torch.randn(2, 3, 19, 22, device=DEVICE), layout)
        eager, got = model_forward_backward(model, x), model_forward_backward(compiled, x)
        for name, g, e in zip(names, got, eager):
            assert relative_error(g, e) < 1e-5, f"{name}: compiled differs from eager"


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
def test_compile_reduce_overhead_cuda_graphs(training):
    """mode="reduce-overhead" records the compiled model in CUDA graphs and replays them; new input values copied
    into the same static input must give eager's results on every step."""
    torch._dynamo.reset()
    counters.clear()
    model = compile_model()
    compiled = torch.compile(model, mode="reduce-overhead", fullgraph=True)
    static_x = torch.randn(2, 3, 17, 18, device=DEVICE)
    params = list(model.parameters())
    for step in range(4):
        fresh = torch.randn_like(static_x)
        static_x.copy_(fresh)
        torch.compiler.cudagraph_mark_step_begin()
        if training:
            leaf = static_x.detach().requires_grad_()
            out = compiled(leaf)
            got = [out.detach().clone()] + [g.clone() for g in torch.autograd.grad(out.square().sum(),
                                                                                   [leaf] + params)]
            leaf_eager = fresh.detach().requires_grad_()
            out_eager = model(leaf_eager)
            expected = [out_eager.detach()] + list(torch.autograd.grad(out_eager.square().sum(), [leaf_eager] + params))
        else:
            with torch.no_grad():
                got = [compiled(static_x).clone()]
                expected = [model(fresh)]
        for index, (g, e) in enumerate(zip(got, expected)):
            assert relative_error(g, e) < 1e-5, f"step {step}, result {index}: the CUDA graph differs from eager"
    if DEVICE == "cuda":
        assert counters["inductor"]["cudagraph_skips"] == 0, "inductor did not use CUDA graphs"


# --------------------------------------------------------------------------------------------
# Streams and CUDA graphs: the kernels launch on the current stream, never the legacy default stream.

GRAPH_PATHS = ["halo_2d", "rows_1d", "direct_channels_last", "gemm_float32", "gemm_float16", "pipelined_bfloat16",
               "gemm_fold_reflect", "gather_circular", "wgrad_depthwise", "wgrad_split_k"]


@cuda_only
@pytest.mark.parametrize("path", GRAPH_PATHS)
def test_cuda_graph_capture_on_side_stream(path):
    """torch.cuda.graph capture of the three ops on a side stream (a launch on the legacy default stream makes the
    capture fail), replayed with new inputs copied into the captured ones: reference results, bitwise equal to eager."""
    g, mode, _, _ = PATHS[path]
    static = path_inputs(path)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the default stream (workspaces, lazy initialisation)
        for _ in range(2):
            run_ops(g, mode, *static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        captured = run_ops(g, mode, *static)
    for replay in range(3):
        fresh = path_inputs(path)
        for s, f in zip(static, fresh):
            s.copy_(f)
        graph.replay()
        torch.cuda.synchronize()
        check_path_results(path, fresh, captured)
        for name, got, eager in zip(("conv", "conv_transpose", "conv_weight_grad"), captured,
                                    run_ops(g, mode, *fresh)):
            assert bitwise_equal(got, eager), f"replay {replay}: {name} differs from eager"


def delayed_copy(t, cycles=50_000_000):
    """A NaN-filled copy of `t` whose values arrive only after a GPU spin of `cycles` on the current stream: a kernel
    that reads it on another stream (the legacy default one, say) reads NaN."""
    out = torch.full_like(t, float("nan"))
    torch.cuda._sleep(cycles)
    out.copy_(t)
    return out


@cuda_only
@pytest.mark.parametrize("path", GRAPH_PATHS)
def test_ops_run_on_the_current_non_default_stream(path):
    g, mode, _, _ = PATHS[path]
    inputs = path_inputs(path)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        delayed = [delayed_copy(t) if t is not None else None for t in inputs]
        results = run_ops(g, mode, *delayed)
    torch.cuda.current_stream().wait_stream(side)
    check_path_results(path, inputs, results)


@cuda_only
@pytest.mark.skipif(DEVICE != "cuda" or torch.cuda.device_count() < 2, reason="needs 2 GPUs")
@pytest.mark.parametrize("path", ["halo_2d", "direct_channels_last", "gemm_float16", "gemm_fold_reflect",
                                  "gather_circular", "wgrad_split_k"])
def test_second_gpu_while_the_current_device_is_the_first(path):
    """Tensors on cuda:1 while cuda:0 is current: the ops must guard to cuda:1, launch on its current stream (the
    inputs arrive there late) and allocate nothing on cuda:0."""
    g, mode, _, _ = PATHS[path]
    inputs = [t.to("cuda:1") if t is not None else None for t in path_inputs(path)]
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    with torch.cuda.device(0):
        allocated_on_0 = torch.cuda.memory_allocated(0)
        with torch.cuda.device(1):
            delayed = [delayed_copy(t) if t is not None else None for t in inputs]
        assert torch.cuda.current_device() == 0
        results = run_ops(g, mode, *delayed)
        assert torch.cuda.current_device() == 0
        assert all(r.device == torch.device("cuda", 1) for r in results)
        torch.cuda.synchronize(1)
        assert torch.cuda.memory_allocated(0) == allocated_on_0, "the ops allocated on cuda:0"
    check_path_results(path, inputs, results)


# --------------------------------------------------------------------------------------------
# int64 indexing (marker bigmem): float16 inputs of more than 2^31 elements.

INT32_LIMIT = 2**31
BIGMEM_FREE_BYTES = 40 * GiB


def require_free_gpu_memory():
    free, _ = torch.cuda.mem_get_info()
    if free < BIGMEM_FREE_BYTES:
        pytest.skip(f"needs {BIGMEM_FREE_BYTES / GiB:.0f} GiB free on the GPU, {free / GiB:.1f} GiB free")


def random_half(shape, channels_last=False, chunk=1 << 26):
    """Standard-normal float16 of `shape` on the GPU, drawn a slice at a time (no float32 temporary of full size)."""
    flat = torch.empty(math.prod(shape), dtype=torch.float16, device=DEVICE)
    for start in range(0, flat.numel(), chunk):
        flat[start:start + chunk].normal_()
    if channels_last:
        return flat.view(shape[0], *shape[2:], shape[1]).movedim(-1, 1)
    return flat.view(shape)


BIGMEM_CASES = {  # channels_last, groups (of 16 channels), padding mode
    "nchw_dense_gemm": (False, 1, "zeros"),
    "nchw_depthwise_halo": (False, 16, "reflect"),
    "channels_last_depthwise_direct": (True, 16, "replicate"),
    "channels_last_dense_gemm": (True, 1, "circular"),
}


@cuda_only
@pytest.mark.bigmem
@pytest.mark.parametrize("case", list(BIGMEM_CASES))
def test_bigmem_conv2d_batch_past_int32(case):
    """A float16 conv2d whose input and output have more than 2^31 elements (16 x 128 x 130 images): the images
    around element 2^31 and the last one are compared with the reference on their receptive field (the image)."""
    require_free_gpu_memory()
    channels_last, groups, mode = BIGMEM_CASES[case]
    channels, height, width = 16, 128, 130
    per_image = channels * height * width
    batch = INT32_LIMIT // per_image + 1
    pads = ((1, 1), (2, 0))
    x = random_half((batch, channels, height, width), channels_last)
    w = torch.randn(channels, channels // groups, 3, 3, dtype=torch.float16, device=DEVICE)
    b = torch.randn(channels, dtype=torch.float16, device=DEVICE)
    y = fastpad.conv2d(x, w, b, padding=pads, groups=groups, padding_mode=mode)
    assert x.numel() > INT32_LIMIT and y.shape == x.shape
    assert_memory_format_kept(x, y)
    boundary = INT32_LIMIT // per_image  # the image holding element 2^31
    for first in sorted({0, boundary - 1, boundary, batch - 2}):
        stop = min(first + 2, batch)
        expected = reference_conv(x[first:stop].double(), w.double(), b.double(), [1, 1], pads, [1, 1], groups, mode)
        assert_matches(y[first:stop], expected, torch.float16, f"images [{first}, {stop})")


@cuda_only
@pytest.mark.bigmem
@pytest.mark.parametrize("mode", ["zeros", "reflect"])
def test_bigmem_conv1d_row_past_int32(mode):
    """One float16 row of 2^31 + 4099 samples (the 1x256 halo tiles): the positions themselves pass int32. Windows
    at the start, across 2^31 and at the end are compared with the reference on their receptive field."""
    require_free_gpu_memory()
    length, kernel, pads = INT32_LIMIT + 4099, 4, ((2, 1),)
    x = random_half((1, 1, length))
    w = torch.randn(1, 1, kernel, dtype=torch.float16, device=DEVICE)
    b = torch.randn(1, dtype=torch.float16, device=DEVICE)
    y = fastpad.conv1d(x, w, b, padding=pads, padding_mode=mode)
    assert y.shape == x.shape
    window = 1 << 16
    for start in (0, INT32_LIMIT - window // 2, length - window):
        stop = start + window
        # outputs [start, stop) read inputs [start - lo, stop - lo + kernel - 1), padded only where the row ends
        first, last = start - pads[0][0], stop - pads[0][0] + kernel - 1
        piece = x[..., max(first, 0):min(last, length)].double()
        expected = reference_conv(piece, w.double(), b.double(), [1], [(max(-first, 0), max(last - length, 0))], [1],
                                  1, mode)
        assert_matches(y[..., start:stop], expected, torch.float16, f"outputs [{start}, {stop})")
