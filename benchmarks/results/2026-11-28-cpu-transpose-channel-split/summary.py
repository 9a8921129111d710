"""Summary of the A/B logs in this directory: the conv_transpose calls split by y channels (images x groups leaving a
tenth of 2 threads idle: 1, 3, 5 or 7 slices) and the unchanged calls, one_thread's time over the split's. A log's
layers run in seed order (a layer name lower than the one before starts the next seed). Run from the repository root:
  python summary.py LOG:SEEDS[:suite] ..."""
import math
import statistics
import sys

from fastpad.bench.layers import SUITE
from fastpad.bench.random_layers import random_layers

for spec in sys.argv[1:]:
    path, seeds, *suite = spec.split(":")
    seeds = [int(s) for s in seeds.split(",")]
    cases = {(s, l.name): l.case for s in seeds for l in random_layers(100, s)}
    cases.update({("suite", l.name): l.case for l in SUITE})
    split, unchanged = [], []
    seed_index, last = 0, ""
    for line in open(path):
        if " | " not in line:
            continue
        name, op = line.split()[:2]
        if name.startswith("random"):
            if name < last:
                seed_index += 1
            last = name
            case = cases[(seeds[seed_index], name)]
        else:
            case = cases[("suite", name)]
        if op != "conv_transpose":
            continue
        ratio = float(line.split()[-1])
        slices = case.batch * case.groups
        (split if 10 * slices < 9 * math.ceil(slices / 2) * 2 else unchanged).append(ratio)
    for label, r in (("split", split), ("unchanged", unchanged)):
        if r:
            print(f"{path}: {label} {len(r)} conv_transpose calls, {min(r):.2f}-{max(r):.2f}, "
                  f"geomean {statistics.geometric_mean(r):.3f}")
