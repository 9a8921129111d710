"""The phase-plane kernels (csrc/cpu/phase_planes.h) on the shapes that select them, forward and every gradient.

The general sweeps use 4-6 channels, which run the depthwise kernels or the column GEMM. Here: at least 16 channels
per group on both sides (one GEMM per tap, and its adjoint for the input gradient and the transposed conv), planes
large enough to be split into several bands, and non-finite weights (the adjoint GEMM must not turn the discarded
columns' zeros into NaN).
"""

from dataclasses import replace

import pytest
import torch

from fastpad.bench.op_calls import RecordFastpadOps
from fastpad.cases import ConvCase
from fastpad.reference import output_and_grads
from reference import PADDING_MODES, assert_matches, pads_supported, resolve_pads


def float64_case(transposed, size, c_in, c_out, kernel, **arguments):
    return ConvCase(transposed, size, c_in, c_out, kernel, dtype="float64", **arguments)


def check_output_and_grads(case, inputs=None):
    """fastpad's output and input, weight and bias gradients against the float64 reference, same grad_output, on
    `inputs` (default: fresh random ones of the case)."""
    x, w, b = inputs or case.random_inputs()
    grad_output = {}

    def draw(output):
        grad_output.setdefault("value", torch.randn_like(output))
        return grad_output["value"].to(output.dtype)

    mine, my_grads = output_and_grads(case.fastpad_function(), [x, w, b], draw)
    theirs, their_grads = output_and_grads(case.reference_function(), [x, w, b], draw)
    assert_matches(mine, theirs, what="output")
    for name, got, want in zip(("input grad", "weight grad", "bias grad"), my_grads, their_grads):
        assert_matches(got, want, what=name)


@pytest.mark.parametrize("mode", PADDING_MODES)
@pytest.mark.parametrize("stride, dilation", [(1, 1), (2, 1), (3, 2)])
@pytest.mark.parametrize("nd", (1, 2, 3))
def test_tap_gemms_every_mode(nd, stride, dilation, mode):
    size = {1: (23,), 2: (11, 14), 3: (6, 7, 9)}[nd]
    padding = "same"
    pads = resolve_pads(padding, size, (3,) * nd, stride, dilation)
    if not pads_supported(pads, size, mode):
        pytest.skip("F.pad cannot express these pads in this mode")
    case = float64_case(False, size, 16, 20, 3, stride=stride, padding=padding, dilation=dilation, padding_mode=mode)
    check_output_and_grads(case)
    if nd > 1:  # channels-last: the same tap GEMMs with the channels inside each position
        check_output_and_grads(replace(case, layout="channels_last"))


@pytest.mark.parametrize("padding", ["same", "same_lower", "valid"])
@pytest.mark.parametrize("nd, kernel, stride", [(1, 16, 8), (1, 4, 2), (2, 2, 2), (2, 4, 2), (2, 3, 1), (3, 2, 2),
                                                (3, 3, 2)])
def test_transposed_tap_gemms(nd, kernel, stride, padding):
    """At least 256 positions per (H, W) slice of the transposed input, so the tap-GEMM adjoint runs."""
    size = {1: (260,), 2: (16, 17), 3: (2, 16, 17)}[nd]
    check_output_and_grads(float64_case(True, size, 32, 16, kernel, stride=stride, padding=padding, groups=2,
                                        batch=1))


@pytest.mark.parametrize("mode", ["zeros", "reflect"])
@pytest.mark.parametrize("channels, groups", [(16, 1), (8, 8)], ids=["dense", "depthwise"])
def test_several_bands(channels, groups, mode):
    """Planes big enough that a thread's buffer holds only part of them: bands with halo rows, a short last band."""
    size = (300, 300) if groups > 1 else (300, 53)
    check_output_and_grads(float64_case(False, size, channels, channels, 5, stride=2, groups=groups, padding_mode=mode,
                                        batch=1))
    check_output_and_grads(float64_case(True, (size[0] // 2, size[1]), channels, channels, 4, stride=2, groups=groups,
                                        batch=1))


@pytest.mark.parametrize("stride", [2, 1])
@pytest.mark.parametrize("padding, mode", [("valid", "zeros"), ("same", "reflect")])
@pytest.mark.parametrize("in_channels, out_channels, groups, path", [
    (16, 16, 1, None), (4, 4, 4, "cpu_depthwise"), (4, 8, 4, "cpu_depthwise"), (12, 6, 3, "cpu_grouped_planes")],
    ids=["dense", "depthwise", "depthwise_multiplier", "grouped_few_channels"])
def test_non_finite_weight_poisons_only_what_it_reaches(in_channels, out_channels, groups, path, padding, mode,
                                                        stride):
    """An inf weight gives the input gradient NaN/inf exactly where the reference has them. The discarded columns
    of a band reach input columns that no output reads (width 30, k3, s2, 'valid': column 29) or, in reflect
    mode, fold back onto real ones; they must add nothing there. The depthwise (and grouped few-channel) input
    gradient sums each phase plane over the taps that read it, so a product with a position outside the band's
    outputs must add nothing either."""
    case = float64_case(False, (40, 30), in_channels, out_channels, 3, stride=stride, padding=padding, groups=groups,
                        padding_mode=mode, batch=1)
    x, w, b = case.random_inputs()
    w[0, 0, 1, 1] = float("inf")
    grads = []
    for function in (case.fastpad_function(), case.reference_function()):
        leaf = x.clone().requires_grad_()
        with RecordFastpadOps() as record:
            output = function(leaf, w, b)
            output.backward(torch.ones_like(output))
        grads.append(leaf.grad)
        if path and record.calls:
            paths = {torch.ops.fastpad._conv_transpose_path(*args, "cpu") for op, args in record.calls
                     if op == "conv_transpose"}
            assert paths == {path}
    mine, theirs = grads
    assert not theirs.isfinite().all() and theirs.isfinite().any()
    assert torch.equal(mine.isfinite(), theirs.isfinite())
    finite = theirs.isfinite()
    torch.testing.assert_close(mine[finite], theirs[finite])


@pytest.mark.parametrize("column", [29, 10], ids=["unread", "read"])
@pytest.mark.parametrize("in_channels, out_channels, groups, path", [
    (16, 16, 1, "cpu_phase_planes"), (4, 4, 4, "cpu_depthwise"), (8, 8, 4, "cpu_tap_dots")])
def test_non_finite_input_reaches_only_the_weight_gradients_that_read_it(in_channels, out_channels, groups, path,
                                                                         column):
    """An inf in the input gives the weight gradient NaN/inf exactly where the reference has them. Width 30, k3, s2,
    'valid': no output reads column 29, but a band's discarded column gathers it into a tap; a product with it must
    add nothing (the tap-dot kernels sum again with masks once a sum comes out non-finite). Column 10 is read."""
    case = float64_case(False, (40, 30), in_channels, out_channels, 3, stride=2, padding="valid", groups=groups,
                        batch=2)
    x, w, b = case.random_inputs()
    x[1, 1, 7, column] = float("inf")
    grads = []
    for function in (case.fastpad_function(), case.reference_function()):
        weight = w.clone().requires_grad_()
        with RecordFastpadOps() as record:
            output = function(x, weight, b)
            output.backward(torch.randn_like(output, generator=torch.Generator().manual_seed(0)))
        grads.append(weight.grad)
        if record.calls:
            paths = {torch.ops.fastpad._conv_weight_grad_path(*args, "cpu") for op, args in record.calls
                     if op == "conv_weight_grad"}
            assert paths == {path}
    mine, theirs = grads
    assert theirs.isfinite().all() == (column == 29)
    assert torch.equal(mine.isfinite(), theirs.isfinite())
    finite = theirs.isfinite()
    torch.testing.assert_close(mine[finite], theirs[finite])


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("mode", PADDING_MODES)
@pytest.mark.parametrize("kernel, stride", [(3, 2), (7, 2), (4, 1)])
def test_direct_kernels_few_input_channels(kernel, stride, mode, channels_last):
    """Stem-like layers (3 input channels) run the direct kernels; 40 output channels cover a full register block of
    output channels and a partial one (channels_last: four vectors, then one)."""
    size = (19, 22)
    pads = resolve_pads("same", size, (kernel, kernel), stride, 1)
    if not pads_supported(pads, size, mode):
        pytest.skip("F.pad cannot express these pads in this mode")
    check_output_and_grads(float64_case(False, size, 3, 40, kernel, stride=stride, padding_mode=mode,
                                        layout="channels_last" if channels_last else "contiguous"))
