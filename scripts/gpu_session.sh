#!/usr/bin/env bash
# One command for a lent GPU machine, sized to one call (600 s at most): scripts/gpu_check.sh without its benchmark
# (build, CUDA tests, compute-sanitizer memcheck and racecheck), then scripts/gpu_bench.sh (the suite in bfloat16,
# batch 256, channels_last and NCHW parts; the check's failed tests rerun with tracebacks first).
#
#   OUT=/some/dir scripts/gpu_session.sh     # default OUT: benchmarks/results/gpu-session-local
#
# The device tool returns at most 8 files, so OUT gets three: summary.md (the check's table), bench.log (the
# benchmark's log, its tables included) and gpu-session.tar.gz (every log and table of both scripts).
# The check gets a budget of GPU_SESSION_CHECK_S (default 480 s: gpu_check.sh keeps 330 s of its budget for the steps
# after the build, so a smaller budget cuts the build short); it ends when its steps end (175 s on an H200 on
# 2026-12-04, build 74 s). The benchmark's four parts (three tables and the op breakdown) share what is left of
# GPU_SESSION_BUDGET_S (default 570 s) equally: the EfficientNet/MobileNet part needed more than 105 s there.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

OUT_DIR="${OUT:-benchmarks/results/gpu-session-local}"
mkdir -p "$OUT_DIR"
WORK=$(mktemp -d)

START_S=$SECONDS
OUT="$WORK/check" GPU_CHECK_BENCH=0 GPU_CHECK_BUDGET_S="${GPU_SESSION_CHECK_S:-480}" GPU_CHECK_WORKERS=8 \
    OMP_NUM_THREADS=2 bash scripts/gpu_check.sh >/dev/null
CHECK_STATUS=$?
PART_S=$(((${GPU_SESSION_BUDGET_S:-570} - (SECONDS - START_S)) / 4))
if ((PART_S < 60)); then PART_S=60; fi
OUT="$WORK/bench" GPU_CHECK_TESTS_LOG="$WORK/check/tests.log" GPU_BENCH_PART_S="$PART_S" \
    bash scripts/gpu_bench.sh >/dev/null

tar -czf "$OUT_DIR/gpu-session.tar.gz" -C "$WORK" check bench
cp "$WORK/check/summary.md" "$OUT_DIR/summary.md"
cp "$WORK/bench/bench.log" "$OUT_DIR/bench.log"
grep -E '^###|geomean|slower than' "$WORK/bench/bench.log"
cat "$WORK/check/summary.md"
exit "$CHECK_STATUS"
