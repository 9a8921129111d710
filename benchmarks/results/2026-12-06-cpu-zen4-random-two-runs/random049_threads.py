import statistics, sys, time, torch
from fastpad.bench.op_calls import random_layer_op_calls
torch.set_num_threads(2)
_, leaves, calls = random_layer_op_calls(int(sys.argv[1]), sys.argv[2], backward=False)
op, args = calls[0]
fn = getattr(torch.ops.fastpad, op)
def med(n=15):
    ts = []
    for _ in range(3): fn(*args)
    for _ in range(n):
        t0 = time.perf_counter(); o = fn(*args); ts.append(time.perf_counter() - t0); del o
    return statistics.median(ts) * 1e3
a = med(); torch.set_num_threads(1); b = med(); torch.set_num_threads(2); c = med()
x = args[0]; w = args[1]
tt = []
for _ in range(10):
    t0 = time.perf_counter(); torch.nn.functional.conv_transpose3d(x, w, groups=4, dilation=2); tt.append(time.perf_counter() - t0)
print(f"2t {a:.2f} 1t {b:.2f} 2t {c:.2f} torch {statistics.median(tt)*1e3:.2f}")
