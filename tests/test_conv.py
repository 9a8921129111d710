"""fastpad.conv1d/2d/3d against the reference F.pad + F.conv (docs/DESIGN.md section 2)."""

import itertools

import pytest
import torch

from code_paths import (RESULT_NAMES, CodePath, cpu_isa_limit, kernels_reached, require_isa, run_forward_backward,
                        run_reference, nhwc_tiles_slide, strided_planes_or, tiles_isas, tiles_kernel)
from fastpad.bench.op_calls import RecordFastpadOps
from fastpad.cases import ConvCase
from test_blocked_direct import run_case as run_case_at_isa
from reference import (
    CHANNELS_LAST,
    EXPLICIT_PADDINGS,
    GROUP_CASES,
    PADDING_MODES,
    PADDING_STRINGS,
    as_tuple,
    assert_matches,
    assert_memory_format_kept,
    check_conv,
    conv_inputs,
    pads_supported,
    poison,
    reference_conv,
    resolve_pads,
)

SIZES = {1: (13,), 2: (7, 10), 3: (5, 6, 7)}
NDIMS = (1, 2, 3)


def run_case(nd, device, dtype=torch.float64, size=None, c_in=4, c_out=6, kernel=3, groups=1, batch=2, bias=True,
             **kwargs):
    """Draws fresh inputs and checks fastpad against the reference (the case must be one F.pad accepts)."""
    size = size or SIZES[nd]
    pads = resolve_pads(kwargs.get("padding", "same"), size, as_tuple(kernel, nd), kwargs.get("stride", 1),
                        kwargs.get("dilation", 1))
    mode = kwargs.get("padding_mode", "zeros")
    assert pads_supported(pads, size, mode), f"bad test case: {mode} pads {pads} for size {size}"
    x, w, b = conv_inputs(size, c_in, c_out, kernel, groups, batch, bias, dtype=dtype, device=device)
    return check_conv(x, w, b, groups=groups, **kwargs)


@pytest.mark.parametrize("mode", PADDING_MODES)
@pytest.mark.parametrize("padding", PADDING_STRINGS)
@pytest.mark.parametrize("nd", NDIMS)
def test_padding_strings_every_mode(nd, padding, mode, device):
    run_case(nd, device, padding=padding, padding_mode=mode, stride=2)
    run_case(nd, device, padding=padding, padding_mode=mode, stride=1)


@pytest.mark.parametrize("mode", PADDING_MODES)
@pytest.mark.parametrize("which", ["int", "tuple", "pairs"])
@pytest.mark.parametrize("nd", NDIMS)
def test_explicit_padding_every_mode(nd, which, mode, device):
    padding = EXPLICIT_PADDINGS[nd][which]
    for stride in (1, 3):
        run_case(nd, device, padding=padding, padding_mode=mode, stride=stride)


@pytest.mark.parametrize("padding", ["same", "same_lower", ((1, 0), (0, 2))])
@pytest.mark.parametrize("dilation", [1, 2, 3])
@pytest.mark.parametrize("stride", [1, 2, 3, 4])
def test_strides_and_dilations(stride, dilation, padding, device):
    run_case(2, device, size=(11, 12), padding=padding, stride=stride, dilation=dilation, padding_mode="zeros")
    run_case(2, device, size=(11, 12), padding=padding, stride=(stride, 1), dilation=(1, dilation),
             padding_mode="replicate", kernel=(3, 2))


@pytest.mark.parametrize("mode", PADDING_MODES)
@pytest.mark.parametrize("groups", sorted(GROUP_CASES))
@pytest.mark.parametrize("nd", NDIMS)
def test_groups(nd, groups, mode, device):
    c_in, c_out, g = GROUP_CASES[groups]
    for stride in (1, 2):
        run_case(nd, device, c_in=c_in, c_out=c_out, groups=g, padding="same", stride=stride, padding_mode=mode)


@pytest.mark.parametrize("padding", ["same", "same_lower"])
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("nd", NDIMS)
def test_even_kernel_same(nd, stride, padding, device):
    y = run_case(nd, device, kernel=4, padding=padding, stride=stride, padding_mode="reflect")
    assert y.shape[2:] == tuple(-(-i // stride) for i in SIZES[nd])


@pytest.mark.parametrize("size", [(1, 1), (1, 5), (5, 1), (2, 3), (17, 19), (31, 2)])
def test_odd_and_tiny_sizes(size, device):
    for mode in ("zeros", "replicate", "circular"):
        run_case(2, device, size=size, padding="same", stride=2, padding_mode=mode)
    run_case(2, device, size=size, kernel=1, padding="same", stride=3, padding_mode="reflect")


def dtype_cases():
    cases = [torch.float32, torch.bfloat16, torch.float16]
    return [pytest.param(dt, id=str(dt).replace("torch.", "")) for dt in cases]


@pytest.mark.parametrize("dtype", dtype_cases())
@pytest.mark.parametrize("nd", NDIMS)
def test_low_precision(nd, dtype, device):
    run_case(nd, device, dtype=dtype, padding="same", stride=2, padding_mode="reflect")
    run_case(nd, device, dtype=dtype, c_in=6, c_out=12, groups=6, padding="causal", dilation=2)
    run_case(nd, device, dtype=dtype, c_in=16, c_out=8, kernel=2, padding="same_lower", padding_mode="circular")


@pytest.mark.parametrize("mode", PADDING_MODES)
@pytest.mark.parametrize("nd", NDIMS)
def test_batch_zero(nd, mode, device):
    y = run_case(nd, device, batch=0, padding="same", stride=2, padding_mode=mode)
    assert y.shape[:2] == (0, 6)


# 2-d inputs [2, 4, 7, 9] that are not contiguous in any memory format, drawn by `randn(*shape)`.
NON_CONTIGUOUS = {
    "transposed_hw": lambda randn: randn(2, 4, 9, 7).transpose(2, 3),
    "strided_w": lambda randn: randn(2, 4, 7, 18)[..., ::2],
    "strided_c": lambda randn: randn(2, 8, 7, 9)[:, ::2],
    "offset_slice": lambda randn: randn(3, 4, 8, 10)[1:, :, 1:, :-1],
}


@pytest.mark.parametrize("view", sorted(NON_CONTIGUOUS))
@pytest.mark.parametrize("mode", ["zeros", "reflect"])
def test_non_contiguous_input(view, mode, device):
    x = NON_CONTIGUOUS[view](lambda *shape: torch.randn(shape, device=device, dtype=torch.float64))
    assert not x.is_contiguous() and not x.is_contiguous(memory_format=torch.channels_last)
    weight = torch.randn(6, 8, 3, 4, device=device, dtype=torch.float64).transpose(2, 3)[:, ::2]  # [6, 4, 4, 3]
    b = torch.randn(6, device=device, dtype=torch.float64)
    for groups, w in ((1, weight), (2, weight[:, :2])):
        y = check_conv(x, w, b, stride=2, padding="same", padding_mode=mode, groups=groups)
        assert_memory_format_kept(x, y)


@pytest.mark.parametrize("groups", ["1", "depthwise"])
@pytest.mark.parametrize("mode", ["zeros", "reflect", "circular"])
@pytest.mark.parametrize("nd", [2, 3])
def test_channels_last(nd, mode, groups, device):
    g = 1 if groups == "1" else 8
    x, w, b = conv_inputs(SIZES[nd], c_in=8, c_out=8, groups=g, device=device)
    x = x.to(memory_format=torch.channels_last if nd == 2 else torch.channels_last_3d)
    y = check_conv(x, w, b, stride=2, padding="same", padding_mode=mode, groups=g)
    assert_memory_format_kept(x, y)
    for dtype in (torch.float32, torch.bfloat16):
        y = check_conv(x.to(dtype), w.to(dtype), b.to(dtype), padding="same_lower", padding_mode=mode, groups=g)
        assert_memory_format_kept(x, y)


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
@pytest.mark.parametrize("width", [7, 8, 9, 15, 16, 17, 31, 32, 33, 65])
def test_depthwise_widths_around_vector_lengths(width, channels_last, device):
    """Widths and an odd channel count (13) that straddle SIMD vector lengths and interior/border splits."""
    x, w, b = conv_inputs((5, width), 13, 13, 3, 13, dtype=torch.float32, device=device)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    for stride, mode in ((1, "reflect"), (2, "zeros"), (3, "circular"), (2, "replicate")):
        y = check_conv(x, w, b, stride=stride, groups=13, padding="same", padding_mode=mode)
        assert_memory_format_kept(x, y)


# NCHW 3-d depthwise convs, whose depth slices keep their phase planes in slots (depthwise.cpp's conv_nchw): circular
# pads whose wrapped slices share a slot with the slices beside them, reflect with a depth stride and dilation and a
# multiplier, replicate with an even kernel, a causal bfloat16 conv, and an (H, W) slice in two bands (the slots are
# cleared between bands).
SLICE_SLOT_CASES = [ConvCase(False, (9, 7, 8), 3, 3, (4, 3, 3), 1, ((2, 1), (1, 1), (1, 1)), groups=3,
                             padding_mode="circular"),
                    ConvCase(False, (11, 6, 9), 3, 6, (3, 3, 2), (2, 1, 1), "same", dilation=(2, 1, 1), groups=3,
                             padding_mode="reflect"),
                    ConvCase(False, (8, 5, 6), 4, 4, (6, 3, 3), 1, "same_lower", groups=4, padding_mode="replicate"),
                    ConvCase(False, (7, 6, 10), 2, 2, (3, 2, 2), 1, "causal", groups=2, dtype="bfloat16"),
                    ConvCase(False, (4, 260, 300), 2, 2, 3, 1, "same", groups=2, padding_mode="reflect", batch=1)]


@pytest.mark.parametrize("case", SLICE_SLOT_CASES, ids=lambda case: case.describe())
def test_nchw_3d_depthwise_slices_in_slots(case):
    run_case_at_isa(case, None, expected_path="cpu_depthwise")


@pytest.mark.parametrize("channels", [7, 8, 12, 19, 32, 33, 77, 1024])
def test_channels_last_depthwise_channel_counts(channels, device):
    """Channels-last depthwise convs on depthwise.cpp's conv_nhwc: the per-pixel loop in strided rows whose pixels are
    a multiple of 4 KiB (1024 channels at stride 2 in float32 and float64; under a vector of channels, 7 in float32
    and bfloat16, the NCHW kernel over the channels-last tensor instead: cpu_depthwise_strided_planes), the
    register tiles (8 positions x a vector of channels; 12 in float32 one masked AVX-512 vector) otherwise, with the
    next tile's pixels prefetched whole (up to 128 bytes) or a 64-byte run of channels at a time (77 channels; 1024 in
    bfloat16): a dilated even kernel with replicate pads and interior tiles, a stride with a partial last tile, a 3-d
    conv in reflect."""
    for size, kernel, stride, dilation, padding, mode in (((11, 21), 6, 1, 2, "same_lower", "replicate"),
                                                          ((9, 19), 3, 2, 1, "same", "zeros"),
                                                          ((5, 6, 13), 3, 1, 1, "same", "reflect")):
        x, w, b = conv_inputs(size, channels, channels, kernel, channels, device=device)
        x = x.to(memory_format=torch.channels_last if len(size) == 2 else torch.channels_last_3d)
        for dtype in (torch.float64, torch.float32, torch.bfloat16):
            y = check_conv(x.to(dtype), w.to(dtype), b.to(dtype), stride=stride, dilation=dilation, groups=channels,
                           padding=padding, padding_mode=mode)
            assert_memory_format_kept(x, y)


def check_channels_last_kernel(c_in, c_out, groups, cases, expected_path, device, channels_last=True):
    """Channels-last (or NCHW) convs over `cases` (size, kernel, stride, dilation, padding, mode) in float64, float32
    and bfloat16 against the reference; on CPU each takes `expected_path` (a path of depthwise.cpp's channels-last
    tiles), run at AVX2 and at this CPU's own ISA: on AVX-512 the path's _avx512 twin where its tiles take 16-float
    vectors (tiles_kernel)."""
    isas = tiles_isas() if device == "cpu" else [None]
    for (size, kernel, stride, dilation, padding, mode), isa in itertools.product(cases, isas):
        x, w, b = conv_inputs(size, c_in, c_out, kernel, groups, batch=3, device=device)
        if channels_last and len(size) > 1:
            x = x.to(memory_format=torch.channels_last if len(size) == 2 else torch.channels_last_3d)
        for dtype in (torch.float64, torch.float32, torch.bfloat16):
            xd, wd, bd = x.to(dtype), w.to(dtype), b.to(dtype)
            with cpu_isa_limit(isa):
                if device == "cpu":
                    nd = len(size)
                    pads = resolve_pads(padding, size, wd.shape[2:], (stride,) * nd, (dilation,) * nd)
                    path = torch.ops.fastpad._conv_path(xd, wd, bd, [stride] * nd, [lo for lo, _ in pads],
                                                        [hi for _, hi in pads], [dilation] * nd, groups, mode, "cpu")
                    expected = tiles_kernel(expected_path, isa, dtype, c_out)
                    if channels_last and groups == c_in:
                        expected = strided_planes_or(expected, dtype, c_out)
                    assert path == expected, (size, dtype, isa, path)
                y = check_conv(xd, wd, bd, stride=stride, dilation=dilation, groups=groups, padding=padding,
                               padding_mode=mode)
            assert_memory_format_kept(x, y)


# (size, kernel, stride, dilation, padding, mode, layout, input gradient's tiles) of depthwise rows with interior tiles
# (out_w >= 16): 2 to 7 taps along the row at stride 1 and 2, which slide (code_paths.nhwc_tiles_slide), and rows
# that keep the tiles that load an input per multiply-add: 1 and 8 taps, dilation 2, stride 3. Channels-last, and
# NCHW at stride 2 (its channel blocks run the same tiles over transposed blocks). The input gradient runs the tiles
# too where it is a zero-padded transposed conv with enough columns per phase (the depthwise phases), else the
# scatter (None: cpu_depthwise, no tiles).
SLIDING_ROWS = [((4, 41), (3, 2), 1, 1, "same", "zeros", "channels_last", "cpu_depthwise_phases"),
                ((5, 40), (2, 3), 2, 1, "same", "reflect", "channels_last", None),
                ((3, 37), (1, 4), 1, 1, "causal", "zeros", "channels_last", "cpu_depthwise_phases"),
                ((4, 52), (3, 5), 2, 1, "same_lower", "replicate", "channels_last", None),
                ((3, 45), (2, 6), 1, 1, ((1, 0), (2, 3)), "circular", "channels_last", None),
                ((2, 60), (1, 7), 2, 1, "same", "zeros", "channels_last", "cpu_depthwise_phases"),
                ((3, 9, 33), (1, 2, 5), 1, 1, "same", "zeros", "channels_last", "cpu_depthwise_phases"),
                ((6, 50), (3, 5), 2, 1, "same", "zeros", "contiguous", "cpu_depthwise_channel_block_phases"),
                ((3, 40), (2, 1), 1, 1, "same", "zeros", "channels_last", "cpu_depthwise_phases"),
                ((3, 40), (1, 8), 1, 1, "same", "zeros", "channels_last", "cpu_depthwise_phases"),
                ((3, 40), (3, 3), 1, 2, "same", "zeros", "channels_last", "cpu_depthwise_phases"),
                ((3, 60), (2, 4), 3, 1, "same", "zeros", "channels_last", None)]


def test_sliding_rows_cover_both_tiles():
    slides = [nhwc_tiles_slide(kernel[-1], stride, dilation) for _, kernel, stride, dilation, *_ in SLIDING_ROWS]
    assert slides[:8] == [True] * 8 and slides[8:] == [False] * 4


@pytest.mark.parametrize("case, channels", [(case, channels) for case in SLIDING_ROWS for channels in (12, 16, 40)
                                            if case[6] == "channels_last" or channels % 8 == 0],
                         ids=lambda v: f"{v[1]}-s{v[2]}-d{v[3]}-{v[6]}" if isinstance(v, tuple) else str(v))
def test_depthwise_sliding_tiles(case, channels):
    """Forward, input gradient and weight gradient of depthwise rows on depthwise.cpp's tiles, which slide along the
    row (interior and border tiles) where kernel_paths.h's cpu_nhwc_tiles_slide says (SLIDING_ROWS), against the
    float64 reference, outputs poisoned first, each op's path asserted: 12 channels (float32: one masked AVX-512
    vector; channels-last only, NCHW's channel blocks take whole vectors), 16 (one vector) and 40 (vectors whose last
    ends at C); float64, float32 and bfloat16; at AVX2 (at::vec's vectors) and at this CPU's own ISA."""
    size, kernel, stride, dilation, padding, mode, layout, input_grad_tiles = case
    conv_case = ConvCase(False, size, channels, channels, kernel, stride, padding, dilation=dilation, groups=channels,
                         padding_mode=mode, layout=layout)
    forward = "cpu_depthwise_channel_blocks" if layout == "contiguous" else "cpu_depthwise"
    for isa, dtype in itertools.product(tiles_isas(), (torch.float64, torch.float32, torch.bfloat16)):
        path = CodePath(conv_case, (), isa)
        inputs = path.inputs(dtype)
        input_grad = tiles_kernel(input_grad_tiles, isa, dtype, channels) if input_grad_tiles else "cpu_depthwise"
        weight_grad = tiles_kernel(forward, isa, dtype, channels, weight_grad=True)
        if layout == "contiguous" and dtype == torch.float64:  # NCHW's channel-block gradients: float accumulation
            input_grad = weight_grad = "cpu_depthwise"
        assert dict(kernels_reached(path, inputs)) == {
            "conv": tiles_kernel(forward, isa, dtype, channels), "conv_transpose": input_grad,
            "conv_weight_grad": weight_grad}, (isa, dtype)
        for result, expected, name in zip(run_forward_backward(path, inputs, poison_outputs=True),
                                          run_reference(path, inputs), RESULT_NAMES):
            assert_matches(result, expected, dtype, what=name)


# (transposed, size, x channels, y channels, kernel, stride, dilation, padding, mode, batch, dtype) of channels-last
# depthwise problems with fewer output-side channels than a 32-byte vector of the accumulation type, whose three ops
# run depthwise.cpp's NCHW kernels over the channels-last tensors, pixels C apart (kernel_paths.h's
# cpu_depthwise_strided_planes): seed 5's random029 (7 channels, k7 'same', batch 3), a multiplier of 2 at batch 1
# (two threads over the channels of one image), stride 3 with dilation 2 and explicit pads, 3-d, float64 under 4
# channels, bfloat16, a causal even kernel, planes of 300 x 310 in several bands, transposed convs
# (conv_transpose forward, conv for the input gradient) with a multiplier and an output crop; every padding mode.
STRIDED_PLANES = [(False, (30, 31), 7, 7, 7, 1, 1, "same", "zeros", 3, torch.float32),
                  (False, (17, 19), 3, 6, 4, 2, 2, "same_lower", "reflect", 1, torch.float32),
                  (False, (21, 20), 2, 2, 5, 3, 2, ((2, 1), (0, 3)), "replicate", 2, torch.float32),
                  (False, (9, 10, 11), 5, 5, 3, (1, 2, 2), 1, "same", "circular", 2, torch.bfloat16),
                  (False, (12, 13), 3, 3, 3, 1, 1, "same", "reflect", 2, torch.float64),
                  (False, (15, 14), 4, 4, 4, 1, 1, "causal", "zeros", 2, torch.bfloat16),
                  (False, (300, 310), 2, 2, 3, 1, 1, "same", "circular", 1, torch.float32),
                  (True, (11, 12), 6, 3, 4, 2, 1, "same", "zeros", 2, torch.float32),
                  (True, (6, 7, 8), 4, 4, 3, 2, 1, ((1, 1), (0, 2), (1, 0)), "zeros", 1, torch.bfloat16)]


@pytest.mark.parametrize("case", STRIDED_PLANES, ids=lambda case: "-".join(map(str, case[:2] + case[4:6])))
def test_channels_last_depthwise_strided_planes(case):
    """The forward, input gradient and weight gradient of each case against the float64 reference, outputs poisoned
    first, each op's path asserted; at AVX2 and at this CPU's own ISA (the kernels' vectors are at::vec's either way).
    Then an inf weight, which must reach only the outputs and gradients the reference's products take it to (not a
    transposed conv's input gradient, whose NaNs torch's backward places differently in either layout: the NCHW
    kernel's are the same as this path's)."""
    transposed, size, c_x, c_y, kernel, stride, dilation, padding, mode, batch, dtype = case
    groups = min(c_x, c_y)
    conv_case = ConvCase(transposed, size, c_x, c_y, kernel, stride, padding, dilation=dilation, groups=groups,
                         padding_mode=mode, layout="channels_last")
    for isa in tiles_isas():
        path = CodePath(conv_case, (), isa)
        inputs = path.inputs(dtype, batch=batch)
        reached = kernels_reached(path, inputs)
        assert reached == {(op, "cpu_depthwise_strided_planes") for op in ("conv", "conv_transpose",
                                                                          "conv_weight_grad")}, (isa, reached)
        for result, expected, name in zip(run_forward_backward(path, inputs, poison_outputs=True),
                                          run_reference(path, inputs), RESULT_NAMES):
            assert_matches(result, expected, dtype, what=name)
    x, w, b, gy = inputs
    w = w.clone()
    w[groups // 2].view(-1)[0] = float("inf")
    path = CodePath(conv_case, (), None)
    results = run_forward_backward(path, (x, w, b, gy), poison_outputs=True)
    for result, expected, name in zip(results, run_reference(path, (x, w, b, gy)), RESULT_NAMES):
        if transposed and name == "input grad":
            continue
        assert torch.equal(result.isnan(), expected.isnan()) and torch.equal(result.isinf(), expected.isinf()), name
        finite = expected.isfinite()
        assert_matches(result[finite], expected[finite].to(dtype), dtype, what=name)


def test_channels_last_depthwise_strided_planes_bounds():
    """kernel_paths.h's cpu_depthwise_strided_planes, for each of the three ops: channels-last, one input channel per
    group (any multiplier), fewer output channels than a 32-byte vector of the accumulation type (7 float32 or
    bfloat16 channels, or 3 x 2: yes; 8: no; float64 3: yes, 4: no). NCHW and grouped convs keep their kernels."""
    def paths(c_in, c_out, groups=None, dtype=torch.float32, channels_last=True):
        groups = groups or c_in
        x = torch.randn(2, c_in, 12, 13, dtype=dtype)
        w = torch.randn(c_out, c_in // groups, 3, 3, dtype=dtype)
        gy = torch.randn(2, c_out, 12, 13, dtype=dtype)
        if channels_last:
            x, gy = (t.contiguous(memory_format=torch.channels_last) for t in (x, gy))
        common = ([1, 1], [1, 1])
        with cpu_isa_limit("avx2"):
            return (torch.ops.fastpad._conv_path(x, w, None, *common, [1, 1], [1, 1], groups, "reflect", "cpu"),
                    torch.ops.fastpad._conv_transpose_path(gy, w, None, *common, [12, 13], [1, 1], groups, "reflect",
                                                           "cpu"),
                    torch.ops.fastpad._conv_weight_grad_path(x, gy, list(w.shape), *common, [1, 1], groups, "reflect",
                                                             "cpu"))
    strided = ("cpu_depthwise_strided_planes",) * 3
    assert paths(7, 7) == strided
    assert paths(7, 7, dtype=torch.bfloat16) == strided
    assert paths(3, 6) == strided
    assert paths(3, 3, dtype=torch.float64) == strided
    for others in (paths(8, 8), paths(4, 8), paths(4, 4, dtype=torch.float64), paths(7, 7, channels_last=False),
                   paths(6, 6, groups=3)):
        assert "cpu_depthwise_strided_planes" not in others, others


@pytest.mark.parametrize("channels, multiplier",
                         [(3, 2), (13, 2), (5, 4), (9, 3), (8, 5), (3, 8), (2, 9), (2, 16), (4, 17), (3, 96),
                          (4, 256)])
def test_channels_last_depthwise_multipliers(channels, multiplier, device):
    """Channels-last depthwise convs with a channel multiplier m on depthwise.cpp's conv_nhwc, which reads input rows
    expanded m times (interleaved vectors for m = 2, 4, 8 and 16 up to a vector's lanes, broadcast vectors otherwise,
    the last values of a row one by one) from a per-thread cache: at stride 3 with 1024 (4 KiB pixels in float32) the
    per-pixel loop, else the tiles; under a 32-byte vector of output channels (3 x 2 in float32 and bfloat16) the
    NCHW kernel over the channels-last tensors instead; dilation 2 (output rows two apart share tap rows), a stride of
    3 with a partial last tile, 1x1, 3-d reflect; float64, float32 and bfloat16 (whose vectors are 4, 8 and 16 lanes
    long)."""
    check_channels_last_kernel(channels, channels * multiplier, channels,
                               (((11, 21), 4, 1, 2, "same_lower", "replicate"), ((13, 17), 3, 3, 1, "same", "circular"),
                                ((7, 9), 1, 1, 1, "valid", "zeros"), ((5, 6, 13), 3, 1, 1, "same", "reflect")),
                               "cpu_depthwise", device)


@pytest.mark.parametrize("channels", [8, 16, 66, 72, 600])
def test_nchw_depthwise_channel_blocks(channels, device):
    """NCHW depthwise convs whose taps read several column phases, or whose output rows are at most 8 long, run on
    blocks of channels transposed to channels-last (depthwise.cpp's conv_nchw_channel_blocks): one vector (8, and in
    float32 66 = 9 vectors with the last ending at C), whole blocks of up to 8 vectors plus a block of the rest (72,
    600), on 2-d planes with and without a partial last tile, a 1-d row, a 3-d volume, stride 1 with 6-position rows,
    dilation, every padding mode; float64 (4-lane vectors), float32 (8x8 transposes and their scalar tails) and
    bfloat16 (strips of 8 rows converted to float and back around the same transposes, partial strips, scalar rows)."""
    cases = (((9, 19), 3, 2, 1, "same", "zeros"), ((14, 14), 5, 2, 1, "same_lower", "reflect"),
             ((31,), 4, 3, 2, "causal", "circular"), ((5, 6, 13), 3, 2, 1, "same", "replicate"),
             ((7, 6), 3, 1, 1, "same", "reflect"))
    check_channels_last_kernel(channels, channels, channels, cases, "cpu_depthwise_channel_blocks", device,
                               channels_last=False)


def test_nchw_depthwise_channel_blocks_bounds():
    """kernel_paths.h's cpu_depthwise_channel_blocks: NCHW depthwise with multiplier 1, a stride along W whose column
    phases the dilation does not merge, or rows of at most 8 outputs; at least a vector of channels, padded to whole
    vectors by at most an eighth (9 float32 channels fill 16 lanes: no); one vector's channels-last image within
    4 MiB (400 x 400 x 8 lanes x 4 bytes = 5.1 MB: no). Asked at AVX2 (the AVX-512 twin's bounds: below)."""
    def path(size, channels, kernel, stride=1, dilation=1, c_out=None, channels_last=False, dtype=torch.float32):
        x, w, b = conv_inputs(size, channels, c_out or channels, kernel, channels, batch=1, dtype=dtype)
        if channels_last:
            x = x.to(memory_format=torch.channels_last)
        nd = len(size)
        with cpu_isa_limit("avx2"):
            return torch.ops.fastpad._conv_path(x, w, b, [stride] * nd, [0] * nd, [0] * nd, [dilation] * nd,
                                                channels, "zeros", "cpu")
    assert path((20, 20), 16, 3, stride=2) == "cpu_depthwise_channel_blocks"
    assert path((8, 8), 16, 3) == "cpu_depthwise_channel_blocks"  # rows of 6
    assert path((200, 200), 8, 3, stride=2) == "cpu_depthwise_channel_blocks"  # 1.28 MB
    assert path((20, 20), 4, 3, stride=2, dtype=torch.float64) == "cpu_depthwise_channel_blocks"  # one 4-lane vector
    for others in (path((20, 20), 16, 3), path((40, 40), 16, 3, stride=2, dilation=2), path((20, 20), 16, 1, stride=2),
                   path((20, 20), 9, 3, stride=2), path((20, 20), 7, 3, stride=2), path((400, 400), 8, 3, stride=2),
                   path((20, 20), 16, 3, stride=2, channels_last=True), path((20, 20), 16, 3, stride=2, c_out=32)):
        assert others == "cpu_depthwise"


@pytest.mark.parametrize("channels", [16, 40, 600])
def test_nchw_depthwise_channel_blocks_stride_1_rows(channels, device):
    """On AVX-512's tiles, NCHW depthwise convs at stride 1 with output rows of 9-48 run on blocks of channels too
    (kernel_paths.h's kChannelBlocksMaxRowAvx512): 2-d rows of 14 (B0's k5 s1 layer's) and 48 (the bound) with reflect
    and zero pads, a causal 1-d row of 33 in circular mode, a 3-d volume with replicate pads and dilation 2; float32
    and bfloat16 (float64 has no AVX-512 tiles: the NCHW kernel); one block (16), a last partial vector (40), several
    blocks (600). At AVX2, and past 48, the NCHW kernel."""
    cases = (((14, 14), 5, 1, 1, "same", "reflect"), ((6, 48), 3, 1, 1, "same", "zeros"),
             ((33,), 4, 1, 1, "causal", "circular"), ((5, 6, 13), 3, 1, 2, "same", "replicate"))
    isas = ["avx512"] if device == "cpu" else [None]
    if device == "cpu":
        require_isa("avx512")
    for (size, kernel, stride, dilation, padding, mode), isa in itertools.product(cases, isas):
        x, w, b = conv_inputs(size, channels, channels, kernel, channels, batch=2, device=device)
        for dtype in (torch.float64, torch.float32, torch.bfloat16):
            xd, wd, bd = x.to(dtype), w.to(dtype), b.to(dtype)
            if device == "cpu":
                nd = len(size)
                pads = resolve_pads(padding, size, wd.shape[2:], (stride,) * nd, (dilation,) * nd)
                args = (xd, wd, bd, [stride] * nd, [lo for lo, _ in pads], [hi for _, hi in pads], [dilation] * nd,
                        channels, mode, "cpu")
                with cpu_isa_limit(isa):
                    path = torch.ops.fastpad._conv_path(*args)
                assert path == ("cpu_depthwise" if dtype == torch.float64 else "cpu_depthwise_channel_blocks_avx512"), \
                    (size, dtype, path)
                with cpu_isa_limit("avx2"):
                    assert torch.ops.fastpad._conv_path(*args) == "cpu_depthwise", (size, dtype)
            with cpu_isa_limit(isa):
                check_conv(xd, wd, bd, stride=stride, dilation=dilation, groups=channels, padding=padding,
                           padding_mode=mode)
    if device == "cpu":
        for size, kernel, stride, dilation in (((6, 51), 3, 1, 1), ((20, 20), 1, 2, 1), ((40, 40), 3, 2, 2)):
            x, w, b = conv_inputs(size, 16, 16, kernel, 16, batch=1)
            with cpu_isa_limit("avx512"):
                assert torch.ops.fastpad._conv_path(x, w, b, [stride] * 2, [0, 0], [0, 0], [dilation] * 2, 16,
                                                    "zeros", "cpu") == "cpu_depthwise", (size, kernel, stride)


@pytest.mark.parametrize("per_group, multiplier, groups",
                         [(2, 1, 8), (3, 2, 5), (5, 3, 4), (17, 1, 8), (2, 2, 4), (2, 2, 65)])
def test_channels_last_grouped_expanded(per_group, multiplier, groups, device):
    """Channels-last grouped convs with 2-17 input and 1-3 output channels per group on depthwise.cpp's conv_nhwc over
    rows expanded so that each output channel's lane reads its group's input channels: the tiles (8-130 output
    channels; 65 groups x 2 x 2 with 260 values per pixel prefetched a 64-byte run of each group's input channel at a
    time); dilation 2 with replicate pads, a stride of 2 with a partial last tile, 3-d reflect; float64, float32 and
    bfloat16."""
    check_channels_last_kernel(per_group * groups, multiplier * groups, groups,
                               (((11, 21), 4, 1, 2, "same_lower", "replicate"), ((13, 17), 3, 2, 1, "same", "circular"),
                                ((5, 6, 13), 3, 1, 1, "same", "reflect")),
                               "cpu_grouped_expanded", device)


def grouped_conv_path(per_group, out_per_group, groups=4, size=(8, 8), stride=1, dtype=torch.float64,
                      channels_last=False):
    """The CPU kernel path of a batch-1 2-d k3 conv with pads of 1 over `size`: `groups` groups of `per_group` input
    and `out_per_group` output channels, zeros mode."""
    x, w, b = conv_inputs(size, per_group * groups, out_per_group * groups, 3, groups, batch=1, dtype=dtype)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    return torch.ops.fastpad._conv_path(x, w, b, [stride] * 2, [1, 1], [1, 1], [1, 1], groups, "zeros", "cpu")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=["float64", "float32", "bfloat16"])
@pytest.mark.parametrize("per_group, out_per_group, groups", [(2, 2, 32), (2, 1, 4), (3, 7, 2), (15, 16, 2), (4, 5, 3)])
def test_nchw_grouped_convs_sum_their_groups_planes(per_group, out_per_group, groups, dtype):
    """NCHW convs with 2-15 input and up to 16 output channels per group (kernel_paths.h's cpu_grouped_planes) run
    depthwise.cpp's NCHW kernel: each output band summed over the phase planes of its group's input channels, up to 4
    output channels a pass (1-16 per group: blocks of 4 and a last block of 1-3). 1-d causal circular, 2-d stride 2
    (random082's 32 groups of 2 channels, k2 'same'), dilation 2 with reflect, and 3-d replicate whose output depths
    share input slices (k3 at stride 1); fresh inputs, poisoned outputs, against F.pad + conv in float64. Below 32
    output positions (kGroupedPlanesMinOutputs), 16 input or 17 output channels per group, or channels-last, not."""
    for size, kernel, stride, dilation, padding, mode in (((40,), 3, 1, 1, "causal", "circular"),
                                                          ((36, 36), 2, 2, 1, "same", "zeros"),
                                                          ((13, 11), (3, 4), 1, 2, "same", "reflect"),
                                                          ((6, 7, 9), 3, (1, 2, 1), 1, "same_lower", "replicate")):
        x, w, b = conv_inputs(size, per_group * groups, out_per_group * groups, kernel, groups, dtype=dtype)
        with RecordFastpadOps() as record:
            check_conv(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups, padding_mode=mode)
        assert {torch.ops.fastpad._conv_path(*args, "cpu") for _, args in record.calls} == {"cpu_grouped_planes"}
    assert grouped_conv_path(2, 2, size=(4, 8)) == "cpu_grouped_planes"  # 32 output positions
    assert grouped_conv_path(2, 2, size=(4, 7)) != "cpu_grouped_planes"
    assert grouped_conv_path(16, 2) != "cpu_grouped_planes"
    assert grouped_conv_path(2, 17) != "cpu_grouped_planes"
    assert grouped_conv_path(2, 2, channels_last=True) != "cpu_grouped_planes"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_channels_last_grouped_convs_with_few_channels_take_the_nchw_kernel(isa, dtype):
    """Channels-last grouped convs with at most 4 input and 4 output channels per group that the blocked kernel would
    take run depthwise.cpp's NCHW kernel on the channels-last tensors (kernel_paths.h's
    cpu_grouped_planes_over_channels_last, path cpu_grouped_planes): seed 6's random047 made small (3-d k4
    'same_lower' reflect, 3 input and 4 output channels per group), 2-d stride 2 with one output channel per group,
    dilation 2 with replicate pads, an even kernel with circular pads; at AVX2 and AVX-512, fresh inputs, poisoned
    outputs, against F.pad + conv in float64, the output channels-last. Not with 5 channels per group on either side,
    with fewer than 3 taps per stride step (k3 at stride 2), in float64 (no blocked kernel), or NCHW."""
    require_isa(isa)
    cases = (((6, 6, 6), 12, 16, 4, 4, 1, 1, "same_lower", "reflect"),
             ((18, 17), 12, 6, 6, 5, 2, 1, "same", "zeros"),
             ((13, 11), 8, 6, 2, 3, 1, 2, "same", "replicate"),
             ((10, 9), 9, 12, 3, (3, 4), 1, 1, "same", "circular"))
    with cpu_isa_limit(isa):
        for size, c_in, c_out, groups, kernel, stride, dilation, padding, mode in cases:
            x, w, b = conv_inputs(size, c_in, c_out, kernel, groups, dtype=dtype)
            x = x.to(memory_format=CHANNELS_LAST[x.dim()])
            with RecordFastpadOps() as record:
                y = check_conv(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups,
                               padding_mode=mode)
            assert [torch.ops.fastpad._conv_path(*args, "cpu") for _, args in record.calls] == ["cpu_grouped_planes"]
            assert_memory_format_kept(x, y)

        def path(per_group, out_per_group, stride=1, dtype=dtype, channels_last=True):
            return grouped_conv_path(per_group, out_per_group, size=(12, 12), stride=stride, dtype=dtype,
                                     channels_last=channels_last)
        assert path(3, 4) == "cpu_grouped_planes"  # 3 and 4 channels per group, 9 taps at stride 1
        assert path(3, 5) != "cpu_grouped_planes"  # 5 output channels per group
        assert path(5, 4) != "cpu_grouped_planes"  # 5 input channels per group
        assert path(3, 4, stride=2) != "cpu_grouped_planes"  # 9 taps over 4 positions a step
        assert path(3, 4, dtype=torch.float64) != "cpu_grouped_planes"
        assert path(3, 4, channels_last=False) == "cpu_grouped_planes"  # NCHW: the NCHW rule


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_channels_last_convs_with_few_output_channels_take_the_dot_products(isa):
    """Channels-last float32 convs with few output channels per group (up to 6 on AVX-512, 4 on AVX2), 32 input
    channels per group or more and 128 products per output value or more, that the tap tiles do not take, run
    cpu/channel_dots.h (kernel_paths.h's cpu_channel_dots): seed 6's random033 (371 -> 4 k7 stride 3 dilation 2
    'same' reflect); 1 output channel (blocks of 7 pixels on AVX-512) over 37 input channels (a masked tail); 2 groups
    of the most output channels with circular per-side pads; a 3-d replicate conv with mixed strides; a causal reflect
    conv over 899 pixels (runs of 24 and a rest), dilated along one dimension, without bias. At AVX2 and AVX-512, fresh
    inputs, poisoned outputs, against F.pad + conv in float64, the output channels-last. Not with one more output
    channel, 31 input channels, a reduction of 127 products (a 1x1 kernel), NCHW, float64 or bfloat16, nor where the
    tap tiles take the call."""
    require_isa(isa)
    most = 6 if isa == "avx512" else 4
    cases = (((8, 8), 371, 4, 1, 7, 3, 2, "same", "reflect", True),
             ((13, 11), 37, 1, 1, 4, 1, 1, "same", "zeros", True),
             ((9, 10), 80, 2 * most, 2, 3, 2, 1, ((1, 2), (0, 3)), "circular", True),
             ((7, 6, 5), 48, 3, 1, (3, 2, 3), (2, 1, 2), 1, "same_lower", "replicate", True),
             ((29, 31), 64, 2, 1, (1, 3), 1, (1, 2), "causal", "reflect", False))
    with cpu_isa_limit(isa):
        for size, c_in, c_out, groups, kernel, stride, dilation, padding, mode, bias in cases:
            x, w, b = conv_inputs(size, c_in, c_out, kernel, groups, bias=bias, dtype=torch.float32)
            x = x.to(memory_format=CHANNELS_LAST[x.dim()])
            with RecordFastpadOps() as record:
                y = check_conv(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups,
                               padding_mode=mode)
            paths = [torch.ops.fastpad._conv_path(*args, "cpu") for _, args in record.calls]
            assert paths == [f"cpu_channel_dots_{isa}"]
            assert_memory_format_kept(x, y)

        def path(c_in, c_out, kernel=3, size=(12, 12), dtype=torch.float32, channels_last=True):
            x, w, b = conv_inputs(size, c_in, c_out, kernel, batch=1, dtype=dtype)
            if channels_last:
                x = x.to(memory_format=torch.channels_last)
            pads = [kernel // 2] * 2
            return torch.ops.fastpad._conv_path(x, w, b, [1, 1], pads, pads, [1, 1], 1, "reflect", "cpu")
        dots = f"cpu_channel_dots_{isa}"
        assert path(32, most) == dots and path(128, 1, kernel=1) == dots
        assert path(32, most + 1) != dots
        assert path(31, most) != dots
        assert path(127, 1, kernel=1) != dots
        assert path(32, most, channels_last=False) != dots
        assert path(32, most, dtype=torch.float64) != dots and path(32, most, dtype=torch.bfloat16) != dots
        assert path(58, 3, kernel=4, size=(117, 117)) == f"cpu_tap_tiles_{isa}"  # seed 22's random001


@pytest.mark.parametrize("isa", ["avx512", "avx2"])
def test_avx512_tiles_bounds(isa):
    """kernel_paths.h's cpu_nhwc_tiles_avx512: depthwise.cpp's channels-last tiles take AVX-512's 16 floats (the paths'
    _avx512 twins) on a CPU with AVX-512F, for float accumulation (float32, bfloat16; not float64) and 16 channels or
    more; NCHW channel blocks of 16 channels only where a block's image stays within 640 KiB (101 x 101 x 16 x 4 bytes
    = 653 KB: yes; 102 x 102 = 666 KB: no). cpu_nhwc_tiles_avx512_masked: channels-last float32 rows of 9-15 channels
    too, as one masked vector (8: no, one AVX2 vector; bfloat16: no; NCHW's 8-channel blocks and the weight gradient's
    sums of 15 channels: no). At AVX2 never."""
    require_isa(isa)

    def path(size, channels, c_out=None, groups=None, channels_last=True, dtype=torch.float32):
        x, w, b = conv_inputs(size, channels, c_out or channels, 3, groups or channels, batch=1, dtype=dtype)
        if channels_last:
            x = x.to(memory_format=torch.channels_last)
        with cpu_isa_limit(isa):
            return torch.ops.fastpad._conv_path(x, w, b, [2, 2], [1, 1], [1, 1], [1, 1], groups or channels, "zeros",
                                                "cpu")
    wide = "_avx512" if isa == "avx512" else ""
    assert path((20, 20), 16) == "cpu_depthwise" + wide
    assert path((20, 20), 16, dtype=torch.bfloat16) == "cpu_depthwise" + wide
    assert path((20, 20), 8, c_out=16) == "cpu_depthwise" + wide  # a multiplier of 2: 16 output channels
    assert path((101, 101), 16, channels_last=False) == "cpu_depthwise_channel_blocks" + wide
    assert path((9, 9), 32, c_out=16, groups=8) == "cpu_grouped_expanded" + wide
    x = torch.randn(1, 16, 9, 9).to(memory_format=torch.channels_last)  # the weight gradient's sums
    with cpu_isa_limit(isa):
        assert torch.ops.fastpad._conv_weight_grad_path(x, x, [16, 1, 3, 3], [1, 1], [1, 1], [1, 1], 16, "zeros",
                                                        "cpu") == "cpu_depthwise" + wide
        x = x[:, :15].contiguous(memory_format=torch.channels_last)
        assert torch.ops.fastpad._conv_weight_grad_path(x, x, [15, 1, 3, 3], [1, 1], [1, 1], [1, 1], 15, "zeros",
                                                        "cpu") == "cpu_depthwise"
    assert path((20, 20), 15) == "cpu_depthwise" + wide  # masked
    assert path((20, 20), 9) == "cpu_depthwise" + wide  # masked
    assert path((9, 9), 24, c_out=12, groups=4) == "cpu_grouped_expanded" + wide  # masked
    assert path((20, 20), 8) == "cpu_depthwise"
    assert path((20, 20), 15, dtype=torch.bfloat16) == "cpu_depthwise"
    assert path((20, 20), 8, channels_last=False) == "cpu_depthwise_channel_blocks"
    assert path((20, 20), 16, dtype=torch.float64) == "cpu_depthwise"
    assert path((102, 102), 16, channels_last=False) == "cpu_depthwise_channel_blocks"
    assert path((9, 9), 16, c_out=8, groups=8) == "cpu_grouped_expanded"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=["float32", "bfloat16", "float16"])
def test_avx512_tiles_match_avx2_bitwise(dtype):
    """The AVX-512 tiles (cpu/nhwc_tiles_avx512.cpp) add the same products in the same order as the AVX2 tiles, each
    lane on its own, and round to 16 bits as c10 does (to nearest, ties to even), so their outputs are bitwise equal on
    every path that runs them: a channels-last depthwise conv (40 channels: a last vector ending at C; reflect), with
    a multiplier (20 -> 40, stride 2), grouped over expanded rows (2 x 2 channels per group), NCHW channel blocks
    (blocks of 16 channels against 8), and a channels-last depthwise transposed conv as stride phases; and the
    channels-last depthwise weight gradient's sums (40 and 37 channels: with 2 threads, blocks of 32 + 8 and 32 + 5 on
    AVX-512, of 24 + 16 and 24 + 13 on AVX2, a last vector ending at C where a block is no whole number of vectors; a
    9-wide kernel, in runs of 8 and 1 taps), whose sums per channel are the same whatever the blocks; and with a
    multiplier of 2 (the transposed conv's phases and the weight gradient over expanded x rows). In float32 also rows
    of 9-15 channels, one masked vector on AVX-512 (a depthwise conv, a grouped conv to 15 channels, stride phases to
    11)."""
    require_isa("avx512")
    ops = torch.ops.fastpad
    calls = [  # (path at AVX2, x's shape, weight's shape, groups, stride, pads, mode, channels_last, transposed)
        ("cpu_depthwise", (2, 40, 30, 33), (40, 1, 5, 5), 40, 1, (2, 2), "reflect", True, False),
        ("cpu_depthwise", (2, 20, 17, 26), (40, 1, 3, 3), 20, 2, (1, 0), "zeros", True, False),
        ("cpu_grouped_expanded", (2, 32, 14, 19), (32, 2, 3, 3), 16, 1, (1, 1), "circular", True, False),
        ("cpu_depthwise_channel_blocks", (2, 40, 19, 21), (40, 1, 3, 3), 40, 2, (1, 1), "replicate", False, False),
        ("cpu_depthwise_phases", (2, 40, 13, 30), (40, 1, 4, 4), 40, 2, (1, 2), "zeros", True, True),
        ("cpu_depthwise_phases", (2, 80, 13, 30), (80, 1, 4, 4), 40, 2, (1, 2), "zeros", True, True),
    ]
    if dtype == torch.float32:  # rows of 9-15 channels: one masked AVX-512 vector, two AVX2 vectors
        calls += [("cpu_depthwise", (2, 12, 30, 33), (12, 1, 5, 5), 12, 1, (2, 2), "reflect", True, False),
                  ("cpu_grouped_expanded", (2, 30, 14, 19), (15, 6, 3, 3), 5, 1, (1, 1), "circular", True, False),
                  ("cpu_depthwise_phases", (2, 11, 13, 30), (11, 1, 4, 4), 11, 2, (1, 2), "zeros", True, True)]
    for path, x_shape, w_shape, groups, stride, (lo, hi), mode, channels_last, transposed in calls:
        y_channels = w_shape[1] * groups if transposed else w_shape[0]
        x, w, b = (torch.randn(x_shape, dtype=dtype), torch.randn(w_shape, dtype=dtype),
                   torch.randn(y_channels, dtype=dtype))
        if channels_last:
            x = x.to(memory_format=torch.channels_last)
        if transposed:
            out = [(n - 1) * stride + k - lo - hi for n, k in zip(x_shape[2:], w_shape[2:])]
            args = (x, w, b, [stride] * 2, [lo] * 2, out, [1, 1], groups, mode)
            op, path_op = ops.conv_transpose, ops._conv_transpose_path
        else:
            args = (x, w, b, [stride] * 2, [lo] * 2, [hi] * 2, [1, 1], groups, mode)
            op, path_op = ops.conv, ops._conv_path
        outputs = []
        for isa in ("avx2", "avx512"):
            with cpu_isa_limit(isa):
                assert path_op(*args, "cpu") == path + ("_avx512" if isa == "avx512" else ""), (path, isa)
                outputs.append(op(*args))
        assert outputs[0].isfinite().all()
        assert torch.equal(outputs[0], outputs[1]), path
    for channels, multiplier, kernel, stride, mode in ((40, 1, 3, 2, "zeros"), (37, 1, (3, 9), 1, "reflect"),
                                                      (20, 2, 3, 1, "zeros")):
        kernel, c_out = as_tuple(kernel, 2), channels * multiplier
        x = torch.randn(2, channels, 17, 23 if multiplier == 1 else 30, dtype=dtype).to(
            memory_format=torch.channels_last)
        pads = [k // 2 for k in kernel]
        gy = torch.randn(ops.conv(x, torch.randn(c_out, 1, *kernel, dtype=dtype), None, [stride] * 2, pads, pads,
                                  [1, 1], channels, mode).shape, dtype=dtype).to(memory_format=torch.channels_last)
        args = (x, gy, [c_out, 1, *kernel], [stride] * 2, pads, [1, 1], channels, mode)
        grads = []
        for isa in ("avx2", "avx512"):
            with cpu_isa_limit(isa):
                assert ops._conv_weight_grad_path(*args, "cpu") == tiles_kernel("cpu_depthwise", isa, dtype, c_out,
                                                                                weight_grad=True)
                grads.append(ops.conv_weight_grad(*args))
        assert grads[0].isfinite().all()
        assert torch.equal(grads[0], grads[1]), (channels, kernel)


def test_channels_last_grouped_expanded_bounds():
    """kernel_paths.h's cpu_grouped_expanded: up to 3 output channels per group (4 keep the blocked kernel), at most 40
    weights per tap of a group (21 x 2 keep it), at least 2 taps per input position the strides step over (a 2x2 kernel
    at stride 2 keeps it), at least 8 output channels, never one group, and expanded rows within 8 MiB per thread
    (3 x 45,000 pixels x 4 x 16 channels x 4 bytes = 34.6 MB). Asked at AVX2."""
    def path(size, c_in, c_out, kernel, groups, stride=1):
        x, w, b = conv_inputs(size, c_in, c_out, kernel, groups, batch=1, dtype=torch.float32)
        x = x.to(memory_format=torch.channels_last)
        with cpu_isa_limit("avx2"):
            return torch.ops.fastpad._conv_path(x, w, b, [stride] * 2, [0, 0], [0, 0], [1, 1], groups, "zeros",
                                                "cpu")
    assert path((9, 9), 16, 24, 3, 8) == "cpu_grouped_expanded"
    assert path((9, 9), 16, 16, 3, 8, stride=2) == "cpu_grouped_expanded"
    assert path((9, 9), 160, 16, 3, 8) == "cpu_grouped_expanded"  # 20 x 2 weights per tap
    for others in (path((9, 9), 16, 32, 3, 8), path((9, 9), 168, 16, 3, 8), path((9, 9), 16, 16, 2, 8, stride=2),
                   path((9, 9), 12, 6, 3, 3), path((9, 9), 8, 3, 3, 1), path((3, 45_000), 64, 16, 3, 16)):
        assert others != "cpu_grouped_expanded"


def test_channels_last_depthwise_multiplier_on_a_long_row_keeps_bounded_buffers():
    """A channels-last depthwise conv with a multiplier whose expanded rows would pass 8 MiB per thread (one row of
    300,000 pixels x 8 output channels x 4 bytes = 9.6 MB; kernel_paths.h's kExpandedRowsMaxBytes) runs a kernel with
    band-sized buffers instead; 250,000 pixels (8 MB) still take the depthwise kernel."""
    for width, expected in ((250_000, "cpu_depthwise"), (300_000, "cpu_channels_last_direct")):
        x, w, b = conv_inputs((1, width), 4, 8, (1, 3), 4, batch=1, dtype=torch.float32)
        x = x.to(memory_format=torch.channels_last)
        assert torch.ops.fastpad._conv_path(x, w, b, [1, 1], [0, 1], [0, 1], [1, 1], 4, "reflect", "cpu") == expected
        check_conv(x, w, b, groups=4, padding=((0, 0), (1, 1)), padding_mode="reflect")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("c_in, c_out, size, kernel, stride, groups",
                         [(64, 96, (33, 35), 3, 1, 1), (48, 48, (17, 70), 5, 2, 4), (3, 130, (40, 41), 7, 2, 1),
                          (130, 3, (21, 22), 1, 1, 1)])
def test_medium_shapes_cross_tile_boundaries(c_in, c_out, size, kernel, stride, groups, dtype, device):
    x, w, b = conv_inputs(size, c_in, c_out, kernel, groups, batch=1, dtype=dtype, device=device)
    for layout in (torch.contiguous_format, torch.channels_last):
        xl = x.to(memory_format=layout)
        y = check_conv(xl, w, b, stride=stride, groups=groups, padding="same", padding_mode="reflect")
        assert_memory_format_kept(xl, y)


@pytest.mark.parametrize("nd", NDIMS)
def test_contiguous_input_gives_contiguous_output(nd, device):
    y = run_case(nd, device, padding="same", stride=2)
    assert y.is_contiguous()


# --------------------------------------------------------------------------------------------
# The op itself, called directly with per-side pads.


@pytest.mark.parametrize(
    "pad_lo, pad_hi, stride, mode",
    [
        ([0, 3], [2, 0], [1, 2], "zeros"),
        ([5, 0], [0, 7], [2, 3], "zeros"),  # pads wider than the input: whole output rows are only bias
        ([1, 2], [3, 0], [3, 1], "reflect"),  # pad_hi partly beyond the last window: unused
        ([4, 4], [4, 4], [2, 2], "replicate"),
        ([2, 4], [1, 4], [1, 2], "circular"),
    ],
)
def test_op_direct_per_side_pads(pad_lo, pad_hi, stride, mode, device):
    x, w, b = conv_inputs((5, 6), c_in=4, c_out=6, groups=2, device=device)
    pads = list(zip(pad_lo, pad_hi))
    expected = reference_conv(x, w, b, stride, pads, [1, 1], 2, mode)
    poison(expected.shape, x.dtype, x.device)
    y = torch.ops.fastpad.conv(x, w, b, stride, pad_lo, pad_hi, [1, 1], 2, mode)
    assert_matches(y, expected)


def test_op_output_entirely_in_zero_padding_equals_bias(device):
    """Rows read only from zero padding must hold exactly the bias (a kernel that skips them shows NaN)."""
    x, w, b = conv_inputs((3, 4), device=device)
    poison((2, 6, 11, 4), x.dtype, x.device)
    y = torch.ops.fastpad.conv(x, w, b, [1, 1], [5, 1], [5, 1], [1, 1], 1, "zeros")
    assert y.shape == (2, 6, 11, 4)
    torch.testing.assert_close(y[:, :, :3], b.view(1, -1, 1, 1).expand(2, 6, 3, 4), rtol=0, atol=0)
    assert_matches(y, reference_conv(x, w, b, [1, 1], [(5, 5), (1, 1)], [1, 1], 1, "zeros"))


@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate"])
def test_op_negative_pad_hi_shortens_output(mode, device):
    """A negative pad_hi drops trailing outputs (what conv_transpose's backward asks for after an end crop):
    the same as convolving the input cropped by -pad_hi at the end."""
    x, w, b = conv_inputs((9, 8), device=device)
    y = torch.ops.fastpad.conv(x, w, b, [2, 1], [1, 2], [-2, -3], [1, 1], 1, mode)
    expected = reference_conv(x[:, :, :7, :5], w, b, [2, 1], [(1, 0), (2, 0)], [1, 1], 1, mode)
    assert_matches(y, expected)


@pytest.mark.parametrize("nd", NDIMS)
def test_no_bias(nd, device):
    run_case(nd, device, bias=False, padding="same", stride=2, padding_mode="replicate")


# --------------------------------------------------------------------------------------------
# A wider sweep, only with -m slow.


@pytest.mark.slow
@pytest.mark.parametrize("mode", PADDING_MODES)
@pytest.mark.parametrize("nd", NDIMS)
def test_sweep_slow(nd, mode, device):
    sizes = {1: (29,), 2: (15, 16), 3: (9, 10, 11)}
    for stride in (1, 2, 3, 4):
        for dilation in (1, 2, 3):
            for padding in ("same", "same_lower", "valid", "causal"):
                for c_in, c_out, groups in ((3, 5, 1), (4, 6, 2), (6, 6, 6)):
                    run_case(nd, device, size=sizes[nd], c_in=c_in, c_out=c_out, groups=groups, stride=stride,
                             dilation=dilation, padding=padding, padding_mode=mode)
