"""ONNX export with both exporters (the default torch.export-based one and dynamo=False): the graph each layer
becomes (Conv with auto_pad for 'same', explicit pads otherwise, Pad(mode) + Conv for the other padding modes,
ConvTranspose with explicit pads), and ONNX Runtime against fastpad eager at other input sizes (dynamic axes)."""

import pytest
import torch

import fastpad
from reference import relative_error

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

EXPORTERS = ["dynamo", "torchscript"]
nn = fastpad.nn


def export(model, example, path, exporter, dynamic=True):
    """torch.onnx.export, with every spatial axis dynamic unless dynamic=False; returns the loaded ONNX model."""
    axes = range(2, example.dim())
    if exporter == "dynamo":
        pytest.importorskip("onnxscript")
        shapes = ({axis: torch.export.Dim.DYNAMIC for axis in axes},) if dynamic else None
        torch.onnx.export(model, (example,), path, dynamic_shapes=shapes, verbose=False)
    else:
        names = dict(input_names=["input"], dynamic_axes={"input": {axis: f"size{axis}" for axis in axes}})
        torch.onnx.export(model, (example,), path, dynamo=False, **(names if dynamic else {}))
    return onnx.load(path)


def layer_nodes(graph):
    """(op_type, attributes) of the nodes a layer becomes, in order; shape arithmetic and constants left out."""
    return [(node.op_type, {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute})
            for node in graph.node if node.op_type in ("Conv", "ConvTranspose", "Pad")]


def assert_runtime_matches(model, path, batch_channels, sizes):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    for size in sizes:
        x = torch.randn(*batch_channels, *size)
        expected = model(x)
        actual = torch.from_numpy(session.run(None, {name: x.numpy()})[0])
        error = relative_error(actual, expected)
        assert error < 1e-5, f"input size {size}: shape {tuple(actual.shape)} vs {tuple(expected.shape)}, " \
                             f"relative error {error:.3g}"


def sizes_for(spatial_dims, values=(7, 8, 13)):
    """Odd, even and prime sizes, none equal to the export example's 10."""
    return [(v,) * spatial_dims for v in values] + [tuple(7 + 4 * d for d in range(spatial_dims))]


def check(model, channels, spatial_dims, exporter, tmp_path, graph_out=None):
    """Exports with dynamic spatial axes, checks ONNX Runtime at other sizes, returns `layer_nodes`."""
    model.eval()
    path = tmp_path / "model.onnx"
    graph = export(model, torch.randn(2, channels, *(10,) * spatial_dims), path, exporter).graph
    with torch.no_grad():
        assert_runtime_matches(model, path, (2, channels), sizes_for(spatial_dims))
    if graph_out is not None:
        graph_out.append(graph)
    return layer_nodes(graph)


CONV_SAME = {  # name: (layer, auto_pad)
    "1d_same_s3": (lambda: nn.Conv1d(3, 4, 4, stride=3), "SAME_UPPER"),
    "2d_same_lower_s2_grouped": (lambda: nn.Conv2d(4, 6, 4, stride=2, padding="same_lower", groups=2),
                                 "SAME_LOWER"),
    "2d_same_s2x1_no_bias": (lambda: nn.Conv2d(3, 4, (4, 3), stride=(2, 1), bias=False), "SAME_UPPER"),
}


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("case", sorted(CONV_SAME))
def test_same_is_conv_with_auto_pad(case, exporter, tmp_path):
    make, auto_pad = CONV_SAME[case]
    layer = make()
    nodes = check(layer, layer.in_channels, len(layer.kernel_size), exporter, tmp_path)
    assert [op for op, _ in nodes] == ["Conv"]
    attrs = nodes[0][1]
    assert attrs["auto_pad"] == auto_pad.encode()
    assert "pads" not in attrs
    assert attrs["strides"] == list(layer.stride) and attrs["dilations"] == list(layer.dilation)
    assert attrs["group"] == layer.groups


CONV_EXPLICIT = {  # name: (layer, ONNX pads: all begins, then all ends)
    "1d_causal_dilated": (lambda: nn.Conv1d(3, 4, 3, padding="causal", dilation=2), [4, 0]),
    "2d_pairs_s2": (lambda: nn.Conv2d(3, 4, 3, stride=2, padding=((1, 2), (0, 3))), [1, 0, 2, 3]),
}


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("case", sorted(CONV_EXPLICIT))
def test_other_padding_is_conv_with_pads(case, exporter, tmp_path):
    make, pads = CONV_EXPLICIT[case]
    layer = make()
    nodes = check(layer, layer.in_channels, len(layer.kernel_size), exporter, tmp_path)
    assert [op for op, _ in nodes] == ["Conv"]
    assert nodes[0][1]["pads"] == pads
    assert "auto_pad" not in nodes[0][1]


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_dilated_same(exporter, tmp_path):
    # ONNX Runtime rejects auto_pad with dilation: explicit pads at stride 1, else a Pad computes them.
    nodes = check(nn.Conv1d(3, 4, 4, dilation=3), 3, 1, exporter, tmp_path)
    assert [(op, attrs.get("pads")) for op, attrs in nodes] == [("Conv", [4, 5])]
    nodes = check(nn.Conv2d(3, 4, 3, stride=(2, 1), dilation=2, padding="same_lower"), 3, 2, exporter, tmp_path)
    assert [(op, attrs.get("mode")) for op, attrs in nodes] == [("Pad", b"constant"), ("Conv", None)]
    assert "auto_pad" not in nodes[1][1]


PAD_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("mode", sorted(PAD_MODES))
def test_padding_mode_is_pad_then_conv(mode, exporter, tmp_path):
    # 'same' at stride 2 in one dim: those pads depend on the input size, so the graph must compute them.
    layer = nn.Conv2d(3, 4, (3, 4), stride=(2, 1), padding="same", padding_mode=mode)
    nodes = check(layer, 3, 2, exporter, tmp_path)
    assert [op for op, _ in nodes] == ["Pad", "Conv"]
    assert nodes[0][1]["mode"] == PAD_MODES[mode].encode()
    assert nodes[1][1]["pads"] == [0, 0, 0, 0] and "auto_pad" not in nodes[1][1]


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_padding_mode_1d_causal(exporter, tmp_path):
    nodes = check(nn.Conv1d(3, 4, 3, padding="causal", padding_mode="replicate"), 3, 1, exporter, tmp_path)
    assert [(op, attrs.get("mode")) for op, attrs in nodes] == [("Pad", b"edge"), ("Conv", None)]


CONV_TRANSPOSE = {  # name: (layer, ONNX pads, ONNX output_padding)
    # k_eff - s odd: the extra cropped pixel goes at the end ('same') or at the start ('same_lower')
    "2d_same_k3_s2": (lambda: nn.ConvTranspose2d(3, 4, 3, stride=2), [0, 0, 1, 1], [0, 0]),
    "2d_same_lower_k4_s1x2_dilated": (lambda: nn.ConvTranspose2d(4, 6, 4, stride=(1, 2), padding="same_lower",
                                                                 dilation=(1, 2), groups=2),
                                      [2, 3, 1, 2], [0, 0]),
    # k_eff < s: the output runs past the full result with bias-only positions
    "1d_same_k1_s3": (lambda: nn.ConvTranspose1d(3, 4, 1, stride=3), [0, 0], [2]),
    "1d_crop_pairs_output_padding": (lambda: nn.ConvTranspose1d(3, 4, 5, stride=3, padding=((1, 3),),
                                                                output_padding=2), [1, 1], [0]),
}


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("case", sorted(CONV_TRANSPOSE))
def test_conv_transpose_has_explicit_pads(case, exporter, tmp_path):
    make, pads, output_padding = CONV_TRANSPOSE[case]
    layer = make()
    nodes = check(layer, layer.in_channels, len(layer.kernel_size), exporter, tmp_path)
    assert [op for op, _ in nodes] == ["ConvTranspose"]
    attrs = nodes[0][1]
    assert "auto_pad" not in attrs
    assert attrs["pads"] == pads and attrs["output_padding"] == output_padding


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_conv_transpose_extension_past_stride(exporter, tmp_path):
    # ONNX Runtime rejects output_padding >= stride: ConvTranspose to the full output, zero Pad, then the bias.
    layer = nn.ConvTranspose2d(3, 4, 2, stride=1, padding=0, dilation=3, output_padding=(2, 1))
    graphs = []
    nodes = check(layer, 3, 2, exporter, tmp_path, graphs)
    assert [(op, attrs.get("mode")) for op, attrs in nodes] == [("ConvTranspose", None), ("Pad", b"constant")]
    assert nodes[0][1]["output_padding"] == [0, 0]
    (output,) = [node for node in graphs[0].node if node.output[0] == graphs[0].output[0].name]
    assert output.op_type == "Add"


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_chain_2d(exporter, tmp_path):
    # Each layer's input size is an expression of the model's: circular after a strided layer is the hard case.
    model = torch.nn.Sequential(nn.Conv2d(3, 4, 3, stride=2), nn.Conv2d(4, 4, 3, stride=3, padding_mode="circular"),
                                nn.ConvTranspose2d(4, 4, 4, stride=2), nn.Conv2d(4, 3, 5, stride=2,
                                                                                 padding_mode="reflect"))
    nodes = check(model, 3, 2, exporter, tmp_path)
    assert [op for op, _ in nodes] == ["Conv", "Pad", "Conv", "ConvTranspose", "Pad", "Conv"]


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_chain_3d(exporter, tmp_path):
    model = torch.nn.Sequential(nn.Conv3d(2, 3, 3, stride=2), nn.ConvTranspose3d(3, 2, 3, stride=2),
                                nn.Conv3d(2, 2, 2, stride=(1, 2, 2), padding_mode="replicate"))
    nodes = check(model, 2, 3, exporter, tmp_path)
    assert [op for op, _ in nodes] == ["Conv", "ConvTranspose", "Pad", "Conv"]
    assert nodes[0][1]["auto_pad"] == b"SAME_UPPER"


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_plain_export_call(exporter, tmp_path):
    """torch.onnx.export(model, args, f) with no other argument (static shapes)."""
    model = torch.nn.Sequential(nn.Conv2d(3, 4, 3, stride=2), nn.ConvTranspose2d(4, 3, 3, stride=2)).eval()
    x = torch.randn(1, 3, 11, 9)
    path = tmp_path / "model.onnx"
    if exporter == "dynamo":
        pytest.importorskip("onnxscript")
        torch.onnx.export(model, (x,), str(path))
    else:
        torch.onnx.export(model, (x,), str(path), dynamo=False)
    with torch.no_grad():
        assert_runtime_matches(model, path, (1, 3), [(11, 9)])


def test_circular_needs_opset_19(tmp_path):
    layer = nn.Conv1d(2, 2, 3, padding_mode="circular").eval()
    with pytest.raises(ValueError, match=r"padding_mode='circular'.*opset >= 19.*opset_version=18"):
        torch.onnx.export(layer, (torch.randn(1, 2, 9),), str(tmp_path / "model.onnx"), dynamo=False,
                          opset_version=18)


def test_eager_unchanged_after_export(tmp_path):
    layer = nn.Conv2d(3, 4, 3, stride=2).eval()
    x = torch.randn(1, 3, 9, 9)
    before = layer(x)
    export(layer, x, tmp_path / "model.onnx", "torchscript")
    assert not torch.onnx.is_in_onnx_export()
    assert torch.equal(layer(x), before)
