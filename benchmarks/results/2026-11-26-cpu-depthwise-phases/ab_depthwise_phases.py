"""Channels-last depthwise transposed convs in zeros mode (the transposed forward of transposed layers, the input
gradient of convs): the stride phases as depthwise convs on the channels-last tiles (cpu_depthwise_phases; FP_NEWDX
set, a temporary switch of the measured build) against the scatter they ran before (cpu_depthwise). One process,
interleaved, medians of 9 rounds; float32; the op alone (torch.ops.fastpad.conv_transpose).

usage: ab_depthwise_phases.py suite | ab_depthwise_phases.py SEEDS (e.g. 1,2,3)"""
import os, sys, time, statistics, torch
from dataclasses import replace
from fastpad.bench.layers import SUITE
from fastpad.bench.random_layers import random_layers
def timeit(f, reps):
    t0 = time.perf_counter()
    for _ in range(reps): f()
    return (time.perf_counter() - t0) / reps * 1e3
def new(m):
    if m == "N": os.environ["FP_NEWDX"] = "1"
    else: os.environ.pop("FP_NEWDX", None)
ops = torch.ops.fastpad
which = sys.argv[1]
if which == "suite":
    layers = [("suite", l.name, replace(l.case, layout="channels_last")) for l in SUITE]
else:
    layers = [(f"s{s}", l.name, l.case) for s in map(int, which.split(",")) for l in random_layers(100, s)]
ratios = []
for tag, name, c in layers:
    x, w, b = c.random_inputs()
    if c.transposed:
        crop_lo, out_size = c.crops()
        st, dl = list(c.per_dim(c.stride)), list(c.per_dim(c.dilation))
        args, what = (x, w, b, st, crop_lo, out_size, dl, c.groups, "zeros"), "forward"
    else:
        st, lo, hi, dl, g, mode = c.conv_op_arguments()
        with torch.no_grad(): y = c.fastpad_function()(x, w, b)
        args, what = (torch.randn_like(y), w, None, st, lo, list(x.shape[2:]), dl, g, mode), "input grad"
    paths = {}
    for m in "ON":
        new(m); paths[m] = ops._conv_transpose_path(*args, "cpu")
    if paths["N"] != "cpu_depthwise_phases": continue
    f = lambda: ops.conv_transpose(*args)
    with torch.no_grad():
        new("O"); r = f(); new("N"); a = f()
        assert torch.allclose(a, r, rtol=1e-4, atol=1e-3), (a - r).abs().max()
        reps = max(1, int(0.03 / max(1e-5, timeit(f, 1) / 1e3)))
        t = {m: [] for m in "ON"}
        for rnd in range(9):
            for m in ("ON" if rnd % 2 == 0 else "NO"):
                new(m); t[m].append(timeit(f, reps))
    new("O")
    med = {m: statistics.median(v) for m, v in t.items()}
    ratios.append(med["N"] / med["O"])
    print(f"{tag} {name} {what} of {c.describe()}: {paths['O']} {med['O']:.3f} ms, {paths['N']} {med['N']:.3f} ms, new/old {med['N']/med['O']:.2f}", flush=True)
if ratios: print(f"{len(ratios)} calls: new/old {min(ratios):.2f}-{max(ratios):.2f}, geomean {statistics.geometric_mean(ratios):.2f}")
