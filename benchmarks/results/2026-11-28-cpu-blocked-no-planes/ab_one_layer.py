"""The same A/B for one random layer's calls of one op, in a fresh process (9 rounds).
Run from the repository root with PYTHONPATH=tests: python ab_one_layer.py SEED:NAME [OP]"""
import os, statistics, sys, time, torch
from fastpad.bench.op_calls import RecordFastpadOps
from fastpad.bench.random_layers import random_layers
from fastpad.bench.runner import case_inputs, with_optional_bias
torch.set_num_threads(2)
op = sys.argv[2] if len(sys.argv) > 2 else "conv"
seed, name = sys.argv[1].split(":")
layer = [l for l in random_layers(100, int(seed)) if l.name == name][0]
inputs = [t.detach().requires_grad_(t.is_floating_point()) for t in case_inputs(layer.case, torch.device("cpu"))]
f = with_optional_bias(layer.case.fastpad_function(), layer.case)
with RecordFastpadOps() as rec:
    y = f(*inputs); y.backward(torch.randn_like(y))
def setold(o):
    if o: os.environ["AB_OLD"] = "1"
    else: os.environ.pop("AB_OLD", None)
for o, args in rec.calls:
    if o != op: continue
    args = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
    fn = getattr(torch.ops.fastpad, o)
    def t(old):
        setold(old); s = time.perf_counter(); fn(*args); return time.perf_counter() - s
    with torch.no_grad():
        for old in (0, 1, 0, 1): t(old)
        reps = max(1, int(0.02 / t(0)))
        A, B = [], []
        for _ in range(9):
            A.append(min(t(0) for _ in range(reps))); B.append(min(t(1) for _ in range(reps)))
    a, b = statistics.median(A)*1e3, statistics.median(B)*1e3
    print(f"{sys.argv[1]} {o} {[tuple(x.shape) for x in args[:2]]} after {a:.3f} before {b:.3f} ratio {a/b:.2f}")
