"""The H100 roofline model of `python -m fastpad roofline` (fastpad/bench/roofline.py): its bytes and FLOPs against
hand-computed numbers and against the ops the eager F.pad + conv route really runs, its times, and the command."""
import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from fastpad.__main__ import main
from fastpad.bench import roofline
from fastpad.bench.layers import SUITE
from fastpad.cases import ConvCase
from fastpad.reference import F_PAD_MODE, f_pad_argument

# (case, FLOPs, fused bytes, pad copy bytes, conv bytes), by hand:
HAND_COMPUTED = [
    # Depthwise 'same' k3 s2 on 8x8: pads (0, 1), padded 9x9, output 4x4. Input 2*4*64 = 512 elements, padded
    # 2*4*81 = 648, weight 4*1*9 = 36, output 2*4*16 = 128; multiply-adds 128 * 9; 2 bytes each.
    (ConvCase(False, (8, 8), 4, 4, 3, 2, "same", groups=4, bias=False, dtype="bfloat16"),
     2 * 128 * 9, (512 + 36 + 128) * 2, (512 + 648) * 2, (648 + 36 + 128) * 2),
    # Dense 1x1 on 5x7: pads (0, 0), and F.pad still copies the input. Input 3*6*35 = 630, weight 10*6 = 60,
    # output 3*10*35 = 1050; multiply-adds 1050 * 6; 4 bytes each.
    (ConvCase(False, (5, 7), 6, 10, 1, 1, "same", batch=3, dtype="float32"),
     2 * 1050 * 6, (630 + 60 + 1050) * 4, (630 + 630) * 4, (630 + 60 + 1050) * 4),
    # Transposed k4 s2 'same' on 6: full output (6-1)*2 + 4 = 14, crop 1, output 12. Input 2*4*6 = 48, weight
    # 4*2*4 = 32, full 2*2*14 = 56, output 2*2*12 = 48; multiply-adds 48 * 2 * 4. Pad copy: F.pad copies the full
    # output (56 read, 56 written), then `+ bias` reads the cropped 48 and writes 48.
    (ConvCase(True, (6,), 4, 2, 4, 2, "same", dtype="bfloat16"),
     2 * 48 * 2 * 4, (48 + 32 + 48) * 2, (56 + 56 + 48 + 48) * 2, (48 + 32 + 56) * 2),
    # Transposed k1 s3 'same' on 9, no bias: full 8*3 + 1 = 25, output 27 from crop 0, so F.pad zero-extends the
    # full output to 27. Input 2*6*9 = 108, weight 6*4*1 = 24, full 2*4*25 = 200, output and extended 2*4*27 = 216.
    (ConvCase(True, (9,), 6, 4, 1, 3, "same", bias=False, dtype="float16"),
     2 * 108 * 4, (108 + 24 + 216) * 2, (200 + 216) * 2, (108 + 24 + 200) * 2),
]


@pytest.mark.parametrize("case, flops, fused_bytes, pad_copy_bytes, conv_bytes", HAND_COMPUTED,
                         ids=lambda value: value.describe() if isinstance(value, ConvCase) else "")
def test_bytes_and_flops_match_the_hand_computed_numbers(case, flops, fused_bytes, pad_copy_bytes, conv_bytes):
    model = roofline.roofline("hand", case)
    assert (model.flops, model.fused_bytes, model.pad_copy_bytes, model.conv_bytes) == (
        flops, fused_bytes, pad_copy_bytes, conv_bytes)


def test_predicted_times_bound_and_intensity_follow_the_roofline():
    depthwise = HAND_COMPUTED[0][0]  # 2304 FLOPs; fused 1352 bytes, pad copy 2320, conv 1624
    compute_bound = roofline.roofline("hand", depthwise, bandwidth=1e3, peak=1e3)
    assert compute_bound.fused_seconds == pytest.approx(2.304)
    assert compute_bound.pad_conv_seconds == pytest.approx(2.320 + 2.304)
    assert compute_bound.bound == "compute" and compute_bound.intensity == pytest.approx(2304 / 1352)
    memory_bound = roofline.roofline("hand", depthwise, bandwidth=1e3, peak=1e4)
    assert memory_bound.fused_seconds == pytest.approx(1.352)
    assert memory_bound.pad_conv_seconds == pytest.approx(2.320 + 1.624)
    assert memory_bound.bound == "memory" and memory_bound.best_ratio == pytest.approx(1.352 / 3.944)


class WrittenAndRead(TorchDispatchMode):
    """Elements each non-view op reads (its tensor arguments, the bias and views of it left out) and writes."""

    def __init__(self, bias):
        super().__init__()
        self.bias_tensors = [] if bias is None else [bias]
        self.ops = []  # (op name, elements read + written)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        output = func(*args, **(kwargs or {}))
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        from_bias = any(any(t is b for b in self.bias_tensors) for t in tensors)
        if func.is_view:
            if from_bias:
                self.bias_tensors.append(output)
        else:
            read = sum(t.numel() for t in tensors if not any(t is b for b in self.bias_tensors))
            self.ops.append((func.__name__, read + output.numel()))
        return output


def traced_pad_copy_and_conv_bytes(case):
    """(pad copy bytes, conv bytes) of the reference route, from the ops it runs on meta tensors."""
    x, w, b = case.random_inputs(device="meta")
    with WrittenAndRead(b) as trace:
        case.reference_function()(x, w, b)
    conv = [elements for name, elements in trace.ops if name.startswith("convolution")]
    assert len(conv) == 1, trace.ops
    element_bytes = case.torch_dtype.itemsize
    return (sum(elements for _, elements in trace.ops) - conv[0]) * element_bytes, conv[0] * element_bytes


@pytest.mark.parametrize("case", [entry[0] for entry in HAND_COMPUTED] + [layer.case for layer in SUITE],
                         ids=lambda case: case.describe())
def test_pad_copy_and_conv_bytes_are_what_the_reference_route_runs(case):
    model = roofline.roofline("traced", case)
    assert (model.pad_copy_bytes, model.conv_bytes) == traced_pad_copy_and_conv_bytes(case)


def test_symmetric_pads_still_cost_a_pad_copy_because_f_pad_always_copies():
    symmetric = [layer for layer in SUITE
                 if not layer.case.transposed and all(lo == hi for lo, hi in layer.case.pads())]
    assert {layer.name for layer in symmetric} >= {"tf_efficientnet_b0.dw_k5s1_c480", "resnet50.dense_k3s1_c64"}
    for layer in symmetric:
        case, (lo, _) = layer.case, layer.case.pads()[0]
        x = torch.randn(1, 2, *[8] * case.dims)
        for pads in ([(lo, lo)] * case.dims, [(0, 0)] * case.dims):
            padded = F.pad(x, f_pad_argument(pads), mode=F_PAD_MODE[case.padding_mode])
            assert padded.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
        padded_elements = case.batch * case.in_channels * math.prod(i + 2 * lo for i in case.size)
        input_elements = case.batch * case.in_channels * math.prod(case.size)
        pad_copy_bytes = (input_elements + padded_elements) * case.torch_dtype.itemsize
        assert roofline.roofline(layer.name, case).pad_copy_bytes == pad_copy_bytes > 0


@pytest.mark.parametrize("dtype, batch", [("bfloat16", 256), ("float32", 1), ("float16", 7)])
def test_fused_is_never_slower_than_f_pad_and_cudnn_on_the_suite(dtype, batch):
    for model in roofline.suite_rooflines(dtype=dtype, batch=batch):
        assert 0 < model.best_ratio <= 1, model.layer


def test_subset_leaves_out_only_the_dense_stride_one_2d_layers():
    left_out = [layer.name for layer in SUITE if not roofline.in_strided_depthwise_or_1d_subset(layer.case)]
    assert left_out == ["resnet50.dense_k3s1_c64", "even_kernel.k4s1_c64"]


def test_roofline_command_prints_every_suite_layer_and_writes_markdown(tmp_path, capsys):
    markdown = tmp_path / "roofline.md"
    assert main(["roofline", "--batch", "2", "--markdown", str(markdown)]) == 0
    printed = capsys.readouterr().out
    assert "bfloat16 (2 bytes/element), batch 2, bandwidth 3.00 TB/s, peak 989 TFLOP/s" in printed
    rows = [line for line in printed.splitlines() if line.startswith("| ")]
    assert [row.split(" | ")[0][2:] for row in rows[1:]] == [layer.name for layer in SUITE]
    assert f"geomean best ratio over all {len(SUITE)} layers: " in printed
    subset = sum(map(roofline.in_strided_depthwise_or_1d_subset, (layer.case for layer in SUITE)))
    assert f"geomean best ratio over the {subset} stride > 1, depthwise or 1-d layers: " in printed
    assert printed == markdown.read_text() + f"wrote {markdown}\n"


def test_roofline_command_options(capsys):
    assert main(["roofline", "--dtype", "float32", "--bandwidth", "2", "--peak", "400", "--layers", "stem"]) == 0
    printed = capsys.readouterr().out
    assert "float32 (4 bytes/element), batch 256, bandwidth 2.00 TB/s, peak 400 TFLOP/s" in printed
    assert "TF32" not in printed  # the note is for the default peak only
    assert sum(line.startswith("| ") and "stem" in line for line in printed.splitlines()) == 3
    assert main(["roofline", "--dtype", "float32", "--layers", "mamba"]) == 0
    assert "TF32" in capsys.readouterr().out
    assert main(["roofline", "--layers", "no_such_layer"]) == 2
    assert "no layer matches" in capsys.readouterr().err
