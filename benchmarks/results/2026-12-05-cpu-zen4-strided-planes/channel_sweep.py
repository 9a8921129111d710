import torch, fastpad, torch.nn.functional as F, sys
from fastpad.bench.runner import median_times_interleaved, FULL_EFFORT, QUICK_EFFORT
torch.set_num_threads(2)
k=int(sys.argv[1]); S=int(sys.argv[2]); N=int(sys.argv[3]); st=int(sys.argv[4])
for C in [3,4,7,8,9,12,16,24]:
    x=torch.randn(N,C,S,S); w=torch.randn(C,1,k,k)
    xc=x.contiguous(memory_format=torch.channels_last); wc=w.contiguous(memory_format=torch.channels_last)
    p=lambda x,w: fastpad.conv2d(x,w,padding='same',groups=C,stride=st)
    steps={'CL':lambda: p(xc,wc),'NCHW':lambda: p(x,w), 'CL-via-NCHW': lambda: p(xc.contiguous(),w).contiguous(memory_format=torch.channels_last), 'torchCL': lambda: F.conv2d(xc,wc,padding=k//2,groups=C,stride=st)}
    with torch.no_grad(): med,_=median_times_interleaved(steps, torch.device('cpu'), QUICK_EFFORT)
    print(C, ' '.join(f'{k_}={v*1e3:.3f}' for k_,v in med.items()), flush=True)
