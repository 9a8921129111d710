"""The inner loop of a CUDA weight-gradient kernel in SASS (sm_90), per element type: its instructions, and among them
the tensor-core or FMA instructions, MUFU (the reciprocals of 32-bit divisions), CALL (the out-of-line 64-bit division)
and IMAD.

    python sass_loops.py REPO [--kernel pipelined|depthwise] [--zeros [--interior]]

pipelined (the default): pipelined_weight_grad_kernel's k-tile loop (the shortest backward-branch span holding its
HMMAs). depthwise: depthwise_weight_grad_vectors_kernel's loop over a thread's positions (the shortest span holding
16-byte global loads and FMAs).

Compiles REPO's csrc/cuda/conv_weight_grad.cu with nvcc to a cubin and disassembles it with cuobjdump (both on PATH;
cuobjdump from the nvidia-cuda-cuobjdump wheel). With --zeros, a copy of the tree whose kernel fixes g.mode to zeros
is compiled instead, so that the padding modes' resolution (taken only for positions in the padding) drops out of the
loop. With --interior as well, the kernel's branch for taps in the padding is cut away where the tree has one
(pipelined: the `if` on the row's range replaced by its zeros-mode outcome; depthwise: the `if` on the position's
range made unconditional), leaving
the path of a loop iteration whose taps all lie inside x; a tree without such a branch is compiled unchanged. Static
counts: a proxy for the instructions a warp issues per iteration, not a timing.
"""
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

import torch
from torch.utils.cpp_extension import include_paths

KERNELS = {  # kernel: (source holding it, the loop's marker instructions, element types by mangled suffix)
    "pipelined": ("pipelined_gemm.cuh", ("HMMA",),
                  {"bfloat16": "IN3c108BFloat16", "float16": "IN3c104Half", "float32 (TF32)": "IfEE"}),
    "depthwise": ("conv_weight_grad.cu", ("LDG.E.128", "FMA"),
                  {"bfloat16": "IN3c108BFloat16", "float16": "IN3c104Half", "float32": "IfEE", "float64": "IdEE"}),
}
NAMES = {"pipelined": "pipelined_weight_grad_kernel", "depthwise": "depthwise_weight_grad_vectors_kernel"}
INTERIOR = {  # kernel: the forms its branch has had: (first line, the text after it cut to or None, replacement)
    "pipelined": [("      if (!in_x) {", "      cp_async_zfill_16(b_tile(", "      b_valid = b_valid && in_x;\n"),
                  ("      if (!row.within(inside)) {", "      cp_async_zfill_16(b_tile(",
                   "      b_valid = b_valid && row.within(inside);\n")],
    "depthwise": [("        if (interior) {", None, "        if (true) {"),
                  ("        if (at.within(interior_outputs.range)) {", None, "        if (true) {")],
}


def edit(tree, kernel, interior):
    path = os.path.join(tree, "cuda", KERNELS[kernel][0])
    source = open(path).read()
    name = NAMES[kernel]
    head = f"{name}(const ConvGeometry g, "
    assert source.count(head) == 1
    source = source.replace(head, f"{name}(const ConvGeometry g_argument, ")
    brace = source.index("{", source.index(f"{name}(const ConvGeometry g_argument"))
    zeros_mode = "\n  ConvGeometry g = g_argument;\n  g.mode = PaddingMode::Zeros;\n"
    source = source[:brace + 1] + zeros_mode + source[brace + 1:]
    for first, cut_to, replacement in INTERIOR[kernel]:
        if interior and first in source:
            start = source.index(first)
            end = source.index(cut_to, start) if cut_to else start + len(first)
            source = source[:start] + replacement + source[end:]
    open(path, "w").write(source)


def sass(repo, kernel, zeros, interior):
    with tempfile.TemporaryDirectory() as work:
        tree = os.path.join(work, "csrc")
        shutil.copytree(os.path.join(repo, "csrc"), tree)
        if zeros:
            edit(tree, kernel, interior)
        stand_in = os.path.join(work, "stand_in", "c10", "cuda", "impl")
        os.makedirs(stand_in)
        open(os.path.join(stand_in, "cuda_cmake_macros.h"), "w").write("#pragma once\n")
        cubin = os.path.join(work, "wg.cubin")
        subprocess.run(["nvcc", "-std=c++20", "-O3", f"-I{work}/stand_in", f"-I{tree}",
                        *[f"-I{p}" for p in include_paths()],
                        f"-D_GLIBCXX_USE_CXX11_ABI={int(torch.compiled_with_cxx11_abi())}",
                        "-DTORCH_API_INCLUDE_EXTENSION_H", "-DTORCH_EXTENSION_NAME=_C", "--expt-relaxed-constexpr",
                        "-cubin", "-arch=sm_90", os.path.join(tree, "cuda", "conv_weight_grad.cu"), "-o", cubin],
                       check=True)
        return subprocess.run(["cuobjdump", "-sass", cubin], check=True, capture_output=True, text=True).stdout


def inner_loop(text, name, markers):
    for function in re.split(r"\n\s*Function : ", text)[1:]:
        if name not in function.split("\n", 1)[0]:
            continue
        code = [(int(m.group(1), 16), m.group(2)) for m in
                (re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line) for line in function.split("\n")) if m]
        index = {address: i for i, (address, _) in enumerate(code)}
        best = None
        for i, (address, op) in enumerate(code):
            target = re.search(r"\bBRA\b.*?0x([0-9a-f]+)", op)
            if target and int(target.group(1), 16) < address and int(target.group(1), 16) in index:
                body = [o for _, o in code[index[int(target.group(1), 16)]:i + 1]]
                holds_markers = all(any(marker in o for o in body) for marker in markers)
                if holds_markers and (best is None or len(body) < len(best)):
                    best = body
        return best


def main():
    repo, zeros, interior = sys.argv[1], "--zeros" in sys.argv, "--interior" in sys.argv
    kernel = sys.argv[sys.argv.index("--kernel") + 1] if "--kernel" in sys.argv else "pipelined"
    text = sass(repo, kernel, zeros, interior)
    kind = ("zeros fixed, taps inside x" if interior else "zeros fixed") if zeros else "any mode"
    products = "HMMA" if kernel == "pipelined" else "FFMA/DFMA"
    print(f"| {kernel} type | loop instructions | {products} | MUFU | CALL | IMAD |   ({kind})")
    print("|---|---|---|---|---|---|")
    _, markers, types = KERNELS[kernel]
    for name, mangled in types.items():
        body = inner_loop(text, NAMES[kernel] + mangled, markers)
        ops = collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", o).split()[0].split(".")[0] for o in body)
        multiplies = ops["HMMA"] if kernel == "pipelined" else ops["FFMA"] + ops["DFMA"]
        print(f"| {name} | {len(body)} | {multiplies} | {ops['MUFU']} | {ops['CALL']} | {ops['IMAD']} |")


if __name__ == "__main__":
    main()
