"""CL input grad (conv_transpose) and forward: CL path vs NCHW copies + NCHW path + back to CL. usage: dx_cl.py randomS|suite PATTERN"""
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
    ins = list(x.shape[2:]); cl = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
    steps = {"dx_cl": lambda: ops.conv_transpose(g, w, None, stride, lo, ins, dil, groups, mode),
             "dx_nchw": lambda: ops.conv_transpose(g.contiguous(), w, None, stride, lo, ins, dil, groups, mode).contiguous(memory_format=cl),
             "fwd_cl": lambda: ops.conv(x, w, None, stride, lo, hi, dil, groups, mode),
             "fwd_nchw": lambda: ops.conv(x.contiguous(), w, None, stride, lo, hi, dil, groups, mode).contiguous(memory_format=cl)}
    names = list(steps)
    runs = [R.median_times_interleaved({n: steps[n] for n in names[r:] + names[:r]}, dev, effort)[0] for r in range(3)]
    t = {n: statistics.median(r[n] for r in runs) * 1e3 for n in steps}

    print(f"{layer.name:10s} {case.shape_text():60s} dx cl {t['dx_cl']:7.3f} nchw {t['dx_nchw']:7.3f} r {t['dx_nchw']/t['dx_cl']:.2f} | fwd cl {t['fwd_cl']:7.3f} nchw {t['fwd_nchw']:7.3f} r {t['fwd_nchw']/t['fwd_cl']:.2f}", flush=True)
