"""Times fastpad's depthwise conv_transpose calls (the NCHW cpu_depthwise path) of random layers of seeds 1-4 and of
the suite, in this process's build: medians of 9 rounds; prints name, ms. Run from a checkout with
PYTHONPATH=BUILD:tests, one process per build in turn (three each here: old = 3224bb2, new = the gathered planes)."""
import time, statistics, torch
from fastpad.bench.op_calls import RecordFastpadOps
from fastpad.bench.random_layers import random_layers
from fastpad.bench.layers import SUITE
torch.manual_seed(0)
layers = [(f"s{s}:{l.name}", l.case) for s in (1, 2, 3, 4) for l in random_layers(100, s)]
layers += [(l.name, l.case) for l in SUITE]
calls = []
for name, c in layers:
    if c.layout != "contiguous": continue
    x, w, b = c.random_inputs(); f = c.fastpad_function()
    x.requires_grad_(); w.requires_grad_()
    with RecordFastpadOps() as rec:
        y = f(x, w, b); y.backward(torch.ones_like(y))
    for op, args in rec.calls:
        if op == "conv_transpose" and torch.ops.fastpad._conv_transpose_path(*args, "cpu") == "cpu_depthwise":
            calls.append((name, args))
def timeit(fn, reps):
    t0 = time.perf_counter()
    for _ in range(reps): fn()
    return (time.perf_counter() - t0) / reps * 1e3
fns = [(n, lambda a=a: torch.ops.fastpad.conv_transpose(*a)) for n, a in calls]
reps = [max(1, int(0.03 / max(1e-5, timeit(fn, 1) / 1e3))) for _, fn in fns]
t = [[] for _ in fns]
for _ in range(9):
    for i, (_, fn) in enumerate(fns): t[i].append(timeit(fn, reps[i]))
for (n, _), v in zip(fns, t): print(n, f"{statistics.median(v):.4f}")
