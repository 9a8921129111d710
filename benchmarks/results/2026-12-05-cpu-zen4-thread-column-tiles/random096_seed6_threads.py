import torch, fastpad, time, statistics
torch.manual_seed(0)
x=torch.randn(1,162,597); w=torch.randn(37,162,4)
f=lambda: fastpad.conv1d(x,w,padding='valid',padding_mode='circular')
for th in (1,2,1,2):
    torch.set_num_threads(th)
    with torch.no_grad():
        for _ in range(20): f()
        ts=[]
        for _ in range(9):
            t=time.perf_counter()
            for _ in range(20): f()
            ts.append((time.perf_counter()-t)/20)
    print(th, f"{statistics.median(ts)*1e3:.3f} ms")
