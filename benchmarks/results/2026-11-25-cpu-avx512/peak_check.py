import os, time, torch, fastpad
for isa in ("avx2", "avx512"):
    os.environ["FASTPAD_CPU_ISA"] = isa
    print(isa, [round(torch.ops.fastpad._cpu_fma_peak(0.5), 1) for _ in range(3)], "GFLOP/s")
os.environ.pop("FASTPAD_CPU_ISA")
a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
for _ in range(3): a @ b
best = 0
for _ in range(10):
    t = time.perf_counter(); a @ b; dt = time.perf_counter() - t
    best = max(best, 2 * 2048**3 / dt / 1e9)
print("torch sgemm 2048^3 best of 10:", round(best, 1), "GFLOP/s", torch.get_num_threads(), "threads")
