"""`python -m fastpad roofline`: a roofline model of each layer of the benchmark suite on an NVIDIA H100, forward.

It predicts, from bytes and FLOPs alone, the best time ratio fastpad's fused kernel can reach against the eager
F.pad + cuDNN route (fastpad/reference.py), with both running at the roofline:

- FLOPs = 2 * multiply-adds (fastpad/bench/peers.py), the same for both routes.
- fused bytes: read the input once, read the weight once, write the output once.
- F.pad + cuDNN bytes, in two parts:
  - pad copy: convolution: F.pad reads the input and writes the padded input. The reference calls F.pad for every
    layer, and F.pad copies even where the pads are symmetric or zero, so every convolution has a pad copy.
    Transposed convolution: the route is the full conv_transpose, then F.pad of that full output (reading it and
    writing it, zero-extended where the window reaches past it: again a copy even with nothing to extend), then the
    crop, a view, and, with a bias, `+ bias`, which reads the cropped window and writes the output.
  - conv: the conv reads the (padded) input and the weight and writes its output (transposed: the full output).
- The bias vector itself (out_channels elements) is left out everywhere: it is negligible beside any activation.
- predicted time: fused max(fused bytes / bandwidth, FLOPs / peak); F.pad + cuDNN pad copy bytes / bandwidth +
  max(conv bytes / bandwidth, FLOPs / peak). Their ratio is the best fastpad can do: at most 1.

The symmetric floor of `python -m fastpad bench` (torch's conv with symmetric padding, no F.pad) reads the unpadded
input and the weight and writes the output, so it moves the fused bytes (give or take the extra output row a
symmetric pad may add) and its predicted time is the fused one; the table has no column for it.

The bytes are minima, the same for NCHW and channels_last inputs.
"""
import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import List, Optional, Sequence

import torch

from fastpad._geometry import transposed_full_size
from fastpad._report import markdown_table
from fastpad.bench.layers import SUITE, Layer
from fastpad.bench.peers import multiply_adds
from fastpad.bench.runner import geometric_mean, select_layers
from fastpad.cases import ConvCase

# The H100 SXM copy bandwidth the model assumes: about 90% of its HBM3's 3.35 TB/s on paper (not measured here).
H100_COPY_BANDWIDTH = 3.0e12  # bytes/s
# NVIDIA's H100 SXM datasheet: bfloat16 (and float16) dense tensor-core peak, without structured sparsity.
H100_BF16_DENSE_PEAK = 989e12  # FLOP/s
DEFAULT_DTYPE = "bfloat16"
DEFAULT_BATCH = 256


@dataclass(frozen=True)
class Roofline:
    """The model of one layer (see the module docstring); bytes in bytes, times in seconds."""
    layer: str
    case: ConvCase
    flops: int
    fused_bytes: int
    pad_copy_bytes: int
    conv_bytes: int
    fused_seconds: float
    pad_conv_seconds: float
    bound: str  # what limits the fused kernel: "memory" or "compute"

    @property
    def pad_conv_bytes(self) -> int:
        return self.pad_copy_bytes + self.conv_bytes

    @property
    def intensity(self) -> float:
        """FLOP per byte of the fused kernel."""
        return self.flops / self.fused_bytes

    @property
    def best_ratio(self) -> float:
        return self.fused_seconds / self.pad_conv_seconds


def roofline(layer: str, case: ConvCase, bandwidth: float = H100_COPY_BANDWIDTH,
             peak: float = H100_BF16_DENSE_PEAK) -> Roofline:
    """The model of `case` in its own dtype and batch: bandwidth in bytes/s, peak in FLOP/s."""
    input_elements = case.batch * case.in_channels * math.prod(case.size)
    weight_elements = math.prod(case.weight_shape())
    if case.transposed:
        crop_lo, out_size = case.crops()
        full = [transposed_full_size(i, k, s, d) for i, k, s, d in
                zip(case.size, case.per_dim(case.kernel), case.per_dim(case.stride), case.per_dim(case.dilation))]
        # F.pad's zero extension of the full output (fastpad/reference.py, crop_or_extend): before and after it.
        extended = [max(0, -lo) + f + max(0, lo + out - f) for lo, out, f in zip(crop_lo, out_size, full)]
        output_elements = case.batch * case.out_channels * math.prod(out_size)
        full_elements = case.batch * case.out_channels * math.prod(full)
        bias_pass = 2 * output_elements if case.bias else 0
        pad_copy_elements = full_elements + case.batch * case.out_channels * math.prod(extended) + bias_pass
        conv_elements = input_elements + weight_elements + full_elements
    else:
        padded_elements = case.batch * case.in_channels * math.prod(i + lo + hi for i, (lo, hi) in
                                                                    zip(case.size, case.pads()))
        output_elements = case.batch * case.out_channels * math.prod(case.conv_output_size())
        pad_copy_elements = input_elements + padded_elements
        conv_elements = padded_elements + weight_elements + output_elements
    element_bytes = case.torch_dtype.itemsize
    flops = 2 * multiply_adds(case)
    fused_bytes = (input_elements + weight_elements + output_elements) * element_bytes
    pad_copy_bytes, conv_bytes = pad_copy_elements * element_bytes, conv_elements * element_bytes
    compute_seconds = flops / peak
    return Roofline(
        layer=layer, case=case, flops=flops, fused_bytes=fused_bytes, pad_copy_bytes=pad_copy_bytes,
        conv_bytes=conv_bytes, fused_seconds=max(fused_bytes / bandwidth, compute_seconds),
        pad_conv_seconds=pad_copy_bytes / bandwidth + max(conv_bytes / bandwidth, compute_seconds),
        bound="memory" if fused_bytes / bandwidth >= compute_seconds else "compute")


def suite_rooflines(layers: Sequence[Layer] = SUITE, dtype: str = DEFAULT_DTYPE, batch: int = DEFAULT_BATCH,
                    bandwidth: float = H100_COPY_BANDWIDTH, peak: float = H100_BF16_DENSE_PEAK) -> List[Roofline]:
    """The model of each layer at `dtype` and `batch` (which replaces each layer's own)."""
    return [roofline(layer.name, replace(layer.case, dtype=dtype, batch=batch), bandwidth, peak) for layer in layers]


def in_strided_depthwise_or_1d_subset(case: ConvCase) -> bool:
    """Any stride > 1, depthwise (groups == in_channels) or one spatial dimension."""
    return max(case.per_dim(case.stride)) > 1 or case.groups == case.in_channels or case.dims == 1


HEADERS = ["layer", "GFLOP", "fused MB", "F.pad+cuDNN MB", "FLOP/byte", "bound", "fused µs", "F.pad+cuDNN µs",
           "best ratio"]


def table_rows(rooflines: Sequence[Roofline]) -> List[List[str]]:
    return [[r.layer, f"{r.flops / 1e9:.2f}", f"{r.fused_bytes / 1e6:.1f}", f"{r.pad_conv_bytes / 1e6:.1f}",
             f"{r.intensity:.1f}", r.bound, f"{r.fused_seconds * 1e6:.1f}", f"{r.pad_conv_seconds * 1e6:.1f}",
             f"{r.best_ratio:.2f}"] for r in rooflines]


def summary_lines(rooflines: Sequence[Roofline]) -> List[str]:
    subset = [r for r in rooflines if in_strided_depthwise_or_1d_subset(r.case)]
    lines = [f"geomean best ratio over all {len(rooflines)} layers: "
             f"{geometric_mean([r.best_ratio for r in rooflines]):.3f}"]
    if subset:
        lines.append(f"geomean best ratio over the {len(subset)} stride > 1, depthwise or 1-d layers: "
                     f"{geometric_mean([r.best_ratio for r in subset]):.3f}")
    return lines


def header_lines(dtype: str, batch: int, bandwidth: float, peak: float, peak_given: bool) -> List[str]:
    lines = [f"fastpad roofline (H100 model, forward): {dtype} ({getattr(torch, dtype).itemsize} bytes/element), "
             f"batch {batch}, bandwidth {bandwidth / 1e12:.2f} TB/s, peak {peak / 1e12:g} TFLOP/s",
             "minimum bytes (the same for NCHW and channels_last, bias vector left out), MB = 1e6 bytes",
             "best ratio = fused µs / F.pad+cuDNN µs; torch's symmetric-padding floor moves the fused bytes"]
    if dtype == "float32" and not peak_given:
        lines.append("note: float32 on tensor cores runs as TF32; pass --peak with its peak (the default is bf16's)")
    return lines


def main(dtype: str = DEFAULT_DTYPE, batch: int = DEFAULT_BATCH, bandwidth_tbps: Optional[float] = None,
         peak_tflops: Optional[float] = None, layers: Optional[str] = None, markdown_path: Optional[str] = None) -> int:
    chosen = select_layers(SUITE, layers)
    if not chosen:
        print(f"no layer matches {layers!r}; the layers are: {', '.join(layer.name for layer in SUITE)}",
              file=sys.stderr)
        return 2
    bandwidth = H100_COPY_BANDWIDTH if bandwidth_tbps is None else bandwidth_tbps * 1e12
    peak = H100_BF16_DENSE_PEAK if peak_tflops is None else peak_tflops * 1e12
    rooflines = suite_rooflines(chosen, dtype, batch, bandwidth, peak)
    text = "\n\n".join(["\n".join(header_lines(dtype, batch, bandwidth, peak, peak_tflops is not None)),
                        markdown_table(HEADERS, table_rows(rooflines)), "\n".join(summary_lines(rooflines))])
    print(text)
    if markdown_path:
        Path(markdown_path).write_text(text + "\n")
        print(f"wrote {markdown_path}")
    return 0
