"""Calls shaped to reach each CPU kernel path, forward and backward, with bitwise comparison helpers: shared by
tests/test_determinism.py and tests/test_concurrency.py."""

from dataclasses import dataclass

import torch

import fastpad
from fastpad.reference import output_and_grads
from reference import CHANNELS_LAST, conv_inputs, expected_conv, expected_conv_transpose, poison


@dataclass(frozen=True)
class CodePath:
    """One public-API call, fastpad.conv{n}d or fastpad.conv_transpose{n}d, shaped so that the CPU dispatch sends it
    down one kernel path. Its backward runs the other two ops: the input gradient (conv_transpose for a conv, conv
    for a transposed conv) and conv_weight_grad."""
    transposed: bool
    size: tuple
    c_in: int
    c_out: int
    kernel: int
    groups: int = 1
    stride: int = 1
    padding: object = "same"
    dilation: int = 1
    padding_mode: str = "zeros"
    channels_last: bool = False

    @property
    def result_ops(self):
        """The op computing each result of run_forward_backward (the bias gradient is a plain sum)."""
        if self.transposed:
            return ("conv_transpose", "conv (input grad)", "conv_weight_grad", "sum (bias grad)")
        return ("conv", "conv_transpose (input grad)", "conv_weight_grad", "sum (bias grad)")

    def _kwargs(self):
        kwargs = dict(stride=self.stride, padding=self.padding, dilation=self.dilation, groups=self.groups)
        if not self.transposed:
            kwargs["padding_mode"] = self.padding_mode
        return kwargs

    def fastpad_call(self, x, w, b):
        name = f"conv_transpose{len(self.size)}d" if self.transposed else f"conv{len(self.size)}d"
        return getattr(fastpad, name)(x, w, b, **self._kwargs())

    def reference_call(self, x, w, b):
        expected = expected_conv_transpose if self.transposed else expected_conv
        return expected(x, w, b, **self._kwargs())

    def inputs(self, dtype, device="cpu", batch=2):
        """Fresh random (x, w, b, grad_output); x and grad_output channels-last where the path is (so the backward
        kernels see that layout too)."""
        x, w, b = conv_inputs(self.size, self.c_in, self.c_out, self.kernel, self.groups, batch=batch,
                              transposed=self.transposed, dtype=dtype, device=device)
        with torch.no_grad():
            output_shape = self.reference_call(x, w, b).shape
        gy = torch.randn(output_shape, dtype=dtype, device=device)
        if self.channels_last:
            x, gy = (t.to(memory_format=CHANNELS_LAST[t.dim()]) for t in (x, gy))
        return x, w, b, gy


# The kernel each path reaches in csrc/cpu (forward; input grad; weight grad). NCHW weight gradients and channels-last
# non-depthwise ones are the chunked GEMM reductions of conv_weight_grad.cpp.
CODE_PATHS = {
    # depthwise.cpp NCHW, channel multiplier 2, for all three ops
    "1d_depthwise_x2_causal_dilated": CodePath(False, (37,), 8, 16, 4, groups=8, padding="causal", dilation=2),
    # tap GEMMs (16 channels); GEMM + col2im folding the reflection back (under 256 positions); chunked NCHW
    "1d_dense_reflect_s2": CodePath(False, (64,), 16, 24, 7, stride=2, padding_mode="reflect"),
    # depthwise.cpp NCHW
    "2d_depthwise_reflect_s2": CodePath(False, (17, 19), 8, 8, 3, groups=8, stride=2, padding_mode="reflect"),
    # depthwise.cpp channels-last
    "2d_depthwise_channels_last_circular": CodePath(False, (15, 16), 16, 16, 5, groups=16, padding_mode="circular",
                                                    channels_last=True),
    # tap GEMMs; phase-plane transpose (400 positions); chunked NCHW
    "2d_dense_replicate": CodePath(False, (20, 20), 16, 16, 3, padding_mode="replicate"),
    # NCHW stem (3 channels): one GEMM over copied columns; GEMM + col2im; chunked NCHW
    "2d_stem_s2": CodePath(False, (21, 22), 3, 16, 3, stride=2),
    # channels-last, one group: phase planes; channels-last GEMM + col2im; chunked channels-last
    "2d_dense_channels_last_s2": CodePath(False, (18, 17), 16, 24, 3, stride=2, channels_last=True),
    # grouped channels-last: fused im2col + GEMM
    "2d_grouped_channels_last_reflect": CodePath(False, (13, 14), 32, 32, 3, groups=2, padding_mode="reflect",
                                                 channels_last=True),
    # channels-last stem (3 channels): the direct kernel
    "2d_stem_channels_last_circular": CodePath(False, (19, 20), 3, 16, 3, stride=2, padding_mode="circular",
                                               channels_last=True),
    # 3-d tap GEMMs
    "3d_dense_replicate": CodePath(False, (6, 7, 8), 16, 16, 3, padding_mode="replicate"),
    # 3-d grouped channels-last: fused im2col + GEMM
    "3d_grouped_channels_last": CodePath(False, (5, 6, 7), 32, 32, 3, groups=2, channels_last=True),
    # transposed, NCHW, few positions: GEMM + col2im; backward conv on 8 channels: the NCHW column GEMM
    "1d_transposed_s4": CodePath(True, (24,), 16, 8, 8, stride=4),
    # transposed, NCHW, 16 channels and 256 positions: phase-plane transpose
    "2d_transposed_phase_planes": CodePath(True, (16, 16), 16, 16, 4, stride=2),
    # transposed channels-last: GEMM + col2im; backward conv on 12 channels: the channels-last direct kernel
    "2d_transposed_channels_last": CodePath(True, (9, 10), 8, 12, 3, stride=2, channels_last=True),
    # transposed depthwise
    "2d_transposed_depthwise": CodePath(True, (9, 9), 8, 8, 4, groups=8, stride=2),
    # transposed 3-d: GEMM + col2im
    "3d_transposed": CodePath(True, (4, 5, 6), 4, 6, 3, stride=2),
}
RESULT_NAMES = ("output", "input grad", "weight grad", "bias grad")
# The integer type of each float type's width, to compare bit patterns.
BITS = {torch.float64: torch.int64, torch.float32: torch.int32, torch.bfloat16: torch.int16}


def run_forward_backward(path, inputs, poison_outputs=False):
    """[output, input grad, weight grad, bias grad] of path's fastpad call, backpropagating the inputs' grad_output.
    poison_outputs: fill freed blocks of the results' sizes with NaN first, so unwritten elements show."""
    x, w, b, gy = inputs
    if poison_outputs:
        for tensor in (gy, x, w):
            poison(tensor.shape, tensor.dtype, tensor.device, blocks=2)
    output, grads = output_and_grads(path.fastpad_call, [x, w, b], lambda _: gy)
    return [output, *grads]


def run_reference(path, inputs):
    """The float64 reference's [output, input grad, weight grad, bias grad] for the same inputs."""
    x, w, b, gy = (t.double() for t in inputs)
    output, grads = output_and_grads(path.reference_call, [x, w, b], lambda _: gy)
    return [output, *grads]


def bitwise_equal(actual, expected):
    """Same dtype, shape, values and bit patterns."""
    return (actual.dtype == expected.dtype and actual.shape == expected.shape and torch.equal(actual, expected)
            and torch.equal(actual.view(BITS[actual.dtype]), expected.view(BITS[expected.dtype])))


def assert_bitwise_equal(actual_results, expected_results, what):
    for name, actual, expected in zip(RESULT_NAMES, actual_results, expected_results):
        if bitwise_equal(actual, expected):
            continue
        if actual.shape != expected.shape:
            raise AssertionError(f"{what}: {name} shapes differ, {tuple(actual.shape)} vs {tuple(expected.shape)}")
        difference = (actual.double() - expected.double()).abs().max().item()
        raise AssertionError(f"{what}: {name} not bitwise identical (max |difference| {difference:.3g})")
