"""Whole timm tf_* models before and after `fastpad.convert`: `python -m benchmarks.models` from the repository root.

For each model it times the original (timm's Conv2dSame: F.pad + conv) and the converted model on the same input,
interleaved, and prints the medians and their ratio as a markdown table, for inference (eval, no_grad) and for a
training step (train mode, forward + backward). With --per-layer it times each replaced layer alone instead. timm is needed (`pip install --no-deps timm`); where torchvision
is missing, the test suite's stand-in satisfies timm's imports (the tf_* models never call torchvision).

On a GPU: `python -m benchmarks.models --device cuda --amp-bf16 --channels-last --batch 256 --models tf_efficientnet_b0
efficientnet_b0` (efficientnet_b0 has the same FLOPs with symmetric pads: convert replaces nothing in it, so its two
columns time the same model and say what the converted tf_ model should reach).
"""
import contextlib
import argparse
import importlib.util
import sys
from pathlib import Path

import torch

import fastpad
from fastpad._info import source_description
from fastpad._report import markdown_table
from fastpad.bench.runner import FULL_EFFORT, Effort, machine_description, median_times_interleaved

REPO_ROOT = Path(__file__).resolve().parent.parent
MODELS = ("tf_efficientnet_b0", "tf_mobilenetv3_large_100", "tf_mixnet_s")


def import_timm():
    """timm, after the test suite's torchvision stand-in (tests/torchvision_stand_in.py) is installed for the case
    where torchvision is missing. The stand-in is loaded from its file: a test module is not on the import path."""
    spec = importlib.util.spec_from_file_location("torchvision_stand_in", REPO_ROOT / "tests" / "torchvision_stand_in.py")
    stand_in = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stand_in)
    stand_in.install()
    import timm

    return timm


def autocast(device: torch.device, amp_bf16: bool):
    return torch.autocast(device.type, dtype=torch.bfloat16) if amp_bf16 else contextlib.nullcontext()


def inference_step(model, x, amp_bf16=False):
    def step():
        with torch.no_grad(), autocast(x.device, amp_bf16):
            model(x)
    return step


def training_step(model, x, amp_bf16=False):
    def step():
        model.zero_grad(set_to_none=True)
        with autocast(x.device, amp_bf16):
            loss = model(x).float().sum()
        loss.backward()
    return step


def measure(name: str, batch: int, size: int, channels_last: bool, effort: Effort,
            device: torch.device = torch.device("cpu"), amp_bf16: bool = False):
    timm = import_timm()
    original = timm.create_model(name).to(device)
    converted = fastpad.convert(original)
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    x = torch.randn(batch, 3, size, size, device=device).to(memory_format=memory_format)
    rows = []
    for mode, make_step, train in (("inference", inference_step, False), ("training step", training_step, True)):
        models = {"original": original.train(train).to(memory_format=memory_format),
                  "converted": converted.train(train).to(memory_format=memory_format)}
        medians, repeats = median_times_interleaved({k: make_step(m, x, amp_bf16) for k, m in models.items()},
                                                    device, effort)
        rows.append([name, f"{batch}x3x{size}x{size}", mode, f"{medians['original'] * 1e3:.1f}",
                     f"{medians['converted'] * 1e3:.1f}", f"{medians['converted'] / medians['original']:.3f}",
                     f"{batch / medians['converted']:.0f}", str(repeats)])
    return rows


def measure_replaced_layers(name: str, batch: int, size: int, effort: Effort):
    """Each layer `convert` replaced, alone: the original module against its fused replacement, on the input it
    gets inside the model (inference, no_grad)."""
    timm = import_timm()
    original = timm.create_model(name).eval()
    converted, report = fastpad.convert(original, return_report=True)
    inputs = {}
    hooks = [original.get_submodule(r.path).register_forward_pre_hook(
        lambda module, args, path=r.path: inputs.setdefault(path, args[0])) for r in report.replaced]
    with torch.no_grad():
        original(torch.randn(batch, 3, size, size))
    for hook in hooks:
        hook.remove()
    rows = []
    for replacement in report.replaced:
        x = inputs[replacement.path]
        layers = {"original": original.get_submodule(replacement.path),
                  "converted": converted.get_submodule(replacement.path)}
        medians, repeats = median_times_interleaved({k: inference_step(m, x) for k, m in layers.items()},
                                                    torch.device("cpu"), effort)
        rows.append([f"{name}.{replacement.path}", "x".join(map(str, x.shape)), "inference",
                     f"{medians['original'] * 1e3:.2f}", f"{medians['converted'] * 1e3:.2f}",
                     f"{medians['converted'] / medians['original']:.3f}", str(repeats)])
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--channels-last", action="store_true")
    parser.add_argument("--budget", type=float, default=20.0, help="seconds of timing per model and mode")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--amp-bf16", action="store_true", help="run the models under bfloat16 autocast")
    parser.add_argument("--per-layer", action="store_true",
                        help="time each replaced layer alone (inference, contiguous) instead of whole models")
    args = parser.parse_args(argv)
    effort = Effort(FULL_EFFORT.warmup_rounds, args.budget, FULL_EFFORT.min_repeats, FULL_EFFORT.max_repeats)
    if args.per_layer:
        rows = [row for name in args.models for row in measure_replaced_layers(name, args.batch, args.size, effort)]
    else:
        rows = [row for name in args.models
                for row in measure(name, args.batch, args.size, args.channels_last, effort, torch.device(args.device),
                                   args.amp_bf16)]
    print(f"machine: {machine_description(torch.device(args.device))}; torch {torch.__version__}; "
          f"commit {source_description()}; {'channels_last' if args.channels_last else 'contiguous'}; "
          f"{'bfloat16 autocast' if args.amp_bf16 else 'float32'}")
    print(markdown_table(["model", "input", "mode", "original ms", "converted ms", "converted/original",
                          "converted images/s", "repeats"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
