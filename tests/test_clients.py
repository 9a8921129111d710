"""Real ported models through `torch.compile(backend="fastpad")`'s rewrite and `fastpad.convert(example_inputs=...)`:
Hugging Face transformers MobileNetV2 (tf_padding) and EfficientNet at random weights, Keras 3 on the torch backend,
and timm's tf_efficientnet_b0 without convert. Small configurations and inputs keep them quick.

Each is checked in float64 for the outputs and gradients of the eager model, for no pad op left in the forward and
backward graphs after AOTAutograd (tests/test_compile_backend.py: RewriteAndTrace), and for one compile serving three
input heights. They are multiples of 64 because HF's `apply_tf_padding` branches on `size % stride`: sizes of
another parity at some layer compile a second graph with inductor alone too (and a map of 1x1 is specialised).
"""
import os

import pytest
import torch

import fastpad
from test_compile_backend import RewriteAndTrace, assert_same, outputs_and_grads

SIZES = (64, 128, 192)  # heights; the width stays 80, which no other dim equals (one symbol per distinct size)


def hf_models():
    transformers = pytest.importorskip("transformers")
    return {
        # Narrow: float64 convolutions run torch's slow reference path, one group at a time.
        "mobilenet_v2": lambda: transformers.MobileNetV2Model(transformers.MobileNetV2Config(
            tf_padding=True, depth_multiplier=0.1, min_depth=4, image_size=SIZES[0])),
        "efficientnet": lambda: transformers.EfficientNetModel(transformers.EfficientNetConfig(
            image_size=SIZES[0], width_coefficient=0.1, depth_coefficient=0.1, depth_divisor=4, hidden_dim=128)),
    }


def keras_model():
    """Strided 'same' Conv2D and DepthwiseConv2D (Keras pads them with F.pad), a Conv2DTranspose (full output, then a
    crop) and a strided Conv1D, channels_last as Keras defaults to."""
    os.environ.setdefault("KERAS_BACKEND", "torch")
    keras = pytest.importorskip("keras")
    if keras.backend.backend() != "torch":
        pytest.skip(f"Keras runs on {keras.backend.backend()} here (KERAS_BACKEND was set before)")
    layers = keras.layers
    keras.config.set_floatx("float64")
    try:
        inputs = keras.Input((None, None, 3))
        x = layers.Conv2D(8, 3, strides=2, padding="same")(inputs)
        x = layers.DepthwiseConv2D(5, strides=2, padding="same")(x)
        x = layers.Conv2DTranspose(4, 3, strides=2, padding="same")(x)
        x = layers.Reshape((-1, 4))(x)
        x = layers.Conv1D(4, 4, strides=2, padding="same")(x)
        return keras.Model(inputs, x)
    finally:
        keras.config.set_floatx("float32")


def timm_tf_efficientnet_b0():
    import torchvision_stand_in

    torchvision_stand_in.install()
    timm = pytest.importorskip("timm")
    return timm.create_model("tf_efficientnet_b0")


class Channels(torch.nn.Module):
    """The model's output tensor (HF models return an output object)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        out = self.model(x)
        return out.last_hidden_state if hasattr(out, "last_hidden_state") else out


CLIENTS = {
    # name -> (make the model, input shape for a height, pad ops in its Dynamo graph, dtype, tolerance). timm's
    # tf_efficientnet_b0 runs in float32: its float64 reference (torch's slow path) would take minutes.
    "hf_mobilenet_v2": (lambda: hf_models()["mobilenet_v2"](), lambda h: (1, 3, h, 80), 52, torch.float64, 1e-11),
    "hf_efficientnet": (lambda: hf_models()["efficientnet"](), lambda h: (1, 3, h, 80), 5, torch.float64, 1e-11),
    "keras": (keras_model, lambda h: (1, h, 80, 3), 3, torch.float64, 1e-11),
    # Batch 2: torch's conv fake kernel guards on numel <= 20480 (its small-input branch), which timm's padded
    # 3-channel stem input crosses between these sizes at batch 1, and Dynamo recompiles then, with any backend.
    "timm_tf_efficientnet_b0": (timm_tf_efficientnet_b0, lambda h: (2, 3, h, 80), 5, torch.float32, 1e-4),
}


def make_client(name):
    make, shape, fusions, dtype, tolerance = CLIENTS[name]
    model = Channels(make()).to(dtype).eval()
    return model, shape, fusions, dtype, tolerance


@pytest.mark.parametrize("name", [
    # timm's b0 takes about 10 minutes alone on the 2-core machine (Dynamo and AOTAutograd on the whole model,
    # dynamic, then three sizes forward and backward): run it with -m slow.
    pytest.param(name, marks=pytest.mark.slow) if name.startswith("timm") else name for name in sorted(CLIENTS)])
def test_client_compiled(name):
    model, shape, fusions, dtype, tolerance = make_client(name)
    torch._dynamo.reset()
    backend = RewriteAndTrace()
    compiled = torch.compile(model, backend=backend, dynamic=True)
    for height in SIZES:
        x = torch.randn(shape(height), dtype=dtype)
        assert_same(outputs_and_grads(compiled, x), outputs_and_grads(model, x), tol=tolerance)
    assert len(backend.fusions) == 1, f"{len(backend.fusions)} graphs for {len(SIZES)} sizes"
    assert backend.fused == fusions and not backend.skipped
    assert backend.pad_ops == {"forward": 0, "backward": 0}


@pytest.mark.parametrize("name", ["hf_mobilenet_v2", "hf_efficientnet", "keras"])
def test_client_converted_with_example_inputs(name):
    model, shape, fusions, dtype, tolerance = make_client(name)
    converted, report = fastpad.convert(model, example_inputs=torch.randn(shape(SIZES[0]), dtype=dtype),
                                        return_report=True)
    assert len(report.replaced) == fusions and report.pad_ops_left == 0
    x = torch.randn(shape(SIZES[0]), dtype=dtype)
    assert_same(outputs_and_grads(converted, x), outputs_and_grads(model, x), tol=tolerance)
