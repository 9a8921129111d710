"""The calls of fastpad's three ops under autograd, recorded with their arguments: which kernel path each takes
(torch.ops.fastpad._<op>_path) and how long each takes alone (benchmarks/ops.py)."""
from torch.utils._python_dispatch import TorchDispatchMode


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
