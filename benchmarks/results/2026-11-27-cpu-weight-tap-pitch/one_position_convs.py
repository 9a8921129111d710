import torch, time, statistics, os, fastpad
torch.set_num_threads(2)
for co, ci, k in [(239,150,5),(48,298,5),(7,353,5),(64,64,3),(256,256,3),(12,32,7),(64,32,3)]:
    x = torch.randn(1, ci, k, k); w = torch.randn(co, ci, k, k)
    f = lambda: fastpad.conv2d(x, w, None, padding=((0,0),(0,0)), padding_mode="reflect")
    xb, wb = x.bfloat16(), w.bfloat16()
    fb = lambda: fastpad.conv2d(xb, wb, None, padding=((0,0),(0,0)), padding_mode="reflect")
    for g, name in ((f, "f32"), (fb, "bf16")):
        res = {0: [], 1: []}
        for r in range(40):
            for old in (0, 1):
                if old: os.environ["AB_OLD"] = "1"
                else: os.environ.pop("AB_OLD", None)
                t = time.perf_counter(); g(); res[old].append(time.perf_counter() - t)
        a, b = statistics.median(res[0][5:]) * 1e3, statistics.median(res[1][5:]) * 1e3
        print(name, co, ci, k, "after %.4f before %.4f ratio %.2f" % (a, b, a / b))
