#!/usr/bin/env bash
# Where the CUDA time of the suite's slow layers goes, for a GPU machine with Nsight Compute (Firecracker kinds): builds
# fastpad for sm_90 with line tables, times each fastpad op call of the layers (benchmarks/ops.py), then profiles one
# forward and backward of each layer under ncu (scripts/gpu_profile.py; the full section set, clocks left alone).
#
#   OUT=/some/dir scripts/gpu_profile.sh                  # default OUT: benchmarks/results/gpu-profile-local
#
# Environment: PROFILE_LAYERS (the bench's --layers pattern), PROFILE_BATCH (default 256), PROFILE_DTYPE (default
# bfloat16), PROFILE_SKIP_BUILD=1 where fastpad is already built. Writes under OUT: profile.log (every step's output),
# ncu-details.txt (each kernel's sections, stall sampling included), ncu-kernels.csv (one row per kernel: name,
# duration, throughputs, registers, occupancy) and profile.tar.gz (all of it and the .ncu-rep report).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-python3}"
OUT_DIR="${OUT:-benchmarks/results/gpu-profile-local}"
LAYERS="${PROFILE_LAYERS:-resnet50.dense_k3s1_c64|tf_efficientnet_b0.stem_k3s2|tf_efficientnet_b0.dw_k3s2_c96|unet_decoder.convT_k4s2_c128}"
BATCH="${PROFILE_BATCH:-256}"
DTYPE="${PROFILE_DTYPE:-bfloat16}"
mkdir -p "$OUT_DIR"
WORK=$(mktemp -d)
LOG="$WORK/profile.log"
export PYTHONUNBUFFERED=1
if [[ -z $(command -v nvcc || true) && -x /usr/local/cuda/bin/nvcc ]]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)

# shellcheck source=scripts/gpu_steps.sh
source scripts/gpu_steps.sh
log_header
echo "ncu: ${NCU:-not found} $("${NCU:-false}" --version 2>/dev/null | tail -n 1)" >>"$LOG"

if [[ -z ${PROFILE_SKIP_BUILD:-} ]]; then
    step build 300 env TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 FASTPAD_FORCE_CUDA=1 NVCC_APPEND_FLAGS=-lineinfo \
        "$PYTHON" -m pip install --no-build-isolation --no-deps --no-index -e .
fi
step ops 150 "$PYTHON" -m benchmarks.ops --device cuda --dtype "$DTYPE" --channels-last --batch "$BATCH" \
    --layers "$LAYERS" --quick
if [[ -n $NCU ]]; then
    step ncu 300 "$NCU" --profile-from-start off --clock-control none --set full --import-source yes \
        -f -o "$WORK/profile" "$PYTHON" scripts/gpu_profile.py --layers "$LAYERS" --batch "$BATCH" --dtype "$DTYPE"
    "$NCU" --import "$WORK/profile.ncu-rep" --page details >"$WORK/ncu-details.txt" 2>&1
    "$NCU" --import "$WORK/profile.ncu-rep" --page raw --csv --metrics \
        gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum \
        >"$WORK/ncu-kernels.csv" 2>&1
fi
tar -czf "$OUT_DIR/profile.tar.gz" -C "$WORK" .
cp "$LOG" "$WORK"/ncu-details.txt "$WORK"/ncu-kernels.csv "$OUT_DIR/" 2>/dev/null
grep -E '^###' "$LOG"
