"""The same A/B (tap tiles after, AB_OLD=1 before) on NCHW stems in bfloat16 and float16: the 23-layer suite's stems
and stem-like shapes, the op alone, interleaved, medians of 7 rounds (each the best of enough calls for 20 ms).
Run from the repository root: python ab_stem_tap_tiles_dtypes.py"""
import os
import statistics
import time

import torch

import fastpad  # noqa: F401  (registers the ops)

torch.set_num_threads(2)
SHAPES = [  # (input shape, weight shape, stride, pad_lo, pad_hi)
    ((8, 3, 224, 224), (32, 3, 3, 3), 2, 0, 1), ((4, 3, 380, 380), (48, 3, 3, 3), 2, 0, 1),
    ((8, 3, 112, 112), (64, 3, 3, 3), 1, 0, 2), ((4, 5, 96, 96), (32, 5, 3, 3), 2, 0, 1),
    ((4, 4, 96, 96), (32, 4, 3, 3), 2, 0, 1), ((8, 2, 4096), (64, 2, 7), 1, 6, 0),
]


def timed(args, old):
    if old:
        os.environ["AB_OLD"] = "1"
    else:
        os.environ.pop("AB_OLD", None)
    start = time.perf_counter()
    torch.ops.fastpad.conv(*args)
    return time.perf_counter() - start


for dtype in (torch.bfloat16, torch.float16):
    for x_shape, w_shape, s, lo, hi in SHAPES:
        d = len(x_shape) - 2
        x, w = torch.randn(x_shape, dtype=dtype), torch.randn(w_shape, dtype=dtype)
        args = [x, w, None, [s] * d, [lo] * d, [hi] * d, [1] * d, 1, "zeros"]
        paths = []
        for old in (True, False):
            timed(args, old)
            paths.append(torch.ops.fastpad._conv_path(*args, "cpu"))
        with torch.no_grad():
            reps = max(1, int(0.02 / max(timed(args, False), 1e-6)))
            before, after = [], []
            for _ in range(7):
                after.append(min(timed(args, False) for _ in range(reps)))
                before.append(min(timed(args, True) for _ in range(reps)))
        a, b = statistics.median(after) * 1e3, statistics.median(before) * 1e3
        print(f"{str(dtype):15s} x {x_shape} w {w_shape} s{s} {paths[0]} -> {paths[1]:22s} after {a:.3f} ms "
              f"before {b:.3f} ms ratio {a / b:.2f}", flush=True)
os.environ.pop("AB_OLD", None)
