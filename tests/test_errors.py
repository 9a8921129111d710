"""Bad input raises a clear exception naming the argument and its value, and never crashes
(issue 2, section 6). Public functions raise ValueError / TypeError; direct op calls RuntimeError."""

import re

import pytest
import torch

import fastpad

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
}


@pytest.mark.parametrize("case", sorted(OP_CASES))
def test_op_rejects(case):
    op, args, name = OP_CASES[case]
    with pytest.raises(RuntimeError, match=name):
        op(*args)
