"""Forward+backward of the named suite layers (channels-last), FP_OLD toggled (see ab_nhwc_tiles_avx512.py), 15
interleaved rounds of 5 calls each; prints every round sorted, and the medians. usage: ab_fwdbwd_rounds.py NAME..."""
import os, time, statistics, torch, fastpad, sys
from dataclasses import replace
from fastpad.bench.layers import SUITE
def timeit(f, reps):
    t0 = time.perf_counter()
    for _ in range(reps): f()
    return (time.perf_counter() - t0) / reps * 1e3
def env(m):
    if m == "O": os.environ["FP_OLD"] = "1"
    else: os.environ.pop("FP_OLD", None)
for l in SUITE:
    if l.name not in sys.argv[1:]: continue
    c = replace(l.case, layout="channels_last")
    x, w, b = c.random_inputs(); x.requires_grad_(True); w.requires_grad_(True)
    f = c.fastpad_function()
    y = f(x, w, b); gy = torch.randn_like(y)
    parts = {}
    def run():
        y = f(x, w, b); y.backward(gy)
    t = {"O": [], "N": []}
    for r in range(15):
        for m in ("ON" if r % 2 == 0 else "NO"):
            env(m); t[m].append(timeit(run, 5))
    env("N")
    print(l.name, {m: [round(v, 2) for v in sorted(t[m])] for m in t})
    print(l.name, "median before", statistics.median(t["O"]), "after", statistics.median(t["N"]))
