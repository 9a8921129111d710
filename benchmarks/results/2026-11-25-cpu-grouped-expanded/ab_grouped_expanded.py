"""Interleaved in one process: O = the path before (FP_AB set: a temporary toggle in choose_conv_path of the
measured build, removed before commit), N = cpu_grouped_expanded, P = F.pad + conv; float32 forward, medians of
`rounds`."""
import os, sys, time, statistics, torch
from fastpad.bench.random_layers import random_layers
seeds = [int(s) for s in sys.argv[1].split(",")]
rounds = int(sys.argv[2])
ops = torch.ops.fastpad
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
        if c.transposed or c.layout != "channels_last":
            continue
        x, w, b = c.random_inputs()
        f = c.fastpad_function(); ref = c.reference_function()
        st, lo, hi, dl, g, mode = c.conv_op_arguments()
        env("N")
        if ops._conv_path(x, w, b, st, lo, hi, dl, g, mode, "cpu") != "cpu_grouped_expanded":
            continue
        paths = {}
        with torch.no_grad():
            y = ref(x.double(), w.double(), b.double() if b is not None else None)
            for m in "ON":
                env(m); paths[m] = ops._conv_path(x, w, b, st, lo, hi, dl, g, mode, "cpu")
                assert (f(x, w, b).double() - y).abs().max() <= 1e-5 * y.abs().max(), m
            env("N")
            assert torch.allclose(f(x.double(), w.double(), b.double() if b is not None else None), y, rtol=1e-10, atol=1e-10)
            reps = max(1, int(0.03 / max(1e-5, timeit(lambda: f(x, w, b), 1) / 1e3)))
            fns = {"O": f, "N": f, "P": ref}
            t = {m: [] for m in "ONP"}
            for r in range(rounds):
                for m in "ONP":
                    env(m); t[m].append(timeit(lambda: fns[m](x, w, b), reps))
            env("N")
        med = {m: statistics.median(v) for m, v in t.items()}
        print(f"s{seed} {l.name} {c.describe()}\n    before {paths['O']} {med['O']:.3f} ms, after {paths['N']} {med['N']:.3f} ms:"
              f" after/before {med['N']/med['O']:.2f}, after/(F.pad+conv) {med['N']/med['P']:.2f}, before/(F.pad+conv) {med['O']/med['P']:.2f}", flush=True)
