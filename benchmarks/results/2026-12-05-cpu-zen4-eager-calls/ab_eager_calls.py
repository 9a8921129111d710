"""In-process A/B of the eager call: fastpad's public function through fastpad._C (new) against the same function
with fastpad._C answering NotImplemented, so the call goes through torch.ops (old), forward under no_grad, on the
random layers of the given seeds whose forward is under the bound; interleaved rounds, medians."""
import statistics, sys, time
import torch
import fastpad
from fastpad import functional
from fastpad.bench.random_layers import random_layers
from fastpad.bench.runner import layer_case, case_inputs, Settings, FULL_EFFORT, with_optional_bias

class NotImplementedC:
    def conv(self, *args): return NotImplemented
    def conv_transpose(self, *args): return NotImplemented

real = functional._C
settings = Settings(torch.device("cpu"), torch.float32, None, False, FULL_EFFORT, peers="none")
bound_ms = float(sys.argv[2])
rows = []
for seed in [int(s) for s in sys.argv[1].split(",")]:
    for layer in random_layers(100, seed):
        case = layer_case(layer, settings); inputs = case_inputs(case, settings.device)
        fn = with_optional_bias(case.fastpad_function(), case)
        with torch.no_grad():
            fn(*inputs)
            t = time.perf_counter(); fn(*inputs); first = (time.perf_counter() - t) * 1e3
        if first > bound_ms:
            continue
        calls = max(20, int(2.0 / max(first, 0.005)))
        times = {"old": [], "new": []}
        with torch.no_grad():
            for r in range(9):
                for name in ("old", "new"):
                    functional._C = NotImplementedC() if name == "old" else real
                    fn(*inputs)
                    t = time.perf_counter()
                    for i in range(calls): fn(*inputs)
                    times[name].append((time.perf_counter() - t) / calls * 1e6)
        functional._C = real
        old, new = statistics.median(times["old"]), statistics.median(times["new"])
        rows.append((seed, layer.name, case.shape_text(), old, new))
        print(f"seed {seed} {layer.name:10s} {case.shape_text()[:60]:60s} old {old:8.1f} us  new {new:8.1f} us  "
              f"new/old {new/old:.3f}  saved {old-new:5.1f} us", flush=True)
ratios = [n / o for *_, o, n in rows]
saved = [o - n for *_, o, n in rows]
import math
print(f"{len(rows)} layers: new/old {min(ratios):.3f}-{max(ratios):.3f}, geomean "
      f"{math.exp(sum(map(math.log, ratios))/len(ratios)):.3f}; saved per call median {statistics.median(saved):.1f} us")
