"""Input gradient / forward of random layers with FP_PASS unset vs set to several budgets, interleaved medians."""
import os, sys, time, statistics, torch, fastpad
from fastpad.bench.random_layers import random_layers
from fastpad.bench import runner as R
ops = torch.ops.fastpad
def run(f, n):
    ts = []
    for _ in range(n):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return statistics.median(ts)
budgets = [None, "131072", "262144", "524288"]
def setv(v):
    if v is None: os.environ.pop("FP_PASS", None)
    else: os.environ["FP_PASS"] = v
seed = int(sys.argv[1])
for l in random_layers(100, seed):
    if l.name not in sys.argv[2].split("|"): continue
    c = l.case
    x, w = R.case_inputs(c, torch.device("cpu"))[:2]
    if c.transposed:
        fns = {"fwd": lambda: c.fastpad_function()(x, w, None)}
    else:
        st, lo, hi, dl, groups, mode = c.conv_op_arguments()
        y = ops.conv(x, w, None, st, lo, hi, dl, groups, mode); g = torch.randn_like(y); ins = list(x.shape[2:])
        fns = {"fwd": lambda: ops.conv(x, w, None, st, lo, hi, dl, groups, mode),
               "dx": lambda: ops.conv_transpose(g, w, None, st, lo, ins, dl, groups, mode)}
    for part, f in fns.items():
        t0 = time.perf_counter(); f(); one = time.perf_counter() - t0
        n = max(3, min(50, int(0.02 / max(one, 1e-6))))
        res = {b: [] for b in budgets}
        for r in range(10):
            order = budgets[r % 4:] + budgets[:r % 4]
            for b in order:
                setv(b); res[b].append(run(f, n))
        setv(None)
        med = {b: statistics.median(v) * 1e3 for b, v in res.items()}
        print(f"{l.name} {part:3s} " + "  ".join(f"{b or 'none'}:{m:.3f}" for b, m in med.items()) + f"  {c.shape_text()} {c.layout}", flush=True)
