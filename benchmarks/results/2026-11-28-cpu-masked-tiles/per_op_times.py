"""Per-op times of random layers: each fastpad op call of the layer's forward and backward alone (its kernel path
named), then the layer's forward and forward+backward against F.pad + conv; medians of 7 runs of 5 calls, 2 threads.
Run from the repository root with PYTHONPATH=tests:
  python per_op_times.py SEED NAME [NAME ...]"""
import statistics
import sys
import time

import torch
from fastpad.bench.op_calls import RecordFastpadOps
from fastpad.bench.random_layers import random_layers
from fastpad.bench.runner import case_inputs, with_optional_bias
torch.set_num_threads(2)
seed = int(sys.argv[1])
layers = {l.name: l for l in random_layers(100, seed)}
def t(fn, reps=5):
    r = []
    for _ in range(7):
        s = time.perf_counter()
        for _ in range(reps): fn()
        r.append((time.perf_counter() - s) / reps)
    return statistics.median(r) * 1e3
for name in sys.argv[2:]:
    case = layers[name].case
    print(name, layers[name].shape if hasattr(layers[name], 'shape') else case)
    inputs = [t_.detach().requires_grad_(t_.is_floating_point()) for t_ in case_inputs(case, torch.device('cpu'))]
    f = with_optional_bias(case.fastpad_function(), case)
    with RecordFastpadOps() as rec:
        y = f(*inputs); y.backward(torch.randn_like(y))
    with torch.no_grad():
        for op, a in rec.calls:
            a = [x.detach() if isinstance(x, torch.Tensor) else x for x in a]
            path = getattr(torch.ops.fastpad, f"_{op}_path")(*a, 'cpu')
            print(f"  {op:18s} {path:32s} {t(lambda: getattr(torch.ops.fastpad, op)(*a)):.3f} ms")
    ref = with_optional_bias(case.reference_function(), case)
    rin = [i.detach().clone().requires_grad_(i.is_floating_point()) for i in inputs]
    yy = ref(*rin); g = torch.randn_like(yy)
    def fb():
        for l in rin: l.grad = None
        ref(*rin).backward(g)
    def ffb():
        for l in inputs: l.grad = None
        f(*inputs).backward(g)
    with torch.no_grad():
        tf = t(lambda: f(*inputs)); tr = t(lambda: ref(*rin))
    print(f"  fwd: fastpad {tf:.3f} ref {tr:.3f} ({tf/tr:.2f}); fwd+bwd fastpad {t(ffb):.3f} ref {t(fb):.3f}")
