"""A/B of the channels-last depthwise tiles (7557cb1): FP_OLD_DW=1 selected the per-pixel loop in a temporary build.
11 rounds, each the median of 5 calls (ab_toggle.py)."""
import torch
import fastpad  # noqa: F401  (registers torch.ops.fastpad)
from ab_toggle import old_and_new_ms

ops = torch.ops.fastpad
# (name, input shape, kernel, stride, dilation, mode)
cases = [("random076", (10, 19, 53, 53), 6, 1, 2, "replicate"), ("c32_k3s2_112", (8, 32, 112, 112), 3, 2, 1, "zeros"),
         ("c24_k5s1_56", (8, 24, 56, 56), 5, 1, 1, "zeros"), ("c16_k3s1_28", (16, 16, 28, 28), 3, 1, 1, "reflect"),
         ("c8_k7s2_64", (4, 8, 64, 64), 7, 2, 1, "zeros"), ("c30_k3s1_190", (4, 30, 190, 190), 3, 1, 1, "zeros"),
         ("c12_k5s2_95", (4, 12, 95, 95), 5, 2, 1, "circular"),
         ("c64_k3s2_112 (control)", (8, 64, 112, 112), 3, 2, 1, "zeros")]
for name, shape, k, s, d, mode in cases:
    channels = shape[1]
    x = torch.randn(shape).contiguous(memory_format=torch.channels_last)
    w = torch.randn(channels, 1, k, k)
    total = d * (k - 1)
    args = (None, [s, s], [total // 2] * 2, [total - total // 2] * 2, [d, d], channels, mode)
    with torch.no_grad():
        old, new = old_and_new_ms(lambda: ops.conv(x, w, *args), "FP_OLD_DW", rounds=11, calls=5)
    print(f"{name:24s} {str(shape):20s} k{k} s{s} d{d} {mode:9s} old {old:7.3f} ms new {new:7.3f} ms "
          f"new/old {new / old:.2f}", flush=True)
