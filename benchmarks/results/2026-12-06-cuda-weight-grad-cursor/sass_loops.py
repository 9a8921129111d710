"""The k-tile loop of pipelined_weight_grad_kernel in SASS (sm_90): instructions per iteration, HMMA, MUFU (the
reciprocals of 32-bit divisions) and CALL (the out-of-line 64-bit division), per element type.

    python sass_loops.py REPO [--zeros [--interior]]

Compiles REPO's csrc/cuda/conv_weight_grad.cu with nvcc to a cubin and disassembles it with cuobjdump (both on PATH;
cuobjdump from the nvidia-cuda-cuobjdump wheel). With --zeros, a copy of the tree whose kernel fixes g.mode to zeros
is compiled instead, so that the padding modes' resolution (taken only for positions in the padding) drops out of the
loop: what is left is the path a zero-padded k-tile executes. The loop is the shortest backward branch span holding
the HMMAs. With --interior as well, the block that resolves a tap lying in the padding (`if (!in_x)`, after this
change) is replaced by its zeros-mode outcome, leaving the path of a k-tile whose taps all lie inside x (before this
change the loop had no such block: --interior changes nothing there). Static counts: a proxy for the instructions a
warp issues per k-tile, not a timing.
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

KERNEL = "pipelined_weight_grad_kernel"
TYPES = {"bfloat16": "IN3c108BFloat16", "float16": "IN3c104Half", "float32 (TF32)": "IfEE"}


def sass(repo, zeros, interior):
    with tempfile.TemporaryDirectory() as work:
        tree = os.path.join(work, "csrc")
        shutil.copytree(os.path.join(repo, "csrc"), tree)
        if zeros:
            path = os.path.join(tree, "cuda", "pipelined_gemm.cuh")
            source = open(path).read()
            head = f"{KERNEL}(const ConvGeometry g, "
            assert source.count(head) == 1
            source = source.replace(head, f"{KERNEL}(const ConvGeometry g_argument, ")
            brace = source.index("{", source.index(f"{KERNEL}(const ConvGeometry g_argument"))
            source = (source[:brace + 1] + "\n  ConvGeometry g = g_argument;\n  g.mode = PaddingMode::Zeros;\n"
                      + source[brace + 1:])
            if interior and "      if (!in_x) {" in source:
                start = source.index("      if (!in_x) {")
                end = source.index("      cp_async_zfill_16(b_tile(", start)
                source = source[:start] + "      b_valid = b_valid && in_x;\n" + source[end:]
            open(path, "w").write(source)
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


def k_tile_loop(text, mangled):
    for function in re.split(r"\n\s*Function : ", text)[1:]:
        if KERNEL + mangled not in function.split("\n", 1)[0]:
            continue
        code = [(int(m.group(1), 16), m.group(2)) for m in
                (re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line) for line in function.split("\n")) if m]
        index = {address: i for i, (address, _) in enumerate(code)}
        best = None
        for i, (address, op) in enumerate(code):
            target = re.search(r"\bBRA\b.*?0x([0-9a-f]+)", op)
            if target and int(target.group(1), 16) < address and int(target.group(1), 16) in index:
                body = [o for _, o in code[index[int(target.group(1), 16)]:i + 1]]
                if any("HMMA" in o for o in body) and (best is None or len(body) < len(best)):
                    best = body
        return best


def main():
    repo, zeros, interior = sys.argv[1], "--zeros" in sys.argv, "--interior" in sys.argv
    text = sass(repo, zeros, interior)
    kind = ("zeros fixed, taps inside x" if interior else "zeros fixed") if zeros else "any mode"
    print(f"| type | loop instructions | HMMA | MUFU | CALL | IMAD |   ({kind})")
    print("|---|---|---|---|---|---|")
    for name, mangled in TYPES.items():
        body = k_tile_loop(text, mangled)
        ops = collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", o).split()[0].split(".")[0] for o in body)
        print(f"| {name} | {len(body)} | {ops['HMMA']} | {ops['MUFU']} | {ops['CALL']} | {ops['IMAD']} |")


if __name__ == "__main__":
    main()
