"""fastpad with FASTPAD_CPU_ISA=avx512 vs avx2 vs pad+conv, interleaved medians in one process.
usage: python isa_cmp.py [suite|randomS] [fwd|both] [pattern] [dtype] [layout]"""
import os, sys, math, torch
from dataclasses import replace
from fastpad.bench.layers import SUITE
from fastpad.bench.random_layers import random_layers
from fastpad.bench import runner as R

which = sys.argv[1] if len(sys.argv) > 1 else "suite"
modes = ["forward"] if (len(sys.argv) <= 2 or sys.argv[2] == "fwd") else ["forward", "fwd+bwd"]
pattern = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] != "-" else None
dtype = sys.argv[4] if len(sys.argv) > 4 else "float32"
layout = sys.argv[5] if len(sys.argv) > 5 else None
layers = SUITE if which == "suite" else random_layers(100, int(which[6:]))
layers = R.select_layers(layers, pattern)
dev = torch.device("cpu")
A, B = os.environ.get("ISAS", "avx512,avx2").split(",")
effort = R.Effort(warmup_rounds=2, budget_seconds=1.5, min_repeats=7, max_repeats=100)
logs = {m: [] for m in modes}
for layer in layers:
    case = layer.case
    if dtype != "float32": case = replace(case, dtype=dtype)
    if layout and case.dims > 1: case = replace(case, layout=layout)
    inputs = R.case_inputs(case, dev)
    fns = {k: R.with_optional_bias(f, case) for k, f in R.variant_functions(case).items()}
    for mode in modes:
        def step_for(fn, isa=None):
            inner = R.forward_step(fn, inputs) if mode == "forward" else R.forward_backward_step(fn, inputs)
            if isa is None: return inner
            def s():
                os.environ["FASTPAD_CPU_ISA"] = isa
                try: inner()
                finally: os.environ.pop("FASTPAD_CPU_ISA", None)
            return s
        base = {A: step_for(fns["fastpad"], A), B: step_for(fns["fastpad"], B),
                "padconv": step_for(fns["pad+conv"])}
        names = list(base)
        runs = []
        for rot in range(3):  # three interleaved runs, each starting from another step
            order = names[rot:] + names[:rot]
            runs.append(R.median_times_interleaved({n: base[n] for n in order}, dev, effort)[0])
        import statistics
        t = {n: statistics.median(r[n] for r in runs) for n in names}
        r1, r2 = t[A] / t[B], t[A] / t["padconv"]
        logs[mode].append((r1, r2))
        print(f"{layer.name:45s} {mode:8s} {A} {t[A]*1e3:8.3f} {B} {t[B]*1e3:8.3f} padconv {t['padconv']*1e3:8.3f} "
              f"{A}/{B} {r1:.2f} {A}/padconv {r2:.2f} {B}/padconv {t[B]/t['padconv']:.2f}", flush=True)
for mode, v in logs.items():
    g = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
    print(f"geomean {mode}: {A}/{B} {g([a for a,_ in v]):.3f}  {A}/padconv {g([b for _,b in v]):.3f}")
