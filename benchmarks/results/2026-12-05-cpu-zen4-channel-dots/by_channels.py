"""Each moved call of an ab_variants.py log with its input and output channels per group, taps and reduction, and the
new/old range and geomean by the most output channels per group: python by_channels.py LOG [LOG ...]"""
import re, sys, math
for f in sys.argv[1:]:
    print(f)
    rs=[]
    for line in open(f):
        m = re.search(r"^(random\d+|\S+)\s.*?x \(([\d, ]+)\) w \(([\d, ]+)\) s \[([\d, ]+)\].*new/old ([\d.]+)", line)
        if not m: continue
        x=[int(v) for v in m.group(2).split(",")]; w=[int(v) for v in m.group(3).split(",")]
        groups = x[1]//w[1]; cout_g = w[0]//groups; taps = math.prod(w[2:])
        r=float(m.group(5)); rs.append((cout_g, r))
        print(f"  {m.group(1):10s} cin_g {w[1]:4d} cout_g {cout_g:2d} taps {taps:3d} red {w[1]*taps:6d} s {m.group(4):8s} {r:.2f}")
    for bound in (4,5,6,8):
        sel=[r for c,r in rs if c<=bound]
        if sel: print(f"  cout_g<={bound}: {len(sel)} calls {min(sel):.2f}-{max(sel):.2f} geomean {math.exp(sum(map(math.log,sel))/len(sel)):.3f}")
