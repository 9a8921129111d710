"""Long rows (docs/DESIGN.md section 5): a row too long for a cache-sized buffer is split into column tiles, each with
the halo its taps read, so that no CPU buffer grows with the row (tests/test_memory.py measures the memory).

1-d rows several tiles long, and a 2-d channels-last image one row high, in every padding mode, with strides and
dilations, forward and backward, against the float64 reference. Each case asserts the kernel path it takes; the
comments say why its row is longer than that path's tile.
"""

import pytest
import torch

import fastpad
from fastpad.cases import ConvCase
from fastpad.reference import output_and_grads
from reference import assert_matches, expected_conv, poison

# (transposed, channels in, out, groups, length at stride 1, kernel path of the forward op), a 5-tap kernel: each row
# is at least twice its path's tile. Tap GEMMs: 1 MiB / (16 channels x 4 B x phases + 16 x 4 B) <= 8192 columns;
# column GEMM (3 channels): 1 MiB / ((8 + 3 x 5 taps) x 4 B + 3 x 4 B x phases) <= 10082; NCHW depthwise:
# 256 KiB / (4 B x phases) <= 65536; transposed GEMM + col2im (8 output channels): 512 KiB / (8 x 5 taps x 4 B) = 3276
# pixels; transposed phase planes: 1 MiB / (16 x 4 B + 16 x 4 B x phases) <= 8192. The weight gradient's 4 MiB bands
# tile the 40,000-long rows.
LONG_ROWS = {
    "tap_gemms": (False, 16, 16, 1, 40_000, "cpu_tap_gemms"),
    "column_gemm": (False, 3, 8, 1, 40_000, "cpu_column_gemm"),
    "depthwise": (False, 2, 4, 2, 150_000, "cpu_depthwise"),
    "transposed_col2im": (True, 4, 8, 1, 12_000, "cpu_gemm_col2im"),
    "transposed_phase_planes": (True, 16, 16, 1, 40_000, "cpu_phase_planes"),
}


def assert_forward_backward(function, reference, inputs):
    """function's output and its gradients for every input match the reference's, for a random grad_output, with
    the allocator poisoned before each fastpad call."""
    with torch.no_grad():
        grad_output = torch.randn_like(reference(*inputs))
    expected, expected_grads = output_and_grads(reference, inputs, lambda _: grad_output)
    poison(expected.shape, expected.dtype)
    actual, grads = output_and_grads(function, inputs, lambda _: grad_output)
    assert_matches(actual, expected)
    for what, grad, expected_grad in zip(("input grad", "weight grad", "bias grad"), grads, expected_grads):
        assert_matches(grad, expected_grad, what=what)


@pytest.mark.parametrize("padding_mode", ["zeros", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("stride, dilation", [(1, 1), (2, 1), (3, 2)])
@pytest.mark.parametrize("name", LONG_ROWS)
def test_long_1d_rows(name, stride, dilation, padding_mode):
    transposed, c_in, c_out, groups, length, path = LONG_ROWS[name]
    if transposed and padding_mode != "zeros":
        pytest.skip("transposed convolutions pad with zeros only")
    # 'causal' pads and crops of 1 and 2 are never ones torch's own convolution expresses (kernel_paths.h).
    case = ConvCase(transposed, (length // stride,), c_in, c_out, 5, stride=stride, dilation=dilation, groups=groups,
                    padding=((1, 2),) if transposed else "causal", padding_mode=padding_mode, dtype="float64")
    x, w, b = case.random_inputs()
    if transposed:
        crop_lo, out_size = case.crops()
        taken = torch.ops.fastpad._conv_transpose_path(x, w, b, [stride], crop_lo, out_size, [dilation], groups,
                                                       "zeros", "cpu")
    else:
        taken = torch.ops.fastpad._conv_path(x, w, b, *case.conv_op_arguments(), "cpu")
    assert taken == path
    assert_forward_backward(case.fastpad_function(), case.reference_function(), [x, w, b])


@pytest.mark.parametrize("padding_mode", ["zeros", "reflect"])
def test_long_row_of_a_channels_last_image(padding_mode):
    """A 2-d channels-last image one row high and 40,000 wide: the channels-last phase planes
    (1 MiB / (16 x 4 B x 2 phases + 16 x 4 B) = 10922 columns) tile it, stride 2 along W, pads (2, 1)."""
    x = torch.randn(2, 16, 1, 40_000, dtype=torch.float64).to(memory_format=torch.channels_last)
    w = torch.randn(16, 16, 1, 4, dtype=torch.float64)
    kwargs = dict(stride=(1, 2), padding=((0, 0), (2, 1)), padding_mode=padding_mode)
    assert torch.ops.fastpad._conv_path(x, w, None, [1, 2], [0, 2], [0, 1], [1, 1], 1, padding_mode,
                                        "cpu") == "cpu_channels_last_phase_planes"
    assert_forward_backward(lambda *t: fastpad.conv2d(*t, **kwargs), lambda *t: expected_conv(*t, **kwargs), [x, w])
