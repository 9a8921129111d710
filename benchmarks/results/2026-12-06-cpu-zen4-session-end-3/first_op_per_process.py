"""The first fastpad op call of a random layer (its forward), timed alone in this process: the median of 25 calls
after 5, the fastest, and the minor page faults per call. Usage: python first_op_per_process.py SEED LAYER"""
import sys, time, resource, statistics, torch
from fastpad.bench.random_layers import random_layers
from fastpad.bench.runner import case_inputs, with_optional_bias
from fastpad.bench.op_calls import RecordFastpadOps
torch.set_num_threads(2)
seed, name = int(sys.argv[1]), sys.argv[2]
layer = next(l for l in random_layers(100, seed) if l.name == name)
case = layer.case
inputs = case_inputs(case, torch.device("cpu"))
f = with_optional_bias(case.fastpad_function(), case)
leaves = [t.detach().requires_grad_() for t in inputs]
with RecordFastpadOps() as rec:
    out = f(*leaves)
op, args = rec.calls[0]
fn = getattr(torch.ops.fastpad, op)
ts, fl = [], []
for r in range(30):  # the first 5 are left out of the median
    m0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t0 = time.perf_counter(); o = fn(*args); t1 = time.perf_counter()
    fl.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - m0); ts.append(t1 - t0); del o
print(f"{op} median {statistics.median(ts[5:])*1e3:.3f} min {min(ts)*1e3:.3f} ms faults/call {statistics.median(fl[5:])}")
