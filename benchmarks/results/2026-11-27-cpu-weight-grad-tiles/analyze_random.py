import re, sys, math
from fastpad.bench.random_layers import random_layers
from fastpad.bench.layers import SUITE
cases = {}
for seed in (1,2,3,4):
    for l in random_layers(100, seed): cases[(f"s{seed}", l.name)] = l.case
lines = open(sys.argv[1]).read().splitlines()
rows = []
for i, line in enumerate(lines):
    m = re.match(r"(s\d) (\S+) (\S+) (\S+) ", line)
    if not m: continue
    r = float(re.search(r"after/before ([\d.]+)", lines[i+1]).group(1))
    before = float(re.search(r"before ([\d.]+) ms", lines[i+1]).group(1))
    c = cases[(m.group(1), m.group(2))]
    x_ch, y_ch = (c.out_channels, c.in_channels) if c.transposed else (c.in_channels, c.out_channels)
    # conv output positions: for a conv, y's; for a transposed conv, x's (the conv output)
    import torch
    x, w, b = c.random_inputs()
    y = c.fastpad_function()(x, w, b)
    conv_out = x if c.transposed else y
    conv_in = y if c.transposed else x
    pos = conv_out[0,0].numel() * conv_out.shape[0]
    cin = conv_in.shape[1] // c.groups; cout = conv_out.shape[1] // c.groups
    taps = math.prod(w.shape[2:])
    rows.append((r, m.group(3)[:2], cin*taps, cout, pos, c.groups, before))
for row in sorted(rows, key=lambda t: (t[1], t[2])):
    print(f"{row[0]:5.2f} {row[1]} reduce {row[2]:6d} cout {row[3]:4d} depth {row[4]:7d} groups {row[5]:3d} before {row[6]:.3f}")
