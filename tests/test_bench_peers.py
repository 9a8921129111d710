"""The peers of `python -m fastpad bench` (fastpad/bench/peers.py): the one-node ONNX model against the reference,
the multiply-add count behind "% peak", the bookkeeping of a peer that cannot run or is wrong, and one bench run
with the peers."""
import json
import math

import pytest
import torch

from fastpad.bench import peers, runner
from fastpad.bench.layers import Layer
from fastpad.bench.random_layers import random_layers
from fastpad.cases import ConvCase
from fastpad.reference import TF32_TOLERANCE, relative_error, tolerance

# Asymmetric pads, stride 2, dilation, groups, 1-d and 3-d, and transposed layers whose crop is an end pad, an
# output_padding (k_eff < stride: the output reaches past the full output) or explicit.
ONNX_CASES = [
    ConvCase(False, (17, 12), 4, 6, 3, 2, ((0, 2), (1, 0))),
    ConvCase(False, (15, 16), 4, 6, 3, 2, "same", dilation=2, groups=2),
    ConvCase(False, (14, 14), 8, 8, 5, 2, "same", groups=8, bias=False),
    ConvCase(False, (40,), 6, 6, 4, 1, "causal", dilation=2, groups=3),
    ConvCase(False, (9, 8, 7), 3, 4, 3, 2, "same"),
    ConvCase(True, (9, 10), 6, 4, 4, 2, "same", groups=2),
    ConvCase(True, (12,), 6, 4, 16, 8, "same"),
    ConvCase(True, (9,), 6, 4, 1, 3, "same"),
    ConvCase(True, (9,), 6, 4, 3, 2, "same", output_padding=1, bias=False),
    ConvCase(True, (7, 9), 4, 6, (3, 2), (2, 1), ((2, 0), (0, 1)), dilation=(1, 2)),
]


def onnxruntime_or_skip():
    if peers.onnxruntime_version() is None:
        pytest.skip("onnxruntime (or onnx) is not installed")


@pytest.mark.parametrize("case", ONNX_CASES, ids=lambda case: case.describe())
def test_one_node_onnx_model_agrees_with_the_reference_in_float32(case):
    onnxruntime_or_skip()
    x, w, b = case.random_inputs(torch.Generator().manual_seed(0))
    inputs = [x, w] + ([b] if case.bias else [])
    expected = runner.reference_output(case, inputs)
    peer = peers.OnnxRuntimeConv(case, x, w, b, expected.shape, threads=1)
    peer.run()
    assert relative_error(peer.output(), expected) <= 1e-5
    op_type, attributes = peers.onnx_node(case)
    assert op_type == ("ConvTranspose" if case.transposed else "Conv")
    assert "auto_pad" not in attributes and len(attributes["pads"]) == 2 * case.dims


def test_onnx_node_carries_the_per_side_pads():
    """ONNX pads are [x1_begin, x2_begin, x1_end, x2_end]: here (0, 2) and (1, 0) per dimension."""
    _, attributes = peers.onnx_node(ONNX_CASES[0])
    assert attributes["pads"] == [0, 1, 2, 0]
    # Transposed k4 s2 'same' on 9: full output 20, fastpad keeps [1, 19), so the end pad is 1 and nothing is added.
    _, attributes = peers.onnx_node(ConvCase(True, (9,), 2, 2, 4, 2, "same"))
    assert attributes["pads"] == [1, 1] and attributes["output_padding"] == [0]
    # k1 s3 'same' on 9: full output 25, fastpad keeps 27 positions from 0: an output_padding of 2.
    _, attributes = peers.onnx_node(ConvCase(True, (9,), 2, 2, 1, 3, "same"))
    assert attributes["pads"] == [0, 0] and attributes["output_padding"] == [2]


@pytest.mark.parametrize("case, why", [
    (ConvCase(False, (20,), 2, 2, 3, 1, "same", padding_mode="reflect"), "Pad node"),
    (ConvCase(False, (8, 8), 2, 2, 3, 1, "same", padding_mode="circular"), "Pad node"),
    # k1 s2 'same' with output_padding 1: 2 positions past the full output, and onnxruntime takes < stride only.
    (ConvCase(True, (5,), 2, 2, 1, 2, "same", output_padding=1), "output_padding < stride"),
])
def test_cases_one_onnx_node_cannot_express_are_unavailable(case, why):
    with pytest.raises(peers.PeerUnavailable, match=why):
        peers.onnx_node(case)


def test_a_wrong_onnxruntime_output_is_refused():
    onnxruntime_or_skip()
    case = ONNX_CASES[0]
    x, w, b = case.random_inputs(torch.Generator().manual_seed(0))
    expected = runner.reference_output(case, [x, w, b])
    peers.onnxruntime_conv(case, [x, w, b], expected, threads=1)  # right: no exception
    with pytest.raises(peers.PeerWrong, match="off the float64 reference"):
        peers.onnxruntime_conv(case, [x, w, b], expected * (1 + 1e-4), threads=1)


def test_multiply_adds_by_hand():
    # tf_efficientnet_b0 stem: 8 x 32 outputs of 112 x 112 ('same', stride 2 on 224), 3 input channels, 3 x 3 taps.
    assert peers.multiply_adds(ConvCase(False, (224, 224), 3, 32, 3, 2, "same", batch=8)) == 86_704_128
    # Depthwise 96 channels, 112 -> 56: 8 * 96 * 56 * 56 * 1 * 9.
    assert peers.multiply_adds(ConvCase(False, (112, 112), 96, 96, 3, 2, "same", groups=96, batch=8)) == 21_676_032
    # 3-d, groups 2, explicit pads: outputs (10 + 1 - 3) // 2 + 1 = 5, 9 - 2 + 1 = 8, 8; 2 * 6 * 5 * 8 * 8 * 2 * 6.
    assert peers.multiply_adds(ConvCase(False, (10, 9, 8), 4, 6, (3, 2, 1), (2, 1, 1), ((1, 0), (0, 0), (0, 0)),
                                        groups=2, batch=2)) == 46_080
    # Transposed (HiFi-GAN k16 s8): every input element of 16 x 512 x 32 meets 256 outputs channels x 16 taps.
    assert peers.multiply_adds(ConvCase(True, (32,), 512, 256, 16, 8, "same", batch=16)) == 1_073_741_824


def test_multiply_adds_match_torch_flop_counter_on_random_layers():
    """torch's FLOP counter (2 per multiply-add) on the reference's convolution, for layers of every kind."""
    from torch.utils.flop_counter import FlopCounterMode

    for layer in random_layers(20, seed=3):
        case = layer.case
        x, w, b = case.random_inputs(device="meta")
        with FlopCounterMode(display=False) as counter:
            case.reference_function()(x, w, b)
        assert 2 * peers.multiply_adds(case) == counter.get_total_flops(), case.describe()


def test_fma_peak_is_measured_with_a_vector_isa(monkeypatch):
    """Positive and finite with AVX2 or AVX-512; None on a CPU without them (here: capped at the baseline)."""
    if torch.ops.fastpad._cpu_isa() != "baseline":
        peak = peers.fma_peak_gflops(0.05)
        assert math.isfinite(peak) and 0 < peak < 1e5
    monkeypatch.setenv("FASTPAD_CPU_ISA", "baseline")
    assert peers.fma_peak_gflops(0.05) is None


TINY_LAYER = Layer("tiny.dw_k3s2", "test", ConvCase(False, (12, 12), 4, 4, 3, 2, "same", groups=4, batch=1))
TINY_SETTINGS = runner.Settings(torch.device("cpu"), torch.float32, None, False, runner.QUICK_EFFORT)


def test_a_peer_that_fails_shows_no_time_and_its_reason_once(monkeypatch):
    """Compilation failing in both modes (as without a C++ compiler): no compile time, one reason, two places."""
    def no_compiler(function):
        raise RuntimeError("no C++ compiler found\nmore detail")

    monkeypatch.setattr(peers, "compiled", no_compiler)
    notes = runner.PeerNotes()
    measurements = runner.measure_layer(TINY_LAYER, TINY_SETTINGS, lambda phase: None, notes)
    assert [m.compile_ms for m in measurements] == [None, None]
    assert all(m.fastpad_ms > 0 and m.floor_ms > 0 for m in measurements)
    entries = notes.context_entries()
    assert entries["compile not timed"] == ("RuntimeError: no C++ compiler found "
                                            "(tiny.dw_k3s2 forward, tiny.dw_k3s2 fwd+bwd)")
    assert not notes.wrong


def test_without_peers_the_table_has_only_the_old_columns():
    settings = runner.replace(TINY_SETTINGS, peers="none")
    measurements = runner.measure_layer(TINY_LAYER, settings, lambda phase: None)
    assert all(m.compile_ms is None and m.onnxruntime_ms is None for m in measurements)
    headers, rows = runner.table(runner.run_context(settings, "test"), measurements)
    assert headers == runner.TABLE_HEADERS and all(len(row) == len(headers) for row in rows)


def test_bench_with_peers_gives_compile_and_onnxruntime_columns(tmp_path, capsys, monkeypatch):
    """One quick layer with --peers all: finite positive peer times and ratios (ORT: forward only), their geomeans,
    and "% peak" of both modes from the FMA peak (here a fixed 100 GFLOP/s, so the percentage can be checked)."""
    onnxruntime_or_skip()
    monkeypatch.setattr(peers, "fma_peak_gflops", lambda seconds: 100.0)
    json_path, markdown_path = tmp_path / "run.json", tmp_path / "run.md"
    status = runner.main(device="cpu", dtype="float32", batch=1, layers="tf_efficientnet_b0.dw_k5s2_c672",
                         channels_last=False, quick=True, json_path=str(json_path), markdown_path=str(markdown_path),
                         png_path=None, out_dir=None, peers="all")
    printed = capsys.readouterr().out
    assert status == 0, printed
    rows = json.loads(json_path.read_text())
    forward, backward = rows["results"]
    assert (forward["mode"], backward["mode"]) == ("forward", "fwd+bwd")
    for row in (forward, backward):
        for key in ("compile_ms", "ratio_to_compile"):
            assert math.isfinite(row[key]) and row[key] > 0, (key, row)
        assert row["ratio_to_compile"] == pytest.approx(row["fastpad_ms"] / row["compile_ms"])
    for key in ("onnxruntime_ms", "ratio_to_onnxruntime"):
        assert math.isfinite(forward[key]) and forward[key] > 0, (key, forward)
    assert backward["onnxruntime_ms"] is None and backward["ratio_to_onnxruntime"] is None
    case = ConvCase(False, (14, 14), 672, 672, 5, 2, "same", groups=672, batch=1, bias=False)
    for row, convolutions in ((forward, 1), (backward, 3)):  # fwd+bwd: the forward, the input and weight gradients
        expected_percent = 100 * 2 * convolutions * peers.multiply_adds(case) / (row["fastpad_ms"] * 1e-3) / 100e9
        assert row["percent_of_fma_peak"] == pytest.approx(expected_percent)
    assert rows["context"]["fma_peak"].startswith("100.0 GFLOP/s (float32, ")
    assert "not timed" not in json.dumps(rows["context"])
    header = markdown_path.read_text().splitlines()[next(
        i for i, line in enumerate(markdown_path.read_text().splitlines()) if line.startswith("| layer"))]
    assert header.endswith("| max rel. error | fastpad/compile | fastpad/ORT | % peak |")
    assert "FMA peak: 100.0 GFLOP/s" in printed
    assert "geomean fastpad/compile = " in printed and "geomean fastpad/ORT = " in printed


def test_float32_on_cuda_is_judged_to_the_tf32_tolerance_while_torch_allows_tf32(tf32):
    """torch lets cuDNN (and so fastpad) run float32 convs on TF32 by default; the bench then judges CUDA float32
    results to TF32's tolerance, and every other device and dtype to the table's."""
    assert tolerance(torch.float32, "cuda") == tolerance(torch.float32, torch.device("cuda:1")) == TF32_TOLERANCE
    assert tolerance(torch.float32, "cpu") == tolerance(torch.float32) == 1e-5
    assert tolerance(torch.bfloat16, "cuda") == tolerance(torch.bfloat16) == 1e-2
    torch.backends.cudnn.allow_tf32 = False
    assert tolerance(torch.float32, "cuda") == 1e-5


def test_the_ops_breakdown_times_each_op_call_with_its_kernel_path(capsys):
    """benchmarks/ops.py: the layer's forward, forward+backward and each fastpad op call of them, each with a time,
    the op calls with the kernel path the private path ops report for them."""
    from benchmarks import ops

    assert ops.main(["--device", "cpu", "--layers", "even_kernel", "--batch", "1", "--quick"]) == 0
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines() if line.startswith("| even_kernel")]
    steps = [row[1].strip() for row in rows]
    assert steps == ["forward", "fwd+bwd", "1. conv", "2. conv_transpose", "3. conv_weight_grad"]
    for row in rows:
        assert float(row[3]) > 0
    assert all(row[2].strip().startswith("cpu_") for row in rows[2:])
