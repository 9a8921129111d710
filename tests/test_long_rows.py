"""Long rows (docs/DESIGN.md section 5): a row too long for a cache-sized buffer is split into column tiles, each with
the halo its taps read, so that no CPU buffer grows with the row (tests/test_memory.py measures the memory).

1-d rows several tiles long, and a 2-d channels-last image one row high, in every padding mode, with strides and
dilations, forward and backward, against the float64 reference. Each case asserts the kernel path it takes; the
comments say why its row is longer than that path's tile.
"""

import pytest
import torch

import fastpad
from code_paths import cpu_isa_limit, intra_op_threads, require_isa
from fastpad.cases import ConvCase, dtype_name
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
    """function's output and its gradients for every input match the reference's in float64, for a random
    grad_output, with the allocator poisoned before each fastpad call."""
    inputs_64 = [t.double() for t in inputs]
    with torch.no_grad():
        grad_output = torch.randn_like(reference(*inputs_64))
    expected, expected_grads = output_and_grads(reference, inputs_64, lambda _: grad_output)
    dtype = inputs[0].dtype
    poison(expected.shape, dtype)
    actual, grads = output_and_grads(function, inputs, lambda _: grad_output.to(dtype))
    assert_matches(actual, expected, dtype)
    for what, grad, expected_grad in zip(("input grad", "weight grad", "bias grad"), grads, expected_grads):
        assert_matches(grad, expected_grad, dtype, what=what)


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


# (channels in, out, length, kernel, stride, dilation, padding mode, dtype, ISA, kernel path of the forward op) of
# batch-1 1-d convs: one output row that fits its path's buffers whole, but whose 2^22 or more multiply-adds make
# the driver want bands for the threads (conv.cpp's thread_row_bands: one per 2^21, up to twice the threads over the
# other work items, here one image, one group and one block of output channels), so that PhasePlanes splits its
# columns instead (kMinThreadTileColumns or more a tile): the blocked kernel at AVX2 and AVX-512 (seed 6's random096,
# 162 -> 37 k4 'valid' over 597, ran on one of two threads), the tap tiles (7 input channels: a reduction of 28),
# strides, dilation, an uneven last tile, every padding mode.
ONE_ROW_FOR_THE_THREADS = [
    (162, 37, 597, 4, 1, 1, "circular", torch.float32, "avx512", "cpu_blocked_avx512"),
    (162, 37, 597, 4, 1, 1, "zeros", torch.float32, "avx2", "cpu_blocked_avx2"),
    (96, 40, 1001, 5, 2, 1, "reflect", torch.float32, "avx512", "cpu_blocked_avx512"),
    (64, 48, 700, 3, 1, 2, "replicate", torch.float32, "avx2", "cpu_blocked_avx2"),
    (7, 64, 2909, 4, 1, 1, "reflect", torch.float32, "avx512", "cpu_tap_tiles_avx512"),
    (7, 64, 7200, 4, 3, 1, "circular", torch.float32, "avx2", "cpu_tap_tiles_avx2"),
]


def thread_column_tiles(multiply_adds, out_w, threads):
    """The column tiles PhasePlanes splits one output row into for `threads` (2 or more) threads, where one image, one
    group and one block of output channels are the only other work item (a mirror of conv.cpp's thread_row_bands and
    thread_band_multiple, and of phase_planes.h's split)."""
    wanted = max(1, min(multiply_adds // 2**21, 2 * threads))
    return 1 if wanted == 1 else min(-(-wanted // threads) * threads, out_w // 64)


@pytest.mark.parametrize("case", ONE_ROW_FOR_THE_THREADS, ids=lambda case: f"{case[-1]}-{case[2]}-s{case[4]}-{case[6]}")
def test_one_row_split_for_the_threads(case):
    c_in, c_out, length, kernel, stride, dilation, mode, dtype, isa, path = case
    require_isa(isa)
    conv_case = ConvCase(False, (length,), c_in, c_out, kernel, stride=stride, dilation=dilation, padding="causal",
                         padding_mode=mode, batch=1, dtype=dtype_name(dtype))
    x, w, b = conv_case.random_inputs()
    out_w = (length - 1) // stride + 1
    assert thread_column_tiles(c_out * out_w * c_in * kernel, out_w, threads=2) > 1
    with intra_op_threads(2), cpu_isa_limit(isa):  # the split needs a second thread
        assert torch.ops.fastpad._conv_path(x, w, b, *conv_case.conv_op_arguments(), "cpu") == path
        assert_forward_backward(conv_case.fastpad_function(), conv_case.reference_function(), [x, w, b])
