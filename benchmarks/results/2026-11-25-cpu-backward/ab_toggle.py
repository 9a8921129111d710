"""The A/B of ab_env.py, ab_col2im.py and ab_dw.py: one process, a temporary build in which an environment variable
selects the old code, rounds of both variants in alternating order, each round the median of `calls` calls; returns
the median over rounds of each, in ms."""
import os
import statistics
import time


def median_seconds(f, calls):
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def old_and_new_ms(f, variable, rounds, calls):
    results = {"old": [], "new": []}
    for r in range(rounds):
        for variant in (("old", "new") if r % 2 == 0 else ("new", "old")):
            if variant == "old":
                os.environ[variable] = "1"
            else:
                os.environ.pop(variable, None)
            results[variant].append(median_seconds(f, calls))
    os.environ.pop(variable, None)
    return statistics.median(results["old"]) * 1e3, statistics.median(results["new"]) * 1e3
