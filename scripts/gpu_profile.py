"""One forward and backward of each named suite layer inside a CUDA profiler range, for Nsight Compute
(`ncu --profile-from-start off`): scripts/gpu_profile.sh runs it. Each layer is warmed up (one forward+backward)
outside the range, so that ncu sees exactly the kernels of one step, fastpad's and autograd's alike.

    python3 scripts/gpu_profile.py --layers 'resnet50.dense_k3s1_c64|tf_efficientnet_b0.stem_k3s2' --batch 256
"""
import argparse
import sys

import torch

from fastpad.bench.layers import SUITE
from fastpad.bench.runner import (QUICK_EFFORT, Settings, case_inputs, layer_case, select_layers,
                                  with_optional_bias)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", required=True, help="the bench's --layers pattern")
    parser.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="bfloat16")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--contiguous", action="store_true", help="NCHW inputs instead of channels_last")
    parser.add_argument("--forward-only", action="store_true")
    args = parser.parse_args(argv)
    settings = Settings(torch.device("cuda"), getattr(torch, args.dtype), args.batch, not args.contiguous,
                        QUICK_EFFORT, peers="none")
    layers = select_layers(SUITE, args.layers)
    if not layers:
        parser.error(f"--layers {args.layers!r} matches no layer")
    cudart = torch.cuda.cudart()
    for layer in layers:
        case = layer_case(layer, settings)
        function = with_optional_bias(case.fastpad_function(), case)
        leaves = [t.detach().requires_grad_() for t in case_inputs(case, settings.device)]

        def step():
            output = function(*leaves)
            if not args.forward_only:
                output.backward(grad)

        grad = torch.randn_like(function(*leaves))
        step()
        torch.cuda.synchronize()
        print(f"profiling {layer.name}", flush=True)
        cudart.cudaProfilerStart()
        step()
        torch.cuda.synchronize()
        cudart.cudaProfilerStop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
