"""A/B of NCHW depthwise convs on channel blocks (cpu_depthwise_channel_blocks), one process, interleaved: O = the
NCHW phase-plane kernel they ran on before (FP_OLD set, a temporary toggle of the measured build), N = channel blocks
(each block's planes transposed to channels-last, the channels-last tiles, the output transposed back); P = F.pad +
conv (the reference).
float32 forward, medians of `rounds` rounds.

usage: ab_nchw_channel_blocks.py suite ROUNDS | ab_nchw_channel_blocks.py SEEDS ROUNDS (e.g. 1,2,3)"""
import os, sys, time, statistics, torch
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
if which == "suite":
    layers = [("suite", l) for l in SUITE]
else:
    layers = [(f"s{seed}", l) for seed in map(int, which.split(",")) for l in random_layers(100, seed)]
print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
ops = torch.ops.fastpad
ratios = []
for tag, l in layers:
    c = l.case
    if which == "suite":
        from dataclasses import replace
        pass
    if c.transposed or c.layout == "channels_last":
        continue
    x, w, b = c.random_inputs()
    st, lo, hi, dl, g, mode = c.conv_op_arguments()
    path = ops._conv_path(x, w, b, st, lo, hi, dl, g, mode, "cpu")
    if path != "cpu_depthwise_channel_blocks":
        continue
    f = c.fastpad_function(); ref = c.reference_function()
    with torch.no_grad():
        y = ref(x.double(), w.double(), b.double() if b is not None else None)
        for m in "ON":
            env(m)
            assert torch.allclose(f(x, w, b).double(), y, rtol=1e-4, atol=1e-4), m
        reps = max(1, int(0.03 / max(1e-5, timeit(lambda: f(x, w, b), 1) / 1e3)))
        fns = {"O": f, "N": f, "P": ref}
        t = {m: [] for m in "ONP"}
        for r in range(rounds):
            for m in ("ONP" if r % 2 == 0 else "NOP"):
                env(m); t[m].append(timeit(lambda: fns[m](x, w, b), reps))
        env("N")
    med = {m: statistics.median(v) for m, v in t.items()}
    ratios.append(med["N"] / med["O"])
    print(f"{tag} {l.name} {path} {c.describe()}\n    before {med['O']:.3f} ms, after {med['N']:.3f} ms:"
          f" after/before {med['N']/med['O']:.2f}, after/(F.pad+conv) {med['N']/med['P']:.2f},"
          f" before/(F.pad+conv) {med['O']/med['P']:.2f}", flush=True)
print(f"{len(ratios)} layers: after/before {min(ratios):.2f}-{max(ratios):.2f},"
      f" geomean {statistics.geometric_mean(ratios):.2f}")
