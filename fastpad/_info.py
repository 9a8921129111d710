"""`python -m fastpad info`: what a bug report needs, in one block of text to paste.

The running process tells the versions, the CPU, the threads and the GPU; fastpad/_build_info.json, which setup.py
writes beside the extension, tells the commit and the flags the extension was built with.
"""
import json
import os
import platform
import re
import subprocess
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import torch

PACKAGE_DIR = Path(__file__).resolve().parent
# x86 features the CPU kernels can use, as /proc/cpuinfo names them.
CPU_FEATURES = ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "avx512_fp16", "amx_bf16")


def build_info() -> Dict[str, object]:
    """The build's record (setup.py), or {} when the extension was built without one."""
    try:
        return json.loads((PACKAGE_DIR / "_build_info.json").read_text())
    except (OSError, ValueError):
        return {}


def checkout_commit() -> Optional[str]:
    """The short commit of the git checkout the package is imported from (+ a mark for uncommitted changes), or
    None for an installed package."""
    root = PACKAGE_DIR.parent
    if not (root / ".git").exists():
        return None

    def git(*args):
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    try:
        head = git("rev-parse", "--short", "HEAD")
    except OSError:  # no git on this machine
        return None
    if head.returncode != 0:
        return None
    dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    return head.stdout.strip() + (" + uncommitted changes" if dirty else "")


def built_commit(info: Dict[str, object]) -> str:
    commit = info.get("commit")
    if not commit:
        return "unknown (not built from a git checkout)"
    return str(commit)[:7] + (" + uncommitted changes" if info.get("uncommitted_changes") else "")


def source_description() -> str:
    """The commit a run's results belong to: the checkout's, else the one the installed extension was built from."""
    return checkout_commit() or f"{built_commit(build_info())} (installed build)"


def cpu_model_and_features() -> Tuple[str, List[str]]:
    model = platform.processor() or platform.machine()
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return model, []
    names = re.findall(r"^model name\s*:\s*(.*)$", text, re.M)
    flag_lines = re.findall(r"^flags\s*:(.*)$", text, re.M)
    flags = set(flag_lines[0].split()) if flag_lines else set()
    return (names[0] if names else model), [feature for feature in CPU_FEATURES if feature in flags]


def cpu_kernel_lines(info: Dict[str, object], features: List[str]) -> List[str]:
    """Which vector code the CPU kernels run, and whether this CPU can run it."""
    isa = info.get("cpu_vector_isa", "unknown")
    lines = [f"CPU kernels: built for {isa} vectors (at::vec)"
             + (" with AddressSanitizer and UBSan" if info.get("sanitizers") else "")]
    if isa == "AVX2" and features and not {"avx2", "fma", "f16c"} <= set(features):
        lines.append("  WARNING: this CPU lacks AVX2/FMA/F16C, which this build needs: rebuild with "
                     "FASTPAD_CPU_BASELINE=1")
    if hasattr(torch.ops.fastpad, "_cpu_isa"):  # chosen when the op runs (FASTPAD_CPU_ISA caps it)
        lines.append(f"blocked conv kernels on this CPU: {torch.ops.fastpad._cpu_isa()} "
                     "(avx512_bf16, avx512, avx2, or baseline: the GEMM kernels instead)")
    lines.append(f"torch's own CPU kernels use: {torch.backends.cpu.get_cpu_capability()}")
    return lines


def cuda_lines(info: Dict[str, object]) -> List[str]:
    registered = torch._C._dispatch_has_kernel_for_dispatch_key("fastpad::conv", "CUDA")
    if not registered:
        return ["CUDA kernels: not built (torch without CUDA, or no nvcc at build time)"]
    lines = [f"CUDA kernels: built for compute capabilities {info.get('cuda_architectures', 'unknown')}, "
             f"torch CUDA {torch.version.cuda}"]
    if not torch.cuda.is_available():
        return lines + ["GPU: none visible"]
    for index in range(torch.cuda.device_count()):
        major, minor = torch.cuda.get_device_capability(index)
        lines.append(f"GPU {index}: {torch.cuda.get_device_name(index)}, compute capability {major}.{minor}")
        built = str(info.get("cuda_architectures") or "")
        if f"{major}.{minor}" not in re.split(r"[;\s]+", built.replace("+PTX", "")):
            lines.append(f"  WARNING: the CUDA kernels were not built for {major}.{minor} ({built})")
    return lines


def report() -> str:
    import fastpad

    info = build_info()
    model, features = cpu_model_and_features()
    lines = [
        f"fastpad {fastpad.__version__} from {PACKAGE_DIR}",
        f"  extension built from commit {built_commit(info)} on {info.get('built', 'unknown date')}"
        + (f" against torch {info['torch']}" if "torch" in info else ""),
    ]
    checkout = checkout_commit()
    if checkout is not None:
        lines.append(f"  source checkout at {checkout}")
    lines += [
        f"torch {torch.__version__} (debug build: {torch.version.debug}, CUDA {torch.version.cuda or 'none'})",
        f"Python {platform.python_version()} on {platform.platform()}",
        f"CPU: {model}; features: {' '.join(features) or 'unknown'}",
        *cpu_kernel_lines(info, features),
        f"threads: torch.get_num_threads() = {torch.get_num_threads()} of {os.cpu_count()} logical CPUs"
        + (f", OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}" if "OMP_NUM_THREADS" in os.environ else ""),
        *cuda_lines(info),
    ]
    return "\n".join(lines)


def main() -> int:
    print(report())
    return 0
