"""Mutation check of the CUDA execution shim: injects one kernel bug at a time into a copy of the sources and shows that
tests/test_cuda_sim.py, run on that copy, fails. Not part of CI (each mutation rebuilds the shim library).

    python scripts/cuda_sim_mutations.py            # every mutation; prints a markdown table, exits 1 if one survives

Needs fastpad built in this checkout or installed (for the CPU ops the shim is compared with), g++ and the CUDA
headers, as the test does.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEMM_CASES = "gemm_tiles_crossed and zeros and contiguous and (float32 or bfloat16)"
HALO_CASES = "depthwise_halo_2d and zeros and contiguous and float32"
ROW_CASES = "depthwise_rows and zeros and contiguous and (float32 or bfloat16)"
PIPELINED_CASES = "pipelined_taps_straddle_k_tiles and zeros and channels_last and bfloat16"
WEIGHT_GRAD_CASES = "pipelined_weight_grad_splits and zeros and channels_last and bfloat16"
WEIGHT_GRAD_CURSOR_CASES = "pipelined_weight_grad_small_images and zeros and channels_last and bfloat16"
PHASE_CASES = "pipelined_strided_phases and zeros and channels_last and bfloat16"
TF32_CASES = "tf32_pipelined_gemm and pipelined_taps_straddle_k_tiles"
VECTOR_CASES = "depthwise_vectors_2d and zeros and channels_last and (bfloat16 or float64)"
GRAD_VECTOR_CASES = "depthwise_grad_vectors_blocks and zeros and channels_last and (bfloat16 or float64)"
FEW_CASES = "few_channels and zeros and (bfloat16 or float64)"

# (name, file, text, replacement, the tests that must fail, run under ASan + UBSan)
MUTATIONS = [
    ("staging barrier removed (FMA GEMM)", "csrc/cuda/implicit_gemm.cuh",
     "          [&](int k, int n, acc_t v) { b_tile[k][n] = v; });\n      __syncthreads();",
     "          [&](int k, int n, acc_t v) { b_tile[k][n] = v; });", GEMM_CASES, False),
    ("trailing barrier removed (tensor-core GEMM)", "csrc/cuda/implicit_gemm.cuh",
     "          wmma::mma_sync(acc[f], a_frag, b_frag, acc[f]);\n        }\n      }\n      __syncthreads();",
     "          wmma::mma_sync(acc[f], a_frag, b_frag, acc[f]);\n        }\n      }", GEMM_CASES, False),
    ("barrier inside if (threadIdx.x < 128) (depthwise halo)", "csrc/cuda/conv.cu",
     "      __syncthreads();\n      sum += halo_patch_taps",
     "      if (threadIdx.x < 128) __syncthreads();\n      sum += halo_patch_taps", HALO_CASES, False),
    ("WMMA leading dimension not a multiple of 16 bytes", "csrc/cuda/implicit_gemm.cuh",
     "constexpr int kPad = 8;", "constexpr int kPad = 4;", GEMM_CASES, False),
    ("wrong warp-to-tile mapping", "csrc/cuda/implicit_gemm.cuh",
     "warp_m = warp % 4, warp_n = warp / 4", "warp_m = warp % 4, warp_n = warp % 2", GEMM_CASES, False),
    ("shared array one element short (depthwise weight gradient)", "csrc/cuda/conv_weight_grad.cu",
     "__shared__ acc_t partial[kThreads];", "__shared__ acc_t partial[kThreads - 1];", HALO_CASES, True),
    ("k-tile read before its cp.async group is waited for (pipelined GEMM)", "csrc/cuda/pipelined_gemm.cuh",
     "    cp_async_wait<kPipelineStages - 2>();  // this", "    // this", PIPELINED_CASES, False),
    ("next stage copied before the barrier (pipelined GEMM)", "csrc/cuda/pipelined_gemm.cuh",
     "    __syncthreads();                       // ... and everyone's; everyone is done with k-tile kt - 1's stage\n"
     "    const int64_t next = kt + kPipelineStages - 1;\n"
     "    if (next < k_tiles) copy(int(next % kPipelineStages), next);",
     "    const int64_t next = kt + kPipelineStages - 1;\n"
     "    if (next < k_tiles) copy(int(next % kPipelineStages), next);\n"
     "    __syncthreads();", PIPELINED_CASES, False),
    ("trailing barrier removed (pipelined GEMM)", "csrc/cuda/pipelined_gemm.cuh",
     "  cp_async_wait<0>();\n  __syncthreads();", "  cp_async_wait<0>();", PIPELINED_CASES, False),
    ("padding copied instead of zero-filled (pipelined GEMM)", "csrc/cuda/pipelined_gemm.cuh",
     "valid ? x + offset : x, valid);", "x, true);", PIPELINED_CASES, False),
    ("B fragments of two column tiles swapped (pipelined GEMM)", "csrc/cuda/pipelined_gemm.cuh",
     "          b[f][1] = r[1];\n          b[f + 1][0] = r[2];",
     "          b[f][1] = r[2];\n          b[f + 1][0] = r[1];", PIPELINED_CASES, False),
    ("every stride phase given the first phase's weight (pipelined transposed conv)", "csrc/cuda/conv_transpose.cu",
     "    phase_weight += t.conv.conv_out_channels", "    phase_weight += 0 * t.conv.conv_out_channels",
     PHASE_CASES, False),
    ("B fragments loaded without .trans (pipelined weight gradient)", "csrc/cuda/pipelined_gemm.cuh",
     "        ldmatrix_x4_trans(columns,", "        ldmatrix_x4(columns,", WEIGHT_GRAD_CASES, False),
    ("zeros mode's completion pass launched a block per 256 y elements (transposed pipelined GEMM)",
     "csrc/cuda/conv_transpose.cu",
     "const bool completion_only = pass == GatherPass::AfterPhaseGemm && g.mode == PaddingMode::Zeros;",
     "const bool completion_only = false;", "completion_pass", False),
    ("a row's position not carried (pipelined weight gradient)", "csrc/cuda/problems.h",
     "        o[d] -= sizes[d];\n", "", WEIGHT_GRAD_CURSOR_CASES, False),
    ("x's offset not carried (pipelined weight gradient)", "csrc/cuda/problems.h",
     "        x += steps.x_carry[d];\n", "", WEIGHT_GRAD_CURSOR_CASES, False),
    ("a padded tap's source taken from the image, not the row's corner (pipelined weight gradient)",
     "csrc/cuda/problems.h", "offset += (source - o[d] * g.stride[d]) * xs.spatial[d];",
     "offset += source * xs.spatial[d];",
     "pipelined_weight_grad_small_images and reflect and channels_last and bfloat16", False),
    ("TF32 A fragment rows and columns mixed up (pipelined weight gradient)", "csrc/cuda/pipelined_gemm.cuh",
     "a_tile(stage, kk + t + 4 * (r / 2)) + warp_row + f * 16 + g + 8 * (r % 2)",
     "a_tile(stage, kk + t + 4 * (r % 2)) + warp_row + f * 16 + g + 8 * (r / 2)",
     "tf32_pipelined_gemm and weight_grad_splits and zeros", False),
    ("float32 operands not rounded to TF32 (pipelined GEMM)", "csrc/cuda/pipelined_gemm.cuh",
     "for (int r = 0; r < kRegisters; ++r) round_to_tf32(fragment[r]);",
     "for (int r = 0; r < kRegisters; ++r) (void)fragment[r];", TF32_CASES, False),
    ("TF32 operands truncated instead of rounded to nearest (pipelined GEMM)", "csrc/cuda/pipelined_gemm.cuh",
     "for (int r = 0; r < kRegisters; ++r) round_to_tf32(fragment[r]);",
     "for (int r = 0; r < kRegisters; ++r) fragment[r] &= ~0x1FFFu;", TF32_CASES, False),
    ("every stride phase given the first phase's weight (transposed depthwise vectors)", "csrc/cuda/conv_transpose.cu",
     "    phase_weight += t.conv.conv_out_channels", "    phase_weight += 0 * t.conv.conv_out_channels",
     VECTOR_CASES, False),
    ("strip's outputs read at stride 1 (depthwise vectors)", "csrc/cuda/depthwise_vectors.cuh",
     "source_index(first + j * g.stride[2],", "source_index(first + j,", VECTOR_CASES, False),
    ("a row's last output not stored (depthwise vectors)", "csrc/cuda/depthwise_vectors.cuh",
     "if (s.ow0 + j >= g.conv_out_sizes[2]) break;", "if (s.ow0 + j >= g.conv_out_sizes[2] - 1) break;",
     VECTOR_CASES, False),
    ("taps outside x not skipped (transposed depthwise vectors)", "csrc/cuda/depthwise_vectors.cuh",
     "if (kSkipTapsOutside && iw < 0) continue;", "(void)iw;",
     "non_finite_weights and cuda_depthwise_vectors", False),  # a zero tap changes a sum only times inf
    ("leading barrier removed (depthwise rows)", "csrc/cuda/depthwise_rows.cuh",
     "    __syncthreads();  // every thread is done reading the previous span\n", "", ROW_CASES, False),
    ("span one position short (depthwise rows)", "csrc/cuda/problems.h",
     "* g.dilation[2] + 1;\n  plan.fits = single_row(g)", "* g.dilation[2];\n  plan.fits = single_row(g)",
     ROW_CASES, False),
    ("taps outside x not skipped (transposed depthwise rows)", "csrc/cuda/depthwise_rows.cuh",
     "if (source < 0 || source >= g.conv_in_sizes[2]) continue;", "(void)source;",
     "non_finite_weights and cuda_depthwise_rows", False),
    ("a staged output not copied back (pipelined GEMM on an NCHW input)", "csrc/cuda/bindings.cpp",
     "channels_last || staged, stream});\n  if (staged) y.copy_(y_kernel);", "channels_last || staged, stream});",
     "pipelined_taps_straddle_k_tiles and zeros and contiguous and bfloat16", False),
    ("trailing barrier removed (depthwise weight-gradient vectors)", "csrc/cuda/conv_weight_grad.cu",
     "      __syncthreads();  // slot_sums is read before the next tap overwrites it\n", "", GRAD_VECTOR_CASES, False),
    ("the padding read from x instead of zero (few channels)", "csrc/cuda/conv.cu",
     "const acc_t value = iw < 0 ? acc_t(0) : load<acc_t>(x_at, ci * xs.channel);",
     "const acc_t value = load<acc_t>(x_at, ci * xs.channel);", FEW_CASES, False),
    ("the weight's rows stepped by one chunk, not the padded row (few channels)", "csrc/cuda/conv.cu",
     "ci < c_in; ++ci, w_row += plan.padded_out)", "ci < c_in; ++ci, w_row += kFewChannelsOutputs)", FEW_CASES,
     False),
    ("the outputs with every tap inside x one past their end (depthwise weight-gradient vectors)",
     "csrc/cuda/problems.h", "std::min(first.last, last.last));", "std::min(first.last, last.last) + 1);",
     GRAD_VECTOR_CASES, False),
    ("the interior taps' offsets without the padding (depthwise weight-gradient vectors)",
     "csrc/cuda/problems.h", "offset += g.tap_position(d, 0, r[d]) * xs.spatial[d];",
     "offset += r[d] * g.dilation[d] * xs.spatial[d];", GRAD_VECTOR_CASES, False),
    ("a slot's positions not moved on (depthwise weight-gradient vectors)", "csrc/cuda/conv_weight_grad.cu",
     "           --left, at.advance(steps, g.conv_out_sizes)) {", "           --left) {", GRAD_VECTOR_CASES, False),
    ("a tap group's taps stepped without advancing the kernel row (depthwise weight-gradient vectors)",
     "csrc/cuda/conv_weight_grad.cu", "  if (++r[1] < kernel[1]) return;", "  if (r[1] < kernel[1]) return;",
     GRAD_VECTOR_CASES, False),
    ("every split written to the first split's row (depthwise weight-gradient vectors)", "csrc/cuda/conv_weight_grad.cu",
     "partial[(split * channels + c) * taps + tap0 + t] = total;", "partial[c * taps + tap0 + t] = total;",
     GRAD_VECTOR_CASES, False),
]


def sanitizer_env():
    libraries = [subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()
                 for name in ("libasan.so", "libubsan.so")]
    return {"LD_PRELOAD": " ".join(libraries),
            "ASAN_OPTIONS": "detect_leaks=0:halt_on_error=1:abort_on_error=1:detect_odr_violation=0",
            "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}


def run_mutation(name, path, text, replacement, selection, sanitize):
    """Returns (caught, how): whether the shim's tests failed on the mutated copy, and the failure's first line."""
    with tempfile.TemporaryDirectory() as copy:
        for folder in ("csrc", "tests"):
            shutil.copytree(os.path.join(ROOT, folder), os.path.join(copy, folder),
                            ignore=shutil.ignore_patterns("__pycache__"))
        target = os.path.join(copy, path)
        with open(target) as f:
            source = f.read()
        if source.count(text) != 1:
            raise SystemExit(f"mutation '{name}': the text to replace occurs {source.count(text)} times in {path}")
        with open(target, "w") as f:
            f.write(source.replace(text, replacement))
        # The copy has no fastpad package: the CPU ops come from this checkout's (or the installed) one.
        python_path = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
        env = dict(os.environ, PYTHONPATH=python_path, **(sanitizer_env() if sanitize else {}))
        result = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "--capture=sys",
                                 os.path.join(copy, "tests", "test_cuda_sim.py"), "-k", selection],
                                capture_output=True, text=True, env=env, cwd=copy)
    output = result.stdout + result.stderr
    # pytest's own error lines ("E   ...") first: the source it lists around a failure also holds these words.
    lines = output.splitlines()
    keywords = ("cuda_sim: block", "runtime error", "AssertionError", "relative error", "unwritten")
    evidence = next((line.strip() for line in [*(text for text in lines if text.startswith("E ")), *lines]
                     if any(word in line for word in keywords)), "")
    # Caught means failed tests (pytest's exit status 1) with a line that says how; a collection or import error
    # (status 2 or more) says nothing about the mutation.
    return result.returncode == 1 and bool(evidence), evidence[:160]


def main():
    rows, survived = [], 0
    for name, path, text, replacement, selection, sanitize in MUTATIONS:
        start = time.time()
        caught, evidence = run_mutation(name, path, text, replacement, selection, sanitize)
        survived += not caught
        rows.append(f"| {name} | {'ASan + UBSan' if sanitize else 'plain'} | {'caught' if caught else 'MISSED'} | "
                    f"{evidence.replace('|', '/')} | {time.time() - start:.0f} s |")
        print(rows[-1], flush=True)
    print("\n| injected bug | build | result | first failure line | time |\n|---|---|---|---|---|")
    print("\n".join(rows))
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
