"""Exploration for the channels-last tap tiles and a wider rule: every conv op call (forward, or a transposed conv's
input gradient) of the random layers of the given seeds and the suite that the blocked kernel or torch's tap GEMMs
run, timed alone with the tap tiles forced wherever the reduction reaches 8 (temporary build switch AB_TT=3) against
the path before (AB_TT=2: no tap tiles), interleaved, 7 rounds, medians; one line per call with its shape features.
Run from the repository root with PYTHONPATH=tests: python explore_all.py SEED... [--suite]"""
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


def path_of(args, mode):
    os.environ["AB_TT"] = mode
    return torch.ops.fastpad._conv_path(*args, "cpu")


def calls_of(case):
    inputs = [t.detach().requires_grad_(t.is_floating_point()) for t in case_inputs(case, torch.device("cpu"))]
    f = with_optional_bias(case.fastpad_function(), case)
    os.environ["AB_TT"] = "2"
    with RecordFastpadOps() as record:
        y = f(*inputs)
        y.backward(torch.randn_like(y))
    return [args for op, args in record.calls if op == "conv" and path_of(args, "3").startswith("cpu_tap_tiles")
            and path_of(args, "2").startswith(("cpu_blocked", "cpu_tap_gemms"))]


def timed(args, mode):
    os.environ["AB_TT"] = mode
    start = time.perf_counter()
    torch.ops.fastpad.conv(*args)
    return time.perf_counter() - start


def main():
    seeds = [int(a) for a in sys.argv[1:] if not a.startswith("--")]
    layers = [layer for seed in seeds for layer in random_layers(100, seed)]
    if "--suite" in sys.argv:
        layers += list(SUITE)
    for layer in layers:
        for args in calls_of(layer.case):
            args = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
            before_path = path_of(args, "2")
            with torch.no_grad():
                for mode in ("3", "2", "3", "2"):
                    timed(args, mode)
                before, after = [], []
                reps = max(1, int(0.02 / max(timed(args, "3"), 1e-6)))
                for _ in range(ROUNDS):
                    after.append(min(timed(args, "3") for _ in range(reps)))
                    before.append(min(timed(args, "2") for _ in range(reps)))
            a, b = statistics.median(after) * 1e3, statistics.median(before) * 1e3
            x, w = args[0], args[1]
            groups = args[7]
            cl = x.dim() > 3 and not x.is_contiguous()
            stride = max(args[3])
            out = torch.ops.fastpad.conv(*args)
            print(f"{layer.model:18s} {layer.name:28s} {'CL' if cl else 'NC'} x {tuple(x.shape)} w {tuple(w.shape)} "
                  f"g {groups} s {stride} cin/g {x.shape[1] // groups} cout/g {w.shape[0] // groups} "
                  f"out {tuple(out.shape[2:])} {before_path:24s} tiles {a:.3f} ms before {b:.3f} ms "
                  f"ratio {a / b:.2f}", flush=True)
    os.environ.pop("AB_TT", None)


main()
