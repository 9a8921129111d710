import os, sys, time, statistics, torch
import fastpad
from fastpad.bench.random_layers import random_layers
torch.set_num_threads(2)
ops = torch.ops.fastpad
seed = int(sys.argv[1])
layers = {l.name: l for l in random_layers(100, seed)}
for n in sys.argv[2].split(","):
    case = layers[n].case
    x, w, b = case.random_inputs()
    args = case.conv_op_arguments()
    fns, paths = {}, {}
    for v in ("avx2", "baseline"):
        os.environ["FASTPAD_CPU_ISA"] = v
        paths[v] = ops._conv_path(x, w, b, *args, "cpu")
        def f(v=v):
            os.environ["FASTPAD_CPU_ISA"] = v; return ops.conv(x, w, b, *args)
        fns[v] = f
    r1, r2 = fns["avx2"](), fns["baseline"]()
    err = ((r1 - r2).abs().max() / r2.abs().max()).item()
    s = time.perf_counter(); fns["avx2"](); one = time.perf_counter() - s
    reps = max(1, min(20, int(0.05 / max(one, 1e-6))))
    t = {k: [] for k in fns}
    for _ in range(9):
        for k, f in fns.items():
            s = time.perf_counter()
            for _ in range(reps): f()
            t[k].append((time.perf_counter() - s) / reps)
    m = {k: statistics.median(v) * 1e3 for k, v in t.items()}
    print(f"{n} forward {paths['avx2']} {m['avx2']:.2f} ms vs {paths['baseline']} {m['baseline']:.2f} ms: ratio {m['avx2']/m['baseline']:.2f} (diff {err:.1e})  {case.describe()}", flush=True)
os.environ.pop("FASTPAD_CPU_ISA")
