"""fastpad vs pad+conv vs floor, forward (and fwd+bwd with 'both'), three interleaved runs with rotated order, medians.
usage: python layer_times.py suite|randomS PATTERN [fwd|both] [layout]"""
import sys, math, statistics, torch
from dataclasses import replace
from fastpad.bench.layers import SUITE
from fastpad.bench.random_layers import random_layers
from fastpad.bench import runner as R
which, pattern = sys.argv[1], sys.argv[2]
modes = ["forward"] if len(sys.argv) <= 3 or sys.argv[3] == "fwd" else ["forward", "fwd+bwd"]
layout = sys.argv[4] if len(sys.argv) > 4 else None
layers = R.select_layers(SUITE if which == "suite" else random_layers(100, int(which[6:])), pattern)
dev = torch.device("cpu")
effort = R.Effort(warmup_rounds=3, budget_seconds=1.0, min_repeats=7, max_repeats=100)
ratios = {m: [] for m in modes}
for layer in layers:
    case = layer.case if not layout or layer.case.dims == 1 else replace(layer.case, layout=layout)
    inputs = R.case_inputs(case, dev)
    fns = {k: R.with_optional_bias(f, case) for k, f in R.variant_functions(case).items()}
    for mode in modes:
        make = R.forward_step if mode == "forward" else R.forward_backward_step
        base = {k: make(f, inputs) for k, f in fns.items()}
        names, runs = list(base), []
        for rot in range(3):
            order = names[rot:] + names[:rot]
            runs.append(R.median_times_interleaved({n: base[n] for n in order}, dev, effort)[0])
        t = {n: statistics.median(r[n] for r in runs) * 1e3 for n in names}
        ratios[mode].append(t["fastpad"] / t["pad+conv"])
        print(f"{layer.name:40s} {mode:8s} fastpad {t['fastpad']:8.3f} pad+conv {t['pad+conv']:8.3f} floor {t['floor']:8.3f}"
              f"  /pad+conv {t['fastpad']/t['pad+conv']:.2f} /floor {t['fastpad']/t['floor']:.2f}  {case.shape_text()} {case.layout}", flush=True)
for m, v in ratios.items():
    print(f"geomean {m} fastpad/(pad+conv) {math.exp(sum(map(math.log, v))/len(v)):.3f} over {len(v)}")
