"""The bias gradient's sum over a channels-last grad: torch's sum over (batch, positions) against the sum over rows of
256 values (whole pixels) that autograd.cpp's reduce_over_positions takes (up to 64 channels, not powers of two), and
the sum of an NCHW copy's planes for scale. Interleaved, medians of 9 rounds of 5 calls; float32, 2 threads. Run from the
repository root: python benchmarks/results/2026-11-28-cpu-depthwise-multiplier/bias_sum.py"""
import statistics
import time

import torch

torch.set_num_threads(2)


def rows_of_pixels(grad, row_values=256):
    channels = grad.shape[1]
    pixels = grad.movedim(1, -1).reshape(-1, channels)
    per_row = row_values // channels
    whole = pixels.shape[0] // per_row * per_row
    sums = pixels[:whole].reshape(whole // per_row, per_row * channels).sum(0).view(per_row, channels).sum(0)
    return sums + pixels[whole:].sum(0) if whole < pixels.shape[0] else sums


SHAPES = [(6, 14, 189, 189), (8, 3, 224, 224), (4, 32, 112, 112)] + [(8, c, 56, 56) for c in (3, 5, 8, 12, 14, 16, 20,
                                                                                       24, 32, 40, 48, 56, 64, 72,
                                                                                       96, 128)]
for shape in SHAPES:
    grad = torch.randn(shape).contiguous(memory_format=torch.channels_last)
    nchw = grad.contiguous()
    calls = {"torch sum": lambda: grad.sum((0, 2, 3)), "rows of pixels": lambda: rows_of_pixels(grad),
             "NCHW copy's sum": lambda: nchw.sum((0, 2, 3))}
    times = {name: [] for name in calls}
    for _ in range(9):
        for name, call in calls.items():
            start = time.perf_counter()
            for _ in range(5):
                call()
            times[name].append((time.perf_counter() - start) / 5)
    ms = {name: statistics.median(t) * 1e3 for name, t in times.items()}
    error = (rows_of_pixels(grad).double() - grad.double().sum((0, 2, 3))).abs().max().item()
    print(f"{str(shape):20s} " + " ".join(f"{name} {v:.3f} ms" for name, v in ms.items()) +
          f" | torch / rows {ms['torch sum'] / ms['rows of pixels']:.2f} | max abs error of rows {error:.1e}")
