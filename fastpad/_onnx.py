"""What fastpad's convolutions become under torch.onnx.export (default exporter and dynamo=False): one ONNX Conv,
with auto_pad for undilated 'same'/'same_lower' and explicit pads otherwise; Pad(mode) + Conv for the other
padding modes and for dilated 'same' at stride > 1; one ConvTranspose with explicit pads."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from . import _geometry

AUTO_PAD = {"same": "SAME_UPPER", "same_lower": "SAME_LOWER"}
PAD_MODES = {"zeros": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}
# Both exporters of torch 2.13 default to opset 20. Pad takes its pads as an input from opset 11, the pads that
# depend on the input size need int64 Max (opset 12), and mode 'wrap' needs opset 19. Only the TorchScript
# exporter shows its opset to us. The default one traces before it knows the opset, builds the graph at
# max(opset_version, 18) and so gets Pad(wrap) at opset 18, as torch's own F.pad(mode='circular') does there
# (ONNX Runtime runs it; the ONNX spec does not allow it).
MIN_OPSET = {"constant": 12, "reflect": 12, "edge": 12, "wrap": 19}


def _uses_auto_pad(padding, dilation) -> bool:
    """auto_pad follows the input size, so dynamic axes stay right; ONNX Runtime rejects it with dilation."""
    return padding in AUTO_PAD and all(d == 1 for d in dilation)


def _pad_mode(padding, stride, dilation, padding_mode):
    """The mode of a Pad node in front of the Conv, or None where the Conv's own pads or auto_pad do: a Pad node
    for a non-zero padding mode, and for dilated 'same' at stride > 1 (pads that depend on the input size)."""
    if padding_mode != "zeros" or (padding in AUTO_PAD and not _uses_auto_pad(padding, dilation)
                                   and any(s > 1 for s in stride)):
        return PAD_MODES[padding_mode]
    return None


def _conv_attrs(kernel, stride, pads, dilation, groups, padding, pad_mode) -> dict:
    attrs = dict(kernel_shape=list(kernel), strides=list(stride), dilations=list(dilation), group=groups)
    if pad_mode is not None:
        attrs["pads"] = [0] * (2 * len(stride))  # the Pad node in front does the padding
    elif _uses_auto_pad(padding, dilation):
        attrs["auto_pad"] = AUTO_PAD[padding]
    else:  # ints: where 'same' gets here (stride 1), its pads do not depend on the input size
        attrs["pads"] = [int(lo) for lo, _ in pads] + [int(hi) for _, hi in pads]
    return attrs


def conv(input, weight, bias, stride, pads, padding, dilation, groups, padding_mode):
    """The exported form of `fastpad.functional.conv_nd`, given the pads it resolved and checked and its `padding`
    argument: for 'same' the graph keeps auto_pad, or computes the pads from the input's shape, rather than
    holding this size's pads."""
    sizes, kernel = _geometry.spatial_sizes(input), _geometry.spatial_sizes(weight)
    pad_mode = _pad_mode(padding, stride, dilation, padding_mode)
    if torch.jit.is_tracing():  # dynamo=False: the TorchScript exporter records _TracedConv.symbolic
        return _TracedConv.apply(input, weight, bias, tuple(kernel), tuple(stride), tuple(pads), tuple(dilation),
                                 groups, padding_mode, padding, pad_mode)
    attrs = _conv_attrs(kernel, stride, pads, dilation, groups, padding, pad_mode)
    if pad_mode is not None:  # under torch.export the pads are SymInts: Pad computes them from the shape
        amounts = torch.tensor([0, 0, *[lo for lo, _ in pads], 0, 0, *[hi for _, hi in pads]], dtype=torch.int64)
        sizes = [i + lo + hi for i, (lo, hi) in zip(sizes, pads)]
        input = torch.onnx.ops.symbolic("Pad", [input, amounts], dict(mode=pad_mode), dtype=input.dtype,
                                        shape=[*input.shape[:2], *sizes])
        pads = [(0, 0)] * len(stride)
    out_size = [_geometry.conv_out_size(i, lo, hi, k, s, d)
                for i, (lo, hi), k, s, d in zip(sizes, pads, kernel, stride, dilation)]
    return torch.onnx.ops.symbolic("Conv", [input, weight, bias], attrs, dtype=input.dtype,
                                   shape=[input.shape[0], weight.shape[0], *out_size])


def conv_transpose(input, weight, bias, stride, crop_lo, out_size, dilation, groups):
    """The exported form of `fastpad.functional.conv_transpose_nd`; `crop_lo`, `out_size` as resolved there.

    ONNX keeps full[lo : lo + out] of the full output ((i-1)*s + k_eff positions); the end pad shortens it and
    output_padding lengthens it (with bias-only positions past the full output), and end_pad - output_padding
    = full - lo - out does not depend on i, so explicit pads stay right on dynamic axes. Not auto_pad: ONNX
    Runtime's SAME_UPPER/SAME_LOWER equal 'same'/'same_lower' only where k_eff >= stride and output_padding
    is 0; where k_eff < stride its output is (i-1)*s + k_eff long instead of i*s (measured, onnxruntime 1.31).
    """
    sizes, kernel = _geometry.spatial_sizes(input), _geometry.spatial_sizes(weight)
    end_pads, extensions = [], []
    for i, lo, out, k, s, d in zip(sizes, crop_lo, out_size, kernel, stride, dilation):
        net = int(_geometry.transposed_full_size(i, k, s, d) - lo - out)  # a constant, also for SymInt sizes
        end_pads.append(max(net, 0))
        extensions.append(max(-net, 0))
    attrs = dict(kernel_shape=kernel, strides=list(stride), dilations=list(dilation), group=groups,
                 pads=crop_lo + end_pads, output_padding=extensions)
    if all(extra < s for extra, s in zip(extensions, stride)):
        return _conv_transpose_node(input, weight, bias, stride, crop_lo, out_size, dilation, groups, attrs)
    # ONNX Runtime rejects output_padding >= stride: stop at the full output, then zero-extend and add the bias.
    attrs["output_padding"] = [0] * len(stride)
    full_size = [out - extra for out, extra in zip(out_size, extensions)]
    output = _conv_transpose_node(input, weight, None, stride, crop_lo, full_size, dilation, groups, attrs)
    output = F.pad(output, [p for extra in reversed(extensions) for p in (0, extra)])
    return output if bias is None else output + bias.reshape(-1, *[1] * len(stride))


def _conv_transpose_node(input, weight, bias, stride, crop_lo, out_size, dilation, groups, attrs):
    if torch.jit.is_tracing():  # dynamo=False
        return _TracedConvTranspose.apply(input, weight, bias, tuple(stride), tuple(crop_lo), tuple(out_size),
                                          tuple(dilation), groups, attrs)
    return torch.onnx.ops.symbolic("ConvTranspose", [input, weight, bias], attrs, dtype=input.dtype,
                                   shape=[input.shape[0], weight.shape[1] * groups, *out_size])


# The TorchScript exporter (dynamo=False) runs `forward` while tracing and records `symbolic` in its place.

def _node_attrs(attrs: dict) -> dict:
    """g.op's spelling of attributes: name_s for a string, name_i for ints."""
    return {f"{key}_{'s' if isinstance(value, str) else 'i'}": value for key, value in attrs.items()}


def _node_inputs(*values) -> list:
    return [value for value in values if value is not None and not value.node().mustBeNone()]


def _same_pads_from_shape(g, input, kernel, stride, dilation, lower: bool):
    """ONNX Pad's pads for 'same', computed from the input's runtime shape as `_geometry.same_padding` does."""
    def ints(values):
        return g.op("Constant", value_t=torch.tensor(list(values), dtype=torch.int64))

    count = len(stride)
    size = g.op("Slice", g.op("Shape", input), ints([2]), ints([2 + count]))
    k_minus_s = ints([_geometry.effective_kernel(k, d) - s for k, s, d in zip(kernel, stride, dilation)])
    total = g.op("Add", k_minus_s, g.op("Mod", g.op("Neg", size), ints(stride)))  # Mod: the sign of the divisor
    total = g.op("Max", total, ints([0] * count))
    small = g.op("Div", total, ints([2] * count))
    large = g.op("Sub", total, small)
    lo, hi = (large, small) if lower else (small, large)
    return g.op("Concat", ints([0, 0]), lo, ints([0, 0]), hi, axis_i=0)


class _TracedConv(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, kernel, stride, pads, dilation, groups, padding_mode, padding, pad_mode):
        return torch.ops.fastpad.conv(input, weight, bias, list(stride), [lo for lo, _ in pads],
                                      [hi for _, hi in pads], list(dilation), groups, padding_mode)

    @staticmethod
    def symbolic(g, input, weight, bias, kernel, stride, pads, dilation, groups, padding_mode, padding, pad_mode):
        if pad_mode is not None:
            if g.opset < MIN_OPSET[pad_mode]:
                raise ValueError(f"fastpad: padding_mode={padding_mode!r}, padding={padding!r} exports as ONNX "
                                 f"Pad(mode='{pad_mode}'), which needs opset >= {MIN_OPSET[pad_mode]}; got "
                                 f"opset_version={g.opset}")
            if padding in AUTO_PAD and any(s > 1 for s in stride):  # the pads depend on the input size
                amounts = _same_pads_from_shape(g, input, kernel, stride, dilation, padding == "same_lower")
            else:
                amounts = g.op("Constant", value_t=torch.tensor(
                    [0, 0] + [lo for lo, _ in pads] + [0, 0] + [hi for _, hi in pads], dtype=torch.int64))
            input = g.op("Pad", input, amounts, mode_s=pad_mode)
        attrs = _conv_attrs(kernel, stride, pads, dilation, groups, padding, pad_mode)
        return g.op("Conv", *_node_inputs(input, weight, bias), **_node_attrs(attrs))


class _TracedConvTranspose(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, stride, crop_lo, out_size, dilation, groups, attrs):
        return torch.ops.fastpad.conv_transpose(input, weight, bias, list(stride), list(crop_lo), list(out_size),
                                                list(dilation), groups, "zeros")

    @staticmethod
    def symbolic(g, input, weight, bias, stride, crop_lo, out_size, dilation, groups, attrs):
        return g.op("ConvTranspose", *_node_inputs(input, weight, bias), **_node_attrs(attrs))
