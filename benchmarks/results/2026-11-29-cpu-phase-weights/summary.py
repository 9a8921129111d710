"""Summary of the A/B logs in this directory: the conv_transpose calls, each of whose stride phases' weight
(conv_params.cpp's transpose_phase_weight) the loop now writes, and the unchanged calls (conv's calls on the same
paths), old's time over new's. Run from the repository root:
  python summary.py LOG ..."""
import statistics
import sys

for path in sys.argv[1:]:
    changed, unchanged = [], []
    for line in open(path):
        if " | " not in line:
            continue
        _, *rest = line.split()
        op = rest[1] if rest[0] == "CL" else rest[0]
        (changed if op == "conv_transpose" else unchanged).append(float(line.split()[-1]))
    for label, r in (("conv_transpose", changed), ("unchanged", unchanged)):
        if r:
            print(f"{path}: {label} {len(r)} calls, {min(r):.2f}-{max(r):.2f}, "
                  f"geomean {statistics.geometric_mean(r):.3f}")
