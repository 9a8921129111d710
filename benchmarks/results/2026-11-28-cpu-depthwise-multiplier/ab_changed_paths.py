"""A/B of variants chosen by environment variables that temporary build switches read (removed before the commit),
on every fastpad op call (conv, conv_transpose, conv_weight_grad) of the chosen layers whose kernel path differs
between the two variants (shown second -> first): the random layers of --seeds, the 23-layer suite (--suite, both
layouts or --layout nchw|cl), the forward's calls and the backward's (or --forward-only); --nchw-only skips channels-last inputs. Each call timed alone,
interleaved across the variants, medians of 7 rounds (each the best of enough calls for 20 ms); outputs asserted equal
to 1e-5 relative. Run from the repository root with PYTHONPATH=tests, e.g.
  python ab_changed_paths.py --seeds 1,2,3,4 --suite --variants "new:;old:AB_OLD_WG=1,AB_OLD_CT=1"
Variants: 'name:VAR=val,VAR2=val;name2:...' (empty: none set); ratios are each variant's time over the first's."""
import argparse
import dataclasses
import os
import statistics
import time

import torch

from fastpad.bench.op_calls import RecordFastpadOps
from fastpad.bench.layers import SUITE
from fastpad.bench.random_layers import random_layers
from fastpad.bench.runner import case_inputs, with_optional_bias

torch.set_num_threads(2)
ROUNDS = 7
p = argparse.ArgumentParser()
p.add_argument("--variants", required=True)
p.add_argument("--seeds", default="")
p.add_argument("--suite", action="store_true")
p.add_argument("--filter", default="")
p.add_argument("--forward-only", action="store_true")
p.add_argument("--layout", default="both")
p.add_argument("--nchw-only", action="store_true")
args_ns = p.parse_args()
VARIANTS = []
for v in args_ns.variants.split(";"):
    name, _, envs = v.partition(":")
    env = dict(e.split("=") for e in envs.split(",") if e)
    VARIANTS.append((name, env))
ALL_KEYS = {k for _, env in VARIANTS for k in env}


def set_env(env):
    for k in ALL_KEYS:
        os.environ.pop(k, None)
    os.environ.update(env)


def calls_of(case):
    inputs = [t.detach().requires_grad_(t.is_floating_point()) for t in case_inputs(case, torch.device("cpu"))]
    f = with_optional_bias(case.fastpad_function(), case)
    set_env({})
    with RecordFastpadOps() as record:
        y = f(*inputs)
        if not args_ns.forward_only:
            y.backward(torch.randn_like(y))
    out = []
    for op, a in record.calls:
        a = [t.detach() if isinstance(t, torch.Tensor) else t for t in a]
        paths = []
        for _, env in VARIANTS:
            set_env(env)
            paths.append(getattr(torch.ops.fastpad, f"_{op}_path")(*a, "cpu"))
        set_env({})
        if args_ns.nchw_only and a[0].dim() > 3 and not a[0].is_contiguous():
            continue
        if len(set(paths)) > 1:
            out.append((op, " -> ".join(reversed(paths)), a))
    return out


def timed(op, a, env):
    set_env(env)
    start = time.perf_counter()
    getattr(torch.ops.fastpad, op)(*a)
    return time.perf_counter() - start


layers = [l for s in args_ns.seeds.split(",") if s for l in random_layers(100, int(s))]
if args_ns.suite:
    if args_ns.layout in ("both", "nchw"):
        layers += list(SUITE)
    if args_ns.layout in ("both", "cl"):
        layers += [dataclasses.replace(l, case=dataclasses.replace(l.case, layout="channels_last"))
                   for l in SUITE if l.case.dims > 1]
layers = [l for l in layers if args_ns.filter in l.name]
ratios = {name: [] for name, _ in VARIANTS[1:]}
for layer in layers:
    for op, path, a in calls_of(layer.case):
        with torch.no_grad():
            outs = []
            for _, env in VARIANTS:
                set_env(env)
                outs.append(getattr(torch.ops.fastpad, op)(*a))
            for o in outs[1:]:
                d = (o.double() - outs[0].double()).abs().max().item() / max(outs[0].double().abs().max().item(), 1e-30)
                assert d < 1e-5, (layer.name, op, d)
            for _ in range(2):
                for _, env in VARIANTS:
                    timed(op, a, env)
            reps = max(1, int(0.02 / max(timed(op, a, {}), 1e-6)))
            times = {name: [] for name, _ in VARIANTS}
            for _ in range(ROUNDS):
                for name, env in VARIANTS:
                    times[name].append(min(timed(op, a, env) for _ in range(reps)))
        med = {n: statistics.median(t) * 1e3 for n, t in times.items()}
        base = VARIANTS[0][0]
        cols = " ".join(f"{n} {med[n]:.3f}" for n in med)
        rs = " ".join(f"{n}/{base} {med[n] / med[base]:.2f}" for n in list(med)[1:])
        for n in list(med)[1:]:
            ratios[n].append(med[n] / med[base])
        lay = "CL" if a[0].dim() > 3 and a[0].is_contiguous(memory_format=torch.channels_last if a[0].dim() == 4 else torch.channels_last_3d) and not a[0].is_contiguous() else "  "
        print(f"{layer.name[:30]:30s} {lay} {op[:14]:14s} {path:50s} x {tuple(a[0].shape)} w {tuple(a[1].shape)} "
              f"{cols} | {rs}", flush=True)
set_env({})
for n, r in ratios.items():
    if r:
        print(f"{n}: {len(r)} calls, {min(r):.2f}-{max(r):.2f}, geomean {statistics.geometric_mean(r):.3f}")
