"""fastpad.convert: real timm tf_* models, a Keras-port-style model, torch convs, padding modules and FX graphs.

The converted model's output and gradients must equal the original's to rounding in float64 (the fused kernels sum in
another order than torch's: the forward differs by about 1e-16 relative on the AVX2 build) and to fp32 tolerance in
float32, with the same parameters (moved, not copied), device, dtype and train/eval mode.
"""
import copy
import importlib

import pytest
import torch
import torch.nn.functional as F
from torch import fx, nn

import fastpad
from fastpad._convert import ConversionReport
from reference import relative_error

def _import_timm():
    import torchvision_stand_in

    torchvision_stand_in.install()
    return pytest.importorskip("timm")


TIMM_MODELS = {  # model -> number of timm same-padding convs it holds
    "tf_efficientnet_b0": 5,
    "tf_mobilenetv3_large_100": 5,
    "tf_mixnet_s": 13,
}


def outputs_and_grads(model, x):
    x = x.clone().requires_grad_(True)
    out = model(x)
    out.square().sum().backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    return out.detach(), x.grad, grads


def assert_same_training_step(converted, original, x):
    """Outputs equal to float64 rounding; gradients too (absolute tolerance for those that are zero up to rounding,
    like the bias feeding a batch norm)."""
    out, grad_x, grads = outputs_and_grads(converted, x)
    ref_out, ref_grad_x, ref_grads = outputs_and_grads(original, x)
    assert relative_error(out, ref_out) < 1e-13
    torch.testing.assert_close(grad_x, ref_grad_x, rtol=1e-10, atol=1e-13)
    torch.testing.assert_close(grads, ref_grads, rtol=1e-10, atol=1e-13)
    return out, ref_out


def assert_same_parameters(original, converted):
    before, after = original.state_dict(), converted.state_dict()
    assert list(before) == list(after)
    for key in before:
        assert torch.equal(before[key], after[key]), key
        assert before[key].dtype == after[key].dtype and before[key].device == after[key].device


def count_types(model, *classes):
    return sum(isinstance(m, classes) for m in model.modules())


@pytest.mark.parametrize("name", sorted(TIMM_MODELS))
def test_timm_model_float64(name):
    timm = _import_timm()
    original = timm.create_model(name).double().train()
    converted, report = fastpad.convert(original, return_report=True)
    assert len(report.replaced) == TIMM_MODELS[name] and not report.skipped
    assert count_types(converted, timm.layers.Conv2dSame) == 0
    assert count_types(original, timm.layers.Conv2dSame) == TIMM_MODELS[name]  # inplace=False left it alone
    assert count_types(converted, fastpad.nn.Conv2d) == TIMM_MODELS[name]
    assert converted.training and all(m.training for m in converted.modules())
    assert_same_parameters(original, converted)
    x = torch.randn(2, 3, 97, 83, dtype=torch.float64)  # odd sizes: the SAME pads are asymmetric
    assert_same_training_step(converted, original, x)
    features = converted.eval().forward_features(x)
    assert relative_error(features, original.eval().forward_features(x)) < 1e-13


@pytest.mark.parametrize("name", sorted(TIMM_MODELS))
def test_timm_model_float32_eval(name):
    timm = _import_timm()
    original = timm.create_model(name).eval()
    converted = fastpad.convert(original)
    assert not converted.training
    for size in ((224, 224), (225, 191)):
        x = torch.randn(1, 3, *size)
        with torch.no_grad():
            assert relative_error(converted.forward_features(x), original.forward_features(x)) < 1e-5


def test_inplace_moves_the_same_parameters():
    timm = _import_timm()
    model = timm.create_model("tf_efficientnet_b0")
    stem_weight = model.conv_stem.weight
    converted = fastpad.convert(model, inplace=True)
    assert converted is model
    assert isinstance(model.conv_stem, fastpad.nn.Conv2d)
    assert model.conv_stem.weight is stem_weight  # an optimizer holding it still trains the model


@pytest.mark.parametrize("kind", ["Conv2dSame", "Conv2dSameExport", "StdConv2dSame", "ScaledStdConv2dSame"])
def test_timm_same_conv_layers(kind):
    timm = _import_timm()
    module = "conv2d_same" if kind.startswith("Conv2dSame") else "std_conv"
    layer_class = getattr(importlib.import_module(f"timm.layers.{module}"), kind)
    prototype = layer_class(6, 8, 3, stride=2, bias=True).double()
    for size in ((17, 12), (16, 9)):
        # A fresh original per size: Conv2dSameExport keeps the pads of the first input it sees (the fused
        # layer computes them per call, so it stays right at other sizes).
        layer = copy.deepcopy(prototype)
        converted, report = fastpad.convert(layer, return_report=True)
        assert type(converted) is not type(layer) and len(report.replaced) == 1
        assert_same_parameters(layer, converted)
        assert_same_training_step(converted, layer, torch.randn(2, 6, *size, dtype=torch.float64))


def test_timm_cond_conv():
    timm = _import_timm()
    layer = timm.layers.CondConv2d(6, 8, 3, stride=2, padding="same", bias=True, num_experts=3).double()
    assert layer.dynamic_padding
    converted = fastpad.convert(layer)
    assert type(converted).__name__ == "SameCondConv2d"
    x = torch.randn(3, 6, 15, 10, dtype=torch.float64)
    routing = torch.rand(3, 3, dtype=torch.float64)
    assert relative_error(converted(x, routing), layer(x, routing)) < 1e-13


def test_timm_static_padding_left_alone():
    timm = _import_timm()
    layer = timm.layers.create_conv2d(4, 4, 3, stride=1, padding="same")  # static: torch pads symmetrically
    converted, report = fastpad.convert(layer, return_report=True)
    assert type(converted) is nn.Conv2d and not report.replaced


def keras_port_model():
    """Keras ZeroPadding2D + Conv2D(padding='valid') pairs, as converted TF/Keras models write them."""
    return nn.Sequential(
        nn.ZeroPad2d((0, 1, 0, 1)),  # Keras ZeroPadding2D(((0, 1), (0, 1)))
        nn.Conv2d(3, 16, 3, stride=2),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.ZeroPad2d((1, 1, 1, 1)),
        nn.Conv2d(16, 16, 3, stride=1, groups=16),
        nn.ZeroPad2d((1, 2, 1, 2)),
        nn.Conv2d(16, 32, 4, stride=2, padding=1),  # its own padding adds to the module's
        nn.ReLU(),
    )


def test_keras_port_model():
    original = keras_port_model().double()
    converted, report = fastpad.convert(original, return_report=True)
    assert len(report.replaced) == 3
    assert [type(m) for m in converted] == [nn.Identity, fastpad.nn.Conv2d, nn.BatchNorm2d, nn.ReLU, nn.Identity,
                                             fastpad.nn.Conv2d, nn.Identity, fastpad.nn.Conv2d, nn.ReLU]
    assert converted[7].padding == ((2, 3), (2, 3))
    assert_same_parameters(original, converted)
    for size in ((32, 32), (31, 29)):
        assert_same_training_step(converted, original, torch.randn(2, 3, *size, dtype=torch.float64))
    x = torch.randn(2, 3, 40, 40)
    assert relative_error(converted.float()(x), original.float()(x)) < 1e-5


PAD_MODULES = {
    "zeros": (nn.ZeroPad1d, nn.ZeroPad2d, nn.ZeroPad3d),
    "reflect": (nn.ReflectionPad1d, nn.ReflectionPad2d, nn.ReflectionPad3d),
    "replicate": (nn.ReplicationPad1d, nn.ReplicationPad2d, nn.ReplicationPad3d),
    "circular": (nn.CircularPad1d, nn.CircularPad2d, nn.CircularPad3d),
}
TORCH_CONVS = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
FUSED_CONVS = (fastpad.nn.Conv1d, fastpad.nn.Conv2d, fastpad.nn.Conv3d)


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("mode", sorted(PAD_MODULES))
def test_padding_module_then_conv(nd, mode):
    amounts = (2, 0, 1, 3, 0, 1)[: 2 * nd]
    model = nn.Sequential(PAD_MODULES[mode][nd - 1](amounts), TORCH_CONVS[nd - 1](4, 6, 3, stride=2)).double()
    converted, report = fastpad.convert(model, return_report=True)
    assert isinstance(converted[0], nn.Identity) and type(converted[1]) is FUSED_CONVS[nd - 1]
    assert converted[1].padding_mode == mode and len(report.replaced) == 1
    x = torch.randn(2, 4, *(7, 6, 5)[:nd], dtype=torch.float64)
    assert relative_error(converted(x), model(x)) < 1e-13


def test_constant_pad_zero_value_fused_nonzero_left_alone():
    zero = nn.Sequential(nn.ConstantPad2d((1, 0, 2, 1), 0.0), nn.Conv2d(3, 4, 3))
    assert isinstance(fastpad.convert(zero)[1], fastpad.nn.Conv2d)
    nonzero = nn.Sequential(nn.ConstantPad2d((1, 0, 2, 1), 0.5), nn.Conv2d(3, 4, 3))
    converted, report = fastpad.convert(nonzero, return_report=True)
    assert type(converted[1]) is nn.Conv2d and not report.replaced


@pytest.mark.parametrize("model", [
    nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(3, 4, 3, padding=1)),  # reflect, then zeros
    nn.Sequential(nn.ZeroPad2d(1), nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect")),  # zeros, then reflect
    nn.Sequential(nn.ZeroPad2d((-1, 2, 0, 0)), nn.Conv2d(3, 4, 3)),  # a crop
    nn.Sequential(nn.ZeroPad1d(1), nn.Conv2d(3, 4, 3)),  # pads one dim of a 2-d conv
], ids=["reflect-then-zeros", "zeros-then-reflect", "crop", "fewer-dims"])
def test_unfusable_pairs_are_reported_and_kept(model):
    model = model.double()
    converted, report = fastpad.convert(model, return_report=True)
    assert type(converted[0]) is type(model[0])
    assert len(report.skipped) == 1 and "not one fused padding" in report.skipped[0][1]
    x = torch.randn(1, 3, 6, 7, dtype=torch.float64)
    assert relative_error(converted(x), model(x)) < 1e-13  # the conv may still be fused on its own


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_torch_conv_padding_modes(nd, mode):
    conv = TORCH_CONVS[nd - 1](4, 6, 3, stride=2, padding=1, padding_mode=mode).double()
    converted = fastpad.convert(conv)
    assert type(converted) is FUSED_CONVS[nd - 1] and converted.padding_mode == mode
    x = torch.randn(2, 4, *(9, 8, 7)[:nd], dtype=torch.float64)
    assert relative_error(converted(x), conv(x)) < 1e-13


@pytest.mark.parametrize("kernel, dilation, expect_fused", [(4, 1, True), (2, 3, True), (3, 2, False), (5, 1, False)])
def test_torch_same_padding_fused_only_when_asymmetric(kernel, dilation, expect_fused):
    conv = nn.Conv2d(4, 6, kernel, padding="same", dilation=dilation).double()
    converted = fastpad.convert(conv)
    assert isinstance(converted, fastpad.nn.Conv2d) == expect_fused
    x = torch.randn(2, 4, 11, 10, dtype=torch.float64)
    assert relative_error(converted(x), conv(x)) < 1e-13


def test_symmetric_torch_convs_left_alone():
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.Conv1d(4, 4, 1), nn.Conv2d(4, 4, 5, padding="same"),
                          nn.Conv2d(4, 4, 3, padding_mode="reflect"))  # reflect with no padding: nothing to fuse
    converted, report = fastpad.convert(model, return_report=True)
    assert not report.replaced and [type(m) for m in converted] == [type(m) for m in model]


def test_modules_with_hooks_are_skipped():
    conv = nn.Conv2d(3, 4, 4, padding="same")
    conv.register_forward_hook(lambda module, args, out: out)
    converted, report = fastpad.convert(conv, return_report=True)
    assert type(converted) is nn.Conv2d and "hooks" in report.skipped[0][1]


def test_device_dtype_and_mode_kept():
    model = nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(3, 4, 3)).to(torch.bfloat16).eval()
    converted = fastpad.convert(model)
    assert converted[1].weight.dtype == torch.bfloat16 and converted[1].weight.device.type == "cpu"
    assert not converted[1].training and converted[1].weight.requires_grad


def test_verbose_prints_the_report(capsys):
    model = nn.Sequential(nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(3, 8, 3, stride=2))
    fastpad.convert(model, verbose=True)
    printed = capsys.readouterr().out
    assert "1 replaced" in printed and "ZeroPad2d" in printed and "0+1" in printed


class FunctionalPads(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 5, 3, stride=2)
        self.weight = nn.Parameter(torch.randn(6, 5, 3, 3))
        self.weight_1d = nn.Parameter(torch.randn(4, 6, 5))

    def forward(self, x):
        y = self.conv(F.pad(x, (0, 1, 2, 1)))
        y = F.conv2d(F.pad(y, [1, 1, 2, 0], mode="reflect"), self.weight, None, 1, 0, 1, 1)
        z = F.conv1d(F.pad(y.flatten(2), (4, 0), mode="replicate"), self.weight_1d)
        kept = F.pad(y, (1, 1, 1, 1), value=0.5)  # not zeros: stays
        return z.sum() + kept.sum()


@pytest.mark.parametrize("how", ["graph_module", "trace"])
def test_fx_pad_then_conv(how):
    model = FunctionalPads().double()
    source = fx.symbolic_trace(model) if how == "graph_module" else model
    converted, report = fastpad.convert(source, trace=how == "trace", return_report=True)
    assert isinstance(converted, fx.GraphModule) and len(report.replaced) == 3
    assert report.path == "modules, then the FX graph" and report.pad_ops_left == 1  # the 0.5 pad
    fused = [n for n in converted.graph.nodes if n.target is torch.ops.fastpad.conv.default]
    assert [(n.args[4], n.args[5], n.args[8]) for n in fused] == [
        ([2, 0], [1, 1], "zeros"), ([2, 1], [0, 1], "reflect"), ([4], [0], "replicate")]
    assert fused[0].args[1].target == "conv.weight"  # the conv module's own parameters, read in place
    assert_same_parameters(model, converted)
    for size in ((13, 12), (16, 15)):
        x = torch.randn(2, 3, *size, dtype=torch.float64)
        assert relative_error(converted(x), model(x)) < 1e-13


def test_report_type_and_bad_argument():
    _, report = fastpad.convert(nn.Conv2d(3, 4, 2, padding="same"), return_report=True)
    assert isinstance(report, ConversionReport) and "1 replaced" in str(report)
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        fastpad.convert("resnet")
