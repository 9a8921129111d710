"""A/B of the blocked kernel's weight packing: a vector of output channels at a time transposed in registers (after)
against the scalar copy a value at a time (before), through a temporary build switch, the environment variable
AB_OLD=1, removed before the commit. Every conv and conv_transpose call on the float32 blocked kernel
(cpu_blocked_*, cpu_blocked_folded_*; AVX2's with FASTPAD_CPU_ISA=avx2) that the random layers of the given seeds and
the 23-layer suite make (forward and backward), timed alone, interleaved, medians of 7 rounds (each the best of
enough calls for 20 ms).
Run from the repository root with PYTHONPATH=tests: python ab_weight_lanes.py SEED... [--suite]"""
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
BLOCKED = ("cpu_blocked_avx512", "cpu_blocked_folded_avx512", "cpu_blocked_avx2", "cpu_blocked_folded_avx2")


def set_old(old):
    if old:
        os.environ["AB_OLD"] = "1"
    else:
        os.environ.pop("AB_OLD", None)


def blocked_calls(case):
    inputs = [t.detach().requires_grad_(t.is_floating_point()) for t in case_inputs(case, torch.device("cpu"))]
    f = with_optional_bias(case.fastpad_function(), case)
    set_old(False)
    with RecordFastpadOps() as record:
        y = f(*inputs)
        y.backward(torch.randn_like(y))
    calls = []
    for op, args in record.calls:
        if op not in ("conv", "conv_transpose"):
            continue
        args = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
        if args[0].dtype == torch.float32 and getattr(torch.ops.fastpad, f"_{op}_path")(*args, "cpu") in BLOCKED:
            calls.append((op, args))
    return calls


def timed(op, args, old):
    set_old(old)
    start = time.perf_counter()
    getattr(torch.ops.fastpad, op)(*args)
    return time.perf_counter() - start


def main():
    seeds = [int(a) for a in sys.argv[1:] if not a.startswith("--")]
    layers = [layer for seed in seeds for layer in random_layers(100, seed)]
    if "--suite" in sys.argv:
        layers += list(SUITE)
    ratios = []
    for layer in layers:
        for op, args in blocked_calls(layer.case):
            with torch.no_grad():
                set_old(False)
                after_y = getattr(torch.ops.fastpad, op)(*args)
                set_old(True)
                before_y = getattr(torch.ops.fastpad, op)(*args)
                assert torch.equal(after_y, before_y), f"{layer.name} {op}: outputs differ"
                for old in (False, True, False, True):
                    timed(op, args, old)
                before, after = [], []
                reps = max(1, int(0.02 / max(timed(op, args, False), 1e-6)))
                for _ in range(ROUNDS):
                    after.append(min(timed(op, args, False) for _ in range(reps)))
                    before.append(min(timed(op, args, True) for _ in range(reps)))
            a, b = statistics.median(after) * 1e3, statistics.median(before) * 1e3
            ratios.append(a / b)
            print(f"{layer.model:18s} {layer.name:28s} {op:15s} x {tuple(args[0].shape)} w {tuple(args[1].shape)} "
                  f"after {a:.3f} ms before {b:.3f} ms ratio {a / b:.2f}", flush=True)
    set_old(False)
    if ratios:
        geo = statistics.geometric_mean(ratios)
        print(f"{len(ratios)} calls, ratio range {min(ratios):.2f}-{max(ratios):.2f}, geomean {geo:.2f}")


main()
