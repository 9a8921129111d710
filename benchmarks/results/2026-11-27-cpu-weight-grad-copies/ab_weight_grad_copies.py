"""A/B of grouped channels-last weight gradients on the channels-last GEMM (after) against NCHW copies and the NCHW
kernels (before) where x holds as many elements as grad_output times the taps or more (kernel_paths.h's
nchw_weight_grad_copies_repaid), through a temporary build switch, the environment variable AB_WGOLD=1 (the rule
before), removed before the commit. Every conv_weight_grad call of the random layers of the given seeds (and the
suite) whose path the switch changes, timed alone, interleaved, medians of 7 rounds (each the best of enough calls for
20 ms). xratio: x's elements per grad_output element per tap.
Run from the repository root with PYTHONPATH=tests: python ab_weight_grad_copies.py SEED... [--suite]"""
import os, statistics, sys, time
import torch
from fastpad.bench.op_calls import RecordFastpadOps
from fastpad.bench.layers import SUITE
from fastpad.bench.random_layers import random_layers
from fastpad.bench.runner import case_inputs, with_optional_bias
torch.set_num_threads(2)
ROUNDS = 7
SW = "AB_WGOLD"
def set_new(new):
    if new: os.environ.pop(SW, None)
    else: os.environ[SW] = "1"
def path(args, new):
    set_new(new); return torch.ops.fastpad._conv_weight_grad_path(*args, "cpu")
def calls_of(case):
    inputs = [t.detach().requires_grad_(t.is_floating_point()) for t in case_inputs(case, torch.device("cpu"))]
    f = with_optional_bias(case.fastpad_function(), case)
    set_new(False)
    with RecordFastpadOps() as record:
        y = f(*inputs); y.backward(torch.randn_like(y))
    calls = [[a.detach() if isinstance(a, torch.Tensor) else a for a in args] for op, args in record.calls if op == "conv_weight_grad"]
    return [a for a in calls if path(a, True) != path(a, False)]
def timed(args, new):
    set_new(new); start = time.perf_counter(); torch.ops.fastpad.conv_weight_grad(*args); return time.perf_counter() - start
seeds = [int(a) for a in sys.argv[1:] if a.isdigit()]
layers = [l for s in seeds for l in random_layers(100, s)]
if "--suite" in sys.argv: layers += list(SUITE)
RATIOS = []
for layer in layers:
    for args in calls_of(layer.case):
        x, gy, wshape = args[0], args[1], args[2]
        import math
        taps = math.prod(wshape[2:]); cog = wshape[0] // args[6] if isinstance(args[6], int) else None
        ratio = x[0].numel() / (gy[0].numel() * taps)  # x elements per (output element x taps)
        b, a = path(args, False), path(args, True)
        with torch.no_grad():
            for nw in (False, True, False, True): timed(args, nw)
            before, after = [], []
            reps = max(1, int(0.02 / max(timed(args, False), 1e-6)))
            for _ in range(ROUNDS):
                after.append(min(timed(args, True) for _ in range(reps)))
                before.append(min(timed(args, False) for _ in range(reps)))
        A, B = statistics.median(after) * 1e3, statistics.median(before) * 1e3
        print(f"{layer.name:12s} x {tuple(x.shape)} gy {tuple(gy.shape)} w {tuple(wshape)} g {args[6]} xratio {ratio:.3f} {b} -> {a} after {A:.3f} before {B:.3f} ratio {A/B:.2f}", flush=True)
        RATIOS.append(A/B)

if RATIOS: print(f'{len(RATIOS)} calls, {min(RATIOS):.2f}-{max(RATIOS):.2f}, geomean {statistics.geometric_mean(RATIOS):.2f}')
