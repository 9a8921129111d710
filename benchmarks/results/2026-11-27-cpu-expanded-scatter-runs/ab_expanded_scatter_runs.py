"""A/B of the channels-last grouped transposed scatter (conv_transpose's cpu_grouped_expanded) with each tap's runs
over a group's x channels summed in registers before one add into y (after) against a multiply-add into y per run
(before), through a temporary build switch, the environment variable AB_RUNSOLD=1, removed before the commit. Every
conv_transpose call on cpu_grouped_expanded that the random layers of the given seeds and the 23-layer suite make,
its output checked bitwise equal both ways, timed alone, interleaved, medians of 7 rounds (each the best of enough
calls for 20 ms).
Run from the repository root with PYTHONPATH=tests: python ab_expanded_scatter_runs.py SEED... [--suite]"""
import os
import statistics
import sys
import time

import torch

from fastpad.bench.op_calls import RecordFastpadOps
from fastpad.bench.layers import SUITE
from fastpad.bench.random_layers import random_layers
from fastpad.bench.runner import case_inputs, with_optional_bias

torch.set_num_threads(2)
ROUNDS = 7


def set_old(old):
    if old:
        os.environ["AB_RUNSOLD"] = "1"
    else:
        os.environ.pop("AB_RUNSOLD", None)


def calls_of(case):
    inputs = [t.detach().requires_grad_(t.is_floating_point()) for t in case_inputs(case, torch.device("cpu"))]
    f = with_optional_bias(case.fastpad_function(), case)
    with RecordFastpadOps() as record:
        y = f(*inputs)
        y.backward(torch.randn_like(y))
    calls = [[a.detach() if isinstance(a, torch.Tensor) else a for a in args]
             for op, args in record.calls if op == "conv_transpose"]
    return [args for args in calls if
            torch.ops.fastpad._conv_transpose_path(*args, "cpu") == "cpu_grouped_expanded"]


def timed(args, old):
    set_old(old)
    start = time.perf_counter()
    torch.ops.fastpad.conv_transpose(*args)
    return time.perf_counter() - start


def main():
    seeds = [int(a) for a in sys.argv[1:] if a.isdigit()]
    layers = [layer for seed in seeds for layer in random_layers(100, seed)]
    if "--suite" in sys.argv:
        layers += list(SUITE)
    ratios = []
    for layer in layers:
        for args in calls_of(layer.case):
            with torch.no_grad():
                set_old(False)
                after_y = torch.ops.fastpad.conv_transpose(*args)
                set_old(True)
                assert torch.equal(after_y, torch.ops.fastpad.conv_transpose(*args)), layer.name
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
                  f"stride {args[3]} mode {args[-1]} after {a:.3f} ms before {b:.3f} ms ratio {a / b:.2f}", flush=True)
    set_old(False)
    if ratios:
        geo = statistics.geometric_mean(ratios)
        print(f"{len(ratios)} calls, ratio range {min(ratios):.2f}-{max(ratios):.2f}, geomean {geo:.2f}")


main()
