"""NCHW conv_transpose calls of the random layers on the GEMM + col2im (2-3 dims), each timed as it is and with x made
channels-last beforehand (outside the timed call; the output made contiguous inside it), interleaved, three medians of
5. Run from the repository root: PYTHONPATH=tests python scan_nchw_as_channels_last.py 1,2,3,4"""
import sys, time, statistics, torch
from fastpad.bench.op_calls import RecordFastpadOps
from fastpad.bench.random_layers import random_layers
from fastpad.bench.runner import case_inputs, with_optional_bias
torch.set_num_threads(2)
def t(fn):
    reps = max(1, int(0.01 / max(1e-6, (lambda s: (fn(), time.perf_counter() - s)[1])(time.perf_counter()))))
    r = []
    for _ in range(5):
        s = time.perf_counter()
        for _ in range(reps): fn()
        r.append((time.perf_counter() - s) / reps)
    return statistics.median(r) * 1e3
CL = {4: torch.channels_last, 5: torch.channels_last_3d}
for seed in map(int, sys.argv[1].split(',')):
    for l in random_layers(100, seed):
        case = l.case
        if case.layout != 'contiguous' or case.dims == 1: continue
        inputs = [t_.detach().requires_grad_(t_.is_floating_point()) for t_ in case_inputs(case, torch.device('cpu'))]
        f = with_optional_bias(case.fastpad_function(), case)
        with RecordFastpadOps() as rec:
            y = f(*inputs); y.backward(torch.randn_like(y))
        with torch.no_grad():
            for op, a in rec.calls:
                if op != 'conv_transpose': continue
                a = [x.detach() if isinstance(x, torch.Tensor) else x for x in a]
                p1 = torch.ops.fastpad._conv_transpose_path(*a, 'cpu')
                if not p1.startswith('cpu_gemm_col2im'): continue
                b = list(a); b[0] = a[0].contiguous(memory_format=CL[a[0].dim()])
                p2 = torch.ops.fastpad._conv_transpose_path(*b, 'cpu')
                fa = lambda: torch.ops.fastpad.conv_transpose(*a)
                fb = lambda: torch.ops.fastpad.conv_transpose(*b).contiguous()
                ra, rb = [], []
                for _ in range(3): ra.append(t(fa)); rb.append(t(fb))
                ta, tb = statistics.median(ra), statistics.median(rb)
                xs = a[0].shape
                print(f"s{seed} {l.name} x {tuple(xs)} w {tuple(a[1].shape)} pos {xs[2:].numel()} {p1} {ta:.3f} | CL {p2} {tb:.3f} | nchw/cl {ta/tb:.2f}", flush=True)
