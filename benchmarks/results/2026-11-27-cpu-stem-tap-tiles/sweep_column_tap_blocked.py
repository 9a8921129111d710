"""NCHW stems (one group, under 16 input channels): the column GEMM, the tap tiles and the blocked kernel on the same
call, interleaved, medians of 7 rounds (best of 3 each). Needs a temporary override of the path (AB_PATH), which is
not in the tree: kept as the record of sweep_column_tap_blocked.log."""
import os, sys, time, statistics, itertools, json
import torch, fastpad
import torch.nn.functional as F
torch.set_num_threads(2)
def t(f, reps=3):
    best = 1e9
    for _ in range(reps):
        s = time.perf_counter(); f(); best = min(best, time.perf_counter() - s)
    return best * 1e3
def run(x, w, stride, padding, label):
    conv = fastpad.conv2d if x.dim() == 4 else fastpad.conv1d
    op = lambda: conv(x, w, stride=stride, padding=padding)
    outs, res = {}, {p: [] for p in ("column", "tap", "blocked")}
    for p in res:
        os.environ["AB_PATH"] = p; outs[p] = op()
    torch.testing.assert_close(outs["tap"], outs["column"], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(outs["blocked"], outs["column"], rtol=1e-4, atol=1e-4)
    for _ in range(7):
        for p in res:
            os.environ["AB_PATH"] = p; res[p].append(t(op))
    m = {p: statistics.median(v) for p, v in res.items()}
    print(f"{label:42s} column {m['column']:7.3f} tap {m['tap']:7.3f} ({m['tap']/m['column']:.2f}) "
          f"blocked {m['blocked']:7.3f} ({m['blocked']/m['column']:.2f})", flush=True)
    return m
shapes = [
    # (batch, c_in, size, c_out, k, s)
    (8, 3, 224, 32, 3, 2), (4, 3, 380, 48, 3, 2), (8, 3, 224, 16, 3, 1), (8, 3, 112, 64, 3, 1),
    (8, 3, 224, 24, 5, 2), (4, 1, 128, 32, 3, 1), (4, 4, 96, 32, 3, 2), (4, 8, 56, 64, 3, 1),
    (4, 3, 64, 16, 3, 2), (2, 2, 64, 48, 4, 2), (16, 3, 32, 64, 3, 1), (8, 4, 28, 32, 3, 2),
]
for n, c, size, co, k, s in shapes:
    x = torch.randn(n, c, size, size); w = torch.randn(co, c, k, k)
    run(x, w, s, "same", f"{n}x{c}x{size}^2->{co} k{k} s{s}")
cases = [
    ("8x3x224^2->64 k7 s2 (resnet stem, red 147)", torch.randn(8, 3, 224, 224), torch.randn(64, 3, 7, 7), 2),
    ("8x8x56^2->32 k4 s1 (red 128)", torch.randn(8, 8, 56, 56), torch.randn(32, 8, 4, 4), 1),
    ("8x12x28^2->32 k3 s1 (red 108)", torch.randn(8, 12, 28, 28), torch.randn(32, 12, 3, 3), 1),
    ("8x3x14^2->32 k3 s1 (14 cols)", torch.randn(8, 3, 14, 14), torch.randn(32, 3, 3, 3), 1),
    ("8x3x14^2->32 k3 s2 (7 cols)", torch.randn(8, 3, 14, 14), torch.randn(32, 3, 3, 3), 2),
    ("32x3x8^2->32 k3 s1 (8 cols)", torch.randn(32, 3, 8, 8), torch.randn(32, 3, 3, 3), 1),
    ("4x3x224^2->128 k3 s2", torch.randn(4, 3, 224, 224), torch.randn(128, 3, 3, 3), 2),
    ("4x2x56^2->256 k3 s1", torch.randn(4, 2, 56, 56), torch.randn(256, 2, 3, 3), 1),
    ("1-d 8x1x16000->32 k9 s4", torch.randn(8, 1, 16000), torch.randn(32, 1, 9), 4),
    ("1-d 8x2x4096->64 k7 s1", torch.randn(8, 2, 4096), torch.randn(64, 2, 7), 1),
    ("1-d 4x4x1000->16 k3 s2", torch.randn(4, 4, 1000), torch.randn(16, 4, 3), 2),
]
for label, x, w, s in cases:
    run(x, w, s, "same", label)
