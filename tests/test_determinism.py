"""Determinism (reliability issue):

- on CPU, repeated calls of every kernel path, forward and backward, are bitwise identical for a fixed thread count
  (float64, float32, bfloat16; values and bit patterns are compared, so -0.0 against 0.0 counts as a difference);
- across thread counts results are only reported (run with -rP to see the table), except the weight gradients of
  csrc/cpu/depthwise.cpp (depthwise and tap dots), which it documents as independent of the thread count;
- on CUDA, torch.use_deterministic_algorithms(True) gives bitwise-identical repeats or a clear error.
"""

import contextlib

import pytest
import torch

from code_paths import (CODE_PATHS, RESULT_NAMES, assert_bitwise_equal, bitwise_equal, intra_op_threads,
                        run_forward_backward, run_reference, skip_unless_isa)
from reference import assert_matches

DTYPES = (torch.float32, torch.bfloat16, torch.float64)


@contextlib.contextmanager
def deterministic_algorithms():
    previous = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous, warn_only=warn_only)


# --------------------------------------------------------------------------------------------
# CPU: bitwise repeats at a fixed thread count.

THREAD_COUNTS = sorted({1, torch.get_num_threads()})


@pytest.mark.parametrize("threads", THREAD_COUNTS, ids=lambda n: f"{n}threads")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", CODE_PATHS)
def test_repeated_calls_are_bitwise_identical(name, dtype, threads):
    path = CODE_PATHS[name]
    skip_unless_isa(path)
    inputs = path.inputs(dtype)
    with intra_op_threads(threads):
        first, *repeats = (run_forward_backward(path, inputs, poison_outputs=True) for _ in range(3))
    for result, expected, result_name in zip(first, run_reference(path, inputs), RESULT_NAMES):
        assert_matches(result, expected, what=f"{name} {result_name}")
    for index, repeat in enumerate(repeats, 2):
        assert_bitwise_equal(repeat, first, f"{name}, {dtype}, {threads} threads, call {index} vs call 1")


def test_bitwise_comparison_sees_negative_zero():
    """torch.equal alone calls 0.0 and -0.0 equal; the bit-pattern comparison does not."""
    values = torch.randn(5)
    positive_zero = values.clone()
    positive_zero[2] = 0.0
    negative_zero = positive_zero.clone()
    negative_zero[2] = -0.0
    assert torch.equal(positive_zero, negative_zero)
    assert not bitwise_equal(positive_zero, negative_zero)
    assert bitwise_equal(values, values.clone())


# --------------------------------------------------------------------------------------------
# CPU: across thread counts (reported; required only where the code documents it).

# depthwise.cpp: each weight-gradient value is summed by one thread in an order fixed by the geometry, depthwise
# (channels-last, NCHW and NCHW's channel blocks) and tap dots alike. (Depthwise calls that kernel_paths.h leaves to torch have torch's own guarantees.)
DEPTHWISE_PATHS = {name for name, path in CODE_PATHS.items()
                   if {("conv_weight_grad", "cpu_depthwise"), ("conv_weight_grad", "cpu_depthwise_avx512"),
                       ("conv_weight_grad", "cpu_depthwise_channel_blocks"),
                       ("conv_weight_grad", "cpu_depthwise_channel_blocks_avx512"),
                       ("conv_weight_grad", "cpu_tap_dots")} & set(path.kernels)}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_results_across_thread_counts(dtype):
    """Prints which op's results change with the thread count. Requires the results at every count to be within
    tolerance, and depthwise.cpp's weight gradients to be bitwise independent of it."""
    counts = sorted({1, 2, torch.get_num_threads()})
    report = []
    for name, path in CODE_PATHS.items():
        inputs = path.inputs(dtype)
        results = {}
        for count in counts:
            with intra_op_threads(count):
                results[count] = run_forward_backward(path, inputs)
        expected = run_reference(path, inputs)
        differing = {}  # result name -> the op that computes it
        for count in counts:
            for result, first, reference, result_name, op in zip(results[count], results[counts[0]], expected,
                                                                 RESULT_NAMES, path.result_ops):
                assert_matches(result, reference, what=f"{name} {result_name}, {count} threads")
                if not bitwise_equal(result, first):
                    differing[result_name] = op
        report.append(f"{name:38s} " + (", ".join(differing.values()) or "identical"))
        if name in DEPTHWISE_PATHS:
            assert "weight grad" not in differing, f"{name}: depthwise.cpp's weight gradient changes with the thread count"
    print(f"\n{dtype}, thread counts {counts}: results that differ between thread counts\n" + "\n".join(report))


# --------------------------------------------------------------------------------------------
# CUDA: torch.use_deterministic_algorithms(True) is honoured.

CUDA_DETERMINISM_BATCH = 16  # long reductions in the weight gradient, where atomics would reorder the sums


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", CODE_PATHS)
def test_cuda_deterministic_algorithms_are_honoured(name):
    """Under torch.use_deterministic_algorithms(True), repeated backward passes are bitwise identical, or fastpad
    refuses with a RuntimeError that names determinism. Silently different results fail."""
    path = CODE_PATHS[name]
    inputs = path.inputs(torch.float32, device="cuda", batch=CUDA_DETERMINISM_BATCH)
    with deterministic_algorithms():
        try:
            first, *repeats = (run_forward_backward(path, inputs) for _ in range(4))
        except RuntimeError as error:
            assert "determinis" in str(error).lower(), f"{name}: RuntimeError without a word on determinism: {error}"
            return
    for index, repeat in enumerate(repeats, 2):
        assert_bitwise_equal(repeat, first, f"{name}, CUDA, deterministic algorithms, call {index} vs call 1")
