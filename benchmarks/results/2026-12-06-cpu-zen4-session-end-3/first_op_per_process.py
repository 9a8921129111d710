"""The first fastpad op call of a random layer (its forward), timed alone in this process: the median of 25 calls
after 5, the fastest, and the minor page faults per call. Usage: python first_op_per_process.py SEED LAYER"""
import resource
import statistics
import sys
import time

import torch

from fastpad.bench.op_calls import random_layer_op_calls

torch.set_num_threads(2)
_, _, calls = random_layer_op_calls(int(sys.argv[1]), sys.argv[2], backward=False)
op, args = calls[0]
fn = getattr(torch.ops.fastpad, op)
ts, fl = [], []
for r in range(30):  # the first 5 are left out of the median
    m0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t0 = time.perf_counter(); o = fn(*args); t1 = time.perf_counter()
    fl.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - m0); ts.append(t1 - t0); del o
print(f"{op} median {statistics.median(ts[5:])*1e3:.3f} min {min(ts)*1e3:.3f} ms faults/call {statistics.median(fl[5:])}")
