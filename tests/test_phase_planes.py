"""The phase-plane kernels (csrc/cpu/phase_planes.h) on the shapes that select them, forward and every gradient.

The general sweeps use 4-6 channels, which run the depthwise kernels or the column GEMM. Here: at least 16 channels
per group on both sides (one GEMM per tap, and its adjoint for the input gradient and the transposed conv), planes
large enough to be split into several bands, and non-finite weights (the adjoint GEMM must not turn the discarded
columns' zeros into NaN).
"""

import pytest
import torch

from fastpad.reference import ConvCall, output_and_grads
from reference import assert_matches, pads_supported, resolve_pads

MODES = ("zeros", "reflect", "replicate", "circular")
CHANNELS_LAST = {2: torch.channels_last, 3: torch.channels_last_3d}


def check_output_and_grads(call, x, w, b):
    """fastpad's output and input, weight and bias gradients against the float64 reference, same grad_output."""
    grad_output = {}

    def draw(output):
        grad_output.setdefault("value", torch.randn_like(output))
        return grad_output["value"].to(output.dtype)

    mine, my_grads = output_and_grads(call.fastpad_function(), [x, w, b], draw)
    theirs, their_grads = output_and_grads(call.reference_function(x.shape[2:]), [x, w, b], draw)
    assert_matches(mine, theirs, what="output")
    for name, got, want in zip(("input grad", "weight grad", "bias grad"), my_grads, their_grads):
        assert_matches(got, want, what=name)


def inputs(c_in, c_out, size, kernel, groups, transposed=False, batch=2):
    nd = len(size)
    w_shape = (c_in, c_out // groups) if transposed else (c_out, c_in // groups)
    x = torch.randn((batch, c_in) + tuple(size), dtype=torch.float64)
    w = torch.randn(w_shape + (kernel,) * nd, dtype=torch.float64)
    return x, w, torch.randn(c_out, dtype=torch.float64)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("stride, dilation", [(1, 1), (2, 1), (3, 2)])
@pytest.mark.parametrize("nd", (1, 2, 3))
def test_tap_gemms_every_mode(nd, stride, dilation, mode):
    size = {1: (23,), 2: (11, 14), 3: (6, 7, 9)}[nd]
    padding = "same"
    pads = resolve_pads(padding, size, (3,) * nd, stride, dilation)
    if not pads_supported(pads, size, mode):
        pytest.skip("F.pad cannot express these pads in this mode")
    x, w, b = inputs(16, 20, size, 3, groups=1)
    call = ConvCall(False, nd, (3,) * nd, stride, padding, dilation, 1, mode)
    check_output_and_grads(call, x, w, b)
    if nd > 1:  # channels-last: the same tap GEMMs with the channels inside each position
        check_output_and_grads(call, x.contiguous(memory_format=CHANNELS_LAST[nd]), w, b)


@pytest.mark.parametrize("padding", ["same", "same_lower", "valid"])
@pytest.mark.parametrize("nd, kernel, stride", [(1, 16, 8), (1, 4, 2), (2, 2, 2), (2, 4, 2), (2, 3, 1), (3, 2, 2),
                                                (3, 3, 2)])
def test_transposed_tap_gemms(nd, kernel, stride, padding):
    """At least 256 positions per (H, W) slice of the transposed input, so the tap-GEMM adjoint runs."""
    size = {1: (260,), 2: (16, 17), 3: (2, 16, 17)}[nd]
    x, w, b = inputs(32, 16, size, kernel, groups=2, transposed=True, batch=1)
    check_output_and_grads(ConvCall(True, nd, (kernel,) * nd, stride, padding, 1, 2), x, w, b)


@pytest.mark.parametrize("mode", ["zeros", "reflect"])
@pytest.mark.parametrize("channels, groups", [(16, 1), (8, 8)], ids=["dense", "depthwise"])
def test_several_bands(channels, groups, mode):
    """Planes big enough that a thread's buffer holds only part of them: bands with halo rows, a short last band."""
    size = (300, 300) if groups > 1 else (300, 53)
    x, w, b = inputs(channels, channels, size, 5, groups, batch=1)
    check_output_and_grads(ConvCall(False, 2, (5, 5), 2, "same", 1, groups, mode), x, w, b)
    xt, wt, bt = inputs(channels, channels, (size[0] // 2, size[1]), 4, groups, transposed=True, batch=1)
    check_output_and_grads(ConvCall(True, 2, (4, 4), 2, "same", 1, groups), xt, wt, bt)


@pytest.mark.parametrize("padding, mode", [("valid", "zeros"), ("same", "reflect")])
@pytest.mark.parametrize("channels, groups", [(16, 1), (4, 4)], ids=["dense", "depthwise"])
def test_non_finite_weight_poisons_only_what_it_reaches(channels, groups, padding, mode):
    """An inf weight gives the input gradient NaN/inf exactly where the reference has them. The discarded columns
    of a band reach input columns that no output reads (width 30, k3, s2, 'valid': column 29) or, in reflect
    mode, fold back onto real ones; they must add nothing there."""
    x, w, b = inputs(channels, channels, (40, 30), 3, groups, batch=1)
    w[0, 0, 1, 1] = float("inf")
    call = ConvCall(False, 2, (3, 3), 2, padding, 1, groups, mode)
    grads = []
    for function in (call.fastpad_function(), call.reference_function(x.shape[2:])):
        leaf = x.clone().requires_grad_()
        output = function(leaf, w, b)
        output.backward(torch.ones_like(output))
        grads.append(leaf.grad)
    mine, theirs = grads
    assert not theirs.isfinite().all() and theirs.isfinite().any()
    assert torch.equal(mine.isfinite(), theirs.isfinite())
    finite = theirs.isfinite()
    torch.testing.assert_close(mine[finite], theirs[finite])


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kernel, stride", [(3, 2), (7, 2), (4, 1)])
def test_direct_kernels_few_input_channels(kernel, stride, mode, channels_last):
    """Stem-like layers (3 input channels) run the direct kernels; 40 output channels cover a full register block of
    output channels and a partial one (channels_last: four vectors, then one)."""
    size = (19, 22)
    pads = resolve_pads("same", size, (kernel, kernel), stride, 1)
    if not pads_supported(pads, size, mode):
        pytest.skip("F.pad cannot express these pads in this mode")
    x, w, b = inputs(3, 40, size, kernel, groups=1)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    check_output_and_grads(ConvCall(False, 2, (kernel, kernel), stride, "same", 1, 1, mode), x, w, b)
