"""A/B of the forward op with env FP_AB unset/set, interleaved, medians; only layers whose path differs.
usage: ab_fwd.py randomS PATTERN"""
import os, sys, time, math, statistics, torch
from fastpad.bench.random_layers import random_layers
from fastpad.bench.layers import SUITE
from fastpad.bench import runner as R
ops = torch.ops.fastpad
which, pattern = sys.argv[1], sys.argv[2]
layers = R.select_layers(SUITE if which == "suite" else random_layers(100, int(which[6:])), pattern)
def run(f, n):
    ts = []
    for _ in range(n):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return statistics.median(ts)
def setv(v):
    if v == "B": os.environ["FP_AB"] = "1"
    else: os.environ.pop("FP_AB", None)
for layer in layers:
    case = layer.case
    if case.transposed: continue
    x, w, b = R.case_inputs(case, torch.device("cpu"))[:3] if len(R.case_inputs(case, torch.device("cpu"))) >= 3 else (*R.case_inputs(case, torch.device("cpu")), None)
    st, lo, hi, dl, groups, mode = case.conv_op_arguments()
    paths = {}
    for v in "AB":
        setv(v); paths[v] = ops._conv_path(x, w, None, st, lo, hi, dl, groups, mode, "cpu")
    if paths["A"] == paths["B"]: continue
    f = lambda: ops.conv(x, w, None, st, lo, hi, dl, groups, mode)
    setv("A"); a = f(); setv("B"); bb = f(); err = ((bb - a).abs().max() / a.abs().max()).item()
    t0 = time.perf_counter(); f(); one = time.perf_counter() - t0
    n = max(3, min(50, int(0.02 / max(one, 1e-6))))
    res = {"A": [], "B": []}
    for r in range(12):
        for v in (("A", "B") if r % 2 == 0 else ("B", "A")):
            setv(v); res[v].append(run(f, n))
    setv("A")
    a_ms, b_ms = (statistics.median(res[v]) * 1e3 for v in "AB")
    taps = math.prod(w.shape[2:])
    print(f"{layer.name:10s} A {a_ms:8.3f} ({paths['A']}) B {b_ms:8.3f} ({paths['B']}) B/A {b_ms/a_ms:.2f} err {err:.1e} cin/g {w.shape[1]} taps {taps} {case.shape_text()} {case.layout}", flush=True)
