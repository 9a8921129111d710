#!/usr/bin/env bash
# Compile-checks every csrc/cuda/*.cu (kernels and launchers) and csrc/cuda/*.cpp (the torch bindings and the CUDA
# registration) with nvcc for sm_80 and sm_90 on a machine without a GPU or a CUDA build of torch: the CPU torch
# wheel ships the c10/cuda headers but not the one header its CMake generates, c10/cuda/impl/cuda_cmake_macros.h,
# so a one-line stand-in for it goes on the include path.
# Objects are written to a temporary directory and discarded; any compile error fails the script, and so does any
# register spill or a pipelined kernel without its tensor-core instructions (scripts/cuda_kernel_report.py).
# Usage: scripts/cuda_compile_check.sh [ARCH ...]   (default: 80 90); PYTHON and NVCC may be overridden.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-python3}"
NVCC="${NVCC:-nvcc}"
archs=("$@")
[ "${#archs[@]}" -gt 0 ] || archs=(80 90)

if ! command -v "$NVCC" >/dev/null; then
    echo "cuda_compile_check: nvcc not found (set NVCC); the CUDA sources cannot be checked" >&2
    exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/stand_in/c10/cuda/impl"
echo '#pragma once  // stand-in: the CPU torch wheel lacks this generated header' \
    > "$work/stand_in/c10/cuda/impl/cuda_cmake_macros.h"

mapfile -t torch_flags < <("$PYTHON" - <<'PY'
import torch
from torch.utils.cpp_extension import include_paths
for path in include_paths():
    print(f"-I{path}")
print(f"-D_GLIBCXX_USE_CXX11_ABI={int(torch.compiled_with_cxx11_abi())}")
PY
)
gencode=()
for arch in "${archs[@]}"; do gencode+=(-gencode "arch=compute_${arch},code=sm_${arch}"); done

# One nvcc per source, all at once (each is mostly single-threaded); logs are printed in order afterwards. ptxas
# reports every kernel's registers and spills (-Xptxas -v), and the PTX of conv.cu, conv_transpose.cu and
# conv_weight_grad.cu is kept for the checks below.
sources=(csrc/cuda/*.cu csrc/cuda/*.cpp)
common=(-std=c++20 -O3 -I"$work/stand_in" -Icsrc "${torch_flags[@]}" -DTORCH_API_INCLUDE_EXTENSION_H
        -DTORCH_EXTENSION_NAME=_C --expt-relaxed-constexpr)
pids=()
for source in "${sources[@]}"; do
    "$NVCC" "${common[@]}" -c "$source" -o "$work/$(basename "$source").o" "${gencode[@]}" \
        -Werror all-warnings -Xcompiler -Wall -Xptxas -v >"$work/$(basename "$source").log" 2>&1 &
    pids+=("$!")
done
ptx_arch="${archs[${#archs[@]}-1]}"
ptx_sources=(csrc/cuda/conv.cu csrc/cuda/conv_transpose.cu csrc/cuda/conv_weight_grad.cu)
ptx_pids=()
for source in "${ptx_sources[@]}"; do
    "$NVCC" "${common[@]}" -ptx "$source" -o "$work/$(basename "$source").ptx" -arch="compute_${ptx_arch}" \
        >"$work/$(basename "$source").ptx.log" 2>&1 &
    ptx_pids+=("$!")
done
status=0
for i in "${!sources[@]}"; do
    if wait "${pids[$i]}"; then
        echo "cuda_compile_check: ${sources[$i]} OK for sm_${archs[*]}"
    else
        cat "$work/$(basename "${sources[$i]}").log" >&2
        echo "cuda_compile_check: ${sources[$i]} FAILED" >&2
        status=1
    fi
done
for i in "${!ptx_sources[@]}"; do
    if ! wait "${ptx_pids[$i]}"; then
        cat "$work/$(basename "${ptx_sources[$i]}").ptx.log" >&2
        echo "cuda_compile_check: PTX of ${ptx_sources[$i]} FAILED" >&2
        status=1
    fi
done
[ "$status" -eq 0 ] || exit "$status"
# Registers, spills and shared memory per kernel; fails on any spill, or on a pipelined kernel without its cp.async,
# ldmatrix and mma.sync (scripts/cuda_kernel_report.py).
logs=()
for source in csrc/cuda/*.cu; do logs+=("$work/$(basename "$source").log"); done
"$PYTHON" scripts/cuda_kernel_report.py --ptx "$work/conv.cu.ptx" --ptx "$work/conv_transpose.cu.ptx" \
    --ptx "$work/conv_weight_grad.cu.ptx" "${logs[@]}"
