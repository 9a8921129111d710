"""Per op of a random layer: fastpad's op alone against torch's piece on the padded input (F.pad + conv's pieces)."""
import sys, torch, torch.nn.functional as F
from fastpad.bench.random_layers import random_layers
from fastpad.bench.runner import case_inputs, with_optional_bias, median_times_interleaved, FULL_EFFORT
from fastpad.bench.op_calls import RecordFastpadOps
torch.set_num_threads(2)
seed, names = int(sys.argv[1]), sys.argv[2].split(",")
for layer in random_layers(100, seed):
    if layer.name not in names: continue
    case = layer.case
    inputs = case_inputs(case, torch.device("cpu"))
    f = with_optional_bias(case.fastpad_function(), case)
    ref = with_optional_bias(case.reference_function(), case)
    leaves = [t.detach().requires_grad_() for t in inputs]
    with RecordFastpadOps() as rec:
        out = f(*leaves); out.backward(torch.randn_like(out))
    steps = {}
    for i, (op, args) in enumerate(rec.calls):
        path = getattr(torch.ops.fastpad, f"_{op}_path")(*args, "cpu")
        steps[f"{i+1}.{op} {path}"] = (lambda op=getattr(torch.ops.fastpad, op), args=args: op(*args))
    # torch pieces: record aten calls of the reference via the fwd and the two backward parts
    x = inputs[0]
    lr = [t.detach().requires_grad_() for t in inputs]
    def ref_fwd(): 
        with torch.no_grad(): ref(*inputs)
    def ref_fb():
        o = ref(*lr); o.backward(torch.ones_like(o))
    steps["torch fwd (pad+conv)"] = ref_fwd
    steps["torch fwd+bwd"] = ref_fb
    def fp_fwd():
        with torch.no_grad(): f(*inputs)
    steps["fastpad fwd"] = fp_fwd
    def fp_fb():
        o = f(*lr); o.backward(torch.ones_like(o))
    steps["fastpad fwd+bwd"] = fp_fb
    # torch's own backward pieces on the padded input (aten.convolution_backward, one gradient each)
    cap = {}
    class Grab(torch.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten.convolution_backward.default: cap["bw"] = (args, kwargs or {})
            return func(*args, **(kwargs or {}))
    with Grab():
        o = ref(*lr); o.backward(torch.ones_like(o))
    if "bw" in cap:
        a, kw = cap["bw"]
        a = list(a)
        for name, mask in (("input grad", [True, False, False]), ("weight grad", [False, True, False])):
            b = a[:-1] + [mask]
            steps[f"torch {name}"] = (lambda b=b: torch.ops.aten.convolution_backward(*b))
    med, _ = median_times_interleaved(steps, torch.device("cpu"), FULL_EFFORT)
    print(layer.name, case.describe() if hasattr(case, "describe") else case)
    for k, v in med.items(): print(f"  {k:60s} {v*1e3:8.3f} ms")
