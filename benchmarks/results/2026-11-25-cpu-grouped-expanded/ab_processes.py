"""Forward time of chosen random layers in this process's build (PYTHONPATH picks the build): medians of 9 rounds."""
import sys, time, statistics, torch
from fastpad.bench.random_layers import random_layers
want = [tuple(a.split(":")) for a in sys.argv[1:]]
for seed, name in want:
    l = [l for l in random_layers(100, int(seed)) if l.name == name][0]
    c = l.case; x, w, b = c.random_inputs(); f = c.fastpad_function()
    with torch.no_grad():
        f(x, w, b); t0 = time.perf_counter(); f(x, w, b); one = time.perf_counter() - t0
        reps = max(1, int(0.05 / max(one, 1e-5)))
        ts = []
        for _ in range(9):
            t0 = time.perf_counter()
            for _ in range(reps): f(x, w, b)
            ts.append((time.perf_counter() - t0) / reps * 1e3)
    print(f"s{seed} {name} {statistics.median(ts):.3f} ms")
