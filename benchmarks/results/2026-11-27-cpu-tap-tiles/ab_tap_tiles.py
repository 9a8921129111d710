"""A/B of NCHW conv's tap GEMMs summed on the reduction tiles (cpu_tap_tiles_*, after) against the path each call took
before (the blocked kernel, or torch's GEMM per tap for a 1x1 kernel), through a temporary build switch, the
environment variable AB_TT=2, removed before the commit. Every call of the conv op (a conv's forward, or a
transposed conv's input gradient) that the random layers of the given seeds and the 23-layer suite make and that
reaches cpu_tap_tiles_*, timed alone, interleaved, medians.
Run from the repository root with PYTHONPATH=tests: python ab_tap_tiles.py SEED... [--suite] [--bfloat16]"""
import os
import statistics
import sys
import time
from dataclasses import replace

import torch

from fastpad.bench.op_calls import RecordFastpadOps
from fastpad.bench.layers import SUITE
from fastpad.bench.random_layers import random_layers
from fastpad.bench.runner import case_inputs, with_optional_bias

torch.set_num_threads(2)
ROUNDS = 7


def set_old(old):
    if old:
        os.environ["AB_TT"] = "2"
    else:
        os.environ.pop("AB_TT", None)


def calls_of(case):
    inputs = [t.detach().requires_grad_(t.is_floating_point()) for t in case_inputs(case, torch.device("cpu"))]
    f = with_optional_bias(case.fastpad_function(), case)
    with RecordFastpadOps() as record:
        y = f(*inputs)
        y.backward(torch.randn_like(y))
    return [args for op, args in record.calls
            if op == "conv" and torch.ops.fastpad._conv_path(*args, "cpu").startswith("cpu_tap_tiles_")]


def timed(args, old):
    set_old(old)
    start = time.perf_counter()
    torch.ops.fastpad.conv(*args)
    return time.perf_counter() - start


def main():
    seeds = [int(a) for a in sys.argv[1:] if not a.startswith("--")]
    layers = [layer for seed in seeds for layer in random_layers(100, seed)]
    if "--suite" in sys.argv:
        layers += list(SUITE)
    if "--bfloat16" in sys.argv:
        layers = [replace(layer, case=replace(layer.case, dtype="bfloat16")) for layer in layers]
    ratios = []
    for layer in layers:
        set_old(False)
        for args in calls_of(layer.case):
            args = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
            set_old(True)
            before_path = torch.ops.fastpad._conv_path(*args, "cpu")
            with torch.no_grad():
                for old in (False, True, False, True):
                    timed(args, old)
                before, after = [], []
                reps = max(1, int(0.02 / max(timed(args, False), 1e-6)))
                for _ in range(ROUNDS):
                    after.append(min(timed(args, False) for _ in range(reps)))
                    before.append(min(timed(args, True) for _ in range(reps)))
            a, b = statistics.median(after) * 1e3, statistics.median(before) * 1e3
            ratios.append(a / b)
            print(f"{layer.model:18s} {layer.name:28s} x {tuple(args[0].shape)} w {tuple(args[1].shape)} "
                  f"before {before_path:20s} after {a:.3f} ms before {b:.3f} ms ratio {a / b:.2f}", flush=True)
    set_old(False)
    if ratios:
        geo = statistics.geometric_mean(ratios)
        print(f"{len(ratios)} calls, ratio range {min(ratios):.2f}-{max(ratios):.2f}, geomean {geo:.2f}")


main()
