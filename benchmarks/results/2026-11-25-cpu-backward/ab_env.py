"""A/B of the phase-plane gather (4b7d5cf): FP_OLD_GATHER=1 selected the per-pixel copy in a temporary build.
Channels-last forward convs, 15 rounds, each the median of 7 calls (ab_toggle.py)."""
import torch
import fastpad  # noqa: F401  (registers torch.ops.fastpad)
from ab_toggle import old_and_new_ms

ops = torch.ops.fastpad
# name: (input shape, weight shape, stride)
cases = {"b0stem": ((8, 3, 224, 224), (32, 3, 3, 3), 2), "b4stem": ((4, 3, 380, 380), (48, 3, 3, 3), 2),
         "r50stem": ((4, 3, 224, 224), (64, 3, 7, 7), 2), "g4c2": ((6, 8, 26, 26), (52, 2, 3, 3), 1),
         "dw_x4_k1x3": ((24, 86, 12, 10), (344, 1, 1, 3), 1), "c4": ((9, 4, 44, 172), (39, 4, 3, 2), 1)}
for name, (xs, ws, s) in cases.items():
    x = torch.randn(xs).contiguous(memory_format=torch.channels_last)
    w = torch.randn(ws)
    args = (None, [s, s], [ws[2] // 2, ws[3] // 2], [(ws[2] - 1) // 2, (ws[3] - 1) // 2], [1, 1], xs[1] // ws[1], "zeros")
    with torch.no_grad():
        old, new = old_and_new_ms(lambda: ops.conv(x, w, *args), "FP_OLD_GATHER", rounds=15, calls=7)
    print(f"{name:12s} old {old:.3f} new {new:.3f} new/old {new / old:.3f}  path {ops._conv_path(x, w, *args, 'cpu')}",
          flush=True)
