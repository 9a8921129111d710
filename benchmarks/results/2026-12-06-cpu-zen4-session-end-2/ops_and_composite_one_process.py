"""In one process: a random layer's fastpad forward+backward (autograd; grads accumulating, or set to None after each
call) against its recorded fastpad op calls run back to back (outputs dropped, or kept), interleaved, medians of 27
rounds. Usage: PYTHONPATH=tests:. python ops_and_composite_one_process.py SEED LAYER"""
import sys, time, statistics, torch
from fastpad.bench.random_layers import random_layers
from fastpad.bench.runner import case_inputs, with_optional_bias
from fastpad.bench.op_calls import RecordFastpadOps
torch.set_num_threads(2)
seed, name = int(sys.argv[1]), sys.argv[2]
layer = next(l for l in random_layers(100, seed) if l.name == name)
case = layer.case
inputs = case_inputs(case, torch.device("cpu"))
f = with_optional_bias(case.fastpad_function(), case)
lf = [t.detach().requires_grad_() for t in inputs]
with RecordFastpadOps() as rec:
    out = f(*lf); out.backward(torch.randn_like(out))
calls = [(getattr(torch.ops.fastpad, op), args) for op, args in rec.calls]
for t in lf: t.grad = None
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
