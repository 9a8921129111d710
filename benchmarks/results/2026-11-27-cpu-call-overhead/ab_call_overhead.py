"""A/B of fastpad/functional.py's per-call overhead: the module of the commit before (a copy given as the argument)
against the installed one (after), interleaved in one process, medians of 15 rounds (each the best of 3 runs of 300
calls), on layers small enough that the call's overhead is most of its time. Outputs asserted equal.
Run: git show 98bbee8:fastpad/functional.py > /tmp/functional_before.py
     python ab_call_overhead.py /tmp/functional_before.py"""
import importlib.util, statistics, sys, time
import torch, fastpad
import torch.nn.functional as F
torch.set_num_threads(2)
spec = importlib.util.spec_from_file_location("fastpad._functional_before", sys.argv[1])
before = importlib.util.module_from_spec(spec); before.__package__ = "fastpad"; spec.loader.exec_module(before)
after = fastpad.functional
cl = torch.channels_last
cases = {
    "1x8x4x4 k1 (NCHW)": (torch.randn(1, 8, 4, 4), torch.randn(8, 8, 1, 1), dict(padding=0)),
    "random007 1x79x8x8->51 k1 s3 CL": (torch.randn(1, 79, 8, 8).to(memory_format=cl),
                                        torch.randn(51, 79, 1, 1).to(memory_format=cl), dict(stride=3, padding=0)),
    "1x16x16x16 k3 same": (torch.randn(1, 16, 16, 16), torch.randn(16, 16, 3, 3), dict(padding="same")),
}
def per_call(f, calls=300):
    t = time.perf_counter()
    for _ in range(calls): f()
    return (time.perf_counter() - t) / calls * 1e6
for name, (x, w, kw) in cases.items():
    fns = {"before": lambda: before.conv2d(x, w, **kw), "after": lambda: after.conv2d(x, w, **kw)}
    torch.testing.assert_close(fns["before"](), fns["after"](), rtol=0, atol=0)
    for f in fns.values():
        for _ in range(300): f()
    rounds = {k: [] for k in fns}
    for _ in range(15):
        for k, f in fns.items(): rounds[k].append(min(per_call(f) for _ in range(3)))
    b, a = statistics.median(rounds["before"]), statistics.median(rounds["after"])
    print(f"{name:36s} before {b:6.2f} us  after {a:6.2f} us  after/before {a / b:.3f}", flush=True)
