"""Build fastpad's C++ (and, where possible, CUDA) extension.

CUDA kernels are built when the installed torch has CUDA and nvcc is found, or when
FASTPAD_FORCE_CUDA=1. TORCH_CUDA_ARCH_LIST (default "8.0;9.0") and MAX_JOBS are honoured.
Install with `pip install --no-build-isolation .` so the build uses the torch you have.

Next to the extension, the build writes fastpad/_build_info.json: the commit, torch, vector ISA and CUDA
architectures it was built with, which `python -m fastpad info` reports.
"""
import datetime
import glob
import json
import os
import re
import shutil
import subprocess

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


def git_commit():
    """(commit, uncommitted changes?) of the checkout being built, or (None, False) outside a git checkout."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    try:
        head = git("rev-parse", "HEAD")
    except OSError:  # no git on this machine
        return None, False
    if head.returncode != 0:
        return None, False
    return head.stdout.strip(), bool(git("status", "--porcelain", "--untracked-files=no").stdout.strip())


def build_info(ext) -> dict:
    """What this build is: the facts `python -m fastpad info` cannot learn from the running process."""
    commit, dirty = git_commit()
    cuda = any(source.endswith(".cu") for source in ext.sources)
    return {
        "version": re.search(r'^version = "(.*)"', open(os.path.join(ROOT, "pyproject.toml")).read(), re.M)[1],
        "commit": commit,
        "uncommitted_changes": dirty,
        "built": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "cpu_vector_isa": "AVX2" if "-mavx2" in ext.extra_compile_args["cxx"] else "baseline",
        "sanitizers": os.environ.get("FASTPAD_SANITIZE") == "1",
        "cuda_kernels": cuda,
        "cuda_architectures": os.environ.get("TORCH_CUDA_ARCH_LIST") if cuda else None,
    }


class BuildExtensionWithInfo(BuildExtension.with_options(use_ninja=True)):
    """torch's BuildExtension, which also writes _build_info.json beside each extension it builds (in the build
    folder, and in the source folder too for in-place and editable builds)."""

    def run(self):
        super().run()
        for ext in self.extensions:
            text = json.dumps(build_info(ext), indent=2) + "\n"
            in_build_folder = os.path.join(self.build_lib, self.get_ext_filename(self.get_ext_fullname(ext.name)))
            for library in {in_build_folder, self.get_ext_fullpath(ext.name)}:
                os.makedirs(os.path.dirname(library), exist_ok=True)
                with open(os.path.join(os.path.dirname(library), "_build_info.json"), "w") as f:
                    f.write(text)


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
    return CppExtension(sources=sources, extra_compile_args={"cxx": cxx_flags}, **kwargs)


setup(
    ext_modules=[extension()],
    cmdclass={"build_ext": BuildExtensionWithInfo},
)
