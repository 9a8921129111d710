"""A/B of the input gradient (conv_transpose of grad_y) with env FP_AB unset/set, interleaved, medians.
usage: ab_dx.py randomS PATTERN [layout]"""
import os, sys, time, statistics, torch
from dataclasses import replace
from fastpad.bench.random_layers import random_layers
from fastpad.bench.layers import SUITE
from fastpad.bench import runner as R
ops = torch.ops.fastpad
which, pattern = sys.argv[1], sys.argv[2]
layout = sys.argv[3] if len(sys.argv) > 3 else None
layers = R.select_layers(SUITE if which == "suite" else random_layers(100, int(which[6:])), pattern)
def run(f, n):
    ts = []
    for _ in range(n):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return statistics.median(ts)
for layer in layers:
    case = layer.case if not layout else replace(layer.case, layout=layout)
    if case.transposed: continue
    x, w, *_ = R.case_inputs(case, torch.device("cpu"))
    st, lo, hi, dl, groups, mode = case.conv_op_arguments()
    y = ops.conv(x, w, None, st, lo, hi, dl, groups, mode); g = torch.randn_like(y)
    ins = list(x.shape[2:])
    import math
    phases = math.prod(st)
    if phases == 1 and os.environ.get("STRIDED_ONLY"): continue
    xg = y.shape[1] // groups; yg = x.shape[1] // groups; taps = math.prod(w.shape[2:])
    macs = y.numel() * yg * taps
    info = f"x/g {xg:3d} y/g {yg:3d} ph {phases:2d} taps {taps:3d} Mmac {macs/1e6:7.2f} Mmac/ph {macs/1e6/phases:6.2f}"
    f = lambda: ops.conv_weight_grad(x, g, list(w.shape), st, lo, dl, groups, mode)
    paths = {}
    for v in ("A", "B"):
        if v == "B": os.environ["FP_AB"] = "1"
        else: os.environ.pop("FP_AB", None)
        paths[v] = ops._conv_weight_grad_path(x, g, list(w.shape), st, lo, dl, groups, mode, "cpu")
        ref = f()
        if v == "A": a = ref
        else: err = ((ref - a).abs().max() / a.abs().max()).item()
    t0 = time.perf_counter(); f(); one = time.perf_counter() - t0
    n = max(3, min(50, int(0.02 / max(one, 1e-6))))
    res = {"A": [], "B": []}
    for r in range(12):
        for v in (("A", "B") if r % 2 == 0 else ("B", "A")):
            if v == "B": os.environ["FP_AB"] = "1"
            else: os.environ.pop("FP_AB", None)
            res[v].append(run(f, n))
    os.environ.pop("FP_AB", None)
    a_ms, b_ms = (statistics.median(res[v]) * 1e3 for v in "AB")
    print(f"{layer.name:10s} A {a_ms:8.3f} ({paths['A']}) B {b_ms:8.3f} ({paths['B']}) B/A {b_ms/a_ms:.2f} err {err:.1e} {info} {case.shape_text()} {case.layout}", flush=True)
