import os, sys, time, statistics, torch, fastpad
torch.set_num_threads(2)
g = torch.Generator().manual_seed(0)
x = torch.randn(5,5,109,16, generator=g); w = torch.randn(141,5,5,3, generator=g)
f = lambda: torch.ops.fastpad.conv(x, w, None, [3,3], [1,1], [1,1], [1,1], 1, "reflect")
res = {"old": [], "new": []}
for r in range(15):
    for v in ("old", "new"):
        if v == "old": os.environ["AB_OLD"] = "1"
        else: os.environ.pop("AB_OLD", None)
        for _ in range(5): f()
        ts = []
        for _ in range(100):
            t0 = time.perf_counter(); f(); ts.append(time.perf_counter() - t0)
        res[v].append(statistics.median(ts) * 1e3)
for v in res: print(v, " ".join(f"{t:.3f}" for t in res[v]), "median", f"{statistics.median(res[v]):.3f}")
print("new/old", statistics.median(res["new"]) / statistics.median(res["old"]))
