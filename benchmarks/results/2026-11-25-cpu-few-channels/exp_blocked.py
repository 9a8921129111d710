import os, sys, time, statistics, torch
import fastpad
from fastpad.bench.random_layers import random_layers
torch.set_num_threads(2)
ops = torch.ops.fastpad
def path(case, x, w, b):
    if case.transposed:
        crop_lo, out_size = case.crops()
        return ops._conv_transpose_path(x, w, b, list(case.per_dim(case.stride)), crop_lo, out_size,
                                        list(case.per_dim(case.dilation)), case.groups, case.padding_mode, "cpu")
    return ops._conv_path(x, w, b, *case.conv_op_arguments(), "cpu")
def bench(case, backward):
    x, w, b = case.random_inputs()
    if backward:
        x.requires_grad_(); w.requires_grad_()
        if b is not None: b.requires_grad_()
    f = case.fastpad_function()
    ref = case.reference_function()
    def run(fn):
        def go():
            y = fn(x, w, b)
            if backward: y.sum().backward()
        return go
    variants = {}
    def with_env(v, go):
        def g():
            if v is None: os.environ.pop("FP_EXP_MIN", None)
            else: os.environ["FP_EXP_MIN"] = v
            go()
        return g
    variants["main"] = with_env(None, run(f))
    variants["exp"] = with_env("1", run(f))
    variants["pad+conv"] = run(ref)
    os.environ.pop("FP_EXP_MIN", None); p0 = path(case, x, w, b)
    os.environ["FP_EXP_MIN"] = "1"; p1 = path(case, x, w, b)
    # check correctness of exp
    with torch.no_grad():
        ye = f(x, w, b).double(); yr = ref(x.double(), w.double(), None if b is None else b.double())
    err = ((ye - yr).abs().max() / yr.abs().max()).item()
    os.environ.pop("FP_EXP_MIN", None)
    for g in variants.values(): g()
    t = {k: [] for k in variants}
    # calibrate
    s = time.perf_counter(); variants["main"](); one = time.perf_counter() - s
    reps = max(1, min(20, int(0.05 / max(one, 1e-6))))
    for _ in range(9):
        for k, g in variants.items():
            s = time.perf_counter()
            for _ in range(reps): g()
            t[k].append((time.perf_counter() - s) / reps)
    m = {k: statistics.median(v) * 1e3 for k, v in t.items()}
    os.environ.pop("FP_EXP_MIN", None)
    return p0, p1, m, err
seed = int(sys.argv[1]); names = sys.argv[2].split(",")
import dataclasses
from fastpad.bench.layers import SUITE
layers = {l.name: l for l in random_layers(100, seed)} if seed >= 0 else {l.name: l for l in SUITE}
for n in names:
    cl = n.endswith(":cl"); n = n.removesuffix(":cl")
    case = layers[n].case
    if cl: case = dataclasses.replace(case, layout="channels_last")
    for bw in (False, True):
        p0, p1, m, err = bench(case, bw)
        print(f"{n} {'fwd+bwd' if bw else 'forward'} {p0}->{p1} main {m['main']:.3f} exp {m['exp']:.3f} pc {m['pad+conv']:.3f}  exp/main {m['exp']/m['main']:.2f} exp/pc {m['exp']/m['pad+conv']:.2f} main/pc {m['main']/m['pad+conv']:.2f} err {err:.1e}  {case.describe() if hasattr(case,'describe') else ''}", flush=True)
