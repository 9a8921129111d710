"""A/B of two builds of fastpad (two checkouts, each with its extension built in place), for a change that no
temporary switch can choose at run time (here: how the compiler inlines the micro-kernel's tiles). Every fastpad op
call of the chosen layers whose kernel path is in --paths (the random layers of --seeds, the 23-layer suite with
--suite, both layouts) is timed in one worker process per build, the builds' workers alternating (A, B, A, B, ...)
--rounds times; in a worker each call is the median of 7 rounds of the best of enough calls for 20 ms. The ratio
of a call is the median of A's rounds over the median of B's. Run from anywhere:
  python ab_builds.py --trees old=/path/to/old,new=/path/to/new --seeds 1,2,3,4 --suite --paths cpu_blocked_avx512
--layers keeps only the named layers; each line ends with every round's times (A/B). Each tree's `tests` directory
must hold code_paths.py."""
import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys


def worker(args):
    import time

    import torch
    from fastpad.bench.op_calls import RecordFastpadOps
    from fastpad.bench.layers import SUITE
    from fastpad.bench.random_layers import random_layers
    from fastpad.bench.runner import case_inputs, with_optional_bias

    torch.set_num_threads(2)
    paths = set(args.paths.split(","))
    layers = [l for s in args.seeds.split(",") if s for l in random_layers(100, int(s))]
    if args.suite:
        layers += list(SUITE)
        layers += [dataclasses.replace(l, case=dataclasses.replace(l.case, layout="channels_last"))
                   for l in SUITE if l.case.dims > 1]
    if args.layers:
        layers = [l for l in layers if l.name in args.layers.split(",")]
    out = []
    for layer in layers:
        case = layer.case
        inputs = [t.detach().requires_grad_(t.is_floating_point()) for t in case_inputs(case, torch.device("cpu"))]
        f = with_optional_bias(case.fastpad_function(), case)
        with RecordFastpadOps() as record:
            y = f(*inputs)
            y.backward(torch.randn_like(y))
        for index, (op, a) in enumerate(record.calls):
            a = [t.detach() if isinstance(t, torch.Tensor) else t for t in a]
            path = getattr(torch.ops.fastpad, f"_{op}_path")(*a, "cpu")
            if path not in paths:
                continue
            fn = getattr(torch.ops.fastpad, op)
            with torch.no_grad():
                for _ in range(2):
                    fn(*a)
                start = time.perf_counter()
                fn(*a)
                reps = max(1, int(0.02 / max(time.perf_counter() - start, 1e-6)))
                rounds = []
                for _ in range(7):
                    times = []
                    for _ in range(reps):
                        start = time.perf_counter()
                        fn(*a)
                        times.append(time.perf_counter() - start)
                    rounds.append(min(times))
            layout = "CL" if not a[0].is_contiguous() else "  "
            key = (f"{layer.name[:30]:30s} {layout} {op[:14]:14s} #{index} {path:28s} x {tuple(a[0].shape)} "
                   f"w {tuple(a[1].shape)}")
            out.append((key, statistics.median(rounds) * 1e3))
    json.dump(out, sys.stdout)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--trees", default="")
    p.add_argument("--paths", required=True)
    p.add_argument("--seeds", default="")
    p.add_argument("--suite", action="store_true")
    p.add_argument("--layers", default="")  # only these layers (names, comma-separated)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--worker", action="store_true")
    args = p.parse_args()
    if args.worker:
        return worker(args)
    trees = [t.split("=", 1) for t in args.trees.split(",")]
    times = {name: {} for name, _ in trees}
    forwarded = ["--paths", args.paths, "--seeds", args.seeds, "--layers", args.layers]
    forwarded += ["--suite"] if args.suite else []
    for r in range(args.rounds):
        for name, tree in trees:
            env = dict(os.environ, PYTHONPATH=f"{tree}:{tree}/tests")
            result = subprocess.run([sys.executable, __file__, "--worker", *forwarded], env=env, cwd=tree,
                                    capture_output=True, text=True, check=True)
            for key, ms in json.loads(result.stdout):
                times[name].setdefault(key, []).append(ms)
            print(f"round {r + 1}: {name} done", file=sys.stderr, flush=True)
    (a_name, _), (b_name, _) = trees
    ratios = []
    for key in times[a_name]:
        a, b = statistics.median(times[a_name][key]), statistics.median(times[b_name][key])
        ratios.append(a / b)
        rounds = " ".join(f"{x:.3f}/{y:.3f}" for x, y in zip(times[a_name][key], times[b_name][key]))
        print(f"{key} {a_name} {a:.3f} {b_name} {b:.3f} | {a_name}/{b_name} {a / b:.2f} | rounds {rounds}")
    print(f"{a_name}/{b_name}: {len(ratios)} calls, {min(ratios):.2f}-{max(ratios):.2f}, "
          f"geomean {statistics.geometric_mean(ratios):.3f}")


main()
