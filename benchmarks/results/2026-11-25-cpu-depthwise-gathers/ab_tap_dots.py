"""A/B of conv_weight_grad calls that take cpu_tap_dots against the phase planes, random layers of the given seeds,
both layouts, in one process: interleaved, medians of 9 rounds. It needs a build whose choose_weight_grad_path in
kernel_paths.h returns the phase planes while the environment variable FP_AB is set (a temporary switch, not in the
committed code). Run from a checkout with PYTHONPATH=.:tests. Columns: new/old ratio, ms, output and input channels
per group, the largest difference relative to the largest value, the layer."""
import os, sys, time, statistics, torch
from fastpad.bench.op_calls import RecordFastpadOps
from fastpad.bench.random_layers import random_layers
torch.manual_seed(0)
calls = []
for s in map(int, sys.argv[1:]):
    for l in random_layers(100, s):
        c = l.case
        x, w, b = c.random_inputs(); f = c.fastpad_function()
        x.requires_grad_(); w.requires_grad_()
        with RecordFastpadOps() as rec:
            y = f(x, w, b); y.backward(torch.ones_like(y))
        for op, args in rec.calls:
            if op == "conv_weight_grad" and torch.ops.fastpad._conv_weight_grad_path(*args, "cpu") == "cpu_tap_dots":
                calls.append((f"s{s}:{l.name} {c.describe()}", args))
def timeit(fn, reps):
    t0 = time.perf_counter()
    for _ in range(reps): fn()
    return (time.perf_counter() - t0) / reps * 1e3
def run(args, old):
    if old: os.environ["FP_AB"] = "1"
    else: os.environ.pop("FP_AB", None)
    return torch.ops.fastpad.conv_weight_grad(*args)
for name, args in calls:
    a, b = run(args, False), run(args, True)
    err = ((a.double() - b.double()).abs().max() / b.double().abs().max().clamp(min=1e-30)).item()
    reps = max(1, int(0.03 / max(1e-5, timeit(lambda: run(args, True), 1) / 1e3)))
    t = {False: [], True: []}
    for _ in range(9):
        for old in (False, True): t[old].append(timeit(lambda: run(args, old), reps))
    new, old = statistics.median(t[False]), statistics.median(t[True])
    g = args[6]; wshape = args[2]
    print(f"{new/old:5.2f} new {new:8.3f} old {old:8.3f} out/group {wshape[0]//g:3d} in/group {wshape[1]:3d} relerr {err:.1e} {name}", flush=True)
