"""Interleaved in one process: O = the transposed path before (FP_AB set: a temporary toggle in choose_conv_transpose_path of the
measured build, removed before commit), N = cpu_grouped_expanded for the transposed op, P = F.pad +
conv (the reference); float32 forward+backward (grad_output of ones), medians of `rounds`. Random layers in
channels-last whose forward or backward reaches cpu_grouped_expanded in the transposed op.
Run from the repository root with PYTHONPATH=tests (for tests/code_paths.py)."""
import os, sys, time, statistics, torch
from code_paths import CodePath, kernels_reached
from fastpad.bench.random_layers import random_layers
seeds = [int(s) for s in sys.argv[1].split(",")]
rounds = int(sys.argv[2])
def timeit(f, reps):
    t0 = time.perf_counter()
    for _ in range(reps): f()
    return (time.perf_counter() - t0) / reps * 1e3
def env(m):
    if m == "O": os.environ["FP_AB"] = "1"
    else: os.environ.pop("FP_AB", None)
print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
for seed in seeds:
    for l in random_layers(100, seed):
        c = l.case
        if c.layout != "channels_last" or c.groups == 1:
            continue
        path = CodePath(c, (), None)
        env("N")
        reached = kernels_reached(path, path.inputs(torch.float32, batch=c.batch))
        if ("conv_transpose", "cpu_grouped_expanded") not in reached:
            continue
        env("O")
        before = [k for op, k in kernels_reached(path, path.inputs(torch.float32, batch=c.batch)) if op == "conv_transpose"]
        env("N")
        x, w, b = c.random_inputs()
        f = c.fastpad_function(); ref = c.reference_function()
        x.requires_grad_(); w.requires_grad_()
        def fb(fn):
            y = fn(x, w, b); y.backward(torch.ones_like(y))
        fns = {"O": lambda: fb(f), "N": lambda: fb(f), "P": lambda: fb(ref)}
        gx = {}
        for m in "ON":
            env(m); x.grad = None; fb(f); gx[m] = x.grad.clone()
        assert (gx["O"] - gx["N"]).abs().max() <= 1e-5 * gx["O"].abs().max(), "O and N differ"
        env("N")
        reps = max(1, int(0.05 / max(1e-5, timeit(fns["N"], 1) / 1e3)))
        t = {m: [] for m in "ONP"}
        for r in range(rounds):
            for m in "ONP":
                env(m); t[m].append(timeit(fns[m], reps))
        env("N")
        med = {m: statistics.median(v) for m, v in t.items()}
        print(f"s{seed} {l.name} {c.describe()}\n    fwd+bwd before ({before[0]}) {med['O']:.3f} ms, after {med['N']:.3f} ms:"
              f" after/before {med['N']/med['O']:.2f}, after/(F.pad+conv) {med['N']/med['P']:.2f}, before/(F.pad+conv) {med['O']/med['P']:.2f}", flush=True)
