"""Each fastpad op call of a suite layer (channels-last with CL=1) timed alone, interleaved with torch's convolution
and its two backward pieces on the padded input (F.pad + conv's), medians (fastpad.bench.runner's FULL_EFFORT).
Usage: [CL=1] python suite_layer_ops.py LAYER"""
import os
import sys
from dataclasses import replace

import torch

from fastpad.bench.layers import SUITE
from fastpad.bench.op_calls import case_op_calls
from fastpad.bench.runner import FULL_EFFORT, case_inputs, median_times_interleaved, with_optional_bias

torch.set_num_threads(2)
case = next(layer for layer in SUITE if layer.name == sys.argv[1]).case
if os.environ.get("CL"):
    case = replace(case, layout="channels_last")
_, _, calls = case_op_calls(case)
steps = {}
for i, (op, args) in enumerate(calls):
    path = getattr(torch.ops.fastpad, f"_{op}_path")(*args, "cpu")
    steps[f"{i + 1}.{op} {path}"] = (lambda op=getattr(torch.ops.fastpad, op), args=args: op(*args))
captured = {}


class Capture(torch.utils._python_dispatch.TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in (torch.ops.aten.convolution.default, torch.ops.aten.convolution_backward.default):
            captured[func] = args
        return func(*args, **(kwargs or {}))


leaves = [t.detach().requires_grad_() for t in case_inputs(case, torch.device("cpu"))]
with Capture():
    out = with_optional_bias(case.reference_function(), case)(*leaves)
    out.backward(torch.ones_like(out))
forward_args = captured[torch.ops.aten.convolution.default]
steps["torch conv (padded x)"] = lambda: torch.ops.aten.convolution(*forward_args)
backward_args = list(captured[torch.ops.aten.convolution_backward.default])
for name, mask in (("input grad", [True, False, False]), ("weight grad", [False, True, False])):
    steps[f"torch {name}"] = (lambda b=backward_args[:-1] + [mask]: torch.ops.aten.convolution_backward(*b))
medians, _ = median_times_interleaved(steps, torch.device("cpu"), FULL_EFFORT)
print(sys.argv[1], "channels_last" if os.environ.get("CL") else "NCHW")
for name, seconds in medians.items():
    print(f"  {name:60s} {seconds * 1e3:8.3f} ms")
