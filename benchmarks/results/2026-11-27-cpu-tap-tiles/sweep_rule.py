"""The sweep behind kernel_paths.h's cpu_tap_tiles rule: NCHW float32 convs, 64 input channels, k3/k5, stride 1/2,
'same' reflect, batch 2, square images of 7-56, 3-40 output channels, each timed alone with the tap tiles (then taken
for every such conv: AB_TAPTILES=999) against the blocked kernel (AB_TAPTILES=0), through a temporary build switch
removed before the commit; interleaved, 9 rounds of 3 calls, medians. eb: the blocked kernel's lanes holding real
channels; et: the tiles' positions that are kept columns (output width / the phase planes' pitch). Output:
sweep_rule.json (the run of this session, before the rule existed)."""
import os, sys, time, statistics, torch, fastpad, json
torch.set_num_threads(2)
def bench(fn, modes=("0","999"), rounds=9, reps=3):
    times = {m: [] for m in modes}
    for r in range(rounds):
        for m in modes:
            os.environ["AB_TAPTILES"] = m
            t = time.perf_counter()
            for _ in range(reps): fn()
            times[m].append((time.perf_counter() - t) / reps)
    return {m: statistics.median(v) for m, v in times.items()}
rows=[]
for hw in (7,14,28,56):
  for k in (3,5):
    for s in (1,2):
      for cout in (3,8,12,16,20,24,32,40):
        cin=64; batch=2
        x = torch.randn(batch, cin, hw, hw); w = torch.randn(cout, cin, k, k)
        fn = lambda: fastpad.conv2d(x, w, stride=s, padding="same", padding_mode="reflect")
        t = bench(fn)
        ow = (hw + s - 1)//s; pitch = ow + (k-1)//s
        eb = cout / (16*((cout+15)//16)); et = ow/pitch
        r = t['999']/t['0']
        rows.append(dict(hw=hw,k=k,s=s,cout=cout,old=t['0'],new=t['999'],ratio=r,eb=eb,et=et))
        print(f"hw{hw} k{k} s{s} cout{cout}: blocked {t['0']*1e3:.3f} tiles {t['999']*1e3:.3f} ratio {r:.2f} eb {eb:.2f} et {et:.2f}", flush=True)
json.dump(rows, open('sweep_rule.json','w'))
