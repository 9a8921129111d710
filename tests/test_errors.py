"""Bad input raises a clear exception naming the argument and its value, and never crashes
(issue 2, section 6). Public functions raise ValueError / TypeError; direct op calls RuntimeError."""

import contextlib
import re

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import fastpad
from fastpad.reference import reference_conv, reference_conv_transpose

ops = torch.ops.fastpad


def randn(*shape, dtype=torch.float32, device="cpu"):
    return torch.randn(shape, dtype=dtype, device=device)


X = lambda: randn(1, 4, 8, 8)  # noqa: E731  [N, C_in=4, 8, 8]
W = lambda: randn(6, 4, 3, 3)  # noqa: E731  [C_out=6, C_in=4, 3, 3]
WT = lambda: randn(4, 6, 3, 3)  # noqa: E731  transposed: [C_in=4, C_out=6, 3, 3]

# name: (callable, exception type, regex of the argument's name, a string the message must show (the value))
PUBLIC_CASES = {
    "channel_mismatch": (lambda: fastpad.conv2d(randn(1, 5, 8, 8), W()), ValueError, r"input|weight|channel", "5"),
    "transposed_channel_mismatch": (lambda: fastpad.conv_transpose2d(randn(1, 5, 8, 8), WT()), ValueError,
                                    r"input|weight|channel", "5"),
    "groups_not_dividing_c_in": (lambda: fastpad.conv2d(X(), randn(6, 1, 3, 3), groups=3), ValueError,
                                 r"groups|weight|input", "3"),
    "groups_not_dividing_c_out": (lambda: fastpad.conv2d(X(), randn(6, 1, 3, 3), groups=4), ValueError,
                                  r"groups", "4"),
    "groups_zero": (lambda: fastpad.conv2d(X(), W(), groups=0), ValueError, r"groups", "0"),
    "stride_zero": (lambda: fastpad.conv2d(X(), W(), stride=0), ValueError, r"stride", "0"),
    "stride_negative": (lambda: fastpad.conv2d(X(), W(), stride=(1, -2)), ValueError, r"stride", "-2"),
    "dilation_zero": (lambda: fastpad.conv2d(X(), W(), dilation=0), ValueError, r"dilation", "0"),
    "transposed_stride_zero": (lambda: fastpad.conv_transpose2d(X(), WT(), stride=0), ValueError, r"stride", "0"),
    "transposed_dilation_negative": (lambda: fastpad.conv_transpose2d(X(), WT(), dilation=-1), ValueError,
                                     r"dilation", "-1"),
    "negative_int_pad": (lambda: fastpad.conv2d(X(), W(), padding=-1), ValueError, r"padding", "-1"),
    "negative_pair_pad": (lambda: fastpad.conv2d(X(), W(), padding=((0, -3), (1, 1))), ValueError, r"padding", "-3"),
    "negative_crop": (lambda: fastpad.conv_transpose2d(X(), WT(), padding=-2), ValueError, r"padding", "-2"),
    "negative_crop_pair": (lambda: fastpad.conv_transpose2d(X(), WT(), padding=((0, 0), (-1, 0))), ValueError,
                           r"padding", "-1"),
    "unknown_padding_string": (lambda: fastpad.conv2d(X(), W(), padding="full"), ValueError, r"padding", "full"),
    "unknown_padding_mode": (lambda: fastpad.conv2d(X(), W(), padding_mode="mirror"), ValueError, r"padding_mode",
                             "mirror"),
    "too_few_pad_pairs": (lambda: fastpad.conv2d(X(), W(), padding=((1, 1),)), ValueError, r"padding", "(1, 1)"),
    "too_many_pad_pairs": (lambda: fastpad.conv1d(randn(1, 4, 8), randn(6, 4, 3), padding=((1, 1), (2, 2))),
                           ValueError, r"padding", "(2, 2)"),
    "pad_triple": (lambda: fastpad.conv2d(X(), W(), padding=((1, 1, 1), (1, 1))), ValueError, r"padding", "(1, 1, 1)"),
    "too_many_pad_ints": (lambda: fastpad.conv2d(X(), W(), padding=(1, 2, 3)), ValueError, r"padding", "(1, 2, 3)"),
    "too_many_strides": (lambda: fastpad.conv2d(X(), W(), stride=(1, 2, 2)), ValueError, r"stride", "(1, 2, 2)"),
    "too_few_dilations": (lambda: fastpad.conv3d(randn(1, 4, 5, 5, 5), randn(6, 4, 3, 3, 3), dilation=(1, 2)),
                          ValueError, r"dilation", "(1, 2)"),
    "too_many_output_paddings": (lambda: fastpad.conv_transpose2d(X(), WT(), stride=2, output_padding=(1, 1, 1)),
                                 ValueError, r"output_padding", "(1, 1, 1)"),
    "input_rank": (lambda: fastpad.conv2d(randn(4, 8, 8), W()), ValueError, r"input", "(4, 8, 8)"),
    "weight_rank": (lambda: fastpad.conv2d(X(), randn(6, 4, 3)), ValueError, r"weight", "(6, 4, 3)"),
    "conv1d_on_4d": (lambda: fastpad.conv1d(X(), W()), ValueError, r"input|weight", "(1, 4, 8, 8)"),
    "transposed_input_rank": (lambda: fastpad.conv_transpose3d(X(), WT()), ValueError, r"input|weight",
                              "(1, 4, 8, 8)"),
    "bias_shape": (lambda: fastpad.conv2d(X(), W(), randn(5)), ValueError, r"bias", "(5,)"),
    "dtype_mismatch": (lambda: fastpad.conv2d(X(), W().double()), TypeError, r"weight|dtype", "float64"),
    "bias_dtype_mismatch": (lambda: fastpad.conv2d(X(), W(), randn(6, dtype=torch.float64)), TypeError,
                            r"bias", "float64"),
    "integer_input": (lambda: fastpad.conv2d(X().long(), W().long()), TypeError, r"input", "int64"),
    "integer_transposed_input": (lambda: fastpad.conv_transpose2d(X().int(), WT().int()), TypeError, r"input",
                                 "int32"),
    "complex_input": (lambda: fastpad.conv2d(X().cfloat(), W().cfloat()), TypeError, r"input", "complex"),
    "padding_wrong_type": (lambda: fastpad.conv2d(X(), W(), padding=1.5), TypeError, r"padding", "1.5"),
    "padding_none": (lambda: fastpad.conv2d(X(), W(), padding=None), TypeError, r"padding", "None"),
    "stride_wrong_type": (lambda: fastpad.conv2d(X(), W(), stride="2"), TypeError, r"stride", "2"),
    "input_not_tensor": (lambda: fastpad.conv2d([[1.0]], W()), TypeError, r"input", "list"),
    "kernel_larger_than_padded_input": (lambda: fastpad.conv2d(randn(1, 4, 3, 3), randn(6, 4, 5, 5), padding="valid"),
                                        ValueError, r"kernel|weight|input|padding", "3"),
    "dilated_kernel_larger_than_padded_input": (
        lambda: fastpad.conv1d(randn(1, 4, 6), randn(6, 4, 3), padding=((0, 1),), dilation=4), ValueError,
        r"kernel|weight|input|padding", "9"),
    "reflect_pad_equal_to_size": (lambda: fastpad.conv2d(randn(1, 4, 3, 9), randn(6, 4, 7, 3),
                                                         padding_mode="reflect"), ValueError, r"reflect|padding", "3"),
    "reflect_explicit_pad_beyond_size": (lambda: fastpad.conv1d(randn(1, 4, 4), randn(6, 4, 3), padding=((0, 5),),
                                                                padding_mode="reflect"),
                                         ValueError, r"reflect|padding", "5"),
    "output_padding_equal_to_stride": (lambda: fastpad.conv_transpose2d(X(), WT(), stride=2, output_padding=2),
                                       ValueError, r"output_padding", "2"),
    "output_padding_beyond_dilation": (lambda: fastpad.conv_transpose1d(randn(1, 4, 8), randn(4, 6, 3), stride=1,
                                                                        dilation=3, output_padding=3),
                                       ValueError, r"output_padding", "3"),
    "negative_output_padding": (lambda: fastpad.conv_transpose2d(X(), WT(), stride=2, output_padding=-1),
                                ValueError, r"output_padding", "-1"),
    "causal_transposed": (lambda: fastpad.conv_transpose2d(X(), WT(), padding="causal"), ValueError, r"padding",
                          "causal"),
    "crop_removes_everything": (lambda: fastpad.conv_transpose1d(randn(1, 4, 2), randn(4, 6, 3), padding=3),
                                ValueError, r"padding", "3"),
    "weight_without_output_channels": (lambda: fastpad.conv2d(X(), randn(0, 4, 3, 3)), ValueError, r"weight",
                                       "(0, 4, 3, 3)"),
    "transposed_weight_without_input_channels": (lambda: fastpad.conv_transpose2d(randn(1, 0, 8, 8), randn(0, 6, 3, 3)),
                                                 ValueError, r"weight", "(0, 6, 3, 3)"),
    "device_mismatch": (lambda: fastpad.conv2d(X(), randn(6, 4, 3, 3, device="meta")), ValueError,
                        r"weight|device", "meta"),
    "module_wrong_channels": (lambda: fastpad.nn.Conv2d(4, 6, 3)(randn(1, 5, 8, 8)), ValueError,
                              r"in_channels", "5"),
    "module_transposed_wrong_channels": (lambda: fastpad.nn.ConvTranspose1d(4, 6, 3)(randn(1, 3, 8)), ValueError,
                                         r"in_channels", "3"),
    "module_wrong_rank": (lambda: fastpad.nn.Conv3d(4, 6, 3)(X()), ValueError, r"in_channels|input|spatial",
                          "(1, 4, 8, 8)"),
    "module_bad_padding_mode": (lambda: fastpad.nn.Conv2d(4, 6, 3, padding_mode="mirror"), ValueError,
                                r"padding_mode", "mirror"),
    "module_causal_transposed": (lambda: fastpad.nn.ConvTranspose2d(4, 6, 3, padding="causal"), ValueError,
                                 r"padding", "causal"),
    "module_groups_mismatch": (lambda: fastpad.nn.Conv2d(4, 6, 3, groups=4), ValueError, r"groups|out_channels",
                               "4"),
}


@pytest.mark.parametrize("case", sorted(PUBLIC_CASES))
def test_public_api_rejects(case):
    call, error, name, value = PUBLIC_CASES[case]
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    assert re.search(name, message), f"message does not name the argument ({name}): {message!r}"
    assert value in message, f"message does not show the value {value!r}: {message!r}"


def test_checks_still_run_after_the_same_layer_was_called():
    """fastpad/functional.py remembers the arguments of calls whose checks passed. A call that differs only in what
    equal-comparing Python values hide (2.0 or True for 2 or 1), in a dtype, or in an input size must still be
    checked, and a call that raised must raise again."""
    x, w = randn(1, 4, 9, 9), randn(6, 4, 3, 3)
    assert fastpad.conv2d(x, w, stride=2).shape == (1, 6, 5, 5)
    with pytest.raises(TypeError, match="stride"):
        fastpad.conv2d(x, w, stride=2.0)
    with pytest.raises(TypeError, match="stride"):
        fastpad.conv2d(x, w, stride=(2, True))
    with pytest.raises(TypeError, match="dtype"):
        fastpad.conv2d(x, w.double(), stride=2)
    # A new input size resolves 'same' afresh: pads (1, 1) at 9, (0, 1) at 10.
    assert fastpad.conv2d(randn(1, 4, 10, 10), w, stride=2).shape == (1, 6, 5, 5)
    assert fastpad.conv_transpose2d(randn(1, 6, 5, 5), w, stride=2).shape == (1, 4, 10, 10)
    with pytest.raises(ValueError, match="output_padding"):
        fastpad.conv_transpose2d(randn(1, 6, 5, 5), w, stride=2, output_padding=2)
    for _ in range(2):
        with pytest.raises(ValueError, match="mirror"):
            fastpad.conv2d(x, w, padding_mode="mirror")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a second real device")
def test_cuda_device_mismatch():
    with pytest.raises(ValueError, match=r"weight|device"):
        fastpad.conv2d(X().cuda(), W())


# --------------------------------------------------------------------------------------------
# Direct op calls with malformed arguments: RuntimeError naming the argument, no crash.

x2, w2, gy2 = randn(1, 4, 8, 8), randn(6, 4, 3, 3), randn(1, 6, 8, 8)
OP_CASES = {
    "conv_stride_length": (ops.conv, (x2, w2, None, [1], [1, 1], [1, 1], [1, 1], 1, "zeros"), r"stride"),
    "conv_stride_zero": (ops.conv, (x2, w2, None, [1, 0], [1, 1], [1, 1], [1, 1], 1, "zeros"), r"stride"),
    "conv_pad_lo_negative": (ops.conv, (x2, w2, None, [1, 1], [-1, 1], [1, 1], [1, 1], 1, "zeros"), r"pad_lo"),
    "conv_pad_hi_length": (ops.conv, (x2, w2, None, [1, 1], [1, 1], [1, 1, 1], [1, 1], 1, "zeros"), r"pad_hi"),
    "conv_dilation_zero": (ops.conv, (x2, w2, None, [1, 1], [1, 1], [1, 1], [0, 1], 1, "zeros"), r"dilation"),
    "conv_groups_zero": (ops.conv, (x2, w2, None, [1, 1], [1, 1], [1, 1], [1, 1], 0, "zeros"), r"groups"),
    "conv_groups_mismatch": (ops.conv, (x2, w2, None, [1, 1], [1, 1], [1, 1], [1, 1], 2, "zeros"),
                             r"groups|weight|channel"),
    "conv_bad_mode": (ops.conv, (x2, w2, None, [1, 1], [1, 1], [1, 1], [1, 1], 1, "bogus"), r"padding_mode"),
    "conv_reflect_pad_too_big": (ops.conv, (x2, w2, None, [1, 1], [8, 1], [1, 1], [1, 1], 1, "reflect"),
                                 r"pad|reflect"),
    "conv_kernel_too_big": (ops.conv, (randn(1, 4, 2, 2), w2, None, [1, 1], [0, 0], [0, 0], [1, 1], 1, "zeros"),
                            r"kernel|weight|input|pad"),
    "conv_weight_rank": (ops.conv, (x2, randn(6, 4, 3), None, [1], [1], [1], [1], 1, "zeros"), r"weight|input"),
    "conv_bias_shape": (ops.conv, (x2, w2, randn(4), [1, 1], [1, 1], [1, 1], [1, 1], 1, "zeros"), r"bias"),
    "conv_dtype": (ops.conv, (x2, w2.double(), None, [1, 1], [1, 1], [1, 1], [1, 1], 1, "zeros"),
                   r"weight|dtype"),
    "conv_integer": (ops.conv, (x2.long(), w2.long(), None, [1, 1], [1, 1], [1, 1], [1, 1], 1, "zeros"),
                     r"input|dtype"),
    "conv_4_spatial_dims": (ops.conv, (randn(1, 1, 2, 2, 2, 2), randn(1, 1, 1, 1, 1, 1), None, [1] * 4, [0] * 4,
                                       [0] * 4, [1] * 4, 1, "zeros"), r"input|spatial|dim"),
    "transpose_out_size_length": (ops.conv_transpose, (gy2, w2, None, [1, 1], [1, 1], [8], [1, 1], 1), r"out_size"),
    "transpose_crop_lo_negative": (ops.conv_transpose, (gy2, w2, None, [1, 1], [-1, 0], [8, 8], [1, 1], 1),
                                   r"crop_lo"),
    "transpose_out_size_zero": (ops.conv_transpose, (gy2, w2, None, [1, 1], [0, 0], [0, 8], [1, 1], 1), r"out_size"),
    "transpose_groups_zero": (ops.conv_transpose, (gy2, w2, None, [1, 1], [1, 1], [8, 8], [1, 1], 0), r"groups"),
    "transpose_dilation_length": (ops.conv_transpose, (gy2, w2, None, [1, 1], [1, 1], [8, 8], [1], 1), r"dilation"),
    "transpose_bad_mode": (ops.conv_transpose, (gy2, w2, None, [1, 1], [1, 1], [8, 8], [1, 1], 1, "nope"),
                           r"padding_mode"),
    "weight_grad_shape_length": (ops.conv_weight_grad, (x2, gy2, [6, 4, 3], [1, 1], [1, 1], [1, 1], 1, "zeros"),
                                 r"weight_shape"),
    "weight_grad_grad_output_channels": (ops.conv_weight_grad, (x2, randn(1, 5, 8, 8), [6, 4, 3, 3], [1, 1], [1, 1],
                                                                [1, 1], 1, "zeros"), r"grad_output"),
    "weight_grad_grad_output_batch": (ops.conv_weight_grad, (x2, randn(2, 6, 8, 8), [6, 4, 3, 3], [1, 1], [1, 1],
                                                             [1, 1], 1, "zeros"), r"grad_output|batch"),
    "weight_grad_pad_lo_negative": (ops.conv_weight_grad, (x2, gy2, [6, 4, 3, 3], [1, 1], [1, -1], [1, 1], 1,
                                                           "zeros"), r"pad_lo"),
    "weight_grad_groups_zero": (ops.conv_weight_grad, (x2, gy2, [6, 4, 3, 3], [1, 1], [1, 1], [1, 1], 0, "zeros"),
                                r"groups"),


    # Zero channels: torch's rule. A conv may have no input channels (its output is the bias), but neither op a weight
    # without channels in dim 0 (conv: C_out; conv_transpose: C_in, which broke the kernel: a 0-channel input and
    # huge groups gave an empty result, a 0-channel input otherwise a kernel-internal error).
    "conv_no_output_channels": (ops.conv, (x2, randn(0, 4, 3, 3), None, [1, 1], [1, 1], [1, 1], [1, 1], 1, "zeros"),
                                r"weight.*output channel.*\[0, 4, 3, 3\]"),
    "transpose_no_input_channels": (ops.conv_transpose, (randn(1, 0, 8, 8), randn(0, 3, 3, 3), None, [1, 1], [1, 1],
                                                         [8, 8], [1, 1], 1), r"weight.*input channel"),
    "transpose_no_input_channels_huge_groups": (ops.conv_transpose, (randn(1, 0, 8, 8), randn(0, 8, 3, 3), None,
                                                                     [1, 1], [1, 1], [8, 8], [1, 1], 2**61),
                                                r"weight.*input channel"),
    # The weight gradient of a conv without input channels has no elements; the NCHW kernel divided by zero on it.
    "weight_grad_no_input_channels": (ops.conv_weight_grad, (randn(1, 0, 8, 8), gy2, [6, 0, 3, 3], [1, 1], [1, 1],
                                                             [1, 1], 1, "zeros"), r"weight_shape.*\[6, 0, 3, 3\]"),
    "weight_grad_groups_mismatch": (ops.conv_weight_grad, (x2, gy2, [6, 4, 3, 3], [1, 1], [1, 1], [1, 1], 2, "zeros"),
                                    r"weight_shape.*groups=2"),
}

# Extreme ints in direct op calls. Every stride, dilation, pad, crop, out_size and kernel size is an int64 of the
# caller's choosing; the C++ checks bound them (csrc/conv_params.cpp, kMaxExtent = 2^56) so that no size or index
# overflows int64. Before, these wrapped around: wrong results ("was: ..."), crashes and hangs. The fake kernels
# leave these bounds out (Python ints do not overflow).
BIG = 2**63 - 1
OP_SIZE_CASES = {
    # was: the effective kernel wrapped to -1, a [1, 6, 12, 12] output of wrong values
    "conv_dilation_max": (ops.conv, (x2, w2, None, [1, 1], [1, 1], [1, 1], [BIG, BIG], 1, "zeros"),
                          r"dilation 9223372036854775807"),
    # was: an effective kernel of -9223372036854775807 in the message
    "conv_dilation_2_62": (ops.conv, (x2, w2, None, [1, 1], [1, 1], [1, 1], [2**62, 1], 1, "zeros"),
                           r"dilation 4611686018427387904"),
    "conv_pad_lo_huge": (ops.conv, (x2, w2, None, [1, 1], [BIG, 1], [1, 1], [1, 1], 1, "zeros"),
                         r"pad_lo.*9223372036854775807"),
    "conv_pad_hi_huge": (ops.conv, (x2, w2, None, [1, 1], [1, 1], [BIG, 1], [1, 1], 1, "zeros"),
                         r"pad_hi.*9223372036854775807"),
    # was: 2 + 0 - 2^63 - 3 wrapped to 2^63 - 1, a [1, 4, 2, 8] output (channels-last depthwise) or std::bad_alloc;
    # below -2^62 a SymInt argument is refused by name (csrc/autograd.cpp)
    "conv_pad_hi_min": (ops.conv, (randn(1, 4, 2, 8).to(memory_format=torch.channels_last), randn(4, 1, 3, 3), None,
                                   [2**62, 1], [0, 1], [-2**63, 1], [1, 1], 4, "zeros"),
                        r"pad_hi must be > -2\^62, got -9223372036854775808"),
    # was: a segfault (stride phases 2^32 x 2^32 wrapped to 0)
    "conv_stride_and_pad_2_32": (ops.conv, (x2, w2, None, [2**32, 2**32], [2**32, 2**32], [0, 0], [1, 1], 1, "zeros"),
                                 r"too large.*4294967304"),
    # was: std::bad_alloc
    "conv_pad_hi_2_62_stride_2_61": (ops.conv, (x2, w2, None, [2**61, 1], [1, 1], [2**62, 1], [1, 1], 1, "zeros"),
                                     r"pad_hi.*4611686018427387904"),
    "conv_output_too_large": (ops.conv, (x2, w2, None, [1, 1], [2**40, 2**40], [2**40, 2**40], [1, 1], 1, "zeros"),
                              r"too large.*2199023255560"),
    "conv_input_size_huge": (ops.conv, (torch.zeros(1).expand(1, 1, BIG), randn(1, 1, 1), None, [1], [1], [0], [1], 1,
                                        "zeros"), r"input has a spatial dim larger than 2\^56"),
    # was: (8 - 1) * 2^62 wrapped around, a [1, 4, 8, 8] output of wrong values
    "transpose_stride_overflow": (ops.conv_transpose, (gy2, w2, None, [2**62, 2**62], [0, 0], [8, 8], [1, 1], 1),
                                  r"stride 4611686018427387904"),
    "transpose_stride_overflow_crop": (ops.conv_transpose, (gy2, w2, None, [2**62, 1], [2**63 - 8, 0], [8, 8], [1, 1],
                                                            1), r"crop_lo.*9223372036854775800"),
    # was: a [1, 4, 8, 8] output of wrong values
    "transpose_dilation_max": (ops.conv_transpose, (gy2, w2, None, [1, 1], [0, 0], [8, 8], [BIG, BIG], 1),
                               r"dilation 9223372036854775807"),
    "transpose_crop_lo_huge": (ops.conv_transpose, (gy2, w2, None, [1, 1], [BIG, BIG], [8, 8], [1, 1], 1),
                               r"crop_lo.*9223372036854775807"),
    "transpose_out_size_huge": (ops.conv_transpose, (gy2, w2, None, [1, 1], [0, 0], [BIG, 8], [1, 1], 1),
                                r"out_size.*9223372036854775807"),
    "transpose_out_size_huge_reflect": (ops.conv_transpose, (gy2, w2, None, [1, 1], [1, 1], [BIG, 8], [1, 1], 1,
                                                             "reflect"), r"out_size.*9223372036854775807"),
    # was: a hang (2^63 kernel rows)
    "weight_grad_kernel_max": (ops.conv_weight_grad, (x2, gy2, [6, 4, BIG, 3], [1, 1], [1, 1], [1, 1], 1, "zeros"),
                               r"kernel size 9223372036854775807"),
    # was: std::bad_alloc
    "weight_grad_kernel_volume": (ops.conv_weight_grad, (x2, gy2, [6, 4, 2**31, 2**32], [1, 1], [1, 1], [1, 1], 1,
                                                         "zeros"), r"too large.*2147483648, 4294967296"),
    # was: a gradient of wrong values (the taps wrapped around onto the input)
    "weight_grad_dilation_max": (ops.conv_weight_grad, (x2, gy2, [6, 4, 3, 3], [1, 1], [1, 1], [BIG, 1], 1, "zeros"),
                                 r"dilation 9223372036854775807"),
    "weight_grad_stride_max": (ops.conv_weight_grad, (x2, gy2, [6, 4, 3, 3], [BIG, 1], [1, 1], [1, 1], 1, "zeros"),
                               r"stride 9223372036854775807"),
    "weight_grad_pad_lo_huge": (ops.conv_weight_grad, (x2, gy2, [6, 4, 3, 3], [1, 1], [BIG, 1], [1, 1], 1,
                                                       "reflect"), r"pad_lo.*9223372036854775807"),
}

# A tensor on another device than input: the dispatcher sends such a call to the fake kernel (the Meta key wins),
# which used to return an uninitialised tensor on input's device.
OP_DEVICE_CASES = {
    "conv_weight_on_meta": (ops.conv, (x2, w2.to("meta"), None, [1, 1], [1, 1], [1, 1], [1, 1], 1, "zeros"),
                            r"weight is on meta"),
    "conv_bias_on_meta": (ops.conv, (x2, w2, randn(6).to("meta"), [1, 1], [1, 1], [1, 1], [1, 1], 1, "zeros"),
                          r"bias is on meta"),
    "transpose_input_on_meta": (ops.conv_transpose, (gy2.to("meta"), w2, None, [1, 1], [1, 1], [8, 8], [1, 1], 1),
                                r"weight is on cpu"),
    "weight_grad_grad_output_on_meta": (ops.conv_weight_grad, (x2, gy2.to("meta"), [6, 4, 3, 3], [1, 1], [1, 1],
                                                               [1, 1], 1, "zeros"), r"grad_output is on meta"),
}

ALL_OP_CASES = {**OP_CASES, **OP_SIZE_CASES, **OP_DEVICE_CASES}


@pytest.mark.parametrize("case", sorted(ALL_OP_CASES))
def test_op_rejects(case):
    op, args, name = ALL_OP_CASES[case]
    with pytest.raises(RuntimeError, match=name):
        op(*args)


@pytest.mark.parametrize("mode", ["meta", "fake"])
@pytest.mark.parametrize("case", sorted(OP_CASES))
def test_fake_kernel_rejects(case, mode):
    """Meta tensors and FakeTensorMode (torch.compile) run the fake kernels of fastpad/_ops.py: the same
    RuntimeError for the same malformed call."""
    op, args, name = OP_CASES[case]
    fake_mode = FakeTensorMode() if mode == "fake" else None
    convert = fake_mode.from_tensor if fake_mode else (lambda t: t.to("meta"))
    args = [convert(a) if isinstance(a, torch.Tensor) else a for a in args]
    with fake_mode or contextlib.nullcontext(), pytest.raises(RuntimeError, match=name):
        op(*args)


def _reference_weight_grad(x, gy, weight_shape, stride, pad_lo, dilation, groups):
    """conv_weight_grad by autograd through reference_conv, with the pad_hi that gives gy's size."""
    pad_hi = [(o - 1) * s + d * (k - 1) + 1 - lo - i
              for i, o, lo, k, s, d in zip(x.shape[2:], gy.shape[2:], pad_lo, weight_shape[2:], stride, dilation)]
    w = torch.zeros(weight_shape, dtype=x.dtype, requires_grad=True)
    y = reference_conv(x, w, None, stride, list(zip(pad_lo, pad_hi)), dilation, groups)
    return torch.autograd.grad(y, w, gy)[0]


@pytest.mark.parametrize("groups", [1, 4])
@pytest.mark.parametrize("channels_last", [False, True])
def test_op_stride_and_dilation_that_do_not_act(channels_last, groups):
    """A stride acts only between two outputs and a dilation only between two taps: where there is one, any value is
    valid (torch's conv accepts it too) and changes nothing. The kernels sized buffers by such strides: a segfault."""
    layout = torch.channels_last if channels_last else torch.contiguous_format
    f64 = torch.float64
    c_out = 4 if groups == 4 else 6
    x = randn(2, 4, 8, 8, dtype=f64).to(memory_format=layout)
    w, b = randn(c_out, 4 // groups, 3, 3, dtype=f64), randn(c_out, dtype=f64)
    # conv: one output row (stride BIG), one kernel column (dilation BIG)
    y = ops.conv(x, w, b, [BIG, 2], [1, 1], [-6, 1], [1, 1], groups, "zeros")
    torch.testing.assert_close(y, reference_conv(x, w, b, [1, 2], [(1, -6), (1, 1)], [1, 1], groups))
    w1 = w[..., :1].contiguous()
    y = ops.conv(x, w1, b, [1, 1], [0, 0], [0, 0], [1, BIG], groups, "zeros")
    torch.testing.assert_close(y, reference_conv(x, w1, b, [1, 1], [(0, 0), (0, 0)], [1, 1], groups))
    # conv_transpose: one input row (stride BIG)
    xt, wt = randn(2, c_out, 1, 5, dtype=f64).to(memory_format=layout), randn(c_out, 4 // groups, 3, 3, dtype=f64)
    bt = randn(4, dtype=f64)
    y = ops.conv_transpose(xt, wt, bt, [BIG, 2], [0, 1], [3, 9], [1, 1], groups)
    torch.testing.assert_close(y, reference_conv_transpose(xt, wt, bt, [1, 2], [0, 1], [3, 9], [1, 1], groups))
    # conv_weight_grad: one grad_output row (stride BIG), one kernel column (dilation BIG)
    gy = randn(2, c_out, 1, 4, dtype=f64)
    grad = ops.conv_weight_grad(x, gy, list(w.shape), [BIG, 2], [1, 1], [1, 1], groups, "zeros")
    torch.testing.assert_close(grad, _reference_weight_grad(x, gy, list(w.shape), [1, 2], [1, 1], [1, 1], groups))
    gy = randn(2, c_out, 8, 8, dtype=f64)
    grad = ops.conv_weight_grad(x, gy, list(w1.shape), [1, 1], [0, 0], [1, BIG], groups, "zeros")
    torch.testing.assert_close(grad, _reference_weight_grad(x, gy, list(w1.shape), [1, 1], [0, 0], [1, 1], groups))


@pytest.mark.parametrize("channels_last", [False, True])
def test_op_valid_edges(channels_last):
    """Valid calls at the edges the checks draw: no input channels (the output is the bias), a conv_transpose window
    past its full output (zero-extended: the bias), a grad_output shorter or longer than the conv of input would give
    (the weight gradient of the conv with the pad_hi that gives that size, negative or large)."""
    layout = torch.channels_last if channels_last else torch.contiguous_format
    f64 = torch.float64
    b = randn(6, dtype=f64)
    y = ops.conv(randn(2, 0, 8, 8, dtype=f64).to(memory_format=layout), randn(6, 0, 3, 3, dtype=f64), b, [1, 1],
                 [1, 1], [1, 1], [1, 1], 2, "zeros")
    torch.testing.assert_close(y, b.view(1, 6, 1, 1).expand(2, 6, 8, 8))
    xt, wt, bt = randn(2, 6, 5, 5, dtype=f64).to(memory_format=layout), randn(6, 4, 3, 3, dtype=f64), randn(4, dtype=f64)
    for crop_lo, out_size in (([1, 0], [20, 16]), ([30, 0], [4, 8])):
        y = ops.conv_transpose(xt, wt, bt, [2, 2], crop_lo, out_size, [1, 1], 1)
        torch.testing.assert_close(y, reference_conv_transpose(xt, wt, bt, [2, 2], crop_lo, out_size, [1, 1], 1))
    x = randn(2, 4, 8, 8, dtype=f64).to(memory_format=layout)
    for gy_size in ((3, 2), (20, 9)):
        gy = randn(2, 6, *gy_size, dtype=f64)
        grad = ops.conv_weight_grad(x, gy, [6, 4, 3, 3], [1, 2], [1, 1], [1, 1], 1, "zeros")
        torch.testing.assert_close(grad, _reference_weight_grad(x, gy, [6, 4, 3, 3], [1, 2], [1, 1], [1, 1], 1))
