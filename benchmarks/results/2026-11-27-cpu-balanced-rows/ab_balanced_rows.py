"""A/B of the blocked kernel's rows in as few tiles as hold them, of sizes that differ by one at most (after), against
tiles of the most positions then one of the remainder (before: the environment variable AB_BAL set, a temporary
build switch removed before the commit). Every call of conv and conv_transpose reaching a cpu_blocked_* path in the
random layers of the given seeds and the 23-layer suite (forward and backward), timed alone, interleaved, 7 rounds,
medians.
Run from the repository root with PYTHONPATH=tests: python ab_balanced_rows.py SEED... [--suite] [--bfloat16]"""
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


def calls_of(case):
    inputs = [t.detach().requires_grad_(t.is_floating_point()) for t in case_inputs(case, torch.device("cpu"))]
    f = with_optional_bias(case.fastpad_function(), case)
    with RecordFastpadOps() as record:
        y = f(*inputs)
        y.backward(torch.randn_like(y))
    calls = []
    for op, args in record.calls:
        if op in ("conv", "conv_transpose"):
            path = getattr(torch.ops.fastpad, f"_{op}_path")(*args, "cpu")
            if path.startswith("cpu_blocked"):
                calls.append((op, path, args))
    return calls


def timed(op, args, old):
    if old:
        os.environ["AB_BAL"] = "1"
    else:
        os.environ.pop("AB_BAL", None)
    start = time.perf_counter()
    getattr(torch.ops.fastpad, op)(*args)
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
        for op, path, args in calls_of(layer.case):
            args = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
            with torch.no_grad():
                for old in (False, True, False, True):
                    timed(op, args, old)
                before, after = [], []
                reps = max(1, int(0.02 / max(timed(op, args, False), 1e-6)))
                for _ in range(ROUNDS):
                    after.append(min(timed(op, args, False) for _ in range(reps)))
                    before.append(min(timed(op, args, True) for _ in range(reps)))
            a, b = statistics.median(after) * 1e3, statistics.median(before) * 1e3
            ratios.append(a / b)
            print(f"{layer.model:18s} {layer.name:28s} {op:14s} {path:26s} x {tuple(args[0].shape)} "
                  f"w {tuple(args[1].shape)} after {a:.3f} ms before {b:.3f} ms ratio {a / b:.2f}", flush=True)
    os.environ.pop("AB_BAL", None)
    if ratios:
        geo = statistics.geometric_mean(ratios)
        print(f"{len(ratios)} calls, ratio range {min(ratios):.2f}-{max(ratios):.2f}, geomean {geo:.2f}")


main()
