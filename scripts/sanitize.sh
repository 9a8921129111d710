#!/usr/bin/env bash
# Builds fastpad's CPU kernels with AddressSanitizer and UBSan (FASTPAD_SANITIZE=1) in build/sanitize/, apart
# from the normal build, and runs tests against that build. Any out-of-bounds access, use after free or undefined
# behaviour in fastpad's C++ aborts the run with a report.
#
#   scripts/sanitize.sh                      # the subset CI runs (SANITIZE_TESTS below)
#   scripts/sanitize.sh tests -x             # any pytest arguments instead: here the whole suite
#
# torch itself is not instrumented, so the sanitizer runtimes are preloaded into the Python process.
# Leak checking is off: the interpreter and torch keep allocations alive until exit by design.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-python3}"
BUILD="build/sanitize"
# The CUDA execution shim's path cases in float32 (zeros) and bfloat16 (reflect), every layout, plus the pipelined
# GEMM's in bfloat16 zeros (its stride-1 transposed path) and its TF32 cases (tests/test_cuda_sim.py builds the CUDA
# kernels with ASan and UBSan too when they are preloaded): a subset, as the shim under ASan is several times slower.
SIM_CASES="(float32 and zeros) or (bfloat16 and reflect) or (pipelined and bfloat16 and zeros)"
SANITIZE_TESTS=(tests/test_conv.py tests/test_conv_transpose.py tests/test_autograd.py tests/test_errors.py
                tests/test_phase_planes.py tests/test_long_rows.py tests/test_kernel_paths.py tests/test_blocked_direct.py
                "tests/test_fuzz.py::test_fuzz_slice" tests/test_cuda_sim.py
                -k "not test_cuda_sim or (test_every_kernel_path and ($SIM_CASES)) or test_tf32_pipelined_gemm")

# A copy of the sources and tests that keeps their timestamps, so a second run rebuilds only what changed. The tests
# run from inside the copy, where `import fastpad` finds the sanitized build first.
mkdir -p "$BUILD"
rm -rf "$BUILD/tests" "$BUILD/benchmarks"
cp -a setup.py pyproject.toml README.md csrc tests benchmarks "$BUILD"/
mkdir -p "$BUILD/fastpad"
cp -a fastpad/*.py fastpad/py.typed "$BUILD/fastpad"/
(cd "$BUILD" && FASTPAD_SANITIZE=1 MAX_JOBS="${MAX_JOBS:-2}" "$PYTHON" setup.py -q build_ext --inplace)

library=$(ls "$BUILD"/fastpad/_C*.so)
if ! nm -D "$library" | grep __asan_init > /dev/null; then  # not grep -q: nm would die of SIGPIPE
    echo "sanitize.sh: $library is not instrumented with AddressSanitizer" >&2
    exit 1
fi

export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=1:detect_odr_violation=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
cd "$BUILD"
imported=$("$PYTHON" -c "import fastpad; print(fastpad.__file__)")
if [ "$imported" != "$PWD/fastpad/__init__.py" ]; then
    echo "sanitize.sh: the tests would import $imported, not the sanitized build in $BUILD" >&2
    exit 1
fi
if [ "$#" -eq 0 ]; then
    set -- "${SANITIZE_TESTS[@]}"
fi
echo "sanitize.sh: running pytest $* against the ASan/UBSan build in $BUILD"
# --capture=sys: pytest must not capture file descriptor 2, or a sanitizer's report dies with the aborted process.
"$PYTHON" -m pytest -q -p no:cacheprovider --capture=sys "$@"
