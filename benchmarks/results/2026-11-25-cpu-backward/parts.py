"""Per-part times of conv layers: fastpad fwd / dx / dw vs torch's on the padded input. usage: parts.py randomS PATTERN [layout]"""
import sys, statistics, torch, torch.nn.functional as F
from dataclasses import replace
from fastpad.bench.random_layers import random_layers
from fastpad.bench.layers import SUITE
from fastpad.bench import runner as R
ops = torch.ops.fastpad
which, pattern = sys.argv[1], sys.argv[2]
layout = sys.argv[3] if len(sys.argv) > 3 else None
layers = R.select_layers(SUITE if which == "suite" else random_layers(100, int(which[6:])), pattern)
dev = torch.device("cpu")
effort = R.Effort(warmup_rounds=3, budget_seconds=1.0, min_repeats=7, max_repeats=100)
for layer in layers:
    case = layer.case if not layout else replace(layer.case, layout=layout)
    if case.transposed: print(layer.name, "transposed: skipped"); continue
    x, w, *_ = R.case_inputs(case, dev)
    stride, lo, hi, dil, groups, mode = case.conv_op_arguments()
    y = ops.conv(x, w, None, stride, lo, hi, dil, groups, mode)
    g = torch.randn_like(y)
    pads = [p for pair in reversed(list(zip(lo, hi))) for p in pair]
    xp = F.pad(x, pads, mode="constant" if mode == "zeros" else mode).contiguous(memory_format=torch.channels_last if x.dim()==4 and case.layout=="channels_last" else torch.contiguous_format)
    ins = list(x.shape[2:]); ws = list(w.shape)
    steps = {
      "fp_fwd": lambda: ops.conv(x, w, None, stride, lo, hi, dil, groups, mode),
      "fp_dx": lambda: ops.conv_transpose(g, w, None, stride, lo, ins, dil, groups, mode),
      "fp_dw": lambda: ops.conv_weight_grad(x, g, ws, stride, lo, dil, groups, mode),
      "t_fwd": lambda: torch.ops.aten.convolution(xp, w, None, stride, [0]*len(stride), dil, False, [0]*len(stride), groups),
      "t_dx": lambda: torch.ops.aten.convolution_backward(g, xp, w, None, stride, [0]*len(stride), dil, False, [0]*len(stride), groups, [True, False, False]),
      "t_dw": lambda: torch.ops.aten.convolution_backward(g, xp, w, None, stride, [0]*len(stride), dil, False, [0]*len(stride), groups, [False, True, False]),
    }
    runs = []
    names = list(steps)
    for rot in range(3):
        order = names[rot*2:] + names[:rot*2]
        runs.append(R.median_times_interleaved({n: steps[n] for n in order}, dev, effort)[0])
    t = {n: statistics.median(r[n] for r in runs) * 1e3 for n in names}
    paths = "/".join(str(getattr(ops, f"_{k}_path")) for k in []) 
    print(f"{layer.name:10s} {case.shape_text()} {case.layout}")
    print("   " + "  ".join(f"{n} {t[n]:.3f}" for n in names) +
          f"  | fwd {t['fp_fwd']/t['t_fwd']:.2f} dx {t['fp_dx']/t['t_dx']:.2f} dw {t['fp_dw']/t['t_dw']:.2f}", flush=True)
