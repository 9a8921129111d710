import sys, torch, time, statistics
from fastpad.bench.random_layers import random_layers
from fastpad.bench.runner import case_inputs, with_optional_bias
torch.set_num_threads(2)
seed, name = int(sys.argv[1]), sys.argv[2]
layer = [l for l in random_layers(100, seed) if l.name == name][0]
case = layer.case
inputs = case_inputs(case, torch.device("cpu"))
fp = with_optional_bias(case.fastpad_function(), case); tr = with_optional_bias(case.reference_function(), case)
lr = [t.detach().requires_grad_() for t in inputs]
lr_nchw_w = [t.detach().requires_grad_() for t in inputs]
lr_nchw_w[1] = inputs[1].detach().contiguous().requires_grad_()
print("weight strides", lr[1].stride(), lr_nchw_w[1].stride())
def t(fn, n=20):
    ts = []
    for _ in range(n):
        a = time.perf_counter(); fn(); ts.append(time.perf_counter() - a)
    return statistics.median(ts) * 1e3
def fb(f, leaves):
    def step():
        for x in leaves: x.grad = None
        o = f(*leaves); o.backward(torch.ones_like(o))
    return step
variants = {"fastpad cl weight": fb(fp, lr), "fastpad nchw weight": fb(fp, lr_nchw_w), "torch cl weight": fb(tr, lr)}
res = {k: [] for k in variants}
for r in range(7):
    for k, v in variants.items(): res[k].append(t(v))
for k, v in res.items(): print(f"{k:22s} {statistics.median(v):.3f}", ["%.2f" % x for x in v])
o = fp(*lr); o.backward(torch.ones_like(o)); print("grad strides", lr[1].grad.stride())
