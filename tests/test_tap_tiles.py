"""Convs to a few output channels per group on the tap tiles (cpu_tap_tiles_avx2/_avx512, kernel_paths.h's
cpu_tap_tiles): the tap GEMMs over per-channel phase planes summed in cpu/reduction_tiles.h's registers, vectors along
the output positions. Where the rule sends a conv; every tile shape the few-rows products have (every row count below
a full tile, each count of vectors left after the widest tiles, and AVX-512's masked half vector) and the full tiles,
at every ISA this CPU runs; NCHW and channels-last, strides, dilations, groups, 3-d, every padding mode, bfloat16 and
a row long enough for column tiles, each against the float64 reference with the output allocator poisoned, each
asserting its kernel."""

import math
import random

import pytest
import torch

from code_paths import cpu_isa_limit, machine_isa, tiles_kernel
from fastpad.bench.random_layers import output_shape
from fastpad.cases import ConvCase
from test_blocked_direct import isas_here as blocked_isas_here, run_case as run_blocked_case

# Floats per vector, and the rows of a full tile (reduction_tiles_kernel.h: kReductionTileRows of
# kReductionTileVectors vectors) and the vectors of a few-rows tile of R rows (kFewRowsVectors<R>), per ISA.
VECTOR = {"avx2": 8, "avx512": 16}
FULL_ROWS = {"avx2": 4, "avx512": 6}
REGISTERS = {"avx2": 16, "avx512": 32}


def few_rows_vectors(isa, rows):
    return min(8, (REGISTERS[isa] - 1) // (rows + 1))


def isas_here():
    """The ISAs of the tap tiles this CPU runs (avx512_bf16's convs take AVX-512's tiles)."""
    return [isa for isa in blocked_isas_here() if isa in VECTOR]


def conv_path(case, isa):
    x, w, b = case.random_inputs()
    with cpu_isa_limit(isa):
        return torch.ops.fastpad._conv_path(x, w, b, *case.conv_op_arguments(), "cpu")


def run_case(case, isa):
    """fastpad's output for fresh random inputs against the float64 reference at `isa`, after asserting that the conv
    takes the tap tiles there."""
    run_blocked_case(case, isa, expected_path=f"cpu_tap_tiles_{isa}")


def test_the_rule_takes_few_output_channels_on_wide_rows():
    """In place of the blocked kernel, with a reduction of 8 or more: NCHW with at most half a vector of output
    channels per group on rows of 14 or more (28 with a stride), or fewer than two vectors at stride 1 on rows of 28 or
    more (not where the bfloat16 dot products take the conv); channels-last with at most half a vector on the same rows
    and 4 taps per stride phase or more. Every NCHW conv the blocked kernel does not take (1x1 kernels; stems, one
    group under 16 input channels with a reduction under 128, but on AVX-512 rows under 28 with more than 8 output
    channels), in place of torch's GEMMs. Never float64."""
    if not isas_here():
        pytest.skip("this CPU has neither AVX2 nor AVX-512")
    for isa in isas_here():
        lanes, tiles = VECTOR[isa], f"cpu_tap_tiles_{isa}"

        def path(width, c_out, stride=1, c_in=16, kernel=3, groups=1, **fields):
            return conv_path(ConvCase(False, (12, width), c_in * groups, c_out * groups, kernel, stride, "same",
                                      padding_mode="reflect", groups=groups, **fields), isa)
        assert path(14, lanes // 2) == tiles
        assert path(13, lanes // 2) != tiles
        assert path(14, lanes // 2 + 1) != tiles
        assert path(56, lanes // 2, stride=2) == tiles  # 28 output columns
        assert path(54, lanes // 2, stride=2) != tiles  # 27
        assert path(28, 2 * lanes - 1) == tiles
        assert path(27, 2 * lanes - 1) != tiles
        assert path(28, 2 * lanes) != tiles
        assert path(56, lanes // 2 + 1, stride=2) != tiles
        assert path(28, 4, kernel=1) == tiles  # in place of the tap GEMMs
        assert path(7, 4 * lanes, kernel=1) == tiles  # any output channels, any rows
        assert path(28, 23, c_in=3, kernel=1, stride=3, groups=8) == tiles  # grouped 1x1, a reduction of 3
        assert path(28, 4, c_in=15) == tiles  # a stem with a reduction of 135: the blocked kernel's
        # A stem with a reduction of 27 (the column GEMM's before) on rows under 28: AVX-512's blocked kernel from 9
        # output channels (kBlockedStemMaxColumns), the tiles on AVX2.
        narrow = tiles if isa == "avx2" else "cpu_blocked_avx512"
        assert path(14, 4 * lanes, c_in=3) == narrow
        assert path(13, 4 * lanes, c_in=3) == narrow
        assert path(27, 9, c_in=3) == narrow
        assert path(27, 8, c_in=3) == tiles
        assert path(56, 4 * lanes, c_in=3, stride=2) == tiles  # 28 columns
        assert path(28, 4 * lanes, c_in=14) == tiles  # 126
        assert path(28, 4 * lanes, c_in=15) != tiles  # 135: the blocked kernel's
        assert path(28, 4 * lanes, c_in=2, kernel=(1, 3)) == tiles  # a stem with a reduction of 6
        assert path(28, 4 * lanes, c_in=3, groups=2) != tiles  # not a stem: NCHW grouped, the blocked kernel's
        assert path(28, 4, c_in=16, groups=3) == tiles  # NCHW grouped: the blocked kernel's
        # Under 16 input channels per group, NCHW grouped convs sum their groups' planes (test_conv.py).
        assert path(28, 4, c_in=4, groups=3) == "cpu_grouped_planes"
        assert path(28, 4, c_in=2, kernel=(1, 3), groups=3) != tiles  # a reduction of 6
        assert path(28, 4, dtype="float64") != tiles
        assert path(28, 4, dtype="bfloat16") == tiles
        assert path(14, lanes // 2, layout="channels_last") == tiles
        assert path(28, lanes // 2 + 1, layout="channels_last") != tiles
        assert path(28, 4, kernel=(1, 3), layout="channels_last") != tiles  # 3 taps
        assert path(56, 4, stride=2, kernel=3, layout="channels_last") != tiles  # 9 taps over 4 phases
        assert path(56, 4, stride=2, kernel=4, layout="channels_last") == tiles  # 16
    if "avx512_bf16" == machine_isa():
        def bf16_path(c_out, c_in=16):
            return conv_path(ConvCase(False, (4, 28), c_in, c_out, 3, 1, "same", padding_mode="reflect",
                                      dtype="bfloat16"), "avx512_bf16")
        assert bf16_path(8) == "cpu_tap_tiles_avx512"
        assert bf16_path(12) == "cpu_blocked_avx512_bf16"
        assert bf16_path(12, c_in=17) == "cpu_tap_tiles_avx512"  # odd: no pairs for the dot products
        assert bf16_path(64, c_in=4) == "cpu_tap_tiles_avx512"  # a stem: the tap tiles, pairs or not


# 3-d convs on the tap tiles whose first depth taps, or all of them, read zero padding: the band buffer is set by the
# first depth tap the tiles run (from the bias), or filled with the bias where none runs.
DEPTH_PADDING = [
    ConvCase(False, (4, 6, 30), 8, 4, (1, 3, 3), 1, ((2, 2), (1, 1), (1, 1))),
    ConvCase(False, (3, 6, 30), 8, 4, 3, 1, ((2, 1), (1, 1), (1, 1))),
    ConvCase(False, (4, 5, 30), 8, 4, (1, 3, 3), 1, ((1, 2), (1, 1), (1, 1)), layout="channels_last"),
]


@pytest.mark.parametrize("case", DEPTH_PADDING, ids=lambda case: case.describe())
def test_depth_taps_in_zero_padding_leave_the_bias(case):
    """Output depths whose depth taps read only zero padding are the bias; the others start from it at the first depth
    tap inside x (against the float64 reference, the output poisoned, at every ISA here)."""
    if not isas_here():
        pytest.skip("this CPU has neither AVX2 nor AVX-512")
    for isa in isas_here():
        run_blocked_case(case, isa, expected_path=f"cpu_tap_tiles_{isa}")


# Channels-last grouped convs that depthwise.cpp's expanded rows would take (up to 3 output channels per group): at
# stride 1, over rows of 28 or more, with a reduction of 32 or more per group; 2-d and 3-d, dilation 2, every mode.
GROUPED_OVER_EXPANDED = [
    ConvCase(False, (10, 30), 24, 8, 5, 1, "same", groups=4, layout="channels_last"),
    ConvCase(False, (12, 28), 32, 12, 3, 1, "same", padding_mode="reflect", groups=4, layout="channels_last"),
    ConvCase(False, (30, 40), 32, 12, 7, 1, ((9, 7), (2, 12)), dilation=2, padding_mode="reflect", groups=4,
             layout="channels_last", bias=False),
    ConvCase(False, (4, 5, 30), 36, 8, (2, 3, 2), 1, "same", groups=4, padding_mode="replicate",
             layout="channels_last"),
    ConvCase(False, (9, 33), 48, 16, (3, 5), 1, "causal", groups=16, padding_mode="circular", layout="channels_last"),
]


@pytest.mark.parametrize("case", GROUPED_OVER_EXPANDED, ids=lambda case: case.describe())
def test_channels_last_grouped_convs_take_the_tiles_over_expanded_rows(case):
    """kernel_paths.h's cpu_tap_tiles_over_grouped_expanded: the tap tiles' vectors along positions, not the expanded
    rows' along output channels, for these convs (against the float64 reference, the output poisoned, at every ISA
    here)."""
    if not isas_here():
        pytest.skip("this CPU has neither AVX2 nor AVX-512")
    for isa in isas_here():
        run_blocked_case(case, isa, expected_path=f"cpu_tap_tiles_{isa}")


def test_the_tiles_over_expanded_rows_bounds():
    """Where the expanded rows keep a channels-last grouped conv: rows under 28, a stride, a reduction under 32 per
    group (3 input channels x 9 taps; 4 x 9 goes to the tiles), float64 (which the tiles do not take) and bfloat16."""
    if not isas_here():
        pytest.skip("this CPU has neither AVX2 nor AVX-512")
    for isa in isas_here():
        def path(width, c_in=8, stride=1, dtype="float32"):
            return conv_path(ConvCase(False, (12, width), 4 * c_in, 12, 3, stride, "same", groups=4, dtype=dtype,
                                      padding_mode="reflect", layout="channels_last"), isa)
        expanded = tiles_kernel("cpu_grouped_expanded", isa, channels=12)
        assert path(28) == f"cpu_tap_tiles_{isa}"
        assert path(27) == expanded
        assert path(56, stride=2) == expanded  # 28 output columns
        assert path(28, c_in=3) == expanded
        assert path(28, c_in=4) == f"cpu_tap_tiles_{isa}"
        assert path(28, dtype="float64") == "cpu_grouped_expanded"
        assert path(28, dtype="bfloat16") == tiles_kernel("cpu_grouped_expanded", isa, torch.bfloat16, channels=12)


# NCHW stems the rule takes from the column GEMM: more output channels than the tiles' full rows, 1-3 dims, strides,
# the suite's TF 'same' stem pads, every mode, the reduced-precision dtypes, rows under 14 wide and reductions under 8;
# and 1x1 kernels, from the tap GEMMs and (grouped, few channels per group) the column GEMM: reductions of 2-3 and 24,
# strided, 1-3 dims. On AVX-512 the stems with rows under 28 and more than 8 output channels take the blocked kernel
# (blocked_narrow_stem), which they are checked on there; the ones to 8 channels and over rows of 28 keep the tiles.
STEMS = [ConvCase(False, (30, 29), 3, 32, 3, 2, "same"),
         ConvCase(False, (30, 56), 3, 32, 3, 2, "same"),
         ConvCase(False, (11, 13), 3, 8, 3, 1, "same", padding_mode="reflect"),
         ConvCase(False, (9, 40), 2, 8, (1, 3), 2, "causal", padding_mode="circular"),
         ConvCase(False, (17, 40), 3, 40, (7, 5), 2, "same", padding_mode="reflect", bias=False),
         ConvCase(False, (9, 14), 2, 24, (3, 8), 1, "causal", padding_mode="replicate"),
         ConvCase(False, (300,), 2, 64, 9, 4, "same", padding_mode="circular", batch=3),
         ConvCase(False, (5, 6, 30), 3, 20, 3, (1, 1, 2), "same", dilation=(1, 2, 1)),
         ConvCase(False, (16, 28), 4, 48, 3, 1, "same", dtype="bfloat16"),
         ConvCase(False, (16, 28), 3, 48, 3, 1, "same", dtype="float16", padding_mode="reflect"),
         ConvCase(False, (11, 13), 3, 40, 3, 1, "same", padding_mode="reflect"),
         ConvCase(False, (9, 40), 2, 37, (1, 3), 2, "causal", padding_mode="circular"),
         ConvCase(False, (11, 11), 24, 184, 1, 3, "valid", groups=8, batch=5),
         ConvCase(False, (10, 12), 4, 10, 1, 2, "same", groups=2, padding_mode="replicate", dtype="bfloat16"),
         ConvCase(False, (9, 13), 6, 54, 1, 1, "valid", groups=3),
         ConvCase(False, (50,), 24, 40, 1, 3, "valid", bias=False),
         ConvCase(False, (5, 7, 9), 24, 19, 1, 1, "valid")]


def blocked_narrow_stem(case, isa):
    """Whether kernel_paths.h's cpu_blocked_direct takes this NCHW stem (one group, a kernel of more than one tap, a
    reduction under 128) for its output rows under 28 positions and more than 8 output channels, on AVX-512."""
    weight_shape = case.weight_shape()
    return (isa == "avx512" and case.groups == 1 and math.prod(weight_shape[2:]) > 1
            and math.prod(weight_shape[1:]) < 128 and output_shape(case)[-1] < 28 and case.out_channels > 8)


@pytest.mark.parametrize("case", STEMS, ids=lambda case: case.describe())
def test_stems_and_1x1_kernels_on_the_tap_tiles(case):
    isas = isas_here()
    if not isas:
        pytest.skip("this CPU has neither AVX2 nor AVX-512")
    for isa in isas:
        if blocked_narrow_stem(case, isa):
            run_blocked_case(case, isa, expected_path="cpu_blocked_avx512")
        else:
            run_case(case, isa)


def every_tile_shape(isa):
    """1-d rows (one band row: the tiles' columns are the row's pitch rounded up to 8) whose column counts leave every
    count of vectors after the widest tiles, with and without a half vector on AVX-512, for every row count of a
    few-rows product; and the full tiles with a remainder of rows (output channels up to 2 full tiles + 1)."""
    vector, full = VECTOR[isa], FULL_ROWS[isa]
    cases = []
    for rows in range(1, 2 * full + 2):
        widest = few_rows_vectors(isa, rows) if rows < full else 4 if isa == "avx512" else 3
        # The pitch is the width + 2 (a 3-tap kernel): columns = round_up(width + 2, 8) run over every multiple of 8
        # from the narrowest row the rule takes.
        for columns in range(16, 16 + 2 * widest * vector + 1, 8):
            width = columns - 2
            if rows > vector // 2 and width < 28:
                continue
            cases.append(ConvCase(False, (width,), 16, rows, 3, padding="causal", batch=1, bias=columns % 16 == 0))
    return cases


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_every_tile_shape(isa):
    if isa not in isas_here():
        pytest.skip(f"this CPU lacks {isa} (it has {machine_isa()})")
    for case in every_tile_shape(isa):
        run_case(case, isa)


def random_case(rng, isa):
    """A conv the rule sends to the tap tiles: 1-3 dims, groups, strides, dilations, per-side pads in every mode."""
    lanes = VECTOR[isa]
    while True:
        dims = rng.choice([1, 2, 2, 3])
        groups = rng.choice([1, 1, 2, 3])
        kernel = tuple(rng.randint(1, 4) for _ in range(dims))
        dilation = tuple(rng.randint(1, 2) for _ in range(dims))
        stride = tuple(rng.randint(1, 3) for _ in range(dims))
        size = tuple(rng.randint((k - 1) * d + 1, (k - 1) * d + 4) for k, d in zip(kernel[:-1], dilation[:-1])) + \
            (rng.randint(28, 90),)
        mode = rng.choice(["zeros", "zeros", "reflect", "replicate", "circular"])
        pads = tuple((rng.randint(0, min(3, s - 1)), rng.randint(0, min(3, s - 1))) for s in size)
        if mode == "zeros":
            pads = tuple((lo, lo + 1) for lo, _ in pads)
        c_out = rng.randint(1, 2 * lanes - 1)
        layout = "channels_last" if dims > 1 and rng.random() < 0.5 else "contiguous"
        case = ConvCase(False, size, groups * rng.choice([3, 7, 16, 21]), groups * c_out, kernel, stride, pads,
                        dilation=dilation, groups=groups, padding_mode=mode, batch=rng.randint(1, 3),
                        bias=rng.random() < 0.7, layout=layout, dtype=rng.choice(["float32", "float32", "bfloat16"]))
        if conv_path(case, isa) == f"cpu_tap_tiles_{isa}":
            return case


@pytest.mark.parametrize("seed", range(3))
def test_random_cases_at_every_isa_here(seed):
    rng = random.Random(300 + seed)
    isas = isas_here()
    if not isas:
        pytest.skip("this CPU has neither AVX2 nor AVX-512")
    for _ in range(20):
        isa = rng.choice(isas)
        run_case(random_case(rng, isa), isa)


@pytest.mark.parametrize("padding_mode", ["zeros", "reflect"])
def test_a_long_row_goes_in_column_tiles(padding_mode):
    """A 40,000-sample row: the 1 MiB band holds 1 MiB / (16 channels x 4 B x phases + 4 outputs x 4 B) = 13,107
    columns at stride 1 and 5,041 at stride 3, so the planes tile it with the halo of the 5 taps."""
    isas = isas_here()
    if not isas:
        pytest.skip("this CPU has neither AVX2 nor AVX-512")
    for stride in (1, 3):
        run_case(ConvCase(False, (40_000 // stride,), 16, 4, 5, stride, "causal", padding_mode=padding_mode, batch=1),
                 isas[-1])


# NCHW float32 convs whose kernel is one column wide and one deep (conv.cpp's tap_gemm_conv, tiles_write_y): every
# band is whole rows of y with no columns between them, so the tiles write y itself, from the bias. Output rows of a
# masked last vector (157 x 157, 30 wide: 16-lane vectors), a band of every row in turn, strides, a k3x1 kernel in
# reflect (rows read in the planes' halo), groups, no bias, and a 3-d conv whose depth pads leave output slices of
# the bias alone; the output allocator poisoned, so that a position the tiles skip fails.
ONE_COLUMN_KERNELS = [
    ConvCase(False, (157, 157), 6, 103, 1, 1, "same", batch=1),
    ConvCase(False, (286, 286), 3, 313, 1, 3, "valid", batch=1),
    ConvCase(False, (12, 30), 4, 20, 1, 1, "valid", bias=False),
    ConvCase(False, (20, 33), 3, 18, (3, 1), 1, "same", padding_mode="reflect", batch=3),
    ConvCase(False, (11, 11), 24, 184, 1, 3, "valid", groups=8, batch=5),
    ConvCase(False, (4, 9, 30), 5, 21, 1, 1, ((2, 1), (0, 0), (0, 0)), batch=2),
    ConvCase(False, (4, 9, 30), 5, 21, 1, 1, ((1, 2), (0, 0), (0, 0)), bias=False),
]


@pytest.mark.parametrize("case", ONE_COLUMN_KERNELS, ids=lambda case: case.describe())
def test_one_column_kernels_write_the_output_in_place(case):
    isas = isas_here()
    if not isas:
        pytest.skip("this CPU has neither AVX2 nor AVX-512")
    for isa in isas:
        run_case(case, isa)
