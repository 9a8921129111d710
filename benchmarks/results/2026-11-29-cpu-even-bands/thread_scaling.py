"""Every fastpad op call of the random layers of the given seeds, each timed alone with 1 and 2 threads (medians of 5
rounds of enough calls for 10 ms). Run from the repository root with PYTHONPATH=tests:
  python thread_scaling.py 1,2"""
import statistics, sys, time, torch
from fastpad.bench.op_calls import RecordFastpadOps
from fastpad.bench.random_layers import random_layers
from fastpad.bench.runner import case_inputs, with_optional_bias
def t(fn):
    fn(); s = time.perf_counter(); fn(); one = time.perf_counter() - s
    reps = max(1, int(0.01 / max(one, 1e-6)))
    r = []
    for _ in range(5):
        s = time.perf_counter()
        for _ in range(reps): fn()
        r.append((time.perf_counter() - s) / reps)
    return statistics.median(r) * 1e3
for seed in map(int, sys.argv[1].split(",")):
    for layer in random_layers(100, seed):
        case = layer.case
        inputs = [t_.detach().requires_grad_(t_.is_floating_point()) for t_ in case_inputs(case, torch.device('cpu'))]
        f = with_optional_bias(case.fastpad_function(), case)
        torch.set_num_threads(2)
        with RecordFastpadOps() as rec:
            y = f(*inputs); y.backward(torch.randn_like(y))
        with torch.no_grad():
            for op, a in rec.calls:
                a = [x.detach() if isinstance(x, torch.Tensor) else x for x in a]
                path = getattr(torch.ops.fastpad, f"_{op}_path")(*a, 'cpu')
                fn = lambda: getattr(torch.ops.fastpad, op)(*a)
                torch.set_num_threads(1); t1 = t(fn)
                torch.set_num_threads(2); t2 = t(fn)
                cl = 'CL' if a[0].dim() > 3 and not a[0].is_contiguous() else '  '
                print(f"s{seed} {layer.name} {cl} {op:16s} {path:34s} b{case.batch} g{case.groups} {tuple(a[0].shape)} t1 {t1:.3f} t2 {t2:.3f} x{t1/t2:.2f}", flush=True)
