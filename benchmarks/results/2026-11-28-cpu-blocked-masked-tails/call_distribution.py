"""Per-call time distribution of one fastpad op call of a random layer, two variants chosen by temporary build
switches (removed), 200 calls each, twice, in one process. Run from the repository root with PYTHONPATH=tests:
  python call_distribution.py SEED NAME OP"""
import os
import sys
import time

import torch

from fastpad.bench.op_calls import RecordFastpadOps
from fastpad.bench.random_layers import random_layers
from fastpad.bench.runner import case_inputs, with_optional_bias

torch.set_num_threads(2)
seed, name, opname = int(sys.argv[1]), sys.argv[2], sys.argv[3]
case = {l.name: l for l in random_layers(100, seed)}[name].case
inputs = [t.detach().requires_grad_(t.is_floating_point()) for t in case_inputs(case, torch.device("cpu"))]
f = with_optional_bias(case.fastpad_function(), case)
with RecordFastpadOps() as record:
    y = f(*inputs)
    y.backward(torch.randn_like(y))
op, a = [c for c in record.calls if c[0] == opname][0]
a = [t.detach() if isinstance(t, torch.Tensor) else t for t in a]
fn = getattr(torch.ops.fastpad, op)
with torch.no_grad():
    for variant in ["FP_OLD_INPLACE", "FP_ALL_INPLACE"] * 2:
        os.environ.pop("FP_OLD_INPLACE", None)
        os.environ.pop("FP_ALL_INPLACE", None)
        os.environ[variant] = "1"
        times = []
        for _ in range(200):
            start = time.perf_counter()
            fn(*a)
            times.append((time.perf_counter() - start) * 1e3)
        times.sort()
        print(variant, "min %.3f p10 %.3f p50 %.3f p90 %.3f mean %.3f" % (
            times[0], times[20], times[100], times[180], sum(times) / len(times)))
