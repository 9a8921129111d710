"""A/B of variants chosen by environment variables that temporary build switches read (removed before the commit),
on every fastpad op call (conv, conv_transpose, conv_weight_grad) of the chosen layers whose kernel path is in
--paths: the random layers of --seeds, the 23-layer suite (--suite, both layouts or --layout nchw|cl), the forward's
calls and the backward's (or --forward-only); --nchw-only skips channels-last inputs. Each call timed alone,
interleaved across the variants, medians of 7 rounds (each the best of enough calls for 20 ms, or with --typical their
median); outputs asserted equal to 1e-5 relative (--tolerance); --dtype runs every layer in one dtype. Run from the repository root with PYTHONPATH=tests, e.g.
  python ab_variants.py --seeds 1,2,3,4 --suite --nchw-only --variants "new:;old:AB_OLD=1" --paths cpu_blocked_avx512
With --touched VAR, only the calls that write to stderr when run with VAR=1 set are timed (a temporary switch that
prints where a change applies, for a change inside a kernel path).
With --moved (for a change of the kernel choice), only the calls whose path differs between the variants are timed,
whatever --paths says, and the line shows the path under each variant.
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
p.add_argument("--paths", required=True)
p.add_argument("--seeds", default="")
p.add_argument("--suite", action="store_true")
p.add_argument("--filter", default="")
p.add_argument("--forward-only", action="store_true")
p.add_argument("--layout", default="both")
p.add_argument("--nchw-only", action="store_true")
p.add_argument("--moved", action="store_true")
p.add_argument("--touched", default="")
p.add_argument("--dtype", default="")  # every layer in this dtype (e.g. bfloat16) instead of its own
p.add_argument("--tolerance", type=float, default=1e-5)  # relative to the largest output; reorderings of long sums
# Each round's time: the best of its calls (default), or their median (--typical: counts what a fresh output's page
# faults cost in a typical call, which the best call of a round may escape)
p.add_argument("--typical", action="store_true")
args_ns = p.parse_args()
PATHS = set(args_ns.paths.split(","))
VARIANTS = []
for v in args_ns.variants.split(";"):
    name, _, envs = v.partition(":")
    env = dict(e.split("=") for e in envs.split(",") if e)
    VARIANTS.append((name, env))
ALL_KEYS = {k for _, env in VARIANTS for k in env} | ({args_ns.touched} if args_ns.touched else set())


def set_env(env):
    for k in ALL_KEYS:
        os.environ.pop(k, None)
    os.environ.update(env)


def writes_to_stderr(op, a):
    """Whether the call writes to file descriptor 2 with the --touched variable set."""
    import tempfile
    with tempfile.TemporaryFile() as capture:
        saved = os.dup(2)
        os.dup2(capture.fileno(), 2)
        try:
            set_env({args_ns.touched: "1"})
            with torch.no_grad():
                getattr(torch.ops.fastpad, op)(*a)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            set_env({})
        capture.seek(0)
        return len(capture.read()) > 0


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
        if args_ns.nchw_only and a[0].dim() > 3 and not a[0].is_contiguous():
            continue
        if args_ns.moved:
            paths = []
            for _, env in VARIANTS:
                set_env(env)
                paths.append(getattr(torch.ops.fastpad, f"_{op}_path")(*a, "cpu"))
            set_env({})
            if len(set(paths)) > 1:
                out.append((op, "/".join(p.removeprefix("cpu_") for p in paths), a))
            continue
        path = getattr(torch.ops.fastpad, f"_{op}_path")(*a, "cpu")
        if args_ns.touched and path in PATHS and writes_to_stderr(op, a):
            out.append((op, path, a))
        elif not args_ns.touched and path in PATHS:
            out.append((op, path, a))
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
if args_ns.dtype:
    layers = [dataclasses.replace(l, case=dataclasses.replace(l.case, dtype=args_ns.dtype)) for l in layers]
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
                assert d < args_ns.tolerance, (layer.name, op, d)
            for _ in range(2):
                for _, env in VARIANTS:
                    timed(op, a, env)
            reps = max(1, int(0.02 / max(timed(op, a, {}), 1e-6)))
            times = {name: [] for name, _ in VARIANTS}
            for _ in range(ROUNDS):
                for name, env in VARIANTS:
                    round_times = [timed(op, a, env) for _ in range(reps)]
                    times[name].append(statistics.median(round_times) if args_ns.typical else min(round_times))
        med = {n: statistics.median(t) * 1e3 for n, t in times.items()}
        base = VARIANTS[0][0]
        cols = " ".join(f"{n} {med[n]:.3f}" for n in med)
        rs = " ".join(f"{n}/{base} {med[n] / med[base]:.2f}" for n in list(med)[1:])
        for n in list(med)[1:]:
            ratios[n].append(med[n] / med[base])
        lay = "CL" if a[0].dim() > 3 and a[0].is_contiguous(memory_format=torch.channels_last if a[0].dim() == 4 else torch.channels_last_3d) and not a[0].is_contiguous() else "  "
        print(f"{layer.name[:30]:30s} {lay} {op[:14]:14s} {path:28s} x {tuple(a[0].shape)} w {tuple(a[1].shape)} "
              f"s {a[3]} y {tuple(outs[0].shape)} {cols} | {rs}", flush=True)
set_env({})
for n, r in ratios.items():
    if r:
        print(f"{n}: {len(r)} calls, {min(r):.2f}-{max(r):.2f}, geomean {statistics.geometric_mean(r):.3f}")
