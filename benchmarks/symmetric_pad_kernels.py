"""Which kernel should take a zero pad that is the same on both sides: fastpad's, or torch's own convolution with that
padding (no copy either way)? `python -m benchmarks.symmetric_pad_kernels` from the repository root.

The layers are MobileNetV2's depthwise 3x3 layers and its stem at batch 8 (224x224), in NCHW and channels_last, with
the pads TF 'SAME' gives them (stride 1: (1, 1); stride 2 on an even size: (0, 1), where torch's symmetric padding 1
is only the cost floor, a different result). Interleaved medians, one process; the ratio decides
fastpad/_graph_fusion.py's `_fastpad_depthwise_wins`.
"""
import sys

import torch
import torch.nn.functional as F

import fastpad  # noqa: F401  (registers the ops)
from fastpad._info import source_description
from fastpad._report import markdown_table
from fastpad.bench.runner import Effort, machine_description, median_times_interleaved

LAYERS = [  # (in channels, out channels, size, stride, groups)
    (3, 32, 224, 2, 1), (32, 32, 112, 1, 32), (96, 96, 112, 2, 96), (144, 144, 56, 1, 144), (144, 144, 56, 2, 144),
    (192, 192, 28, 1, 192), (192, 192, 28, 2, 192), (384, 384, 14, 1, 384), (576, 576, 14, 2, 576),
    (960, 960, 7, 1, 960),
]


def main() -> int:
    torch.manual_seed(0)
    effort = Effort(warmup_rounds=1, budget_seconds=1.0, min_repeats=5, max_repeats=50)
    rows = []
    for layout in (torch.contiguous_format, torch.channels_last):
        for c_in, c_out, size, stride, groups in LAYERS:
            x = torch.randn(8, c_in, size, size).to(memory_format=layout)
            w = torch.randn(c_out, c_in // groups, 3, 3).to(memory_format=layout)
            lo, hi = (1, 1) if stride == 1 else (0, 1)
            steps = {
                "fastpad": lambda: torch.ops.fastpad.conv(x, w, None, [stride] * 2, [lo] * 2, [hi] * 2, [1, 1],
                                                          groups, "zeros"),
                "torch": lambda: F.conv2d(x, w, None, stride, 1, 1, groups),
            }
            with torch.no_grad():
                medians, repeats = median_times_interleaved(steps, torch.device("cpu"), effort)
            rows.append(["NCHW" if layout == torch.contiguous_format else "channels_last",
                         f"{c_in}->{c_out} {size}x{size} s{stride} g{groups}", f"({lo}, {hi})",
                         f"{medians['fastpad'] * 1e3:.2f}", f"{medians['torch'] * 1e3:.2f}",
                         f"{medians['fastpad'] / medians['torch']:.2f}", str(repeats)])
    print(f"machine: {machine_description(torch.device('cpu'))}; torch {torch.__version__}; commit {source_description()}")
    print()
    print(markdown_table(["layout", "layer (batch 8, 3x3)", "pads", "fastpad ms", "torch padding=1 ms",
                          "fastpad/torch", "repeats"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
