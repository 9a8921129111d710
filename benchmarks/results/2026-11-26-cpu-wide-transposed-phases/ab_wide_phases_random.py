"""Random layers under the kept rule of cpu_blocked_transpose for 16 or more x channels per group: the transposed
forward (transposed layers) or the input gradient (convs) where AVX-512 takes the blocked stride phases and AVX2
(FASTPAD_CPU_ISA=avx2, which gives these problems the path they had before: phase planes or GEMM + col2im) does not.
One process, interleaved, medians of 9 rounds; float32; the op alone (torch.ops.fastpad.conv_transpose).

usage: ab_wide_phases_random.py SEEDS (e.g. 1,2,3)"""
import os, sys, time, statistics, torch
from fastpad.bench.random_layers import random_layers
def timeit(f, reps):
    t0 = time.perf_counter()
    for _ in range(reps): f()
    return (time.perf_counter() - t0) / reps * 1e3
def isa(m):
    if m == "O": os.environ["FASTPAD_CPU_ISA"] = "avx2"
    else: os.environ.pop("FASTPAD_CPU_ISA", None)
ops = torch.ops.fastpad
ratios = []
for s in map(int, sys.argv[1].split(",")):
    for l in random_layers(100, s):
        c = l.case
        if c.groups == c.in_channels and not c.transposed: continue
        x, w, b = c.random_inputs()
        if c.transposed:
            crop_lo, out_size = c.crops()
            st, dl = list(c.per_dim(c.stride)), list(c.per_dim(c.dilation))
            args, what = (x, w, b, st, crop_lo, out_size, dl, c.groups, "zeros"), "forward"
        else:
            st, lo, hi, dl, g, mode = c.conv_op_arguments()
            with torch.no_grad(): y = c.fastpad_function()(x, w, b)
            args, what = (torch.randn_like(y), w, None, st, lo, list(x.shape[2:]), dl, g, mode), "input grad"
        paths = {}
        for m in "ON":
            isa(m); paths[m] = ops._conv_transpose_path(*args, "cpu")
        isa("N")
        if paths["N"] != "cpu_blocked_avx512" or paths["O"] not in ("cpu_phase_planes", "cpu_gemm_col2im"): continue
        f = lambda: ops.conv_transpose(*args)
        with torch.no_grad():
            isa("O"); r = f(); isa("N"); a = f()
            assert torch.allclose(a, r, rtol=1e-4, atol=1e-3), (a - r).abs().max()
            reps = max(1, int(0.03 / max(1e-5, timeit(f, 1) / 1e3)))
            t = {m: [] for m in "ON"}
            for rnd in range(9):
                for m in ("ON" if rnd % 2 == 0 else "NO"):
                    isa(m); t[m].append(timeit(f, reps))
        isa("N")
        med = {m: statistics.median(v) for m, v in t.items()}
        ratios.append(med["N"] / med["O"])
        print(f"s{s} {l.name} {what} of {c.describe()}: {paths['O']} {med['O']:.3f} ms, {paths['N']} {med['N']:.3f} ms, new/old {med['N']/med['O']:.2f}", flush=True)
if ratios: print(f"{len(ratios)} calls: new/old {min(ratios):.2f}-{max(ratios):.2f}, geomean {statistics.geometric_mean(ratios):.2f}")
