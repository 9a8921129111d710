"""Which kernel each call reaches, asserted through the private path ops (torch.ops.fastpad._*_path), which report
kernel_paths.h's choice: the same function the CPU ops and the CUDA bindings switch on."""

import math

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from code_paths import (CODE_PATHS, ISA_ORDER, cpu_isa_limit, dense_kernel, kernels_reached, machine_isa,
                        nchw_unblocked_kernel, reduction_tiles_kernel, require_isa, skip_unless_isa)
from fastpad.cases import arrange
import fastpad
from reference import (assert_matches, check_conv, check_conv_transpose, conv_inputs, expected_conv,
                       expected_conv_transpose, poison)
from test_cuda import CUDA_KERNELS, PATHS, cuda_kernels_reached


@pytest.mark.parametrize("name", CODE_PATHS)
def test_each_call_reaches_its_cpu_kernels(name):
    path = CODE_PATHS[name]
    skip_unless_isa(path)
    assert kernels_reached(path, path.inputs(path.case.torch_dtype)) == set(path.kernels)


def test_every_cpu_kernel_path_is_reached():
    """Together the calls reach every CPU kernel path of every op."""
    reached = {pair for path in CODE_PATHS.values() for pair in path.kernels}
    every = {("conv", name) for name in ("cpu_torch", "cpu_blocked_avx2", "cpu_blocked_avx512",
                                         "cpu_blocked_avx512_bf16", "cpu_channel_dots_avx2", "cpu_channel_dots_avx512",
                                         "cpu_blocked_no_planes_avx2",
                                         "cpu_blocked_no_planes_avx512", "cpu_depthwise", "cpu_depthwise_avx512",
                                         "cpu_depthwise_channel_blocks", "cpu_depthwise_channel_blocks_avx512",
                                         "cpu_depthwise_strided_planes", "cpu_grouped_expanded",
                                         "cpu_grouped_expanded_avx512", "cpu_grouped_planes",
                                         "cpu_tap_gemms", "cpu_tap_tiles_avx2", "cpu_tap_tiles_avx512",
                                         "cpu_column_gemm",
                                         "cpu_channels_last_direct", "cpu_channels_last_phase_planes",
                                         "cpu_channels_last_im2col")}
    every |= {("conv_transpose", name) for name in ("cpu_torch", "cpu_blocked_avx2", "cpu_blocked_avx512",
                                                    "cpu_blocked_no_planes_avx2", "cpu_blocked_no_planes_avx512",
                                                    "cpu_blocked_folded_avx2", "cpu_blocked_folded_avx512",
                                                    "cpu_tap_tiles_avx2", "cpu_tap_tiles_avx512",
                                                    "cpu_tap_tiles_folded_avx2", "cpu_tap_tiles_folded_avx512",
                                                    "cpu_depthwise", "cpu_depthwise_channel_blocks",
                                                    "cpu_depthwise_channel_blocks_avx512",
                                                    "cpu_depthwise_strided_planes",
                                                    "cpu_depthwise_channel_block_phases",
                                                    "cpu_depthwise_channel_block_phases_avx512", "cpu_depthwise_phases",
                                                    "cpu_depthwise_phases_avx512", "cpu_depthwise_phases_folded",
                                                    "cpu_depthwise_phases_folded_avx512", "cpu_grouped_expanded",
                                                    "cpu_grouped_planes",
                                                    "cpu_phase_planes", "cpu_phase_planes_avx2",
                                                    "cpu_phase_planes_avx512", "cpu_gemm_col2im",
                                                    "cpu_gemm_col2im_avx2", "cpu_gemm_col2im_avx512",
                                                    "cpu_gemm_col2im_nhwc_avx2", "cpu_gemm_col2im_nhwc_avx512",
                                                    "cpu_gemm_col2im_rows_avx2", "cpu_gemm_col2im_rows_avx512")}
    every |= {("conv_weight_grad", name) for name in ("cpu_depthwise", "cpu_depthwise_avx512", "cpu_depthwise_repeated",
                                                      "cpu_depthwise_repeated_avx512", "cpu_depthwise_channel_blocks",
                                                      "cpu_depthwise_channel_blocks_avx512",
                                                      "cpu_depthwise_strided_planes", "cpu_tap_dots",
                                                      "cpu_phase_planes", "cpu_phase_planes_avx2",
                                                      "cpu_phase_planes_avx512", "cpu_phase_planes_rows_avx2",
                                                      "cpu_phase_planes_rows_avx512", "cpu_channels_last_gemm",
                                                      "cpu_channels_last_gemm_avx2",
                                                      "cpu_channels_last_gemm_avx512", "cpu_channels_last_taps_avx2",
                                                      "cpu_channels_last_taps_avx512")}
    assert reached == every


def test_nchw_weight_gradients_take_the_reduction_tiles_within_their_bounds():
    """kernel_paths.h's cpu_weight_grad_tiles for the phase planes: float accumulation on AVX2 or AVX-512 and a
    reduction (input channels per group x taps) of 8 or more; below it, or in float64, or without AVX2, torch's GEMM."""
    def path(c_in=8, kernel=1, size=32, batch=2, dtype=torch.float32, isa="avx2"):
        x = torch.randn(batch, c_in, size, dtype=dtype)
        gy = torch.randn(batch, 16, size - kernel + 1, dtype=dtype)
        with cpu_isa_limit(isa):
            return torch.ops.fastpad._conv_weight_grad_path(x, gy, [16, c_in, kernel], [1], [0], [1], 1, "zeros", "cpu")
    isas = [isa for isa in ("avx2", "avx512") if ISA_ORDER.index(isa) <= ISA_ORDER.index(machine_isa())]
    for isa in isas:
        tiles = f"cpu_phase_planes_{isa}"
        assert path(isa=isa) == tiles  # reduction 8
        assert path(c_in=4, kernel=2, isa=isa) == tiles
        assert path(batch=1, size=1, isa=isa) == f"cpu_phase_planes_rows_{isa}"  # one position: cpu_weight_grad_rows
        assert path(dtype=torch.bfloat16, isa=isa) == tiles
        for others in (path(c_in=7, isa=isa), path(c_in=2, kernel=3, isa=isa), path(dtype=torch.float64, isa=isa),
                       path(isa="baseline")):
            assert others == "cpu_phase_planes"


def test_wide_strided_transposed_convs_take_the_blocked_phases_on_avx512_only():
    """kernel_paths.h's cpu_blocked_transpose with 16 or more x channels per group and a stride: the blocked stride
    phases on AVX-512, in zeros mode, with 16 or more y channels per group, a tap per phase on average and 1024 y
    positions per phase over the batch; otherwise the phase planes or the GEMM + col2im, as before. From 24 x channels,
    2-d with each kernel dim a multiple of the stride and at most 2 taps per phase along it take the phase planes
    instead (cpu_phase_planes_over_blocked)."""
    require_isa("avx512")

    def path(batch=2, x_channels=16, y_channels=32, kernel=4, stride=2, size=32, mode="zeros", isa="avx512"):
        x, w = torch.randn(batch, x_channels, size, size), torch.randn(x_channels, y_channels, kernel, kernel)
        out = (size - 1) * stride + kernel - 2
        with cpu_isa_limit(isa):
            return torch.ops.fastpad._conv_transpose_path(x, w, None, [stride] * 2, [1, 1], [out, out], [1, 1], 1,
                                                          mode, "cpu")
    assert path() == "cpu_blocked_avx512"
    assert path(isa="avx512_bf16") == "cpu_blocked_avx512"
    assert path(x_channels=24) == "cpu_phase_planes_avx512"
    assert path(x_channels=24, kernel=6) == "cpu_blocked_avx512"
    assert path(isa="avx2") == "cpu_phase_planes_avx2"
    assert path(y_channels=3) == "cpu_gemm_col2im_avx512"
    assert path(y_channels=3, isa="baseline") == "cpu_gemm_col2im"
    for others in (path(kernel=2, stride=3), path(batch=1, size=16), path(mode="reflect")):
        assert others == "cpu_phase_planes_avx512"
    assert path(isa="baseline") == "cpu_phase_planes"


def test_a_non_finite_weight_leaves_the_transposed_phase_planes():
    """The CPU phase planes multiply weights by zeros outside x, so an inf weight takes the GEMM + col2im path, its
    GEMM on the reduction tiles (whose zero-padded columns are dropped). (The crop, 1 at the start and 2 at the end, is
    one torch's own transposed convolution cannot express.)"""
    x, w = torch.randn(1, 16, 16, 16), torch.randn(16, 16, 4, 4)
    args = ([2, 2], [1, 1], [31, 31], [1, 1], 1, "zeros", "cpu")
    assert torch.ops.fastpad._conv_transpose_path(x, w, None, *args) == reduction_tiles_kernel("cpu_phase_planes",
                                                                                              torch.float32)
    w[3, 2, 1, 1] = float("inf")
    assert torch.ops.fastpad._conv_transpose_path(x, w, None, *args) == reduction_tiles_kernel("cpu_gemm_col2im",
                                                                                              torch.float32)


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_a_problem_reading_no_padding_takes_the_zeros_kernels_in_every_mode(layout):
    """'valid' pads: every tap lands inside the input, so the mode changes nothing and each op takes the kernel it takes
    in zeros mode (NCHW: torch's own convolution, 64 -> 64 channels k3 over 40x40 being 2^25.7 multiply-adds; the
    transposed input gradient unfolded). One pad of 1 makes the mode count again."""
    x = arrange(torch.randn(2, 64, 40, 40), layout)
    w = torch.randn(64, 64, 3, 3)
    gy = arrange(torch.randn(2, 64, 38, 38), layout)

    def paths(mode, pad):
        return (torch.ops.fastpad._conv_path(x, w, None, [1, 1], [pad, 0], [pad, 0], [1, 1], 1, mode, "cpu"),
                torch.ops.fastpad._conv_transpose_path(gy, w, None, [1, 1], [pad, 0], [40, 40], [1, 1], 1, mode,
                                                       "cpu"))

    for mode in ("reflect", "replicate", "circular"):
        assert paths(mode, 0) == paths("zeros", 0), mode
        assert paths(mode, 1) != paths("zeros", 1), mode
        check_conv(x, w, None, padding=0, padding_mode=mode)
    if layout == "contiguous":
        assert paths("reflect", 0)[0] == "cpu_torch"


# (layout, input shape, out channels, groups, kernel): few input channels per group that keep their own kernels on an
# AVX2 CPU: a channels-last reduction (channels per group x taps) under 8, NCHW stems (one group) with a reduction under
# 128 (the tap tiles, on rows of any width: 14 and 13 here).
FEW_CHANNELS_OFF_THE_BLOCKED_KERNEL = [("channels_last", (2, 14, 20, 20), 14, 7, (1, 1), "cpu_channels_last_direct"),
                                       ("channels_last", (2, 12, 10, 9), 24, 6, (1, 3), "cpu_channels_last_direct"),
                                       ("contiguous", (2, 3, 40, 14), 32, 1, (3, 3), "cpu_tap_tiles_avx2"),
                                       ("contiguous", (2, 3, 40, 13), 32, 1, (3, 3), "cpu_tap_tiles_avx2")]


@pytest.mark.parametrize("layout, shape, out_channels, groups, kernel, expected", FEW_CHANNELS_OFF_THE_BLOCKED_KERNEL)
def test_few_channels_leave_the_blocked_kernel_where_it_is_slower(layout, shape, out_channels, groups, kernel,
                                                                  expected):
    if machine_isa() == "baseline":
        pytest.skip("this CPU has no AVX2, so no blocked kernel")
    x = arrange(torch.randn(shape), layout)
    w = torch.randn(out_channels, shape[1] // groups, *kernel)
    pads = [(k // 2, (k - 1) // 2) for k in kernel]
    with cpu_isa_limit("avx2"):
        assert torch.ops.fastpad._conv_path(x, w, None, [1, 1], [lo for lo, _ in pads], [hi for _, hi in pads],
                                            [1, 1], groups, "replicate", "cpu") == expected
        check_conv(x, w, None, groups=groups, padding=pads, padding_mode="replicate")


@pytest.mark.parametrize("kernel, expected", [((5, 6), "cpu_tap_tiles_avx2"), ((4, 8), "cpu_blocked_avx2"),
                                              ((7, 7), "cpu_blocked_avx2")])
def test_nchw_stems_take_the_blocked_kernel_from_a_reduction_of_128(kernel, expected):
    """NCHW, 4 input channels, one group, 24 output channels: a reduction of 4 x 30 taps = 120 takes the tap tiles
    (rows of 31); 4 x 32 = 128 and 4 x 49 = 196 take the blocked kernel (kBlockedStemMinReduction)."""
    if machine_isa() == "baseline":
        pytest.skip("this CPU has no AVX2, so no blocked kernel")
    x = torch.randn(2, 4, 30, 31)
    w = torch.randn(24, 4, *kernel)
    pads = [(k - 1, 0) for k in kernel]  # causal: pads torch's symmetric padding cannot express
    with cpu_isa_limit("avx2"):
        path = torch.ops.fastpad._conv_path(x, w, None, [1, 1], [lo for lo, _ in pads], [hi for _, hi in pads],
                                            [1, 1], 1, "zeros", "cpu")
        assert path == expected
        check_conv(x, w, None, padding=pads)


# (input width, out channels, isa, dtype, expected): NCHW stems of 4 input channels, k3x3 'same' at stride 1 (a
# reduction of 36), on AVX-512: output rows under 28 positions with more than 8 output channels (half a vector) take
# the blocked kernel, whose vectors run along the channels; rows of 28, 8 channels, or AVX2 keep the tap tiles.
NARROW_STEMS = [(27, 9, "avx512", torch.float32, "cpu_blocked_avx512"),
                (6, 141, "avx512", torch.float32, "cpu_blocked_avx512"),
                (27, 24, "avx512_bf16", torch.bfloat16, "cpu_blocked_avx512_bf16"),
                (28, 24, "avx512", torch.float32, "cpu_tap_tiles_avx512"),
                (20, 8, "avx512", torch.float32, "cpu_tap_tiles_avx512"),
                (20, 24, "avx2", torch.float32, "cpu_tap_tiles_avx2")]


@pytest.mark.parametrize("width, out_channels, isa, dtype, expected", NARROW_STEMS)
def test_nchw_stems_on_narrow_rows_take_the_blocked_kernel_on_avx512(width, out_channels, isa, dtype, expected):
    require_isa(isa)
    x, w, b = conv_inputs((11, width), c_in=4, c_out=out_channels, dtype=dtype)
    pads = [(1, 1), (1, 1)]
    with cpu_isa_limit(isa):
        assert torch.ops.fastpad._conv_path(x, w, b, [1, 1], [1, 1], [1, 1], [1, 1], 1, "reflect", "cpu") == expected
        check_conv(x, w, b, padding=pads, padding_mode="reflect")


# k3 s2 over `size` with pads (lo, hi): torch's symmetric padding lo gives the same output size exactly when the
# unequal part of the pads is never read (16 -> 16 channels, 2^25 multiply-adds).
UNEQUAL_PADS = [(171, (1, 2), True), (172, (2, 1), True), (172, (1, 2), False), (171, (2, 1), False)]


@pytest.mark.parametrize("size, pads, torch_expresses", UNEQUAL_PADS)
def test_unequal_zero_pads_go_to_torch_where_its_padding_reads_the_same(size, pads, torch_expresses):
    x, w, b = conv_inputs((size, size), c_in=16, c_out=16)
    (lo, hi) = pads
    path = torch.ops.fastpad._conv_path(x, w, b, [2, 2], [lo, lo], [hi, hi], [1, 1], 1, "zeros", "cpu")
    assert path == ("cpu_torch" if torch_expresses else dense_kernel(x.dtype))
    check_conv(x, w, b, stride=2, padding=(pads, pads))


@pytest.mark.parametrize("op", ["conv", "conv_transpose"])
def test_torch_path_returns_the_layout_the_op_promises(op):
    """torch's convolution allocates the output of a call it takes; where its result has another layout than the one
    the op promises (the input's: an NCHW input with a channels-last weight, which torch answers in channels-last),
    the op returns a copy with the strides of its fake kernel, and the values of the float64 reference."""
    transposed = op == "conv_transpose"
    x, w, b = conv_inputs((64, 65), c_in=32, c_out=32, batch=1, transposed=transposed)  # float64: torch's either op
    w = w.to(memory_format=torch.channels_last)
    args = ([1, 1], [1, 1], [64, 65] if transposed else [1, 1], [1, 1], 1, "zeros")
    assert getattr(torch.ops.fastpad, f"_{op}_path")(x, w, b, *args, "cpu") == "cpu_torch"
    assert not torch.convolution(x, w, b, [1, 1], [1, 1], [1, 1], transposed, [0, 0], 1).is_contiguous()
    poison(x.shape[:1] + (32,) + x.shape[2:], dtype=x.dtype)
    y = getattr(torch.ops.fastpad, op)(x, w, b, *args)
    with FakeTensorMode() as mode:
        fake = getattr(torch.ops.fastpad, op)(*(mode.from_tensor(t) for t in (x, w, b)), *args)
    assert y.stride() == fake.stride() == torch.empty(y.shape).stride()
    expected = expected_conv_transpose(x, w, b, padding=1) if transposed else expected_conv(x, w, b, padding=1)
    assert_matches(y, expected)


@pytest.mark.parametrize("isa", ["avx2", "avx512", "avx512_bf16"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_reduced_precision_goes_to_torch_only_where_bfloat16_is_native(dtype, isa):
    """torch's own bfloat16 convolution is slow without native bf16 instructions (28.7x ONNX Runtime's float32 time on
    resnet50.dense_k3s1_c64), so the symmetric zero pads torch would take in float32 stay with fastpad in 16 bits;
    on a CPU with AVX512_BF16, bfloat16 (not float16) goes to torch like float32."""
    require_isa(isa)
    x, w, b = conv_inputs((64, 65), c_in=32, c_out=32, dtype=torch.float32)
    args = ([1, 1], [1, 1], [1, 1], [1, 1], 1, "zeros", "cpu")
    transpose_args = ([1, 1], [1, 1], [64, 65], [1, 1], 1, "zeros", "cpu")
    to_torch = dtype == torch.bfloat16 and isa == "avx512_bf16"
    with cpu_isa_limit(isa):
        assert torch.ops.fastpad._conv_path(x, w, b, *args) == "cpu_torch"
        assert (torch.ops.fastpad._conv_path(x.to(dtype), w.to(dtype), b.to(dtype), *args) == "cpu_torch") == to_torch
        assert (torch.ops.fastpad._conv_transpose_path(x.to(dtype), w.to(dtype), b.to(dtype),
                                                       *transpose_args) == "cpu_torch") == to_torch


# bfloat16 channels-last problems whose zero pads (or crop) torch expresses: (op, x channels, y channels, groups,
# stride, kernel, whether torch takes it on AVX512_BF16). fastpad keeps convs with an even number of input channels
# (its dot-product kernel), grouped problems, and transposed convs to fewer than 17 y channels, at a stride above 2, or
# with a kernel narrower than its stride (kernel_paths.h's cpu_channels_last_bf16_to_torch).
CHANNELS_LAST_BFLOAT16 = [("conv", 33, 32, 1, 1, 3, True), ("conv", 32, 32, 1, 1, 3, False),
                          ("conv", 33, 33, 3, 1, 3, False), ("conv_transpose", 64, 32, 1, 2, 4, True),
                          ("conv_transpose", 64, 16, 1, 2, 4, False), ("conv_transpose", 64, 32, 1, 3, 3, False),
                          ("conv_transpose", 64, 32, 1, 2, 1, False), ("conv_transpose", 64, 32, 2, 2, 4, False)]


@pytest.mark.parametrize("isa", ["avx512", "avx512_bf16"])
@pytest.mark.parametrize("op, x_channels, y_channels, groups, stride, kernel, to_torch", CHANNELS_LAST_BFLOAT16)
def test_channels_last_bfloat16_goes_to_torch_where_fastpad_would_run_float(op, x_channels, y_channels, groups, stride,
                                                                           kernel, to_torch, isa):
    """On AVX512_BF16 (and only there) torch's bfloat16 convolution runs natively; channels-last calls go to it where
    fastpad's kernels would run in float and torch's measured faster (UNet's k2 s2 and k4 s2 transposed convs in 0.46x
    and 0.48x fastpad's time), and the result matches the float64 reference to bfloat16's tolerance."""
    require_isa(isa)
    torch.manual_seed(0)
    size = 48 if op == "conv_transpose" else 64
    x = torch.randn(4, x_channels, size, size).to(torch.bfloat16, memory_format=torch.channels_last)
    weight_shape = ((y_channels, x_channels // groups) if op == "conv" else (x_channels, y_channels // groups))
    w = (torch.randn(*weight_shape, kernel, kernel) / math.sqrt(x_channels * kernel ** 2 / groups)).to(torch.bfloat16)
    b = torch.randn(y_channels).to(torch.bfloat16)
    with cpu_isa_limit(isa):
        if op == "conv":
            pads = [kernel // 2] * 2
            path = torch.ops.fastpad._conv_path(x, w, b, [stride] * 2, pads, pads, [1, 1], groups, "zeros", "cpu")
            poison((4, y_channels, size, size), torch.bfloat16)
            y = fastpad.conv2d(x, w, b, stride=stride, padding=kernel // 2, groups=groups)
            expected = expected_conv(x, w, b, stride=stride, padding=kernel // 2, groups=groups)
        else:
            crop_lo, out_size = fastpad._geometry.transposed_crops("same", (size, size), (kernel, kernel),
                                                                   [stride] * 2, [1, 1], [0, 0])
            path = torch.ops.fastpad._conv_transpose_path(x, w, b, [stride] * 2, crop_lo, out_size, [1, 1], groups,
                                                          "zeros", "cpu")
            poison((4, y_channels, *out_size), torch.bfloat16)
            y = fastpad.conv_transpose2d(x, w, b, stride=stride, padding="same", groups=groups)
            expected = expected_conv_transpose(x, w, b, stride=stride, padding="same", groups=groups)
    assert (path == "cpu_torch") == (to_torch and isa == "avx512_bf16"), path
    assert y.is_contiguous(memory_format=torch.channels_last)
    assert_matches(y, expected, torch.bfloat16)


def transpose_path(x, w, crop, out_size, isa, stride=1):
    """conv_transpose's CPU path for x (NCHW or channels-last) and w at the ISA, zeros mode, one group."""
    with cpu_isa_limit(isa):
        return torch.ops.fastpad._conv_transpose_path(x, w, None, [stride] * 2, crop, out_size, [1, 1], 1, "zeros",
                                                      "cpu")


@pytest.mark.parametrize("isa", ["baseline", "avx2", "avx512"])
def test_float32_transposed_convs_leave_torch_on_avx512(isa):
    """A float32 transposed conv whose crop torch expresses (a 'valid' 32 -> 32 k3 over 64 x 65, 2^25.8 multiply-adds)
    runs fastpad's own kernels on AVX-512: the blocked kernel at stride 1. On AVX2 and the baseline, and in float64,
    torch's own transposed convolution, as before."""
    require_isa(isa)
    x, w = torch.randn(2, 32, 64, 65), torch.randn(32, 32, 3, 3)
    expected = "cpu_blocked_avx512" if isa == "avx512" else "cpu_torch"
    assert transpose_path(x, w, [0, 0], [66, 67], isa) == expected
    assert transpose_path(x.double(), w.double(), [0, 0], [66, 67], isa) == "cpu_torch"
    with cpu_isa_limit(isa):
        check_conv_transpose(x, w, padding="valid")


@pytest.mark.parametrize("size, expected", [(15, "cpu_torch"), (16, "cpu_blocked_avx512")])
def test_the_blocked_transposed_conv_leaves_few_x_positions_to_torch(size, expected):
    """The blocked kernel packs the weight on every call, which 128 -> 128 k5 over fewer than 256 x positions (15 x 16)
    do not repay: torch's own transposed convolution takes them (kBlockedTransposeMinPositions); 16 x 16 stays."""
    require_isa("avx512")
    x, w = torch.randn(1, 128, size, 16), torch.randn(128, 128, 5, 5)
    assert transpose_path(x, w, [2, 2], [size, 16], "avx512") == expected
    with cpu_isa_limit("avx512"):
        check_conv_transpose(x, w, padding=2)


@pytest.mark.parametrize("kernel, expected", [(5, "cpu_gemm_col2im_avx512"), (6, "cpu_torch")])
def test_the_transposed_col2im_leaves_long_column_rows_to_torch(kernel, expected):
    """GEMM + col2im scatters y channels x taps per group per x position: 8 x 25 = 200 rows keep it beside 64 x
    channels (at most kCol2imMaxRowsPerChannel = 4 per channel), 8 x 36 = 288 go to torch's own transposed
    convolution. (8 y channels keep the stride-1 call off the blocked kernel.)"""
    require_isa("avx512")
    x, w = torch.randn(4, 64, 48, 48), torch.randn(64, 8, kernel, kernel)
    out = 48 + kernel - 1
    assert transpose_path(x, w, [0, 0], [out, out], "avx512") == expected
    with cpu_isa_limit("avx512"):
        check_conv_transpose(x, w, padding="valid")


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize("y_channels, kernel, expected", [(9, 3, "cpu_gemm_col2im"), (10, 3, "cpu_blocked"),
                                                          (9, 1, "cpu_blocked_no_planes")])
def test_stride_1_transposed_convs_to_few_y_channels_take_the_col2im(isa, y_channels, kernel, expected):
    """At stride 1 with 16 or more x channels per group, the blocked kernel's vectors run along y's channels: under
    kBlockedTransposeMinYChannels = 10 per group a kernel wider than 1 x 1 takes GEMM + col2im (channels-last here,
    so torch is not in play); a 1 x 1 kernel, which col2im does not spare any taps, stays (its one phase reads no
    padding, so it reads this float32 x in place)."""
    require_isa(isa)
    x = torch.randn(2, 32, 20, 21).to(memory_format=torch.channels_last)
    w = torch.randn(32, y_channels, kernel, kernel)
    pad = kernel // 2
    assert transpose_path(x, w, [pad, pad], [20, 21], isa) == f"{expected}_{isa}"
    with cpu_isa_limit(isa):
        check_conv_transpose(x, w, padding=pad)


# (x channels, y channels, kernel, path on AVX2, path on AVX-512) of a stride-1 channels-last transposed conv over
# 2 x 20 x 20 whose pads keep y 20 x 20 (k3) or leave it the full 24 x 24 (k5) or 25 x 25 (k6).
WASTEFUL_BLOCKED_TRANSPOSES = [
    (96, 20, 3, "cpu_blocked", "cpu_gemm_col2im"),  # AVX-512: 32 lanes for 20 channels, 1.6x the products
    (95, 20, 3, "cpu_blocked", "cpu_blocked"),  # too few x channels for the col2im
    (96, 24, 3, "cpu_blocked", "cpu_blocked"),  # 32 lanes for 24: 1.33x
    (96, 16, 6, "cpu_gemm_col2im", "cpu_gemm_col2im"),  # y 625 / x 400 positions: 1.56x
    (96, 16, 5, "cpu_blocked", "cpu_blocked"),  # 576 / 400: 1.44x
]


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize("x_channels, y_channels, kernel, on_avx2, on_avx512", WASTEFUL_BLOCKED_TRANSPOSES)
def test_stride_1_transposed_convs_that_waste_the_blocked_kernel_take_the_col2im(isa, x_channels, y_channels,
                                                                                  kernel, on_avx2, on_avx512):
    """At stride 1 the blocked kernel multiplies every y position's taps, zeros around x included, in whole vectors of
    y channels: with kCol2imMinXChannels = 96 x channels per group or more, y positions / x positions
    x lanes / y channels of kBlockedTransposeMaxWaste = 1.5 or more take GEMM + col2im (channels-last: torch is not in
    play)."""
    require_isa(isa)
    x = torch.randn(2, x_channels, 20, 20).to(memory_format=torch.channels_last)
    w = torch.randn(x_channels, y_channels, kernel, kernel)
    pad = 1 if kernel == 3 else 0
    out = 20 + kernel - 1 - 2 * pad
    expected = on_avx512 if isa == "avx512" else on_avx2
    assert transpose_path(x, w, [pad, pad], [out, out], isa) == f"{expected}_{isa}"
    with cpu_isa_limit(isa):
        check_conv_transpose(x, w, padding=pad)


@pytest.mark.parametrize("kernel, expected", [(5, "cpu_blocked_folded_avx512"), (7, "cpu_gemm_col2im_avx512")])
def test_folded_transposed_convs_count_the_full_convs_positions_as_waste(kernel, expected):
    """Another mode than zeros computes the full transposed conv, then folds: the input gradient of a 'same'
    replicate conv over 20 x 20 computes 24 x 24 positions at k5 (1.44x x's, blocked) and 26 x 26 at k7 (1.69x,
    GEMM + col2im). Checked against the float64 gradient of F.pad + conv2d."""
    require_isa("avx512")
    pad = kernel // 2
    grad_y = torch.randn(2, 96, 20, 20).to(memory_format=torch.channels_last)
    w = torch.randn(96, 16, kernel, kernel)
    args = (grad_y, w, None, [1, 1], [pad, pad], [20, 20], [1, 1], 1, "replicate")
    with cpu_isa_limit("avx512"):
        assert torch.ops.fastpad._conv_transpose_path(*args, "cpu") == expected
        poison((2, 16, 20, 20))
        grad_x = torch.ops.fastpad.conv_transpose(*args)
    x64 = torch.randn(2, 16, 20, 20, dtype=torch.float64, requires_grad=True)
    y64 = torch.nn.functional.conv2d(torch.nn.functional.pad(x64, [pad] * 4, mode="replicate"), w.double())
    (expected_grad,) = torch.autograd.grad(y64, x64, grad_y.double())
    assert_matches(grad_x, expected_grad, torch.float32, what="input grad")


@pytest.mark.parametrize("isa, x_channels, expected", [("avx512", 96, "cpu_gemm_col2im_avx512"),
                                                       ("avx512", 95, "cpu_phase_planes_avx512"),
                                                       ("avx2", 96, "cpu_phase_planes_avx2")])
def test_nchw_transposed_convs_with_many_x_channels_take_the_col2im_on_avx512(isa, x_channels, expected):
    """An NCHW strided transposed conv the phase planes take (a 'valid' k3 s3 one over 16 x 20, 24 y channels) runs
    GEMM + col2im instead with kCol2imMinXChannels = 96 x channels per group or more on AVX-512 in float32; AVX2 keeps
    the phase planes."""
    require_isa(isa)
    x, w = torch.randn(2, x_channels, 16, 20), torch.randn(x_channels, 24, 3, 3)
    assert transpose_path(x, w, [0, 0], [48, 60], isa, stride=3) == expected
    with cpu_isa_limit(isa):
        check_conv_transpose(x, w, stride=3, padding="valid")


# (input shape, out channels, kernel, stride): symmetric zero pads that stay with fastpad's kernels, a problem below
# 2^24 multiply-adds, and a strided 1x1 kernel above it.
STAYS_WITH_FASTPAD = [((2, 16, 12, 13), 24, 3, 1), ((2, 256, 64, 64), 256, 1, 2)]


@pytest.mark.parametrize("shape, out_channels, kernel, stride", STAYS_WITH_FASTPAD)
def test_small_problems_and_strided_1x1_kernels_stay_with_fastpad(shape, out_channels, kernel, stride):
    x, w = torch.randn(shape), torch.randn(out_channels, shape[1], kernel, kernel)
    pads = [kernel // 2] * 2
    # (An NCHW 1x1 kernel is one GEMM straight off the input: the tap tiles', or torch's where they do not run.)
    expected = nchw_unblocked_kernel(x.dtype, shape[1]) if kernel == 1 else dense_kernel(x.dtype)
    assert torch.ops.fastpad._conv_path(x, w, None, [stride] * 2, pads, pads, [1, 1], 1, "zeros", "cpu") == expected


# Channels-last shapes whose backward torch 2.13's own CPU convolution got wrong (a 1x1 stride-3 weight gradient off by
# 40%, and NaN in a 3x3 stride-2 input gradient): symmetric zero pads, but channels-last, so fastpad's kernels run.
TORCH_CHANNELS_LAST_FAILURES = [((15, 18), 1, 3, 0), ((57, 57), 3, 2, 1)]


@pytest.mark.parametrize("size, kernel, stride, pad", TORCH_CHANNELS_LAST_FAILURES)
def test_channels_last_symmetric_zero_pads_stay_with_fastpad(size, kernel, stride, pad):
    x = torch.randn(2, 5, *size).to(memory_format=torch.channels_last).requires_grad_()
    w = torch.randn(8, 5, kernel, kernel, requires_grad=True)
    pads = [pad, pad]
    assert torch.ops.fastpad._conv_path(x, w, None, [stride] * 2, pads, pads, [1, 1], 1, "zeros", "cpu") != "cpu_torch"
    y = fastpad.conv2d(x, w, stride=stride, padding=pad)
    grad_y = torch.randn_like(y)
    grads = torch.autograd.grad(y, (x, w), grad_y)
    x64, w64 = (t.detach().double().requires_grad_() for t in (x, w))
    y64 = expected_conv(x64, w64, stride=stride, padding=pad)
    expected_grads = torch.autograd.grad(y64, (x64, w64), grad_y.double())
    assert_matches(y, y64, torch.float32)
    for what, grad, expected in zip(("input grad", "weight grad"), grads, expected_grads):
        assert_matches(grad, expected, torch.float32, what=what)


def test_path_ops_check_their_arguments():
    x, w = torch.randn(1, 4, 8, 8), torch.randn(4, 4, 3, 3)
    with pytest.raises(RuntimeError, match="backend must be 'cpu' or 'cuda', got 'tpu'"):
        torch.ops.fastpad._conv_path(x, w, None, [1, 1], [1, 1], [1, 1], [1, 1], 1, "zeros", "tpu")
    with pytest.raises(RuntimeError, match="groups"):
        torch.ops.fastpad._conv_path(x, w, None, [1, 1], [1, 1], [1, 1], [1, 1], 3, "zeros", "cpu")


@pytest.mark.parametrize("name", PATHS)
def test_each_cuda_test_case_reaches_its_cuda_kernels(name):
    """tests/test_cuda.py's one-case-per-path table (what scripts/gpu_check.sh runs under compute-sanitizer) reaches
    the CUDA kernels it is named for; asked on CPU tensors, as the choice depends only on the geometry, layout and
    dtype."""
    assert cuda_kernels_reached(name, device="cpu") == CUDA_KERNELS[name]


def test_the_cuda_test_cases_cover_every_cuda_kernel_path():
    reached = {(op, kernel) for kernels in CUDA_KERNELS.values()
               for op, kernel in zip(("conv", "conv_transpose", "conv_weight_grad"), kernels)}
    assert {kernel for op, kernel in reached if op == "conv"} == {"cuda_depthwise_halo", "cuda_depthwise_rows",
                                                                   "cuda_direct", "cuda_few_channels",
                                                                   "cuda_implicit_gemm", "cuda_pipelined_gemm",
                                                                   "cuda_depthwise_vectors"}
    assert {kernel for op, kernel in reached if op == "conv_transpose"} == {"cuda_direct_gather", "cuda_phase_gemm",
                                                                             "cuda_depthwise_rows",
                                                                             "cuda_phase_gemm_fold",
                                                                             "cuda_pipelined_gemm",
                                                                             "cuda_depthwise_vectors"}
    assert {kernel for op, kernel in reached if op == "conv_weight_grad"} == {"cuda_depthwise_reduction",
                                                                               "cuda_split_k_gemm",
                                                                               "cuda_pipelined_gemm",
                                                                               "cuda_depthwise_vectors"}


@pytest.mark.parametrize("allowed", [True, False], ids=["tf32", "no_tf32"])
def test_float32_cuda_convs_take_tf32_tensor_cores_as_torch_allows(allowed):
    """A float32 conv on CUDA runs the pipelined GEMM on TF32 tensor cores where torch.backends.cudnn.allow_tf32 says
    so, as torch's own CUDA convs do (an NCHW input too: on a channels-contiguous copy); otherwise, and where the
    channels are not whole 4-float vectors (6 per group), the FMA GEMM. The input gradient (its FMA path: the phase
    GEMM) and the weight gradient (the split-K GEMM) likewise."""
    args = ([1, 1], [1, 1], [1, 1], [1, 1], 1, "zeros", "cuda")
    w = torch.randn(8, 8, 3, 3)
    channels_last = torch.randn(2, 8, 9, 9).contiguous(memory_format=torch.channels_last)
    six_channels = torch.randn(2, 6, 9, 9).contiguous(memory_format=torch.channels_last)
    torch.backends.cudnn.allow_tf32 = allowed
    try:
        tensor_cores = "cuda_pipelined_gemm" if allowed else "cuda_implicit_gemm"
        assert torch.ops.fastpad._conv_path(channels_last, w, None, *args) == tensor_cores
        assert torch.ops.fastpad._conv_transpose_path(channels_last, w, None, [1, 1], [1, 1], [9, 9], [1, 1], 1,
                                                      "zeros", "cuda") == ("cuda_pipelined_gemm" if allowed
                                                                           else "cuda_phase_gemm")
        gy = torch.randn(2, 8, 9, 9).contiguous(memory_format=torch.channels_last)
        assert torch.ops.fastpad._conv_weight_grad_path(channels_last, gy, list(w.shape), [1, 1], [1, 1], [1, 1], 1,
                                                        "zeros", "cuda") == ("cuda_pipelined_gemm" if allowed
                                                                             else "cuda_split_k_gemm")
        assert torch.ops.fastpad._conv_path(six_channels, w[:, :6], None, *args) == "cuda_implicit_gemm"
        assert torch.ops.fastpad._conv_path(channels_last.contiguous(), w, None, *args) == tensor_cores
        assert torch.ops.fastpad._conv_path(channels_last.double(), w.double(), None, *args) == "cuda_implicit_gemm"
    finally:
        torch.backends.cudnn.allow_tf32 = False


@pytest.mark.parametrize("dtype, channels, groups, padded", [
    (torch.bfloat16, 3, 1, True), (torch.bfloat16, 7, 1, True), (torch.bfloat16, 2, 1, False),
    (torch.bfloat16, 9, 1, False), (torch.bfloat16, 6, 2, False), (torch.float32, 2, 1, True),
    (torch.float32, 3, 1, True), (torch.float32, 1, 1, False)])
def test_cuda_stems_pad_their_few_channels_to_one_vector(dtype, channels, groups, padded):
    """cuda_pipelined_channels: fewer input channels than one 16-byte vector (8 bfloat16, 4 float32 on TF32), in one
    group, take the pipelined GEMM on x padded with zero channels to one vector where that at most triples them (3-7
    bfloat16, 2-3 float32 channels): the weight gradient (whose output channels are whole vectors), and conv where it
    has more than kFewChannelsMax (4) channels: up to 4 in one group it sums them directly (cuda_few_channels, any
    dtype). 2 bfloat16 or 1 float32 channel (4x), 9 (more than a vector, not whole vectors) and grouped layers keep
    the other paths. conv_transpose never pads: x with 3 channels keeps its phase GEMM."""
    x = torch.randn(2, channels * groups, 9, 9, dtype=dtype).contiguous(memory_format=torch.channels_last)
    w = torch.randn(32, channels, 3, 3, dtype=dtype)
    gy = torch.randn(2, 32, 5, 5, dtype=dtype).contiguous(memory_format=torch.channels_last)
    geometry = ([2, 2], [1, 1], [1, 1], [1, 1], groups, "zeros", "cuda")
    torch.backends.cudnn.allow_tf32 = True
    try:
        conv = torch.ops.fastpad._conv_path(x, w, None, *geometry)
        grad = torch.ops.fastpad._conv_weight_grad_path(x, gy, list(w.shape), [2, 2], [1, 1], [1, 1], groups,
                                                        "zeros", "cuda")
        transposed_weight = torch.randn(channels * groups, 32 // groups, 3, 3, dtype=dtype)
        transposed = torch.ops.fastpad._conv_transpose_path(x, transposed_weight, None, [1, 1], [1, 1], [9, 9],
                                                            [1, 1], groups, "zeros", "cuda")
    finally:
        torch.backends.cudnn.allow_tf32 = False
    few = groups == 1 and channels <= 4
    assert conv == ("cuda_few_channels" if few else "cuda_pipelined_gemm" if padded else "cuda_implicit_gemm"), conv
    assert (grad == "cuda_pipelined_gemm") == padded, grad
    assert transposed != "cuda_pipelined_gemm"


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("channels, groups, expected", [(1, 1, True), (4, 1, True), (5, 1, False), (4, 2, False)])
def test_cuda_convs_with_at_most_4_input_channels_in_one_group_sum_them_directly(dtype, channels, groups, expected):
    """cuda_few_channels: one group of at most kFewChannelsMax (4) input channels, in any dtype, layout and padding
    mode (an RGB stem), runs the few-channels kernel; 5 channels, or 4 per group in 2 groups, do not."""
    for layout in (torch.contiguous_format, torch.channels_last):
        x = torch.randn(2, channels * groups, 9, 9, dtype=dtype).contiguous(memory_format=layout)
        w = torch.randn(8, channels, 3, 3, dtype=dtype)
        path = torch.ops.fastpad._conv_path(x, w, None, [2, 2], [1, 1], [1, 1], [1, 1], groups, "reflect", "cuda")
        assert (path == "cuda_few_channels") == expected, (path, layout)


@pytest.mark.parametrize("groups, expected", [(64, "cpu_grouped_expanded"), (63, "cpu_blocked_no_planes_avx512")])
def test_channels_last_transposed_convs_of_64_groups_or_more_expand_their_x_pixels(groups, expected):
    """A channels-last transposed conv with one x channel and 4 y channels per group (k4 s2, 3-d, zeros mode) runs
    the expanded scatter (kGroupedExpandedTransposeOverBlockedMinGroups) from 64 groups on; with 63 the blocked
    kernel's stride phases, as before. Both against the float64 reference."""
    with cpu_isa_limit("avx512"):
        if machine_isa() not in ("avx512", "avx512_bf16"):
            pytest.skip(f"the blocked choice below is AVX-512's; this CPU has {machine_isa()}")
        x = torch.randn(1, groups, 6, 6, 6).contiguous(memory_format=torch.channels_last_3d)
        w = torch.randn(groups, 4, 4, 4, 4)
        args = ([2, 2, 2], [2, 2, 2], [10, 10, 10], [1, 1, 1], groups, "zeros", "cpu")
        assert torch.ops.fastpad._conv_transpose_path(x, w, None, *args) == expected
        check_conv_transpose(x, w, None, stride=2, padding=((2, 2),) * 3, groups=groups)


@pytest.mark.parametrize("kernel, expected", [(3, "cpu_tap_dots"), (2, "cpu_channels_last_gemm")])
def test_grouped_channels_last_weight_gradients_copy_to_nchw_where_the_copy_is_repaid(kernel, expected):
    """A grouped channels-last weight gradient (32 -> 32, 4 groups, stride 2 over 32 x 32) runs the NCHW kernels on NCHW
    copies of x and grad_output where x holds fewer elements than grad_output times the taps (k3: 32 x 1024 against
    32 x 256 x 9); with k2 as many (32 x 256 x 4), so the channels-last GEMM reads x in place."""
    x = torch.randn(2, 32, 32, 32).to(memory_format=torch.channels_last)
    gy = torch.randn(2, 32, 16, 16).to(memory_format=torch.channels_last)
    pad = (kernel - 1) // 2
    args = ([32, 8, kernel, kernel], [2, 2], [pad, pad], [1, 1], 4, "zeros")
    if expected == "cpu_channels_last_gemm":
        expected = reduction_tiles_kernel(expected, torch.float32)
    assert torch.ops.fastpad._conv_weight_grad_path(x, gy, *args, "cpu") == expected
    x64 = x.double().requires_grad_()
    w64 = torch.randn(32, 8, kernel, kernel, dtype=torch.float64, requires_grad=True)
    expected_conv(x64, w64, stride=2, padding=((pad, pad), (pad, pad)), groups=4).backward(gy.double())
    assert_matches(torch.ops.fastpad.conv_weight_grad(x, gy, *args), w64.grad, torch.float32, what="weight grad")
