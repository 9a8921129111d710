import torch, time, statistics
import torch.nn.functional as F
import fastpad
torch.set_num_threads(2)
torch.manual_seed(0)
x = torch.randn(1,298,20,20).to(memory_format=torch.channels_last)
xp = F.pad(x, (2,2,2,2), mode='replicate')
w = torch.randn(48,298,5,5).to(memory_format=torch.channels_last)
gy = torch.randn(1,48,20,20).to(memory_format=torch.channels_last)
ops = torch.ops.fastpad
cands = {
 'torch fwd': lambda: F.conv2d(xp, w),
 'torch bwd data': lambda: torch.ops.aten.convolution_backward(gy, xp, w, None, [1,1], [0,0], [1,1], False, [0,0], 1, [True, False, False]),
 'torch bwd weight': lambda: torch.ops.aten.convolution_backward(gy, xp, w, None, [1,1], [0,0], [1,1], False, [0,0], 1, [False, True, False]),
 'fp fwd': lambda: ops.conv(x, w, None, [1,1], [2,2], [2,2], [1,1], 1, 'replicate'),
 'fp input grad': lambda: ops.conv_transpose(gy, w, None, [1,1], [2,2], [20,20], [1,1], 1, 'replicate'),
 'fp weight grad': lambda: ops.conv_weight_grad(x, gy, [48,298,5,5], [1,1], [2,2], [1,1], 1, 'replicate'),
}
res = {k: [] for k in cands}
for f in cands.values():
    for _ in range(5): f()
for r in range(15):
    for k,f in cands.items():
        t0=time.perf_counter()
        for _ in range(5): f()
        res[k].append((time.perf_counter()-t0)/5*1e3)
for k,v in res.items(): print(f"{k:20s} {statistics.median(v):6.3f} ms")
