"""The calls of fastpad's three ops under autograd, recorded with their arguments: which kernel path each takes
(torch.ops.fastpad._<op>_path) and how long each takes alone (benchmarks/ops.py)."""
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from fastpad.bench.random_layers import random_layers
from fastpad.bench.runner import case_inputs, with_optional_bias


class RecordFastpadOps(TorchDispatchMode):
    """Records every call of fastpad's three ops below autograd: (name, every argument, defaults filled in)."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.namespace == "fastpad":
            rest = func._schema.arguments[len(args):]
            self.calls.append((func._opname, (*args, *(kwargs.get(a.name, a.default_value) for a in rest))))
        return func(*args, **kwargs)


def random_layer_op_calls(seed, name, backward=True):
    """Random layer `name` of `seed` (100 layers, fastpad.bench.random_layers) on CPU: case_op_calls of its case."""
    layer = next(layer for layer in random_layers(100, seed) if layer.name == name)
    return case_op_calls(layer.case, backward)


def case_op_calls(case, backward=True):
    """A ConvCase on CPU: its fastpad function (with its bias argument where it has one), its inputs as fresh leaves
    that require grad, and the op calls its forward makes (and, with `backward`, its backward of random gradients),
    each (op name, arguments)."""
    function = with_optional_bias(case.fastpad_function(), case)
    leaves = [t.detach().requires_grad_() for t in case_inputs(case, torch.device("cpu"))]
    with RecordFastpadOps() as record:
        out = function(*leaves)
        if backward:
            out.backward(torch.randn_like(out))
    for leaf in leaves:
        leaf.grad = None
    return function, leaves, record.calls
