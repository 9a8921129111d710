"""fastpad's CUDA kernels, executed on CPU by the CUDA execution shim (tests/cuda_sim/).

csrc/cuda/*.cu (the real kernels and their torch-free launchers) are compiled as plain C++ with
tests/cuda_sim/cuda_sim.h force-included: every CUDA thread is a fiber, `__syncthreads()` is a checked barrier,
`__shared__` is block-shared and poisoned, WMMA calls are warp-collective rendezvous. The bindings the CUDA build
registers (csrc/cuda/bindings.cpp) run on CPU tensors and call those launchers, so the kernel choice, the launch
configuration, the thread mapping, the shared-memory staging and the tensor-core fragment code all execute here.
Each case is compared with the CPU ops (which the rest of the suite checks against F.pad + F.conv*) under every
thread schedule, with a grid cap that makes the grid-stride loops reuse shared memory, and the schedules must agree
bit for bit. What only a GPU can show: races that change no result under any schedule here, the memory model, nvcc's
code generation, speed.
"""

import ctypes
import glob
import hashlib
import math
import os
import random
import subprocess
import tempfile
from dataclasses import replace

import pytest
import torch
from torch.utils import cpp_extension

import fastpad  # noqa: F401  (registers torch.ops.fastpad)
from fastpad.cases import ConvCase, arrange, dtype_name
from reference import poison, relative_error, tf32_rounded, tolerance

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIM = os.path.join(ROOT, "tests", "cuda_sim")
DTYPES = (torch.float64, torch.float32, torch.bfloat16, torch.float16)
MODES = ("zeros", "reflect", "replicate", "circular")
RANDOM_CASES = int(os.environ.get("FASTPAD_CUDA_SIM_CASES", "150"))
# cuda_sim_configure's schedules: the order threads run in between synchronisations.
SCHEDULES = {"ascending": 0, "descending": 1, "interleaved": 2, "random": 3}
GRID_CAP = 3  # blocks per launch: every grid-stride loop runs several items per block
# Under scripts/sanitize.sh (ASan and UBSan preloaded) the kernels are built with the sanitizers too.
SANITIZED = "libasan" in os.environ.get("LD_PRELOAD", "")


def cuda_include_dir():
    """The CUDA toolkit's include directory (cuda_fp16.h, cuda_bf16.h, cuda_runtime_api.h), or None."""
    candidates = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda", *sorted(glob.glob("/usr/local/cuda-*"))[::-1]]
    for home in candidates:
        if home and os.path.isfile(os.path.join(home, "include", "cuda_fp16.h")):
            return os.path.join(home, "include")
    return None


def kernel_sources():
    return sorted(glob.glob(os.path.join(ROOT, "csrc", "cuda", "*.cu"))) + [os.path.join(SIM, "cuda_sim.cpp")]


def build_kernel_library(include):
    """libfastpad_cuda_sim.so: the .cu files compiled by g++ under the shim, and its runtime. Cached by the hash of
    every source and flag, so an unchanged tree is not rebuilt."""
    flags = ["-std=c++20", "-fPIC", "-DFASTPAD_CUDA_SIM", "-Wall", "-Werror", "-Wno-unknown-pragmas",
             "-Wno-sign-compare", f"-I{os.path.join(ROOT, 'csrc')}", f"-I{SIM}", f"-I{include}",
             *(f"-I{path}" for path in cpp_extension.include_paths())]
    flags += (["-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
              if SANITIZED else ["-O2"])
    headers = [path for pattern in ("*.h", "*.cuh") for path in glob.glob(os.path.join(ROOT, "csrc", "**", pattern),
                                                                           recursive=True)]
    headers.append(os.path.join(SIM, "cuda_sim.h"))
    digest = hashlib.sha256(" ".join(flags).encode())
    for path in sorted(kernel_sources() + headers):
        with open(path, "rb") as f:
            digest.update(path.encode() + f.read())
    build = os.path.join(tempfile.gettempdir(), f"fastpad_cuda_sim_{digest.hexdigest()[:16]}")
    library = os.path.join(build, "libfastpad_cuda_sim.so")
    if os.path.exists(library):
        return library
    os.makedirs(build, exist_ok=True)
    objects, jobs = [], []
    for source in kernel_sources():
        obj = os.path.join(build, os.path.basename(source) + ".o")
        language = ["-include", os.path.join(SIM, "cuda_sim.h"), "-x", "c++"] if source.endswith(".cu") else []
        jobs.append(subprocess.Popen(["g++", *flags, *language, "-c", source, "-o", obj],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        objects.append(obj)
    failures = [job.communicate()[0] for job in jobs if job.wait() != 0]
    assert not failures, "building the CUDA sources under the shim failed:\n" + "\n".join(failures)
    link_flags = ["-fsanitize=address,undefined"] if SANITIZED else []
    subprocess.run(["g++", "-shared", *link_flags, *objects, "-o", library + ".tmp"], check=True)
    os.replace(library + ".tmp", library)
    return library


def load_sim_ops(build, library, include):
    """torch.ops.fastpad_cuda_sim: the CUDA bindings on CPU tensors, linked with the kernel library."""
    cpp_extension.load(
        name="fastpad_cuda_sim_ops",
        sources=[os.path.join(SIM, "sim_ops.cpp"), os.path.join(ROOT, "csrc", "cuda", "bindings.cpp"),
                 os.path.join(ROOT, "csrc", "conv_params.cpp")],
        extra_include_paths=[os.path.join(ROOT, "csrc"), include],
        extra_cflags=["-O2"],
        extra_ldflags=[library, f"-Wl,-rpath,{os.path.dirname(library)}"],
        is_python_module=False,
        build_directory=build,
    )


@pytest.fixture(scope="module")
def sim():
    """torch.ops.fastpad_cuda_sim, with configure(schedule, seed, grid_cap, poison) from the kernel library."""
    include = cuda_include_dir()
    if include is None:
        if os.environ.get("CI"):
            pytest.fail("the CUDA toolkit headers (cuda_fp16.h) are missing: the shim cannot build")
        pytest.skip("the CUDA toolkit headers (cuda_fp16.h) are missing")
    preload = os.environ.pop("LD_PRELOAD", None)  # the compilers run plain; the sanitizers stay in this process
    try:
        library = build_kernel_library(include)
        kernels = ctypes.CDLL(library, mode=ctypes.RTLD_GLOBAL)
        build = os.path.join(os.path.dirname(library), "ops")
        os.makedirs(build, exist_ok=True)
        load_sim_ops(build, library, include)
    finally:
        if preload is not None:
            os.environ["LD_PRELOAD"] = preload
    kernels.cuda_sim_configure.argtypes = [ctypes.c_int, ctypes.c_uint64, ctypes.c_uint, ctypes.c_int]
    kernels.cuda_sim_last_requested_blocks.restype = ctypes.c_uint
    ops = torch.ops.fastpad_cuda_sim

    class Sim:
        conv, conv_transpose, conv_weight_grad = ops.conv, ops.conv_transpose, ops.conv_weight_grad

        @staticmethod
        def configure(schedule="ascending", seed=0, grid_cap=GRID_CAP, poison=True):
            kernels.cuda_sim_configure(SCHEDULES[schedule], seed, grid_cap, int(poison))

        @staticmethod
        def last_requested_blocks():
            """The blocks the most recent kernel launch asked for (its grid on a GPU, before the grid cap)."""
            return kernels.cuda_sim_last_requested_blocks()

    Sim.configure()
    return Sim


def draw(rng):
    """A random conv problem (explicit pads, pad_hi down to -1 in zeros mode: op-level arguments) that torch
    accepts."""
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
    grouping = rng.choice(("dense", "dense", "wide", "grouped", "depthwise", "multiplier", "vectors"))
    dtype = rng.choice(DTYPES[:2] * 3 + DTYPES[2:])
    layout = rng.choice(LAYOUTS)
    if grouping == "vectors":  # the pipelined GEMM's problems: 8k channels per group, mostly 16-bit channels_last
        groups = rng.randint(1, 2)
        c_in, c_out = groups * 8 * rng.randint(1, 3), groups * rng.choice((rng.randint(1, 10), 8, 16))
        dtype = rng.choice(DTYPES[2:])
        layout = rng.choice(("channels_last", "channels_last", "contiguous"))
        if rng.random() < 0.5:  # stride 1 in zeros mode: the input gradient runs the pipelined GEMM too
            stride, mode = [1] * nd, "zeros"
    elif grouping == "dense":
        groups, c_in, c_out = 1, rng.randint(1, 9), rng.randint(1, 9)
    elif grouping == "wide":  # crosses the 64-wide GEMM tiles
        groups, c_in, c_out = 1, rng.randint(5, 12), rng.randint(60, 70)
    elif grouping == "grouped":
        groups = rng.randint(2, 3)
        c_in, c_out = groups * rng.randint(2, 5), groups * rng.randint(1, 5)
    else:
        groups = rng.choice((rng.randint(1, 6), rng.randint(1, 6), 8, 16))  # 8 and 16: whole channel vectors
        c_in, c_out = groups, groups * (rng.randint(2, 3) if grouping == "multiplier" else 1)
        if groups in (8, 16):  # mostly the channel-vector kernels' layout, and half the time their transposed mode
            layout = rng.choice(("channels_last", layout))
            mode = rng.choice(("zeros", mode))
    return ConvCase(False, tuple(size), c_in, c_out, tuple(kernel), tuple(stride), tuple(zip(pad_lo, pad_hi)),
                    tuple(dilation), groups, mode, batch=rng.randint(0, 2), dtype=dtype_name(dtype),
                    layout=layout, bias=rng.random() < 0.7)



def tensors(case, seed):
    """x, w, b, the conv's output gradient gy and a bias for conv_transpose (whose output has x's channels),
    random (never zeros), in the case's dtype, x and gy in its layout."""
    gen = torch.Generator().manual_seed(seed)
    x, w, b = case.random_inputs(gen)
    y = torch.ops.fastpad.conv(x.double(), w.double(), None, *case.conv_op_arguments())

    def randn(shape):
        return torch.randn(shape, generator=gen, dtype=torch.float64).to(case.torch_dtype)

    gy = arrange(randn(y.shape), case.layout)
    return x, w, b, gy, randn((case.in_channels,)) if case.bias else None


def run_op(sim, op, args, schedules):
    """Runs the shim's `op` under each schedule (outputs poisoned first); the results must agree bit for bit.
    Returns (result, path)."""
    results = []
    for schedule in schedules:
        sim.configure(schedule, seed=len(results) + 1)
        like = args[0]
        poison(like.shape if op != "conv_weight_grad" else args[2], like.dtype, blocks=2)
        results.append(getattr(sim, op)(*args))
    first, path = results[0]
    for schedule, (other, other_path) in zip(schedules[1:], results[1:]):
        assert other_path == path
        assert torch.equal(first.contiguous().view(BITS[first.dtype]), other.contiguous().view(BITS[other.dtype])), (
            f"{op}: the {schedule} schedule gives another result than {schedules[0]}")
    return first, path


BITS = {torch.float64: torch.int64, torch.float32: torch.int32, torch.bfloat16: torch.int16,
        torch.float16: torch.int16}


def check_case(sim, case, seed, schedules=tuple(SCHEDULES)):
    """Each op through the shim against the CPU op in float64 on the same (dtype-rounded) values, under every
    schedule; returns the kernel path of each op."""
    x, w, b, gy, bt = tensors(case, seed)
    f64 = lambda t: None if t is None else t.double()  # noqa: E731
    dtype, paths = case.torch_dtype, {}
    stride, pad_lo, _, dilation, groups, mode = conv_args = case.conv_op_arguments()

    y, paths["conv"] = run_op(sim, "conv", (x, w, b, *conv_args), schedules)
    expected = torch.ops.fastpad.conv(f64(x), f64(w), f64(b), *conv_args)
    compare(y, expected, dtype, "conv", case)

    transpose_args = (stride, pad_lo, list(case.size), dilation, groups, mode)
    gx, paths["conv_transpose"] = run_op(sim, "conv_transpose", (gy, w, bt, *transpose_args), schedules)
    expected = torch.ops.fastpad.conv_transpose(f64(gy), f64(w), f64(bt), *transpose_args)
    compare(gx, expected, dtype, "conv_transpose", case)

    grad_args = (list(w.shape), stride, pad_lo, dilation, groups, mode)
    gw, paths["conv_weight_grad"] = run_op(sim, "conv_weight_grad", (x, gy, *grad_args), schedules)
    expected = torch.ops.fastpad.conv_weight_grad(f64(x), f64(gy), *grad_args)
    compare(gw, expected, dtype, "conv_weight_grad", case)

    # The bindings choose with kernel_paths.h, as the private path ops report it.
    assert paths["conv"] == torch.ops.fastpad._conv_path(x, w, b, *conv_args, "cuda")
    assert paths["conv_transpose"] == torch.ops.fastpad._conv_transpose_path(gy, w, bt, *transpose_args, "cuda")
    assert paths["conv_weight_grad"] == torch.ops.fastpad._conv_weight_grad_path(x, gy, *grad_args, "cuda")
    return paths


def compare(actual, expected, dtype, what, case):
    assert actual.shape == expected.shape, f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)} in {case}"
    if actual.numel() == 0:
        return
    assert actual.isfinite().all(), f"{what}: unwritten (NaN-poisoned) elements in {case}"
    err = relative_error(actual, expected)
    assert err <= tolerance(dtype), f"{what}: relative error {err:.3g} > {tolerance(dtype):.1g} in {case}"


def base_case(**changes):
    """A float64 2-d problem (fastpad/cases.py) with explicit pads, and `changes` to its fields."""
    return replace(ConvCase(False, (9, 11), 4, 6, 3, padding=((1, 1), (1, 1)), dtype="float64"), **changes)


GEMM, HALO, DIRECT, ROWS = "cuda_implicit_gemm", "cuda_depthwise_halo", "cuda_direct", "cuda_depthwise_rows"
PIPELINED, VECTORS, FEW = "cuda_pipelined_gemm", "cuda_depthwise_vectors", "cuda_few_channels"
GATHER, PHASE, FOLD = "cuda_direct_gather", "cuda_phase_gemm", "cuda_phase_gemm_fold"
REDUCTION, SPLIT_K = "cuda_depthwise_reduction", "cuda_split_k_gemm"

# Problems that reach each kernel path of each op, small enough to run every schedule. Each names, per op
# (conv, conv_transpose, conv_weight_grad), the path it reaches in zeros mode; other modes turn PHASE into FOLD.
PATH_CASES = {
    "gemm_tiles_crossed": (base_case(in_channels=9, out_channels=70, size=(6, 5), stride=(2, 1)),
                           (GEMM, PHASE, SPLIT_K)),
    "gemm_wide_y_channels": (base_case(in_channels=66, out_channels=5, size=(4, 5), padding=((2, 1), (1, 1))),
                             (GEMM, PHASE, SPLIT_K)),
    "gemm_split_k_two_splits": (base_case(in_channels=4, out_channels=6, size=(24, 24), batch=2),
                                (GEMM, PHASE, SPLIT_K)),
    "gemm_grouped_3d": (base_case(size=(4, 5, 4), kernel=(2, 3, 2), stride=(2, 1, 2), dilation=(1, 2, 1),
                                  padding=((1, 0), (2, 2), (0, 1)), in_channels=8, out_channels=8, groups=2),
                        (GEMM, PHASE, SPLIT_K)),
    # 16-bit channels-last cases with 8k input channels per group take the pipelined GEMM (the others the GEMM):
    # 70 output channels cross a 128-wide tile, 24 channels per tap straddle the 32-wide k-tiles, and K ends inside
    # a k-tile (K = 96 grouped 3-d, K = 216 with 24 channels). The last has 5 tiles for the grid cap's 3 blocks, and
    # stride 1: its input gradient, in zeros mode, is the conv the pipelined GEMM runs (K = 72, 8 channels per tap).
    "pipelined_columns_crossed": (base_case(in_channels=16, out_channels=70, size=(9, 11), stride=(2, 1),
                                            padding=((0, 1), (1, 2))), (PIPELINED, PHASE, SPLIT_K)),
    "pipelined_grouped_3d": (base_case(size=(4, 5, 4), kernel=(2, 3, 2), stride=(2, 1, 2), dilation=(1, 2, 1),
                                       padding=((1, 0), (2, 2), (0, 1)), in_channels=16, out_channels=12, groups=2),
                             (PIPELINED, PHASE, SPLIT_K)),
    # 5 output channels per group: the last column of each group has no pair, and groups 1's pairs start at an odd
    # channel, so the epilogue stores them element by element.
    "pipelined_odd_columns": (base_case(in_channels=24, out_channels=15, groups=3, size=(6, 7)),
                              (PIPELINED, PHASE, SPLIT_K)),
    "pipelined_taps_straddle_k_tiles": (base_case(in_channels=24, out_channels=8, size=(7, 13), dilation=(2, 1),
                                                  padding=((2, 2), (0, 2)), batch=3), (PIPELINED, PIPELINED, PIPELINED)),
    # The transposed conv's stride phases on the pipelined GEMM (8k x channels per group): 6 phases with 1-2 x 1-2 taps
    # (dilation 2 over stride 2 gives one tap class per row phase), 2 groups; then a kernel of 1 row at stride 2,
    # whose odd rows no tap reaches (those phases are the bias alone).
    "pipelined_strided_phases": (base_case(in_channels=16, out_channels=32, groups=2, size=(9, 11), kernel=(3, 4),
                                           stride=(2, 3), dilation=(2, 1), padding=((1, 2), (2, 1))),
                                 (PIPELINED, PIPELINED, PIPELINED)),
    "pipelined_phases_without_taps": (base_case(in_channels=16, out_channels=8, size=(7, 10), kernel=(1, 3),
                                                stride=(2, 2), padding=((0, 0), (1, 1))), (PIPELINED, PIPELINED, PIPELINED)),
    # The weight gradient on the pipelined GEMM (8k input and output channels per group): 72 output channels and
    # 8 x 9 columns cross its 64 x 64 tiles, and 1152 positions make 2 splits of the reduction.
    "pipelined_weight_grad_splits": (base_case(in_channels=8, out_channels=72, size=(24, 24), batch=2),
                                     (PIPELINED, PIPELINED, PIPELINED)),
    # 3-d output positions of 2 x 3 x 2 per image: a k-tile's 32 positions (16-bit) step 2 images and (1, 1, 0), its
    # 16 (float32) 1 image and (0, 2, 0), so the weight gradient's position cursor carries in every dimension.
    "pipelined_weight_grad_small_images": (base_case(in_channels=8, out_channels=16, size=(2, 4, 4), kernel=(2, 2, 3),
                                                     stride=(1, 1, 2), padding=((1, 0), (0, 0), (1, 1)), batch=5),
                                           (PIPELINED, PIPELINED, PIPELINED)),
    # A stem's 3 input channels, fewer than one 16-byte vector: its weight gradient runs the pipelined GEMM on copies of
    # x padded to one vector with zero channels (8 16-bit, 4 float32 on TF32); 16 output channels are whole vectors,
    # so the input gradient's phases run it too, unpadded. conv sums the 3 channels directly (cuda_few_channels).
    "pipelined_padded_channels": (base_case(in_channels=3, out_channels=16, size=(11, 12), stride=(2, 2),
                                            padding=((0, 1), (1, 1)), batch=2), (FEW, PIPELINED, PIPELINED)),
    # 6 input channels: conv too runs the pipelined GEMM on x padded to 8 in 16-bit (in float32 they are neither whole
    # vectors nor padded).
    "padded_channels_conv": (base_case(in_channels=6, out_channels=16, size=(11, 12), stride=(2, 2),
                                       padding=((0, 1), (1, 1)), batch=2), (PIPELINED, PIPELINED, PIPELINED)),
    # An RGB stem: conv sums its 3 input channels directly, 16 output channels a thread (24: a chunk and a half), k3x4;
    # its weight gradient pads x to one vector in 16-bit (cuda_pipelined_channels), as above.
    "few_channels": (base_case(in_channels=3, out_channels=24, size=(11, 13), kernel=(3, 4), stride=(2, 2),
                               padding=((0, 1), (2, 1)), batch=2), (FEW, PIPELINED, SPLIT_K)),
    # Depthwise, one output channel per input channel: channels_last inputs take the channel-vector kernels (16 channels
    # are 2 bfloat16, 4 float32 and 8 float64 vectors, so one or two blocks of 4 vectors), conv_transpose in zeros mode;
    # the others the halo tiles and the gather.
    "depthwise_vectors_2d": (base_case(in_channels=16, out_channels=16, groups=16, size=(19, 21), stride=(2, 2),
                                       padding=((0, 1), (1, 1))), (VECTORS, VECTORS, VECTORS)),
    "depthwise_vectors_3d": (base_case(in_channels=8, out_channels=8, groups=8, size=(3, 5, 6), kernel=(2, 3, 3),
                                       stride=(1, 2, 1), dilation=(1, 1, 2), padding=((1, 0), (1, 1), (2, 1))),
                             (VECTORS, VECTORS, VECTORS)),
    # The weight gradient's vector kernel: 264 channels are 33 bfloat16, 66 float32 and 132 float64 vectors, in 2, 3
    # and 5 blocks of up to 32 (the last partial); 15 taps make 2 groups of up to 9 (3 of 5 in 16-bit); 338 positions
    # make 5 splits.
    "depthwise_grad_vectors_blocks": (base_case(in_channels=264, out_channels=264, groups=264, size=(14, 13),
                                                kernel=(5, 3), padding=((2, 1), (0, 2))), (VECTORS, VECTORS, VECTORS)),
    "depthwise_halo_2d": (base_case(in_channels=4, out_channels=8, groups=4, size=(19, 40), stride=(2, 2)),
                          (HALO, GATHER, REDUCTION)),
    "depthwise_rows_1d": (base_case(in_channels=3, out_channels=3, groups=3, size=(300,), kernel=5, stride=1,
                                    dilation=2, padding=((8, 0),)), (ROWS, ROWS, REDUCTION)),
    # conv_transpose on the rows kernel at stride 1: 2500 y positions, two blocks of 2048 per row.
    "depthwise_rows_transposed_tiles": (base_case(in_channels=2, out_channels=2, groups=2, size=(2500,), kernel=4,
                                                  padding=((2, 1),), batch=1), (ROWS, ROWS, REDUCTION)),
    # 2 -> 4 channels (a multiplier), 2250 outputs: two blocks of 2048 per row, the second partial; stride 2.
    "depthwise_rows_tiles": (base_case(in_channels=2, out_channels=4, groups=2, size=(4500,), kernel=3, stride=2,
                                       padding=((1, 1),), batch=1), (ROWS, GATHER, REDUCTION)),
    "depthwise_patch_too_large": (base_case(in_channels=2, out_channels=2, groups=2, size=(40, 30), kernel=3,
                                            dilation=60, padding=((60, 60), (60, 60)), batch=1),
                                  (DIRECT, GATHER, VECTORS)),  # the weight gradient's vectors: float64's 2 channels
}
LAYOUTS = ("contiguous", "channels_last", "strided")


def expected_paths(case, paths):
    conv, transpose, grad = paths
    # The pipelined GEMMs take 16-bit types here (float32 only with TF32 on), in any layout: tensors without channel
    # vectors are copied channels-contiguous first (cuda_stages_channels in kernel_paths.h).
    tensor_cores = case.dtype in ("bfloat16", "float16")
    lanes = 16 // getattr(torch, case.dtype).itemsize
    # cuda_pipelined_channels: fewer input channels than one 16-byte vector, in one group, are padded to one vector
    # where that at most triples them.
    pads_channels = case.groups == 1 and case.in_channels < lanes <= 3 * case.in_channels
    if conv == GEMM and tensor_cores and pads_channels:
        conv = PIPELINED
    if conv in (GEMM, PIPELINED) and case.groups == 1 and case.in_channels <= 4:
        conv = FEW  # cuda_few_channels: up to 4 input channels in one group, any dtype
    if grad == SPLIT_K and tensor_cores and pads_channels and case.out_channels % lanes == 0:
        grad = PIPELINED
    if conv == PIPELINED and not tensor_cores:
        conv = GEMM
    if conv == VECTORS and not (case.layout == "channels_last" and case.dims > 1):
        conv = HALO  # channel vectors need the channels contiguous
    if transpose == VECTORS and not (case.layout == "channels_last" and case.dims > 1 and case.padding_mode == "zeros"):
        transpose = GATHER  # and the transposed kernel folds no padding back
    if transpose == ROWS and case.padding_mode != "zeros":
        transpose = GATHER  # nor does the transposed rows kernel
    if transpose == PIPELINED and not tensor_cores:
        transpose = PHASE
    if grad == PIPELINED and not tensor_cores:
        grad = SPLIT_K
    if grad == VECTORS and not (case.layout == "channels_last" and case.dims > 1 and case.in_channels % lanes == 0):
        grad = REDUCTION  # the depthwise weight gradient's vectors need whole 16-byte vectors of contiguous channels
    if case.layout == "channels_last" and case.dims > 1 and conv == HALO:
        conv = DIRECT  # channels_last depthwise runs the direct kernel along C
    # ... unless its channels are whole vectors, one per group: the vector kernel has no patch to outgrow (zeros mode
    # only for the transposed conv's)
    one_per_group = case.groups == case.in_channels == case.out_channels
    if (conv == DIRECT and one_per_group and case.layout == "channels_last" and case.dims > 1
            and case.in_channels % lanes == 0):
        conv = VECTORS
        transpose = VECTORS if case.padding_mode == "zeros" else transpose
    if case.padding_mode != "zeros" and transpose == PHASE:
        transpose = FOLD
    return conv, transpose, grad


def path_case(name, mode, layout_kind, dtype):
    case, paths = PATH_CASES[name]
    case = replace(case, padding_mode=mode, layout=layout_kind, dtype=dtype_name(dtype))
    if mode in ("reflect", "circular"):  # pads must stay below the input size (reflect) or within it (circular)
        if name == "depthwise_patch_too_large":
            case = replace(case, size=(70, 70))
        limit = 1 if mode == "reflect" else 0
        case = replace(case, padding=tuple((min(lo, s - limit), min(hi, s - limit))
                                           for (lo, hi), s in zip(case.pads(), case.size)))
    return case, expected_paths(case, paths)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout_kind", LAYOUTS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(PATH_CASES))
def test_every_kernel_path(sim, name, mode, layout_kind, dtype):
    """Every kernel path x padding mode x layout x dtype, all three ops, under every schedule with the grid cap."""
    case, paths = path_case(name, mode, layout_kind, dtype)
    taken = check_case(sim, case, seed=len(name))
    assert (taken["conv"], taken["conv_transpose"], taken["conv_weight_grad"]) == paths


# The pipelined GEMM's tile shapes (rows x columns of C per block), as pipelined_tile() in csrc/cuda/problems.h picks
# them: 128 rows once 128-row tiles give at least kPipelineTargetBlocks (264) blocks, 128 columns past 64 output
# channels per group. PATH_CASES reach 64 x 64 and 64 x 128; these reach the two 128-row shapes.
PIPELINE_TARGET_BLOCKS = 264
PIPELINED_LARGE_TILES = {
    (128, 64): base_case(in_channels=8, out_channels=40, size=(184, 184), kernel=(1, 2), padding=((0, 0), (0, 1)),
                         batch=1),
    (128, 128): base_case(in_channels=16, out_channels=72, size=(92, 184), kernel=(2, 1), stride=(1, 1),
                          padding=((1, 0), (0, 0)), batch=2),
}


@pytest.mark.parametrize("tile", sorted(PIPELINED_LARGE_TILES), ids=lambda t: f"{t[0]}x{t[1]}")
def test_pipelined_large_tiles(sim, tile):
    """The two 128-row tile shapes of the pipelined GEMM, bfloat16 channels_last, against the CPU op."""
    case = replace(PIPELINED_LARGE_TILES[tile], dtype="bfloat16", layout="channels_last")
    out_positions = math.prod(case.conv_output_size())
    channels = case.out_channels // case.groups
    blocks_at_128 = -(-case.batch * out_positions // 128) * -(-channels // tile[1]) * case.groups
    assert blocks_at_128 >= PIPELINE_TARGET_BLOCKS and (channels <= 64) == (tile[1] == 64)
    x, w, b, _, _ = tensors(case, seed=5)
    y, path = run_op(sim, "conv", (x, w, b, *case.conv_op_arguments()), ("random", "ascending"))
    assert path == PIPELINED
    compare(y, torch.ops.fastpad.conv(x.double(), w.double(), b.double(), *case.conv_op_arguments()),
            torch.bfloat16, "conv", case)


@pytest.mark.parametrize("mode", ["zeros", "reflect"])
@pytest.mark.parametrize("name", sorted(name for name in PATH_CASES if name.startswith("pipelined")))
def test_tf32_pipelined_gemm(sim, tf32, name, mode):
    """float32 channels_last with TF32 allowed (torch's default for its cuDNN convs): conv, conv_transpose's stride
    phases where x has 4k channels per group, and conv_weight_grad where both sides do, run the pipelined GEMMs on
    TF32 tensor cores under every schedule. Their result is the float64 op
    on the inputs rounded to TF32 (cvt.rna) to float32 accumulation (conv_transpose: plus its padding mode's folds,
    which the gather pass adds in float32), and not the float32 one: TF32 ran. With TF32 off
    the same problems take the FMA GEMMs and give the float32 result. (A stem's conv sums its few channels directly,
    in exact float32, either way.)"""
    case, _ = path_case(name, mode, "channels_last", torch.float32)
    transposed_on_pipeline = PATH_CASES[name][1][1] == PIPELINED
    x, w, b, gy, bt = tensors(case, seed=len(name))
    f64 = lambda t: None if t is None else t.double()  # noqa: E731
    tf32_64 = lambda t: tf32_rounded(t).double()  # noqa: E731
    stride, pad_lo, _, dilation, groups, _ = conv_args = case.conv_op_arguments()
    transpose_args = (stride, pad_lo, list(case.size), dilation, groups, mode)

    y, path = run_op(sim, "conv", (x, w, b, *conv_args), tuple(SCHEDULES))
    exact_y = torch.ops.fastpad.conv(f64(x), f64(w), f64(b), *conv_args)
    if PATH_CASES[name][1][0] == FEW:  # a stem's conv sums its few channels on the FMA units: exact float32
        assert path == FEW == torch.ops.fastpad._conv_path(x, w, b, *conv_args, "cuda")
        compare(y, exact_y, torch.float32, "conv", case)
    else:
        assert path == PIPELINED == torch.ops.fastpad._conv_path(x, w, b, *conv_args, "cuda")
        compare(y, torch.ops.fastpad.conv(tf32_64(x), tf32_64(w), f64(b), *conv_args), torch.float32, "conv", case)
        assert relative_error(y, exact_y) > 10 * tolerance(torch.float32)

    gx, path = run_op(sim, "conv_transpose", (gy, w, bt, *transpose_args), tuple(SCHEDULES))
    exact_gx = torch.ops.fastpad.conv_transpose(f64(gy), f64(w), f64(bt), *transpose_args)
    if transposed_on_pipeline:
        assert path == PIPELINED
        # The phases are TF32 GEMMs; a padding mode's folds are the gather pass's, in float32.
        zeros_args = (*transpose_args[:-1], "zeros")
        folds = exact_gx - torch.ops.fastpad.conv_transpose(f64(gy), f64(w), f64(bt), *zeros_args)
        compare(gx, torch.ops.fastpad.conv_transpose(tf32_64(gy), tf32_64(w), f64(bt), *zeros_args) + folds,
                torch.float32, "conv_transpose", case)
        assert relative_error(gx, exact_gx) > 10 * tolerance(torch.float32)
    else:
        assert path == (PHASE if mode == "zeros" else FOLD)  # x's channels not whole vectors: exact float32
        compare(gx, exact_gx, torch.float32, "conv_transpose", case)

    grad_args = (list(w.shape), stride, pad_lo, dilation, groups, mode)
    gw, path = run_op(sim, "conv_weight_grad", (x, gy, *grad_args), tuple(SCHEDULES))
    exact_gw = torch.ops.fastpad.conv_weight_grad(f64(x), f64(gy), *grad_args)
    if PATH_CASES[name][1][2] == PIPELINED and case.out_channels // case.groups % 4 == 0:
        assert path == PIPELINED
        compare(gw, torch.ops.fastpad.conv_weight_grad(tf32_64(x), tf32_64(gy), *grad_args), torch.float32,
                "conv_weight_grad", case)
        assert relative_error(gw, exact_gw) > 10 * tolerance(torch.float32)
    else:
        assert path == SPLIT_K  # output channels not whole 4-float vectors: exact float32
        compare(gw, exact_gw, torch.float32, "conv_weight_grad", case)

    torch.backends.cudnn.allow_tf32 = False
    y, path = run_op(sim, "conv", (x, w, b, *conv_args), ("random",))
    fma_path = FEW if PATH_CASES[name][1][0] == FEW else GEMM
    assert path == fma_path == torch.ops.fastpad._conv_path(x, w, b, *conv_args, "cuda")
    compare(y, exact_y, torch.float32, "conv", case)


def channels_contiguous_1d(t):
    """A 1-d tensor [N, C, L] with the same values, its channels contiguous: an NLC tensor viewed as NCL, the layout
    in which 1-d layers reach the channel-vector paths (torch has no channels_last format for 3-d tensors)."""
    return t.transpose(1, 2).contiguous().transpose(1, 2)


@pytest.mark.parametrize("mode", ["zeros", "reflect"])
def test_pipelined_1d_with_channels_contiguous(sim, mode):
    """A 1-d layer whose tensors are NLC viewed as NCL takes the pipelined GEMM in all three ops (here 2 stride
    phases for the transposed conv), every schedule, against the CPU ops in float64."""
    case = base_case(size=(40,), kernel=5, stride=2, padding=((2, 1),), in_channels=16, out_channels=24, batch=2,
                     padding_mode=mode, dtype="bfloat16")
    x, w, b, gy, bt = tensors(case, seed=13)
    x, gy = channels_contiguous_1d(x), channels_contiguous_1d(gy)
    assert x.stride(1) == 1 and gy.stride(1) == 1
    f64 = lambda t: t.double()  # noqa: E731
    stride, pad_lo, _, dilation, groups, _ = conv_args = case.conv_op_arguments()
    transpose_args = (stride, pad_lo, list(case.size), dilation, groups, mode)
    grad_args = (list(w.shape), stride, pad_lo, dilation, groups, mode)
    for op, args, expected in [
        ("conv", (x, w, b, *conv_args), torch.ops.fastpad.conv(f64(x), f64(w), f64(b), *conv_args)),
        ("conv_transpose", (gy, w, bt, *transpose_args),
         torch.ops.fastpad.conv_transpose(f64(gy), f64(w), f64(bt), *transpose_args)),
        ("conv_weight_grad", (x, gy, *grad_args), torch.ops.fastpad.conv_weight_grad(f64(x), f64(gy), *grad_args)),
    ]:
        result, path = run_op(sim, op, args, tuple(SCHEDULES))
        assert path == PIPELINED, (op, path)
        compare(result, expected, torch.bfloat16, op, case)


FIXED_SEED = 20261122


@pytest.mark.parametrize("seed", [FIXED_SEED, None])
def test_random_problems(sim, seed, capsys):
    """RANDOM_CASES random problems (FASTPAD_CUDA_SIM_CASES) from a fixed seed and from a printed random one, each
    under the random schedule and one other."""
    seed = random.randrange(2**31) if seed is None else seed
    rng = random.Random(seed)
    seen = {"conv": set(), "conv_transpose": set(), "conv_weight_grad": set()}
    for index in range(RANDOM_CASES):
        case = draw(rng)
        schedules = ("random", ("ascending", "descending", "interleaved")[index % 3])
        for op, path in check_case(sim, case, seed=seed + index, schedules=schedules).items():
            seen[op].add(path)
    with capsys.disabled():
        print(f"\nCUDA execution shim: {RANDOM_CASES} random problems, seed {seed}, paths taken {seen}")
    if seed == FIXED_SEED and RANDOM_CASES >= 150:
        # This draw reaches every path of every op but conv_transpose's rows kernel (1-d depthwise at stride 1 in
        # zeros mode, which PATH_CASES reach); a random seed may miss a rare one.
        assert seen["conv"] == {PIPELINED, VECTORS, GEMM, ROWS, HALO, DIRECT, FEW}, seen
        assert seen["conv_transpose"] == {PIPELINED, VECTORS, GATHER, PHASE, FOLD}, seen
        assert seen["conv_weight_grad"] == {PIPELINED, VECTORS, REDUCTION, SPLIT_K}, seen


def test_shim_catches_a_wrong_index(sim):
    """The comparison can fail: the shim's result on a shifted input (a one-position indexing error) differs."""
    case = base_case(in_channels=6, out_channels=5, padding_mode="reflect")
    x, w, b, _, _ = tensors(case, seed=1)
    y, _ = sim.conv(torch.roll(x, 1, dims=-1), w, b, *case.conv_op_arguments())
    expected = torch.ops.fastpad.conv(x, w, b, *case.conv_op_arguments())
    with pytest.raises(AssertionError, match="relative error"):
        compare(y, expected, torch.float64, "conv", case)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layout_kind", ["contiguous", "channels_last"])
def test_transposed_gemm_with_non_finite_weights(sim, mode, layout_kind):
    """An inf or NaN weight gives torch's infs and NaNs, no more: where a phase GEMM multiplied such a weight by a zero
    loaded for a tap outside x, the gather pass recomputes the output (the CPU ops match torch here)."""
    case = base_case(in_channels=5, out_channels=8, padding_mode=mode, stride=2, padding=((1, 2), (2, 1)),
                     layout=layout_kind)
    x, w, _, gy, bt = tensors(case, seed=7)
    w[2, 1, 0, 0], w[3, 4, 2, 1], w[5, 0, 1, 2] = float("inf"), float("nan"), float("-inf")
    stride, pad_lo, _, dilation, groups, _ = case.conv_op_arguments()
    args = (stride, pad_lo, list(case.size), dilation, groups, mode)
    sim.configure("random", seed=3)
    gx, path = sim.conv_transpose(gy, w, bt, *args)
    expected = torch.ops.fastpad.conv_transpose(gy, w, bt, *args)
    assert path == (PHASE if mode == "zeros" else FOLD)
    assert expected.isfinite().any() and not expected.isfinite().all()
    torch.testing.assert_close(gx, expected, equal_nan=True, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", ["zeros", "reflect"])
def test_transposed_completion_pass_grid(sim, mode):
    """After the pipelined stride phases, zeros mode's gather pass has work only for a weight with an inf or NaN, which
    the kernel reads from a device flag: it asks for the blocks that fill the GPU once and loops over y with their
    grid stride, where a block per 256 y elements (288 here; 1M for the U-Net's k4 s2 layer at batch 256) cost 1.7 ms
    on an H200 to launch and return. reflect's fold pass has work at every border and keeps a block per 256 elements.
    Run without the grid cap, with a finite weight and then with an inf in it."""
    case = base_case(in_channels=8, out_channels=8, size=(96, 96), batch=1, padding=((1, 1), (1, 1)),
                     padding_mode=mode, layout="channels_last", dtype="bfloat16")
    x, w, _, gy, bt = tensors(case, seed=5)
    stride, pad_lo, _, dilation, groups, _ = case.conv_op_arguments()
    args = (stride, pad_lo, list(case.size), dilation, groups, mode)
    elements = gy.shape[0] * w.shape[1] * math.prod(case.size)
    expected_blocks = (min(math.ceil(elements / 256), PIPELINE_TARGET_BLOCKS) if mode == "zeros"
                       else math.ceil(elements / 256))
    assert math.ceil(elements / 256) == 288
    w_inf = w.clone()
    w_inf[3, 2, 0, 1] = float("inf")
    try:
        sim.configure("ascending", grid_cap=0)
        for weight in (w, w_inf):
            gx, path = sim.conv_transpose(gy, weight, bt, *args)
            assert path == PIPELINED
            assert sim.last_requested_blocks() == expected_blocks
            expected = torch.ops.fastpad.conv_transpose(gy.double(), weight.double(), bt.double(), *args)
            assert torch.equal(gx.isnan(), expected.isnan()) and torch.equal(gx.isinf(), expected.isinf())
            finite = expected.isfinite()
            assert relative_error(gx[finite].double(), expected[finite]) <= tolerance(torch.bfloat16)
    finally:
        sim.configure()


NON_FINITE_CASES = {  # id: (case, the path it takes)
    PIPELINED: (base_case(in_channels=8, out_channels=16, padding=((1, 2), (2, 1)), layout="channels_last",
                          dtype="bfloat16"), PIPELINED),
    f"{PIPELINED}_strided_reflect": (base_case(in_channels=8, out_channels=16, stride=2, kernel=(3, 4),
                                               padding=((1, 2), (2, 1)), padding_mode="reflect",
                                               layout="channels_last", dtype="bfloat16"), PIPELINED),
    VECTORS: (base_case(in_channels=16, out_channels=16, groups=16, stride=2, padding=((1, 2), (2, 1)),
                        layout="channels_last", dtype="bfloat16"), VECTORS),
    ROWS: (base_case(in_channels=8, out_channels=8, groups=8, size=(40,), kernel=5, dilation=2, padding=((8, 0),),
                     dtype="bfloat16"), ROWS),
}


@pytest.mark.parametrize("name", sorted(NON_FINITE_CASES))
def test_vector_transposed_convs_with_non_finite_weights(sim, name):
    """The transposed conv's stride phases on the pipelined GEMM multiply weights by the zeros around x, and the
    gather pass recomputes those outputs (and folds reflect's padding back); the depthwise vector and rows kernels
    skip taps outside x. Either way an inf or NaN weight gives infs and NaNs where torch's do."""
    case, path = NON_FINITE_CASES[name]
    x, w, _, gy, bt = tensors(case, seed=11)
    taps = w.view(w.shape[0], -1)  # 2-d: w[2, 0, 0, 0], w[3, 0, 2, 1] and w[5, 0, 1, 2]
    for (channel, tap), value in zip(((2, 0), (3, 7), (5, 5)), (float("inf"), float("nan"), float("-inf"))):
        taps[channel, tap % taps.shape[1]] = value
    stride, pad_lo, _, dilation, groups, mode = case.conv_op_arguments()
    args = (stride, pad_lo, list(case.size), dilation, groups, mode)
    sim.configure("random", seed=3)
    gx, taken = sim.conv_transpose(gy, w, bt, *args)
    expected = torch.ops.fastpad.conv_transpose(gy.double(), w.double(), bt.double(), *args)
    assert taken == path
    assert expected.isfinite().any() and not expected.isfinite().all()
    assert torch.equal(gx.isnan(), expected.isnan()) and torch.equal(gx.isinf(), expected.isinf())
    finite = expected.isfinite()
    assert relative_error(gx[finite].double(), expected[finite]) <= tolerance(torch.bfloat16)
