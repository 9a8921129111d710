"""random049 of seed 2, its forward op: alone, then interleaved with torch's conv_transpose3d (stride 1, no crop,
groups 4, dilation 2: that layer's), then alone again; medians. Usage: python random049_interleaved.py 2 random049"""
import statistics, sys, time, torch
import torch.nn.functional as F
from fastpad.bench.op_calls import random_layer_op_calls
torch.set_num_threads(2)
_, leaves, calls = random_layer_op_calls(int(sys.argv[1]), sys.argv[2], backward=False)
op, args = calls[0]
fn = getattr(torch.ops.fastpad, op)
x, w = args[0].detach(), args[1].detach()
ref = lambda: F.conv_transpose3d(x, w, None, 1, 0, 0, 4, 2)
def t(f, n=20):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter(); o = f(); ts.append(time.perf_counter() - t0); del o
    return ts
def med(ts): return statistics.median(ts) * 1e3
a = t(lambda: fn(*args)); a = med(a[5:])
inter_f, inter_t = [], []
for _ in range(15):
    inter_t += t(ref, 1); inter_f += t(lambda: fn(*args), 1)
b = t(lambda: fn(*args)); b = med(b[5:])
print(f"alone {a:.2f}  interleaved fastpad {med(inter_f[3:]):.2f} torch {med(inter_t[3:]):.2f}  alone after {b:.2f}")
