"""Where a layer's forward+backward time goes: each fastpad op call of one forward and backward timed alone, with the
kernel path it takes. `python -m benchmarks.ops` from the repository root.

    python -m benchmarks.ops --device cuda --dtype bfloat16 --channels-last --batch 256 --layers 'stem|dw_k3s2'
    python -m benchmarks.ops --device cpu --random 100 --seed 2 --layers random061

The calls are recorded below autograd (fastpad.bench.op_calls) on fresh random inputs and replayed with the same
arguments, interleaved with the whole forward and forward+backward of the layer, medians (CUDA events on a GPU).
"""
import argparse
import sys

import torch

from fastpad._info import source_description
from fastpad._report import markdown_table
from fastpad.bench.layers import SUITE
from fastpad.bench.op_calls import RecordFastpadOps
from fastpad.bench.random_layers import random_layers
from fastpad.bench.runner import (FULL_EFFORT, QUICK_EFFORT, Settings, case_inputs, forward_backward_step, forward_step,
                                  layer_case, machine_description, median_times_interleaved, select_layers,
                                  with_optional_bias)

def op_rows(layer, settings: Settings):
    """[layer, step, kernel path, ms] for the layer's forward, forward+backward and each op call of them."""
    case = layer_case(layer, settings)
    inputs = case_inputs(case, settings.device)
    function = with_optional_bias(case.fastpad_function(), case)
    leaves = [t.detach().requires_grad_() for t in inputs]
    with RecordFastpadOps() as record:
        output = function(*leaves)
        output.backward(torch.randn_like(output))
    steps = {"forward": forward_step(function, inputs), "fwd+bwd": forward_backward_step(function, inputs)}
    paths = {"forward": "", "fwd+bwd": ""}
    for index, (op, args) in enumerate(record.calls):
        name = f"{index + 1}. {op}"
        steps[name] = lambda op=getattr(torch.ops.fastpad, op), args=args: op(*args)
        paths[name] = getattr(torch.ops.fastpad, f"_{op}_path")(*args, settings.device.type)
    medians, _ = median_times_interleaved(steps, settings.device, settings.effort)
    return [[layer.name, name, paths[name], f"{medians[name] * 1e3:.3f}"] for name in steps]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=["float32", "bfloat16", "float16", "float64"], default="float32")
    parser.add_argument("--batch", type=int, default=None, help="every layer's batch (default: each layer's own)")
    parser.add_argument("--channels-last", action="store_true")
    parser.add_argument("--layers", default=None, help="the bench's --layers pattern")
    parser.add_argument("--random", type=int, default=0, help="N random layers of --seed instead of the suite")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    settings = Settings(torch.device(args.device), getattr(torch, args.dtype), args.batch, args.channels_last,
                        QUICK_EFFORT if args.quick else FULL_EFFORT, peers="none")
    candidates = random_layers(args.random, args.seed) if args.random else SUITE
    layers = select_layers(candidates, args.layers)
    if not layers:
        parser.error(f"--layers {args.layers!r} matches no layer")
    rows = [row for layer in layers for row in op_rows(layer, settings)]
    print(f"machine: {machine_description(settings.device)}; torch {torch.__version__}; commit {source_description()}; "
          f"{args.dtype}; {'channels_last' if args.channels_last else 'contiguous'}; batch {args.batch or 'per layer'}")
    print(markdown_table(["layer", "step", "kernel path", "ms"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
