"""A/B in one process: env var FP_OLD_GATHER toggled, interleaved, medians of rounds."""
import os, torch, fastpad, time, statistics, sys
cl = torch.channels_last
cases = {"b0stem": ((8,3,224,224),(32,3,3,3),2), "b4stem": ((4,3,380,380),(48,3,3,3),2), "r50stem": ((4,3,224,224),(64,3,7,7),2),
         "g4c2": ((6,8,26,26),(52,2,3,3),1), "dw_x4_k1x3": ((24,86,12,10),(344,1,1,3),1), "c4": ((9,4,44,172),(39,4,3,2),1)}
def run(f, n=7):
    ts=[]
    for _ in range(n):
        t=time.perf_counter(); f(); ts.append(time.perf_counter()-t)
    return statistics.median(ts)
for name,(xs,ws,s) in cases.items():
    x = torch.randn(xs).contiguous(memory_format=cl); w = torch.randn(ws); g = xs[1]//ws[1]
    f = lambda: fastpad.nn.functional.conv2d(x, w, None, stride=s, padding="same", groups=g) if False else torch.ops.fastpad.conv(x, w, None, [s,s], [ws[2]//2, ws[3]//2], [(ws[2]-1)//2, (ws[3]-1)//2], [1,1], g, "zeros")
    res = {"old": [], "new": []}
    with torch.no_grad():
        for _ in range(3): f()
        for r in range(15):
            for v in (("old","new") if r % 2 == 0 else ("new","old")):
                if v == "old": os.environ["FP_OLD_GATHER"] = "1"
                else: os.environ.pop("FP_OLD_GATHER", None)
                res[v].append(run(f))
    o, n = statistics.median(res["old"])*1e3, statistics.median(res["new"])*1e3
    print(f"{name:12s} old {o:.3f} new {n:.3f} new/old {n/o:.3f}  path {torch.ops.fastpad._conv_path(x, w, None, [s,s], [ws[2]//2, ws[3]//2], [(ws[2]-1)//2, (ws[3]-1)//2], [1,1], g, 'zeros', 'cpu')}", flush=True)
