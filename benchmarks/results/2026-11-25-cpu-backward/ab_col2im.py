"""A/B in one process: FP_OLD_COL2IM toggled, interleaved rounds, medians. Channels-last input gradients on the GEMM + col2im."""
import os, torch, fastpad, time, statistics
from dataclasses import replace
from fastpad.bench.random_layers import random_layers
from fastpad.bench.layers import SUITE
from fastpad.bench import runner as R
ops = torch.ops.fastpad
picks = [(2, "random072"), (2, "random050"), (2, "random034"), (1, "random066"), (1, "random029"), (1, "random016"), (2, "random069"), (1, "random007")]
def run(f, n=5):
    ts = []
    for _ in range(n):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return statistics.median(ts)
for seed, name in picks:
    layer = [l for l in random_layers(100, seed) if l.name == name][0]
    case = layer.case
    x, w, *_ = R.case_inputs(case, torch.device("cpu"))
    stride, lo, hi, dil, groups, mode = case.conv_op_arguments()
    g = torch.randn_like(ops.conv(x, w, None, stride, lo, hi, dil, groups, mode))
    ins = list(x.shape[2:])
    path = ops._conv_transpose_path(g, w, None, stride, lo, ins, dil, groups, mode, "cpu")
    f = lambda: ops.conv_transpose(g, w, None, stride, lo, ins, dil, groups, mode)
    os.environ.pop("FP_OLD_COL2IM", None); new = f()
    os.environ["FP_OLD_COL2IM"] = "1"; old = f()
    same = torch.equal(new, old)
    res = {"old": [], "new": []}
    with torch.no_grad():
        for r in range(11):
            for v in (("old", "new") if r % 2 == 0 else ("new", "old")):
                if v == "old": os.environ["FP_OLD_COL2IM"] = "1"
                else: os.environ.pop("FP_OLD_COL2IM", None)
                res[v].append(run(f))
    o, n = statistics.median(res["old"]) * 1e3, statistics.median(res["new"]) * 1e3
    print(f"s{seed} {name} {case.shape_text()} {case.layout}: dx path {path}, old {o:.3f} ms new {n:.3f} ms new/old {n/o:.2f}, bitwise equal {same}", flush=True)
