"""fastpad.nn layers: state_dict compatibility and default initialisation identical to torch.nn,
padding resolved per call from the input size, a readable repr, and numerics against the reference."""

import re
import warnings

import pytest
import torch

import fastpad
from reference import PADDING_MODES, assert_matches, expected_conv, expected_conv_transpose, relative_error

LAYERS = {  # name: (fastpad class, torch.nn class, spatial dims, transposed)
    "Conv1d": (fastpad.nn.Conv1d, torch.nn.Conv1d, 1, False),
    "Conv2d": (fastpad.nn.Conv2d, torch.nn.Conv2d, 2, False),
    "Conv3d": (fastpad.nn.Conv3d, torch.nn.Conv3d, 3, False),
    "ConvTranspose1d": (fastpad.nn.ConvTranspose1d, torch.nn.ConvTranspose1d, 1, True),
    "ConvTranspose2d": (fastpad.nn.ConvTranspose2d, torch.nn.ConvTranspose2d, 2, True),
    "ConvTranspose3d": (fastpad.nn.ConvTranspose3d, torch.nn.ConvTranspose3d, 3, True),
}
CONFIGS = {  # constructor arguments valid for both libraries (torch.nn with its default padding=0)
    "plain": dict(in_channels=4, out_channels=6, kernel_size=3),
    "strided_grouped": dict(in_channels=4, out_channels=6, kernel_size=2, stride=2, groups=2),
    "depthwise_no_bias": dict(in_channels=4, out_channels=8, kernel_size=3, groups=4, bias=False, dilation=2),
}


def layer_pair(name, config, seed=0):
    ours, theirs, _, _ = LAYERS[name]
    torch.manual_seed(seed)
    a = ours(**CONFIGS[config])
    torch.manual_seed(seed)
    b = theirs(**CONFIGS[config])
    return a, b


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_state_dict_round_trip(name, config):
    ours, theirs = layer_pair(name, config)
    sd_ours, sd_theirs = ours.state_dict(), theirs.state_dict()
    assert {k: v.shape for k, v in sd_ours.items()} == {k: v.shape for k, v in sd_theirs.items()}
    # torch.nn -> fastpad
    donor, _ = layer_pair(name, config, seed=1)
    theirs.load_state_dict(donor.state_dict())  # fastpad -> torch.nn, strict
    ours.load_state_dict(theirs.state_dict())  # torch.nn -> fastpad, strict
    for key, value in donor.state_dict().items():
        assert torch.equal(ours.state_dict()[key], value), key
        assert torch.equal(theirs.state_dict()[key], value), key


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_default_init_matches_torch(name, config):
    ours, theirs = layer_pair(name, config)
    params_ours, params_theirs = dict(ours.named_parameters()), dict(theirs.named_parameters())
    assert params_ours.keys() == params_theirs.keys()
    for key in params_ours:
        assert torch.equal(params_ours[key], params_theirs[key]), f"{key} differs from torch.nn's init"


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_same_number_of_rng_draws(name):
    ours, theirs, _, _ = LAYERS[name]
    torch.manual_seed(3)
    ours(4, 6, 3)
    after_ours = torch.rand(3)
    torch.manual_seed(3)
    theirs(4, 6, 3)
    assert torch.equal(after_ours, torch.rand(3))


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16], ids=["float64", "bfloat16"])
def test_device_and_dtype_arguments(dtype):
    layer = fastpad.nn.Conv2d(4, 6, 3, device="cpu", dtype=dtype)
    assert layer.weight.dtype == dtype and layer.bias.dtype == dtype
    y = layer(torch.randn(1, 4, 5, 5, dtype=dtype))
    assert y.dtype == dtype


@pytest.mark.parametrize("size, expected", [(224, 112), (225, 113), (7, 4), (1, 1)])
def test_same_padding_resolved_per_call(size, expected):
    layer = fastpad.nn.Conv2d(2, 3, 3, stride=2).double()
    x = torch.randn(1, 2, size, size + 1, dtype=torch.float64)
    y = layer(x)
    assert y.shape == (1, 3, expected, -(-(size + 1) // 2))
    assert_matches(y, expected_conv(x, layer.weight, layer.bias, stride=2, padding="same"))


def test_same_padding_224_vs_225_gives_tf_pads():
    """The same layer pads (2, 3) on 224 and (3, 3) on 225 (k=7, s=2), as TF SAME does."""
    layer = fastpad.nn.Conv2d(1, 1, 7, stride=2).double()
    for size, pads in ((224, ((2, 3), (2, 3))), (225, ((3, 3), (3, 3)))):
        x = torch.randn(1, 1, size, size, dtype=torch.float64)
        explicit = fastpad.conv2d(x, layer.weight, layer.bias, stride=2, padding=pads)
        torch.testing.assert_close(layer(x), explicit, rtol=0, atol=0)


def test_transposed_same_resolved_per_call():
    layer = fastpad.nn.ConvTranspose2d(3, 2, 4, stride=2).double()
    for size in (7, 8):
        x = torch.randn(2, 3, size, size + 3, dtype=torch.float64)
        y = layer(x)
        assert y.shape == (2, 2, 2 * size, 2 * (size + 3))
        assert_matches(y, expected_conv_transpose(x, layer.weight, layer.bias, stride=2, padding="same"))


@pytest.mark.parametrize("mode", PADDING_MODES)
@pytest.mark.parametrize("padding", ["same", "same_lower", "causal", ((1, 0), (0, 2))])
def test_conv_layer_matches_reference(padding, mode):
    layer = fastpad.nn.Conv2d(4, 6, (3, 2), stride=(2, 1), dilation=(1, 2), groups=2, padding=padding,
                              padding_mode=mode).double()
    x = torch.randn(2, 4, 9, 8, dtype=torch.float64)
    kwargs = dict(stride=(2, 1), dilation=(1, 2), groups=2, padding=padding, padding_mode=mode)
    assert_matches(layer(x), expected_conv(x, layer.weight, layer.bias, **kwargs))


@pytest.mark.parametrize("nd", [1, 3])
def test_layers_1d_3d_match_reference(nd):
    size = {1: (11,), 3: (4, 5, 6)}[nd]
    conv = getattr(fastpad.nn, f"Conv{nd}d")(3, 4, 3, stride=2, padding_mode="replicate").double()
    x = torch.randn(2, 3, *size, dtype=torch.float64)
    assert_matches(conv(x), expected_conv(x, conv.weight, conv.bias, stride=2, padding_mode="replicate"))
    deconv = getattr(fastpad.nn, f"ConvTranspose{nd}d")(3, 4, 3, stride=2, output_padding=1, padding=1).double()
    expected = expected_conv_transpose(x, deconv.weight, deconv.bias, stride=2, padding=1, output_padding=1)
    assert_matches(deconv(x), expected)


def test_valid_and_int_padding_equal_torch_layers():
    """With torch-expressible padding, fastpad layers compute exactly what torch.nn computes."""
    for padding, mode in ((0, "zeros"), (1, "reflect"), ((2, 1), "circular"), ("valid", "replicate")):
        torch.manual_seed(0)
        ours = fastpad.nn.Conv2d(4, 6, 3, padding=padding, padding_mode=mode).double()
        torch.manual_seed(0)
        theirs = torch.nn.Conv2d(4, 6, 3, padding=padding, padding_mode=mode).double()
        x = torch.randn(2, 4, 7, 8, dtype=torch.float64)
        assert_matches(ours(x), theirs(x))


def test_repr_is_readable():
    text = repr(fastpad.nn.Conv2d(3, 32, 3, stride=2))
    assert text.startswith("Conv2d(") and "3, 32" in text
    assert re.search(r"padding=['\"]?same['\"]?[,)]", text), text
    assert "kernel_size=(3, 3)" in text and "stride=(2, 2)" in text
    text = repr(fastpad.nn.Conv1d(4, 4, 5, groups=4, padding="causal", padding_mode="reflect", bias=False))
    assert re.search(r"padding=['\"]?causal", text) and "reflect" in text and "groups=4" in text, text
    text = repr(fastpad.nn.ConvTranspose2d(8, 4, 4, stride=2, padding="same_lower"))
    assert text.startswith("ConvTranspose2d(") and re.search(r"padding=['\"]?same_lower", text), text


@pytest.mark.filterwarnings("ignore:`torch.jit.trace:DeprecationWarning")
def test_jit_trace_runs_like_eager():
    """torch.jit.trace hands sizes out as tensors; the traced module holds the pads of the traced size."""
    model = torch.nn.Sequential(fastpad.nn.Conv2d(3, 4, 3, stride=2, padding_mode="reflect"),
                                fastpad.nn.ConvTranspose2d(4, 2, 3, stride=2)).double()
    x = torch.randn(2, 3, 11, 8, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)  # the argument checks become constants
        traced = torch.jit.trace(model, x)
    assert relative_error(traced(x), model(x)) < 1e-13
