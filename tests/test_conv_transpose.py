"""fastpad.conv_transpose1d/2d/3d against the reference: the full F.conv_transpose, cropped to
[crop_lo, crop_lo + out_size), zero-extended past the end, plus the bias (docs/DESIGN.md section 2)."""

import itertools

import pytest
import torch
import torch.nn.functional as F

import fastpad
from code_paths import (ISA_ORDER, RESULT_NAMES, CodePath, cpu_isa_limit, intra_op_threads, kernels_reached,
                        machine_isa, reduction_tiles_kernel, require_isa, run_forward_backward, run_reference,
                        strided_planes_or, tiles_isas, tiles_kernel)
from fastpad.cases import ConvCase
from test_blocked_direct import check_folded_input_gradient, run_case as run_blocked_case
from reference import (CHANNELS_LAST, EXPLICIT_PADDINGS, GROUP_CASES, as_tuple, assert_matches,
                       assert_memory_format_kept, check_conv_transpose, conv_inputs, effective_kernel, expected_conv,
                       expected_conv_transpose, poison, reference_conv_transpose, resolve_crops)

SIZES = {1: (7,), 2: (4, 5), 3: (3, 4, 3)}
NDIMS = (1, 2, 3)


def run_case(nd, device, dtype=torch.float64, size=None, c_in=4, c_out=6, kernel=3, groups=1, batch=2, bias=True,
             **kwargs):
    x, w, b = conv_inputs(size or SIZES[nd], c_in, c_out, kernel, groups, batch, bias, transposed=True, dtype=dtype,
                          device=device)
    return check_conv_transpose(x, w, b, groups=groups, **kwargs)


@pytest.mark.parametrize("kernel", [1, 2, 3, 4])
@pytest.mark.parametrize("stride", [1, 2, 3])
@pytest.mark.parametrize("padding", ["same", "same_lower", "valid"])
@pytest.mark.parametrize("nd", NDIMS)
def test_padding_strings(nd, padding, stride, kernel, device):
    y = run_case(nd, device, kernel=kernel, stride=stride, padding=padding)
    if padding != "valid":
        assert y.shape[2:] == tuple(i * stride for i in SIZES[nd])


@pytest.mark.parametrize("which", ["int", "tuple", "pairs"])
@pytest.mark.parametrize("nd", NDIMS)
def test_explicit_crops(nd, which, device):
    padding = EXPLICIT_PADDINGS[nd][which]
    for stride, dilation in ((1, 1), (2, 1), (2, 2), (3, 1)):
        run_case(nd, device, stride=stride, dilation=dilation, padding=padding)


@pytest.mark.parametrize(
    "stride, dilation, output_padding",
    [(2, 1, 1), (3, 1, 2), (3, 1, 1), (1, 3, 2), (2, 3, 2), ((2, 3), (1, 1), (1, 2))],
)
@pytest.mark.parametrize("padding", ["same", "same_lower", "valid", 1, ((1, 0), (0, 2))])
def test_output_padding(padding, stride, dilation, output_padding, device):
    run_case(2, device, stride=stride, dilation=dilation, padding=padding, output_padding=output_padding)


def past_full_mask(out_size, crop_lo, full_size):
    """Boolean mask over the output's spatial positions that lie past the full transposed result."""
    nd = len(out_size)
    mask = torch.zeros(out_size, dtype=torch.bool)
    for dim, (size, lo, full) in enumerate(zip(out_size, crop_lo, full_size)):
        shape = [1] * nd
        shape[dim] = size
        mask = mask | (torch.arange(size) + lo >= full).view(shape)
    return mask


@pytest.mark.parametrize(
    "kernel, stride, dilation, padding, output_padding",
    [
        (1, 2, 1, "same", 0),
        (1, 3, 1, "same", 1),
        (2, 4, 1, "same", 0),
        (2, 4, 1, "same_lower", 3),
        (2, 3, 1, "same", 0),
        (1, 3, 1, "valid", 2),
        (2, 4, 1, 1, 3),
    ],
)
@pytest.mark.parametrize("nd", NDIMS)
def test_k_eff_below_stride_extends_with_bias(nd, kernel, stride, dilation, padding, output_padding, device):
    """Output positions past the full transposed result hold exactly the bias."""
    size = SIZES[nd]
    x, w, b = conv_inputs(size, c_in=3, c_out=5, kernel=kernel, transposed=True, device=device)
    y = check_conv_transpose(x, w, b, stride=stride, dilation=dilation, padding=padding, output_padding=output_padding)
    crop_lo, out_size = resolve_crops(padding, size, as_tuple(kernel, nd), stride, dilation, output_padding)
    full = [(i - 1) * stride + effective_kernel(kernel, dilation) for i in size]
    mask = past_full_mask(out_size, crop_lo, full).to(device)
    assert mask.any(), "the case must extend the output past the full result"
    extended = y[:, :, mask]  # [N, C_out, positions]
    bias = b.view(1, -1, 1).expand_as(extended)
    torch.testing.assert_close(extended, bias, rtol=0, atol=0)


def test_extension_positions_equal_bias(device):
    """k=1, stride 3, 'same': out = 3*i > full = 3*(i-1)+1; positions 3j+1, 3j+2 hold only the bias."""
    x, w, b = conv_inputs((5, 4), c_in=3, c_out=5, kernel=1, transposed=True, device=device)
    y = check_conv_transpose(x, w, b, stride=3, padding="same")
    assert y.shape == (2, 5, 15, 12)
    bias = b.view(1, -1, 1, 1)
    for phase in (1, 2):
        torch.testing.assert_close(y[:, :, phase::3, :], bias.expand_as(y[:, :, phase::3, :]), rtol=0, atol=0)
        torch.testing.assert_close(y[:, :, :, phase::3], bias.expand_as(y[:, :, :, phase::3]), rtol=0, atol=0)
    # The last row/column lies past the full output (13 x 10): bias too, and no bias at all without one.
    y_no_bias = check_conv_transpose(x, w, None, stride=3, padding="same")
    assert (y_no_bias[:, :, 13:] == 0).all() and (y_no_bias[..., 10:] == 0).all()


@pytest.mark.parametrize("groups", sorted(GROUP_CASES))
@pytest.mark.parametrize("nd", NDIMS)
def test_groups(nd, groups, device):
    c_in, c_out, g = GROUP_CASES[groups]
    for stride, padding in ((1, "same"), (2, "same"), (2, "valid"), (3, "same_lower")):
        run_case(nd, device, c_in=c_in, c_out=c_out, groups=g, stride=stride, padding=padding)


@pytest.mark.parametrize("nd", [2, 3])
def test_channels_last(nd, device):
    for c_in, c_out, groups in ((8, 8, 1), (8, 8, 8)):
        x, w, b = conv_inputs(SIZES[nd], c_in, c_out, 3, groups, transposed=True, device=device)
        x = x.to(memory_format=torch.channels_last if nd == 2 else torch.channels_last_3d)
        for dtype in (torch.float64, torch.float32, torch.bfloat16):
            y = check_conv_transpose(x.to(dtype), w.to(dtype), b.to(dtype), stride=2, padding="same", groups=groups)
            assert_memory_format_kept(x, y)


@pytest.mark.parametrize("c_in, c_out, size, kernel, stride, groups",
                         [(64, 96, (16, 17), 3, 1, 1), (48, 48, (9, 35), 4, 2, 4), (130, 3, (20, 21), 7, 2, 1),
                          (3, 130, (10, 11), 2, 3, 1)])
def test_medium_shapes_cross_tile_boundaries(c_in, c_out, size, kernel, stride, groups, device):
    x, w, b = conv_inputs(size, c_in, c_out, kernel, groups, batch=1, transposed=True, dtype=torch.float32,
                          device=device)
    for layout in (torch.contiguous_format, torch.channels_last):
        xl = x.to(memory_format=layout)
        y = check_conv_transpose(xl, w, b, stride=stride, groups=groups, padding="same")
        assert_memory_format_kept(xl, y)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=["float64", "float32", "bfloat16"])
@pytest.mark.parametrize("channels, multiplier", [(5, 1), (12, 1), (16, 1), (77, 1), (8, 3), (10, 3), (16, 2)])
def test_channels_last_depthwise_stride_phases(channels, multiplier, dtype):
    """Channels-last depthwise transposed convs in zeros mode run as the depthwise convs their stride phases are, on
    depthwise.cpp's channels-last tiles, y row by y row (cpu_depthwise_phases): stride 1 (one phase, the kernel
    flipped), stride 2 with dilation 2 and an output_padding, stride 3 with a kernel below it (phases no tap reaches:
    the bias), a crop past the kernel's extent (a phase conv with a negative pad_lo), 3-d; one vector of y channels,
    and 77 (a last vector ending at C); under a 32-byte vector (5 in float32 and bfloat16) the NCHW kernel over the
    channels-last tensors instead (cpu_depthwise_strided_planes); with a multiplier (m x channels per
    y channel: each phase a grouped conv over x rows expanded per thread, the rows of several phases in one cache); an
    inf weight, which must meet no zero outside x. Each call asserts the path (at AVX2 and at this CPU's own ISA: on
    AVX-512 the tiles' _avx512 twin from 16 y channels in float32 and bfloat16, and from 9 in float32: one masked
    vector) and is compared with the float64 reference."""
    cases = [((20, 21), 3, 1, 1, "same", 0), ((30, 26), 4, 2, 2, "same_lower", 1), ((25, 25), 2, 3, 1, "valid", 0),
             ((27, 30), 3, 2, 1, ((3, 4), (4, 3)), 1), ((4, 5, 26), 3, (1, 1, 2), 1, "same", 0)]
    for (size, kernel, stride, dilation, padding, output_padding), isa in itertools.product(cases, tiles_isas()):
        nd = len(size)
        x, w, b = conv_inputs(size, channels * multiplier, channels, kernel, channels, batch=2, transposed=True,
                              dtype=dtype)
        x = x.to(memory_format=CHANNELS_LAST[x.dim()])
        crop_lo, out_size = resolve_crops(padding, size, as_tuple(kernel, nd), as_tuple(stride, nd),
                                          as_tuple(dilation, nd), output_padding)
        with cpu_isa_limit(isa):
            path = torch.ops.fastpad._conv_transpose_path(x, w, b, list(as_tuple(stride, nd)), crop_lo, out_size,
                                                          [dilation] * nd, channels, "zeros", "cpu")
            expected = strided_planes_or(tiles_kernel("cpu_depthwise_phases", isa, dtype, channels), dtype,
                                         channels * multiplier)
            assert path == expected, (size, isa, path)
            y = check_conv_transpose(x, w, b, stride=stride, padding=padding, dilation=dilation,
                                     output_padding=output_padding, groups=channels)
        assert_memory_format_kept(x, y)
    w[channels // 2, 0, 0, 0] = float("inf")
    expected = expected_conv_transpose(x.double(), w.double(), b.double(), stride=(1, 1, 2), padding="same",
                                       groups=channels)
    poison(expected.shape, x.dtype)
    y = fastpad.conv_transpose3d(x, w, b, stride=(1, 1, 2), padding="same", groups=channels)
    assert torch.equal(y.isnan(), expected.isnan()) and torch.equal(y.isinf(), expected.isinf())
    finite = expected.isfinite()
    assert_matches(y[finite], expected[finite].to(dtype))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=["float64", "float32", "bfloat16"])
def test_channels_last_depthwise_stride_phases_of_few_y_channels(dtype):
    """With a multiplier and under 8 y channels (5 here, m = 2), the phase convs run depthwise.cpp's per-pixel loop
    over expanded x rows, where the grouped scatter would take the call (the blocked kernel's reduction, 2 x channels
    x 1 or 2 taps, is under 8): 1x1 and 2x1 kernels, stride 1 and 2 (x rows of 30: 60 y columns, 30 per phase)."""
    for kernel, stride in (((1, 1), 1), ((2, 1), 2), ((1, 1), 2)):
        x, w, b = conv_inputs((9, 30), 10, 5, kernel, 5, batch=2, transposed=True, dtype=dtype)
        x = x.to(memory_format=torch.channels_last)
        crop_lo, out_size = resolve_crops("valid", (9, 30), kernel, (stride, stride), (1, 1), 0)
        path = torch.ops.fastpad._conv_transpose_path(x, w, b, [stride] * 2, crop_lo, out_size, [1, 1], 5, "zeros",
                                                      "cpu")
        assert path == "cpu_depthwise_phases", (kernel, stride, path)
        y = check_conv_transpose(x, w, b, stride=stride, padding="valid", groups=5)
        assert_memory_format_kept(x, y)


# (x size, groups, y channels per group, kernel, stride, path) of zeros-mode transposed convs with one x channel per
# group (the input gradients of convs whose groups have one output channel each) around kernel_paths.h's
# kDepthwisePhasesMaxYPerX: up to 4 y channels per group the depthwise phases take them; with more, only where the
# GEMM + col2im would (a 5x5 kernel at stride 2: 6 taps per phase over one x channel, under the blocked kernel's
# reduction of 8), and a stride-1 3x3 kernel's 16 y channels per group keep the blocked kernel (float32, bfloat16).
ONE_X_CHANNEL_PHASES = [((13, 30), 8, 2, 3, 1, "cpu_depthwise_phases"),
                        ((13, 52), 4, 4, 4, 2, "cpu_depthwise_phases"),  # a y row of 104: 52 per column phase
                        ((4, 5, 26), 3, 3, 3, (1, 1, 2), "cpu_depthwise_phases"),
                        ((12, 50), 2, 17, 5, 2, "cpu_depthwise_phases"),
                        ((12, 30), 2, 16, 3, 1, "cpu_blocked")]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=["float64", "float32", "bfloat16"])
@pytest.mark.parametrize("size, groups, y_per_group, kernel, stride, kernel_path", ONE_X_CHANNEL_PHASES)
def test_channels_last_stride_phases_of_one_x_channel_per_group(size, groups, y_per_group, kernel, stride,
                                                                 kernel_path, dtype):
    """A channels-last transposed conv with one x channel and R y channels per group runs as its stride phases' convs,
    each a depthwise conv with multiplier R over x rows expanded per thread (each x channel repeated R times), on
    depthwise.cpp's tiles (cpu_depthwise_phases; on AVX-512 its _avx512 twin from 9 y channels in float32, 16 in
    bfloat16), except where the blocked kernel fills its vectors: the path at AVX2 and this CPU's ISA, against the
    float64 reference, outputs poisoned first, the layout kept."""
    nd = len(size)
    y_channels = groups * y_per_group
    pads = tuple(((kernel - 1) // 2, kernel // 2) for _ in size)
    for isa in tiles_isas():
        x, w, b = conv_inputs(size, groups, y_channels, kernel, groups, batch=2, transposed=True, dtype=dtype)
        x = x.to(memory_format=CHANNELS_LAST[nd + 2])
        strides = as_tuple(stride, nd)
        crop_lo, out_size = resolve_crops(pads, size, as_tuple(kernel, nd), strides, (1,) * nd, 0)
        with cpu_isa_limit(isa):
            path = torch.ops.fastpad._conv_transpose_path(x, w, b, list(strides), crop_lo, out_size, [1] * nd, groups,
                                                          "zeros", "cpu")
            if kernel_path == "cpu_blocked" and dtype != torch.float64:
                assert path.startswith("cpu_blocked"), (isa, path)
            else:  # float64 has no blocked kernel: the phases in place of the GEMM + col2im
                assert path == tiles_kernel("cpu_depthwise_phases", isa, dtype, y_channels), (isa, path)
            y = check_conv_transpose(x, w, b, stride=stride, padding=pads, groups=groups)
        assert_memory_format_kept(x, y)


# (x size, conv in channels, conv out channels, kernel, groups, stride, mode) of channels-last convs whose input
# gradients, in another mode than zeros, kernel_paths.h's cpu_depthwise_phases_folded gives the depthwise phases over
# the full transposed conv, then folded: a multiplier of 5 on the x side (one y channel per group: 8 y channels, the
# AVX2 tiles), one x channel and 17 y channels per group at stride 2 (random050 of seed 2, narrowed), a depthwise
# 5x5 (25 taps), a 3-d multiplier of 2 on the x side (16 y channels), and dilation 2.
DEPTHWISE_PHASES_FOLDED = [((20, 30), 8, 40, 4, 8, 1, "reflect", 1),
                           ((24, 52), 34, 2, 5, 2, 2, "replicate", 1),
                           ((20, 21), 16, 16, 5, 16, 1, "circular", 1),
                           ((6, 7, 9), 16, 32, 3, 16, 1, "replicate", 1),
                           ((22, 23), 12, 24, 3, 12, 1, "reflect", 2)]


@pytest.mark.parametrize("size, c_in, c_out, kernel, groups, stride, mode, dilation", DEPTHWISE_PHASES_FOLDED)
def test_channels_last_depthwise_phases_folded(size, c_in, c_out, kernel, groups, stride, mode, dilation):
    """The input gradient of a channels-last conv in reflect, replicate or circular mode, where the depthwise phases
    would take the full transposed conv: those phases into a float32 buffer of the full conv, then fold_padding folds
    each position outside y onto the one the mode reads it from (cpu_depthwise_phases_folded, _avx512 on AVX-512 from
    9 y channels): the path at AVX2 and this CPU's ISA, against float64 autograd, outputs poisoned first."""
    nd = len(size)
    layout = CHANNELS_LAST[nd + 2]
    pads = tuple(((kernel - 1) * dilation // 2, (kernel - 1) * dilation - (kernel - 1) * dilation // 2)
                 for _ in size)
    for isa in tiles_isas():
        x, w, _ = conv_inputs(size, c_in, c_out, kernel, groups, 2, bias=False, dtype=torch.float32)
        x = x.to(memory_format=layout)
        expected_path = tiles_kernel("cpu_depthwise_phases_folded", isa, torch.float32, c_in)
        with cpu_isa_limit(isa):
            gy = torch.randn(expected_conv(x, w, None, stride=stride, padding=pads, padding_mode=mode, groups=groups,
                                           dilation=dilation).shape).contiguous(memory_format=layout)
            path = torch.ops.fastpad._conv_transpose_path(gy, w, None, [stride] * nd, [lo for lo, _ in pads],
                                                          list(x.shape[2:]), [dilation] * nd, groups, mode, "cpu")
            assert path == expected_path, (isa, path)
            xr = x.detach().requires_grad_()
            y = getattr(fastpad, f"conv{nd}d")(xr, w, stride=stride, padding=pads, padding_mode=mode, groups=groups,
                                               dilation=dilation)
            x64 = x.double().requires_grad_()
            (expected,) = torch.autograd.grad(expected_conv(x64, w.double(), None, stride=stride, padding=pads,
                                                            padding_mode=mode, groups=groups, dilation=dilation),
                                              x64, gy.double())
            poison(expected.shape, torch.float32)
            (grad,) = torch.autograd.grad(y, xr, gy)
            assert_matches(grad, expected, torch.float32, what="input gradient")
            assert_memory_format_kept(x, grad)


def test_channels_last_depthwise_phases_folded_bounds():
    """kernel_paths.h's cpu_depthwise_phases_folded: another mode than zeros, float32 or float64 (bfloat16 keeps the
    grouped scatter: the fold adds in the output's type), and a multiplier on either side, or a depthwise conv with 20
    taps or more (a 4x4 kernel's 16 keep the scatter) and 8 channels or more (5 float64 channels keep it; 5 float32
    channels take the NCHW kernel, cpu_depthwise_strided_planes). Asked at AVX2."""
    def path(kernel, channels=16, groups=16, multiplier=1, mode="reflect", dtype=torch.float32):
        gy = torch.randn(2, channels * multiplier, 20, 21, dtype=dtype).contiguous(memory_format=torch.channels_last)
        w = torch.randn(channels * multiplier, channels // groups, kernel, kernel, dtype=dtype)
        with cpu_isa_limit("avx2"):
            # pads ((k - 1) // 2, k // 2): y (the conv's input) as large as grad_output
            return torch.ops.fastpad._conv_transpose_path(gy, w, None, [1, 1], [(kernel - 1) // 2] * 2, [20, 21],
                                                          [1, 1], groups, mode, "cpu")
    assert path(5) == "cpu_depthwise_phases_folded"
    assert path(5, mode="zeros") == "cpu_depthwise_phases"
    assert path(3, multiplier=2) == "cpu_depthwise_phases_folded"
    assert path(5, dtype=torch.float64) == "cpu_depthwise_phases_folded"
    assert path(4) == "cpu_depthwise"
    assert path(5, channels=5, groups=5, dtype=torch.float64) == "cpu_depthwise"
    assert path(5, channels=5, groups=5) == "cpu_depthwise_strided_planes"
    assert path(3, multiplier=2, dtype=torch.bfloat16) != "cpu_depthwise_phases_folded"


def test_channels_last_depthwise_stride_phases_bounds():
    """kernel_paths.h's cpu_depthwise_phases: channels-last, one y channel per group (and one or more x channels) or
    one x channel (and up to 4 y channels here), zeros mode, and with a stride along W at least 24 y positions of each column phase in a row (a y row of 49 at stride
    2: yes; 47: no); otherwise the scatter (cpu_depthwise), or with a multiplier another kernel; and with a multiplier,
    each phase conv's expanded x rows within 8 MiB per thread (3 rows of 8,200 pixels x 16 x 8 values x 4 bytes:
    12.6 MB). Asked at AVX2."""
    def path(width, stride=2, mode="zeros", channels_last=True, y_channels=8, multiplier=1, height=5):
        x, w = torch.randn(1, 8 * multiplier, height, width), torch.randn(8 * multiplier, y_channels // 8, 3, 3)
        if channels_last:
            x = x.to(memory_format=torch.channels_last)
        out = (width - 1) * stride + 3 - 2
        with cpu_isa_limit("avx2"):
            return torch.ops.fastpad._conv_transpose_path(x, w, None, [stride, stride], [1, 1],
                                                          [(height - 1) * stride + 1, out], [1, 1], 8, mode, "cpu")
    assert path(25) == "cpu_depthwise_phases"  # y row of 24 x 2 + 3 - 2 = 49
    assert path(5, stride=1) == "cpu_depthwise_phases"
    assert path(25, multiplier=3) == "cpu_depthwise_phases"
    assert path(5, stride=1, multiplier=2) == "cpu_depthwise_phases"
    for others in (path(24), path(25, mode="reflect")):  # path(24): a y row of 47
        assert others == "cpu_depthwise"
    assert path(25, channels_last=False) == "cpu_depthwise_channel_block_phases"  # NCHW: the phases on channel blocks
    assert path(25, y_channels=16) == "cpu_depthwise_phases"  # one x channel and 2 y channels per group
    for others in (path(24, multiplier=2), path(25, mode="reflect", multiplier=2),
                   path(8_200, stride=1, multiplier=16, height=3)):
        assert others != "cpu_depthwise_phases"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("nd", NDIMS)
def test_low_precision(nd, dtype, device):
    run_case(nd, device, dtype=dtype, stride=2, kernel=4, padding="same")
    run_case(nd, device, dtype=dtype, c_in=16, c_out=16, groups=16, stride=3, padding="same_lower")
    run_case(nd, device, dtype=dtype, c_in=16, c_out=8, stride=2, padding=1, output_padding=1)


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("groups", [1, 8])
def test_16_bit_output_accumulates_a_few_images_at_a_time(groups, channels_last):
    """On CPU a bfloat16 output accumulates in float, in a buffer of 16 MiB or one image: 16 x 259 x 259 float images
    (4.3 MB) go three at a time, so the five images take a full chunk and a short one (crops 1 and 2, which torch's
    own transposed convolution cannot express)."""
    x = torch.randn(5, 16, 130, 130, dtype=torch.bfloat16)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    w = torch.randn(16, 16 // groups, 4, 4, dtype=torch.bfloat16)
    b = torch.randn(16, dtype=torch.bfloat16)
    kwargs = dict(stride=2, padding=((1, 2), (1, 2)), groups=groups)
    expected = expected_conv_transpose(x, w, b, **kwargs)
    poison(expected.shape, torch.bfloat16)
    assert_matches(fastpad.conv_transpose2d(x, w, b, **kwargs), expected, torch.bfloat16)


# NCHW GEMM + col2im at AVX-512 adds whole x rows onto y by vectors of y positions, every kernel column at once
# (cpu/col2im_vectors.h; col2im_vectors_take: x rows of at most 64 positions, and stride-2 rows of any length), at
# AVX2 one kernel column at a time (RowScatter). Input gradients of convs in the three folding modes (the terms past
# a y row's ends folded back in): 7-wide rows in one masked vector folded along every dim (a 3-d k5), rows of 19 onto
# 38 (the last of 3 vectors masked) at stride 2 with groups, stride 3 with dilation 2, a stride-2 row of 750 onto 1500,
# and stride-1 rows of 64 (the kernel's) and 65 (RowScatter's). Transposed convs: a 1x1 kernel at stride 3 (lanes no
# tap reaches keep the bias), crops and dilation at stride 2, stride-2 rows of 700 (whole rows in a column tile) and
# of 7001 (split between tiles of 512 KiB of columns: RowScatter's), and bfloat16.
COL2IM_VECTOR_GRADIENTS = [ConvCase(False, (7, 7, 7), 14, 188, 5, 1, "same", padding_mode="reflect", batch=1),
                           ConvCase(False, (38, 38), 80, 320, 7, 2, "same", padding_mode="reflect", groups=16),
                           ConvCase(False, (33, 47), 12, 40, 5, 3, ((2, 2), (4, 1)), dilation=2,
                                    padding_mode="circular"),
                           ConvCase(False, (1500,), 12, 40, 4, 2, "same", padding_mode="replicate"),
                           ConvCase(False, (9, 64), 6, 40, 3, 1, "same", padding_mode="reflect"),
                           ConvCase(False, (9, 65), 6, 40, 3, 1, "same", padding_mode="replicate")]
COL2IM_VECTOR_TRANSPOSES = [ConvCase(True, (10, 20), 24, 12, 1, 3, "valid"),
                            ConvCase(True, (6, 9), 24, 12, 5, 2, ((3, 1), (0, 2)), dilation=2, batch=3),
                            ConvCase(True, (20, 700), 20, 3, 3, 2, ((1, 0), (1, 0)), batch=1),
                            ConvCase(True, (1, 7001), 20, 3, 3, 2, ((1, 0), (1, 0)), batch=1),
                            ConvCase(True, (5, 12), 24, 12, 4, 2, ((1, 1), (1, 1)), dtype="bfloat16")]


@pytest.mark.parametrize("case", COL2IM_VECTOR_GRADIENTS + COL2IM_VECTOR_TRANSPOSES, ids=lambda case: case.describe())
def test_nchw_col2im_adds_whole_rows_by_vectors(case):
    """Against the float64 reference at AVX2 and AVX-512 (where this CPU runs them), outputs poisoned first, each
    asserting the GEMM + col2im; the input gradients also with a bias."""
    for isa in [isa for isa in ("avx2", "avx512") if ISA_ORDER.index(isa) <= ISA_ORDER.index(machine_isa())]:
        if case.transposed:
            run_blocked_case(case, isa, expected_path=f"cpu_gemm_col2im_{isa}")
        else:
            check_folded_input_gradient(case, isa, expected_path=f"cpu_gemm_col2im_{isa}")


# (size, x channels, y channels, kernel, stride, groups, layout, dtype, batch): images of few x positions, where the
# CPU's GEMM + col2im runs one GEMM over several whole images (up to an even share of the images per thread), 1-3
# dims. 15 and 16 images of 36 and 40 positions are runs evened out between the threads (at most 7 and 6 images per
# run: 4 runs of 4, not 7 + 7 + 2 or 6 + 6 + 4). The NCHW float32 cases keep the NCHW GEMM: 12 y channels x 5 taps
# (under kernel_paths.h's cpu_gemm_col2im_rows's 64) and 576 positions.
FEW_POSITIONS = [((4,), 24, 12, 5, 3, 1, "contiguous", torch.float32, 7),
                 ((3, 3), 16, 12, 2, 2, 4, "channels_last", torch.float32, 7),
                 ((3, 2), 12, 10, 3, 2, 2, "contiguous", torch.float64, 7),
                 ((2, 3, 2), 8, 6, 3, 2, 1, "channels_last", torch.float64, 7),
                 ((5,), 16, 8, 4, 2, 2, "contiguous", torch.bfloat16, 7),
                 ((6, 6), 23, 28, 4, 2, 1, "contiguous", torch.float32, 16),
                 ((40,), 12, 10, 3, 2, 1, "contiguous", torch.float64, 15),
                 ((6, 6), 10, 12, 3, 2, 2, "channels_last", torch.float32, 15)]


@pytest.mark.parametrize("isa", ["baseline", None])
@pytest.mark.parametrize("size, c_x, c_y, kernel, stride, groups, layout, dtype, batch", FEW_POSITIONS)
def test_images_of_few_positions_share_a_gemm(size, c_x, c_y, kernel, stride, groups, layout, dtype, batch, isa):
    """7, 15 or 16 images (tiles of several whole images, the last one short where the batch is 7 or 15) through
    the GEMM + col2im, against the reference, the output poisoned first; crops (1, 0) along every dim, which torch's
    own transposed conv cannot express. The GEMM runs on torch's GEMM (isa capped at baseline) and on this CPU's
    reduction tiles (float accumulation: float32 and bfloat16)."""
    x, w, b = conv_inputs(size, c_x, c_y, kernel, groups, batch, True, transposed=True, dtype=dtype)
    if layout == "channels_last":
        x = x.contiguous(memory_format=CHANNELS_LAST[x.dim()])
    padding = tuple((1, 0) for _ in size)
    nd = len(size)
    out_size = [(i - 1) * stride + kernel - 1 for i in size]
    with cpu_isa_limit(isa):
        path = torch.ops.fastpad._conv_transpose_path(x, w, b, [stride] * nd, [1] * nd, out_size, [1] * nd, groups,
                                                      "zeros", "cpu")
        assert path == reduction_tiles_kernel("cpu_gemm_col2im", dtype)
        y = check_conv_transpose(x, w, b, stride=stride, padding=padding, groups=groups)
    assert list(y.shape[2:]) == out_size


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("length", [8, 32, 110, 7001])
def test_gemm_col2im_on_the_reduction_tiles(length, layout):
    """conv_transpose's GEMM + col2im with its GEMM on the reduction tiles (cpu_gemm_col2im_avx2/_avx512, at AVX2 and
    at this CPU's own ISA), float32, one image one row high: NCHW reads whole multiples of 16 x columns in place and
    copies the rest, zero-padded (8 columns: all copied; 32: none; 110: both; 7001: both, in tiles of 512 KiB of
    columns); channels-last pads the weight's rows. 3 y channels (the NCHW product's 3 rows: its columns are split
    between the threads), a crop (1, 0) torch cannot express. Against the float64 reference, output poisoned."""
    case = ConvCase(True, (1, length), 20, 3, 3, 2, ((1, 0), (1, 0)), batch=1, layout=layout)
    x, w, b = case.random_inputs()
    crop_lo, out_size = case.crops()
    for isa in tiles_isas():
        with cpu_isa_limit(isa):
            path = torch.ops.fastpad._conv_transpose_path(x, w, b, [2, 2], crop_lo, out_size, [1, 1], 1, "zeros",
                                                          "cpu")
            assert path == reduction_tiles_kernel("cpu_gemm_col2im", torch.float32), (isa, path)
            y = check_conv_transpose(x, w, b, stride=2, padding=((1, 0), (1, 0)))
        assert list(y.shape[2:]) == list(out_size)
        assert_memory_format_kept(x, y)


@pytest.mark.parametrize("channels", [16, 40, 600])
def test_nchw_depthwise_stride_1_channel_blocks(channels):
    """NCHW depthwise transposed convs at stride 1 in zeros mode run as the one conv they are (the taps flipped) on
    conv's channel blocks (kernel_paths.h's cpu_depthwise_channel_blocks_transpose), where conv's bounds take that
    conv: y rows of at most 8 at any ISA (7 x 6), of up to 48 on AVX-512's tiles (14 x 14, B0's k5 s1 layer's input
    gradient; a 1-d row of 33; 3-d with dilation 2; a crop past the kernel's extent, whose conv has a negative pad),
    float32 and bfloat16 there, float64 never (the NCHW scatter). The wider rows at AVX2 go to the channel blocks'
    phases (cpu_depthwise_channel_block_phases; float64: the scatter).
    Values against the float64 reference, and the input gradient of the conv through autograd."""
    cases = [((14, 14), 5, 1, "same", True), ((7, 6), 3, 1, "same", False), ((33,), 4, 1, ((1, 2),), True),
             ((5, 6, 13), 3, 2, "valid", True), ((14, 14), 3, 1, ((3, 4), (4, 3)), True)]
    for (size, kernel, dilation, padding, wide), isa in itertools.product(cases, tiles_isas()):
        nd = len(size)
        x, w, b = conv_inputs(size, channels, channels, kernel, channels, batch=2, transposed=True)
        crop_lo, out_size = resolve_crops(padding, size, as_tuple(kernel, nd), (1,) * nd, (dilation,) * nd, 0)
        for dtype in (torch.float64, torch.float32, torch.bfloat16):
            xd, wd, bd = x.to(dtype), w.to(dtype), b.to(dtype)
            avx512 = isa.startswith("avx512") and dtype != torch.float64
            # Past conv's channel blocks (rows of more than 8 on AVX2's tiles): the channel blocks' phases.
            expected_path = ("cpu_depthwise_channel_blocks_avx512" if avx512
                             else "cpu_depthwise_channel_blocks" if not wide
                             else "cpu_depthwise" if dtype == torch.float64 else "cpu_depthwise_channel_block_phases")
            with cpu_isa_limit(isa):
                path = torch.ops.fastpad._conv_transpose_path(xd, wd, bd, [1] * nd, crop_lo, out_size, [dilation] * nd,
                                                              channels, "zeros", "cpu")
                assert path == expected_path, (size, isa, dtype, path)
                check_conv_transpose(xd, wd, bd, padding=padding, dilation=dilation, groups=channels)
    x, w, _ = conv_inputs((14, 14), channels, channels, 5, channels, batch=2, dtype=torch.float32)
    for isa in tiles_isas():
        expected_path = ("cpu_depthwise_channel_blocks_avx512" if isa.startswith("avx512")
                         else "cpu_depthwise_channel_block_phases")
        with cpu_isa_limit(isa):
            check_input_gradient(x, w, 1, ((2, 2), (2, 2)), "zeros", channels, torch.contiguous_format, expected_path,
                                 isa)


# (x size, channels, kernel, stride, dilation, padding, blocks) of NCHW depthwise transposed convs in zeros mode: on
# the channel blocks as their stride phases' convs where every phase takes a tap, the kernel two taps per phase or
# more, x rows at most 128 and the channels fill their vectors (kernel_paths.h's cpu_depthwise_channel_block_phases):
# B0's k3 s2 and k5 s2 input gradients' shapes, 40 channels (AVX-512: a block ending at C), k5 at stride 3, a 1-d
# row, 3-d, strides (1, 2), stride 1 on rows of 60 (past the stride-1 channel blocks' 48); and the scatter for a 2x2
# kernel at stride 2 (one tap per y position), a k4 s2 d2 kernel (every tap in one phase), x rows of 200, 7 channels.
CHANNEL_BLOCK_PHASES = [((14, 14), 96, 3, 2, 1, "same", True), ((7, 7), 48, 5, 2, 1, "same", True),
                        ((9, 11), 40, 5, 2, 1, "same", True), ((7, 9), 24, 5, 3, 1, "valid", True),
                        ((30,), 32, 4, 2, 1, "same", True), ((5, 6, 7), 24, 3, 2, 1, "same", True),
                        ((12, 10), 48, 3, (1, 2), 1, "same", True), ((60, 60), 16, 3, 1, 1, "same", True),
                        ((20, 20), 32, 2, 2, 1, "valid", False), ((20, 20), 32, 4, 2, 2, "same", False),
                        ((200,), 32, 4, 2, 1, "same", False), ((12, 12), 7, 3, 2, 1, "same", False)]


@pytest.mark.parametrize("size, channels, kernel, stride, dilation, padding, blocks", CHANNEL_BLOCK_PHASES)
def test_nchw_depthwise_channel_block_phases(size, channels, kernel, stride, dilation, padding, blocks):
    """NCHW depthwise transposed convs in zeros mode on the channel blocks as their stride phases' convs
    (cpu_depthwise_channel_block_phases; _avx512 on AVX-512 from 16 channels), at AVX2 and this CPU's ISA, float32,
    bfloat16 and float16 (float64 keeps the scatter, cpu_depthwise), against the float64 reference, output poisoned;
    the cases outside the bounds keep the scatter. Another padding mode with pads to fold (an input gradient's) keeps
    the scatter too."""
    nd = len(size)
    stride_t, kernel_t = as_tuple(stride, nd), as_tuple(kernel, nd)
    x, w, b = conv_inputs(size, channels, channels, kernel, channels, batch=2, transposed=True)
    crop_lo, out_size = resolve_crops(padding, size, kernel_t, stride_t, (dilation,) * nd, 0)
    for isa, dtype in itertools.product(tiles_isas(), (torch.float64, torch.float32, torch.bfloat16, torch.float16)):
        xd, wd, bd = x.to(dtype), w.to(dtype), b.to(dtype)
        on_blocks = blocks and dtype != torch.float64
        wide = on_blocks and isa.startswith("avx512") and channels >= 16
        expected_path = ("cpu_depthwise_channel_block_phases" + ("_avx512" if wide else "")) if on_blocks \
            else "cpu_depthwise"
        with cpu_isa_limit(isa):
            args = (xd, wd, bd, list(stride_t), crop_lo, out_size, [dilation] * nd, channels)
            assert torch.ops.fastpad._conv_transpose_path(*args, "zeros", "cpu") == expected_path, (size, isa, dtype)
            if padding != "valid":  # (a mode with no pads to fold is zeros mode)
                assert torch.ops.fastpad._conv_transpose_path(*args, "reflect", "cpu") == "cpu_depthwise"
            check_conv_transpose(xd, wd, bd, stride=stride, padding=padding, dilation=dilation, groups=channels)


def test_nchw_depthwise_input_gradient_on_channel_block_phases():
    """The input gradient of a strided NCHW depthwise conv (B0's k5 s2 672-channel layer's shape at 14 x 14), through
    autograd, runs on the channel blocks' phases and matches float64 autograd."""
    x, w, _ = conv_inputs((14, 14), 672, 672, 5, 672, batch=2, dtype=torch.float32)
    for isa in tiles_isas():
        expected_path = "cpu_depthwise_channel_block_phases" + ("_avx512" if isa.startswith("avx512") else "")
        with cpu_isa_limit(isa):
            check_input_gradient(x, w, 2, ((1, 2), (1, 2)), "zeros", 672, torch.contiguous_format, expected_path, isa)


# (x size, x channels, y channels, kernel, stride, pads, mode) of channels-last problems on the GEMM + col2im, whose
# col2im threads each own a run of the y positions a tile of x writes: a 7x7 kernel to 30 y channels (tiles of 89 x
# positions, ending mid-row), one long row to 3 y channels (split between the threads within the row; fewer y
# channels than a vector: adds of a fixed length), and the
# input gradients of reflect, replicate and circular convs, whose folds land taps on any row (one image, split
# between the threads; two images, one per thread).
CHANNELS_LAST_COL2IM = [((27, 27), 99, 30, 7, 1, ((0, 0), (0, 0)), "zeros"),
                        ((1, 3000), 20, 3, (1, 4), 2, ((0, 0), (1, 2)), "zeros"),
                        ((27, 27), 24, 40, 5, 2, ((2, 1), (1, 2)), "reflect"),
                        ((9, 21), 4, 48, (4, 3), 1, ((2, 1), (1, 1)), "replicate"),
                        ((9, 11, 10), 8, 24, 3, 2, ((1, 1), (0, 1), (1, 0)), "circular")]


def check_input_gradient(x, w, stride, pads, mode, groups, layout, expected_path, isa):
    """The input gradient of fastpad's conv of x (a transposed conv in `mode`, grad_y in `layout`): its path, asserted
    to be expected_path, and its values against float64 autograd, outputs poisoned first. Returns it."""
    nd = x.dim() - 2
    gy = torch.randn(expected_conv(x, w, None, stride=stride, padding=pads, padding_mode=mode,
                                   groups=groups).shape).contiguous(memory_format=layout)
    path = torch.ops.fastpad._conv_transpose_path(gy, w, None, [stride] * nd, [lo for lo, _ in pads],
                                                  list(x.shape[2:]), [1] * nd, groups, mode, "cpu")
    assert path == expected_path, (isa, path)
    xr = x.detach().requires_grad_()
    y = getattr(fastpad, f"conv{nd}d")(xr, w, stride=stride, padding=pads, padding_mode=mode, groups=groups)
    x64 = x.double().requires_grad_()
    (expected,) = torch.autograd.grad(expected_conv(x64, w.double(), None, stride=stride, padding=pads,
                                                    padding_mode=mode, groups=groups), x64, gy.double())
    poison(expected.shape, torch.float32)
    (grad,) = torch.autograd.grad(y, xr, gy)
    assert_matches(grad, expected, torch.float32, what="input gradient")
    return grad


@pytest.mark.parametrize("weight_format", ["contiguous", "channels_last"])
@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("size, c_x, c_y, kernel, stride, pads, mode", CHANNELS_LAST_COL2IM)
def test_channels_last_col2im_threads_own_y_positions(size, c_x, c_y, kernel, stride, pads, mode, batch,
                                                      weight_format):
    """Channels-last GEMM + col2im (cpu_gemm_col2im, on torch's GEMM at baseline and the reduction tiles at AVX2 and
    this CPU's ISA), float32, 2 and 3 dims: zeros transposed convs against the float64 reference (crops torch's own
    transposed conv cannot express), and the other modes' input gradients against float64 autograd; outputs
    poisoned first. The weight in either memory format: the GEMM's tap-major rows are packed from an NCHW weight,
    and from a channels-last one read in place where its rows are whole vectors (every case at baseline, the
    replicate case's 48 x 12 on the tiles) or copied a tap's channels at a time."""
    nd = len(size)
    as_weight = (lambda w: w.contiguous(memory_format=CHANNELS_LAST[w.dim()])) if weight_format == "channels_last" \
        else (lambda w: w)
    kernels = as_tuple(kernel, nd)
    for isa in ["baseline"] + tiles_isas():
        with cpu_isa_limit(isa):
            expected_path = reduction_tiles_kernel("cpu_gemm_col2im", torch.float32)
            if mode == "zeros":
                x, w, b = conv_inputs(size, c_x, c_y, kernel, 1, batch, transposed=True, dtype=torch.float32)
                x, w = x.contiguous(memory_format=CHANNELS_LAST[x.dim()]), as_weight(w)
                crop_lo, out_size = resolve_crops(pads, size, kernels, (stride,) * nd, (1,) * nd, 0)
                path = torch.ops.fastpad._conv_transpose_path(x, w, b, [stride] * nd, crop_lo, out_size, [1] * nd, 1,
                                                              "zeros", "cpu")
                assert path == expected_path, (isa, path)
                y = check_conv_transpose(x, w, b, stride=stride, padding=pads)
                assert_memory_format_kept(x, y)
                continue
            x, w, _ = conv_inputs(size, c_y, c_x, kernel, 1, batch, bias=False, dtype=torch.float32)
            x, w = x.contiguous(memory_format=CHANNELS_LAST[x.dim()]), as_weight(w)
            check_input_gradient(x, w, stride, pads, mode, 1, CHANNELS_LAST[x.dim()], expected_path, isa)


# (x size, x channels, y channels, kernel, stride, pads, groups, batch, mode, takes the channels-last copies) of NCHW
# problems on the GEMM + col2im around kernel_paths.h's cpu_gemm_col2im_nhwc bounds: 16 y channels per group and
# 1024 y channels x taps, 64 x positions over the batch (fewer: NCHW_COL2IM_ROWS below), more than one x row; zeros
# transposed convs and the input gradients of reflect and circular convs (folds in the channels-last col2im), 2-3
# dims, grouped.
NCHW_COL2IM = [((9, 9), 100, 48, 5, 1, ((2, 2), (2, 2)), 1, 1, "replicate", True),  # 48 x 25: 1200 per row
               ((9, 9), 100, 40, 5, 1, ((2, 2), (2, 2)), 1, 1, "replicate", False),  # 40 x 25 = 1000
               ((8, 8), 24, 48, 5, 2, ((2, 1), (1, 2)), 1, 2, "zeros", True),
               ((8, 8), 24, 15, 9, 2, ((4, 4), (4, 4)), 1, 2, "zeros", False),  # 15 y channels
               ((8, 8), 24, 48, 5, 2, ((2, 1), (1, 2)), 1, 1, "zeros", True),  # 64 x positions
               ((2, 40), 24, 48, 5, 2, ((2, 2), (2, 1)), 1, 2, "zeros", True),
               ((1, 200), 24, 48, (1, 25), 2, ((0, 0), (12, 12)), 1, 2, "zeros", False),  # one x row
               ((12, 10), 32, 64, 6, 2, ((2, 3), (2, 3)), 2, 3, "reflect", True),  # 2 groups of 32 x 36
               ((6, 5, 6), 16, 40, 3, 2, ((1, 1), (1, 0), (0, 1)), 1, 4, "circular", True)]  # 40 x 27


@pytest.mark.parametrize("size, c_x, c_y, kernel, stride, pads, groups, batch, mode, nhwc", NCHW_COL2IM)
def test_nchw_col2im_on_channels_last_copies(size, c_x, c_y, kernel, stride, pads, groups, batch, mode, nhwc):
    """NCHW transposed convs whose GEMM + col2im runs as the channels-last one on channels-last copies of x and y
    (cpu_gemm_col2im_nhwc_avx2/_avx512) and, past each bound, the NCHW one: the path at AVX2 and this CPU's ISA,
    float32, against the float64 reference (zeros; crops torch's own transposed conv cannot express) or float64
    autograd (the other modes' input gradients); outputs poisoned first, and the output NCHW."""
    for isa in tiles_isas():
        with cpu_isa_limit(isa):
            plain = reduction_tiles_kernel("cpu_gemm_col2im", torch.float32)
            expected_path = plain.replace("col2im_", "col2im_nhwc_") if nhwc else plain
            check_nchw_col2im(size, c_x, c_y, kernel, stride, pads, groups, batch, mode, expected_path, isa)


def check_nchw_col2im(size, c_x, c_y, kernel, stride, pads, groups, batch, mode, expected_path, isa,
                      bfloat16_path=None):
    """An NCHW float32 transposed conv (zeros: against the float64 reference) or the input gradient of a conv in
    `mode` (against float64 autograd), its path asserted to be expected_path (and bfloat16's to be bfloat16_path
    where given), outputs poisoned first, the output NCHW."""
    nd = len(size)
    if mode == "zeros":
        x, w, b = conv_inputs(size, c_x, c_y, kernel, groups, batch, transposed=True, dtype=torch.float32)
        crop_lo, out_size = resolve_crops(pads, size, as_tuple(kernel, nd), (stride,) * nd, (1,) * nd, 0)
        args = ([stride] * nd, crop_lo, out_size, [1] * nd, groups, "zeros", "cpu")
        assert torch.ops.fastpad._conv_transpose_path(x, w, b, *args) == expected_path, isa
        if bfloat16_path:
            assert torch.ops.fastpad._conv_transpose_path(x.bfloat16(), w.bfloat16(), b.bfloat16(),
                                                          *args) == bfloat16_path, isa
        assert check_conv_transpose(x, w, b, stride=stride, padding=pads, groups=groups).is_contiguous()
        return
    x, w, _ = conv_inputs(size, c_y, c_x, kernel, groups, batch, bias=False, dtype=torch.float32)
    grad = check_input_gradient(x, w, stride, pads, mode, groups, torch.contiguous_format, expected_path, isa)
    assert grad.is_contiguous()


# (x size, x channels, y channels, kernel, stride, pads, groups, batch, mode, the kernels at AVX2 and AVX-512) of NCHW
# problems on the GEMM + col2im around kernel_paths.h's cpu_gemm_col2im_rows bounds: under 64 x positions over the
# batch (AVX2: 24), 64 or more y channels x taps per group, and 256 from 32 positions; zeros transposed convs (x size:
# the transposed conv's input) and the input gradients of the other modes' convs (size: the conv's input, its output
# x), 1-3 dims, grouped, rows spanning images, runs of y channels of unequal length (83 in 8 runs on 2 threads) and
# runs set by the column buffer (400 x 125 taps x 21 positions).
NCHW_COL2IM_ROWS = [((4, 4), 96, 83, 5, 2, ((2, 1), (1, 2)), 1, 2, "zeros", ("", "rows")),  # 32 positions, 2075 a row
                    ((4, 4), 96, 83, 5, 2, ((2, 1), (1, 2)), 1, 4, "zeros", ("nhwc", "nhwc")),  # 64 positions
                    ((7, 7), 24, 48, 5, 2, ((2, 1), (1, 2)), 1, 1, "zeros", ("", "rows")),  # 49
                    ((7,), 30, 13, 5, 2, ((2, 2),), 1, 3, "zeros", ("rows", "rows")),  # 21 positions, 65 a row
                    ((7,), 30, 12, 5, 2, ((2, 2),), 1, 3, "zeros", ("", "")),  # 60 a row
                    ((8,), 30, 50, 5, 2, ((2, 2),), 1, 4, "zeros", ("", "")),  # 32 positions, 250 a row
                    ((8,), 30, 52, 5, 2, ((2, 2),), 1, 4, "zeros", ("", "rows")),  # 260
                    ((1, 3, 7), 16, 400, 5, 2, ((2, 1), (1, 2), (2, 2)), 1, 1, "zeros", ("rows", "rows")),
                    ((13, 13), 60, 45, 7, 3, ((3, 3), (3, 3)), 1, 1, "reflect", ("", "rows")),  # 5 x 5 x positions
                    ((11, 11), 60, 45, 7, 3, ((3, 3), (3, 3)), 1, 1, "reflect", ("rows", "rows")),  # 4 x 4
                    ((6, 6), 32, 24, 3, 2, ((1, 1), (1, 1)), 2, 2, "circular", ("rows", "rows")),  # groups of 12 x 9
                    ((5, 5, 5), 16, 20, 3, 2, ((1, 1), (1, 1), (1, 1)), 1, 1, "replicate", ("", "rows")),  # 27
                    ((4, 4, 4), 16, 20, 3, 2, ((1, 1), (1, 1), (1, 1)), 1, 1, "replicate", ("rows", "rows"))]  # 8


@pytest.mark.parametrize("size, c_x, c_y, kernel, stride, pads, groups, batch, mode, kernels", NCHW_COL2IM_ROWS)
def test_nchw_col2im_with_a_row_per_x_position(size, c_x, c_y, kernel, stride, pads, groups, batch, mode, kernels):
    """NCHW transposed convs over few x positions whose GEMM + col2im puts a row of cols per x position and its vectors
    along y channels x taps (cpu_gemm_col2im_rows_avx2/_avx512) and, past each bound, the kernel there (the NCHW one,
    or the channels-last one on copies): the path at AVX2 and this CPU's ISA, float32 against the float64 reference
    (zeros) or float64 autograd (the other modes' input gradients), outputs poisoned first; bfloat16 keeps the NCHW
    GEMM."""
    for isa in tiles_isas():
        with cpu_isa_limit(isa):
            plain = reduction_tiles_kernel("cpu_gemm_col2im", torch.float32)
            kernel_name = kernels[isa != "avx2"]
            expected_path = plain.replace("col2im_", f"col2im_{kernel_name}_") if kernel_name else plain
            check_nchw_col2im(size, c_x, c_y, kernel, stride, pads, groups, batch, mode, expected_path, isa,
                              bfloat16_path=plain if kernel_name == "rows" else None)


# (x size, x channels, y channels, kernel, groups, stride, channels-last, mode, the kernels at AVX2 and AVX-512) of
# transposed convs around kernel_paths.h's cpu_tap_tiles_transpose: the convs their stride phases are on
# conv's tap tiles where they have few y channels per group (with a stride: channels-last on AVX-512); zeros, and the
# input gradients of reflect and circular convs (the full transposed conv on the tiles, then folded).
TAP_TILES_TRANSPOSES = [
    ((26, 26), 52, 8, 3, 4, 1, True, "zeros", ("tap_tiles", "tap_tiles")),  # 2 y channels per group: half a vector
    ((5, 6, 30), 16, 4, 3, 4, 1, True, "zeros", ("tap_tiles", "tap_tiles")),  # 3-d
    ((40,), 15, 12, 5, 3, 1, False, "zeros", ("tap_tiles", "tap_tiles")),  # NCHW, 4 y channels per group
    ((60,), 240, 22, 5, 1, 1, False, "zeros", ("blocked", "tap_tiles")),  # 22 y channels: 69% of two vectors' lanes
    ((60,), 240, 23, 5, 1, 1, False, "zeros", ("blocked", "blocked")),  # 23: 72%
    ((60,), 5, 141, 5, 1, 1, False, "zeros", ("blocked", "blocked")),  # an NCHW stem
    ((64, 70), 6, 20, 4, 1, 2, False, "zeros", ("blocked", "blocked")),  # an NCHW stride: the blocked phases
    ((30, 30), 32, 16, 4, 4, 2, True, "zeros", ("blocked", "tap_tiles")),  # channels-last strided: AVX-512 only
    ((29, 32), 48, 64, 6, 8, 2, True, "zeros", ("blocked", "tap_tiles")),  # 8 y channels per group
    ((28, 30), 20, 16, 3, 4, 1, True, "reflect", ("tap_tiles_folded", "tap_tiles_folded")),  # 4 y channels per group
    ((2000,), 15, 12, 5, 3, 1, False, "circular", ("tap_tiles_folded", "tap_tiles_folded")),
    ((60, 62), 16, 8, 4, 2, 2, True, "reflect", ("blocked_folded", "tap_tiles_folded")),  # the full conv's phases
]


@pytest.mark.parametrize("size, c_x, c_y, kernel, groups, stride, channels_last, mode, kernels",
                         TAP_TILES_TRANSPOSES)
def test_transposes_on_tap_tiles(size, c_x, c_y, kernel, groups, stride, channels_last, mode, kernels):
    """Transposed convs with few y channels per group run the convs their stride phases are on conv's tap tiles
    (cpu_tap_tiles_avx2/_avx512; cpu_tap_tiles_folded_* in another mode; with a stride each phase writes a strided
    view of a channels-last y), and past each bound (lanes, stems, an NCHW stride, a stride on AVX2, bfloat16) the
    blocked kernel (bfloat16 on AVX-512 with at most 4 y channels per group: the phases over expanded x rows): the
    path at AVX2 and this CPU's ISA, float32 against the float64 reference (zeros) or float64
    autograd (the other modes' input gradients), outputs poisoned first, the layout kept."""
    require_isa("avx2")
    nd = len(size)
    pads = tuple(((kernel - 1) // 2, kernel // 2) for _ in size)
    layout = CHANNELS_LAST[nd + 2] if channels_last else torch.contiguous_format
    for isa in tiles_isas():
        wide = "avx2" if isa == "avx2" else "avx512"
        expected_path = f"cpu_{kernels[wide == 'avx512']}_{wide}"
        with cpu_isa_limit(isa):
            if mode == "zeros":
                x, w, b = conv_inputs(size, c_x, c_y, kernel, groups, 2, transposed=True, dtype=torch.float32)
                x = x.to(memory_format=layout)
                crop_lo, out_size = resolve_crops(pads, size, as_tuple(kernel, nd), (stride,) * nd, (1,) * nd, 0)
                args = ([stride] * nd, crop_lo, out_size, [1] * nd, groups, "zeros", "cpu")
                assert torch.ops.fastpad._conv_transpose_path(x, w, b, *args) == expected_path, isa
                # bfloat16 takes the blocked kernel, or on AVX-512 with at most 4 of 16 or more y channels per group
                # the phases over expanded x rows (kernel_paths.h's cpu_grouped_phases_over_blocked)
                grouped_phases = channels_last and wide == "avx512" and c_y >= 16 and c_y // groups <= 4
                assert torch.ops.fastpad._conv_transpose_path(x.bfloat16(), w.bfloat16(), b.bfloat16(), *args) == (
                    "cpu_depthwise_phases_avx512" if grouped_phases else f"cpu_blocked_{wide}"), isa
                y = check_conv_transpose(x, w, b, stride=stride, padding=pads, groups=groups)
                assert_memory_format_kept(x, y)
                continue
            x, w, _ = conv_inputs(size, c_y, c_x, kernel, groups, 2, bias=False, dtype=torch.float32)
            x = x.to(memory_format=layout)
            assert_memory_format_kept(x, check_input_gradient(x, w, stride, pads, mode, groups, layout, expected_path,
                                                              isa))


# (x size, x channels, y channels, kernel, stride, path on AVX-512) of NCHW strided transposed convs in zeros mode
# around kernel_paths.h's cpu_phase_planes_over_blocked: 2-d, each kernel dim a multiple of its stride with at most 2
# taps per phase (k2 s2 as UNet's decoder, k4 s2, k3 s3), 24 x channels or more, on the phase planes' tap GEMMs;
# past each bound the blocked kernel's phases: 16 x channels, k3 s2 (a kernel not a multiple of the stride), k6 s2
# (3 taps per phase), stride 1 along W, 1-d.
PHASE_PLANES_OVER_BLOCKED = [((24, 24), 32, 24, 2, 2, "phase_planes"),
                             ((24, 26), 24, 40, 4, 2, "phase_planes"),
                             ((20, 21), 48, 32, (3, 3), (3, 3), "phase_planes"),
                             ((32, 32), 16, 24, 4, 2, "blocked"),
                             ((24, 24), 32, 24, 3, 2, "blocked"),
                             ((24, 24), 32, 24, 6, 2, "blocked"),
                             ((24, 48), 32, 24, (2, 3), (2, 1), "blocked"),
                             ((600,), 32, 24, 4, 2, "blocked")]


@pytest.mark.parametrize("size, c_x, c_y, kernel, stride, kernel_path", PHASE_PLANES_OVER_BLOCKED)
def test_nchw_strided_transposes_with_few_taps_per_phase_on_the_phase_planes(size, c_x, c_y, kernel, stride,
                                                                            kernel_path):
    """On AVX-512, NCHW float32 transposed convs whose every phase has the same 1-2 taps per dim run on the phase
    planes' tap GEMMs over x as it is, where the blocked kernel gathers channel-contiguous planes and transposes its
    output back: the path at AVX-512 (crops that torch's transposed conv cannot express), against the float64
    reference, outputs poisoned first."""
    require_isa("avx512")
    nd = len(size)
    kernel, stride = as_tuple(kernel, nd), as_tuple(stride, nd)
    pads = tuple(((k - 1) // 2, k // 2) for k in kernel)
    x, w, b = conv_inputs(size, c_x, c_y, kernel, 1, 2, transposed=True, dtype=torch.float32)
    crop_lo, out_size = resolve_crops(pads, size, kernel, stride, (1,) * nd, 0)
    with cpu_isa_limit("avx512"):
        path = torch.ops.fastpad._conv_transpose_path(x, w, b, list(stride), crop_lo, out_size, [1] * nd, 1,
                                                      "zeros", "cpu")
        assert path == f"cpu_{kernel_path}_avx512", path
        check_conv_transpose(x, w, b, stride=stride, padding=pads)


@pytest.mark.parametrize("nd", NDIMS)
def test_batch_zero_and_no_bias(nd, device):
    y = run_case(nd, device, batch=0, stride=2, padding="same")
    assert y.shape[:2] == (0, 6)
    run_case(nd, device, bias=False, stride=2, padding="same_lower", kernel=5)


def test_non_contiguous(device):
    x = torch.randn(2, 4, 9, 6, dtype=torch.float64, device=device).transpose(2, 3)[:, :, :, ::2]
    w = torch.randn(6, 4, 3, 4, dtype=torch.float64, device=device).transpose(0, 1)[..., :3]  # [4, 6, 3, 3]
    assert not x.is_contiguous() and not w.is_contiguous()
    y = check_conv_transpose(x, w, None, stride=2, padding="same")
    assert_memory_format_kept(x, y)


# (x size, x channels, y channels, kernel, groups, stride, the ISA the path needs) of float32 transposed convs whose
# stride phases run as convs on the blocked kernel, each phase's weight written from the transposed conv's weight by
# conv_params.cpp's transpose_phase_weight: strided with 16 x channels or more (AVX-512; k6 s2, 3 taps per phase along
# each dim, which keeps the blocked kernel), strided with fewer x channels per group, grouped, 3-d, and at stride 1
# (each channel's taps one block, read backwards).
PHASE_WEIGHT_CASES = [
    ((24, 24), 32, 24, 6, 1, 2, "avx512"),
    ((400,), 16, 24, 6, 2, 3, "avx2"),
    ((6, 8, 10), 12, 20, (3, 4, 2), 1, (1, 2, 2), "avx2"),
    ((12, 14), 24, 40, (3, 5), 4, 1, "avx2"),
]


@pytest.mark.parametrize("size, c_x, c_y, kernel, groups, stride, isa", PHASE_WEIGHT_CASES)
@pytest.mark.parametrize("weight_layout", ["contiguous", "transposed channels, strided taps"])
def test_phase_weights_from_any_weight_layout(size, c_x, c_y, kernel, groups, stride, isa, weight_layout):
    """Each stride phase's weight, its taps flipped and its channels swapped, read from a contiguous weight and from
    one whose channels are transposed and whose taps are a stride apart: the blocked kernel's path asserted, float32
    against the float64 reference, the output poisoned first."""
    require_isa(isa)
    nd = len(size)
    x, w, b = conv_inputs(size, c_x, c_y, kernel, groups, 2, transposed=True, dtype=torch.float32)
    if weight_layout != "contiguous":
        # The same values, stored [C_y / groups, C_x, *k] with a gap after every tap.
        stored = torch.empty((w.shape[1], w.shape[0]) + tuple(2 * k for k in w.shape[2:]), dtype=w.dtype)
        w = stored.transpose(0, 1)[(Ellipsis,) + (slice(None, None, 2),) * nd].copy_(w)
        assert not w.is_contiguous()
    pads = tuple(((k - 1) // 2, k // 2) for k in as_tuple(kernel, nd))
    crop_lo, out_size = resolve_crops(pads, size, as_tuple(kernel, nd), as_tuple(stride, nd), (1,) * nd, 0)
    args = (list(as_tuple(stride, nd)), crop_lo, out_size, [1] * nd, groups, "zeros", "cpu")
    with cpu_isa_limit(isa):
        assert torch.ops.fastpad._conv_transpose_path(x, w, b, *args) == f"cpu_blocked_{isa}"
        check_conv_transpose(x, w, b, stride=stride, padding=pads, groups=groups)


@pytest.mark.parametrize(
    "crop_lo, out_size",
    [([0, 0], [9, 11]), ([2, 1], [5, 6]), ([0, 3], [14, 12]), ([4, 0], [3, 20])],
)
def test_op_direct(crop_lo, out_size, device):
    """The op with arbitrary crops, including out_size past the full (9 x 11) result."""
    x, w, b = conv_inputs((4, 5), c_in=4, c_out=6, groups=2, transposed=True, device=device)
    expected = reference_conv_transpose(x, w, b, [2, 2], crop_lo, out_size, [1, 1], 2)
    poison(expected.shape, x.dtype, x.device)
    y = torch.ops.fastpad.conv_transpose(x, w, b, [2, 2], crop_lo, out_size, [1, 1], 2)
    assert_matches(y, expected)


# --------------------------------------------------------------------------------------------
# 'same' transposed is TF conv2d_transpose SAME: out = i*s, lo = max(k_eff - s, 0) // 2.


def test_tf_conv1d_transpose_same_worked_example():
    """TF: conv1d_transpose(x=[1,2,3], ones(3), stride 2, SAME, output 6) = [1, 1, 3, 2, 5, 3]."""
    x = torch.tensor([[[1.0, 2.0, 3.0]]], dtype=torch.float64)
    w = torch.ones(1, 1, 3, dtype=torch.float64)
    y = fastpad.conv_transpose1d(x, w, stride=2, padding="same")
    assert y.flatten().tolist() == [1.0, 1.0, 3.0, 2.0, 5.0, 3.0]


@pytest.mark.parametrize("kernel, stride", [(5, 2), (5, 4), (4, 3), (3, 2), (6, 2), (4, 2), (7, 3)])
def test_same_vs_torch_padding_shift(kernel, stride):
    """torch's nearest equivalent, padding=ceil(T/2) with output_padding, is fastpad 'same' shifted by one
    pixel when T = k - s is odd, and equal when T is even."""
    x, w, b = conv_inputs((5, 6), c_in=3, c_out=2, kernel=kernel, transposed=True)
    slack = kernel - stride
    torch_pad = -(-slack // 2)
    full = [(i - 1) * stride + kernel for i in (5, 6)]
    extra = [i * stride - (f - 2 * torch_pad) for i, f in zip((5, 6), full)]
    if any(e < 0 or e >= stride for e in extra):
        pytest.skip(f"torch has no output_padding for T={slack}, s={stride}")
    ours = check_conv_transpose(x, w, b, stride=stride, padding="same")
    theirs = F.conv_transpose2d(x, w, b, stride, torch_pad, tuple(extra))
    assert ours.shape == theirs.shape == (2, 2, 5 * stride, 6 * stride)
    if slack % 2 == 0:
        torch.testing.assert_close(ours, theirs)
    else:
        # fastpad crops lo = T // 2, torch crops ceil(T/2): torch's picture starts one pixel later.
        torch.testing.assert_close(ours[:, :, 1:, 1:], theirs[:, :, :-1, :-1])
        assert not torch.allclose(ours, theirs)


@pytest.mark.slow
@pytest.mark.parametrize("nd", NDIMS)
def test_sweep_slow(nd, device):
    sizes = {1: (13,), 2: (6, 7), 3: (4, 5, 3)}
    for stride in (1, 2, 3, 4):
        for dilation in (1, 2, 3):
            for padding in ("same", "same_lower", "valid", 1):
                for kernel in (1, 2, 3):
                    for c_in, c_out, groups in ((3, 5, 1), (4, 6, 2), (6, 6, 6)):
                        output_padding = max(stride, dilation) - 1
                        kwargs = dict(stride=stride, dilation=dilation, padding=padding, output_padding=output_padding)
                        full = min((i - 1) * stride + effective_kernel(kernel, dilation) for i in sizes[nd])
                        if padding == 1 and full + output_padding - 2 < 1:
                            continue
                        run_case(nd, device, size=sizes[nd], kernel=kernel, c_in=c_in, c_out=c_out,
                                 groups=groups, **kwargs)


@pytest.mark.parametrize("batch", [0, 2])
def test_crop_past_the_full_extent(batch, device):
    """A crop larger than the full transposed output: the window starts past its end, so the result is the bias
    alone (found by the random-configuration test; the reference itself used to raise here)."""
    x, w, b = conv_inputs((1, 1, 1), 1, 1, (1, 1, 2), batch=batch, transposed=True, dtype=torch.float64,
                          device=device)
    y = check_conv_transpose(x, w, b, stride=(1, 1, 3), padding=((0, 0), (0, 0), (3, 0)), output_padding=(0, 0, 2))
    torch.testing.assert_close(y, b.view(1, -1, 1, 1, 1).expand_as(y), rtol=0, atol=0)


def check_transposed_op_path(path, dtype, batch, kernel):
    """path's case at path.isa, inputs in dtype: its conv_transpose op call reaches `kernel`, and the output and
    gradients match the float64 reference, outputs poisoned first."""
    inputs = path.inputs(dtype, batch=batch)
    assert ("conv_transpose", kernel) in kernels_reached(path, inputs), path.isa
    for result, expected, name in zip(run_forward_backward(path, inputs, poison_outputs=True),
                                      run_reference(path, inputs), RESULT_NAMES):
        assert_matches(result, expected, what=name)


# (case, dtype, the conv_transpose op's path on AVX-512, on AVX2) of channels-last grouped transposed ops with at most 4
# y channels per group and 16 or more in all, which on AVX-512 run as their stride phases' grouped convs over expanded
# x rows in place of the blocked kernel (kernel_paths.h's cpu_grouped_phases_over_blocked): a 3-d conv's input
# gradient in reflect (3 y and 4 x channels per group: the folded phases), a 3-d transposed conv (3 y and 12 x
# channels per group) in float32 and bfloat16, a strided 2-d one in bfloat16 (float32 takes the tap tiles first);
# not a 1x1 kernel (each expanded value read once), nor 8 y channels in all, nor AVX2 (8-lane blocked vectors).
GROUPED_PHASES_OVER_BLOCKED = [
    (ConvCase(False, (7, 8, 9), 48, 64, 3, 1, "same", groups=16, padding_mode="reflect", layout="channels_last"),
     torch.float32, "cpu_depthwise_phases_folded_avx512", "cpu_blocked_folded_avx2"),
    (ConvCase(True, (6, 7, 8), 96, 24, 2, 1, "valid", groups=8, layout="channels_last"), torch.float32,
     "cpu_depthwise_phases_avx512", "cpu_blocked_avx2"),
    (ConvCase(True, (6, 7, 8), 96, 24, 2, 1, "valid", groups=8, layout="channels_last"), torch.bfloat16,
     "cpu_depthwise_phases_avx512", "cpu_blocked_avx2"),
    (ConvCase(True, (9, 26), 64, 48, 4, 2, "same", groups=16, layout="channels_last"), torch.bfloat16,
     "cpu_depthwise_phases_avx512", "cpu_blocked_avx2"),
    (ConvCase(False, (10, 11), 32, 512, 1, 1, "same", groups=16, layout="channels_last"), torch.bfloat16,
     "cpu_blocked_avx512", "cpu_blocked_avx2"),
    (ConvCase(True, (9, 10), 52, 8, 3, 1, "same", groups=4, layout="channels_last"), torch.float32,
     "cpu_blocked_avx512", "cpu_blocked_avx2")]


@pytest.mark.parametrize("case, dtype, avx512_path, avx2_path", GROUPED_PHASES_OVER_BLOCKED,
                         ids=lambda value: value.describe() if isinstance(value, ConvCase) else str(value))
def test_channels_last_grouped_phases_over_blocked(case, dtype, avx512_path, avx2_path):
    """Each case's conv_transpose op reaches its path at AVX-512 and at AVX2, and the output and gradients match the
    float64 reference, outputs poisoned first."""
    for isa, kernel in (("avx512", avx512_path), ("avx2", avx2_path)):
        if ISA_ORDER.index(isa) > ISA_ORDER.index(machine_isa()):
            continue
        check_transposed_op_path(CodePath(case, (), isa), dtype, 2, kernel)


# (transposed, size, c_in, c_out, kernel, stride, groups, mode, batch, dtype): channels-last problems whose transposed
# op (a conv's input gradient, or a transposed conv's forward) has 1-6 x and 1-6 y channels per group, at most 6
# weights per tap of a group, and runs depthwise.cpp's scatter over x pixels expanded per group, where the stride
# phases do not take it (rows under 24 per column phase, under 8 y channels, or bfloat16 in another mode than zeros):
# 2 x 2 reflect at stride 2, 2 y and 3 x channels per group (6 y channels) in replicate, 3-d circular in bfloat16, 6 y
# channels per group over 36 (two channel blocks) at stride 3, and a transposed conv's forward with 3 x and 2 y
# channels per group.
GROUPED_EXPANDED_TRANSPOSE = [(False, (20, 21), 16, 16, 3, 2, 8, "reflect", 2, torch.float32),
                              (False, (9, 11), 6, 9, 4, 1, 3, "replicate", 3, torch.float64),
                              (False, (6, 7, 8), 9, 6, 3, 2, 3, "circular", 2, torch.bfloat16),
                              (False, (13, 17), 36, 6, 5, 3, 6, "zeros", 2, torch.float32),
                              (True, (7, 9), 12, 8, 3, 2, 4, "zeros", 2, torch.float64)]


@pytest.mark.parametrize("transposed, size, c_in, c_out, kernel, stride, groups, mode, batch, dtype",
                         GROUPED_EXPANDED_TRANSPOSE)
def test_channels_last_grouped_expanded_transpose(transposed, size, c_in, c_out, kernel, stride, groups, mode, batch,
                                                  dtype):
    """The output and gradients against the float64 reference, outputs poisoned; the transposed op takes
    cpu_grouped_expanded."""
    case = ConvCase(transposed, size, c_in, c_out, kernel, stride, "same", groups=groups, padding_mode=mode,
                    layout="channels_last")
    check_transposed_op_path(CodePath(case, (), None), dtype, batch, "cpu_grouped_expanded")


def test_channels_last_grouped_expanded_transpose_bounds():
    """kernel_paths.h's cpu_grouped_expanded_transpose: at most 6 weights per tap of a group (2 x 4 keep the GEMM +
    col2im), channels-last with several groups only, and not where the zeros-mode blocked conv takes the problem (a
    stride-1 k3 with 2 x and 2 y channels per group: the blocked kernel in zeros). Within them the stride phases take
    it where they can (cpu_depthwise_phases: here at stride 1, and at stride 2 over x rows of 13, 26 y columns, under
    24 per column phase, only the scatter), in reflect over the full transposed conv, then folded, except in bfloat16,
    and with one y channel per group as well. Asked at AVX2."""
    def path(x_channels, y_channels, groups, stride, mode, channels_last=True, dtype=torch.float32):
        x = torch.randn(2, x_channels, 12, 13, dtype=dtype)
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        w = torch.randn(x_channels, y_channels // groups, 3, 3, dtype=dtype)
        out_size = [(12 - 1) * stride + 1, (13 - 1) * stride + 1]
        with cpu_isa_limit("avx2"):
            return torch.ops.fastpad._conv_transpose_path(x, w, None, [stride] * 2, [1, 1], out_size, [1, 1], groups,
                                                          mode, "cpu")
    assert path(16, 24, 8, 2, "zeros") == "cpu_grouped_expanded"  # 2 x 3
    assert path(32, 16, 8, 2, "zeros") != "cpu_grouped_expanded"  # 4 x 2
    assert path(16, 24, 8, 2, "zeros", channels_last=False) != "cpu_grouped_expanded"
    assert path(16, 24, 1, 2, "zeros") != "cpu_grouped_expanded"
    assert path(16, 16, 8, 1, "zeros").startswith("cpu_blocked")
    assert path(16, 16, 8, 1, "reflect") == "cpu_depthwise_phases_folded"
    assert path(16, 16, 8, 1, "reflect", dtype=torch.bfloat16) == "cpu_grouped_expanded"
    assert path(16, 8, 8, 1, "zeros") == "cpu_depthwise_phases"
    assert path(16, 8, 8, 1, "reflect") == "cpu_depthwise_phases_folded"


# (transposed, size, c_in, c_out, kernel, stride, groups, mode, dtype): channels-last problems whose transposed op has
# more than one x and more than one y channel per group within cpu_grouped_expanded_transpose's bounds, which run as
# the grouped convs their stride phases are (cpu_depthwise_phases; in another mode than zeros over the full transposed
# conv, then folded): random072 of seed 2 (a conv's input gradient, 2 x 2 per group, k7x2 s2 in replicate over rows
# of 59), its zeros twin in bfloat16, 3 y and 2 x channels per group at stride 1 in circular, and a transposed conv's
# forward with 3 x and 2 y channels per group at stride 2 (y rows of 52) in float64.
GROUPED_TRANSPOSE_PHASES = [(False, (40, 59), 32, 32, (7, 2), 2, 16, "replicate", torch.float32, "_folded"),
                            (False, (40, 59), 32, 32, (7, 2), 2, 16, "zeros", torch.bfloat16, ""),
                            (False, (11, 30), 24, 16, 3, 1, 8, "circular", torch.float32, "_folded"),
                            (True, (9, 26), 12, 8, 3, 2, 4, "zeros", torch.float64, "")]


@pytest.mark.parametrize("transposed, size, c_in, c_out, kernel, stride, groups, mode, dtype, folded",
                         GROUPED_TRANSPOSE_PHASES)
def test_channels_last_grouped_transpose_stride_phases(transposed, size, c_in, c_out, kernel, stride, groups, mode,
                                                       dtype, folded):
    """The transposed op takes the stride phases (at AVX2 and this CPU's ISA, whose AVX-512 tiles take 16 y channels
    or more, or 9-15 in float32); the output and gradients match the float64 reference, outputs poisoned."""
    case = ConvCase(transposed, size, c_in, c_out, kernel, stride, "same", groups=groups, padding_mode=mode,
                    layout="channels_last")
    y_channels = c_out if transposed else c_in
    for isa in tiles_isas():
        check_transposed_op_path(CodePath(case, (), isa), dtype, 2,
                                 tiles_kernel(f"cpu_depthwise_phases{folded}", isa, dtype, y_channels))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_phase_planes_on_the_reduction_tiles(dtype):
    """NCHW transposed convs on the phase planes run their tap GEMMs on cpu/reduction_tiles.h's tiles for float
    accumulation (cpu_phase_planes_avx2, _avx512): a zeros transposed conv, and the input gradients (the transposed
    conv in the conv's mode) of reflect, replicate and circular convs; 1-d and 2-d, strides 2-4, 16-40 channels on each
    side (row tiles of 6 or 4 with a remainder), and bands of 8k + 8 positions (an AVX-512 row ending in half a vector,
    read and written through masks). Each call asserts the path at AVX2 and at this CPU's own ISA and is compared with
    the float64 reference, its output poisoned first."""
    # x's 310 positions and 2 halo columns: bands of 312 = 16 x 19 + 8 positions
    x, w, b = conv_inputs((310,), 16, 24, 5, 1, batch=2, transposed=True, dtype=dtype)
    crop_lo, out_size = resolve_crops(((1, 2),), (310,), (5,), (2,), (1,), 0)
    # (size, c_in, c_out, kernel, stride, mode, pads) of convs whose input gradient takes the phase planes; the 1-d
    # ones' outputs (310 and 278 positions, 1 halo column) make bands of 16k + 8 positions too
    convs = [((1240,), 24, 40, 8, 4, "reflect", ((2, 2),)), ((556,), 17, 20, 3, 2, "replicate", ((0, 1),)),
             ((40, 46), 16, 33, 3, 2, "circular", ((1, 0), (0, 1)))]
    for isa in tiles_isas():
        with cpu_isa_limit(isa):
            expected_path = reduction_tiles_kernel("cpu_phase_planes", dtype)
            assert torch.ops.fastpad._conv_transpose_path(x, w, b, [2], crop_lo, out_size, [1], 1, "zeros",
                                                          "cpu") == expected_path
            check_conv_transpose(x, w, b, stride=2, padding=((1, 2),))
        for size, c_in, c_out, kernel, stride, mode, pads in convs:
            nd = len(size)
            cx, cw, _ = conv_inputs(size, c_in, c_out, kernel, 1, batch=2, bias=False, dtype=dtype)
            out_shape = expected_conv(cx, cw, None, stride=stride, padding=pads, padding_mode=mode).shape
            gy = torch.randn(out_shape, dtype=dtype)
            with cpu_isa_limit(isa):
                path = torch.ops.fastpad._conv_transpose_path(gy, cw, None, [stride] * nd, [lo for lo, _ in pads],
                                                              list(size), [1] * nd, 1, mode, "cpu")
                assert path == expected_path, (size, isa, path)
                xr = cx.detach().requires_grad_()
                y = getattr(fastpad, f"conv{nd}d")(xr, cw, stride=stride, padding=pads, padding_mode=mode)
                x64 = cx.double().requires_grad_()
                (expected,) = torch.autograd.grad(expected_conv(x64, cw.double(), None, stride=stride, padding=pads,
                                                                padding_mode=mode), x64, gy.double())
                poison(expected.shape, dtype)
                (grad,) = torch.autograd.grad(y, xr, gy)
            assert_matches(grad, expected, dtype, what="input gradient")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64],
                         ids=["float32", "bfloat16", "float64"])
def test_phase_planes_split_y_channels(dtype):
    """Where images x groups leave threads idle, the NCHW transposed phase planes split each slice's y channels into
    runs, one per thread (conv_transpose.cpp's phase_plane_transpose_nchw): 1 image on 2 threads (33 y channels: runs
    of 16 and 17), 3 images (2 runs of 10), 1 image of 3 groups (each group's 16 in 2 runs of 8), 1 image on 4 threads
    (20 channels: 2 runs, each of 8 rows or more), and a replicate conv's input gradient over 2-d (the split runs
    scattered into the padding's fold). Each call asserts the phase planes path and is compared with the float64
    reference, its output poisoned first."""
    # (threads, batch, groups, x channels, y channels) of a zeros transposed conv over 310 positions, k5 s2
    cases = [(2, 1, 1, 16, 33), (2, 3, 1, 16, 20), (2, 1, 3, 48, 48), (4, 1, 1, 16, 20)]
    for threads, batch, groups, c_x, c_y in cases:
        with intra_op_threads(threads):
            x, w, b = conv_inputs((310,), c_x, c_y, 5, groups, batch=batch, transposed=True, dtype=dtype)
            crop_lo, out_size = resolve_crops(((1, 2),), (310,), (5,), (2,), (1,), 0)
            path = torch.ops.fastpad._conv_transpose_path(x, w, b, [2], crop_lo, out_size, [1], groups, "zeros", "cpu")
            assert path == reduction_tiles_kernel("cpu_phase_planes", dtype), (threads, batch, groups, path)
            check_conv_transpose(x, w, b, stride=2, padding=((1, 2),), groups=groups)
    cx, cw, _ = conv_inputs((40, 46), 17, 33, 3, 1, batch=1, bias=False, dtype=dtype)
    pads = ((1, 0), (0, 1))
    gy = torch.randn(expected_conv(cx, cw, None, stride=2, padding=pads, padding_mode="replicate").shape, dtype=dtype)
    with intra_op_threads(2):
        path = torch.ops.fastpad._conv_transpose_path(gy, cw, None, [2, 2], [1, 0], [40, 46], [1, 1], 1, "replicate",
                                                      "cpu")
        assert path == reduction_tiles_kernel("cpu_phase_planes", dtype), path
        xr = cx.detach().requires_grad_()
        y = fastpad.conv2d(xr, cw, stride=2, padding=pads, padding_mode="replicate")
        x64 = cx.double().requires_grad_()
        (expected,) = torch.autograd.grad(
            expected_conv(x64, cw.double(), None, stride=2, padding=pads, padding_mode="replicate"), x64, gy.double())
        poison(expected.shape, dtype)
        (grad,) = torch.autograd.grad(y, xr, gy)
    assert_matches(grad, expected, dtype, what="input gradient")
