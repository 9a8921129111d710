"""A/B of the channels-last depthwise weight gradient, one process, interleaved: O = the code before (FP_OLD set, a
temporary toggle of the measured build: per output pixel and tap, a multiply-add over the thread's block of channels
into sums in memory), N = the row kernel of cpu/nhwc_tiles_kernel.h (per vector of channels and run of up to 8 taps,
the sums in registers along an output row; AVX-512 where the path is cpu_depthwise_avx512). `op`: conv_weight_grad
alone; `fwdbwd`: forward+backward, with P = F.pad + conv. Every channels-last depthwise layer (multiplier 1) of the
suite, or of the random seeds given; float32, medians of `rounds` rounds.

usage: ab_depthwise_weight_grad.py suite|SEEDS ROUNDS op|fwdbwd"""
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
    layers = [("suite", replace(l.case, layout="channels_last"), l.name) for l in SUITE]
else:
    layers = [(f"s{seed}", l.case, l.name) for seed in map(int, which.split(",")) for l in random_layers(100, seed)]
print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, float32, {mode_name}")
ops = torch.ops.fastpad
ratios = []
for tag, c, name in layers:
    if c.transposed or c.layout != "channels_last":
        continue
    x, w, b = c.random_inputs()
    st, lo, hi, dl, g, mode = c.conv_op_arguments()
    with torch.no_grad():
        gy = torch.randn_like(ops.conv(x, w, b, st, lo, hi, dl, g, mode))
    path = ops._conv_weight_grad_path(x, gy, list(w.shape), st, lo, dl, g, mode, "cpu")
    if path not in ("cpu_depthwise", "cpu_depthwise_avx512") or w.shape[0] != x.shape[1] or x.dim() < 4:
        continue  # (channels-last with a multiplier, or 1-d, runs the NCHW kernel)
    if mode_name == "op":
        f = lambda: ops.conv_weight_grad(x, gy, list(w.shape), st, lo, dl, g, mode)
        results = {}
        for m in "ON":
            env(m); results[m] = f()
        assert torch.allclose(results["O"], results["N"], rtol=1e-4, atol=1e-3 * results["O"].abs().max().item())
        fns = {"O": f, "N": f}
    else:
        x.requires_grad_(True); w.requires_grad_(True)
        fp, ref = c.fastpad_function(), c.reference_function()
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
    print(f"{tag} {name} {path} {c.describe()}\n    before {med['O']:.3f} ms, after {med['N']:.3f} ms:"
          f" after/before {med['N']/med['O']:.2f}{extra}", flush=True)
if ratios:
    geo = torch.tensor(ratios).log().mean().exp().item()
    print(f"{len(ratios)} layers: after/before {min(ratios):.2f}-{max(ratios):.2f}, geomean {geo:.2f}")
