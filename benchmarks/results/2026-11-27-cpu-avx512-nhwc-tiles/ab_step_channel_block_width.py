"""A step on the way (its build toggle FP_WIDEBLOCK is gone): NCHW channel blocks of 16-channel vectors against
8-channel ones, both on the AVX-512 tiles, on the suite's channel-block layers; 9 interleaved rounds of 20 calls."""
import os, sys, time, statistics, torch
from dataclasses import replace
from fastpad.bench.layers import SUITE
def timeit(f, reps):
    t0 = time.perf_counter()
    for _ in range(reps): f()
    return (time.perf_counter() - t0) / reps * 1e3
ops = torch.ops.fastpad
for l in SUITE:
    c = replace(l.case, layout="contiguous")
    if c.transposed: continue
    x, w, b = c.random_inputs()
    st, lo, hi, dl, g, mode = c.conv_op_arguments()
    if ops._conv_path(x, w, b, st, lo, hi, dl, g, mode, "cpu") != "cpu_depthwise_channel_blocks": continue
    f = c.fastpad_function()
    with torch.no_grad():
        y0 = f(x, w, b); os.environ["FP_WIDEBLOCK"] = "1"; y1 = f(x, w, b); os.environ.pop("FP_WIDEBLOCK")
        assert torch.allclose(y0, y1, rtol=1e-5, atol=1e-5)
        t = {0: [], 1: []}
        for r in range(9):
            for m in (0, 1) if r % 2 else (1, 0):
                if m: os.environ["FP_WIDEBLOCK"] = "1"
                else: os.environ.pop("FP_WIDEBLOCK", None)
                t[m].append(timeit(lambda: f(x, w, b), 20))
        os.environ.pop("FP_WIDEBLOCK", None)
    a, bb = statistics.median(t[0]), statistics.median(t[1])
    print(f"{l.name} {c.describe()}: 8-lane blocks {a:.3f} ms, 16-lane blocks {bb:.3f} ms, ratio {bb/a:.2f}", flush=True)
