import torch, time, statistics, fastpad
import torch.nn.functional as F
from fastpad.bench.random_layers import random_layers
from fastpad.bench.runner import case_inputs, with_optional_bias
from fastpad.bench.op_calls import RecordFastpadOps
import os; torch.set_num_threads(int(os.environ.get("T","2")))
layer = [l for l in random_layers(100, 6) if l.name == "random058"][0]
case = layer.case
x, w, *rest = case_inputs(case, torch.device("cpu"))
f = with_optional_bias(case.fastpad_function(), case)
ref = with_optional_bias(case.reference_function(), case)
inputs = case_inputs(case, torch.device("cpu"))
with RecordFastpadOps() as rec:
    f(*inputs)
op, args = rec.calls[0]
print(op, [a.shape if torch.is_tensor(a) else a for a in args])
opf = getattr(torch.ops.fastpad, op)
steps = {"fastpad": lambda: f(*inputs), "op": lambda: opf(*args), "ref": lambda: ref(*inputs),
         "conv2d only": lambda: F.conv2d(x, w, stride=3), "empty": lambda: torch.empty_like(x)}
with torch.no_grad():
    for _ in range(200):
        for s in steps.values(): s()
    res = {k: [] for k in steps}
    for _ in range(2000):
        for k, s in steps.items():
            t = time.perf_counter(); s(); res[k].append(time.perf_counter() - t)
for k, v in res.items(): print(f"{k:12s} {statistics.median(v)*1e6:7.1f} us")
