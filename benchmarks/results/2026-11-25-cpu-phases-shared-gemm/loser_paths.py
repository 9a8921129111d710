"""Losers (>1.05) of saved random-bench JSONs with the kernel paths of fwd, input grad and weight grad."""
import json, sys, torch, fastpad
from fastpad.bench.random_layers import random_layers
ops = torch.ops.fastpad
def paths(case):
    x, w, b = case.random_inputs()
    stride = list(case.per_dim(case.stride)); dil = list(case.per_dim(case.dilation))
    if case.transposed:
        crop_lo, out_size = case.crops()
        y = case.fastpad_function()(x, w, b)
        f = ops._conv_transpose_path(x, w, b, stride, crop_lo, out_size, dil, case.groups, "zeros", "cpu")
        # adjoint conv: input y-shaped grad -> x; conv with pads crop_lo
        pad_hi = [0]*len(stride)
        dx = ops._conv_path(y, w, None, stride, crop_lo, [ (xs-1)*s + (k-1)*d + 1 - c - o for xs,s,k,d,c,o in zip(x.shape[2:], stride, case.per_dim(case.kernel), dil, crop_lo, out_size)], dil, case.groups, "zeros", "cpu")
        dw = ops._conv_weight_grad_path(y, x, list(w.shape), stride, crop_lo, dil, case.groups, "zeros", "cpu")
    else:
        st, lo, hi, dl, g, mode = case.conv_op_arguments()
        f = ops._conv_path(x, w, b, st, lo, hi, dl, g, mode, "cpu")
        y = case.fastpad_function()(x, w, b)
        dx = ops._conv_transpose_path(y, w, None, st, lo, list(x.shape[2:]), dl, g, mode, "cpu")
        dw = ops._conv_weight_grad_path(x, y, list(w.shape), st, lo, dl, g, mode, "cpu")
    return f, dx, dw
for path in sys.argv[1:]:
    d = json.load(open(path))
    seed = int(path.split("seed")[1].split(".")[0])
    layers = {l.name: l for l in random_layers(100, seed)}
    for r in sorted(d["results"], key=lambda r: -r["ratio_to_pad_conv"]):
        if r["ratio_to_pad_conv"] <= 1.05: continue
        case = layers[r["layer"]].case
        f, dx, dw = paths(case)
        print(f"s{seed} {r['layer']} {r['mode']:8s} {r['ratio_to_pad_conv']:.2f} {r['fastpad_ms']:8.3f}ms  fwd={f} dx={dx} dw={dw}  {r['shape']}")
