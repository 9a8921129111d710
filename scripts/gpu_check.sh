#!/usr/bin/env bash
# One command for a GPU machine (H100/H200; Python 3.12, a CUDA build of torch, nvcc, compute-sanitizer, no network):
# builds fastpad with its CUDA kernels, checks the ops have CUDA kernels, runs every CUDA test, runs compute-sanitizer
# memcheck and racecheck over a small subset of tests/test_cuda.py, and runs the quick CUDA benchmark.
#
#   scripts/gpu_check.sh                  # writes benchmarks/results/gpu-check-local/
#   OUT=/some/dir scripts/gpu_check.sh    # writes /some/dir
#
# Everything goes under OUT_DIR (8 files): build.log, tests.log, memcheck.log, racecheck.log, bench.log, the bench
# tables bench-cuda-float32.json and bench-cuda-float32.md, and summary.md (date, GPU, driver, torch, commit and the
# result of each step). Each step runs under `timeout`; a failing step does not stop the later ones, so every log is
# written; the script exits non-zero if any step failed. The whole run is budgeted to finish within 10 minutes
# (GPU_CHECK_BUDGET_S, default 570 s): each step's time limit is its own cap, shortened where needed to leave the
# later steps their minimum.
#
# Environment: PYTHON (default python3), OUT, GPU_CHECK_BUDGET_S, GPU_CHECK_WORKERS (pytest-xdist workers for the
# test step when pytest-xdist is installed, default 4; 0 runs serially), GPU_CHECK_BENCH (0 leaves the benchmark out
# and gives its time to the sanitizers; scripts/gpu_bench.sh measures then), COMPUTE_SANITIZER (path of the binary, if
# it is not found on PATH or under the CUDA toolkit).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-python3}"
OUT_DIR="${OUT:-benchmarks/results/gpu-check-local}"
mkdir -p "$OUT_DIR"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
BUDGET_S="${GPU_CHECK_BUDGET_S:-570}"
WORKERS="${GPU_CHECK_WORKERS:-4}"
BENCH="${GPU_CHECK_BENCH:-1}"
START_S=$SECONDS
export PYTHONUNBUFFERED=1

LOGS=(build.log tests.log memcheck.log racecheck.log bench.log)
for log in "${LOGS[@]}"; do
    : >"$OUT_DIR/$log"
done

# The CUDA tests: every device-parametrized test's CUDA instance (ids such as [cuda], [...-cuda] and cuda-float16),
# the tests named test_cuda_*, and all of tests/test_cuda.py (its module name matches too). test_bigmem.py's CUDA
# instances are left out: they need `-m bigmem`.
TEST_FILES=(tests/test_cuda.py tests/test_conv.py tests/test_conv_transpose.py tests/test_autograd.py tests/test_amp.py
            tests/test_fuzz.py tests/test_determinism.py tests/test_concurrency.py tests/test_errors.py)
# Under the sanitizers: one small case per kernel path, plus (memcheck) the float32 pipelined GEMM on TF32, batch 0
# and 1 and strided/expanded inputs.
MEMCHECK_TESTS="test_kernel_paths_small or test_tf32_pipelined_gemm or \
(test_batch_zero_and_one and zeros and float32) or \
(test_non_contiguous_and_expanded and zeros and float16 and (offset_slice or expanded_channels))"
# racecheck: the kernels that share memory between threads: the depthwise halo tiles, the implicit GEMMs (conv,
# transposed phases, split-K weight gradient), the pipelined GEMM's cp.async stages and the depthwise weight-gradient
# block reduction.
RACECHECK_TESTS="(test_kernel_paths_small and not direct and not gather) or (test_tf32_pipelined_gemm and zeros)"

# ---------------------------------------------------------------------------------------------------------------------
# Steps and their results

STEP_NAMES=()
STEP_RESULTS=()
STEP_SECONDS=()
STEP_LOGS=()
FAILED=0

# The time limit of a step: `cap` seconds, or less so that `keep` seconds stay for the later steps (30 s at least).
limit_for() {
    local cap=$1 keep=$2 left
    left=$((BUDGET_S - (SECONDS - START_S) - keep))
    if ((left < cap)); then cap=$left; fi
    if ((cap < 30)); then cap=30; fi
    echo "$cap"
}

# run_step NAME LOG CAP KEEP COMMAND...: runs COMMAND under timeout, appending its output to LOG. Sets LAST_RC,
# LAST_SECONDS and LAST_LIMIT.
run_step() {
    local name=$1 log=$2 cap=$3 keep=$4 started
    shift 4
    LAST_LIMIT=$(limit_for "$cap" "$keep")
    started=$SECONDS
    {
        echo "### $name, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), time limit ${LAST_LIMIT} s"
        printf '### command:'
        printf ' %q' "$@"
        echo
    } >>"$log"
    LAST_RC=0
    timeout --kill-after=15 "$LAST_LIMIT" "$@" >>"$log" 2>&1 || LAST_RC=$?
    LAST_SECONDS=$((SECONDS - started))
    echo "### $name: exit status $LAST_RC after $LAST_SECONDS s" >>"$log"
}

# The result of the last step from its exit status, with an optional note.
result_of_last() {
    local note=${1:-}
    if ((LAST_RC == 0)); then
        echo "PASS${note:+ ($note)}"
    elif ((LAST_RC == 124 || LAST_RC == 137)); then
        echo "FAIL (timed out after ${LAST_LIMIT} s${note:+; $note})"
    else
        echo "FAIL (exit status $LAST_RC${note:+; $note})"
    fi
}

record() {  # NAME RESULT LOG
    STEP_NAMES+=("$1")
    STEP_RESULTS+=("$2")
    STEP_SECONDS+=("$LAST_SECONDS")
    STEP_LOGS+=("$3")
    if [[ $2 != PASS* ]]; then FAILED=1; fi
    write_summary
}

# pytest's closing line ("1200 passed, 3 skipped, 900 deselected in 95.1s") from a log.
pytest_line() {
    grep -E '[0-9]+ (passed|failed|errors?|skipped|deselected|xfailed|xpassed)' "$1" | grep -E ' in [0-9.]+s' |
        tail -n 1 | tr -d '=' | sed -E 's/^ +| +$//g' || true
}

# ---------------------------------------------------------------------------------------------------------------------
# The machine, for the summary

first_line() { "$@" 2>/dev/null | head -n 1 || true; }

GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | paste -sd ',' - || true)
DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | sort -u | paste -sd ',' - || true)
TORCH_VERSION=$(first_line "$PYTHON" -c 'import torch
print(f"{torch.__version__} (CUDA runtime {torch.version.cuda}, cuda available: {torch.cuda.is_available()})")')
PYTHON_VERSION=$(first_line "$PYTHON" -c 'import platform; print(platform.python_version())')
if [[ -z $(command -v nvcc || true) && -x /usr/local/cuda/bin/nvcc ]]; then
    export PATH="/usr/local/cuda/bin:$PATH"
fi
NVCC_VERSION=$(nvcc --version 2>/dev/null | grep -oE 'release [0-9.]+, V[0-9.]+' | head -n 1 || true)

if git rev-parse HEAD >/dev/null 2>&1; then
    COMMIT=$(git rev-parse HEAD)
    if [[ -n $(git status --porcelain --untracked-files=no 2>/dev/null || true) ]]; then
        COMMIT="$COMMIT (with uncommitted changes)"
    fi
elif [[ -f COMMIT ]]; then
    COMMIT=$(head -n 1 COMMIT)
else
    COMMIT=unknown
fi

# Python packages: pytest is needed by the test steps; the others are optional (tolerated when missing).
PACKAGES=$("$PYTHON" - <<'EOF' 2>/dev/null || echo "could not query (python failed)"
import importlib.metadata as metadata
found, missing = [], []
for name in ("pytest", "numpy", "hypothesis", "pytest-xdist", "pytest-timeout", "matplotlib", "triton"):
    try:
        found.append(f"{name} {metadata.version(name)}")
    except metadata.PackageNotFoundError:
        missing.append(name)
print(", ".join(found) + (f"; missing: {', '.join(missing)}" if missing else ""))
EOF
)

find_sanitizer() {
    local candidate
    for candidate in "${COMPUTE_SANITIZER:-}" "$(command -v compute-sanitizer || true)" \
        "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer" \
        "${CUDA_HOME:-/usr/local/cuda}/compute-sanitizer/compute-sanitizer" \
        /usr/local/cuda*/bin/compute-sanitizer /usr/local/cuda*/compute-sanitizer/compute-sanitizer \
        /opt/nvidia/*/compute-sanitizer/compute-sanitizer; do
        if [[ -n $candidate && -f $candidate && -x $candidate ]]; then
            echo "$candidate"
            return 0
        fi
    done
    # pip's nvidia-cuda-sanitizer-api wheel
    "$PYTHON" - <<'EOF' 2>/dev/null || true
import glob, os
try:
    import nvidia
except ImportError:
    raise SystemExit
for root in nvidia.__path__:
    for path in sorted(glob.glob(os.path.join(root, "**", "compute-sanitizer"), recursive=True)):
        if os.path.isfile(path) and os.access(path, os.X_OK):
            print(path)
            raise SystemExit
EOF
}
SANITIZER=$(find_sanitizer | head -n 1)
SANITIZER_VERSION=""
if [[ -n $SANITIZER ]]; then
    SANITIZER_VERSION=$("$SANITIZER" --version 2>/dev/null | grep -oE 'Version [0-9.]+' | head -n 1 || true)
fi

write_summary() {
    local index overall
    if ((FAILED)); then overall="FAIL"; else overall="PASS so far"; fi
    if [[ ${SUMMARY_FINAL:-0} == 1 ]]; then
        if ((FAILED)); then overall="FAIL"; else overall="PASS"; fi
    fi
    {
        echo "# fastpad GPU check"
        echo
        echo "| | |"
        echo "|---|---|"
        echo "| date (UTC) | $(date -u -d "@$START_EPOCH" '+%Y-%m-%d %H:%M:%S') |"
        echo "| GPU | ${GPU_NAME:-unknown (nvidia-smi failed)} |"
        echo "| driver | ${DRIVER:-unknown} |"
        echo "| torch | ${TORCH_VERSION:-unknown (import failed)} |"
        echo "| python | ${PYTHON_VERSION:-unknown} ($PYTHON) |"
        echo "| nvcc | ${NVCC_VERSION:-not found} |"
        echo "| compute-sanitizer | ${SANITIZER:-not found}${SANITIZER_VERSION:+, $SANITIZER_VERSION} |"
        echo "| commit | $COMMIT |"
        echo "| packages | ${PACKAGES:-unknown} |"
        echo "| tests | \`pytest -k cuda\` over ${TEST_FILES[*]} |"
        echo "| elapsed | $((SECONDS - START_S)) s of a ${BUDGET_S} s budget |"
        echo
        echo "| step | result | seconds | log |"
        echo "|---|---|---|---|"
        for index in "${!STEP_NAMES[@]}"; do
            echo "| ${STEP_NAMES[$index]} | ${STEP_RESULTS[$index]} | ${STEP_SECONDS[$index]} | ${STEP_LOGS[$index]} |"
        done
        echo
        echo "Overall: **$overall**"
    } >"$OUT_DIR/summary.md"
}
START_EPOCH=$(date -u +%s)
write_summary

# ---------------------------------------------------------------------------------------------------------------------
# 1. Build, with the CUDA kernels for sm_90 (-lineinfo only adds line tables, for the sanitizers' reports).

BUILD_LOG="$OUT_DIR/build.log"
run_step build "$BUILD_LOG" 300 330 \
    env TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 FASTPAD_FORCE_CUDA=1 \
    NVCC_APPEND_FLAGS="${NVCC_APPEND_FLAGS:+$NVCC_APPEND_FLAGS }-lineinfo" \
    "$PYTHON" -m pip install --no-build-isolation --no-deps --no-index -v -e .
record build "$(result_of_last)" build.log

# 2. The three ops have CUDA kernels, and a tiny conv on the GPU matches torch.
run_step cuda-kernels "$BUILD_LOG" 90 300 "$PYTHON" - <<'EOF'
import torch
import torch.nn.functional as F

import fastpad
from fastpad.reference import tolerance

print("fastpad from", fastpad.__file__)
print("torch", torch.__version__, "CUDA", torch.version.cuda, "device", torch.cuda.get_device_name(0))
for op in ("conv", "conv_transpose", "conv_weight_grad"):
    has = torch._C._dispatch_has_kernel_for_dispatch_key(f"fastpad::{op}", "CUDA")
    print(f"fastpad::{op} has a CUDA kernel: {has}")
    assert has, f"fastpad::{op} has no CUDA kernel: the extension was built without csrc/cuda"
x = torch.randn(2, 3, 9, 10, device="cuda")
w = torch.randn(4, 3, 3, 3, device="cuda")
y = torch.ops.fastpad.conv(x, w, None, [1, 1], [1, 1], [1, 1], [1, 1], 1, "zeros")
torch.cuda.synchronize()
expected = F.conv2d(x.double(), w.double(), padding=1)
error = ((y.double() - expected).norm() / expected.norm()).item()
# float32 runs on TF32 tensor cores where torch.backends.cudnn.allow_tf32 lets it (torch's default), as cuDNN does.
limit = tolerance(torch.float32, "cuda")
print(f"tiny conv on cuda: relative error {error:.2e} (allowed: {limit:.0e})")
assert y.device.type == "cuda" and error < limit
EOF
record cuda-kernels "$(result_of_last)" build.log

# 3. The CUDA tests.
TESTS_LOG="$OUT_DIR/tests.log"
PYTEST_ARGS=(-q -rfEs -p no:cacheprovider --durations=15 -k cuda)
if ((WORKERS > 0)) && "$PYTHON" -c 'import xdist' 2>/dev/null; then
    PYTEST_ARGS+=(-n "$WORKERS")
fi
if "$PYTHON" -c 'import pytest_timeout' 2>/dev/null; then
    PYTEST_ARGS+=(--timeout=240)  # a hung kernel fails its test instead of the whole step
fi
run_step tests "$TESTS_LOG" 300 200 "$PYTHON" -m pytest "${PYTEST_ARGS[@]}" "${TEST_FILES[@]}"
record tests "$(result_of_last "$(pytest_line "$TESTS_LOG")")" tests.log

# 4. and 5. compute-sanitizer over a small subset of tests/test_cuda.py, the references on the CPU so that only
# fastpad's kernels (and copies and fills) run on the GPU. API errors are not reported: torch probes the driver with
# calls that fail by design; fastpad's own launch errors fail the tests.
sanitizer_step() {  # NAME LOG CAP KEEP TESTS [ENV...]
    local name=$1 log=$2 cap=$3 keep=$4 tests=$5 errors note
    shift 5
    if [[ -z $SANITIZER ]]; then
        echo "compute-sanitizer not found (PATH, \$CUDA_HOME, /usr/local/cuda*, pip's nvidia packages);" \
            "set COMPUTE_SANITIZER=/path/to/compute-sanitizer" >>"$log"
        LAST_SECONDS=0
        record "$name" "FAIL (compute-sanitizer not found)" "$(basename "$log")"
        return
    fi
    run_step "$name" "$log" "$cap" "$keep" env FASTPAD_CUDA_TESTS_CPU_REFERENCE=1 "$@" \
        "$SANITIZER" --tool "$name" --error-exitcode 1 --report-api-errors no \
        "$PYTHON" -m pytest -q -rfE -p no:cacheprovider tests/test_cuda.py -k "$tests"
    # memcheck closes with "ERROR SUMMARY: N errors", racecheck with "RACECHECK SUMMARY: H hazards displayed
    # (N errors, W warnings)".
    errors=""
    if [[ $name == racecheck ]]; then
        errors=$(grep -oE 'RACECHECK SUMMARY: [0-9]+ hazards? displayed \([0-9]+ errors?' "$log" | tail -n 1 |
            sed -E 's/.*\(([0-9]+) error.*/\1/' || true)
    fi
    if [[ -z $errors ]]; then
        errors=$(grep -oE 'ERROR SUMMARY: [0-9]+ errors?' "$log" | tail -n 1 | grep -oE '[0-9]+' || true)
    fi
    note="$(pytest_line "$log")"
    if [[ -z $errors ]]; then
        if ((LAST_RC == 0)); then LAST_RC=1; fi
        note="no sanitizer summary in the log${note:+; $note}"
    else
        note="$errors sanitizer errors${note:+; $note}"
        if ((errors > 0 && LAST_RC == 0)); then LAST_RC=1; fi
    fi
    record "$name" "$(result_of_last "$note")" "$(basename "$log")"
}
# Without the benchmark, racecheck keeps no time for a later step and memcheck keeps only racecheck's minimum.
if ((BENCH)); then MEMCHECK_KEEP=120 RACECHECK_KEEP=60; else MEMCHECK_KEEP=60 RACECHECK_KEEP=0; fi
sanitizer_step memcheck "$OUT_DIR/memcheck.log" 150 "$MEMCHECK_KEEP" "$MEMCHECK_TESTS" PYTORCH_NO_CUDA_MEMORY_CACHING=1
sanitizer_step racecheck "$OUT_DIR/racecheck.log" 150 "$RACECHECK_KEEP" "$RACECHECK_TESTS"

# 6. The quick CUDA benchmark (float32, contiguous), without the torch.compile column: 46 inductor compiles would not
# fit its time limit (cuDNN is the peer there: the pad+conv and floor columns).
if ((BENCH)); then
    run_step bench "$OUT_DIR/bench.log" 180 0 "$PYTHON" -m fastpad bench --device cuda --quick --peers none \
        --json "$OUT_DIR/bench-cuda-float32.json" --markdown "$OUT_DIR/bench-cuda-float32.md"
    record bench "$(result_of_last)" "bench.log, bench-cuda-float32.md, bench-cuda-float32.json"
else
    rm -f "$OUT_DIR/bench.log"
fi

SUMMARY_FINAL=1
write_summary
cat "$OUT_DIR/summary.md"
exit "$FAILED"
