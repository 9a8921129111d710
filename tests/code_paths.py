"""Calls shaped to reach each CPU kernel path, forward and backward, with bitwise comparison helpers: shared by
tests/test_determinism.py, tests/test_concurrency.py and tests/test_kernel_paths.py (which asserts, through the
private path ops, that each call reaches the kernels it names)."""

import contextlib
import os
from dataclasses import dataclass, replace
from typing import Optional

import pytest
import torch

from fastpad.bench.op_calls import RecordFastpadOps
from fastpad.cases import ConvCase, arrange, dtype_name
from fastpad.reference import output_and_grads
from reference import expected_conv, expected_conv_transpose, poison


@dataclass(frozen=True)
class CodePath:
    """A public-API call (a case of fastpad/cases.py) shaped so that the CPU dispatch sends it down one kernel path,
    and the CPU kernel path (kernel_paths.h) of each op its forward and backward run, e.g. ("conv", "cpu_tap_gemms").
    The backward runs the other two ops: the input gradient (conv_transpose for a conv, conv for a transposed conv)
    and conv_weight_grad."""
    case: ConvCase
    kernels: tuple
    # FASTPAD_CPU_ISA during the calls (None: left as it is). The GEMM kernels serve CPUs without AVX2 (and float64),
    # so the calls that name them run capped at the baseline; the blocked kernels' calls run at their own ISA.
    isa: Optional[str] = "baseline"

    @property
    def result_ops(self):
        """The op computing each result of run_forward_backward (the bias gradient is a plain sum)."""
        if self.case.transposed:
            return ("conv_transpose", "conv (input grad)", "conv_weight_grad", "sum (bias grad)")
        return ("conv", "conv_transpose (input grad)", "conv_weight_grad", "sum (bias grad)")

    def fastpad_call(self, x, w, b):
        return self.case.fastpad_function()(x, w, b)

    def reference_call(self, x, w, b):
        expected = expected_conv_transpose if self.case.transposed else expected_conv
        return expected(x, w, b, **self.case.kwargs())

    def inputs(self, dtype, device="cpu", batch=2):
        """Fresh random (x, w, b, grad_output), x and grad_output in the case's layout (so the backward kernels see
        that layout too)."""
        case = replace(self.case, batch=batch, dtype=dtype_name(dtype))
        x, w, b = case.random_inputs(device=device)
        with torch.no_grad():
            output_shape = self.reference_call(x, w, b).shape
        return x, w, b, arrange(torch.randn(output_shape, dtype=dtype, device=device), case.layout)


def _path(transposed, size, in_channels, out_channels, kernel, kernels, channels_last=False, isa="baseline",
          **arguments):
    """A CodePath of a case with this shape (`arguments`: further ConvCase fields), float32 unless asked."""
    layout = "channels_last" if channels_last else "contiguous"
    case = ConvCase(transposed, size, in_channels, out_channels, kernel, layout=layout, **arguments)
    return CodePath(case, kernels, isa)


ISA_ORDER = ("baseline", "avx2", "avx512", "avx512_bf16")


def machine_isa():
    """The widest vector ISA fastpad's CPU kernels use on this machine, without any FASTPAD_CPU_ISA cap."""
    with cpu_isa_limit(None):
        return torch.ops.fastpad._cpu_isa()


def tiles_isas():
    """The ISAs to run depthwise.cpp's channels-last tiles at: AVX2 (at::vec's vectors) and this CPU's own, which on
    AVX-512 takes the AVX-512 tiles (each at most this CPU's)."""
    return sorted({min(machine_isa(), "avx2", key=ISA_ORDER.index), machine_isa()}, key=ISA_ORDER.index)


def tiles_kernel(path, isa=None, dtype=torch.float32, channels=16, weight_grad=False):
    """A path that runs depthwise.cpp's channels-last register tiles (cpu_depthwise channels-last,
    cpu_depthwise_channel_blocks on small planes, cpu_grouped_expanded, cpu_depthwise_phases; the channels-last
    depthwise weight gradient's sums where weight_grad) as the ISA (None: the current FASTPAD_CPU_ISA) names it: on
    AVX-512 its _avx512 twin with float accumulation and 16 channels or more, or in float32 with 9-15 channels, one
    masked vector (kernel_paths.h's cpu_nhwc_tiles_avx512_masked: channels-last convs only, not the weight
    gradient's sums nor NCHW's channel blocks)."""
    isa = isa or torch.ops.fastpad._cpu_isa()
    masked = (dtype == torch.float32 and 9 <= channels < 16 and not weight_grad
              and path != "cpu_depthwise_channel_blocks")
    wide = (ISA_ORDER.index(isa) >= ISA_ORDER.index("avx512") and dtype != torch.float64
            and (channels >= 16 or masked))
    return f"{path}_avx512" if wide else path


def nhwc_tiles_slide(kernel_w, stride_w, dilation_w, groups=False):
    """Whether depthwise.cpp's channels-last tiles slide along the row (kernel_paths.h's cpu_nhwc_tiles_slide): each
    tile, interior or border, loads each input vector once for all the taps that read it. One input channel per
    output channel, dilation 1, stride 1 or 2, 2 to 7 taps along the row. The sums are the same as the tiles' that
    load an input per multiply-add, so only this rule tells them apart."""
    return not groups and dilation_w == 1 and stride_w <= 2 and 2 <= kernel_w <= 7


def strided_planes_or(path, dtype, channels):
    """`path`, or cpu_depthwise_strided_planes where a channels-last depthwise problem has fewer output-side channels
    (`channels`) than a 32-byte vector of its accumulation type (kernel_paths.h's cpu_depthwise_strided_planes: 8 in
    float32 and bfloat16, 4 in float64), which runs the NCHW kernels over the channels-last tensors."""
    accumulation_bytes = 8 if dtype == torch.float64 else 4
    return "cpu_depthwise_strided_planes" if channels * accumulation_bytes < 32 else path


def reduction_tiles_kernel(path, dtype):
    """A GEMM path (cpu_phase_planes of conv_transpose and conv_weight_grad, cpu_channels_last_gemm) as the current
    FASTPAD_CPU_ISA names it: its GEMMs on the reduction tiles of the ISA (path_avx2, path_avx512) for float
    accumulation, else (float64, or a CPU without AVX2) on torch's GEMM."""
    isa = torch.ops.fastpad._cpu_isa()
    if isa == "baseline" or dtype == torch.float64:
        return path
    return f"{path}_{'avx2' if isa == 'avx2' else 'avx512'}"


def dense_kernel(dtype):
    """The CPU kernel of an NCHW dense conv with 16 or more input channels, under the current FASTPAD_CPU_ISA: the
    blocked kernel of the ISA for float accumulation, else (float64, or a CPU without AVX2) the tap GEMMs."""
    isa = torch.ops.fastpad._cpu_isa()
    if isa == "baseline" or dtype == torch.float64:
        return "cpu_tap_gemms"
    return "cpu_blocked_avx512_bf16" if isa == "avx512_bf16" and dtype == torch.bfloat16 else \
        f"cpu_blocked_{isa.replace('_bf16', '')}"


def nchw_unblocked_kernel(dtype, in_channels_per_group):
    """The CPU kernel of an NCHW conv the blocked kernel does not take (a 1x1 kernel, or a stem with a reduction under
    128), under the current FASTPAD_CPU_ISA: the tap tiles of the ISA for float accumulation, else (float64, or a CPU
    without AVX2) torch's tap GEMMs with 16 input channels per group or more, its column GEMM with fewer."""
    isa = torch.ops.fastpad._cpu_isa()
    if isa == "baseline" or dtype == torch.float64:
        return "cpu_tap_gemms" if in_channels_per_group >= 16 else "cpu_column_gemm"
    return f"cpu_tap_tiles_{'avx2' if isa == 'avx2' else 'avx512'}"


@contextlib.contextmanager
def cpu_isa_limit(isa):
    """FASTPAD_CPU_ISA=isa (None: unset) for the duration, restored after."""
    saved = os.environ.get("FASTPAD_CPU_ISA")
    if isa is None:
        os.environ.pop("FASTPAD_CPU_ISA", None)
    else:
        os.environ["FASTPAD_CPU_ISA"] = isa
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("FASTPAD_CPU_ISA", None)
        else:
            os.environ["FASTPAD_CPU_ISA"] = saved


@contextlib.contextmanager
def intra_op_threads(count):
    """torch.set_num_threads(count) for the duration, the previous count restored after."""
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def require_isa(isa):
    """Skips the test where this CPU lacks `isa` (its calls would reach another kernel)."""
    if ISA_ORDER.index(isa) > ISA_ORDER.index(machine_isa()):
        pytest.skip(f"this CPU lacks {isa} (it has {machine_isa()})")


def skip_unless_isa(path):
    """Skips a test of a path whose ISA this CPU lacks."""
    if path.isa:
        require_isa(path.isa)


# Each call names the CPU kernel path (kernel_paths.h) of the forward op, the input gradient's op and the weight
# gradient's op; tests/test_kernel_paths.py checks that the calls reach them.
def _kernels(conv, conv_transpose, conv_weight_grad):
    return (("conv", conv), ("conv_transpose", conv_transpose), ("conv_weight_grad", conv_weight_grad))


DEPTHWISE = _kernels("cpu_depthwise", "cpu_depthwise", "cpu_depthwise")
# NCHW depthwise convs with multiplier 1 whose taps read several column phases (here a stride of 2) run on channel
# blocks transposed to channels-last, and so do their weight gradients (float accumulation, output rows of at most
# 512); their strided input gradient stays with the depthwise kernel.
DEPTHWISE_CHANNEL_BLOCKS = _kernels("cpu_depthwise_channel_blocks", "cpu_depthwise", "cpu_depthwise_channel_blocks")
TORCH = _kernels("cpu_torch", "cpu_torch", "cpu_phase_planes")  # the weight gradient stays with fastpad
CODE_PATHS = {
    # Zero pads that torch's symmetric padding expresses ((1, 1) here) go to torch's own convolution in NCHW, except
    # depthwise, below 2^24 multiply-adds (2^24.4 and 2^24.3 here) and for strided 1x1 kernels; the transposed 'same'
    # k4 s2 crops (1, 1), which torch's crop expresses too, but with 16 channels on both sides and 256 positions a
    # strided transposed conv keeps fastpad's phase planes. Channels-last stays.
    "2d_dense_symmetric_zeros": _path(False, (64, 65), 32, 32, 3, kernels=TORCH),  # 2 x 32 x 64 x 65 x 32 x 9 MACs
    "2d_dense_channels_last_symmetric_zeros": _path(False, (12, 13), 16, 24, 3, channels_last=True,
                                                    kernels=_kernels("cpu_channels_last_phase_planes",
                                                                     "cpu_gemm_col2im", "cpu_channels_last_gemm")),
    # NCHW depthwise at stride 1 on rows of 13 (past the channel blocks' 8 at this ISA): the conv's own kernel; its
    # input gradient as the one conv it is, on the channel blocks' phases.
    "2d_depthwise_symmetric_zeros": _path(False, (12, 13), 16, 16, 3, groups=16,
                                          kernels=_kernels("cpu_depthwise", "cpu_depthwise_channel_block_phases",
                                                           "cpu_depthwise_channel_blocks")),
    # Channels-last with 2 input and 2 output channels per group: the depthwise kernel's rows expanded per group, and
    # for the input gradient at stride 2 (rows of 21, too short for the stride phases) its scatter over x pixels
    # expanded per group.
    "2d_grouped_two_channels_channels_last_reflect_s2": _path(False, (20, 21), 16, 16, 3, groups=8, stride=2,
                                                              channels_last=True, padding_mode="reflect",
                                                              kernels=_kernels("cpu_grouped_expanded",
                                                                               "cpu_grouped_expanded",
                                                                               "cpu_tap_dots")),
    "1d_transposed_symmetric_crop": _path(True, (20_000,), 16, 8, 4, stride=2, kernels=TORCH),
    "1d_transposed_strided_symmetric_crop": _path(True, (300,), 16, 16, 4, stride=2,
                                                  kernels=_kernels("cpu_tap_gemms", "cpu_phase_planes",
                                                                   "cpu_phase_planes")),
    "1d_depthwise_x2_causal_dilated": _path(False, (37,), 8, 16, 4, groups=8, padding="causal", dilation=2,
                                            kernels=DEPTHWISE),
    "1d_dense_reflect_s2": _path(False, (64,), 16, 24, 7, stride=2, padding_mode="reflect",
                                 kernels=_kernels("cpu_tap_gemms", "cpu_gemm_col2im", "cpu_phase_planes")),
    "2d_depthwise_reflect_s2": _path(False, (17, 19), 8, 8, 3, groups=8, stride=2, padding_mode="reflect",
                                     kernels=DEPTHWISE_CHANNEL_BLOCKS),
    # At stride 1 in zeros mode the input gradient is one conv (the taps flipped), on the channel blocks where the
    # conv would be: rows of at most 8 at any ISA, of up to 48 on AVX-512's tiles.
    "2d_depthwise_short_rows": _path(False, (7, 6), 8, 8, 3, groups=8,
                                     kernels=_kernels("cpu_depthwise_channel_blocks", "cpu_depthwise_channel_blocks",
                                                      "cpu_depthwise_channel_blocks")),
    "2d_depthwise_s1_rows_avx512": _path(False, (14, 14), 32, 32, 5, groups=32, isa="avx512",
                                         kernels=_kernels("cpu_depthwise_channel_blocks_avx512",
                                                          "cpu_depthwise_channel_blocks_avx512",
                                                          "cpu_depthwise_channel_blocks_avx512")),
    # Under 20 taps (3x3 here) a channels-last depthwise input gradient in another mode than zeros keeps the scatter.
    "2d_depthwise_channels_last_circular": _path(False, (15, 16), 16, 16, 3, groups=16, padding_mode="circular",
                                                 channels_last=True, kernels=DEPTHWISE),
    # In zeros mode the channels-last depthwise input gradient (and transposed conv) runs as its stride phases' convs
    # on the channels-last tiles: a y row of 52 at stride 2 has 26 positions of each column phase.
    "2d_depthwise_channels_last_s2": _path(False, (50, 52), 16, 16, 3, groups=16, stride=2, channels_last=True,
                                           kernels=_kernels("cpu_depthwise", "cpu_depthwise_phases", "cpu_depthwise")),
    # Under a 32-byte vector of channels (7 float32 channels), the three ops of a channels-last depthwise conv run the
    # NCHW kernels over the channels-last tensors, pixels 7 apart.
    "2d_depthwise_channels_last_few_channels": _path(False, (17, 19), 7, 7, 5, groups=7, stride=2, channels_last=True,
                                                     padding_mode="reflect",
                                                     kernels=_kernels("cpu_depthwise_strided_planes",
                                                                      "cpu_depthwise_strided_planes",
                                                                      "cpu_depthwise_strided_planes")),
    "2d_transposed_depthwise_channels_last": _path(True, (11, 12), 16, 16, 3, groups=16, channels_last=True,
                                                   kernels=_kernels("cpu_depthwise", "cpu_depthwise_phases",
                                                                    "cpu_depthwise")),
    # With a multiplier, the channels-last depthwise input gradient's phase convs reduce over x rows expanded per
    # thread, and so does the weight gradient where the output rows hold 28 positions or more (30 here).
    "2d_depthwise_x2_channels_last": _path(False, (12, 30), 8, 16, 3, groups=8, channels_last=True,
                                           kernels=_kernels("cpu_depthwise", "cpu_depthwise_phases", "cpu_depthwise")),
    "2d_dense_replicate": _path(False, (20, 20), 16, 16, 3, padding_mode="replicate",
                                kernels=_kernels("cpu_tap_gemms", "cpu_phase_planes", "cpu_phase_planes")),
    "2d_stem_s2": _path(False, (21, 22), 3, 16, 3, stride=2,
                        kernels=_kernels("cpu_column_gemm", "cpu_gemm_col2im", "cpu_phase_planes")),
    "2d_dense_channels_last_s2": _path(False, (18, 17), 16, 24, 3, stride=2, channels_last=True,
                                       kernels=_kernels("cpu_channels_last_phase_planes", "cpu_gemm_col2im",
                                                        "cpu_channels_last_gemm")),
    # Grouped channels-last weight gradients run the NCHW kernels on NCHW copies, except with under 64 output
    # positions per image (42 here).
    "2d_grouped_channels_last_reflect": _path(False, (13, 14), 32, 32, 3, groups=2, padding_mode="reflect",
                                              channels_last=True,
                                              kernels=_kernels("cpu_channels_last_im2col", "cpu_gemm_col2im",
                                                               "cpu_phase_planes")),
    "2d_grouped_channels_last_few_positions": _path(False, (6, 7), 32, 32, 3, groups=2, channels_last=True,
                                                    kernels=_kernels("cpu_channels_last_im2col", "cpu_gemm_col2im",
                                                                     "cpu_channels_last_gemm")),
    "2d_stem_channels_last_circular": _path(False, (19, 20), 3, 16, 3, stride=2, padding_mode="circular",
                                            channels_last=True,
                                            kernels=_kernels("cpu_channels_last_direct", "cpu_gemm_col2im",
                                                             "cpu_channels_last_gemm")),
    "3d_dense_replicate": _path(False, (6, 7, 8), 16, 16, 3, padding_mode="replicate",
                                kernels=_kernels("cpu_tap_gemms", "cpu_gemm_col2im", "cpu_phase_planes")),
    "3d_grouped_channels_last": _path(False, (5, 6, 7), 32, 32, 4, groups=2, channels_last=True,
                                      kernels=_kernels("cpu_channels_last_im2col", "cpu_gemm_col2im",
                                                       "cpu_phase_planes")),
    "1d_transposed_s4": _path(True, (24,), 16, 8, 7, stride=4,
                              kernels=_kernels("cpu_column_gemm", "cpu_gemm_col2im", "cpu_phase_planes")),
    "2d_transposed_phase_planes": _path(True, (16, 16), 16, 16, 5, stride=2,
                                        kernels=_kernels("cpu_tap_gemms", "cpu_phase_planes", "cpu_phase_planes")),
    "2d_transposed_channels_last": _path(True, (9, 10), 8, 12, 3, stride=2, channels_last=True,
                                         kernels=_kernels("cpu_channels_last_direct", "cpu_gemm_col2im",
                                                          "cpu_channels_last_gemm")),
    # The input gradient of a stride-2 transposed conv is a stride-2 conv; in zeros mode the transposed conv itself
    # runs as its stride phases' convs on the channel blocks (4 taps per phase).
    "2d_transposed_depthwise": _path(True, (9, 9), 8, 8, 4, groups=8, stride=2,
                                     kernels=_kernels("cpu_depthwise_channel_blocks",
                                                      "cpu_depthwise_channel_block_phases",
                                                      "cpu_depthwise_channel_blocks")),
    # NCHW grouped with 4 input and 2 output channels per group: the forward sums each output plane over its group's
    # input planes in depthwise.cpp's NCHW kernel, the input gradient (4 y and 2 x channels per group) each y plane
    # over its group's x channels, the weight gradient is its tap dots.
    "2d_grouped_two_x_channels_reflect_s2": _path(False, (17, 18), 12, 6, 3, groups=3, stride=2,
                                                  padding_mode="reflect",
                                                  kernels=_kernels("cpu_grouped_planes", "cpu_grouped_planes",
                                                                   "cpu_tap_dots")),
    "3d_transposed": _path(True, (4, 5, 6), 4, 6, 3, stride=2,
                           kernels=_kernels("cpu_column_gemm", "cpu_gemm_col2im", "cpu_tap_dots")),
}
# The register-blocked kernels (float accumulation; kernel_paths.h's cpu_blocked_direct) at each ISA: NCHW with 'same'
# stride-2 pads (0, 1), channels-last grouped reflect with a partial last block of output channels (40 per group),
# 3-d, a transposed conv whose input gradient is the blocked conv, and a conv whose input gradient (stride 1, zeros)
# is one too; the stride-1 reflect and circular convs' input gradients are the full transposed conv on the blocked
# kernel, folded.
for _isa in ("avx2", "avx512"):
    _blocked, _folded = f"cpu_blocked_{_isa}", f"cpu_blocked_folded_{_isa}"
    # The phase planes' GEMMs (conv_transpose's, conv_weight_grad's) on the ISA's reduction tiles.
    _planes_tiles = f"cpu_phase_planes_{_isa}"
    CODE_PATHS.update({
        f"2d_dense_same_s2_{_isa}": _path(False, (21, 20), 32, 24, 3, stride=2, padding="same", isa=_isa,
                                          kernels=_kernels(_blocked, f"cpu_gemm_col2im_{_isa}", _planes_tiles)),
        f"2d_grouped_channels_last_reflect_{_isa}": _path(False, (13, 14), 32, 80, 3, groups=2, padding_mode="reflect",
                                                          channels_last=True, isa=_isa,
                                                          kernels=_kernels(_blocked, _folded, _planes_tiles)),
        f"3d_dense_circular_{_isa}": _path(False, (5, 6, 7), 16, 17, 3, padding_mode="circular", isa=_isa,
                                           kernels=_kernels(_blocked, _folded, _planes_tiles)),
        f"2d_transposed_{_isa}": _path(True, (16, 16), 16, 16, 5, stride=2, isa=_isa,
                                       kernels=_kernels(_blocked, _planes_tiles, _planes_tiles)),
        # Channels-last dense: the weight gradient's im2col GEMMs on the reduction tiles (a reduction of 24 x 9 = 216,
        # padded to 224 columns; 40 output channels, a last tile of 4 rows).
        f"2d_dense_channels_last_reflect_{_isa}": _path(False, (13, 14), 24, 40, 3, padding_mode="reflect",
                                                        channels_last=True, isa=_isa,
                                                        kernels=_kernels(_blocked, _folded,
                                                                         f"cpu_channels_last_gemm_{_isa}")),
        # k4 'same' pads (1, 2): the input gradient, a stride-1 transposed conv with zeros, is the blocked conv too.
        f"2d_dense_k4_same_{_isa}": _path(False, (12, 13), 16, 24, 4, isa=_isa,
                                          kernels=_kernels(_blocked, _blocked, _planes_tiles)),
        # Fewer than 16 input channels per group: channels-last with a reduction of 8 or more (4 x 9 here, its input
        # gradient folded, at 2^20 multiply-adds or more; the channels-last depthwise x3 conv's input gradient, 3 x 9,
        # whose 4 y channels are too few for the depthwise phases' tiles, while the conv itself is the depthwise
        # kernel's, with expanded rows), and NCHW grouped (4 and, for the input
        # gradient, 5 channels per group). Their weight gradients take NCHW copies: with at most 12 output channels
        # per group the NCHW depthwise kernel's tap dots over several input channels per group, and that kernel
        # itself for the multiplier 3. With 5 output channels per group over rows of 30-40, the convs themselves
        # take the tap tiles (on AVX2, the channels-last one keeps the blocked kernel: 5 of 8 lanes), and so do their
        # stride-1 input gradients, to 4 y channels per group (cpu_tap_tiles_transpose; in reflect the full transposed
        # conv, then folded).
        f"2d_grouped_few_channels_channels_last_reflect_{_isa}": _path(
            False, (28, 30), 16, 20, 3, groups=4, padding_mode="reflect", channels_last=True, isa=_isa,
            kernels=_kernels(_blocked if _isa == "avx2" else "cpu_tap_tiles_avx512", f"cpu_tap_tiles_folded_{_isa}",
                             "cpu_tap_dots")),
        # A channels-last depthwise conv with a multiplier of 3, to 12 channels: on AVX-512 one masked vector of the
        # tiles (cpu_nhwc_tiles_avx512_masked); its weight gradient's sums stay at AVX2's vectors.
        f"2d_depthwise_x3_channels_last_{_isa}": _path(False, (12, 13), 4, 12, 3, groups=4, channels_last=True,
                                                       isa=_isa,
                                                       kernels=_kernels(tiles_kernel("cpu_depthwise", _isa,
                                                                                     channels=12),
                                                                        _blocked, "cpu_depthwise")),
        # (28 outputs, under kernel_paths.h's kGroupedPlanesMinOutputs: the forward stays on the tap tiles.)
        f"1d_grouped_few_channels_causal_{_isa}": _path(False, (28,), 12, 15, 5, groups=3, padding="causal", isa=_isa,
                                                        kernels=_kernels(f"cpu_tap_tiles_{_isa}",
                                                                         f"cpu_tap_tiles_{_isa}", "cpu_tap_dots")),
        # Strided transposed convs with fewer than 16 x channels per group and 2^18 multiply-adds per phase run one
        # blocked conv per stride phase: in zeros (6 x channels, 4 phases of 4 taps; crops torch's cannot express),
        # and in reflect for a stride-2 conv's input gradient (10 x channels, 4 phases of about 2 taps). The first's
        # input gradient, a stride-2 conv to 6 channels over 70 wide rows, takes the tap tiles on AVX-512 (6 of 16
        # lanes), the blocked kernel on AVX2 (6 of 8).
        f"2d_transposed_few_channels_s2_{_isa}": _path(True, (64, 70), 6, 20, 4, stride=2, padding=((1, 2), (1, 2)),
                                                       isa=_isa,
                                                       kernels=_kernels(_blocked if _isa == "avx2"
                                                                        else "cpu_tap_tiles_avx512",
                                                                        _blocked, "cpu_tap_dots")),
        f"2d_reflect_s2_few_output_channels_{_isa}": _path(False, (120, 130), 32, 10, 3, stride=2,
                                                           padding_mode="reflect", isa=_isa,
                                                           kernels=_kernels(_blocked, _folded, "cpu_tap_dots")),
        # Convs to a few output channels per group on rows wide enough (kernel_paths.h's cpu_tap_tiles): the tap
        # GEMMs summed on the reduction tiles, vectors along the output positions; NCHW 2-d reflect to 5 channels,
        # 3-d grouped replicate to 4 per group, and channels-last reflect to 4 (its planes gathered a run of channels
        # per pixel at a time). Their input gradients are the blocked kernel's folded transposed convs.
        f"2d_few_output_channels_reflect_{_isa}": _path(False, (30, 31), 32, 5, 3, padding_mode="reflect", isa=_isa,
                                                        kernels=_kernels(f"cpu_tap_tiles_{_isa}", _folded,
                                                                         "cpu_tap_dots")),
        f"3d_grouped_few_output_channels_replicate_{_isa}": _path(False, (4, 5, 30), 64, 8, 3, groups=2,
                                                                  padding_mode="replicate", isa=_isa,
                                                                  kernels=_kernels(f"cpu_tap_tiles_{_isa}", _folded,
                                                                                   "cpu_tap_dots")),
        f"2d_few_output_channels_channels_last_reflect_{_isa}": _path(
            False, (30, 31), 32, 4, 3, padding_mode="reflect", channels_last=True, isa=_isa,
            kernels=_kernels(f"cpu_tap_tiles_{_isa}", _folded, f"cpu_channels_last_gemm_{_isa}")),
    })
# On AVX-512, the channels-last register tiles of depthwise.cpp run 16-float vectors where a row has 16 channels or more
# (40 here: vectors at 0, 16 and 24, the last ending at C): the channels-last depthwise conv, its input gradient as
# stride phases (a y row of 52 at stride 2) and its weight gradient, the same with a multiplier of 2 (20 y channels),
# NCHW channel blocks (of 16 channels; 40 = two whole blocks and one that ends at C), and grouped convs over expanded
# rows (2 x 2 channels per group, 32 output channels).
CODE_PATHS.update({
    "2d_depthwise_channels_last_s2_avx512": _path(False, (50, 52), 40, 40, 3, groups=40, stride=2, channels_last=True,
                                                  isa="avx512",
                                                  kernels=_kernels("cpu_depthwise_avx512",
                                                                   "cpu_depthwise_phases_avx512",
                                                                   "cpu_depthwise_avx512")),
    "2d_depthwise_x2_channels_last_avx512": _path(False, (12, 30), 20, 40, 3, groups=20, channels_last=True,
                                                  isa="avx512",
                                                  kernels=_kernels("cpu_depthwise_avx512",
                                                                   "cpu_depthwise_phases_avx512",
                                                                   "cpu_depthwise_avx512")),
    "2d_depthwise_s2_zeros_avx512": _path(False, (14, 14), 48, 48, 5, groups=48, stride=2, isa="avx512",
                                          kernels=_kernels("cpu_depthwise_channel_blocks_avx512",
                                                           "cpu_depthwise_channel_block_phases_avx512",
                                                           "cpu_depthwise_channel_blocks_avx512")),
    "2d_depthwise_reflect_s2_avx512": _path(False, (17, 19), 40, 40, 3, groups=40, stride=2, padding_mode="reflect",
                                            isa="avx512",
                                            kernels=_kernels("cpu_depthwise_channel_blocks_avx512", "cpu_depthwise",
                                                             "cpu_depthwise_channel_blocks_avx512")),
    # ... and at stride 1 its input gradient runs as the grouped conv its stride phase is (the forward's expanded rows),
    # over the full transposed conv, then folded.
    "2d_grouped_two_channels_channels_last_reflect_avx512": _path(False, (20, 21), 32, 32, 3, groups=16,
                                                                  channels_last=True, padding_mode="reflect",
                                                                  isa="avx512",
                                                                  kernels=_kernels("cpu_grouped_expanded_avx512",
                                                                                   "cpu_depthwise_phases_folded_avx512",
                                                                                   "cpu_tap_dots")),
})
# A channels-last depthwise conv with a multiplier of 2 in reflect mode: its input gradient (2 x channels per y
# channel) runs the depthwise phases over the full transposed conv, then folded, on AVX2's tiles and on AVX-512's.
for isa in ("avx2", "avx512"):
    CODE_PATHS[f"2d_depthwise_x2_channels_last_reflect_{isa}"] = _path(
        False, (12, 30), 20, 40, 3, groups=20, channels_last=True, padding_mode="reflect", isa=isa,
        kernels=_kernels(tiles_kernel("cpu_depthwise", isa, channels=40),
                         tiles_kernel("cpu_depthwise_phases_folded", isa, channels=20),
                         tiles_kernel("cpu_depthwise", isa, channels=40, weight_grad=True)))
# A channels-last grouped conv with one output channel per group (3 input channels each, 24 in all; 8 output channels
# keep the forward's expanded rows on AVX2's vectors): its input gradient, one x and 3 y channels per group, runs as
# its stride phase's depthwise conv with multiplier 3, and its weight gradient is the depthwise one of the input
# against grad_output repeated per input channel, on AVX2's tiles and on AVX-512's.
for isa in ("avx2", "avx512"):
    CODE_PATHS[f"2d_grouped_one_output_channel_channels_last_{isa}"] = _path(
        False, (14, 30), 24, 8, 3, groups=8, channels_last=True, isa=isa,
        kernels=_kernels("cpu_grouped_expanded", tiles_kernel("cpu_depthwise_phases", isa, channels=24),
                         tiles_kernel("cpu_depthwise_repeated", isa, channels=24, weight_grad=True)))
# On AVX-512, strided transposed convs with 16 or more x and y channels per group in zeros mode run their stride
# phases on the blocked kernel too (k4 s2 here: 4 taps per phase, 2 x 1000 y positions per phase; crops that torch's
# transposed conv cannot express; 16 x channels, under the 24 from which NCHW k4 s2 takes the phase planes); the
# input gradient is a stride-2 conv with 32 channels.
CODE_PATHS["2d_transposed_wide_s2_avx512"] = _path(True, (32, 32), 16, 32, 4, stride=2, padding=((1, 2), (1, 2)),
                                                   isa="avx512",
                                                   kernels=_kernels("cpu_blocked_avx512", "cpu_blocked_avx512",
                                                                    "cpu_phase_planes_avx512"))
# A float32 channels-last conv whose padding no tap reads ('valid' here) runs the blocked kernel on the input in
# place, with no phase planes; so does a 1x1 conv's input gradient, a transposed 1x1 conv from 5 x channels whose one
# stride phase reads no padding.
for isa in ("avx2", "avx512"):
    # A float32 channels-last conv from 40 channels to 3 (k3 stride 2, reflect) runs the dot products along the input
    # channels (cpu/channel_dots.h); its input gradient, from those 3 x channels, the GEMM + col2im.
    CODE_PATHS[f"2d_channels_last_few_outputs_many_inputs_{isa}"] = _path(
        False, (9, 10), 40, 3, 3, stride=2, padding_mode="reflect", channels_last=True, isa=isa,
        kernels=_kernels(f"cpu_channel_dots_{isa}", f"cpu_gemm_col2im_{isa}", f"cpu_channels_last_gemm_{isa}"))
    # Its weight gradient is a GEMM over x in place (one tap; kernel_paths.h's cpu_weight_grad_taps).
    CODE_PATHS[f"2d_1x1_channels_last_few_output_channels_{isa}"] = _path(
        False, (11, 12), 58, 5, 1, padding="valid", channels_last=True, isa=isa,
        kernels=_kernels(f"cpu_blocked_no_planes_{isa}", f"cpu_blocked_no_planes_{isa}",
                         f"cpu_channels_last_taps_{isa}"))
    # An NCHW stride-2 conv to 24 channels from 48 (cols' rows of 48 x 25 >= 1024) over 16 x 16: its input gradient
    # (8 x 8 x positions, too few for the phase planes) runs the channels-last GEMM + col2im on channels-last copies.
    CODE_PATHS[f"2d_nchw_input_gradient_on_channels_last_gemm_{isa}"] = _path(
        False, (16, 16), 48, 24, 5, stride=2, isa=isa,
        kernels=_kernels(f"cpu_blocked_{isa}", f"cpu_gemm_col2im_nhwc_{isa}", f"cpu_phase_planes_{isa}"))
    # An NCHW stride-3 conv from 45 channels over 9 x 9 to 60: its input gradient (2 images of 3 x 3 x positions,
    # 45 x 49 y channels x taps per row of cols) runs the GEMM + col2im with a row of cols per x position.
    CODE_PATHS[f"2d_nchw_input_gradient_rows_{isa}"] = _path(
        False, (9, 9), 45, 60, 7, stride=3, padding_mode="reflect", isa=isa,
        kernels=_kernels(f"cpu_blocked_{isa}", f"cpu_gemm_col2im_rows_{isa}", f"cpu_phase_planes_rows_{isa}"))
    # An NCHW conv over 2 images of 6 x 6 positions to 40 channels: its weight gradient reduces 72 positions, at most
    # twice its output channels, and writes the gradient's rows in place (cpu_weight_grad_rows).
    CODE_PATHS[f"2d_nchw_weight_gradient_rows_{isa}"] = _path(
        False, (6, 6), 24, 40, 3, padding_mode="reflect", isa=isa,
        kernels=_kernels(f"cpu_blocked_{isa}", f"cpu_gemm_col2im_{isa}", f"cpu_phase_planes_rows_{isa}"))
    CODE_PATHS[f"2d_dense_channels_last_valid_s2_{isa}"] = _path(
        False, (12, 13), 16, 24, 3, stride=2, padding="valid", channels_last=True, isa=isa,
        kernels=_kernels(f"cpu_blocked_no_planes_{isa}", f"cpu_gemm_col2im_{isa}", f"cpu_channels_last_gemm_{isa}"))
# The bfloat16 dot-product kernel (AVX512_BF16), asserted in bfloat16 (the case's dtype; float32 calls at this ISA run
# AVX-512's float32 kernel): bfloat16 convs with an even number of input channels per group, NCHW and channels-last
# grouped; an odd number (17) keeps AVX-512's float32 kernel. Their input gradients take the col2im, its GEMM on
# AVX-512's reduction tiles (16-bit transposed convs in another mode than zeros are never folded).
CODE_PATHS.update({
    "2d_dense_same_s2_avx512_bf16": _path(False, (21, 20), 32, 24, 3, stride=2, padding="same", isa="avx512_bf16",
                                          dtype="bfloat16",
                                          kernels=_kernels("cpu_blocked_avx512_bf16", "cpu_gemm_col2im_avx512",
                                                           "cpu_phase_planes_avx512")),
    "2d_grouped_channels_last_reflect_avx512_bf16": _path(False, (13, 14), 32, 80, 3, groups=2,
                                                          padding_mode="reflect", channels_last=True,
                                                          isa="avx512_bf16", dtype="bfloat16",
                                                          kernels=_kernels("cpu_blocked_avx512_bf16",
                                                                           "cpu_gemm_col2im_avx512",
                                                                           "cpu_phase_planes_avx512")),
    "3d_odd_channels_circular_avx512_bf16": _path(False, (5, 6, 7), 17, 16, 3, padding_mode="circular",
                                                  isa="avx512_bf16", dtype="bfloat16",
                                                  kernels=_kernels("cpu_blocked_avx512", "cpu_gemm_col2im_avx512",
                                                                   "cpu_phase_planes_avx512")),
})
RESULT_NAMES = ("output", "input grad", "weight grad", "bias grad")
# The integer type of each float type's width, to compare bit patterns.
BITS = {torch.float64: torch.int64, torch.float32: torch.int32, torch.bfloat16: torch.int16}


def run_forward_backward(path, inputs, poison_outputs=False):
    """[output, input grad, weight grad, bias grad] of path's fastpad call, backpropagating the inputs' grad_output.
    poison_outputs: fill freed blocks of the results' sizes with NaN first, so unwritten elements show."""
    x, w, b, gy = inputs
    if poison_outputs:
        for tensor in (gy, x, w):
            poison(tensor.shape, tensor.dtype, tensor.device, blocks=2)
    with cpu_isa_limit(path.isa) if path.isa else contextlib.nullcontext():
        output, grads = output_and_grads(path.fastpad_call, [x, w, b], lambda _: gy)
    return [output, *grads]


def run_reference(path, inputs):
    """The float64 reference's [output, input grad, weight grad, bias grad] for the same inputs."""
    x, w, b, gy = (t.double() for t in inputs)
    output, grads = output_and_grads(path.reference_call, [x, w, b], lambda _: gy)
    return [output, *grads]


def bitwise_equal(actual, expected):
    """Same dtype, shape, values and bit patterns."""
    return (actual.dtype == expected.dtype and actual.shape == expected.shape and torch.equal(actual, expected)
            and torch.equal(actual.view(BITS[actual.dtype]), expected.view(BITS[expected.dtype])))


def assert_bitwise_equal(actual_results, expected_results, what):
    for name, actual, expected in zip(RESULT_NAMES, actual_results, expected_results):
        if bitwise_equal(actual, expected):
            continue
        if actual.shape != expected.shape:
            raise AssertionError(f"{what}: {name} shapes differ, {tuple(actual.shape)} vs {tuple(expected.shape)}")
        difference = (actual.double() - expected.double()).abs().max().item()
        raise AssertionError(f"{what}: {name} not bitwise identical (max |difference| {difference:.3g})")


def kernels_reached(path, inputs, backend="cpu"):
    """The set of (op, kernel path) that path's forward and backward reach on `backend`, asked of the private path
    ops with the arguments each op call received."""
    with RecordFastpadOps() as record:
        run_forward_backward(path, inputs)
    with cpu_isa_limit(path.isa) if path.isa else contextlib.nullcontext():
        return {(op, getattr(torch.ops.fastpad, f"_{op}_path")(*args, backend)) for op, args in record.calls}
