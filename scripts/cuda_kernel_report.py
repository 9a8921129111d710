"""What the compiler says about each CUDA kernel, and the checks CI makes on it (scripts/cuda_compile_check.sh).

From nvcc's `-Xptxas -v` logs: registers, spill bytes, stack frame and static shared memory of every kernel per
architecture. From the PTX of the pipelined GEMM (csrc/cuda/pipelined_gemm.cuh): that each of its kernels copies with
16-byte cp.async (zero-fill form), waits on cp.async groups, loads fragments with ldmatrix and multiplies with
mma.sync m16n8k16.

It fails (exit 1) when any kernel spills or a pipelined kernel lacks one of those instructions, and prints a markdown
table either way.

Usage: python scripts/cuda_kernel_report.py --ptx conv.ptx LOG [LOG ...]
"""
import argparse
import re
import subprocess
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional

ENTRY = re.compile(r"ptxas info\s*: Compiling entry function '(?P<name>[^']+)' for '(?P<arch>sm_\d+a?)'")
FRAME = re.compile(r"(?P<stack>\d+) bytes stack frame, (?P<stores>\d+) bytes spill stores, (?P<loads>\d+) bytes spill "
                   r"loads")
USED = re.compile(r"ptxas info\s*: Used (?P<registers>\d+) registers(?P<rest>.*)")
SHARED = re.compile(r"(\d+) bytes smem")

# What the PTX of every pipelined kernel must contain: the zero-fill cp.async (a source-size operand), its group
# wait, ldmatrix and the m16n8k16 tensor-core MMA.
PIPELINED_INSTRUCTIONS = {
    "cp.async 16 bytes, zero-fill": re.compile(r"cp\.async\.cg\.shared\.global \[[^\]]+\], \[[^\]]+\], 16, %r\d+;"),
    "cp.async.wait_group": re.compile(r"cp\.async\.wait_group \d+;"),
    "ldmatrix .x4": re.compile(r"ldmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16"),
    "mma.sync m16n8k16": re.compile(r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.(bf16\.bf16|f16\.f16)\.f32"),
}


@dataclass
class Kernel:
    name: str  # mangled
    arch: str
    registers: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack_frame: int = 0
    static_shared: int = 0


def parse_ptxas(text: str) -> List[Kernel]:
    """The kernels of one `-Xptxas -v` log, in order."""
    kernels: List[Kernel] = []
    for line in text.splitlines():
        if entry := ENTRY.search(line):
            kernels.append(Kernel(entry["name"], entry["arch"]))
        elif kernels and (frame := FRAME.search(line)):
            kernels[-1].stack_frame, kernels[-1].spill_stores, kernels[-1].spill_loads = (
                int(frame["stack"]), int(frame["stores"]), int(frame["loads"]))
        elif kernels and (used := USED.search(line)):
            kernels[-1].registers = int(used["registers"])
            shared = SHARED.search(used["rest"])
            kernels[-1].static_shared = int(shared[1]) if shared else 0
    return kernels


def ptx_entries(ptx: str) -> Dict[str, str]:
    """The body of each .entry of a PTX file, by mangled name."""
    starts = [(m.start(), m[1]) for m in re.finditer(r"^\.(?:visible )?\.entry (\S+)\(", ptx, re.M)]
    return {name: ptx[start:(starts[i + 1][0] if i + 1 < len(starts) else len(ptx))]
            for i, (start, name) in enumerate(starts)}


def missing_pipelined_instructions(ptx: str) -> Dict[str, List[str]]:
    """For each pipelined kernel of `ptx`, the required instructions its body lacks (an empty dict: all present).
    A PTX without any pipelined kernel is itself a failure."""
    entries = {name: body for name, body in ptx_entries(ptx).items() if "pipelined_conv_kernel" in name}
    if not entries:
        return {"(no pipelined_conv_kernel in the PTX)": list(PIPELINED_INSTRUCTIONS)}
    missing = {name: [what for what, pattern in PIPELINED_INSTRUCTIONS.items() if not pattern.search(body)]
               for name, body in entries.items()}
    return {name: lacks for name, lacks in missing.items() if lacks}


def demangle(names: List[str]) -> List[str]:
    try:
        result = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True)
        return result.stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return names


def short_name(demangled: str) -> str:
    """`void fastpad::cuda::(anonymous namespace)::direct_conv_kernel<float>(...)` -> `direct_conv_kernel<float>`."""
    name = re.sub(r"^void ", "", demangled)
    name = re.sub(r"\(anonymous namespace\)::|fastpad::cuda::|fastpad::|c10::", "", name)
    depth = 0
    for i, ch in enumerate(name):  # cut the parameter list that follows the template arguments
        depth += (ch == "<") - (ch == ">")
        if ch == "(" and depth == 0:
            return name[:i]
    return name


def table(kernels: List[Kernel]) -> str:
    names = demangle([k.name for k in kernels])
    rows = ["| kernel | arch | registers | spill stores / loads (bytes) | stack frame (bytes) | static smem (bytes) |",
            "|---|---|---|---|---|---|"]
    for kernel, name in zip(kernels, names):
        rows.append(f"| `{short_name(name)}` | {kernel.arch} | {kernel.registers} | {kernel.spill_stores} / "
                    f"{kernel.spill_loads} | {kernel.stack_frame} | {kernel.static_shared} |")
    return "\n".join(rows)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+", help="nvcc -Xptxas -v logs")
    parser.add_argument("--ptx", required=True, help="the PTX of csrc/cuda/conv.cu")
    args = parser.parse_args(argv)
    kernels = [kernel for path in args.logs for kernel in parse_ptxas(open(path).read())]
    print(table(kernels))
    failures = []
    if not kernels:
        failures.append("no kernel in the ptxas logs (was -Xptxas -v passed?)")
    spilling = [k for k in kernels if k.spill_stores or k.spill_loads]
    failures += [f"{name} ({k.arch}) spills {k.spill_stores} / {k.spill_loads} bytes"
                 for k, name in zip(spilling, demangle([k.name for k in spilling]))]
    for name, lacks in missing_pipelined_instructions(open(args.ptx).read()).items():
        failures.append(f"{name}: no {', '.join(lacks)} in its PTX")
    for failure in failures:
        print(f"cuda_kernel_report: {failure}", file=sys.stderr)
    if not failures:
        print(f"cuda_kernel_report: {len(kernels)} kernels, no spills; every pipelined kernel uses 16-byte zero-fill "
              "cp.async, ldmatrix and mma.sync m16n8k16")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
