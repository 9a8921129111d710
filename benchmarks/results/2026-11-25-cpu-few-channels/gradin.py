import os, sys, time, statistics, torch
import fastpad
from fastpad.bench.random_layers import random_layers
torch.set_num_threads(2)
ops = torch.ops.fastpad
def isa(v):
    os.environ["FASTPAD_CPU_ISA"] = v
seed = int(sys.argv[1])
layers = {l.name: l for l in random_layers(100, seed)}
for n in sys.argv[2].split(","):
    case = layers[n].case
    x, w, b = case.random_inputs()
    if case.transposed:
        crop_lo, out_size = case.crops()
        gy, w = x, w
        a = (list(case.per_dim(case.stride)), crop_lo, out_size, list(case.per_dim(case.dilation)), case.groups, "zeros")
    else:
        stride, pad_lo, pad_hi, dil, groups, mode = case.conv_op_arguments()
        y = ops.conv(x, w, b, stride, pad_lo, pad_hi, dil, groups, mode)
        gy = torch.randn_like(y)
        a = (stride, pad_lo, list(x.shape[2:]), dil, groups, mode)
    fns = {}
    for v in ("avx2", "baseline"):
        def f(v=v):
            isa(v); return ops.conv_transpose(gy, w, None, *a)
        fns[v] = f
    paths = {}
    for v in fns:
        isa(v); paths[v] = ops._conv_transpose_path(gy, w, None, *a, "cpu")
    r1, r2 = fns["avx2"](), fns["baseline"]()
    err = ((r1 - r2).abs().max() / r2.abs().max()).item()
    for f in fns.values(): f()
    s = time.perf_counter(); fns["avx2"](); one = time.perf_counter() - s
    reps = max(1, min(20, int(0.05 / max(one, 1e-6))))
    t = {k: [] for k in fns}
    for _ in range(9):
        for k, f in fns.items():
            s = time.perf_counter()
            for _ in range(reps): f()
            t[k].append((time.perf_counter() - s) / reps)
    m = {k: statistics.median(v) * 1e3 for k, v in t.items()}
    print(f"{n} grad_in {paths['avx2']} {m['avx2']:.2f} ms vs {paths['baseline']} {m['baseline']:.2f} ms: ratio {m['avx2']/m['baseline']:.2f} (diff {err:.1e})  {case.describe()}", flush=True)
os.environ.pop("FASTPAD_CPU_ISA")
