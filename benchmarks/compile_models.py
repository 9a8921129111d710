"""`torch.compile(backend="fastpad")` against `torch.compile()` (inductor alone), and eager
`fastpad.convert(model, example_inputs=...)` against the eager model, on models ported from TF/Keras:
`python -m benchmarks.compile_models` from the repository root.

Models (random weights, CPU, float32, batch 8, 224x224): Hugging Face transformers MobileNetV2 with tf_padding and
EfficientNet in its B0 configuration, a Keras 3 model on the torch backend (strided 'same' Conv2D and
DepthwiseConv2D, Conv2DTranspose, Conv1D), and timm's tf_efficientnet_b0 (not converted). Printed, as markdown:

- compiled inference: the median time of each backend (runs interleaved), their ratio, the first call's time (the
  compile, with empty inductor caches) of each and its ratio, and the pad ops left in the graphs inductor compiles
  (counted by a post-grad pass);
- eager inference: the original model, the torch.export module without the rewrite (what convert's capture alone
  does), and `convert(model, example_inputs=x)`;
- with --training: a compiled training step (forward, backward) of MobileNetV2, with the pad ops of the forward and
  backward graphs.
transformers, keras (KERAS_BACKEND=torch) and timm are needed (`make install` puts them in); where torchvision is
missing, the test suite's stand-in satisfies timm's imports.
"""
import argparse
import copy
import os
import sys
import tempfile
import time

import torch
from torch._inductor.runtime.cache_dir_utils import temporary_cache_dir

import fastpad
from fastpad._graph_fusion import count_pad_ops
from fastpad._info import source_description
from fastpad._report import markdown_table

from benchmarks.models import import_timm, inference_step
from fastpad.bench.runner import FULL_EFFORT, Effort, machine_description, median_times_interleaved

CPU = torch.device("cpu")


def hf_mobilenet_v2(size: int) -> torch.nn.Module:
    import transformers

    return transformers.MobileNetV2Model(transformers.MobileNetV2Config(tf_padding=True, image_size=size))


def hf_efficientnet_b0(size: int) -> torch.nn.Module:
    import transformers

    config = transformers.EfficientNetConfig(image_size=size, width_coefficient=1.0, depth_coefficient=1.0,
                                             hidden_dim=1280)
    return transformers.EfficientNetModel(config)


def keras_model(size: int) -> torch.nn.Module:
    os.environ.setdefault("KERAS_BACKEND", "torch")
    import keras

    layers = keras.layers
    inputs = keras.Input((size, size, 3))
    x = layers.Conv2D(32, 3, strides=2, padding="same", activation="relu")(inputs)
    x = layers.DepthwiseConv2D(3, strides=2, padding="same", activation="relu")(x)
    x = layers.Conv2D(64, 1, activation="relu")(x)
    x = layers.DepthwiseConv2D(5, strides=2, padding="same", activation="relu")(x)
    x = layers.Conv2D(128, 1, activation="relu")(x)
    x = layers.Conv2DTranspose(64, 3, strides=2, padding="same", activation="relu")(x)
    x = layers.Conv2DTranspose(32, 3, strides=2, padding="same")(x)
    x = layers.Reshape((-1, 32 * size // 4))(x)
    x = layers.Conv1D(32, 4, strides=2, padding="same")(x)
    return keras.Model(inputs, x)


def timm_tf_efficientnet_b0(size: int) -> torch.nn.Module:
    return import_timm().create_model("tf_efficientnet_b0")


MODELS = {  # name -> (builder, channels_last input as Keras takes it)
    "hf_mobilenet_v2": (hf_mobilenet_v2, False),
    "hf_efficientnet_b0": (hf_efficientnet_b0, False),
    "keras": (keras_model, True),
    "timm_tf_efficientnet_b0": (timm_tf_efficientnet_b0, False),
}


class Tensor(torch.nn.Module):
    """The model's output tensor: HF models return an output object."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x):
        out = self.model(x)
        return out.last_hidden_state if hasattr(out, "last_hidden_state") else out


class PadOpCounter:
    """Inductor's post-grad custom pass: the pad ops of each graph inductor compiles."""

    def __init__(self):
        self.counts = []

    def __call__(self, graph):
        self.counts.append(count_pad_ops(graph))


def compile_cold(model, backend: str, first_call):
    """Compiles a copy of `model` (its own Dynamo cache entry) with empty inductor caches and makes the first call.
    Returns (the compiled model, seconds of the first call, pad ops per compiled graph)."""
    counter = PadOpCounter()
    compiled = torch.compile(copy.deepcopy(model), backend=backend)
    with tempfile.TemporaryDirectory() as cache, temporary_cache_dir(cache), torch._inductor.config.patch(
            {"fx_graph_cache": False, "post_grad_custom_post_pass": counter}), \
            torch._functorch.config.patch(enable_autograd_cache=False):
        started = time.perf_counter()
        first_call(compiled)
        seconds = time.perf_counter() - started
    return compiled, seconds, counter.counts


def training(model, x):
    def step():
        model.zero_grad(set_to_none=True)
        model(x).mean().backward()
    return step


def compiled_rows(name: str, model, x, effort: Effort, train: bool):
    make_step = training if train else inference_step
    compiled, first_seconds, pads = {}, {}, {}
    torch._dynamo.reset()
    for backend in ("inductor", "fastpad"):
        compiled[backend], first_seconds[backend], pads[backend] = compile_cold(
            model, backend, lambda m: make_step(m, x)())
    medians, repeats = median_times_interleaved({k: make_step(m, x) for k, m in compiled.items()}, CPU, effort)
    return [name, "training step" if train else "inference", f"{medians['inductor'] * 1e3:.1f}",
            f"{medians['fastpad'] * 1e3:.1f}", f"{medians['fastpad'] / medians['inductor']:.3f}",
            f"{first_seconds['inductor']:.1f}", f"{first_seconds['fastpad']:.1f}",
            f"{first_seconds['fastpad'] / first_seconds['inductor']:.2f}",
            f"{' + '.join(map(str, pads['inductor']))} -> {' + '.join(map(str, pads['fastpad']))}", str(repeats)]


def eager_row(name: str, model, x, effort: Effort):
    exported = torch.export.export(model, (x,)).module()
    converted, report = fastpad.convert(model, example_inputs=x, return_report=True)
    variants = {"original": model, "exported": exported, "converted": converted}
    medians, repeats = median_times_interleaved({k: inference_step(m, x) for k, m in variants.items()}, CPU, effort)
    return [name, f"{medians['original'] * 1e3:.1f}", f"{medians['exported'] * 1e3:.1f}",
            f"{medians['converted'] * 1e3:.1f}", f"{medians['converted'] / medians['original']:.3f}",
            f"{medians['converted'] / medians['exported']:.3f}", str(len(report.replaced)),
            str(report.pad_ops_left), str(repeats)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--budget", type=float, default=10.0, help="seconds of timing per comparison")
    parser.add_argument("--no-eager", action="store_true", help="skip the eager convert comparison")
    parser.add_argument("--training", action="store_true", help="also time a compiled MobileNetV2 training step")
    args = parser.parse_args(argv)
    effort = Effort(FULL_EFFORT.warmup_rounds, args.budget, FULL_EFFORT.min_repeats, FULL_EFFORT.max_repeats)
    torch.manual_seed(0)
    compiled_table, eager_table = [], []
    for name in args.models:
        build, channels_last = MODELS[name]
        model = Tensor(build(args.size)).eval()
        shape = (args.batch, args.size, args.size, 3) if channels_last else (args.batch, 3, args.size, args.size)
        x = torch.randn(shape)
        compiled_table.append(compiled_rows(name, model, x, effort, train=False))
        if not args.no_eager:
            eager_table.append(eager_row(name, model, x, effort))
    if args.training:
        model = Tensor(hf_mobilenet_v2(args.size)).train()
        compiled_table.append(compiled_rows("hf_mobilenet_v2", model, torch.randn(args.batch, 3, args.size,
                                                                                   args.size), effort, train=True))
    print(f"machine: {machine_description(CPU)}; torch {torch.__version__}; commit {source_description()}; "
          f"date {time.strftime('%Y-%m-%d %H:%M:%S %Z')}; float32; batch {args.batch}; {args.size}x{args.size}; "
          f"load average {os.getloadavg()[0]:.2f}")
    print()
    print(markdown_table(["model", "mode", "inductor ms", "fastpad ms", "fastpad/inductor", "inductor 1st call s",
                          "fastpad 1st call s", "1st call ratio", "pad ops inductor -> fastpad", "repeats"],
                         compiled_table))
    if eager_table:
        print()
        print(markdown_table(["model", "eager ms", "exported ms", "converted ms", "converted/eager",
                              "converted/exported", "fused", "pad ops left", "repeats"], eager_table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
