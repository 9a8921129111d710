"""Strided transposed convs with 16 or more x channels per group: the blocked kernel's stride phases (FP_TB set, a
temporary switch of the measured build) vs the path they take (phase planes / GEMM + col2im). One process,
interleaved, medians of 11 rounds; float32 forward; P = the reference (full conv_transpose + crop)."""
import os, sys, time, statistics, torch
from dataclasses import replace
from fastpad.bench.layers import SUITE
from fastpad.bench.random_layers import random_layers
def timeit(f, reps):
    t0 = time.perf_counter()
    for _ in range(reps): f()
    return (time.perf_counter() - t0) / reps * 1e3
ops = torch.ops.fastpad
which = sys.argv[1] if len(sys.argv) > 1 else "suite"
if which == "suite":
    layers = [(l, replace(l.case, layout=lay)) for l in SUITE for lay in ("contiguous", "channels_last")]
else:
    layers = [(l, l.case) for s in map(int, which.split(",")) for l in random_layers(100, s)]
for l, c in layers:
        layout = c.layout
        if not c.transposed: continue
        x, w, b = c.random_inputs()
        crop_lo, out_size = c.crops()
        st, dl = list(c.per_dim(c.stride)), list(c.per_dim(c.dilation))
        paths = {}
        for m in "ON":
            if m == "N": os.environ["FP_TB"] = "1"
            else: os.environ.pop("FP_TB", None)
            paths[m] = ops._conv_transpose_path(x, w, b, st, crop_lo, out_size, dl, c.groups, "zeros", "cpu")
        if paths["O"] == paths["N"]: continue
        f = c.fastpad_function(); ref = c.reference_function()
        t = {m: [] for m in "ONP"}
        with torch.no_grad():
            y = ref(x.double(), w.double(), b.double() if b is not None else None)
            os.environ["FP_TB"] = "1"; assert torch.allclose(f(x, w, b).double(), y, rtol=1e-4, atol=1e-3)
            for r in range(11):
                for m in ("ONP" if r % 2 == 0 else "NOP"):
                    if m == "N": os.environ["FP_TB"] = "1"
                    else: os.environ.pop("FP_TB", None)
                    t[m].append(timeit(lambda: (f if m != "P" else ref)(x, w, b), 5))
        os.environ.pop("FP_TB", None)
        med = {m: statistics.median(v) for m, v in t.items()}
        print(f"{l.name} {layout}: {paths['O']} {med['O']:.3f} ms, {paths['N']} {med['N']:.3f} ms, new/old {med['N']/med['O']:.2f}, new/(F.pad+conv) {med['N']/med['P']:.2f}, old/(F.pad+conv) {med['O']/med['P']:.2f}", flush=True)
