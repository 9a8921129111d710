"""A/B in one process: FP_OLD_DW toggled (the per-pixel channels-last depthwise loop), interleaved rounds, medians."""
import os, torch, time, statistics, fastpad
ops = torch.ops.fastpad
cl = torch.channels_last
# (name, input shape, kernel, stride, dilation, mode)
cases = [("random076", (10, 19, 53, 53), 6, 1, 2, "replicate"), ("c32_k3s2_112", (8, 32, 112, 112), 3, 2, 1, "zeros"),
         ("c24_k5s1_56", (8, 24, 56, 56), 5, 1, 1, "zeros"), ("c16_k3s1_28", (16, 16, 28, 28), 3, 1, 1, "reflect"),
         ("c8_k7s2_64", (4, 8, 64, 64), 7, 2, 1, "zeros"), ("c30_k3s1_190", (4, 30, 190, 190), 3, 1, 1, "zeros"),
         ("c12_k5s2_95", (4, 12, 95, 95), 5, 2, 1, "circular"), ("c64_k3s2_112 (control)", (8, 64, 112, 112), 3, 2, 1, "zeros")]
def run(f, n=5):
    ts = []
    for _ in range(n):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return statistics.median(ts)
for name, shape, k, s, d, mode in cases:
    C = shape[1]
    x = torch.randn(shape).contiguous(memory_format=cl); w = torch.randn(C, 1, k, k)
    total = d * (k - 1)
    lo, hi = total // 2, total - total // 2
    args = ([s, s], [lo, lo], [hi, hi], [d, d], C, mode)
    f = lambda: ops.conv(x, w, None, *args)
    os.environ.pop("FP_OLD_DW", None); new = f()
    os.environ["FP_OLD_DW"] = "1"; old = f()
    res = {"old": [], "new": []}
    with torch.no_grad():
        for r in range(11):
            for v in (("old", "new") if r % 2 == 0 else ("new", "old")):
                if v == "old": os.environ["FP_OLD_DW"] = "1"
                else: os.environ.pop("FP_OLD_DW", None)
                res[v].append(run(f))
    o, n = statistics.median(res["old"]) * 1e3, statistics.median(res["new"]) * 1e3
    print(f"{name:24s} {str(shape):20s} k{k} s{s} d{d} {mode:9s} old {o:7.3f} ms new {n:7.3f} ms new/old {n/o:.2f} "
          f"max diff {(new - old).abs().max().item():.1e}", flush=True)
