"""A/B of the reduction tiles' shapes for products of fewer rows than a full tile (after: tiles of all the rows and
up to 8 vectors; before: tiles of 4 vectors on AVX-512, 3 on AVX2), through a temporary build switch, the environment
variable AB_FEWROWS=0, removed before the commit: every call of conv_transpose and conv_weight_grad that reaches the
reduction tiles (cpu_phase_planes_*, cpu_gemm_col2im_*, cpu_channels_last_gemm_*) in the random layers of the given
seeds and the 23-layer suite (forward and backward), timed alone, interleaved, medians. Calls whose products all have
6 rows or more run the same code both ways (ratios about 1).
Run from the repository root with PYTHONPATH=tests: python ab_few_rows.py SEED... [--suite]"""
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
TILE_PATHS = ("cpu_phase_planes_avx", "cpu_gemm_col2im_avx", "cpu_channels_last_gemm_avx")


def calls_of(case):
    inputs = [t.detach().requires_grad_(t.is_floating_point()) for t in case_inputs(case, torch.device("cpu"))]
    f = with_optional_bias(case.fastpad_function(), case)
    with RecordFastpadOps() as record:
        y = f(*inputs)
        y.backward(torch.randn_like(y))
    calls = []
    for op, args in record.calls:
        if op in ("conv_transpose", "conv_weight_grad"):
            path = getattr(torch.ops.fastpad, f"_{op}_path")(*args, "cpu")
            if path.startswith(TILE_PATHS):
                calls.append((op, path, args))
    return calls


def timed(op, args, old):
    if old:
        os.environ["AB_FEWROWS"] = "0"
    else:
        os.environ.pop("AB_FEWROWS", None)
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
            print(f"{layer.model:18s} {layer.name:28s} {op:16s} {path:28s} x {tuple(args[0].shape)} "
                  f"w {tuple(args[1].shape)} after {a:.3f} ms before {b:.3f} ms ratio {a / b:.2f}", flush=True)
    os.environ.pop("AB_FEWROWS", None)
    if ratios:
        geo = statistics.geometric_mean(ratios)
        print(f"{len(ratios)} calls, ratio range {min(ratios):.2f}-{max(ratios):.2f}, geomean {geo:.2f}")


main()
