"""Which kernel each call reaches, asserted through the private path ops (torch.ops.fastpad._*_path), which report
kernel_paths.h's choice: the same function the CPU ops and the CUDA bindings switch on."""

import pytest
import torch

from code_paths import CODE_PATHS, kernels_reached
from test_cuda import CUDA_KERNELS, PATHS, cuda_kernels_reached


@pytest.mark.parametrize("name", CODE_PATHS)
def test_each_call_reaches_its_cpu_kernels(name):
    path = CODE_PATHS[name]
    assert kernels_reached(path, path.inputs(torch.float32)) == set(path.kernels)


def test_every_cpu_kernel_path_is_reached():
    """Together the calls reach every CPU kernel path of every op."""
    reached = {pair for path in CODE_PATHS.values() for pair in path.kernels}
    every = {("conv", name) for name in ("cpu_depthwise", "cpu_tap_gemms", "cpu_column_gemm",
                                         "cpu_channels_last_direct", "cpu_channels_last_phase_planes",
                                         "cpu_channels_last_im2col")}
    every |= {("conv_transpose", name) for name in ("cpu_depthwise", "cpu_phase_planes", "cpu_gemm_col2im")}
    every |= {("conv_weight_grad", name) for name in ("cpu_depthwise", "cpu_phase_planes", "cpu_channels_last_gemm")}
    assert reached == every


def test_a_non_finite_weight_leaves_the_transposed_phase_planes():
    """The CPU phase planes multiply weights by zeros outside x, so an inf weight takes the GEMM + col2im path."""
    x, w = torch.randn(1, 16, 16, 16), torch.randn(16, 16, 4, 4)
    args = ([2, 2], [1, 1], [32, 32], [1, 1], 1, "zeros", "cpu")
    assert torch.ops.fastpad._conv_transpose_path(x, w, None, *args) == "cpu_phase_planes"
    w[3, 2, 1, 1] = float("inf")
    assert torch.ops.fastpad._conv_transpose_path(x, w, None, *args) == "cpu_gemm_col2im"


def test_path_ops_check_their_arguments():
    x, w = torch.randn(1, 4, 8, 8), torch.randn(4, 4, 3, 3)
    with pytest.raises(RuntimeError, match="backend must be 'cpu' or 'cuda', got 'tpu'"):
        torch.ops.fastpad._conv_path(x, w, None, [1, 1], [1, 1], [1, 1], [1, 1], 1, "zeros", "tpu")
    with pytest.raises(RuntimeError, match="groups"):
        torch.ops.fastpad._conv_path(x, w, None, [1, 1], [1, 1], [1, 1], [1, 1], 3, "zeros", "cpu")


@pytest.mark.parametrize("name", PATHS)
def test_each_cuda_test_case_reaches_its_cuda_kernels(name):
    """tests/test_cuda.py's one-case-per-path table (what scripts/gpu_check.sh runs under compute-sanitizer) reaches
    the CUDA kernels it is named for; asked on CPU tensors, as the choice depends only on the geometry, layout and
    dtype."""
    assert cuda_kernels_reached(name, device="cpu") == CUDA_KERNELS[name]


def test_the_cuda_test_cases_cover_every_cuda_kernel_path():
    reached = {(op, kernel) for kernels in CUDA_KERNELS.values()
               for op, kernel in zip(("conv", "conv_transpose", "conv_weight_grad"), kernels)}
    assert {kernel for op, kernel in reached if op == "conv"} == {"cuda_depthwise_halo", "cuda_direct",
                                                                   "cuda_implicit_gemm"}
    assert {kernel for op, kernel in reached if op == "conv_transpose"} == {"cuda_direct_gather", "cuda_phase_gemm",
                                                                             "cuda_phase_gemm_fold"}
    assert {kernel for op, kernel in reached if op == "conv_weight_grad"} == {"cuda_depthwise_reduction",
                                                                               "cuda_split_k_gemm"}
