"""The GPU's two ceilings, measured as the roofline needs them: device-to-device copy bandwidth (bytes read plus
bytes written) and the bf16 matrix-product rate, on random data, CUDA events, medians after warm-up.

    python3 scripts/gpu_ceilings.py
"""
import statistics

import torch


def median_ms(fn, repeats):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times), min(times), max(times)


def main():
    print(torch.cuda.get_device_name(0), "| torch", torch.__version__)
    source = torch.randint(0, 255, (1 << 31,), dtype=torch.uint8, device="cuda")
    target = torch.empty_like(source)
    ms, low, high = median_ms(lambda: target.copy_(source), 30)
    moved = 2 * source.numel()
    print(f"copy of 2 GiB: median {ms:.3f} ms (min {low:.3f}, max {high:.3f}), {moved / ms / 1e9:.2f} TB/s read+written")
    del source, target
    size = 8192
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    ms, low, high = median_ms(lambda: a @ b, 20)
    print(f"bf16 {size}^3 matmul: median {ms:.3f} ms (min {low:.3f}, max {high:.3f}), "
          f"{2 * size**3 / ms / 1e9:.0f} TFLOP/s")
    a, b = a.float(), b.float()
    for tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        ms, _, _ = median_ms(lambda: a @ b, 10)
        print(f"fp32 {size}^3 matmul (allow_tf32={tf32}): median {ms:.3f} ms, {2 * size**3 / ms / 1e9:.0f} TFLOP/s")


if __name__ == "__main__":
    main()
