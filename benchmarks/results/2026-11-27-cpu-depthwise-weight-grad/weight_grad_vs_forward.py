"""The suite's grouped layers in channels-last: conv_weight_grad alone and the forward alone, medians of 5 rounds of
3 calls (not interleaved: a look at the ratio, not an A/B)."""
import time, statistics, torch, fastpad
from dataclasses import replace
from fastpad.bench.layers import SUITE
ops = torch.ops.fastpad
def timeit(f, reps):
    t0 = time.perf_counter()
    for _ in range(reps): f()
    return (time.perf_counter() - t0) / reps * 1e3
for l in SUITE:
    c = replace(l.case, layout="channels_last")
    if c.transposed or c.groups == 1: continue
    x, w, b = c.random_inputs()
    st, lo, hi, dl, g, mode = c.conv_op_arguments()
    y = ops.conv(x, w, b, st, lo, hi, dl, g, mode)
    gy = torch.randn_like(y)
    p = ops._conv_weight_grad_path(x, gy, list(w.shape), st, lo, dl, g, mode, "cpu")
    f = lambda: ops.conv_weight_grad(x, gy, list(w.shape), st, lo, dl, g, mode)
    fw = lambda: ops.conv(x, w, b, st, lo, hi, dl, g, mode)
    print(f"{l.name} {p}: weight grad {statistics.median([timeit(f, 3) for _ in range(5)]):.2f} ms, forward {statistics.median([timeit(fw, 3) for _ in range(5)]):.2f} ms", flush=True)
