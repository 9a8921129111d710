"""conv_weight_grad of one suite layer alone, in its own process: medians of 15 rounds of 5 calls; FP_OLD set runs the
code before (torch's GEMM). usage: separate_processes.py LAYER contiguous|channels_last"""
import sys, os, time, statistics, torch
from dataclasses import replace
from fastpad.bench.layers import SUITE
ops = torch.ops.fastpad
name = sys.argv[1]
c = replace([l for l in SUITE if l.name == name][0].case, layout=sys.argv[2])
x, w, b = c.random_inputs()
st, lo, hi, dl, g, mode = c.conv_op_arguments()
gy = torch.randn_like(ops.conv(x, w, b, st, lo, hi, dl, g, mode))
f = lambda: ops.conv_weight_grad(x, gy, list(w.shape), st, lo, dl, g, mode)
f()
ts = []
for _ in range(15):
    t0 = time.perf_counter(); [f() for _ in range(5)]; ts.append((time.perf_counter() - t0) / 5 * 1e3)
print(os.environ.get("FP_OLD", "new"), ops._conv_weight_grad_path(x, gy, list(w.shape), st, lo, dl, g, mode, "cpu"), f"{statistics.median(ts):.3f} ms")
