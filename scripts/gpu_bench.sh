#!/usr/bin/env bash
# The CUDA measurements of issue 19's targets, for a GPU machine on which scripts/gpu_check.sh has just built fastpad:
# the suite in bfloat16, batch 256 (channels_last, then NCHW), forward and forward+backward, against F.pad + cuDNN
# and cuDNN's symmetric-pad floor (python -m fastpad bench, quick effort, no torch.compile column). The suite runs in
# parts (EfficientNet/MobileNet layers, then the rest), each under its own time limit, so that one slow part still
# leaves the others' tables; then the 2-d dense and transposed layers once more with NCHW inputs (the layout the CUDA
# pipelined GEMMs reach through channels-contiguous copies, as they do the 1-d layers, which stay (N, C, L) in every
# part). If a gpu_check tests.log is given (GPU_CHECK_TESTS_LOG), its first failed tests are run again with full
# tracebacks first.
#
#   OUT=/some/dir GPU_CHECK_TESTS_LOG=/tmp/gpu-check/tests.log scripts/gpu_bench.sh
#
# On a 15-minute lease (600 s per call at most): `GPU_CHECK_BENCH=0 scripts/gpu_check.sh` took 160 s on an H100
# (build 59 s), and the first two parts of this script about 125 s and 120 s at the code of 2026-11-27, so one call
# holds both scripts with GPU_BENCH_PART_S=120 or so.
# Writes under OUT (default benchmarks/results/gpu-bench-local): bench.log and, per part,
# bench-cuda-bf16-b256-{efficientnet-cl,others-cl,others-nchw}.{md,json}, and ops-cuda-bf16-b256-cl.md (the op
# breakdown). Environment: PYTHON (default python3),
# GPU_BENCH_PART_S (each part's time limit, default 150 s), GPU_BENCH_BATCH (default 256).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-python3}"
OUT_DIR="${OUT:-benchmarks/results/gpu-bench-local}"
PART_S="${GPU_BENCH_PART_S:-150}"
BATCH="${GPU_BENCH_BATCH:-256}"
mkdir -p "$OUT_DIR"
LOG="$OUT_DIR/bench.log"
export PYTHONUNBUFFERED=1

{
    echo "### $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git rev-parse HEAD 2>/dev/null || echo unknown)"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
    "$PYTHON" -c 'import fastpad, torch; print("fastpad from", fastpad.__file__, "| torch", torch.__version__)'
} >"$LOG" 2>&1

if [[ -n ${GPU_CHECK_TESTS_LOG:-} && -f $GPU_CHECK_TESTS_LOG ]]; then
    mapfile -t FAILED_TESTS < <(grep -oE '^(FAILED|ERROR) tests/[^ ]+' "$GPU_CHECK_TESTS_LOG" | awk '{print $2}' |
        sort -u | head -n 8)
    if ((${#FAILED_TESTS[@]})); then
        echo "### rerun of ${#FAILED_TESTS[@]} failed tests with full tracebacks" >>"$LOG"
        timeout --kill-after=10 60 "$PYTHON" -m pytest -q -p no:cacheprovider --tb=long "${FAILED_TESTS[@]}" \
            >>"$LOG" 2>&1
        echo "### rerun: exit status $?" >>"$LOG"
    fi
fi

bench_part() {  # NAME PATTERN [--channels-last]
    local name=$1 pattern=$2 stem="$OUT_DIR/bench-cuda-bf16-b$BATCH-$1"
    shift 2
    echo "### bench $name ($pattern), time limit $PART_S s, $(date -u '+%H:%M:%S')" >>"$LOG"
    timeout --kill-after=10 "$PART_S" "$PYTHON" -m fastpad bench --device cuda --dtype bfloat16 "$@" \
        --batch "$BATCH" --quick --peers none --layers "$pattern" --json "$stem.json" --markdown "$stem.md" \
        >>"$LOG" 2>&1
    echo "### bench $name: exit status $?" >>"$LOG"
}
OTHERS='resnet50*|even_kernel*|unet_decoder*|hifigan*|encodec*|mamba*'
bench_part efficientnet-cl 'tf_*' --channels-last
bench_part others-cl "$OTHERS" --channels-last
bench_part others-nchw 'resnet50.dense*|even_kernel*|unet_decoder*'
# Where the slowest forward+backwards go: each op call of the stems, a depthwise and a dense layer timed alone, with
# its kernel path (benchmarks/ops.py).
OPS_LAYERS='stem|dw_k3s2_c96|dense_k3s1'
echo "### ops ($OPS_LAYERS), time limit $PART_S s, $(date -u '+%H:%M:%S')" >>"$LOG"
timeout --kill-after=10 "$PART_S" "$PYTHON" -m benchmarks.ops --device cuda --dtype bfloat16 --channels-last \
    --batch "$BATCH" --quick --layers "$OPS_LAYERS" >"$OUT_DIR/ops-cuda-bf16-b$BATCH-cl.md" 2>>"$LOG"
echo "### ops: exit status $?" >>"$LOG"
tail -n 80 "$LOG"
