import torch, time, statistics
import torch.nn.functional as F
import fastpad
ops = torch.ops.fastpad
torch.manual_seed(0)
def bench(fns, rounds=15, reps=3):
    times = {k: [] for k in fns}
    for f in fns.values(): f()
    for _ in range(rounds):
        for k, f in fns.items():
            for _ in range(reps):
                s = time.perf_counter(); f(); times[k].append(time.perf_counter() - s)
    return {k: statistics.median(v) * 1e3 for k, v in times.items()}
# HiFi-GAN k4 s2: x 16x128x2048 -> y 16x64x4096, crop (1, 1)
x = torch.randn(16, 128, 2048); w = torch.randn(128, 64, 4); gy = torch.randn(16, 64, 4096)
print("convT fwd", bench({"fastpad": lambda: ops.conv_transpose(x, w, None, [2], [1], [4096], [1], 1, "zeros"),
                          "torch": lambda: F.conv_transpose1d(x, w, None, 2, 1)}))
print("input grad (conv of gy)", bench({"fastpad": lambda: ops.conv(gy, w, None, [2], [1], [1], [1], 1, "zeros"),
                          "torch": lambda: F.conv1d(gy, w, None, 2, 1)}))
print("weight grad", bench({"fastpad": lambda: ops.conv_weight_grad(gy, x, [128, 64, 4], [2], [1], [1], 1, "zeros"),
                          "torch": lambda: torch.ops.aten.convolution_backward(x, gy, w, None, [2], [1], [1], False, [0], 1, [False, True, False])}))
# HiFi-GAN k16 s8: x 16x512x32 -> y 16x256x256, crop (4, 4)
x = torch.randn(16, 512, 32); w = torch.randn(512, 256, 16); gy = torch.randn(16, 256, 256)
print("k16s8 convT fwd", bench({"fastpad": lambda: ops.conv_transpose(x, w, None, [8], [4], [256], [1], 1, "zeros"),
                          "torch": lambda: F.conv_transpose1d(x, w, None, 8, 4)}))
print("k16s8 input grad", bench({"fastpad": lambda: ops.conv(gy, w, None, [8], [4], [4], [1], 1, "zeros"),
                          "torch": lambda: F.conv1d(gy, w, None, 8, 4)}))
print("k16s8 weight grad", bench({"fastpad": lambda: ops.conv_weight_grad(gy, x, [512, 256, 16], [8], [4], [1], 1, "zeros"),
                          "torch": lambda: torch.ops.aten.convolution_backward(x, gy, w, None, [8], [4], [1], False, [0], 1, [False, True, False])}))
# resnet dense k3s1 c64 56x56 batch 4
x = torch.randn(4, 64, 56, 56); w = torch.randn(64, 64, 3, 3)
print("dense k3s1 conv", bench({"fastpad": lambda: ops.conv(x, w, None, [1, 1], [1, 1], [1, 1], [1, 1], 1, "zeros"),
                          "torch": lambda: F.conv2d(x, w, None, 1, 1)}))
print("dense k3s1 convT (input grad)", bench({"fastpad": lambda: ops.conv_transpose(x, w, None, [1, 1], [1, 1], [56, 56], [1, 1], 1, "zeros"),
                          "torch": lambda: F.conv_transpose2d(x, w, None, 1, 1)}))
print("dense k3s1 weight grad", bench({"fastpad": lambda: ops.conv_weight_grad(x, x, [64, 64, 3, 3], [1, 1], [1, 1], [1, 1], 1, "zeros"),
                          "torch": lambda: torch.ops.aten.convolution_backward(x, x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [False, True, False])}))
