import torch, time, statistics
import torch.nn.functional as F
import fastpad, fastpad.functional as FF
torch.set_num_threads(1)
x = torch.randn(1,79,8,8).to(memory_format=torch.channels_last)
x0 = torch.randn(0,79,8,8).to(memory_format=torch.channels_last)
w = torch.randn(51,79,1,1)
ops = torch.ops.fastpad
cands = {
 'F.conv2d': lambda: F.conv2d(x,w,None,3),
 'aten.convolution via torch.ops': lambda: torch.ops.aten.convolution(x,w,None,[3,3],[0,0],[1,1],False,[0,0],1),
 'fastpad.conv2d': lambda: FF.conv2d(x,w,None,stride=3,padding=0),
 'op conv': lambda: ops.conv(x,w,None,[3,3],[0,0],[0,0],[1,1],1,'zeros'),
 'op conv batch0': lambda: ops.conv(x0,w,None,[3,3],[0,0],[0,0],[1,1],1,'zeros'),
 'empty_like': lambda: torch.empty((1,51,3,3)),
}
res = {k: [] for k in cands}
with torch.no_grad():
  for f in cands.values():
    for _ in range(500): f()
  for r in range(15):
    for k,f in cands.items():
        t0=time.perf_counter()
        for _ in range(1000): f()
        res[k].append((time.perf_counter()-t0)*1e3)
for k,v in res.items(): print(f"{k:35s} {statistics.median(v):6.2f} us")
