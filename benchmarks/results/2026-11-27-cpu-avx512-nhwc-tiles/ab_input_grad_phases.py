"""The channels-last depthwise input gradient alone (fastpad.conv_transpose, zeros: cpu_depthwise_phases), FP_OLD
toggled (see ab_nhwc_tiles_avx512.py): the suite's strided layers' gradients and two narrower ones, 9 interleaved rounds."""
import os, sys, time, statistics, torch, fastpad
ops = torch.ops.fastpad
def timeit(f, reps):
    t0 = time.perf_counter()
    for _ in range(reps): f()
    return (time.perf_counter() - t0) / reps * 1e3
def env(m):
    if m == "O": os.environ["FP_OLD"] = "1"
    else: os.environ.pop("FP_OLD", None)
# (batch, channels, y size, k, stride, pad_lo)
for n, c, size, k, s in [(8, 96, 112, 3, 2), (8, 64, 112, 3, 2), (4, 144, 190, 3, 2), (16, 240, 28, 3, 2), (8, 144, 56, 5, 2), (16, 480, 14, 5, 1), (8, 32, 112, 3, 2), (8, 48, 112, 3, 2)]:
    out = (size + s - 1) // s
    x = torch.randn(n, c, out, out).to(memory_format=torch.channels_last)
    w = torch.randn(c, 1, k, k)
    lo = (k - 1) // 2 if s == 1 else max(0, (out - 1) * s + k - size) // 2
    args = (x, w, None, [s, s], [lo, lo], [size, size], [1, 1], c, "zeros")
    path = ops._conv_transpose_path(*args, "cpu")
    f = lambda: ops.conv_transpose(*args)
    reps = max(1, int(0.05 / (timeit(f, 1) / 1e3)))
    t = {"O": [], "N": []}
    for r in range(9):
        for m in ("ON" if r % 2 == 0 else "NO"):
            env(m); t[m].append(timeit(f, reps))
    env("N")
    o, nn = statistics.median(t["O"]), statistics.median(t["N"])
    print(f"{n}x{c}x{out}^2 -> {size}^2 k{k} s{s} {path}: before {o:.3f} ms, after {nn:.3f} ms, after/before {nn/o:.2f}", flush=True)
