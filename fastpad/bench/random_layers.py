"""Random layers for `python -m fastpad bench --random N --seed S`: a benchmark that a suite-tuned kernel cannot
overfit.

Each layer is drawn from a seeded generator: 1-d, 2-d or 3-d; dense, grouped or depthwise (with a channel
multiplier); convolution or transposed convolution; strides 1-3, dilations 1-2, kernels 1-7 (odd and even, now and
then different per dimension); 3-512 channels; spatial sizes 7-4096 for 1-d (smaller for 2-d and 3-d); batch 1-32;
'same', 'same_lower', 'causal' and explicit pads; all four padding modes; NCHW and channels_last. A draw that fastpad
rejects (fastpad's own checks decide, on meta tensors) is drawn again; one larger than WORK_LIMIT multiply-adds or
ELEMENT_LIMIT input or output elements is shrunk (batch first, then the spatial sizes, then the channels), so that
one call takes well under a second on a 2-core CPU.
"""
import math
import random
from dataclasses import replace
from typing import List, Optional

import torch

from fastpad.bench.layers import Layer
from fastpad.bench.peers import multiply_adds
from fastpad.cases import ConvCase

WORK_LIMIT = 150e6  # multiply-adds of one forward call
ELEMENT_LIMIT = 4e6  # elements of the input, and of the output
MAX_SIZE = {1: 4096, 2: 192, 3: 40}
MIN_SIZE = 7


def log_uniform(rng: random.Random, low: int, high: int) -> int:
    return int(round(math.exp(rng.uniform(math.log(low), math.log(high)))))


def channels_and_groups(rng: random.Random):
    """(in_channels, out_channels, groups): dense, grouped, or depthwise with multiplier 1, 2 or 4."""
    kind = rng.choice(("dense", "dense", "grouped", "depthwise"))
    if kind == "dense":
        return log_uniform(rng, 3, 512), log_uniform(rng, 3, 512), 1
    if kind == "grouped":
        groups = rng.choice((2, 4, 8, 16, 32))
        per_group_limit = max(1, 512 // groups)
        return (groups * log_uniform(rng, 1, per_group_limit), groups * log_uniform(rng, 1, per_group_limit),
                groups)
    channels = log_uniform(rng, 3, 512)
    return channels, channels * rng.choice((1, 1, 1, 2, 4)), channels


def padding_for(rng: random.Random, transposed: bool, kernel, dilation: int):
    """A padding spec: a string, or explicit (lo, hi) pairs within the kernel's extent."""
    strings = ("same", "same_lower", "valid") if transposed else ("same", "same", "same_lower", "causal", "valid")
    if rng.random() < 0.75:
        return rng.choice(strings)
    return tuple((rng.randint(0, dilation * (k - 1)), rng.randint(0, dilation * (k - 1))) for k in kernel)


def draw_case(rng: random.Random) -> ConvCase:
    dims = rng.choice((1, 1, 2, 2, 2, 3))
    transposed = rng.random() < 0.25
    in_channels, out_channels, groups = channels_and_groups(rng)
    square = rng.random() < 0.8
    kernel_size = rng.randint(1, 7)
    kernel = tuple(kernel_size if square else rng.randint(1, 7) for _ in range(dims))
    stride, dilation = rng.randint(1, 3), rng.choice((1, 1, 2))
    size = tuple([log_uniform(rng, MIN_SIZE, MAX_SIZE[dims])] * dims if square else
                 [log_uniform(rng, MIN_SIZE, MAX_SIZE[dims]) for _ in range(dims)])
    fields = dict(padding=padding_for(rng, transposed, kernel, dilation),
                  batch=log_uniform(rng, 1, 32), bias=rng.random() < 0.7,
                  layout="channels_last" if dims > 1 and rng.random() < 0.4 else "contiguous")
    if transposed:
        fields["output_padding"] = rng.randint(0, max(stride, dilation) - 1) if rng.random() < 0.3 else 0
    else:
        fields["padding_mode"] = rng.choice(("zeros", "zeros", "reflect", "replicate", "circular"))
    return ConvCase(transposed, size, in_channels, out_channels, kernel, stride, dilation=dilation, groups=groups,
                    **fields)


def output_shape(case: ConvCase) -> Optional[torch.Size]:
    """The output shape fastpad gives on meta tensors, or None when fastpad rejects the case."""
    x, w, b = (torch.empty(shape, device="meta") if shape else None
               for shape in (case.input_shape(), case.weight_shape(), (case.out_channels,) if case.bias else None))
    try:
        return case.fastpad_function()(x, w, b).shape
    except (ValueError, TypeError, RuntimeError):
        return None


def too_big(case: ConvCase, out_shape) -> bool:
    return (multiply_adds(case) > WORK_LIMIT or math.prod(case.input_shape()) > ELEMENT_LIMIT
            or math.prod(out_shape) > ELEMENT_LIMIT)


def smaller(case: ConvCase) -> Optional[ConvCase]:
    """One step down in size: half the batch, else the spatial sizes by 3/4, else half the channels per group."""
    if case.batch > 1:
        return replace(case, batch=case.batch // 2)
    if max(case.size) > MIN_SIZE:
        return replace(case, size=tuple(max(MIN_SIZE, size * 3 // 4) for size in case.size))
    per_group_in, per_group_out = case.in_channels // case.groups, case.out_channels // case.groups
    if max(per_group_in, per_group_out) > 1:
        return replace(case, in_channels=case.groups * max(1, per_group_in // 2),
                       out_channels=case.groups * max(1, per_group_out // 2))
    if case.groups > 1:
        return replace(case, in_channels=case.in_channels // 2, out_channels=case.out_channels // 2,
                       groups=case.groups // 2)
    return None


def random_case(rng: random.Random) -> ConvCase:
    """A drawn case that fastpad accepts, shrunk under the limits."""
    while True:
        case = draw_case(rng)
        out_shape = output_shape(case)
        while case is not None and out_shape is not None and too_big(case, out_shape):
            case = smaller(case)
            out_shape = output_shape(case) if case is not None else None
        if case is not None and out_shape is not None:
            return case


def random_layers(count: int, seed: int) -> List[Layer]:
    rng = random.Random(seed)
    return [Layer(f"random{index:03d}", f"random (seed {seed})", random_case(rng)) for index in range(count)]
