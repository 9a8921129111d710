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
# (x shape, c_out, kernel, stride)
cases = [((4,3,112,112),32,(5,5),2), ((4,4,112,112),32,(7,7),2), ((4,8,56,56),64,(3,3),1), ((4,8,56,56),64,(5,5),1),
         ((4,12,56,56),48,(3,3),1), ((4,12,56,56),48,(5,5),2), ((4,8,4000),32,(16,),1), ((4,8,4000),32,(9,),2),
         ((2,4,24,24,24),32,(3,3,3),1), ((2,4,16,16,16),32,(5,5,5),1), ((8,3,64,64),16,(4,4),2), ((2,6,40,40),96,(6,6),1)]
for xs, co, k, s in cases:
    x = torch.randn(xs); w = torch.randn((co, xs[1]) + k)
    d = len(k); st = [s]*d; lo = [kk-1 for kk in k]; hi = [0]*d; dl = [1]*d
    f = lambda: ops.conv(x, w, None, st, lo, hi, dl, 1, "zeros")
    paths = {}
    for v in "AB": setv(v); paths[v] = ops._conv_path(x, w, None, st, lo, hi, dl, 1, "zeros", "cpu")
    t0 = time.perf_counter(); f(); one = time.perf_counter() - t0
    n = max(3, min(50, int(0.02 / max(one, 1e-6))))
    res = {"A": [], "B": []}
    for r in range(10):
        for v in (("A", "B") if r % 2 == 0 else ("B", "A")):
            setv(v); res[v].append(run(f, n))
    setv("A")
    a, b = (statistics.median(res[v]) * 1e3 for v in "AB")
    import math
    print(f"{str(xs):20s} ->{co:3d} k{k} s{s} red {xs[1]*math.prod(k):4d} A {a:7.3f} ({paths['A']}) B {b:7.3f} ({paths['B']}) B/A {b/a:.2f}", flush=True)
