"""Which calls of ab_variants.py's runs the even bands change: each call on --paths run once with FP_BANDLOG=1, which
the temporary build printed 'FPBAND before after' to stderr from where PhasePlanes rounded its bands up to a multiple
of the wanted ones; then each log line of the A/B (same order of calls) marked changed or unchanged, and the ratios
summarised by that mark. Run from the repository root with PYTHONPATH=tests:
  python changed_calls.py --seeds 1,2,3,4 [--suite] --paths p1,p2 --log AB_LOG"""
import argparse
import dataclasses
import os
import statistics

import torch

from fastpad.bench.op_calls import RecordFastpadOps
from fastpad.bench.layers import SUITE
from fastpad.bench.random_layers import random_layers
from fastpad.bench.runner import case_inputs, with_optional_bias

torch.set_num_threads(2)
p = argparse.ArgumentParser()
p.add_argument("--seeds", default="")
p.add_argument("--suite", action="store_true")
p.add_argument("--paths", required=True)
p.add_argument("--log", required=True)
args = p.parse_args()
PATHS = set(args.paths.split(","))


def stderr_of(fn):
    read_end, write_end = os.pipe()
    saved = os.dup(2)
    os.dup2(write_end, 2)
    try:
        fn()
    finally:
        os.dup2(saved, 2)
        os.close(write_end)
        os.close(saved)
    with os.fdopen(read_end, "rb") as f:
        return f.read()


layers = [l for s in args.seeds.split(",") if s for l in random_layers(100, int(s))]
if args.suite:
    layers += list(SUITE)
    layers += [dataclasses.replace(l, case=dataclasses.replace(l.case, layout="channels_last"))
               for l in SUITE if l.case.dims > 1]
marks = []
for layer in layers:
    case = layer.case
    inputs = [t.detach().requires_grad_(t.is_floating_point()) for t in case_inputs(case, torch.device("cpu"))]
    f = with_optional_bias(case.fastpad_function(), case)
    with RecordFastpadOps() as record:
        y = f(*inputs)
        y.backward(torch.randn_like(y))
    for op, a in record.calls:
        a = [t.detach() if isinstance(t, torch.Tensor) else t for t in a]
        if getattr(torch.ops.fastpad, f"_{op}_path")(*a, "cpu") not in PATHS:
            continue
        os.environ["FP_BANDLOG"] = "1"
        with torch.no_grad():
            out = stderr_of(lambda: getattr(torch.ops.fastpad, op)(*a))
        del os.environ["FP_BANDLOG"]
        marks.append((layer.name, op, b"FPBAND" in out))
lines = [l for l in open(args.log) if " | " in l]
assert len(lines) == len(marks), (len(lines), len(marks))
ratios = {True: [], False: []}
for line, (name, op, changed) in zip(lines, marks):
    assert line.split()[0] == name[:30], (line, name)
    ratios[changed].append(float(line.split()[-1]))
    if changed:
        print("changed", line.rstrip())
for changed, r in ratios.items():
    if r:
        print(f"{'changed' if changed else 'unchanged'}: {len(r)} calls, {min(r):.2f}-{max(r):.2f}, "
              f"geomean {statistics.geometric_mean(r):.3f}")
