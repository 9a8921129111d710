"""A/B of the weight gradient's GEMMs on the reduction tiles, one process, interleaved: O = the code before (FP_OLD
set, a temporary toggle of the measured build: torch's GEMM, MKL, under the phase planes and the channels-last im2col),
N = cpu/reduction_tiles.h's register tiles (AVX-512 here). `op`: conv_weight_grad alone; `fwdbwd`: forward+backward,
with P = F.pad + conv. Every layer of the suite (NCHW and channels-last) or of the random seeds given whose weight
gradient takes cpu_phase_planes_* or cpu_channels_last_gemm_*; float32, medians of `rounds` rounds.

usage: ab_weight_grad_tiles.py suite|SEEDS ROUNDS op|fwdbwd"""
import os, sys, time, statistics, torch, fastpad
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

which, rounds, mode_name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if which == "suite":
    layers = [("suite", replace(l.case, layout=layout), l.name) for layout in ("contiguous", "channels_last")
              for l in SUITE if l.case.dims > 1 or layout == "contiguous"]
else:
    layers = [(f"s{seed}", l.case, l.name) for seed in map(int, which.split(",")) for l in random_layers(100, seed)]
print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, float32, {mode_name}")
ops = torch.ops.fastpad
ratios = []
for tag, c, name in layers:
    x, w, b = c.random_inputs()
    fp = c.fastpad_function()
    with torch.no_grad():
        y = fp(x, w, b)
    gy = torch.randn_like(y)
    # The weight gradient's op: conv_weight_grad(conv input, conv output grad); for a transposed conv its output grad
    # is the conv's input and x the conv's output grad.
    cx, cgy = (gy, x) if c.transposed else (x, gy)
    if c.transposed:
        st, lo, dl, g, mode = list(c.per_dim(c.stride)), c.crops()[0], list(c.per_dim(c.dilation)), c.groups, c.padding_mode
    else:
        st, lo, hi, dl, g, mode = c.conv_op_arguments()
    path = ops._conv_weight_grad_path(cx, cgy, list(w.shape), st, lo, dl, g, mode, "cpu")
    if not path.startswith(("cpu_phase_planes_", "cpu_channels_last_gemm_")):
        continue
    if mode_name == "op":
        f = lambda: ops.conv_weight_grad(cx, cgy, list(w.shape), st, lo, dl, g, mode)
        results = {}
        for m in "ON":
            env(m); results[m] = f()
        assert torch.allclose(results["O"], results["N"], rtol=1e-4, atol=1e-3 * results["O"].abs().max().item())
        fns = {"O": f, "N": f}
    else:
        x.requires_grad_(True); w.requires_grad_(True)
        ref = c.reference_function()
        def run(fn):
            fn(x, w, b).backward(gy)
        fns = {"O": lambda: run(fp), "N": lambda: run(fp), "P": lambda: run(ref)}
    reps = max(1, int(0.03 / max(1e-5, timeit(fns["N"], 1) / 1e3)))
    t = {m: [] for m in fns}
    for r in range(rounds):
        for m in (("ONP" if r % 2 == 0 else "NOP") if "P" in fns else ("ON" if r % 2 == 0 else "NO")):
            env(m); t[m].append(timeit(fns[m], reps))
    env("N")
    med = {m: statistics.median(v) for m, v in t.items()}
    ratios.append(med["N"] / med["O"])
    extra = f", after/(F.pad+conv) {med['N']/med['P']:.2f}, before/(F.pad+conv) {med['O']/med['P']:.2f}" if "P" in med else ""
    print(f"{tag} {name} {c.layout} {path} {c.describe()}\n    before {med['O']:.3f} ms, after {med['N']:.3f} ms:"
          f" after/before {med['N']/med['O']:.2f}{extra}", flush=True)
if ratios:
    geo = torch.tensor(ratios).log().mean().exp().item()
    print(f"{len(ratios)} layers: after/before {min(ratios):.2f}-{max(ratios):.2f}, geomean {geo:.2f}")
