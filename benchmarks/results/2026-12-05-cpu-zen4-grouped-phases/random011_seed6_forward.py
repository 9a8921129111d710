import torch, fastpad, time, sys
import torch.nn.functional as F
torch.set_num_threads(2)
x=torch.randn(1,30,179,179).contiguous(memory_format=torch.channels_last); w=torch.randn(30,1,5,5)
fp=lambda: fastpad.conv2d(x,w,padding='same',groups=30,padding_mode='replicate')
tp=lambda: F.conv2d(F.pad(x,(2,2,2,2),mode='replicate'),w,groups=30)
tf=lambda: F.conv2d(x,w,padding=2,groups=30)
fs={'fastpad':fp,'torch pad+conv':tp,'torch conv (zeros floor)':tf}
if len(sys.argv)>1:
    f=fs[sys.argv[1]]
    with torch.no_grad():
        for _ in range(3000): f()
    sys.exit()
from fastpad.bench.runner import median_times_interleaved, FULL_EFFORT
with torch.no_grad(): med,_=median_times_interleaved(fs, torch.device('cpu'), FULL_EFFORT)
for k,v in med.items(): print(f'{k:28s} {v*1e3:.3f} ms')
