"""The suite's strided transposed layers (forward) and the ResNet-50 k3 s2 input gradient, in a dtype: AVX-512 (the
blocked stride phases) against FASTPAD_CPU_ISA=avx2 (which gives these problems the path they had before: phase
planes or GEMM + col2im, both on torch's GEMM). One process, interleaved, medians of 11 rounds."""
import os, sys, time, statistics, torch
from dataclasses import replace
from fastpad.bench.layers import SUITE
def timeit(f, reps):
    t0 = time.perf_counter()
    for _ in range(reps): f()
    return (time.perf_counter() - t0) / reps * 1e3
dtype = sys.argv[1]
ops = torch.ops.fastpad
for l in SUITE:
    if not (l.case.transposed or l.name == "resnet50.dense_k3s2_c128"): continue
    for layout in ("contiguous", "channels_last"):
        c = replace(l.case, layout=layout, dtype=dtype)
        x, w, b = c.random_inputs()
        if c.transposed:
            crop_lo, out_size = c.crops()
            st, dl = list(c.per_dim(c.stride)), list(c.per_dim(c.dilation))
            args = (x, w, b, st, crop_lo, out_size, dl, c.groups, "zeros")
            what = "forward"
        else:
            st, lo, hi, dl, g, mode = c.conv_op_arguments()
            with torch.no_grad(): y = c.fastpad_function()(x, w, b)
            args = (torch.randn_like(y), w, None, st, lo, list(x.shape[2:]), dl, g, mode)
            what = "input grad"
        paths = {}
        for m, isa in (("O", "avx2"), ("N", None)):
            if isa: os.environ["FASTPAD_CPU_ISA"] = isa
            else: os.environ.pop("FASTPAD_CPU_ISA", None)
            paths[m] = ops._conv_transpose_path(*args, "cpu")
        f = lambda: ops.conv_transpose(*args)
        t = {m: [] for m in "ON"}
        with torch.no_grad():
            for r in range(11):
                for m in ("ON" if r % 2 == 0 else "NO"):
                    if m == "O": os.environ["FASTPAD_CPU_ISA"] = "avx2"
                    else: os.environ.pop("FASTPAD_CPU_ISA", None)
                    t[m].append(timeit(f, 3))
        os.environ.pop("FASTPAD_CPU_ISA", None)
        med = {m: statistics.median(v) for m, v in t.items()}
        print(f"{l.name} {what} {layout} {dtype}: {paths['O']} {med['O']:.3f} ms, {paths['N']} {med['N']:.3f} ms, new/old {med['N']/med['O']:.2f}", flush=True)
