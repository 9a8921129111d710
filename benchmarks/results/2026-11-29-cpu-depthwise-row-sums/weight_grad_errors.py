"""Relative error (norm) of fastpad's float32 weight gradient and of torch's, against the float64 reference, on
reductions of 120 000-214 000 products per value, with the path each takes. Run: python weight_grad_errors.py"""
import torch, fastpad
torch.set_num_threads(2)
rel = lambda a, b: ((a.double() - b).norm() / b.norm()).item()
cases = [  # (batch, cin, cout, size, k, groups, layout)
    (6, 7, 14, 189, 1, 7, "nchw"), (6, 7, 14, 189, 3, 7, "nchw"), (6, 8, 8, 189, 3, 8, "nchw"),
    (6, 3, 8, 189, 3, 1, "cl"), (6, 3, 8, 189, 3, 1, "nchw"), (6, 16, 16, 160, 3, 1, "cl"), (6, 16, 16, 160, 3, 1, "nchw"),
    (6, 16, 16, 160, 3, 4, "cl"), (6, 16, 16, 160, 3, 4, "nchw"), (6, 16, 32, 160, 1, 16, "cl")]
for b, ci, co, s, k, g, lay in cases:
    x = torch.randn(b, ci, s, s); w = torch.randn(co, ci // g, k, k)
    gy = torch.randn(b, co, s - k + 1, s - k + 1)
    if lay == "cl":
        x = x.contiguous(memory_format=torch.channels_last); gy = gy.contiguous(memory_format=torch.channels_last)
    args = (list(w.shape), [1, 1], [0, 0], [1, 1], g, "zeros")
    path = torch.ops.fastpad._conv_weight_grad_path(x, gy, *args, "cpu")
    ours = torch.ops.fastpad.conv_weight_grad(x, gy, *args)
    w64 = w.double().requires_grad_()
    (ref,) = torch.autograd.grad(torch.nn.functional.conv2d(x.double(), w64, groups=g), w64, gy.double())
    w32 = w.clone().requires_grad_()
    (tw,) = torch.autograd.grad(torch.nn.functional.conv2d(x, w32, groups=g), w32, gy)
    print(f"{b}x{ci}->{co} {s}^2 k{k} g{g} {lay:4s} {path:34s} fastpad {rel(ours.view_as(ref), ref):.1e} torch {rel(tw, ref):.1e}")
