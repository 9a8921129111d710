"""Build fastpad's C++ (and, where possible, CUDA) extension.

CUDA kernels are built when the installed torch has CUDA and nvcc is found, or when
FASTPAD_FORCE_CUDA=1. TORCH_CUDA_ARCH_LIST (default "8.0;9.0") and MAX_JOBS are honoured.
Install with `pip install --no-build-isolation .` so the build uses the torch you have.
"""
import glob
import os
import re
import shutil

from setuptools import setup

import torch
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension, CUDA_HOME

ROOT = os.path.dirname(os.path.abspath(__file__))
CSRC = os.path.join(ROOT, "csrc")


def want_cuda() -> bool:
    if os.environ.get("FASTPAD_FORCE_CUDA") == "1":
        return True
    nvcc_found = CUDA_HOME is not None or shutil.which("nvcc") is not None
    return torch.version.cuda is not None and nvcc_found


def cpu_vector_flags():
    """at::vec compiles to AVX2 only when told; use it where the building machine has it (FASTPAD_CPU_BASELINE=1 opts out)."""
    if os.environ.get("FASTPAD_CPU_BASELINE") == "1":
        return []
    try:
        with open("/proc/cpuinfo") as f:
            flags = set(re.findall(r"^flags\s*:(.*)$", f.read(), re.M)[0].split())
    except (OSError, IndexError):
        return []
    if {"avx2", "fma", "f16c"} <= flags:
        return ["-mavx2", "-mfma", "-mf16c", "-DCPU_CAPABILITY=AVX2", "-DCPU_CAPABILITY_AVX2"]
    return []


def relative_sources(*patterns):
    """Sources relative to setup.py: setuptools refuses absolute paths in setup() arguments (editable installs)."""
    found = sorted(path for pattern in patterns for path in glob.glob(os.path.join(CSRC, pattern)))
    return [os.path.relpath(path, ROOT) for path in found]


def extension():
    sources = relative_sources("*.cpp", os.path.join("cpu", "*.cpp"))
    cxx_flags = ["-O3", "-fopenmp"] + cpu_vector_flags()
    link_flags = ["-fopenmp"]
    if os.environ.get("FASTPAD_SANITIZE") == "1":
        cxx_flags += ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-O1",
                      "-fno-wrapv"]  # Python builds with -fwrapv, which would hide signed overflow from UBSan
        link_flags += ["-fsanitize=address,undefined"]
    kwargs = dict(
        name="fastpad._C",
        sources=sources,
        include_dirs=[CSRC],
        extra_link_args=link_flags,
        py_limited_api=False,
    )
    # The kernels and launchers (*.cu) and their torch-side bindings and registration (*.cpp).
    cuda_sources = relative_sources(os.path.join("cuda", "*.cu"), os.path.join("cuda", "*.cpp"))
    if want_cuda() and cuda_sources:
        os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "8.0;9.0")
        return CUDAExtension(
            sources=sources + cuda_sources,
            extra_compile_args={"cxx": cxx_flags,
                                # -lineinfo: compute-sanitizer reports name source lines
                                "nvcc": ["-O3", "--expt-relaxed-constexpr", "-lineinfo"]},
            **kwargs,
        )
    return CppExtension(extra_compile_args={"cxx": cxx_flags}, **kwargs)


setup(
    ext_modules=[extension()],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)
