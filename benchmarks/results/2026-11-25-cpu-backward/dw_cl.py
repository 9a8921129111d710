"""CL weight grad: the CL path vs NCHW copies + the NCHW path. usage: dw_cl.py randomS|suite PATTERN"""
import sys, statistics, torch
from dataclasses import replace
from fastpad.bench.random_layers import random_layers
from fastpad.bench.layers import SUITE
from fastpad.bench import runner as R
ops = torch.ops.fastpad
which, pattern = sys.argv[1], sys.argv[2]
layers = R.select_layers(SUITE if which == "suite" else random_layers(100, int(which[6:])), pattern)
dev = torch.device("cpu")
effort = R.Effort(warmup_rounds=3, budget_seconds=1.0, min_repeats=7, max_repeats=100)
for layer in layers:
    case = replace(layer.case, layout="channels_last")
    if case.transposed or case.dims == 1: continue
    x, w, *_ = R.case_inputs(case, dev)
    stride, lo, hi, dil, groups, mode = case.conv_op_arguments()
    y = ops.conv(x, w, None, stride, lo, hi, dil, groups, mode)
    g = torch.randn_like(y)
    ws = list(w.shape)
    steps = {"cl": lambda: ops.conv_weight_grad(x, g, ws, stride, lo, dil, groups, mode),
             "nchw_copy": lambda: ops.conv_weight_grad(x.contiguous(), g.contiguous(), ws, stride, lo, dil, groups, mode)}
    runs = [R.median_times_interleaved(steps if r % 2 == 0 else dict(reversed(steps.items())), dev, effort)[0] for r in range(3)]
    t = {n: statistics.median(r[n] for r in runs) * 1e3 for n in steps}
    print(f"{layer.name:40s} {case.shape_text():60s} cl {t['cl']:8.3f} nchw+copy {t['nchw_copy']:8.3f} ratio {t['nchw_copy']/t['cl']:.2f}", flush=True)
