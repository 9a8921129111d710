import json, sys, torch
import fastpad
from fastpad.bench.random_layers import random_layers
ops = torch.ops.fastpad
def paths(case):
    x, w, b = case.random_inputs()
    if case.transposed:
        crop_lo, out_size = case.crops()
        return ops._conv_transpose_path(x, w, b, list(case.per_dim(case.stride)), crop_lo, out_size,
                                        list(case.per_dim(case.dilation)), case.groups, case.padding_mode, "cpu")
    return ops._conv_path(x, w, b, *case.conv_op_arguments(), "cpu")
seed = int(sys.argv[1]); js = sys.argv[2]
layers = {l.name: l for l in random_layers(100, seed)}
res = json.load(open(js))["results"]
rows = sorted(res, key=lambda r: -r["ratio_to_pad_conv"])
for r in rows:
    if r["ratio_to_pad_conv"] <= 1.05: continue
    l = layers[r["layer"]]
    try: p = paths(l.case)
    except Exception as e: p = "ERR " + str(e)[:60]
    print(f'{r["ratio_to_pad_conv"]:5.2f} {r["mode"]:8s} {p:32s} {r["layer"]} {r["shape"]}  fp={r["fastpad_ms"]:.2f}ms floor/pc={r["floor_ms"]/r["pad_conv_ms"]:.2f}')
