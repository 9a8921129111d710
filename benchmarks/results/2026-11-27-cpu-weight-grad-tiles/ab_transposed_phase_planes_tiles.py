"""A/B of the NCHW transposed phase planes' tap GEMMs on the reduction tiles, one process, interleaved: O = the code
before (FP_OLD set, a temporary toggle of the measured build: torch's GEMM, MKL), N = cpu/reduction_tiles.h's register
tiles (AVX-512 here). `op`: the conv_transpose call alone (a transposed layer's forward, a conv's input gradient);
`fwdbwd`: forward+backward, with P = F.pad + conv. Every layer of the suite or of the random seeds given whose
conv_transpose takes cpu_phase_planes_*; float32, medians of `rounds` rounds.

usage: ab_transposed_phase_planes_tiles.py suite|SEEDS ROUNDS op|fwdbwd"""
import os, sys, time, statistics, torch, fastpad
from dataclasses import replace
from fastpad.bench.layers import SUITE
from fastpad.bench.random_layers import random_layers

def timeit(f, reps):
    t0 = time.perf_counter()
    for _ in range(reps): f()
    return (time.perf_counter() - t0) / reps * 1e3

def env(m):
    if m == "O": os.environ["FP_OLD"] = "1"
    else: os.environ.pop("FP_OLD", None)

which, rounds, mode_name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if which == "suite":
    layers = [("suite", replace(l.case, layout=layout), l.name) for layout in ("contiguous", "channels_last")
              for l in SUITE if l.case.dims > 1 or layout == "contiguous"]
else:
    layers = [(f"s{seed}", l.case, l.name) for seed in map(int, which.split(",")) for l in random_layers(100, seed)]
print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, float32, {mode_name}")
ops = torch.ops.fastpad
ratios = []
for tag, c, name in layers:
    x, w, b = c.random_inputs()
    fp = c.fastpad_function()
    with torch.no_grad():
        y = fp(x, w, b)
    gy = torch.randn_like(y)
    if c.transposed:
        crop_lo, out_size = c.crops()
        args = (x, w, b, list(c.per_dim(c.stride)), crop_lo, out_size, list(c.per_dim(c.dilation)), c.groups, "zeros")
    else:
        st, lo, hi, dl, g, mode = c.conv_op_arguments()
        args = (gy, w, None, st, lo, list(x.shape[2:]), dl, g, mode)
    path = ops._conv_transpose_path(*args, "cpu")
    if not path.startswith("cpu_phase_planes_"):
        continue
    if mode_name == "op":
        f = lambda: ops.conv_transpose(*args)
        results = {}
        for m in "ON":
            env(m); results[m] = f()
        assert torch.allclose(results["O"], results["N"], rtol=1e-4, atol=1e-3 * results["O"].abs().max().item())
        fns = {"O": f, "N": f}
    else:
        x.requires_grad_(True); w.requires_grad_(True)
        ref = c.reference_function()
        def run(fn):
            fn(x, w, b).backward(gy)
        fns = {"O": lambda: run(fp), "N": lambda: run(fp), "P": lambda: run(ref)}
    reps = max(1, int(0.03 / max(1e-5, timeit(fns["N"], 1) / 1e3)))
    t = {m: [] for m in fns}
    for r in range(rounds):
        for m in (("ONP" if r % 2 == 0 else "NOP") if "P" in fns else ("ON" if r % 2 == 0 else "NO")):
            env(m); t[m].append(timeit(fns[m], reps))
    env("N")
    med = {m: statistics.median(v) for m, v in t.items()}
    ratios.append(med["N"] / med["O"])
    extra = f", after/(F.pad+conv) {med['N']/med['P']:.2f}, before/(F.pad+conv) {med['O']/med['P']:.2f}" if "P" in med else ""
    print(f"{tag} {name} {c.layout} {path} {c.describe()}\n    before {med['O']:.3f} ms, after {med['N']:.3f} ms:"
          f" after/before {med['N']/med['O']:.2f}{extra}", flush=True)
if ratios:
    geo = torch.tensor(ratios).log().mean().exp().item()
    print(f"{len(ratios)} layers: after/before {min(ratios):.2f}-{max(ratios):.2f}, geomean {geo:.2f}")
