import torch, time, sys
import fastpad
torch.set_num_threads(int(sys.argv[2]) if len(sys.argv)>2 else 2)
torch.manual_seed(0)
x = torch.randn(1,298,20,20).to(memory_format=torch.channels_last)
gy = torch.randn(1,48,20,20).to(memory_format=torch.channels_last)
ops = torch.ops.fastpad
f = lambda: ops.conv_weight_grad(x, gy, [48,298,5,5], [1,1], [2,2], [1,1], 1, 'replicate')
for _ in range(20): f()
t0=time.time(); n=0
while time.time()-t0 < float(sys.argv[1]):
    f(); n+=1
print((time.time()-t0)/n*1e3, "ms")
