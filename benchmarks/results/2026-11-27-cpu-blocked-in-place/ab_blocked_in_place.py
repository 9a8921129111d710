"""A/B of the blocked direct kernel writing a float32 channels-last output in place, one process, interleaved: O = the
code before (FP_OLD set, a temporary toggle of the measured build: the tiles write a band buffer, copied into y pixel by
pixel), N = the tiles write y itself where each group's output channels are whole vectors; P = F.pad + conv. Every
channels-last layer of the suite (or of the random seeds given) whose forward is on the blocked kernel, forward or
forward+backward; float32, medians of `rounds` rounds.

usage: ab_blocked_in_place.py suite|SEEDS ROUNDS forward|fwdbwd"""
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
    if c.layout != "channels_last" or c.dtype != "float32":
        continue
    x, w, b = c.random_inputs()
    if c.transposed:
        crop_lo, out_size = c.crops()
        path = ops._conv_transpose_path(x, w, b, list(c.per_dim(c.stride)), crop_lo, out_size,
                                        list(c.per_dim(c.dilation)), c.groups, "zeros", "cpu")
    else:
        path = ops._conv_path(x, w, b, *c.conv_op_arguments(), "cpu")
    if not path.startswith("cpu_blocked"):
        continue
    fp, ref = c.fastpad_function(), c.reference_function()
    if mode_name == "forward":
        with torch.no_grad():
            results = {}
            for m in "ON":
                env(m); results[m] = fp(x, w, b)
            assert torch.equal(results["O"], results["N"]), name
        fns = {"O": lambda: fp(x, w, b), "N": lambda: fp(x, w, b), "P": lambda: ref(x, w, b)}
    else:
        x.requires_grad_(True); w.requires_grad_(True)
        gy = torch.randn_like(fp(x, w, b))
        fns = {m: (lambda f: (lambda: f(x, w, b).backward(gy)))(ref if m == "P" else fp) for m in "ONP"}
    with torch.set_grad_enabled(mode_name != "forward"):
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
