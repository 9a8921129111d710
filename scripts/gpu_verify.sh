#!/usr/bin/env bash
# One call that checks and measures a CUDA change on a lent GPU machine: scripts/gpu_check.sh without its benchmark
# (build, every CUDA test, compute-sanitizer memcheck and racecheck), then, each under its own time limit, the op
# breakdown of the changed layers (benchmarks/ops.py), the bench of those layers (bfloat16, channels_last, batch 256,
# forward and forward+backward against F.pad + cuDNN) and the whole-model comparison (benchmarks/models.py).
#
#   OUT=/some/dir VERIFY_LAYERS='tf_efficientnet_b0.stem*|resnet50*' scripts/gpu_verify.sh
#
# Environment: VERIFY_LAYERS (the bench's --layers pattern; default: the stems, tf_efficientnet_b0's depthwise layers
# and ResNet-50's dense layers, the kernels changed after the H200 leases of 2026-12-04), VERIFY_MODELS (default: tf_efficientnet_b0 efficientnet_b0; empty: none), VERIFY_BENCH_S, VERIFY_OPS_S,
# VERIFY_MODELS_S (time limits, default 80, 90 and 100 s: on an H200 on 2026-12-04 the op breakdown of the 8 default
# layers did not finish in 40 s); VERIFY_NCU_LAYERS: layers whose forward kernels Nsight Compute reads afterwards
# (occupancy, throughput; default b0's stem and k3 s2 depthwise layer, empty: none). The device tool returns at most 8 files, so
# OUT gets summary.md (the check's table), check.tar.gz (the check's logs), verify.log (every measurement's output,
# written as it goes: a call cut short keeps what ran) and bench.md/bench.json.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-python3}"
OUT_DIR="${OUT:-benchmarks/results/gpu-verify-local}"
LAYERS="${VERIFY_LAYERS:-*stem*|tf_efficientnet_b0.dw_*|resnet50.dense*}"
MODELS="${VERIFY_MODELS-tf_efficientnet_b0 efficientnet_b0}"
mkdir -p "$OUT_DIR"
NCU_LAYERS="${VERIFY_NCU_LAYERS-tf_efficientnet_b0.stem_k3s2|tf_efficientnet_b0.dw_k3s2_c96}"
WORK=$(mktemp -d)
LOG="$OUT_DIR/verify.log"
export PYTHONUNBUFFERED=1

OUT="$WORK/check" GPU_CHECK_BENCH=0 GPU_CHECK_BUDGET_S="${VERIFY_CHECK_S:-480}" GPU_CHECK_WORKERS=8 \
    OMP_NUM_THREADS=2 bash scripts/gpu_check.sh >/dev/null
CHECK_STATUS=$?
cp "$WORK/check/summary.md" "$OUT_DIR/"
tar -czf "$OUT_DIR/check.tar.gz" -C "$WORK" check

# shellcheck source=scripts/gpu_steps.sh
source scripts/gpu_steps.sh
log_header
step ops "${VERIFY_OPS_S:-90}" "$PYTHON" -m benchmarks.ops --device cuda --dtype bfloat16 --channels-last \
    --batch 256 --layers "$LAYERS" --quick
step bench "${VERIFY_BENCH_S:-80}" "$PYTHON" -m fastpad bench --device cuda --dtype bfloat16 --channels-last \
    --batch 256 --quick --peers none --layers "$LAYERS" --markdown "$WORK/bench.md" --json "$WORK/bench.json"
if [[ -n $MODELS ]]; then
    # shellcheck disable=SC2086  # the model names are words
    step models "${VERIFY_MODELS_S:-100}" "$PYTHON" -m benchmarks.models --device cuda --amp-bf16 --channels-last \
        --batch 256 --budget 6 --models $MODELS
fi

NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -n 1)
if [[ -n $NCU_LAYERS && -n $NCU ]]; then
    step ncu 40 "$NCU" --profile-from-start off --clock-control none --section SpeedOfLight --section Occupancy \
        --section LaunchStats "$PYTHON" scripts/gpu_profile.py --layers "$NCU_LAYERS" --forward-only
fi

cp "$WORK"/bench.md "$WORK"/bench.json "$OUT_DIR/" 2>/dev/null
grep -E '^###|geomean' "$LOG"
cat "$WORK/check/summary.md"
exit "$CHECK_STATUS"
