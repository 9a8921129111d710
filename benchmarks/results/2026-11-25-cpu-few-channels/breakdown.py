import sys, time, statistics, torch
import fastpad
from fastpad.bench.random_layers import random_layers
torch.set_num_threads(2)
ops = torch.ops.fastpad
P = lambda p: ops._conv_path(*p) if False else None
def med(fn, reps=None):
    fn()
    s = time.perf_counter(); fn(); one = time.perf_counter() - s
    reps = max(1, min(20, int(0.03 / max(one, 1e-6))))
    ts = []
    for _ in range(7):
        s = time.perf_counter()
        for _ in range(reps): fn()
        ts.append((time.perf_counter() - s) / reps)
    return statistics.median(ts) * 1e3
seed = int(sys.argv[1])
layers = {l.name: l for l in random_layers(100, seed)}
for n in sys.argv[2].split(","):
    case = layers[n].case
    x, w, b = case.random_inputs()
    if case.transposed:
        print(n, "transposed: skipped"); continue
    args = case.conv_op_arguments()
    stride, pad_lo, pad_hi, dil, groups, mode = args
    y = ops.conv(x, w, b, *args)
    gy = torch.randn_like(y)
    t_fwd = med(lambda: ops.conv(x, w, b, *args))
    t_gi = med(lambda: ops.conv_transpose(gy, w, None, stride, pad_lo, list(x.shape[2:]), dil, groups, mode))
    t_gw = med(lambda: ops.conv_weight_grad(x, gy, list(w.shape), stride, pad_lo, dil, groups, mode))
    p_gi = ops._conv_transpose_path(gy, w, None, stride, pad_lo, list(x.shape[2:]), dil, groups, mode, "cpu")
    p_f = ops._conv_path(x, w, b, *args, "cpu")
    ref = case.reference_function()
    xr, wr = x.detach().requires_grad_(), w.detach().requires_grad_()
    def torch_fb():
        out = ref(xr, wr, b); out.backward(gy)
    t_pc_f = med(lambda: ref(x, w, b))
    t_pc_fb = med(torch_fb)
    print(f"{n} {case.describe()}\n   fastpad fwd {t_fwd:.2f} ({p_f})  grad_in {t_gi:.2f} ({p_gi})  grad_w {t_gw:.2f}  sum {t_fwd+t_gi+t_gw:.2f} | pad+conv fwd {t_pc_f:.2f} fwd+bwd {t_pc_fb:.2f} -> bwd {t_pc_fb-t_pc_f:.2f}", flush=True)
