# The CUDA kernel paths of each suite layer (bfloat16, channels_last, batch 2), asked on the CPU of the private path
# ops with the arguments each fastpad op call of a forward and backward received. The table in RESULTS.md is its output
# at e395e65, the code the H100 ran; later commits change some paths. Run from the repository root:
#   PYTHONPATH=tests python benchmarks/results/2026-11-27-h100/cuda_paths.py
import torch
from fastpad.bench.op_calls import RecordFastpadOps
from fastpad.bench.layers import SUITE
from fastpad.bench.runner import layer_case, case_inputs, Settings, QUICK_EFFORT
torch.backends.cudnn.allow_tf32 = True
settings = Settings(torch.device("cpu"), torch.bfloat16, 2, True, QUICK_EFFORT, peers="none")
for layer in SUITE:
    case = layer_case(layer, settings)
    inputs = [t.requires_grad_() for t in case_inputs(case, torch.device("cpu"))]
    with RecordFastpadOps() as record:
        fn = case.fastpad_function()
        y = fn(*inputs) if case.bias else fn(*inputs, None)
        y.backward(torch.randn_like(y))
    paths = sorted({f"{op}:{getattr(torch.ops.fastpad, f'_{op}_path')(*args, 'cuda')}" for op, args in record.calls})
    print(f"| {layer.name} | {', '.join(paths)} |")
