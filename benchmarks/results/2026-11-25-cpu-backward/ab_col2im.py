"""A/B of the tried channels-last col2im (tried-channels-last-col2im-source-tables.diff): FP_OLD_COL2IM=1 selected the
old loop in a temporary build. Input gradients of random layers on the GEMM + col2im, 11 rounds, each the median of
5 calls (ab_toggle.py)."""
import torch
import fastpad  # noqa: F401  (registers torch.ops.fastpad)
from ab_toggle import old_and_new_ms
from fastpad.bench import runner as R
from fastpad.bench.random_layers import random_layers

ops = torch.ops.fastpad
picks = [(2, "random072"), (2, "random050"), (2, "random034"), (1, "random066"), (1, "random029"), (1, "random016"),
         (2, "random069"), (1, "random007")]
for seed, name in picks:
    case = next(layer for layer in random_layers(100, seed) if layer.name == name).case
    x, w, *_ = R.case_inputs(case, torch.device("cpu"))
    stride, lo, hi, dil, groups, mode = case.conv_op_arguments()
    g = torch.randn_like(ops.conv(x, w, None, stride, lo, hi, dil, groups, mode))
    args = (None, stride, lo, list(x.shape[2:]), dil, groups, mode)
    with torch.no_grad():
        old, new = old_and_new_ms(lambda: ops.conv_transpose(g, w, *args), "FP_OLD_COL2IM", rounds=11, calls=5)
    print(f"s{seed} {name} {case.shape_text()} {case.layout}: dx path {ops._conv_transpose_path(g, w, *args, 'cpu')}, "
          f"old {old:.3f} ms new {new:.3f} ms new/old {new / old:.2f}", flush=True)
