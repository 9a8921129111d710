"""A/B of the blocked kernel's driver (conv.cpp's blocked_direct_conv): rows split into more bands where images,
groups and blocks of output channels leave threads idle (after), against one band per cache budget (before, through
a temporary build switch, the environment variable AB_OLD, removed before the commit). Every call of the conv and
conv_transpose ops that the random layers of the given seeds and the 23-layer suite make (forward and backward) and
that reaches a cpu_blocked_* path, timed alone, interleaved, medians.
Run from the repository root with PYTHONPATH=tests: python ab_blocked_bands.py SEED[:NAME]... [--suite]
[--bfloat16]"""
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
    return [(op, args) for op, args in record.calls if op in ("conv", "conv_transpose") and
            getattr(torch.ops.fastpad, f"_{op}_path")(*args, "cpu").startswith("cpu_blocked")]


def timed(op, args, old):
    if old:
        os.environ["AB_OLD"] = "1"
    else:
        os.environ.pop("AB_OLD", None)
    start = time.perf_counter()
    getattr(torch.ops.fastpad, op)(*args)
    return time.perf_counter() - start


def main():
    # SEED (all 100 layers of the seed) or SEED:NAME (one layer)
    picks = [a.split(":") for a in sys.argv[1:] if not a.startswith("--")]
    layers = [layer for pick in picks for layer in random_layers(100, int(pick[0]))
              if len(pick) == 1 or layer.name == pick[1]]
    if "--suite" in sys.argv:
        layers += list(SUITE)
    if "--bfloat16" in sys.argv:
        layers = [replace(layer, case=replace(layer.case, dtype="bfloat16")) for layer in layers]
    ratios = []
    for layer in layers:
        for op, args in calls_of(layer.case):
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
            x = args[0]
            print(f"{layer.model:18s} {layer.name:28s} {op:14s} x {tuple(x.shape)} w {tuple(args[1].shape)} "
                  f"{'CL' if x.dim() > 3 and x.is_contiguous(memory_format=torch.channels_last if x.dim() == 4 else torch.channels_last_3d) and not x.is_contiguous() else 'NC'} "
                  f"after {a:.3f} ms before {b:.3f} ms ratio {a / b:.2f}", flush=True)
    if ratios:
        geo = statistics.geometric_mean(ratios)
        print(f"{len(ratios)} calls, ratio range {min(ratios):.2f}-{max(ratios):.2f}, geomean {geo:.2f}")


main()
