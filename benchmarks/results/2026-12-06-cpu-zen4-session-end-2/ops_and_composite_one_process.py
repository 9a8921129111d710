"""In one process: a random layer's fastpad forward+backward (autograd; grads accumulating, or set to None after each
call) against its recorded fastpad op calls run back to back (outputs dropped, or kept), interleaved, medians of 27
rounds. Usage: PYTHONPATH=tests:. python ops_and_composite_one_process.py SEED LAYER"""
import statistics
import sys
import time

import torch

from fastpad.bench.op_calls import random_layer_op_calls

torch.set_num_threads(2)
f, lf, recorded = random_layer_op_calls(int(sys.argv[1]), sys.argv[2])
calls = [(getattr(torch.ops.fastpad, op), args) for op, args in recorded]
def fp_fb():
    o = f(*lf); o.backward(torch.ones_like(o))
def fp_fb_nograd():
    o = f(*lf); o.backward(torch.ones_like(o))
    for t in lf: t.grad = None
def ops():
    for c, a in calls: c(*a)
def ops_keep():
    outs = [c(*a) for c, a in calls]
steps = {"fp_fb": fp_fb, "fp_fb grads None": fp_fb_nograd, "ops": ops, "ops kept": ops_keep}
res = {k: [] for k in steps}
for r in range(30):
    for k, s in steps.items():
        t0 = time.perf_counter(); s(); res[k].append(time.perf_counter() - t0)
for k in steps: print(f"{k:18s} {statistics.median(res[k][3:])*1e3:.3f} ms")
