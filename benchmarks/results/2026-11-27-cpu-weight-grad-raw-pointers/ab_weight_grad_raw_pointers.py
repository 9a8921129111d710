"""A/B of the NCHW phase-plane weight gradient's jobs on the tiles addressed through raw pointers (after) against the
ATen views they made per job (before), through a temporary build switch, the environment variable AB_OLD=1, removed
before the commit. Every conv_weight_grad call on the tiled phase planes that the random layers of the given seeds and
the 23-layer suite make, timed alone, interleaved, medians of 7 rounds (each the best of enough calls for 20 ms);
outputs asserted bitwise equal.
Run from the repository root with PYTHONPATH=tests: python ab_weight_grad_raw_pointers.py SEED... [--suite]"""
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
        os.environ["AB_OLD"] = "1"
    else:
        os.environ.pop("AB_OLD", None)


def path(args, old):
    set_old(old)
    return torch.ops.fastpad._conv_weight_grad_path(*args, "cpu")


def calls_of(case):
    inputs = [t.detach().requires_grad_(t.is_floating_point()) for t in case_inputs(case, torch.device("cpu"))]
    f = with_optional_bias(case.fastpad_function(), case)
    set_old(False)
    with RecordFastpadOps() as record:
        y = f(*inputs)
        y.backward(torch.randn_like(y))
    calls = [[a.detach() if isinstance(a, torch.Tensor) else a for a in args]
             for op, args in record.calls if op == "conv_weight_grad"]
    return [args for args in calls if path(args, False) in ("cpu_phase_planes_avx512", "cpu_phase_planes_avx2")]


def timed(args, old):
    set_old(old)
    start = time.perf_counter()
    torch.ops.fastpad.conv_weight_grad(*args)
    return time.perf_counter() - start


def main():
    seeds = [int(a) for a in sys.argv[1:] if not a.startswith("--")]
    layers = [layer for seed in seeds for layer in random_layers(100, seed)]
    if "--suite" in sys.argv:
        layers += list(SUITE)
    ratios = []
    for layer in layers:
        for args in calls_of(layer.case):
            before_path, after_path = path(args, True), path(args, False)
            with torch.no_grad():
                outputs = []
                for old in (False, True):
                    set_old(old)
                    outputs.append(torch.ops.fastpad.conv_weight_grad(*args))
                assert torch.equal(outputs[0], outputs[1]), (layer.name, "outputs differ")
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
                  f"{before_path} -> {after_path:24s} after {a:.3f} ms before {b:.3f} ms ratio {a / b:.2f}",
                  flush=True)
    set_old(False)
    if ratios:
        geo = statistics.geometric_mean(ratios)
        print(f"{len(ratios)} calls, ratio range {min(ratios):.2f}-{max(ratios):.2f}, geomean {geo:.2f}")


main()
