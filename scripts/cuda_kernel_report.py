"""What the compiler says about each CUDA kernel, and the checks CI makes on it (scripts/cuda_compile_check.sh).

From nvcc's `-Xptxas -v` logs: registers, spill bytes, stack frame and static shared memory of every kernel per
architecture. From the PTX of conv.cu, conv_transpose.cu and conv_weight_grad.cu: that each kernel of the pipelined GEMM
(csrc/cuda/pipelined_gemm.cuh) copies with 16-byte zero-fill cp.async, waits on its groups, loads fragments with
ldmatrix and multiplies with mma.sync (m16n8k16 for 16-bit elements; m16n8k8 for float32, after cvt.rna.tf32.f32
rounds its operands; the weight gradient's with ldmatrix.trans), and that each depthwise channel-vector kernel (conv and
conv_transpose) copies its patch with 16-byte cp.async and loads and stores 16 bytes at a time, and the depthwise
weight gradient's channel-vector kernel loads x and grad_output 16 bytes at a time.

It fails (exit 1) when any kernel spills or one of those kernels lacks one of its instructions, and prints a markdown
table either way.

Usage: python scripts/cuda_kernel_report.py --ptx conv.ptx [--ptx conv_transpose.ptx ...] LOG [LOG ...]
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

ZERO_FILL_COPY = re.compile(r"cp\.async\.cg\.shared\.global \[[^\]]+\], \[[^\]]+\], 16, %r\d+;")  # a source size
WAIT_GROUP = re.compile(r"cp\.async\.wait_group \d+;")
GLOBAL_LOAD_16 = re.compile(r"ld\.global(\.nc)?\.v(4\.[ubf]32|2\.f64)")
# The depthwise channel-vector kernel's 16-byte loads (through the read-only path) and stores.
VECTOR_KERNEL_INSTRUCTIONS = {
    "16-byte read-only global loads": re.compile(r"ld\.global\.nc\.v4\.b32"),
    "16-byte global stores": re.compile(r"st\.global\.v4\.b32"),
}
# What the PTX of each kernel of a family (by name) must contain.
REQUIRED_INSTRUCTIONS = {
    "pipelined_conv_kernel": {
        "cp.async 16 bytes, zero-fill": ZERO_FILL_COPY,
        "cp.async.wait_group": WAIT_GROUP,
        "ldmatrix .x4": re.compile(r"ldmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16"),
        "mma.sync (m16n8k16 16-bit, m16n8k8 TF32)": re.compile(
            r"mma\.sync\.aligned\.(m16n8k16\.row\.col\.f32\.(bf16\.bf16|f16\.f16)|m16n8k8\.row\.col\.f32\.tf32\.tf32)"
            r"\.f32"),
    },
    # The weight gradient on the same pipeline: both operands stored position-major, loaded with ldmatrix.trans.
    "pipelined_weight_grad_kernelIN": {  # its 16-bit instances (mangled `...IN3c10...`)
        "cp.async 16 bytes, zero-fill": ZERO_FILL_COPY,
        "cp.async.wait_group": WAIT_GROUP,
        "ldmatrix .x4.trans": re.compile(r"ldmatrix\.sync\.aligned\.m8n8\.x4\.trans\.shared\.b16"),
        "mma.sync m16n8k16": re.compile(r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.(bf16\.bf16|f16\.f16)\.f32"),
    },
    # The float32 instances of both (mangled `...If...`) multiply on the TF32 tensor cores, operands rounded first.
    "pipelined_weight_grad_kernelIf": {
        "cp.async 16 bytes, zero-fill": ZERO_FILL_COPY,
        "cp.async.wait_group": WAIT_GROUP,
        "cvt.rna.tf32.f32": re.compile(r"cvt\.rna\.tf32\.f32"),
        "mma.sync m16n8k8 TF32": re.compile(r"mma\.sync\.aligned\.m16n8k8\.row\.col\.f32\.tf32\.tf32\.f32"),
    },
    "pipelined_conv_kernelIf": {
        "cvt.rna.tf32.f32": re.compile(r"cvt\.rna\.tf32\.f32"),
        "mma.sync m16n8k8 TF32": re.compile(r"mma\.sync\.aligned\.m16n8k8\.row\.col\.f32\.tf32\.tf32\.f32"),
    },
    "depthwise_vectors_kernel": VECTOR_KERNEL_INSTRUCTIONS,
    "depthwise_weight_grad_vectors_kernel": {"16-byte global loads": GLOBAL_LOAD_16},
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
    starts = [(m.start(), m[1]) for m in re.finditer(r"^(?:\.visible )?\.entry (\S+)\(", ptx, re.M)]
    return {name: ptx[start:(starts[i + 1][0] if i + 1 < len(starts) else len(ptx))]
            for i, (start, name) in enumerate(starts)}


def missing_instructions(ptx: str) -> Dict[str, List[str]]:
    """For each kernel of `ptx` in a family of REQUIRED_INSTRUCTIONS, the instructions its body lacks (an empty dict:
    all present). A family with no kernel in the PTX is itself a failure."""
    entries = ptx_entries(ptx)
    missing = {}
    for family, required in REQUIRED_INSTRUCTIONS.items():
        kernels = {name: body for name, body in entries.items() if family in name}
        if not kernels:
            missing[f"(no {family} in the PTX)"] = list(required)
        for name, body in kernels.items():
            lacks = [what for what, pattern in required.items() if not pattern.search(body)]
            if lacks:
                missing[name] = lacks
    return missing


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
    parser.add_argument("--ptx", required=True, action="append",
                        help="the PTX of csrc/cuda/conv.cu, conv_transpose.cu and conv_weight_grad.cu (repeat "
                             "the option)")
    args = parser.parse_args(argv)
    kernels = [kernel for path in args.logs for kernel in parse_ptxas(open(path).read())]
    print(table(kernels))
    failures = []
    if not kernels:
        failures.append("no kernel in the ptxas logs (was -Xptxas -v passed?)")
    spilling = [k for k in kernels if k.spill_stores or k.spill_loads]
    failures += [f"{name} ({k.arch}) spills {k.spill_stores} / {k.spill_loads} bytes"
                 for k, name in zip(spilling, demangle([k.name for k in spilling]))]
    ptx = "\n".join(open(path).read() for path in args.ptx)
    for name, lacks in missing_instructions(ptx).items():
        failures.append(f"{name}: no {', '.join(lacks)} in its PTX")
    for failure in failures:
        print(f"cuda_kernel_report: {failure}", file=sys.stderr)
    if not failures:
        print(f"cuda_kernel_report: {len(kernels)} kernels, no spills; the pipelined kernels use 16-byte zero-fill "
              "cp.async, ldmatrix and mma.sync (TF32 after cvt.rna for float32), the depthwise vector kernel 16-byte "
              "read-only loads and stores")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
