"""Per op (forward, input gradient, weight gradient) times and % of FMA peak of the suite's dense layers."""
import sys, time, statistics, torch, fastpad
from dataclasses import replace
from fastpad.bench.layers import SUITE
from fastpad.bench.peers import fma_peak_gflops, multiply_adds
peak = fma_peak_gflops()
print(f"peak {peak:.0f} GFLOP/s")
def timeit(f, reps=3):
    t0 = time.perf_counter()
    for _ in range(reps): f()
    return (time.perf_counter() - t0) / reps * 1e3
pat = sys.argv[1] if len(sys.argv) > 1 else ""
for layout in ["channels_last", "contiguous"]:
  for l in SUITE:
    c = replace(l.case, layout=layout)
    if c.groups != 1 or pat not in l.name or (not pat and (c.in_channels < 64 or c.out_channels < 64)): continue
    x, w, b = c.random_inputs()
    mod = fastpad.nn  # noqa
    fn = c.fastpad_function()
    flops = 2 * multiply_adds(c)
    xr = x.detach().requires_grad_(True); wr = w.detach().requires_grad_(True)
    y = fn(xr, w, b); gy = torch.randn_like(y)
    y2 = fn(x, wr, b)
    fw = lambda: fn(x, w, b)
    ig = lambda: torch.autograd.grad(y, xr, gy, retain_graph=True)
    wg = lambda: torch.autograd.grad(y2, wr, gy, retain_graph=True)
    res = {k: statistics.median([timeit(f) for _ in range(7)]) for k, f in [("fwd", fw), ("in", ig), ("w", wg)]}
    print(f"{layout[:2]} {l.name:32s} " + " ".join(f"{k} {v:6.2f} ms {100*flops/(v*1e-3)/(peak*1e9):5.1f}%" for k, v in res.items()), flush=True)
