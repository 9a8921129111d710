"""Channels-last kernels against NCHW copies + the NCHW kernels, copies included. usage:
cl_vs_nchw_copies.py dw|dx randomS|suite PATTERN  (dw: the weight gradient; dx: the input gradient and the forward,
the NCHW results copied back to channels-last)"""
import sys, statistics, torch
from dataclasses import replace
from fastpad.bench.random_layers import random_layers
from fastpad.bench.layers import SUITE
from fastpad.bench import runner as R
ops = torch.ops.fastpad
part, which, pattern = sys.argv[1], sys.argv[2], sys.argv[3]
layers = R.select_layers(SUITE if which == "suite" else random_layers(100, int(which[6:])), pattern)
dev = torch.device("cpu")
effort = R.Effort(warmup_rounds=3, budget_seconds=1.0, min_repeats=7, max_repeats=100)
for layer in layers:
    case = replace(layer.case, layout="channels_last")
    if case.transposed or case.dims == 1: continue
    x, w, *_ = R.case_inputs(case, dev)
    stride, lo, hi, dil, groups, mode = case.conv_op_arguments()
    g = torch.randn_like(ops.conv(x, w, None, stride, lo, hi, dil, groups, mode))
    ws, ins = list(w.shape), list(x.shape[2:])
    cl = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
    if part == "dw":
        steps = {"cl": lambda: ops.conv_weight_grad(x, g, ws, stride, lo, dil, groups, mode),
                 "nchw_copy": lambda: ops.conv_weight_grad(x.contiguous(), g.contiguous(), ws, stride, lo, dil, groups,
                                                           mode)}
    else:
        steps = {"dx_cl": lambda: ops.conv_transpose(g, w, None, stride, lo, ins, dil, groups, mode),
                 "dx_nchw": lambda: ops.conv_transpose(g.contiguous(), w, None, stride, lo, ins, dil, groups,
                                                       mode).contiguous(memory_format=cl),
                 "fwd_cl": lambda: ops.conv(x, w, None, stride, lo, hi, dil, groups, mode),
                 "fwd_nchw": lambda: ops.conv(x.contiguous(), w, None, stride, lo, hi, dil, groups,
                                              mode).contiguous(memory_format=cl)}
    names = list(steps)
    runs = [R.median_times_interleaved({n: steps[n] for n in names[r:] + names[:r]}, dev, effort)[0] for r in range(3)]
    t = {n: statistics.median(r[n] for r in runs) * 1e3 for n in names}
    if part == "dw":
        print(f"{layer.name:40s} {case.shape_text():60s} cl {t['cl']:8.3f} nchw+copy {t['nchw_copy']:8.3f} "
              f"ratio {t['nchw_copy'] / t['cl']:.2f}", flush=True)
    else:
        print(f"{layer.name:10s} {case.shape_text():60s} dx cl {t['dx_cl']:7.3f} nchw {t['dx_nchw']:7.3f} "
              f"r {t['dx_nchw'] / t['dx_cl']:.2f} | fwd cl {t['fwd_cl']:7.3f} nchw {t['fwd_nchw']:7.3f} "
              f"r {t['fwd_nchw'] / t['fwd_cl']:.2f}", flush=True)
