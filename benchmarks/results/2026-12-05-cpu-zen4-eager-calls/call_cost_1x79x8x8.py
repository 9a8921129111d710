import torch, time, statistics, torch.nn.functional as F, fastpad
torch.set_num_threads(1)
x = torch.randn(1,79,8,8).contiguous(memory_format=torch.channels_last)
w = torch.randn(51,79,1,1).contiguous(memory_format=torch.channels_last)
op = torch.ops.fastpad.conv.default
path = torch.ops.fastpad._conv_path.default
def below():
    with torch._C._AutoDispatchBelowAutograd():
        return op(x, w, None, [3,3], [0,0],[0,0],[1,1],1,"zeros")
def guard_only():
    with torch._C._AutoDispatchBelowAutograd():
        return None
fns = {"op": lambda: op(x, w, None, [3,3], [0,0],[0,0],[1,1],1,"zeros"),
       "op below autograd": below, "guard only": guard_only,
       "path": lambda: path(x, w, None, [3,3], [0,0],[0,0],[1,1],1,"zeros","cpu"),
       "conv": lambda: F.conv2d(x, w, None, 3),
       "empty_like out": lambda: torch.empty((1,51,3,3)).contiguous(memory_format=torch.channels_last)}
res={}
with torch.no_grad():
  for r in range(15):
    for name,g in fns.items():
        g()
        t=time.perf_counter()
        for i in range(1000): g()
        res.setdefault(name,[]).append((time.perf_counter()-t)/1000*1e6)
for k,v in res.items(): print(f"{k:20s} {statistics.median(v):.2f}")
d = fastpad._C.conv
fns2 = {"op": lambda: op(x, w, None, [3,3], [0,0],[0,0],[1,1],1,"zeros"),
        "direct": lambda: d(x, w, None, [3,3], [0,0],[0,0],[1,1],1,"zeros"),
        "fastpad.conv2d": lambda: fastpad.conv2d(x, w, None, 3, ((0,0),(0,0))),
        "conv": lambda: F.conv2d(x, w, None, 3),
        "pad+conv": lambda: F.conv2d(F.pad(x,(0,0,0,0)), w, None, 3)}
for th in (1,2):
  torch.set_num_threads(th)
  res={}
  with torch.no_grad():
    for r in range(15):
      for name,g in fns2.items():
        g()
        t=time.perf_counter()
        for i in range(1000): g()
        res.setdefault(name,[]).append((time.perf_counter()-t)/1000*1e6)
  print("threads", th)
  for k,v in res.items(): print(f"  {k:20s} {statistics.median(v):.2f}")
