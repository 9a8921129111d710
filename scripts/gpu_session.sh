#!/usr/bin/env bash
# One command for a lent GPU machine, sized to one call (600 s at most): scripts/gpu_check.sh without its benchmark
# (build, CUDA tests, compute-sanitizer memcheck and racecheck), then scripts/gpu_bench.sh (the suite in bfloat16,
# batch 256, channels_last and NCHW parts; the check's failed tests rerun with tracebacks first).
#
#   OUT=/some/dir scripts/gpu_session.sh     # default OUT: benchmarks/results/gpu-session-local
#
# The device tool returns at most 8 files, so OUT gets three: summary.md (the check's table), bench.log (the
# benchmark's log, its tables included) and gpu-session.tar.gz (every log and table of both scripts). On the first
# H100 lease the check took 160 s and each benchmark part 120-125 s; the defaults below give the check 240 s and each
# of the three benchmark parts 100 s. Environment: GPU_SESSION_CHECK_S, GPU_SESSION_PART_S.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

OUT_DIR="${OUT:-benchmarks/results/gpu-session-local}"
mkdir -p "$OUT_DIR"
WORK=$(mktemp -d)

OUT="$WORK/check" GPU_CHECK_BENCH=0 GPU_CHECK_BUDGET_S="${GPU_SESSION_CHECK_S:-240}" GPU_CHECK_WORKERS=8 \
    OMP_NUM_THREADS=2 bash scripts/gpu_check.sh >/dev/null
CHECK_STATUS=$?
OUT="$WORK/bench" GPU_CHECK_TESTS_LOG="$WORK/check/tests.log" GPU_BENCH_PART_S="${GPU_SESSION_PART_S:-100}" \
    bash scripts/gpu_bench.sh >/dev/null

tar -czf "$OUT_DIR/gpu-session.tar.gz" -C "$WORK" check bench
cp "$WORK/check/summary.md" "$OUT_DIR/summary.md"
cp "$WORK/bench/bench.log" "$OUT_DIR/bench.log"
grep -E '^###|geomean|slower than' "$WORK/bench/bench.log"
cat "$WORK/check/summary.md"
exit "$CHECK_STATUS"
