"""A/B of AVX-512 channels-last register tiles (cpu/nhwc_tiles_avx512.cpp), one process, interleaved: O = the code
before (FP_OLD set, a temporary toggle of the measured build: the tiles on at::vec's 8-float AVX2 vectors), N = the
tiles on AVX-512's 16 floats where a row has 16 channels or more; P = F.pad + conv (the reference). Every layer whose
forward runs depthwise.cpp's channels-last tiles (cpu_depthwise channels-last, cpu_grouped_expanded, NCHW
cpu_depthwise_channel_blocks); with `fwdbwd`, forward+backward of those whose input gradient is cpu_depthwise_phases.
Only the layers whose path now has the _avx512 tiles. float32 (or the dtype given), medians of `rounds` rounds.

usage: ab_nhwc_tiles_avx512.py suite|SEEDS ROUNDS [fwdbwd] [bfloat16]"""
import os, sys, time, statistics, torch
from dataclasses import replace
from fastpad.bench.layers import SUITE
from fastpad.bench.random_layers import random_layers

def timeit(f, reps):
    t0 = time.perf_counter()
    for _ in range(reps): f()
    return (time.perf_counter() - t0) / reps * 1e3

def env(m):
    if m == "O": os.environ["FP_OLD"] = "1"
    else: os.environ.pop("FP_OLD", None)

which, rounds = sys.argv[1], int(sys.argv[2])
fwdbwd = "fwdbwd" in sys.argv[3:]
dtype = "bfloat16" if "bfloat16" in sys.argv[3:] else "float32"
if which == "suite":
    layers = [("suite", replace(l.case, layout=layout), l.name) for l in SUITE for layout in ("channels_last", "contiguous")]
else:
    layers = [(f"s{seed}", l.case, l.name) for seed in map(int, which.split(",")) for l in random_layers(100, seed)]
print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, {dtype}, {'fwd+bwd' if fwdbwd else 'forward'}")
ops = torch.ops.fastpad
ratios = []
for tag, c, name in layers:
    if c.transposed:
        continue
    c = replace(c, dtype=dtype)
    x, w, b = c.random_inputs()
    st, lo, hi, dl, g, mode = c.conv_op_arguments()
    path = ops._conv_path(x, w, b, st, lo, hi, dl, g, mode, "cpu")  # the path now (FP_OLD unset)
    if fwdbwd:  # channels-last depthwise, multiplier 1, zeros: the input gradient on the stride phases
        tiles = path == "cpu_depthwise_avx512" and c.padding_mode == "zeros" and w.shape[0] == x.shape[1]
    else:
        tiles = path.endswith("_avx512") and not path.startswith("cpu_blocked")
    if not tiles:
        continue
    f = c.fastpad_function(); ref = c.reference_function()
    if fwdbwd:
        x.requires_grad_(True); w.requires_grad_(True)
        gy = None
        def run(fn):
            global gy
            y = fn(x, w, b)
            if gy is None: gy = torch.randn_like(y)
            y.backward(gy)
        run(f)
        fns = {"O": lambda: run(f), "N": lambda: run(f), "P": lambda: run(ref)}
    else:
        with torch.no_grad():
            y = ref(x.double(), w.double(), b.double() if b is not None else None)
            for m in "ON":
                env(m)
                tol = 1e-4 if dtype == "float32" else 3e-2
                assert torch.allclose(f(x, w, b).double(), y, rtol=tol, atol=tol), m
        fns = {"O": lambda: f(x, w, b), "N": lambda: f(x, w, b), "P": lambda: ref(x, w, b)}
    with torch.set_grad_enabled(fwdbwd):
        reps = max(1, int(0.03 / max(1e-5, timeit(fns["N"], 1) / 1e3)))
        t = {m: [] for m in "ONP"}
        for r in range(rounds):
            for m in ("ONP" if r % 2 == 0 else "NOP"):
                env(m); t[m].append(timeit(fns[m], reps))
        env("N")
    med = {m: statistics.median(v) for m, v in t.items()}
    ratios.append(med["N"] / med["O"])
    print(f"{tag} {name} {path} {c.describe()}\n    before {med['O']:.3f} ms, after {med['N']:.3f} ms:"
          f" after/before {med['N']/med['O']:.2f}, after/(F.pad+conv) {med['N']/med['P']:.2f},"
          f" before/(F.pad+conv) {med['O']/med['P']:.2f}", flush=True)
if ratios:
    geo = torch.tensor(ratios).log().mean().exp().item()
    print(f"{len(ratios)} layers: after/before {min(ratios):.2f}-{max(ratios):.2f}, geomean {geo:.2f}")
