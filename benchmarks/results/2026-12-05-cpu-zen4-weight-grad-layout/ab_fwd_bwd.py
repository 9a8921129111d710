"""fwd+bwd of the channels-last random layers (weights channels-last, as the bench makes them), interleaved between
two variants chosen by an environment variable that a temporary switch reads; medians of 7 rounds of 15 steps."""
import os, sys, time, statistics, math, torch
from fastpad.bench.random_layers import random_layers
from fastpad.bench.layers import SUITE
from fastpad.bench.runner import case_inputs, with_optional_bias
torch.set_num_threads(2)
seeds = [int(s) for s in sys.argv[1].split(",")]
layers = [l for s in seeds for l in random_layers(100, s)]
if "--suite" in sys.argv:
    from dataclasses import replace
    layers += [type(l)(l.name + "_cl", l.model, replace(l.case, layout="channels_last")) for l in SUITE
               if len(l.case.input_shape()) >= 4]
ratios = []
for layer in layers:
    case = layer.case
    if case.layout != "channels_last": continue
    inputs = case_inputs(case, torch.device("cpu"))
    f = with_optional_bias(case.fastpad_function(), case)
    leaves = [t.detach().requires_grad_() for t in inputs]
    def step():
        for x in leaves: x.grad = None
        o = f(*leaves); o.backward(torch.ones_like(o))
    step()
    times = {"old": [], "new": []}
    for r in range(7):
        for v in ("old", "new"):
            if v == "old": os.environ["AB_OLD"] = "1"
            else: os.environ.pop("AB_OLD", None)
            step()
            ts = []
            for _ in range(15):
                a = time.perf_counter(); step(); ts.append(time.perf_counter() - a)
            times[v].append(min(ts))
    os.environ.pop("AB_OLD", None)
    old, new = statistics.median(times["old"]), statistics.median(times["new"])
    ratios.append(new / old)
    w = inputs[1]
    print(f"{layer.name:28s} {case.describe()[:70]:70s} weight {w.numel()*w.element_size()/1e6:6.2f} MB old {old*1e3:8.3f} new {new*1e3:8.3f} ms | new/old {new/old:.2f}", flush=True)
print(f"{len(ratios)} layers, new/old {min(ratios):.2f}-{max(ratios):.2f}, geomean {math.exp(sum(map(math.log, ratios))/len(ratios)):.3f}")
