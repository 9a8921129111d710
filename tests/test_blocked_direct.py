"""The register-blocked direct conv kernels (cpu/blocked_direct.h): every tile shape they have, at every ISA this CPU
runs, in NCHW and channels-last, 1-3 spatial dims, every padding mode, float32 and bfloat16, against the float64
reference with the output allocator poisoned; each case asserts the kernel it reaches. Also the run-time ISA choice
(FASTPAD_CPU_ISA) and the FMA-peak microbenchmark behind `python -m fastpad bench`."""

import math
import os
import platform
import random
import shutil
import subprocess
import time
from dataclasses import replace

import pytest
import torch

from code_paths import ISA_ORDER, cpu_isa_limit, intra_op_threads, machine_isa, reduction_tiles_kernel, require_isa
from reference import assert_matches, poison
from fastpad.cases import ConvCase, arrange
import fastpad._C

# The widest block of output channels, the vector, the registers of each ISA (cpu/blocked_direct.h), and positions
# per tile of U vectors (blocked_direct_kernel.h: min(16, (registers - U - 1) / U)).
# The bfloat16 dot-product kernel (avx512_bf16) has AVX-512's tiles.
BLOCK = {"avx2": (24, 8, 16), "avx512": (64, 16, 32), "avx512_bf16": (64, 16, 32)}  # (widest block, vector, registers)


def tile_positions(isa, vectors):
    return min(16, (BLOCK[isa][2] - vectors - 1) // vectors)


def isas_here():
    return [isa for isa in ISA_ORDER[1:] if ISA_ORDER.index(isa) <= ISA_ORDER.index(machine_isa())]


def reads_no_padding(case):
    """Whether no tap of any output of a (non-transposed) case reads padding: along every dim, the first output's
    first tap at or after position 0 and the last output's last tap before the end."""
    stride, pad_lo, _, dilation, _, _ = case.conv_op_arguments()
    sizes = case.conv_output_size()
    return all(lo <= 0 and (o - 1) * s - lo + (k - 1) * d < n
               for n, o, k, s, lo, d in zip(case.size, sizes, case.per_dim(case.kernel), stride, pad_lo, dilation))


def transposed_reads_no_padding(case):
    """Whether the convs a transposed case's stride phases are read no padding of x: along every dim, each output
    position's taps that land on x positions (p + crop_lo - t * dilation a multiple of the stride) land inside x."""
    crop_lo, out_size = case.crops()
    return all(0 <= (p + lo - t * d) // s < n
               for n, m, k, s, d, lo in zip(case.size, out_size, case.per_dim(case.kernel), case.per_dim(case.stride),
                                            case.per_dim(case.dilation), crop_lo)
               for p in range(m) for t in range(k) if (p + lo - t * d) % s == 0)


def takes_half_vector_tap_tiles(case, isa):
    """Whether a (non-transposed) case the blocked kernel could take runs on the tap tiles instead, by kernel_paths.h's
    cpu_tap_tiles_reason: at most half a vector of output channels per group on output rows of 14 or more (28 with a
    stride), channels-last also with 4 taps per stride phase or more. (Its other reason, fewer than two vectors on
    NCHW rows of 28 or more at stride 1, is out of reach of this file's random sizes.)"""
    if case.transposed or isa == "baseline":
        return False
    lanes = BLOCK[isa][1]
    stride = case.per_dim(case.stride)
    phases = math.prod(stride)
    taps = math.prod(case.per_dim(case.kernel))
    wide_rows = case.conv_output_size()[-1] >= (28 if phases > 1 else 14)
    few_channels = 2 * (case.out_channels // case.groups) <= lanes
    enough_taps = case.layout != "channels_last" or taps >= 4 * phases
    return few_channels and wide_rows and enough_taps and (case.in_channels // case.groups) * taps >= 8


def takes_channel_dots(case, isa):
    """Whether a (non-transposed) case the blocked kernel could take runs cpu/channel_dots.h instead, by
    kernel_paths.h's cpu_channel_dots: channels-last float32, at most 6 (AVX-512) or 4 (AVX2) output channels per
    group, at least 32 input channels per group and 128 products per output value."""
    if case.transposed or case.layout != "channels_last" or case.dtype != "float32":
        return False
    most_out = 4 if isa == "avx2" else 6
    in_per_group = case.in_channels // case.groups
    return (case.out_channels // case.groups <= most_out and in_per_group >= 32 and
            in_per_group * math.prod(case.per_dim(case.kernel)) >= 128)


def blocked_path(case, isa):
    """The blocked kernel a case reaches at `isa` (or the tap tiles, takes_half_vector_tap_tiles, or the channel dot
    products, takes_channel_dots): float32 channels-last convs whose padding no tap reads, and transposed ones whose
    stride phases read none, read their input in place (cpu_blocked_no_planes_*); at avx512_bf16, the dot products
    take bfloat16 convs (not transposed ones) with an even number of input channels per group, and every other case
    AVX-512's float32 FMAs."""
    vector_isa = "avx512" if isa == "avx512_bf16" else isa
    if takes_half_vector_tap_tiles(case, isa):
        return f"cpu_tap_tiles_{vector_isa}"
    if takes_channel_dots(case, isa):
        return f"cpu_channel_dots_{vector_isa}"
    no_padding_read = transposed_reads_no_padding(case) if case.transposed else reads_no_padding(case)
    if case.layout == "channels_last" and case.dtype == "float32" and no_padding_read:
        return f"cpu_blocked_no_planes_{vector_isa}"
    if isa == "avx512_bf16":
        pairs = case.dtype == "bfloat16" and not case.transposed and (case.in_channels // case.groups) % 2 == 0
        return "cpu_blocked_avx512_bf16" if pairs else "cpu_blocked_avx512"
    return f"cpu_blocked_{isa}"


def run_case(case, isa, expected_path=None, weight_layout="contiguous"):
    """fastpad's output for fresh random inputs (the weight arranged in `weight_layout`) against the float64
    reference, at `isa`; asserts the kernel (for a transposed case, of the conv_transpose op): expected_path, or the
    blocked kernel the case reaches there."""
    x, w, b = case.random_inputs()
    w = arrange(w, weight_layout)
    with torch.no_grad():
        expected = case.reference_function()(x.double(), w.double(), None if b is None else b.double())
    with cpu_isa_limit(isa):
        if case.transposed:
            crop_lo, out_size = case.crops()
            path = torch.ops.fastpad._conv_transpose_path(x, w, b, list(case.per_dim(case.stride)), crop_lo, out_size,
                                                          list(case.per_dim(case.dilation)), case.groups, "zeros",
                                                          "cpu")
        else:
            path = torch.ops.fastpad._conv_path(x, w, b, *case.conv_op_arguments(), "cpu")
        assert path == (expected_path or blocked_path(case, isa)), case.describe()
        poison(expected.shape, x.dtype)
        y = case.fastpad_function()(x, w, b)
    assert_matches(y, expected.to(y.dtype), what=f"{case.describe()}, weight {weight_layout}")


def run_case_at_isa(isa, case):
    """run_case at `isa` where this CPU runs it, the case in bfloat16 at avx512_bf16 (the dot products)."""
    require_isa(isa)
    if isa == "avx512_bf16":
        case = replace(case, dtype="bfloat16")
    run_case(case, isa)


def last_block_vectors(isa, channels):
    """The vectors of the last block of output channels (cpu/blocked_direct.h's blocked_direct_block_width: the most
    vectors, down to two, that leave no last block of one vector)."""
    widest, vector, _ = BLOCK[isa]
    width = widest
    for vectors in range(widest // vector, 1, -1):
        last = channels % (vectors * vector)
        if last == 0 or last > vector:
            width = vectors * vector
            break
    last = channels % width or width
    return -(-last // vector)


def every_tile_shape(isa):
    """For each count U of vectors a last block can have, a channel count (after at least one whole block where one
    exists) that ends in it, with row widths of every count of positions up to a tile's P (one tile) and from 2P to 3P
    - 1 (three tiles of sizes that differ by one at most, blocked_direct_kernel.h's all_positions); and bands with their
    depth taps all in the padding (bias only). One vector only where the channels fit in one: channels-last, since
    NCHW rows this wide take the tap tiles there (kernel_paths.h's cpu_tap_tiles). On AVX-512, tiles of up to 9
    positions (3 and 4 vectors) take a band's rows as one run, their positions running on into the next row, so these
    rows also end inside tiles at every position."""
    widest, vector, _ = BLOCK[isa]
    cases = []
    for vectors in range(1, widest // vector + 1):
        out_channels = next(c for c in range(widest + 1, 4 * widest) if last_block_vectors(isa, c) == vectors) \
            if vectors > 1 else vector - 3
        layout = "channels_last" if vectors == 1 else "contiguous"
        positions = tile_positions(isa, vectors)
        for remainder in range(positions):
            for width in (remainder + 1, 2 * positions + remainder):
                cases.append(ConvCase(False, (3, width), 16, out_channels, 3, padding="same", batch=1,
                                      layout=layout))
    cases.append(ConvCase(False, (2, 5, 6), 16, 20, 3, padding=((3, 3), (1, 1), (1, 1)), batch=1))
    return cases


@pytest.mark.parametrize("isa", ["avx2", "avx512", "avx512_bf16"])
def test_every_tile_shape(isa):
    """At avx512_bf16 in bfloat16, so that every shape runs the dot-product kernel."""
    require_isa(isa)
    for case in every_tile_shape(isa):
        run_case(replace(case, dtype="bfloat16") if isa == "avx512_bf16" else case, isa)


def no_nchw_1x1(kernel, layout):
    """kernel, or (2, ...) for an all-ones kernel in NCHW: NCHW 1x1 convs take the GEMMs (test_kernel_paths.py)."""
    return (2,) + kernel[1:] if layout == "contiguous" and all(k == 1 for k in kernel) else kernel


def random_case(rng):
    dims = rng.choice([1, 2, 2, 3])
    groups = rng.choice([1, 1, 2, 3])
    layout = "channels_last" if dims > 1 and rng.random() < 0.5 else "contiguous"
    kernel = no_nchw_1x1(tuple(rng.randint(1, 4) for _ in range(dims)), layout)
    dilation = tuple(rng.randint(1, 2) for _ in range(dims))
    size = tuple(rng.randint((k - 1) * d + 1, 12 if dims < 3 else 7) for k, d in zip(kernel, dilation))
    mode = rng.choice(["zeros", "zeros", "reflect", "replicate", "circular"])
    # Per-side pads below each size, so that every mode can take them; asymmetric, so torch's own conv never does.
    pads = tuple((rng.randint(0, min(3, s - 1)), rng.randint(0, min(3, s - 1))) for s in size)
    if mode == "zeros":
        pads = tuple((lo, lo + 1) for lo, _ in pads)
    return ConvCase(False, size, groups * rng.choice([16, 17, 40]), groups * rng.choice([1, 9, 24, 33, 70]), kernel,
                    tuple(rng.randint(1, 3) for _ in range(dims)), pads, dilation=dilation, groups=groups,
                    padding_mode=mode, batch=rng.randint(1, 3), bias=rng.random() < 0.7, layout=layout,
                    dtype=rng.choice(["float32", "float32", "bfloat16"]))


# Short rows of many: tiles that run on into the next rows (AVX-512, up to 9 positions a tile, and tiles of 1 or 2
# vectors where a row's tiles would hold fewer; AVX2 keeps to rows).
ROW_RUN_CASES = [
    # Read in place: the band buffer alone sizes the bands (8 rows of 8 positions: 64 positions in tiles of 6 and 5).
    ConvCase(False, (23, 23), 40, 64, 5, padding="valid", dilation=2, batch=3, layout="channels_last"),
    # Phase planes, NCHW, 3 vectors (48 lanes for 40 channels: tiles of 9) over rows of 7, stride 2.
    ConvCase(False, (13, 14), 24, 40, 3, stride=2, padding="same", batch=2),
    # 3-d, channels-last planes, reflect: a band's rows of 5 run on through the depth taps' sums.
    ConvCase(False, (4, 6, 5), 16, 64, 3, padding="same", padding_mode="reflect", batch=2, layout="channels_last"),
    # 2 and 1 vectors (tiles of 14 and 16 positions in a row) over rows of 3: listed tiles of 9 instead of 3 a row.
    ConvCase(False, (29, 9), 56, 80, (6, 3), stride=3, padding="causal", dilation=2, groups=4,
             padding_mode="replicate", batch=2, bias=False, layout="channels_last"),
    ConvCase(False, (11, 7), 8, 44, (3, 2), stride=(1, 3), padding="same", groups=2, batch=1),
]


@pytest.mark.parametrize("case", ROW_RUN_CASES, ids=ConvCase.describe)
@pytest.mark.parametrize("isa", ["avx2", "avx512", "avx512_bf16"])
def test_tiles_run_on_into_the_next_row(isa, case):
    require_isa(isa)
    run_case(replace(case, dtype="bfloat16") if isa == "avx512_bf16" and case.layout == "contiguous" else case, isa)


@pytest.mark.parametrize("weight_layout", ["contiguous", "channels_last", "strided", "expanded"])
@pytest.mark.parametrize("isa", ["avx2", "avx512", "avx512_bf16"])
def test_the_weight_is_packed_through_its_strides(isa, weight_layout):
    """The packing reads the weight in place whatever its strides (a model's weight in channels_last, as
    `model.to(memory_format=torch.channels_last)` leaves it; a strided view; an expanded one): 1-d, 2-d in both layouts
    with a partial last block, 3-d, grouped, and a bfloat16 conv on the dot products. In float32, weights whose taps
    are contiguous (contiguous, expanded) are packed a vector of output channels at a time, transposed in registers
    (one run per input channel in 3-d, one run for all of them otherwise; 70 output channels leave a block's last 16
    lanes with none), and so are channels-last ones (one run of input channels per tap), the others a value at a
    time."""
    require_isa(isa)
    dtype = "bfloat16" if isa == "avx512_bf16" else "float32"
    for case in (ConvCase(False, (19,), 16, 24, 5, padding="causal", batch=2, dtype=dtype),
                 ConvCase(False, (7, 9), 32, 40, (3, 4), padding="same", padding_mode="reflect", groups=2, batch=2,
                          dtype=dtype),
                 ConvCase(False, (7, 9), 18, 70, 3, stride=2, padding="same", batch=1, dtype=dtype,
                          layout="channels_last"),
                 ConvCase(False, (3, 4, 5), 16, 20, (2, 3, 2), padding=((0, 1), (1, 1), (1, 0)), batch=1, dtype=dtype,
                          layout="channels_last")):
        run_case(case, isa, weight_layout=weight_layout)


@pytest.mark.parametrize("isa", ["avx2", "avx512", "avx512_bf16"])
def test_large_weights_go_in_tap_passes(isa):
    """A block's packed weights over 512 KiB run in passes of taps (conv.cpp's kBlockedWeightPassBytes), each adding
    onto the outputs: 300 input channels x 48 output channels x 25 taps is 1.4 MiB in float32 (9 taps of 57.7 KiB a
    pass: 9 + 9 + 7) and 0.7 MiB in bfloat16 (18 + 7); a 3-d k3 256 -> 128, 576 KiB at every kernel depth in float32
    (8 + 1)."""
    require_isa(isa)
    dtype = "bfloat16" if isa == "avx512_bf16" else "float32"
    for case in (ConvCase(False, (6, 7), 300, 48, 5, padding="same", padding_mode="reflect", batch=2, dtype=dtype),
                 ConvCase(False, (3, 4, 5), 256, 128, 3, padding=((0, 2), (1, 1), (2, 0)), batch=1, dtype=dtype,
                          layout="channels_last")):
        run_case(case, isa)


# 3-d convs whose consecutive output depths read the same input slices (a depth stride below the kernel's depth): each
# thread keeps the phase planes of the kernel's depth extent of slices of its band (conv.cpp's depth slots,
# depth_slot_span) and gathers each slice once, reusing it across output depths and output-channel splits of the band;
# where those planes outgrow kDepthSlotsBytes (512 KiB), one slot gathers every depth tap as before. Cases: strides
# 1-3 below and at the kernel's depth, a depth dilation, zero padding that some depth taps read whole (slices skipped),
# the border modes whose depth taps read one slice twice, several bands and images, groups, one output depth split
# over output-channel blocks, and the fallback (64 channels over 40 x 40 slices, 4 depth taps).
DEPTH_SLOT_CASES = [
    ConvCase(False, (17, 9, 8), 7, 14, (6, 3, 3), stride=(3, 1, 2), padding=((0, 3), (1, 1), (2, 2)), batch=2,
             layout="channels_last"),
    ConvCase(False, (12, 8, 9), 16, 20, (2, 3, 3), padding="same", batch=2),
    ConvCase(False, (11, 7, 7), 5, 18, (3, 3, 2), dilation=(2, 1, 1), padding="same", padding_mode="reflect",
             batch=1, layout="channels_last"),
    ConvCase(False, (10, 8, 8), 32, 24, (4, 3, 3), stride=(2, 1, 1), padding="same", padding_mode="replicate",
             groups=2, batch=2),
    ConvCase(False, (9, 6, 10), 6, 9, (5, 2, 3), stride=(2, 2, 1), padding="same", padding_mode="circular", batch=1,
             layout="channels_last"),
    ConvCase(False, (8, 6, 6), 8, 16, (3, 3, 3), stride=(3, 1, 1), padding=((4, 4), (1, 1), (1, 1)), batch=1),
    ConvCase(False, (7, 30, 30), 24, 160, (3, 3, 3), padding="same", batch=1, layout="channels_last"),
    ConvCase(False, (6, 40, 40), 64, 16, (4, 3, 3), padding="same", batch=1, layout="channels_last"),
]


@pytest.mark.parametrize("case", DEPTH_SLOT_CASES, ids=ConvCase.describe)
@pytest.mark.parametrize("isa", ["avx2", "avx512", "avx512_bf16"])
def test_depth_slots_gather_each_input_slice_once(isa, case):
    """Every case against the float64 reference, at every ISA here (bfloat16 on the dot products at avx512_bf16)."""
    run_case_at_isa(isa, case)


# Runs of taps read as one tap (cpu/blocked_direct.h's blocked_tap_run): under 16 input channels per group, a kernel
# row's taps at stride 1 and dilation 1 follow one another in the phase planes (either layout), and in place (a float32
# channels-last x whose padding no tap reads) over one group's x; the runs are the gcd of the rows' lengths (NCHW
# cases grouped: NCHW stems take the tap tiles). Cases whose taps form no run (a stride along the row, a dilation,
# groups in place) keep a run of one.
TAP_RUN_CASES = [
    ConvCase(False, (9, 11), 20, 56, 5, padding=((3, 0), (2, 4)), groups=4, batch=2, layout="channels_last"),
    ConvCase(False, (8, 10), 6, 36, (3, 4), padding="same", padding_mode="reflect", groups=2, batch=2),
    ConvCase(False, (9, 12), 4, 24, 3, padding="valid", batch=2, layout="channels_last"),
    ConvCase(False, (4, 6, 7), 7, 14, (2, 3, 3), padding=((1, 0), (1, 1), (0, 2)), batch=1, layout="channels_last"),
    ConvCase(False, (20,), 12, 40, 5, padding="causal", padding_mode="replicate", groups=2, batch=3),
    ConvCase(False, (14, 14), 15, 64, 12, padding="same", batch=1, layout="channels_last"),
    ConvCase(False, (9, 12), 6, 20, (3, 4), stride=(1, 2), padding="same", batch=2, layout="channels_last"),
    ConvCase(False, (9, 12), 12, 40, 3, dilation=(1, 2), padding="same", groups=2, batch=2),
    ConvCase(False, (9, 12), 8, 24, (2, 3), padding="valid", groups=2, batch=2, layout="channels_last"),
]


@pytest.mark.parametrize("case", TAP_RUN_CASES, ids=ConvCase.describe)
@pytest.mark.parametrize("isa", ["avx2", "avx512", "avx512_bf16"])
def test_taps_in_runs_are_read_as_one(isa, case):
    """Planes in both layouts and 1-3 dims, in place, a 12 x 12 kernel whose 553 KiB of weights go in two passes of
    runs (11 + 1), and the cases with no runs; at avx512_bf16 in bfloat16 on the dot products (even channel counts)."""
    run_case_at_isa(isa, case)


@pytest.mark.parametrize("padding_mode", ["zeros", "reflect"])
def test_a_long_row_goes_in_column_tiles(padding_mode):
    """A 40,000-sample row: the 256 KiB band holds 256 KiB / (16 lanes x 4 B + 48 channels' vectors x 4 B) = 1024
    columns, so the planes tile it (cpu/phase_planes.h) with the halo of the 5 taps. (40 output channels: with fewer
    than two vectors of them, a stride-1 NCHW row this long takes the tap tiles, test_tap_tiles.py.)"""
    isas = isas_here()
    if not isas:
        pytest.skip("this CPU has neither AVX2 nor AVX-512")
    for stride in (1, 3):
        run_case(ConvCase(False, (40_000 // stride,), 16, 40, 5, stride, "causal", padding_mode=padding_mode, batch=1),
                 isas[-1])


NO_PLANES_CASES = [
    # 'valid', a last block of one vector (24 channels), rows split between threads (batch 1, 23 rows).
    ConvCase(False, (25, 21), 20, 24, 3, padding="valid", batch=1, layout="channels_last"),
    # Strided, dilated, grouped: each group reads its own channels of every pixel.
    ConvCase(False, (17, 19), 64, 36, 3, stride=2, padding="valid", dilation=2, groups=4, batch=2,
             layout="channels_last"),
    # A pad at the end that the stride steps over (11 rows, k2 s3: the last tap reads row 10): nothing reads it.
    ConvCase(False, (11, 9), 16, 40, (2, 3), stride=(3, 2), padding=((0, 1), (0, 0)), padding_mode="reflect",
             batch=2, layout="channels_last"),
    # A 1x1 kernel: 'same' pads nothing.
    ConvCase(False, (13, 14), 40, 70, 1, stride=2, padding="same", batch=2, layout="channels_last"),
    # 3-d, grouped, the depth taps in place too.
    ConvCase(False, (5, 7, 8), 32, 34, (2, 3, 2), stride=(2, 1, 2), padding="valid", groups=2, batch=2,
             layout="channels_last"),
    # A row too long for one band: column tiles, each starting at its own pixel.
    ConvCase(False, (3, 2000), 16, 40, 3, padding="valid", batch=1, layout="channels_last"),
    # Weights over 512 KiB: the taps in passes, each adding onto the outputs.
    ConvCase(False, (9, 10), 300, 48, 5, padding="valid", batch=2, layout="channels_last"),
]


@pytest.mark.parametrize("case", NO_PLANES_CASES, ids=ConvCase.describe)
@pytest.mark.parametrize("isa", ["avx2", "avx512", "avx512_bf16"])
def test_a_channels_last_input_whose_padding_no_tap_reads_is_read_in_place(isa, case):
    """kernel_paths.h's cpu_blocked_no_planes: a float32 channels-last conv whose padding no tap reads runs the blocked
    tiles on the input itself (at avx512_bf16, AVX-512's float32 kernel)."""
    require_isa(isa)
    assert reads_no_padding(case)
    run_case(case, isa, expected_path="cpu_blocked_no_planes_" + ("avx512" if isa == "avx512_bf16" else isa))


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_the_phase_planes_stay_where_a_tap_reads_padding_or_the_input_is_not_float32(isa):
    """One padded pixel read, an NCHW input, or a 16-bit one (whose planes convert it): the planes are gathered."""
    require_isa(isa)
    valid = NO_PLANES_CASES[0]
    for case in (replace(valid, padding=((0, 0), (0, 1))), replace(valid, layout="contiguous"),
                 replace(valid, dtype="bfloat16"), replace(valid, dtype="float16")):
        assert not reads_no_padding(case) or case.layout != "channels_last" or case.dtype != "float32"
        run_case(case, isa, expected_path=f"cpu_blocked_{isa}")


# NCHW 16-bit outputs whose rows (12 positions or more) and channels (8 or more) go through the register transpose into
# float rows, converted into y a row at a time (conv.cpp's blocked_direct_conv): rows at and past the bound, a partial
# last block of channels, groups, 1-d, a row under the bound (11: value by value), and at avx512_bf16 the bfloat16 dot
# products' output (even input channels per group).
SIXTEEN_BIT_NCHW_CASES = [ConvCase(False, (5, 12), 16, 24, 3, 1, "same"),
                          ConvCase(False, (9, 27), 20, 40, 3, 1, "same", padding_mode="reflect", groups=2),
                          ConvCase(False, (70,), 17, 9, 4, 2, "causal", padding_mode="circular"),
                          ConvCase(False, (6, 11), 16, 32, 3, 1, "same", bias=False)]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("isa", ["avx2", "avx512", "avx512_bf16"])
def test_16_bit_nchw_outputs_through_the_transpose(isa, dtype):
    require_isa(isa)
    for case in SIXTEEN_BIT_NCHW_CASES:
        run_case(replace(case, dtype=dtype), isa)


def random_transposed_case(rng):
    """A stride-1 transposed conv: the conv it is runs on the blocked kernels (>= 16 x channels per group, and >= 10 y
    channels per group: kBlockedTransposeMinYChannels)."""
    dims = rng.choice([1, 2, 2, 3])
    groups = rng.choice([1, 1, 2])
    layout = "channels_last" if dims > 1 and rng.random() < 0.5 else "contiguous"
    kernel = no_nchw_1x1(tuple(rng.randint(1, 5) for _ in range(dims)), layout)
    dilation = tuple(rng.randint(1, 2) for _ in range(dims))
    size = tuple(rng.randint(1, 11 if dims < 3 else 6) for _ in kernel)
    # TF 'same', or per-side crops that leave at least one output of the full (k-1)*d + s (crops past the kernel's
    # extent included, where the conv it is has negative pads).
    # The output is at most 4x x's volume (kernel_paths.h's kBlockedTransposeMaxGrowth: larger, the col2im is faster).
    while True:
        crops, out_volume, x_volume = [], 1, 1
        for k, d, s in zip(kernel, dilation, size):
            lo = rng.randint(0, (k - 1) * d + s - 1)
            crops.append((lo, rng.randint(0, (k - 1) * d + s - 1 - lo)))
            out_volume, x_volume = out_volume * ((k - 1) * d + s - sum(crops[-1])), x_volume * s
        if out_volume <= 4 * x_volume:
            break
    padding = "same" if rng.random() < 0.4 else tuple(crops)
    return ConvCase(True, size, groups * rng.choice([16, 19, 32]), groups * rng.choice([10, 13, 24, 41]), kernel, 1,
                    padding, dilation=dilation, groups=groups, batch=rng.randint(1, 3), bias=rng.random() < 0.7,
                    layout=layout, dtype=rng.choice(["float32", "float32", "bfloat16"]))


@pytest.mark.parametrize("seed", range(3))
def test_stride_one_transposed_convs_at_every_isa_here(seed):
    rng = random.Random(100 + seed)
    isas = isas_here()
    if not isas:
        pytest.skip("this CPU has neither AVX2 nor AVX-512")
    for _ in range(20):
        run_case(random_transposed_case(rng), rng.choice(isas))


def random_few_channels_case(rng):
    """Fewer than 16 input channels per group (of the conv, or of the convs a transposed conv's phases are: x's), where
    kernel_paths.h still takes them to the blocked kernel: a reduction (channels per group x taps) of 8 or more
    (channels-last, and transposed in either layout), including transposed convs with one x channel per group (a
    depthwise conv's input gradient with a multiplier: one channel per position of the planes); NCHW grouped convs."""
    while True:
        dims = rng.choice([1, 2, 2, 3])
        transposed = rng.random() < 0.3
        layout = "channels_last" if dims > 1 and rng.random() < 0.6 else "contiguous"
        groups = rng.choice([2, 3, 5]) if layout == "contiguous" else rng.choice([1, 2, 3, 5])
        in_per_group, out_per_group = rng.choice([1, 1, 2, 3, 5, 8, 11, 15]), rng.choice([1, 2, 3, 9, 24])
        kernel = no_nchw_1x1(tuple(rng.randint(1, 4) for _ in range(dims)), layout)
        # A transposed conv runs one blocked conv per stride phase, each with about taps / phases taps.
        transposed_stride = (1,) * dims  # strided blocked phases need 2^18 multiply-adds each: STRIDED_TRANSPOSED
        # (A channels-last input with one channel is contiguous too, and runs as such.)
        nchw = layout == "contiguous" or groups * in_per_group == 1
        # (A conv with one input channel per group is depthwise with any multiplier; so is a transposed conv with one
        # y channel per group, which in channels-last and zeros mode runs its stride phases on the depthwise tiles.)
        depthwise = (out_per_group if transposed else in_per_group) == 1
        taps = phases = 1
        for k, s in zip(kernel, transposed_stride):
            taps, phases = taps * k, phases * (s if transposed else 1)
        # A transposed conv's rule is the channels-last one in both layouts (it has no column GEMM to keep stems).
        # With a stride, at least 2 taps per phase on average (with 'same', y is what the stride makes of x).
        blocked_transposed = in_per_group * max(1, taps // phases) >= 8 and (phases == 1 or taps >= 2 * phases)
        # Channels-last grouped convs with up to 3 output channels per group may take cpu_grouped_expanded instead
        # (tests/test_conv.py).
        grouped_expanded = not nchw and not transposed and groups > 1 and in_per_group > 1 and out_per_group <= 3
        # NCHW grouped transposed convs with up to 4 x and 2-16 y channels per group take cpu_grouped_planes
        # (tests/test_phase_planes.py, tests/code_paths.py), and so do NCHW grouped convs with 2-15 input and up to 16
        # output channels per group (at least 32 output positions; tests/test_conv.py).
        grouped_planes = nchw and groups > 1 and (
            (transposed and 1 < out_per_group <= 16 and in_per_group <= 4) or
            (not transposed and 1 < in_per_group <= 15 and out_per_group <= 16))
        # Channels-last transposed convs with one x and up to 4 y channels per group take the depthwise phases
        # (kernel_paths.h's kDepthwisePhasesMaxYPerX; tests/test_conv_transpose.py).
        depthwise_phases = transposed and not nchw and in_per_group == 1 and out_per_group <= 4
        if not depthwise and not grouped_expanded and not grouped_planes and not depthwise_phases and (
                (nchw and not transposed and groups > 1) or blocked_transposed):
            break
    dilation = tuple(rng.randint(1, 2) for _ in range(dims))
    size = tuple(rng.randint((k - 1) * d + 1, 12 if dims < 3 else 7) for k, d in zip(kernel, dilation))
    if transposed:
        stride, padding, mode = transposed_stride, "same", "zeros"
    else:
        stride, mode = tuple(rng.randint(1, 3) for _ in range(dims)), rng.choice(["zeros", "reflect", "replicate"])
        padding = tuple((rng.randint(0, min(2, s - 1)), rng.randint(0, min(2, s - 1))) for s in size)
        if mode == "zeros":  # asymmetric, so torch's own conv never takes them
            padding = tuple((lo, lo + 1) for lo, _ in padding)
    return ConvCase(transposed, size, groups * in_per_group, groups * out_per_group, kernel, stride, padding,
                    dilation=dilation, groups=groups, padding_mode=mode, batch=rng.randint(1, 3),
                    bias=rng.random() < 0.7, layout=layout, dtype=rng.choice(["float32", "float32", "bfloat16"]))


# (draw, seed): 25 cases each; random_case's seeds 0-3, random_few_channels_case's 200-202.
RANDOM_RUNS = [(random_case, seed) for seed in range(4)] + [(random_few_channels_case, 200 + seed) for seed in range(3)]


@pytest.mark.parametrize("draw, seed", RANDOM_RUNS, ids=[f"{draw.__name__}-{seed}" for draw, seed in RANDOM_RUNS])
def test_random_cases_at_every_isa_here(draw, seed):
    rng = random.Random(seed)
    isas = isas_here()
    if not isas:
        pytest.skip("this CPU has neither AVX2 nor AVX-512")
    for _ in range(25):
        run_case(draw(rng), rng.choice(isas))


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_channels_last_transposed_with_one_channel_per_group(isa):
    """Transposed convs in channels-last whose x has one channel per group (a depthwise conv's input gradient with a
    multiplier): each position of the planes holds one channel, gathered from pixels a whole channel count apart.
    2-d and 3-d, 8 y channels per group (up to 4 take the depthwise phases: tests/test_conv_transpose.py). (The
    forward conv with a multiplier runs the depthwise kernel: tests/test_conv.py.)"""
    require_isa(isa)
    for case in [ConvCase(True, (7, 8), 5, 40, 3, 1, "same", groups=5, layout="channels_last"),
                 ConvCase(True, (4, 5, 6), 4, 32, 3, 1, "same", groups=4, layout="channels_last")]:
        run_case(case, isa)


# Convs in another mode than zeros: their input gradient, a transposed conv in that mode, runs the full transposed
# conv on the blocked kernel (with a stride, one conv per phase) and folds the padded positions back. Reflect pads up
# to size - 1 (one bounce folds onto every position but the edges), replicate pads longer than the size, few and many
# channels, 1-3 dims. (Where the input gradient has few channels per group, at stride 1 the tap tiles take it:
# tests/test_conv_transpose.py's test_transposes_on_tap_tiles.)
FOLDED_CASES = [ConvCase(False, (30, 31), 16, 24, 3, 1, ((1, 2), (2, 0)), padding_mode="reflect"),
                ConvCase(False, (20, 21), 9, 12, 3, 1, ((5, 5), (6, 1)), dilation=(1, 2), padding_mode="reflect",
                         layout="channels_last", batch=4),
                ConvCase(False, (40, 30), 36, 15, (4, 2), 1, ((7, 0), (1, 9)), padding_mode="replicate", groups=3),
                ConvCase(False, (8, 9, 10), 12, 16, 3, 1, "same", padding_mode="circular", layout="channels_last"),
                ConvCase(False, (2000,), 3, 14, 7, 1, "causal", dilation=2, padding_mode="reflect", bias=False),
                # Strided (2^18 multiply-adds per phase or more): 4 phases of about 2 taps over 10 x channels; the taps never
                # reach the last row (pads (1, 0): 101 + 1 = 2 * 49 + 4), a phase-less k2 s3 dim, and circular pads
                # wider than the stride.
                ConvCase(False, (101, 111), 24, 10, 3, 2, ((1, 0), (0, 0)), padding_mode="reflect", batch=4),
                ConvCase(False, (100, 90), 64, 9, (2, 6), (3, 2), ((1, 0), (2, 3)), padding_mode="replicate",
                         layout="channels_last"),
                ConvCase(False, (20, 22, 24), 24, 12, 3, 2, ((1, 1), (2, 2), (3, 0)), padding_mode="circular")]


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize("case", FOLDED_CASES, ids=[case.describe() for case in FOLDED_CASES])
def test_the_input_gradient_folds_the_padding_mode(isa, case):
    require_isa(isa)
    check_folded_input_gradient(case, isa)


def check_folded_input_gradient(case, isa, expected_path=None):
    """The input gradient of a conv in another mode than zeros, on the folded blocked transpose at `isa` (or
    expected_path), against the float64 reference, its output poisoned first; then the same transposed conv with a
    bias (added in the fold)."""
    x, w, b = case.random_inputs()
    stride, pad_lo, _, dilation, groups, mode = case.conv_op_arguments()
    x64 = x.double().requires_grad_()
    expected = case.reference_function()(x64, w.double(), None if b is None else b.double())
    grad_y = arrange(torch.randn(expected.shape), case.layout)
    (expected_grad,) = torch.autograd.grad(expected, x64, grad_y.double())
    op_arguments = (stride, pad_lo, list(x.shape[2:]), dilation, groups, mode)
    with cpu_isa_limit(isa):
        path = torch.ops.fastpad._conv_transpose_path(grad_y, w, None, *op_arguments, "cpu")
        assert path == (expected_path or f"cpu_blocked_folded_{isa}"), case.describe()
        poison(x.shape, x.dtype)
        grad_x = torch.ops.fastpad.conv_transpose(grad_y, w, None, *op_arguments)
        bias = torch.randn(x.shape[1])
        poison(x.shape, x.dtype)
        with_bias = torch.ops.fastpad.conv_transpose(grad_y, w, bias, *op_arguments)
    assert_matches(grad_x, expected_grad.to(grad_x.dtype), what=f"input grad of {case.describe()}")
    expected_with_bias = expected_grad + bias.double().view([-1] + [1] * (x.dim() - 2))
    assert_matches(with_bias, expected_with_bias.to(x.dtype), what=f"input grad + bias of {case.describe()}")


# Strided transposed convs with fewer than 16 x channels per group and 2^18 multiply-adds per stride phase or more: one
# blocked conv per stride phase, each writing its positions of y in place: 2-d channels-last with groups, 1-d, 3-d
# with a phase-less k2 s3 dim, and a single image of 2^23.7 multiply-adds over 4 phases. (With half a vector of y
# channels per group or fewer, channels-last phases take the tap tiles on AVX-512: test_conv_transpose.py.)
STRIDED_TRANSPOSED = [ConvCase(True, (29, 32), 48, 64, 6, 2, "same", groups=4, layout="channels_last", batch=7),
                      ConvCase(True, (600,), 12, 96, 7, 3, ((2, 5),), dilation=2, batch=4),
                      ConvCase(True, (6, 7, 8), 10, 64, (3, 4, 2), (2, 2, 3), "same", batch=4, bias=False),
                      ConvCase(True, (27, 27), 12, 32, 7, 2, "same", layout="channels_last", batch=1)]


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize("case", STRIDED_TRANSPOSED, ids=[case.describe() for case in STRIDED_TRANSPOSED])
def test_strided_transposed_convs_run_their_phases_on_the_blocked_kernel(isa, case):
    require_isa(isa)
    run_case(case, isa)


# 1-d and 2-d strided transposed convs whose phases run on the blocked kernel's phase planes, not side by side (2+
# images): one gather of x per band for every phase (conv_transpose.cpp's covering_conv and blocked_convs), each phase's
# taps a range of the covering conv's, its outputs the first of its. Phases of 3 and 2 taps in 1-d; crops past the
# kernel's reach (the phase convs' pads negative); 2-d with groups and an output_padding (phases with one more row or
# column than others); channels-last planes that read padding; a dim whose k2 s3 leaves a phase without taps (the bias,
# AVX-512's blocked kernel only: AVX2 runs torch's conv there); bfloat16 and float16 inputs.
SHARED_GATHER = [(ConvCase(True, (301,), 12, 48, 5, 2, "same", batch=4), ("avx2", "avx512")),
                 (ConvCase(True, (300,), 12, 64, 4, 2, ((6, 6),), batch=4), ("avx2", "avx512")),
                 (ConvCase(True, (21, 23), 24, 48, 3, 2, "same", groups=2, output_padding=1, batch=4),
                  ("avx2", "avx512")),
                 (ConvCase(True, (20, 22), 12, 40, 5, 2, "same", groups=2, layout="channels_last", batch=3),
                  ("avx2", "avx512")),
                 (ConvCase(True, (15, 40), 12, 64, (2, 6), (3, 2), "same", batch=4), ("avx512",)),
                 (ConvCase(True, (301,), 12, 48, 4, 2, "same", batch=4, dtype="bfloat16"), ("avx2", "avx512")),
                 (ConvCase(True, (17, 19), 12, 48, 4, 2, "same", batch=4, dtype="float16", layout="channels_last"),
                  ("avx2", "avx512"))]


@pytest.mark.parametrize("case,isa", [(case, isa) for case, isas in SHARED_GATHER for isa in isas],
                         ids=[f"{case.describe()}-{isa}" for case, isas in SHARED_GATHER for isa in isas])
def test_strided_transposed_phases_share_one_gather_of_x(case, isa):
    require_isa(isa)
    with intra_op_threads(2):
        run_case(case, isa)


# Band plans for the threads (conv.cpp's blocked_direct_conv), on 2 and 3 threads: output-channel blocks that do not
# divide among the threads (5, 3), whose rows then go in bands that do; channels-last float32 outputs written once in
# place, whose bands are sized by the planes alone (a 48 -> 298 k5 transposed conv over 20 x 20, its row runs then
# long enough to skip border columns; stride-2 phases sharing one gather), or, where those bands would leave a thread
# part of one band's blocks, by the band buffer too (30 -> 205 k6).
BAND_PLAN_CASES = [
    ConvCase(True, (20, 20), 48, 298, 5, 1, "same", batch=1, layout="channels_last"),
    ConvCase(False, (20, 20), 30, 205, 6, padding="same", batch=1, layout="channels_last"),
    ConvCase(False, (12, 13), 40, 140, 3, padding="same", batch=1),
    ConvCase(True, (20, 22), 12, 150, 5, 2, "same", batch=1, layout="channels_last"),
]


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("case", BAND_PLAN_CASES, ids=ConvCase.describe)
@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_band_plans_for_the_threads(isa, case, threads):
    require_isa(isa)
    with intra_op_threads(threads):
        run_case(case, isa)


# Single images whose stride phases are each too small to split among the threads (under 2^23 multiply-adds): on 2
# threads the phases run side by side, a thread each (conv_transpose.cpp's phase_convs), in place into their
# positions of y: channels-last 4 phases, 1-d 3 phases, 3-d with a phase-less k2 s3 dim (those phases write the bias),
# and a reflect conv's input gradient through the fold.
SIDE_BY_SIDE = [ConvCase(True, (27, 27), 12, 32, 7, 2, "same", layout="channels_last", batch=1),
                ConvCase(True, (600,), 12, 96, 7, 3, ((2, 5),), dilation=2, batch=1),
                ConvCase(True, (6, 7, 8), 10, 64, (3, 4, 2), (2, 2, 3), "same", batch=1)]


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_small_stride_phases_run_side_by_side(isa):
    require_isa(isa)
    with intra_op_threads(2):
        for case in SIDE_BY_SIDE:
            run_case(case, isa)
        check_folded_input_gradient(replace(FOLDED_CASES[5], batch=1), isa)


# Channels-last float32 transposed convs whose stride phases read no padding of x (a kernel as wide as the stride, or
# 1x1 at stride 1): with fewer than 16 x channels per group and 8 or more y channels per group the phases run on the
# blocked kernel reading x in place instead of the GEMM + col2im (kernel_paths.h's
# cpu_blocked_no_planes_transpose_few_x_channels); and where the blocked rule takes them anyway (17 x channels, 1x1),
# in place too.
NO_PLANES_TRANSPOSED = [
    ConvCase(True, (13, 14), 64, 64, 2, 2, "valid", groups=8, batch=2, layout="channels_last"),
    ConvCase(True, (11, 12), 5, 58, 1, 1, "valid", batch=3, layout="channels_last"),
    ConvCase(True, (4, 5, 6), 6, 16, (2, 1, 2), (2, 1, 2), "valid", batch=2, bias=False, layout="channels_last"),
    ConvCase(True, (9, 10), 34, 40, 1, 1, "valid", groups=2, batch=2, layout="channels_last"),
]


@pytest.mark.parametrize("case", NO_PLANES_TRANSPOSED, ids=ConvCase.describe)
@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_transposed_phases_that_read_no_padding_read_x_in_place(isa, case):
    require_isa(isa)
    assert transposed_reads_no_padding(case)
    run_case(case, isa, expected_path=f"cpu_blocked_no_planes_{isa}")


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_transposed_phases_keep_the_col2im_outside_the_in_place_rule(isa):
    """A stride wider than the kernel (phases without taps), 16 x channels per group, 7 y channels per group, an
    output_padding whose last positions' taps land past x (padding a phase reads), and bfloat16: the GEMM + col2im."""
    require_isa(isa)
    base = NO_PLANES_TRANSPOSED[0]
    for case in (replace(base, kernel=1), replace(base, in_channels=128, out_channels=64),
                 replace(base, out_channels=56), replace(base, output_padding=1),
                 replace(base, dtype="bfloat16")):
        run_case(case, isa, expected_path=f"cpu_gemm_col2im_{isa}")


def test_strided_transposed_convs_below_the_phase_floor_keep_the_col2im():
    """12 x channels, k5 s3 over 6 x 6: 9 phases of 2^14.2 multiply-adds each, too little to repay a phase's weight
    packing and parallel region; the same conv over 24 x 24 (2^18.2 per phase) runs the phases. (The GEMM + col2im of
    its 36 x positions puts a row of cols per position on AVX-512: cpu_gemm_col2im_rows.)"""
    if machine_isa() == "baseline":
        pytest.skip("this CPU has neither AVX2 nor AVX-512")
    col2im = "cpu_gemm_col2im_avx2" if machine_isa() == "avx2" else "cpu_gemm_col2im_rows_avx512"
    for size, expected in [(6, col2im), (24, f"cpu_blocked_{machine_isa()}")]:
        case = ConvCase(True, (size, size), 12, 16, 5, 3, "same", batch=1)
        x, w, b = case.random_inputs()
        crop_lo, out_size = case.crops()
        path = torch.ops.fastpad._conv_transpose_path(x, w, b, [3, 3], crop_lo, out_size, [1, 1], 1, "zeros", "cpu")
        assert path == expected.replace("avx512_bf16", "avx512"), case.describe()


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
@pytest.mark.parametrize("index", [(0, 0, 0, 0), (3, 2, 1, 1), (15, 15, 2, 2)])
@pytest.mark.parametrize("weight_format", ["contiguous", "channels_last", "sliced"])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_an_inf_weight_keeps_stride_one_transposed_convs_off_the_blocked_kernel(value, index, layout, weight_format):
    """The conv a transposed conv is multiplies weights by the zeros around x; the reference never does, so an inf or
    NaN weight must take a kernel that does not (the GEMM + col2im path, whose GEMM on the reduction tiles multiplies
    only zero-padded columns it drops by zeros): the first, a middle and the last of the 2304 weights (the vectorized
    check's last lanes). The check reads a dense weight in its own memory order (channels-last: no copy), and copies a
    sliced one."""
    case = ConvCase(True, (9, 9), 16, 16, 3, 1, "same", layout=layout)
    x, w, b = case.random_inputs()
    if weight_format == "channels_last":
        w = w.contiguous(memory_format=torch.channels_last)
    elif weight_format == "sliced":
        w = torch.cat([w, torch.full_like(w, float("nan"))], dim=1)[:, :16]  # NaNs beside it, never read
    crop_lo, out_size = case.crops()
    args = ([1, 1], crop_lo, out_size, [1, 1], 1, "zeros", "cpu")
    blocked_here = machine_isa() != "baseline"
    assert torch.ops.fastpad._conv_transpose_path(x, w, b, *args).startswith("cpu_blocked") == blocked_here
    w[index] = value
    assert torch.ops.fastpad._conv_transpose_path(x, w, b, *args) == reduction_tiles_kernel("cpu_gemm_col2im",
                                                                                           torch.float32)
    expected = case.reference_function()(x.double(), w.double(), b.double())
    poison(expected.shape, x.dtype)
    y = torch.ops.fastpad.conv_transpose(x, w, b, *args[:-1])
    assert torch.equal(y.isnan(), expected.isnan()) and torch.equal(y.isinf(), expected.isinf())
    finite = expected.isfinite()
    assert_matches(y[finite], expected[finite].float(), what=case.describe())


def test_the_isa_cap_picks_the_kernel():
    """FASTPAD_CPU_ISA caps the ISA at run time: baseline sends float32 dense convs to the GEMM kernels, and a cap above
    what the CPU has changes nothing."""
    case = ConvCase(False, (9, 10), 16, 24, 3, 2, "same")
    x, w, b = case.random_inputs()
    with cpu_isa_limit("baseline"):
        assert torch.ops.fastpad._cpu_isa() == "baseline"
        assert torch.ops.fastpad._conv_path(x, w, b, *case.conv_op_arguments(), "cpu") == "cpu_tap_gemms"
    with cpu_isa_limit("avx512_bf16"):
        assert torch.ops.fastpad._cpu_isa() == machine_isa()


def test_float64_never_takes_the_blocked_kernels():
    case = ConvCase(False, (9, 10), 16, 24, 3, 2, "same", dtype="float64")
    x, w, b = case.random_inputs()
    assert torch.ops.fastpad._conv_path(x, w, b, *case.conv_op_arguments(), "cpu") == "cpu_tap_gemms"


def test_the_fma_peak_bounds_what_the_gemms_reach():
    """The peak is an upper bound that fastpad's own register tiles come close to: the channels-last weight gradient
    (cpu/reduction_tiles.h) reached 70-73% of it on the 2-core AMD Zen 5 fastpad is developed on, 48-53% on a 2-core
    Sapphire Rapids class Xeon (44% in one CI run there, which failed a bound at 45%), and no GEMM may exceed it. When
    the compiler merged the microbenchmark's twelve FMA chains into one (all started from the same value), the peak
    read 2.5-3x too high, which puts the tiles under 30% of it (and torch's sgemm, 37-42% of the true peak there,
    under 17%): the faster of the two must reach 35%. (On a 2-core AMD Zen 3, AVX2 only, the tiles reached 41-48% and
    sgemm 60-77% alone, but 34% and 44% late in a full test run on that noisy host, which failed a bound on the tiles
    alone. On Sapphire Rapids, MKL takes its generic AVX2 kernel and reached 39-41%.) Those were its GEMMs over im2col
    columns; its GEMMs per tap over x in place (cpu_channels_last_taps) took 4.3-4.5 ms on a 2-core Zen 4, 88-92%."""
    if machine_isa() == "baseline":
        pytest.skip("the FMA peak is measured with AVX2 or AVX-512")
    if "libasan" in os.environ.get("LD_PRELOAD", ""):
        pytest.skip("under scripts/sanitize.sh the loop is built with the sanitizers: no peak (16 GFLOP/s measured)")
    peak = max(torch.ops.fastpad._cpu_fma_peak(0.2) for _ in range(2))

    def best_gflops(call, flops):
        call()
        best = 0.0
        for _ in range(5):
            start = time.perf_counter()
            call()
            best = max(best, flops / (time.perf_counter() - start) / 1e9)
        return best

    x, gy = (torch.randn(4, 64, 56, 56).to(memory_format=torch.channels_last) for _ in range(2))
    args = ([64, 64, 3, 3], [1, 1], [1, 1], [1, 1], 1, "zeros")
    assert torch.ops.fastpad._conv_weight_grad_path(x, gy, *args, "cpu").startswith("cpu_channels_last_taps_avx")
    tiles = best_gflops(lambda: torch.ops.fastpad.conv_weight_grad(x, gy, *args), 2 * 4 * 56 * 56 * 64 * 64 * 9)
    a, b = torch.randn(1536, 1536), torch.randn(1536, 1536)
    sgemm = best_gflops(lambda: a @ b, 2 * 1536 ** 3)
    message = f"FMA peak {peak:.0f} GFLOP/s, fastpad's tiles {tiles:.0f}, torch's sgemm {sgemm:.0f}"
    assert 0.35 * peak <= max(tiles, sgemm), message
    assert tiles <= 1.05 * peak and sgemm <= 1.05 * peak, message


def test_a_bad_isa_cap_names_the_variable_and_value():
    case = ConvCase(False, (9, 10), 16, 24, 3, 2, "same")
    x, w, b = case.random_inputs()
    with cpu_isa_limit("sse9"), pytest.raises(RuntimeError, match="FASTPAD_CPU_ISA.*'sse9'"):
        case.fastpad_function()(x, w, b)


def test_fma_peak():
    if machine_isa() == "baseline":
        with pytest.raises(RuntimeError, match="AVX2"):
            torch.ops.fastpad._cpu_fma_peak(0.05)
        return
    peak = torch.ops.fastpad._cpu_fma_peak(0.05)
    assert 0 < peak < 1e5  # GFLOP/s
    with pytest.raises(RuntimeError, match="seconds.*-1"):
        torch.ops.fastpad._cpu_fma_peak(-1.0)


def test_the_tiles_are_functions_of_their_own():
    """Each ISA's blocked driver (blocked_direct in cpu/blocked_direct_kernel.h and the functions it calls down to the
    tiles, wherever the compiler inlines them) calls its tiles, compiled out of line: inlined into the driver, whose
    other live values crowd the general registers, the inner loops of tiles of 8 and 9 positions reloaded their input
    offsets from the stack and from vector registers beside their 9 multiply-adds (a channels-last 20 -> 56 k5 conv in
    4 groups, rows of 17 positions in tiles of 9 + 8, ran 1.29-1.34x faster out of line).
    Disassembles each driver function that is a symbol of its own (objdump) and finds no multiply-add in any, and the
    tiles as functions of their own."""
    nm, objdump = shutil.which("nm"), shutil.which("objdump")
    if platform.machine() != "x86_64" or nm is None or objdump is None:
        pytest.skip("needs an x86-64 build and binutils' nm and objdump")
    library = fastpad._C.__file__
    symbols = subprocess.run([nm, "-C", "-S", library], capture_output=True, text=True, check=True).stdout.splitlines()
    driver_names = ("blocked_direct(", "block_of_vectors<", "all_positions<", "listed_positions<", "remainder_tile<")
    for isa in ("avx2", "avx512", "avx512_bf16"):
        namespace = f" fastpad::cpu::blocked_{isa}::"
        drivers = [line.split() for line in symbols
                   if f" fastpad::cpu::blocked_direct_{isa}(" in line
                   or any(f"{namespace}{name}" in line for name in driver_names)
                   or any(f"{namespace}void {name}" in line for name in driver_names)]
        assert any(f"blocked_direct_{isa}(" in " ".join(d) for d in drivers), (isa, drivers)
        calls = False
        for driver in drivers:
            start, size = int(driver[0], 16), int(driver[1], 16)
            code = subprocess.run([objdump, "-d", "--no-show-raw-insn", f"--start-address={start}",
                                   f"--stop-address={start + size}", library], capture_output=True, text=True,
                                  check=True).stdout
            assert not any(op in code for op in ("vfmadd", "vdpbf16ps")), (isa, " ".join(driver[3:]))
            calls = calls or "call" in code
        assert calls, isa  # the tiles are called, not inlined
        assert any(f"{namespace}tile<9, 1," in line or f"{namespace}void tile<9, 1," in line for line in symbols), isa


# Batch-1 layers whose images, groups and blocks of output channels leave a thread without work: conv.cpp splits their
# rows into up to 2 x threads bands (none shorter than its halo, each of 2^21 multiply-adds or more): k7 s2 12 channels
# (halo 3 rows), a stride-1 k5 in reflect mode (halo 4 of 14 rows), a 3-d k4 (bands of H per depth slice), a k1 (no
# halo), and a transposed conv's phases; channels-last and NCHW. (The 3-d conv has 20 output channels: with at most
# half a vector, its 30 wide rows would take the tap tiles.)
BATCH_ONE_BANDS = [ConvCase(False, (53, 53), 32, 12, 7, 2, "causal", batch=1, layout="channels_last"),
                   ConvCase(False, (14, 15), 24, 20, 5, 1, "same", padding_mode="reflect", batch=1),
                   ConvCase(False, (30, 30, 30), 18, 20, 4, 1, "same", batch=1, layout="channels_last"),
                   ConvCase(False, (40, 41), 64, 40, 1, 1, "valid", batch=1, layout="channels_last"),
                   ConvCase(True, (22, 22), 24, 16, 7, 1, "same", batch=1)]


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize("case", BATCH_ONE_BANDS, ids=[case.describe() for case in BATCH_ONE_BANDS])
def test_batch_one_layers_split_their_rows_between_threads(isa, case):
    require_isa(isa)
    run_case(case, isa)


# Batch-1 layers whose bands, as the planes' budget sizes them, would not divide evenly among 2 threads: conv.cpp's
# thread_band_multiple rounds their count up to an even one (PhasePlanes' row_band_multiple), bands then shorter than
# their halo and of rows as even as they divide (20 rows in 8 bands: 2 + 3 + 2 + 3 ...). A channels-last 298 -> 48 k5
# (planes of 3 rows: 7 bands -> 8), the tap tiles' NCHW 105 -> 3 k7 d2 (5 -> 6), a channels-last transposed k7's
# phase conv.
EVEN_BANDS = [(ConvCase(False, (20, 20), 298, 48, 5, 1, "same_lower", padding_mode="replicate", batch=1,
                        layout="channels_last"), "cpu_blocked"),
              (ConvCase(False, (72, 72), 105, 3, 7, 1, "causal", dilation=2, batch=1), "cpu_tap_tiles"),
              (ConvCase(True, (75, 75), 8, 41, 7, 1, "same", batch=1, layout="channels_last"), "cpu_blocked")]


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize("case,kernel", EVEN_BANDS, ids=[case.describe() for case, _ in EVEN_BANDS])
def test_batch_one_bands_divide_evenly_among_the_threads(isa, case, kernel):
    require_isa(isa)
    with intra_op_threads(2):
        run_case(case, isa, expected_path=f"{kernel}_{isa}")


# NCHW outputs, which the blocked driver copies from its channels-last band buffer into y through the register transpose
# (transpose_floats_*, where a band row holds 12 positions or more and a block 8 channels or more, and y's columns
# are 1 or 2 apart) or element by element: rows and channel counts that leave partial blocks of positions and of
# channels (37 columns, 40 and 33 channels), a stride-2 transposed conv whose phases write every second column of y
# in place, a stride-3 one (the element-wise copy), and 1-d rows.
NCHW_OUTPUT_COPIES = [ConvCase(False, (13, 37), 24, 40, 3, 1, ((0, 2), (1, 1)), batch=2),
                      ConvCase(True, (20, 30), 12, 40, 4, 2, "same", batch=2),
                      ConvCase(True, (12, 20), 12, 40, 6, 3, "same", batch=2, bias=False),
                      ConvCase(False, (150,), 20, 33, 5, 2, "same", batch=3),
                      ConvCase(True, (200,), 12, 24, 4, 2, "same", batch=4)]


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize("case", NCHW_OUTPUT_COPIES, ids=[case.describe() for case in NCHW_OUTPUT_COPIES])
def test_nchw_outputs_are_copied_out_of_the_band_buffer(isa, case):
    require_isa(isa)
    run_case(case, isa)


# NCHW inputs whose rows' interior runs are 64 positions or more, with 16 input channels per group or more, gather
# their lanes through the register transpose, 16 channels at a time (cpu/phase_planes.h's gather_transpose_pays):
# runs of 63 and 64 positions (a valid conv reads its whole input row), 15, 16 and 21 lanes (a last block of 5), two
# groups, a 2-d row, and a transposed conv (the conv its phase is reads x at stride 1). HiFi-GAN's strided one is
# the suite's (benchmarks/layers.py); its phases take this gather on AVX-512 only.
NCHW_GATHER_RUNS = [ConvCase(False, (63,), 16, 40, 3, padding="valid", batch=2),
                    ConvCase(False, (64,), 16, 40, 3, padding="valid", batch=2),
                    ConvCase(False, (72,), 15, 40, 9, padding="valid", batch=2),
                    ConvCase(False, (100,), 21, 40, 3, padding="same", batch=2),
                    ConvCase(False, (90,), 42, 80, 3, padding="same", groups=2, batch=1),
                    ConvCase(False, (5, 70), 16, 40, 3, padding="same", batch=1),
                    ConvCase(True, (100,), 40, 24, 3, 1, "same", batch=2)]


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize("case", NCHW_GATHER_RUNS, ids=[case.describe() for case in NCHW_GATHER_RUNS])
def test_nchw_rows_gather_their_lanes_through_the_transpose(isa, case):
    require_isa(isa)
    run_case(case, isa)


# In zeros mode, a band's rows whose kernel rows read only padding along H skip those taps, the band's rows in runs
# with the same taps inside x (conv.cpp's kRowTapSkipMinWork: 32 input channels x output channel blocks per call or
# more, or kRowSkipMinWork with the kernel's width: the last two cases, 7 input channels and one block of a k6 kernel):
# 'same' k5 rows, top rows that read nothing but padding (their outputs are the bias), a dilation, kernel depths,
# weights in tap passes (1.4 MiB: 3 passes over the row runs), groups, channels-last planes, and transposed convs at
# stride 1 and 3 (their phases' convs); at avx512_bf16 in bfloat16 on the dot products.
ROW_TAP_SKIP_CASES = [
    ConvCase(False, (11, 13), 40, 24, 5, padding="same", batch=2),
    ConvCase(False, (6, 9), 36, 20, 3, padding=((5, 4), (1, 1)), batch=2, layout="channels_last"),
    ConvCase(False, (10, 12), 32, 40, 3, dilation=2, padding="same", batch=2, layout="channels_last"),
    ConvCase(False, (4, 7, 8), 34, 20, 3, padding=((1, 1), (2, 1), (1, 1)), batch=1),
    ConvCase(False, (6, 7), 300, 48, 5, padding="same", batch=1),
    ConvCase(False, (9, 10), 64, 48, 4, padding="same", groups=2, batch=2, layout="channels_last"),
    ConvCase(True, (7, 9), 48, 40, 5, 1, "same", batch=2),
    ConvCase(True, (20, 30), 12, 40, 6, 3, "same", batch=2),
    ConvCase(False, (9, 10), 7, 14, 6, padding=((5, 5), (2, 3)), batch=2),
    ConvCase(False, (5, 6, 7), 7, 14, (3, 6, 6), padding=((1, 1), (5, 0), (2, 3)), batch=1, layout="channels_last"),
]


@pytest.mark.parametrize("case", ROW_TAP_SKIP_CASES, ids=ConvCase.describe)
@pytest.mark.parametrize("isa", ["avx2", "avx512", "avx512_bf16"])
def test_rows_skip_the_kernel_rows_that_read_only_padding(isa, case):
    run_case_at_isa(isa, case)


# Where rows skip taps and a tap has 16 input channels or more, runs of 4 rows or more (conv.cpp's kColumnSkipMinLanes,
# kColumnSkipMinRows) skip the kernel columns that read only padding along W too: each border segment of columns a
# call per kernel row, its tiles down the columns.
# Border columns on both sides, a kernel wider than the rows (no column reads every kernel column), a stride and a
# dilation, groups, channels-last, a 3-d kernel, a transposed conv (its phase's conv), and weights in passes of 6
# taps (300 input channels, k7), the first of which no tap of the first column reads (its first call sets it from the
# bias).
COLUMN_SKIP_CASES = [
    ConvCase(False, (12, 13), 40, 24, 5, padding="same", batch=2),
    ConvCase(False, (9, 5), 36, 20, (3, 7), padding=((1, 1), (3, 3)), batch=2, layout="channels_last"),
    ConvCase(False, (14, 15), 32, 40, 3, stride=2, dilation=2, padding=((2, 2), (3, 1)), batch=1),
    ConvCase(False, (10, 11), 64, 48, 4, padding="same", groups=2, batch=2, layout="channels_last"),
    ConvCase(False, (3, 9, 10), 34, 20, 3, padding=((1, 1), (1, 1), (2, 2)), batch=1, layout="channels_last"),
    ConvCase(True, (9, 11), 48, 40, 5, 1, "same", batch=2),
    ConvCase(False, (10, 5), 300, 64, 7, padding=((3, 3), (6, 0)), batch=4, layout="channels_last"),
]


@pytest.mark.parametrize("case", COLUMN_SKIP_CASES, ids=ConvCase.describe)
@pytest.mark.parametrize("isa", ["avx2", "avx512", "avx512_bf16"])
def test_row_runs_skip_the_kernel_columns_that_read_only_padding(isa, case):
    run_case_at_isa(isa, case)
