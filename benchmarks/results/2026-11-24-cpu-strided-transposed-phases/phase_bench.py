# The strided conv_transpose: blocked stride phases (FASTPAD_CPU_ISA=avx2) against the previous kernels (baseline ISA:
# phase planes for NCHW, GEMM + col2im for channels_last), interleaved call by call in one process, medians.
# Run against an uncommitted patch that was then reverted (benchmarks/RESULTS.md); on main both settings run main's
# kernels. Usage: python phase_bench.py [rounds]
import os, statistics, sys, time, torch, fastpad
torch.set_num_threads(2)
ops = torch.ops.fastpad
CASES = {  # name: (x shape, weight shape, stride, crop_lo, out size)
    "resnet50 k3s2 c128 input grad": ((4, 128, 28, 28), (128, 128, 3, 3), 2, 0, 56),
    "unet convT k2s2 c512": ((2, 512, 32, 32), (512, 256, 2, 2), 2, 0, 64),
    "unet convT k4s2 c128": ((2, 128, 64, 64), (128, 64, 4, 4), 2, 1, 128),
    "hifigan convT1d k4s2 c128": ((16, 128, 2048), (128, 64, 4), 2, 1, 4096),
}
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 9
for layout in ("contiguous", "channels_last"):
    for name, (xs, ws, s, crop, out) in CASES.items():
        if layout == "channels_last" and len(xs) != 4:
            continue
        x = torch.randn(xs)
        if layout == "channels_last":
            x = x.contiguous(memory_format=torch.channels_last)
        w = torch.randn(ws)
        nd = len(xs) - 2
        args = ([s] * nd, [crop] * nd, [out] * nd, [1] * nd, 1, "zeros")
        paths, results, times = {}, {}, {"avx2": [], "baseline": []}
        for isa in ("avx2", "baseline"):
            os.environ["FASTPAD_CPU_ISA"] = isa
            paths[isa] = ops._conv_transpose_path(x, w, None, *args, "cpu")
            results[isa] = ops.conv_transpose(x, w, None, *args)
        for _ in range(rounds):
            for isa in ("avx2", "baseline"):
                os.environ["FASTPAD_CPU_ISA"] = isa
                t = time.perf_counter(); ops.conv_transpose(x, w, None, *args); times[isa].append(time.perf_counter() - t)
        err = ((results["avx2"] - results["baseline"]).norm() / results["baseline"].norm()).item()
        a, b = statistics.median(times["avx2"]), statistics.median(times["baseline"])
        print(f"{layout:13s} {name:28s} {paths['avx2']} {a*1e3:7.2f} ms | {paths['baseline']} {b*1e3:7.2f} ms | "
              f"ratio {a/b:.2f} | rel. diff {err:.1e}", flush=True)
os.environ.pop("FASTPAD_CPU_ISA")
