"""A/B of conv_transpose's rule for channels-last float32 transposed convs whose stride phases read no padding of x
(after: cpu_blocked_no_planes_*, the phases on the blocked kernel reading x in place) against the path before (GEMM +
col2im, or the blocked kernel on phase planes), through a temporary build switch, the environment variable PROTO=1
(set: the new rule), removed before the commit. Every conv_transpose call whose path the switch changes, that the
random layers of the given seeds and the 23-layer suite in channels-last make (forward and backward), timed alone,
interleaved, medians of 7 rounds (each the best of enough calls for 20 ms); "err" is the largest difference of the
outputs relative to their largest value. Three versions of the rule were measured (the logs' prefixes): first_rule
(every such call), channel_rule (fewer than 16 x and at least 8 y channels per group), final_rule (and a kernel at
least as wide as the stride along every dim).
Run from the repository root with PYTHONPATH=tests: python ab_transposed_no_planes.py SEED... [--suite]"""
import os, statistics, sys, time, torch
from fastpad.bench.op_calls import RecordFastpadOps
from fastpad.bench.random_layers import random_layers
from fastpad.bench.layers import SUITE
from fastpad.bench.runner import case_inputs, with_optional_bias
import dataclasses
torch.set_num_threads(2)
def setp(p):
    if p: os.environ["PROTO"] = "1"
    else: os.environ.pop("PROTO", None)
seeds = [int(a) for a in sys.argv[1:] if a.isdigit()]
layers = [l for s in seeds for l in random_layers(100, s)]
if "--suite" in sys.argv:
    layers += [dataclasses.replace(l, case=dataclasses.replace(l.case, layout="channels_last")) for l in SUITE if l.case.dims > 1]
ratios = []
for layer in layers:
    inputs = [t.detach().requires_grad_(t.is_floating_point()) for t in case_inputs(layer.case, torch.device("cpu"))]
    f = with_optional_bias(layer.case.fastpad_function(), layer.case)
    setp(0)
    with RecordFastpadOps() as rec:
        y = f(*inputs); y.backward(torch.randn_like(y))
    for o, args in rec.calls:
        if o != "conv_transpose": continue
        args = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
        setp(0); p0 = torch.ops.fastpad._conv_transpose_path(*args, "cpu")
        setp(1); p1 = torch.ops.fastpad._conv_transpose_path(*args, "cpu")
        if p0 == p1: continue
        fn = torch.ops.fastpad.conv_transpose
        def t(p):
            setp(p); s = time.perf_counter(); fn(*args); return time.perf_counter() - s
        with torch.no_grad():
            setp(0); r0 = fn(*args); setp(1); r1 = fn(*args)
            err = ((r0 - r1).abs().max() / r0.abs().max().clamp_min(1e-30)).item()
            for p in (0, 1, 0, 1): t(p)
            reps = max(1, int(0.02 / t(0)))
            A, B = [], []
            for _ in range(7):
                B.append(min(t(0) for _ in range(reps))); A.append(min(t(1) for _ in range(reps)))
        a, b = statistics.median(A) * 1e3, statistics.median(B) * 1e3
        ratios.append(a / b)
        print(f"{layer.model:18s} {layer.name:28s} x {tuple(args[0].shape)} w {tuple(args[1].shape)} s {args[3]} g {args[7]} {p0} -> {p1} proto {a:.3f} before {b:.3f} ratio {a/b:.2f} err {err:.1e}", flush=True)
setp(0)
if ratios: print(len(ratios), min(ratios), max(ratios), statistics.geometric_mean(ratios))
