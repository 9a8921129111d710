"""The CUDA kernels' index math, run on CPU.

tests/cuda_emulator.cpp compiles csrc/cuda/problems.h (the implicit-GEMM problems of the three ops, the direct
kernels' element bodies, the depthwise halo tiles and the split-K plan) as plain C++ and runs it serially, with the
same dispatch as the CUDA host code. These tests compare it with the CPU ops, which the rest of the suite checks
against F.pad + F.conv*. On a machine without a GPU this is the only execution the CUDA code's arithmetic gets.
What it cannot show: the kernels' thread mapping, shared-memory staging, synchronisation and tensor-core code.
"""

import os
import random
import tempfile

import pytest
import torch
from torch.utils import cpp_extension

import fastpad  # noqa: F401  (registers torch.ops.fastpad)
from reference import relative_error, tolerance

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTYPES = (torch.float64, torch.float32, torch.bfloat16, torch.float16)
MODES = ("zeros", "reflect", "replicate", "circular")
RANDOM_CASES = int(os.environ.get("FASTPAD_EMULATION_CASES", "150"))


@pytest.fixture(scope="module")
def emulator():
    build = os.path.join(tempfile.gettempdir(), "fastpad_cuda_emulator")
    os.makedirs(build, exist_ok=True)
    cpp_extension.load(
        name="fastpad_cuda_emulator",
        sources=[os.path.join(ROOT, "tests", "cuda_emulator.cpp"), os.path.join(ROOT, "csrc", "conv_params.cpp")],
        extra_include_paths=[os.path.join(ROOT, "csrc")],
        extra_cflags=["-O2"],
        is_python_module=False,
        build_directory=build,
    )
    return torch.ops.fastpad_cuda_emulator


def layout(t, kind):
    """The tensor in the given memory layout, same values."""
    if kind == "channels_last" and t.dim() in (4, 5):
        return t.to(memory_format=torch.channels_last if t.dim() == 4 else torch.channels_last_3d)
    if kind == "strided":  # every other element of a wider tensor along the last dim
        wide = torch.empty(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype)
        wide[..., ::2] = t
        return wide[..., ::2]
    return t.contiguous()


def draw(rng):
    """A random conv problem (op-level arguments) that torch accepts."""
    nd = rng.choice((1, 2, 2, 3))
    mode = rng.choice(MODES)
    while True:
        size = [rng.randint(1, 6 if nd == 3 else 13) for _ in range(nd)]
        kernel = [rng.randint(1, 3 if nd == 3 else 4) for _ in range(nd)]
        stride = [rng.randint(1, 3) for _ in range(nd)]
        dilation = [rng.randint(1, 2) for _ in range(nd)]
        if mode == "reflect":
            pad_lo = [rng.randint(0, s - 1) for s in size]
            pad_hi = [rng.randint(0, s - 1) for s in size]
        elif mode == "circular":
            pad_lo = [rng.randint(0, s) for s in size]
            pad_hi = [rng.randint(0, s) for s in size]
        else:
            pad_lo = [rng.randint(0, 4) for _ in size]
            pad_hi = [rng.randint(-1 if mode == "zeros" else 0, 4) for _ in size]
        if all(s + lo + hi >= d * (k - 1) + 1 for s, lo, hi, k, d in zip(size, pad_lo, pad_hi, kernel, dilation)):
            break
    grouping = rng.choice(("dense", "dense", "wide", "grouped", "depthwise", "multiplier"))
    if grouping == "dense":
        groups, c_in, c_out = 1, rng.randint(1, 9), rng.randint(1, 9)
    elif grouping == "wide":  # crosses the 64-wide GEMM tiles
        groups, c_in, c_out = 1, rng.randint(5, 12), rng.randint(60, 70)
    elif grouping == "grouped":
        groups = rng.randint(2, 3)
        c_in, c_out = groups * rng.randint(2, 5), groups * rng.randint(1, 5)
    else:
        groups = rng.randint(1, 6)
        c_in, c_out = groups, groups * (rng.randint(2, 3) if grouping == "multiplier" else 1)
    dtype = rng.choice(DTYPES[:2] * 3 + DTYPES[2:])
    return dict(nd=nd, size=size, kernel=kernel, stride=stride, dilation=dilation, pad_lo=pad_lo, pad_hi=pad_hi,
                mode=mode, groups=groups, c_in=c_in, c_out=c_out, batch=rng.randint(0, 2), dtype=dtype,
                layout=rng.choice(("contiguous", "channels_last", "strided")), bias=rng.random() < 0.7)


def tensors(case, seed):
    """x, w, b, the conv's output gradient gy and a bias for conv_transpose (whose output has x's channels),
    random (never zeros), in the case's dtype and layout."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(case["batch"], case["c_in"], *case["size"], generator=gen, dtype=torch.float64)
    w = torch.randn(case["c_out"], case["c_in"] // case["groups"], *case["kernel"], generator=gen, dtype=torch.float64)
    b = torch.randn(case["c_out"], generator=gen, dtype=torch.float64) if case["bias"] else None
    y = torch.ops.fastpad.conv(x, w, b, *conv_args(case))
    gy = torch.randn(y.shape, generator=gen, dtype=torch.float64)
    bt = torch.randn(case["c_in"], generator=gen, dtype=torch.float64) if case["bias"] else None
    cast = lambda t: None if t is None else layout(t.to(case["dtype"]), case["layout"])  # noqa: E731
    to = lambda t: None if t is None else t.to(case["dtype"])  # noqa: E731
    return cast(x), to(w), to(b), cast(gy), to(bt)


def conv_args(case):
    return (case["stride"], case["pad_lo"], case["pad_hi"], case["dilation"], case["groups"], case["mode"])


def check_case(emulator, case, seed):
    """Each op's emulation against the CPU op in float64 on the same (dtype-rounded) values; returns the paths."""
    x, w, b, gy, bt = tensors(case, seed)
    f64 = lambda t: None if t is None else t.double()  # noqa: E731
    dtype, paths = case["dtype"], {}
    stride, pad_lo, _, dilation, groups, mode = conv_args(case)

    y, paths["conv"] = emulator.conv(x, w, b, *conv_args(case))
    expected = torch.ops.fastpad.conv(f64(x), f64(w), f64(b), *conv_args(case))
    compare(y, expected, dtype, "conv", case)

    transpose_args = (stride, pad_lo, case["size"], dilation, groups, mode)
    gx, paths["conv_transpose"] = emulator.conv_transpose(gy, w, bt, *transpose_args)
    expected = torch.ops.fastpad.conv_transpose(f64(gy), f64(w), f64(bt), *transpose_args)
    compare(gx, expected, dtype, "conv_transpose", case)

    grad_args = (list(w.shape), stride, pad_lo, dilation, groups, mode)
    gw, paths["conv_weight_grad"] = emulator.conv_weight_grad(x, gy, *grad_args)
    expected = torch.ops.fastpad.conv_weight_grad(f64(x), f64(gy), *grad_args)
    compare(gw, expected, dtype, "conv_weight_grad", case)
    return paths


def compare(actual, expected, dtype, what, case):
    assert actual.shape == expected.shape, f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)} in {case}"
    if actual.numel() == 0:
        return
    assert actual.isfinite().all(), f"{what}: unwritten (NaN-poisoned) elements in {case}"
    err = relative_error(actual, expected)
    assert err <= tolerance(dtype), f"{what}: relative error {err:.3g} > {tolerance(dtype):.1g} in {case}"


def base_case(**changes):
    case = dict(nd=2, size=[9, 11], kernel=[3, 3], stride=[1, 1], dilation=[1, 1], pad_lo=[1, 1], pad_hi=[1, 1],
                mode="zeros", groups=1, c_in=4, c_out=6, batch=2, dtype=torch.float64, layout="contiguous", bias=True)
    case.update(changes)
    return case


# Each row names the paths it must take: conv (0 GEMM, 1 halo tile, 2 direct), conv_transpose (0 direct gather,
# 1 phase GEMMs, 2 phase GEMMs + fold), conv_weight_grad (0 depthwise, else the number of K splits).
PATH_CASES = {
    "gemm_tiles_crossed": (base_case(c_in=9, c_out=70, size=[10, 11], mode="reflect", stride=[2, 1]), (0, 2, 1)),
    "gemm_wide_y_channels": (base_case(c_in=66, c_out=5, size=[6, 7], mode="circular", pad_lo=[2, 1]), (0, 2, 1)),
    "gemm_split_k": (base_case(c_in=4, c_out=6, size=[40, 52], batch=2), (0, 1, 5)),
    "gemm_split_k_float32_channels_last": (
        base_case(c_in=5, c_out=8, size=[33, 64], layout="channels_last", dtype=torch.float32, mode="replicate",
                  pad_lo=[3, 0], pad_hi=[0, 2]), (0, 2, 5)),
    "depthwise_halo_2d": (base_case(c_in=4, c_out=8, groups=4, size=[19, 40], mode="reflect", stride=[2, 2]),
                          (1, 0, 0)),
    "depthwise_halo_1d": (base_case(nd=1, c_in=3, c_out=3, groups=3, size=[300], kernel=[5], stride=[1],
                                    dilation=[2], pad_lo=[8], pad_hi=[0]), (1, 0, 0)),
    "depthwise_halo_3d_small_plane": (base_case(nd=3, c_in=2, c_out=2, groups=2, size=[5, 4, 3], kernel=[3, 2, 2],
                                                stride=[1, 1, 2], dilation=[2, 1, 1], pad_lo=[2, 1, 0],
                                                pad_hi=[2, 0, 1], mode="replicate"), (1, 0, 0)),
    "depthwise_channels_last_direct": (base_case(c_in=4, c_out=4, groups=4, layout="channels_last",
                                                 mode="circular"), (2, 0, 0)),
    "depthwise_patch_too_large_direct": (base_case(c_in=2, c_out=2, groups=2, size=[170, 200], kernel=[5, 5],
                                                   dilation=[40, 40], pad_lo=[80, 80], pad_hi=[80, 80], batch=1),
                                         (2, 0, 0)),
    "phase_gemm_zeros_strided": (base_case(c_in=8, c_out=6, stride=[3, 2], dilation=[2, 1], pad_lo=[2, 0],
                                           pad_hi=[0, 1]), (0, 1, 1)),
    "phase_gemm_fold_replicate_wide_pads": (base_case(c_in=6, c_out=5, mode="replicate", pad_lo=[4, 3],
                                                      pad_hi=[4, 2], stride=[2, 3]), (0, 2, 1)),
    "phase_gemm_16bit": (base_case(c_in=8, c_out=7, dtype=torch.bfloat16, mode="reflect", stride=[2, 2]), (0, 2, 1)),
    "phase_gemm_float16_3d": (base_case(nd=3, size=[5, 6, 7], kernel=[2, 3, 2], stride=[2, 1, 3], dilation=[1, 2, 1],
                                        pad_lo=[1, 2, 0], pad_hi=[0, 2, 1], c_in=8, c_out=4,
                                        dtype=torch.float16), (0, 1, 1)),
}


@pytest.mark.parametrize("name", sorted(PATH_CASES))
def test_every_kernel_path(emulator, name):
    case, expected_paths = PATH_CASES[name]
    paths = check_case(emulator, case, seed=len(name))
    assert (paths["conv"], paths["conv_transpose"], paths["conv_weight_grad"]) == expected_paths


FIXED_SEED = 20261122


@pytest.mark.parametrize("seed", [FIXED_SEED, None])
def test_random_problems(emulator, seed, capsys):
    """RANDOM_CASES random problems (FASTPAD_EMULATION_CASES) from a fixed seed and from a printed random one."""
    seed = random.randrange(2**31) if seed is None else seed
    rng = random.Random(seed)
    seen = {"conv": set(), "conv_transpose": set(), "conv_weight_grad": set()}
    for index in range(RANDOM_CASES):
        case = draw(rng)
        for op, path in check_case(emulator, case, seed=seed + index).items():
            seen[op].add(path if op != "conv_weight_grad" else min(path, 2))
    with capsys.disabled():
        print(f"\nCUDA emulation: {RANDOM_CASES} random problems, seed {seed}, paths taken {seen}")
    if seed == FIXED_SEED and RANDOM_CASES >= 150:
        # This draw reaches every path of every op (batch 0 gives -1); a random seed may miss a rare one.
        assert {0, 1, 2} <= seen["conv"] and {0, 1, 2} <= seen["conv_transpose"], seen
        assert {0, 1} <= seen["conv_weight_grad"], seen


def test_emulation_catches_a_wrong_index(emulator):
    """The comparison can fail: the emulator's result on a shifted input (a one-position indexing error) differs."""
    case = base_case(c_in=6, c_out=5, mode="reflect")
    x, w, b, _, _ = tensors(case, seed=1)
    y, _ = emulator.conv(torch.roll(x, 1, dims=-1), w, b, *conv_args(case))
    expected = torch.ops.fastpad.conv(x, w, b, *conv_args(case))
    with pytest.raises(AssertionError, match="relative error"):
        compare(y, expected, torch.float64, "conv", case)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layout_kind", ["contiguous", "channels_last"])
def test_transposed_gemm_with_non_finite_weights(emulator, mode, layout_kind):
    """An inf or NaN weight gives torch's infs and NaNs, no more: where a phase GEMM multiplied such a weight by a zero
    loaded for a tap outside x, the gather pass recomputes the output (the CPU ops match torch here)."""
    case = base_case(c_in=5, c_out=8, mode=mode, stride=[2, 2], pad_lo=[1, 2], pad_hi=[2, 1], layout=layout_kind)
    x, w, _, gy, bt = tensors(case, seed=7)
    w[2, 1, 0, 0], w[3, 4, 2, 1], w[5, 0, 1, 2] = float("inf"), float("nan"), float("-inf")
    args = (case["stride"], case["pad_lo"], case["size"], case["dilation"], case["groups"], mode)
    gx, path = emulator.conv_transpose(gy, w, bt, *args)
    expected = torch.ops.fastpad.conv_transpose(gy, w, bt, *args)
    assert path == (1 if mode == "zeros" else 2)
    assert expected.isfinite().any() and not expected.isfinite().all()
    torch.testing.assert_close(gx, expected, equal_nan=True, rtol=1e-12, atol=1e-12)
