"""Summary of the A/B logs in this directory: the conv_transpose calls whose stride phases run side by side (phases at
least the 2 threads, images x groups fewer, and under 2^23 multiply-adds per phase: conv_transpose.cpp's
phase_convs) and the unchanged calls, in_turn's time over side's. A log's layers run in seed order (a layer name lower
than the one before starts the next seed). Run from the repository root:
  python summary.py LOG:SEEDS ..."""
import math
import statistics
import sys

from fastpad.bench.layers import SUITE
from fastpad.bench.random_layers import random_layers

for spec in sys.argv[1:]:
    path, seeds = spec.split(":")
    seeds = [int(s) for s in seeds.split(",")]
    cases = {(s, l.name): l.case for s in seeds for l in random_layers(100, s)}
    cases.update({("suite", l.name): l.case for l in SUITE})
    side, unchanged = [], []
    seed_index, last = 0, ""
    for line in open(path):
        if " | " not in line:
            continue
        name, *rest = line.split()
        op = rest[1] if rest[0] == "CL" else rest[0]
        if name.startswith("random"):
            if name < last:
                seed_index += 1
            last = name
            case = cases[(seeds[seed_index], name)]
        else:
            case = cases[("suite", name)]
        ratio = float(line.split()[-1])
        if op != "conv_transpose":
            unchanged.append(ratio)
            continue
        x_shape = eval(line.split(" x ")[1].split(" w ")[0])
        w_shape = eval(line.split(" w ")[1].split(" side ")[0])
        phases = math.prod(case.per_dim(case.stride))
        multiply_adds = math.prod(x_shape) * w_shape[1] * math.prod(w_shape[2:])
        changed = phases >= 2 and case.batch * case.groups < 2 and multiply_adds < phases * 2 ** 23
        (side if changed else unchanged).append(ratio)
        if changed:
            print("side by side:", line.rstrip())
    for label, r in (("side by side", side), ("unchanged", unchanged)):
        if r:
            print(f"{path}: {label} {len(r)} calls, {min(r):.2f}-{max(r):.2f}, "
                  f"geomean {statistics.geometric_mean(r):.3f}")
