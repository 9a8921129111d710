"""Input gradients (strided transposed convs) of the suite's strided non-depthwise convs and of random layers, x
channels per group >= 16: the blocked kernel's stride phases (FP_TB set, temporary switch) vs the path before.
One process, interleaved, medians of 9 rounds; float32; the op alone (torch.ops.fastpad.conv_transpose)."""
import os, sys, time, statistics, torch
from dataclasses import replace
from fastpad.bench.layers import SUITE
from fastpad.bench.random_layers import random_layers
def timeit(f, reps):
    t0 = time.perf_counter()
    for _ in range(reps): f()
    return (time.perf_counter() - t0) / reps * 1e3
ops = torch.ops.fastpad
which = sys.argv[1]
if which == "suite":
    layers = [("suite", replace(l.case, layout=lay), l.name) for l in SUITE for lay in ("contiguous", "channels_last")]
else:
    layers = [(f"s{s}", l.case, l.name) for s in map(int, which.split(",")) for l in random_layers(100, s)]
ratios = []
for tag, c, name in layers:
    if c.transposed or c.groups == c.in_channels: continue
    x, w, b = c.random_inputs()
    st, lo, hi, dl, g, mode = c.conv_op_arguments()
    with torch.no_grad():
        y = c.fastpad_function()(x, w, b)
    gy = torch.randn_like(y)
    size = list(x.shape[2:])
    args = (gy, w, None, st, lo, size, dl, g, mode)
    paths = {}
    for m in "ON":
        if m == "N": os.environ["FP_TB"] = "1"
        else: os.environ.pop("FP_TB", None)
        paths[m] = ops._conv_transpose_path(*args, "cpu")
    if paths["O"] == paths["N"]: continue
    f = lambda: ops.conv_transpose(*args)
    with torch.no_grad():
        os.environ["FP_TB"] = "1"; a = f(); os.environ.pop("FP_TB"); r = f()
        assert torch.allclose(a, r, rtol=1e-4, atol=1e-3), (a - r).abs().max()
        reps = max(1, int(0.03 / max(1e-5, timeit(f, 1) / 1e3)))
        t = {m: [] for m in "ON"}
        for rnd in range(9):
            for m in ("ON" if rnd % 2 == 0 else "NO"):
                if m == "N": os.environ["FP_TB"] = "1"
                else: os.environ.pop("FP_TB", None)
                t[m].append(timeit(f, reps))
    os.environ.pop("FP_TB", None)
    med = {m: statistics.median(v) for m, v in t.items()}
    ratios.append(med["N"] / med["O"])
    print(f"{tag} {name} {c.layout} input grad of {c.describe()}: {paths['O']} {med['O']:.3f} ms, {paths['N']} {med['N']:.3f} ms, new/old {med['N']/med['O']:.2f}", flush=True)
if ratios: print(f"{len(ratios)} calls: new/old {min(ratios):.2f}-{max(ratios):.2f}, geomean {statistics.geometric_mean(ratios):.2f}")
