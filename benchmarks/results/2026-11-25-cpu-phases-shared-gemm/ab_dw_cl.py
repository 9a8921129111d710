import os, time, statistics, torch, fastpad
ops = torch.ops.fastpad
def run(f, n):
    ts = []
    for _ in range(n):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return statistics.median(ts)
def setv(v):
    if v == "B": os.environ["FP_AB"] = "1"
    else: os.environ.pop("FP_AB", None)
for (xs, co, k, groups) in [((16,64,6,6),64,3,1), ((32,32,5,5),48,3,1), ((8,128,4,4),128,3,1), ((16,64,7,7),64,3,4), ((16,256,4,4),256,3,1)]:
    x = torch.randn(xs).contiguous(memory_format=torch.channels_last)
    gy = torch.randn(xs[0], co, xs[2], xs[3]).contiguous(memory_format=torch.channels_last)
    args = ([co, xs[1]//groups, k, k], [1,1], [1,1], [1,1], groups, "reflect")
    f = lambda: ops.conv_weight_grad(x, gy, *args)
    p = ops._conv_weight_grad_path(x, gy, *args, "cpu")
    setv("A"); a = f(); setv("B"); b = f(); err = ((a-b).abs().max()/a.abs().max()).item()
    res = {"A": [], "B": []}
    for r in range(12):
        for v in (("A","B") if r % 2 == 0 else ("B","A")):
            setv(v); res[v].append(run(f, 10))
    setv("A")
    am, bm = (statistics.median(res[v])*1e3 for v in "AB")
    print(f"{xs} ->{co} k{k} g{groups} {p}: shared {am:.3f} one-image {bm:.3f} ratio {am/bm:.2f} err {err:.1e}")
