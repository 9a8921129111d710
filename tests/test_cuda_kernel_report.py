"""scripts/cuda_kernel_report.py, the check CI runs on nvcc's output (scripts/cuda_compile_check.sh): it must fail on
a spilling kernel, on a pipelined kernel (conv or weight gradient) without its cp.async, ldmatrix or mma.sync (or, in
float32, its TF32 rounding), on the depthwise vector kernel (conv and conv_transpose's phases) without its 16-byte
loads or stores, and on the depthwise weight gradient's vector kernel without its 16-byte loads, and pass a clean
build."""
import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location("cuda_kernel_report",
                                              os.path.join(ROOT, "scripts", "cuda_kernel_report.py"))
report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(report)

PIPELINED = "_ZN7fastpad4cuda21pipelined_conv_kernelIN3c108BFloat16ELi64ELi64ELi2EEEvNS_12ConvGeometryE"
PIPELINED_TF32 = PIPELINED.replace("IN3c108BFloat16E", "If")
WEIGHT_GRAD = "_ZN7fastpad4cuda28pipelined_weight_grad_kernelIN3c104HalfEEEvNS_12ConvGeometryE"
WEIGHT_GRAD_TF32 = WEIGHT_GRAD.replace("IN3c104HalfE", "If")
GEMM = "_ZN7fastpad4cuda15fma_gemm_kernelINS0_11ConvProblemIfEEEEvT_"
VECTORS = "_ZN7fastpad4cuda24depthwise_vectors_kernelIfLb0EEEvNS_12ConvGeometryENS0_19DepthwiseVectorPlanE"
TRANSPOSE_VECTORS = VECTORS.replace("IfLb0EE", "IfLb1EE")
GRAD_VECTORS = ("_ZN7fastpad4cuda39_GLOBAL__N__c9f59437_7_conv_cu_2e618b3236depthwise_weight_grad_vectors_kernelIfEEvNS_"
                "12ConvGeometryE")


def ptxas_log(spill_stores=0, spill_loads=0):
    return "\n".join([
        f"ptxas info    : Compiling entry function '{GEMM}' for 'sm_90'",
        f"ptxas info    : Function properties for {GEMM}",
        f"    8 bytes stack frame, {spill_stores} bytes spill stores, {spill_loads} bytes spill loads",
        "ptxas info    : Used 96 registers, used 1 barriers, 8192 bytes smem",
        f"ptxas info    : Compiling entry function '{PIPELINED}' for 'sm_90'",
        f"ptxas info    : Function properties for {PIPELINED}",
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads",
        "ptxas info    : Used 99 registers, used 1 barriers",
    ])


FULL_PTX = f""".visible .entry {GEMM}(
  ld.global.f32 %f1, [%rd1];
}}
.visible .entry {PIPELINED}(
  cp.async.cg.shared.global [%r10], [%rd20], 16, %r11;
  cp.async.commit_group;
  cp.async.wait_group 2;
  ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{%r1, %r2, %r3, %r4}}, [%r5];
  mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {{%f1, %f2, %f3, %f4}}, {{%r1, %r2, %r3, %r4}}, {{%r6, %r7}},
    {{%f1, %f2, %f3, %f4}};
}}
.visible .entry {PIPELINED_TF32}(
  cp.async.cg.shared.global [%r10], [%rd20], 16, %r11;
  cp.async.commit_group;
  cp.async.wait_group 2;
  ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{%r1, %r2, %r3, %r4}}, [%r5];
  cvt.rna.tf32.f32 %r8, %f9;
  mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {{%f1, %f2, %f3, %f4}}, {{%r8, %r2, %r3, %r4}}, {{%r6, %r7}},
    {{%f1, %f2, %f3, %f4}};
}}
.visible .entry {WEIGHT_GRAD}(
  cp.async.cg.shared.global [%r60], [%rd60], 16, %r61;
  cp.async.wait_group 2;
  ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{%r62, %r63, %r64, %r65}}, [%r66];
  mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {{%f1, %f2, %f3, %f4}}, {{%r62, %r63, %r64, %r65}}, {{%r6, %r7}},
    {{%f1, %f2, %f3, %f4}};
}}
.visible .entry {WEIGHT_GRAD_TF32}(
  cp.async.cg.shared.global [%r70], [%rd70], 16, %r71;
  cp.async.wait_group 2;
  cvt.rna.tf32.f32 %r72, %f70;
  mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {{%f1, %f2, %f3, %f4}}, {{%r72, %r2, %r3, %r4}}, {{%r6, %r7}},
    {{%f1, %f2, %f3, %f4}};
}}
.entry {VECTORS}(
  ld.global.nc.v4.b32 {{%r20, %r21, %r22, %r23}}, [%rd31];
  st.global.v4.b32 [%rd32], {{%r23, %r24, %r25, %r26}};
}}
.entry {TRANSPOSE_VECTORS}(
  ld.global.nc.v4.b32 {{%r47, %r48, %r49, %r50}}, [%rd51];
  st.global.v4.b32 [%rd52], {{%r51, %r52, %r53, %r54}};
}}
.entry {GRAD_VECTORS}(
  ld.global.v4.u32 {{%r80, %r81, %r82, %r83}}, [%rd80];
}}
"""


def run(tmp_path, log, ptx):
    (tmp_path / "conv.log").write_text(log)
    (tmp_path / "conv.ptx").write_text(ptx)
    return report.main(["--ptx", str(tmp_path / "conv.ptx"), str(tmp_path / "conv.log")])


def test_parses_registers_spills_and_shared_memory():
    gemm, pipelined = report.parse_ptxas(ptxas_log(4, 8))
    assert (gemm.arch, gemm.registers, gemm.spill_stores, gemm.spill_loads, gemm.stack_frame, gemm.static_shared) == (
        "sm_90", 96, 4, 8, 8, 8192)
    assert (pipelined.registers, pipelined.spill_stores, pipelined.static_shared) == (99, 0, 0)


def test_a_clean_build_passes(tmp_path, capsys):
    assert run(tmp_path, ptxas_log(), FULL_PTX) == 0
    assert "pipelined_conv_kernel<BFloat16, 64, 64, 2>" in capsys.readouterr().out


@pytest.mark.parametrize("stores, loads", [(4, 0), (0, 4)])
def test_a_spill_fails(tmp_path, capsys, stores, loads):
    assert run(tmp_path, ptxas_log(stores, loads), FULL_PTX) == 1
    assert "spills" in capsys.readouterr().err


@pytest.mark.parametrize("instruction", ["cp.async.cg.shared.global [%r10]", "cp.async.wait_group 2", "ldmatrix.sync",
                                         "mma.sync", "[%rd31]", "st.global.v4.b32 [%rd32]", "[%rd51]", "[%rd52]",
                                         "cvt.rna.tf32", "m16n8k8", "[%r60]", "x4.trans", "[%r70]",
                                         "%r72, %f70", "[%rd80]"])
def test_a_kernel_without_its_instructions_fails(tmp_path, capsys, instruction):
    ptx = "\n".join(line for line in FULL_PTX.splitlines() if instruction not in line)
    assert run(tmp_path, ptxas_log(), ptx) == 1
    assert "in its PTX" in capsys.readouterr().err


def test_a_float32_pipelined_kernel_on_16_bit_mma_fails(tmp_path):
    """The float32 instance must multiply on the TF32 tensor cores."""
    ptx = FULL_PTX.replace("m16n8k8.row.col.f32.tf32.tf32", "m16n8k16.row.col.f32.bf16.bf16")
    assert run(tmp_path, ptxas_log(), ptx) == 1


def test_a_copy_without_zero_fill_fails(tmp_path):
    """cp.async without the source-size operand cannot zero-fill the padding."""
    ptx = FULL_PTX.replace("[%rd20], 16, %r11;", "[%rd20], 16;")
    assert run(tmp_path, ptxas_log(), ptx) == 1


@pytest.mark.parametrize("family", ["pipelined_conv_kernel", "pipelined_conv_kernelIf", "pipelined_weight_grad_kernelIN",
                                    "pipelined_weight_grad_kernelIf", "depthwise_vectors_kernel",
                                    "depthwise_weight_grad_vectors_kernel"])
def test_no_kernels_fails(tmp_path, family):
    assert run(tmp_path, "", FULL_PTX) == 1
    assert run(tmp_path, ptxas_log(), FULL_PTX.replace(family, "other_kernel")) == 1
