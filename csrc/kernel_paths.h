// The kernel choice, as data: one enum of kernel paths per op, and one function per op that picks the path from the
// problem (geometry, backend, layout, element size). The CPU ops, the CUDA bindings, the CUDA execution shim's tests
// and the private ops torch.ops.fastpad._{conv,conv_transpose,conv_weight_grad}_path all switch on these, so the
// choice is made here and nowhere else. Host code only; free of torch.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

#include "cpu/blocked_direct.h"
#include "cuda/problems.h"
#include "geometry.h"

namespace fastpad {

enum class Backend { Cpu, Cuda };

// The vector instruction set the CPU kernels may use, from the CPU the op runs on (cpu_isa() in kernel_paths.cpp), never
// from the build machine: one build serves AVX-512 and AVX2 machines alike.
enum class CpuIsa { Baseline, Avx2, Avx512, Avx512Bf16 };
// What this CPU and OS support (AVX2 means AVX2 + FMA; AVX-512 means AVX-512F; AVX512_BF16 adds its bfloat16 dot
// products), capped by the environment variable FASTPAD_CPU_ISA=baseline|avx2|avx512|avx512_bf16 where it is set (to
// measure or test a narrower kernel on a wider CPU).
CpuIsa cpu_isa();

enum class ConvPath {
  CpuTorch,                    // torch's own convolution (cpu/torch_conv.h): zero pads it expresses itself
  CpuBlockedAvx2,              // cpu/blocked_direct.h: register-blocked direct kernel over phase planes, AVX2
  CpuBlockedAvx512,            // the same, AVX-512
  CpuBlockedAvx512Bf16,        // the same for bfloat16, AVX512_BF16 dot products over pairs of input channels
  CpuBlockedNoPlanesAvx2,      // the blocked kernel reading a float32 channels-last input in place, AVX2
  CpuBlockedNoPlanesAvx512,    // the same, AVX-512
  CpuDepthwise,                // cpu/depthwise.cpp: any multiplier
  CpuDepthwiseAvx512,          // the same, channels-last, its register tiles on AVX-512 (cpu_nhwc_tiles_avx512)
  CpuDepthwiseChannelBlocks,   // NCHW, multiplier 1: depthwise.cpp's channels-last tiles on blocks of channels
  CpuDepthwiseChannelBlocksAvx512,  // the same, blocks of 16 channels on AVX-512's tiles
  CpuDepthwiseStridedPlanes,   // channels-last, fewer channels than a vector: the NCHW kernel, pixels C apart
  CpuGroupedExpanded,          // channels-last, few output channels per group: depthwise.cpp's kernel, expanded rows
  CpuGroupedExpandedAvx512,    // the same on AVX-512's tiles
  CpuGroupedPlanes,            // few channels per group: depthwise.cpp's NCHW kernel, summed over a group's planes
                               // (NCHW, or channels-last with pixels C apart)
  CpuTapGemms,                 // NCHW, float64 or no AVX2: one torch GEMM per tap straight off the phase planes
  CpuTapTilesAvx2,             // the same, every tap's GEMM summed in cpu/reduction_tiles.h's AVX2 registers
  CpuTapTilesAvx512,           // ... in its AVX-512 registers
  CpuColumnGemm,               // NCHW, float64 or no AVX2, few channels: taps copied into columns, one torch GEMM
  CpuChannelsLastDirect,       // channels-last stems: the direct kernel
  CpuChannelDotsAvx2,          // channels-last, few output channels per group: cpu/channel_dots.h's dot products, AVX2
  CpuChannelDotsAvx512,        // the same, AVX-512
  CpuChannelsLastPhasePlanes,  // channels-last, one group: GEMMs over channels-last phase planes
  CpuChannelsLastIm2col,       // channels-last, grouped: fused im2col + GEMM
  CudaFewChannels,             // stems (one group, at most 4 input channels): direct sums, 16 output channels a thread
  CudaPipelinedGemm,           // cuda/pipelined_gemm.cuh: 16-bit or TF32, channels contiguous, cp.async + mma
  CudaImplicitGemm,            // cuda/implicit_gemm.cuh
  CudaDepthwiseVectors,        // depthwise channels-last: strips of outputs per 16-byte channel vector
  CudaDepthwiseRows,           // depthwise 1-d rows: a span of the row in shared memory, 8 outputs per thread
  CudaDepthwiseHalo,           // depthwise, contiguous: the input patch with its halo in shared memory
  CudaDirect,                  // depthwise channels-last without channel vectors, or a patch too large
};

enum class ConvTransposePath {
  CpuTorch,           // torch's own transposed convolution (cpu/torch_conv.h): a crop it expresses itself
  CpuBlockedAvx2,     // zeros: the convs its stride phases are (transpose_phase_as_conv) on the blocked kernel, AVX2
  CpuBlockedAvx512,   // the same, AVX-512
  CpuBlockedNoPlanesAvx2,    // the same, each phase conv reading a float32 channels-last x in place, AVX2
  CpuBlockedNoPlanesAvx512,  // the same, AVX-512
  CpuBlockedFoldedAvx2,    // another mode: the full transposed conv on the blocked kernel, then folded, AVX2
  CpuBlockedFoldedAvx512,  // the same, AVX-512
  CpuTapTilesAvx2,    // zeros: the convs its stride phases are on conv's tap tiles (cpu_tap_tiles_transpose), AVX2
  CpuTapTilesAvx512,  // the same, AVX-512
  CpuTapTilesFoldedAvx2,    // another mode: the full transposed conv on the tap tiles, then folded, AVX2
  CpuTapTilesFoldedAvx512,  // the same, AVX-512
  CpuDepthwise,       // cpu/depthwise.cpp
  CpuDepthwiseChannelBlocks,  // NCHW depthwise, stride 1, zeros: the conv it is (flipped taps) on conv's channel blocks
  CpuDepthwiseChannelBlocksAvx512,  // the same on AVX-512's tiles
  CpuDepthwiseStridedPlanes,  // channels-last, fewer channels than a vector: the NCHW kernel, pixels C apart
  CpuDepthwisePhases,  // channels-last depthwise, zeros: the convs its stride phases are on depthwise.cpp's tiles
  CpuDepthwisePhasesAvx512,  // the same on AVX-512's tiles
  CpuDepthwiseChannelBlockPhases,  // NCHW depthwise, zeros: the phases above on blocks of channels
  CpuDepthwiseChannelBlockPhasesAvx512,  // the same on AVX-512's tiles
  CpuDepthwisePhasesFolded,  // another mode: the full transposed conv as the row above, then folded
  CpuDepthwisePhasesFoldedAvx512,  // the same on AVX-512's tiles
  CpuGroupedExpanded,  // channels-last, few channels per group: depthwise.cpp's scatter over expanded x pixels
  CpuGroupedPlanes,   // NCHW, few channels per group: depthwise.cpp's kernel, each y plane summed over its group's x
  CpuPhasePlanes,     // NCHW: the adjoint of conv's tap GEMMs (torch's GEMM)
  CpuPhasePlanesAvx2,    // the same, the GEMMs on cpu/reduction_tiles.h's AVX2 tiles (float accumulation)
  CpuPhasePlanesAvx512,  // ... on its AVX-512 tiles
  CpuGemmCol2im,      // a GEMM per tile of x positions, then col2im (torch's GEMM)
  CpuGemmCol2imAvx2,    // the same, the GEMMs on cpu/reduction_tiles.h's AVX2 tiles (float accumulation)
  CpuGemmCol2imAvx512,  // ... on its AVX-512 tiles
  CpuGemmCol2imNhwcAvx2,    // NCHW x and y through channels-last copies, the channels-last GEMM + col2im, AVX2 tiles
  CpuGemmCol2imNhwcAvx512,  // the same on AVX-512's tiles
  CpuGemmCol2imRowsAvx2,    // NCHW, few x positions: cols' rows are x's positions, the weight in its own order, AVX2
  CpuGemmCol2imRowsAvx512,  // the same on AVX-512's tiles
  CudaPipelinedGemm,  // the conv each stride phase is (transpose_phase_as_conv) on cuda/pipelined_gemm.cuh
  CudaDepthwiseVectors,  // depthwise channels-last, zeros: each stride phase's conv on the channel-vector kernel
  CudaDepthwiseRows,  // depthwise 1-d, stride 1, zeros: the conv its one stride phase is on the rows kernel
  CudaDirectGather,   // few channels per group: one thread per output gathers every tap
  CudaPhaseGemm,      // one implicit GEMM per stride phase (zeros padding)
  CudaPhaseGemmFold,  // the phase GEMMs, then a pass folding padded positions back (other modes)
};

enum class WeightGradPath {
  CpuDepthwise,            // cpu/depthwise.cpp
  CpuDepthwiseAvx512,      // the same, channels-last, its sums on AVX-512 (cpu_nhwc_tiles_avx512)
  CpuDepthwiseRepeated,    // channels-last, one output channel per group: the depthwise one of gy repeated per input
  CpuDepthwiseRepeatedAvx512,  // the same, its sums on AVX-512
  CpuDepthwiseChannelBlocks,   // NCHW, multiplier 1: the channels-last row sums on blocks of channels
  CpuDepthwiseChannelBlocksAvx512,  // the same, blocks of 16 channels on AVX-512
  CpuDepthwiseStridedPlanes,   // channels-last, fewer channels than a vector: the NCHW kernel, pixels C apart
  CpuTapDots,              // NCHW, few output channels per group: depthwise.cpp's kernel, over R input channels
  CpuPhasePlanes,          // NCHW: chunked GEMM reductions over phase-plane columns (torch's GEMM)
  CpuPhasePlanesAvx2,      // the same, the GEMMs on cpu/reduction_tiles.h's AVX2 tiles (cpu_weight_grad_tiles)
  CpuPhasePlanesAvx512,    // ... on its AVX-512 tiles
  CpuPhasePlanesRowsAvx2,    // the same, few positions: the gradient's rows written in place (cpu_weight_grad_rows)
  CpuPhasePlanesRowsAvx512,  // ... on its AVX-512 tiles
  CpuChannelsLastGemm,     // channels-last: chunked GEMM reductions over im2col columns (torch's GEMM)
  CpuChannelsLastGemmAvx2,    // the same, the GEMMs on cpu/reduction_tiles.h's AVX2 tiles (cpu_weight_grad_tiles)
  CpuChannelsLastGemmAvx512,  // ... on its AVX-512 tiles
  CpuChannelsLastTapsAvx2,    // channels-last float32, zeros: a GEMM per tap over x in place (cpu_weight_grad_taps)
  CpuChannelsLastTapsAvx512,  // ... on the AVX-512 tiles
  CudaPipelinedGemm,       // 16-bit or TF32, channels contiguous: cuda/pipelined_gemm.cuh split along the reduction
  CudaDepthwiseVectors,    // channels in vectors: register sums per (channel vector, tap), split over positions
  CudaDepthwiseReduction,  // one block per (channel, tap), a tree over its threads
  CudaSplitKGemm,          // the implicit GEMM split along the reduction, partial sums added in order
};

// The float32 lanes of one vector of the CPU kernels at an ISA with AVX2 or more.
inline int64_t cpu_float_lanes(CpuIsa isa) {
  return isa >= CpuIsa::Avx512 ? cpu::kBlockedDirectVectorAvx512 : cpu::kBlockedDirectVectorAvx2;
}

// Below this many channels per group (stems), a GEMM per tap reduces over too few values to run well.
constexpr int64_t kTapGemmMinChannels = 16;
// Below this many positions per (H, W) slice, GEMMs per tap are too narrow: repacking the weights for each tap
// costs more than the product (HiFi-GAN's 32-sample ConvTranspose1d ran 2x slower than one GEMM + col2im).
constexpr int64_t kTapGemmMinPositions = 256;

// Whether the CPU depthwise kernels take the problem: one conv-input channel per group, any multiplier, except that
// the channels-last conv_transpose's scatter takes multiplier 1 only (expanded_rows: the problem is a conv's forward
// or weight gradient, whose channels-last kernels read input rows expanded by the multiplier; a zeros-mode
// conv_transpose with a multiplier runs its stride phases on them, cpu_depthwise_phases). Channels-last convs with a
// multiplier ran there in 0.24-0.78x the time of the kernels they had before (the blocked kernel, one group's
// multiplier in a vector of 16 output channels; the direct kernel below a reduction of 8) on all 21 random layers of
// seeds 1-8 (multipliers 2-39, float32, 2 cores, interleaved).
// The expanded rows are cached per thread, kd x kh x dilation rows of W x C_out values each, at most
// kExpandedRowsMaxBytes (expanded_rows_bytes): wider rows keep the kernels whose buffers are bounded by a band (random
// layers: up to 1.1 MiB).
constexpr int64_t kExpandedRowsMaxBytes = int64_t(8) << 20;
// The bytes of a thread's cache of expanded rows at 4 bytes per value (float64's rows take twice that): kd x kh x
// dilation rows of W pixels, each pixel the input channels per group x C_out values.
inline int64_t expanded_rows_bytes(const ConvGeometry& g) {
  return g.kernel[0] * g.kernel[1] * g.dilation[1] * g.conv_in_sizes[2] * g.conv_in_channels_per_group() *
         g.conv_out_channels * 4;
}
inline bool cpu_depthwise(const ConvGeometry& g, bool channels_last, bool expanded_rows = false) {
  if (g.conv_in_channels_per_group() != 1) return false;
  if (!channels_last || g.conv_out_channels_per_group() == 1) return true;
  return expanded_rows && expanded_rows_bytes(g) <= kExpandedRowsMaxBytes;
}

// Whether a channels-last depthwise problem (one conv-input channel per group, any multiplier) with fewer output-side
// channels than a 32-byte vector of the accumulation type (8 floats, 4 doubles) runs the NCHW kernels of
// depthwise.cpp on the channels-last tensors themselves (cpu_depthwise_strided_planes): their phase planes gathered
// from, their outputs stored to and scattered onto, pixels C elements apart. The channels-last kernels' vectors run
// along a pixel's channels, and below a vector their tiles give way to a loop per pixel that loads and stores the
// accumulators at every tap; the NCHW kernels' vectors run along the planes' rows. For all three ops, so conv,
// conv_transpose and conv_weight_grad of such a layer keep one layout. element_bytes: of the accumulation type.
// Random channels-last layers, 2 cores (Zen 4), each op alone, interleaved against the kernels before (the per-pixel
// loops of conv_nhwc, of the depthwise phases and of weight_grad_nhwc, and the scatter; benchmarks/RESULTS.md):
// float32 on AVX-512 0.06-0.10x their time on the 6 calls of seeds 1-8 (seed 5's random029, 7 channels k7 over
// 3 x 65 x 65: 1.93 -> 0.15 ms forward) and 0.03-1.24x on 27 of seeds 9-24 (geomean 0.24; above 1.0 a 9 us weight
// gradient and a 75 us 3-d conv, 1.04x); AVX2 0.03-1.48x on 33 calls of seeds 1-24 (geomean 0.20; the 1.48x that
// 9 us weight gradient), bfloat16 0.04-1.32x (0.19), float64 0.05-0.28x on 9.
// The bytes of at::vec's vectors in this build (AVX2's 256 bits), which the depthwise kernels' channel vectors fill.
constexpr int64_t kCpuVectorBytes = 32;
inline bool cpu_depthwise_strided_planes(const ConvGeometry& g, bool channels_last, int64_t element_bytes) {
  return channels_last && g.conv_in_channels_per_group() == 1 &&
         g.conv_out_channels * element_bytes < kCpuVectorBytes;
}

// Whether an NCHW depthwise conv with multiplier 1 runs on blocks of channels (cpu_depthwise_channel_blocks): per
// image and block of up to 8 vectors of channels, the block's planes are transposed into a channels-last image, the
// channels-last kernel's register tiles run over it (positions x a vector of channels, over every tap), and the output
// is transposed back. The NCHW kernel's vectors run along a band's rows of phase planes instead; where the taps read
// several column phases (a stride along W that the dilation does not step over), each phase's rows are short runs,
// and where the output rows are no longer than one tile (kChannelBlocksMaxRow), most of each vector loop is fixed
// cost. Also: the channels fill whole vectors (32 bytes of the accumulation type) to within an eighth (a last vector
// that ends at C computes some channels twice), and one vector's channels-last image, the copy a thread holds, stays
// within kChannelBlocksMaxBytes.
// Float32, 2 cores (Zen 5), interleaved, against the NCHW kernel: the suite's ten strided depthwise layers 0.48-1.03x
// its time (k3 s2 0.53-0.71, k5 s2 at 14^2 0.48-0.51, at 56^2 0.99-1.03), 17 random layers 0.52-1.24x; 7^2 k3 s1
// 0.57-0.71x; stride-1 rows of 14 and more 0.99-2.1x (the transposes, where the NCHW rows are long runs already).
// Measured again since, on AVX-512's tiles (avx512_tiles: cpu_nhwc_conv_tiles_avx512), stride 1 takes rows of up to
// kChannelBlocksMaxRowAvx512 outputs, three of the NCHW kernel's 16-float vectors, too: at stride 1 the taps read every
// input position, so the transposes copy nothing that is not read (at a stride, an input of which a 1x1 or a dilated
// kernel reads a quarter or a ninth took 1.27-1.31x the time). Float32, 2 cores (Zen 5), interleaved, the convs this
// moved against the NCHW kernel: 24 of the random layers of seeds 1-16 and the suite's B0 k5 s1 480-channel layer
// (1.44 -> 0.92 ms) 0.29-1.12x, geomean 0.78, the three above 1.0 of 8-10 us; rows of 49-96 lost on a 1x1 over 68 x 68
// (1.34x) (benchmarks/RESULTS.md).
constexpr int64_t kChannelBlocksMaxRow = 8;
constexpr int64_t kChannelBlocksMaxRowAvx512 = 48;
constexpr int64_t kChannelBlocksMaxBytes = int64_t(4) << 20;
// Whether an NCHW problem fits the channel blocks at all: depthwise with multiplier 1, the channels filling whole
// vectors to within an eighth, one vector's channels-last image within kChannelBlocksMaxBytes.
inline bool nchw_channel_blocks_fit(const ConvGeometry& g, bool channels_last, int64_t element_bytes) {
  const int64_t lanes = kCpuVectorBytes / element_bytes, channels = g.conv_in_channels;
  const int64_t padded_channels = (channels + lanes - 1) / lanes * lanes;
  return !channels_last && channels == g.groups && g.conv_out_channels == g.groups && channels >= lanes &&
         padded_channels * 8 <= channels * 9 && g.conv_in_volume() * kCpuVectorBytes <= kChannelBlocksMaxBytes;
}
inline bool cpu_depthwise_channel_blocks(const ConvGeometry& g, bool channels_last, int64_t element_bytes,
                                         bool avx512_tiles) {
  const bool stride_1 = g.stride[0] == 1 && g.stride[1] == 1 && g.stride[2] == 1;
  const int64_t max_row = avx512_tiles && stride_1 ? kChannelBlocksMaxRowAvx512 : kChannelBlocksMaxRow;
  const bool column_phases = g.stride[2] > 1 && g.kernel[2] > 1 && g.dilation[2] % g.stride[2] != 0;
  return nchw_channel_blocks_fit(g, channels_last, element_bytes) &&
         (column_phases || g.conv_out_sizes[2] <= max_row);
}

// Whether a channels-last depthwise transposed conv (one x and one y channel per group; or a multiplier on either side,
// below) runs as the convs its stride phases are (transpose_phase_as_conv: each a depthwise conv over x with the
// phase's taps, flipped) on depthwise.cpp's channels-last register tiles, each writing its y positions in place
// (cpu_depthwise_phases), instead of the scatter, which loads and stores a y pixel's channels for every tap that
// reaches it. Zeros mode only: another mode's folds take a pass of their own (cpu_depthwise_phases_folded). The tiles
// skip every tap outside x, so an inf or NaN weight meets no padding zero.
// With a stride along W, only where a y row holds kDepthwisePhasesMinColumns positions of each column phase (three
// tiles): shorter phase rows are mostly the tiles' fixed costs. Float32, 2 cores (Zen 5), interleaved, against the
// scatter, before this bound: the suite's channels-last depthwise input gradients 0.52-0.87x on the 7 layers with 28
// or more columns per phase (1 phase at stride 1) and 1.03-1.26x on the four with 7-14; 18 random calls of seeds 1-8
// 0.30-1.54x (the two slowest had 12 and 20 columns per phase). Under it: 0.58-0.99x on those 7, 0.12-0.97x on the
// 14 random calls it keeps.
// With a multiplier m (one y and m x channels per group), each phase conv reduces over its y channel's m x channels,
// read from x rows expanded per thread (ExpandedRows, as a grouped conv's: each y channel's lane reads its group's
// x channels in turn) within kExpandedRowsMaxBytes. Under kDepthwisePhasesMinYChannels y channels (a vector of AVX2
// floats) the tiles give way to a per-pixel loop: then only where instead_of_grouped_scatter (in place of the grouped
// scatter, which loops per pixel too; choose_cpu_own_transpose_path). Random channels-last layers, float32, 2 cores,
// the op alone, interleaved against the path before: 1.39-4.36x faster on 10 calls of seeds 1-16 with 9-188 y channels
// (in place of the blocked kernel, the scatter and the GEMM + col2im); with 7, 1.83x faster than the scatter (a 1x1
// kernel over 189 x 189) and 0.45x the blocked kernel's speed (a 7x3 kernel over x rows of 13).
constexpr int64_t kDepthwisePhasesMinColumns = 24;
constexpr int64_t kDepthwisePhasesMinYChannels = 8;
// With one x channel and R > 1 y channels per group (the input gradient of a conv whose groups have one output channel
// each), each phase conv is a depthwise conv with a multiplier R, over x rows expanded per thread (each x channel
// repeated R times): every lane a real one, where the blocked kernel gives a group's R y channels a vector of their
// own, the grouped scatter loads and stores y per tap, and the GEMM + col2im reduces over one x channel. Never the
// per-pixel loop (8 y channels or more: under it, 1.08-1.28x the scatter's time on a 75 us call). Up to
// kDepthwisePhasesMaxYPerX y channels per group in place of any kernel; with more, where the blocked kernel and the
// tap tiles fill their vectors, only in place of the GEMM + col2im (choose_cpu_own_transpose_path). Random
// channels-last layers, float32, 2 cores (Sapphire Rapids class), the op alone, interleaved against the path before:
// R = 2-4 0.23-0.74x the blocked kernel's, the tap tiles' and the scatter's time (15 calls of seeds 1-24; the bound
// set on seeds 1-16, the 4 calls of seeds 17-24 0.33-0.43x; AVX2 and bfloat16 0.25-0.74x on 7); R = 17 0.42x the
// GEMM + col2im's (random050 of seed 2, replicate: folded, below); R = 7, 16 and 102 1.17-2.14x the tap tiles' and
// the folded blocked conv's (seeds 9-16), which keep them.
// In place of the grouped scatter (instead_of_grouped_scatter, cpu_grouped_expanded_transpose), also with more than
// one channel per group on both sides: each phase conv is then the grouped conv that cpu_grouped_expanded runs forward
// (the same NhwcRows over ExpandedRows), written in place, where the scatter loads and stores y per tap and x pixel.
// Random channels-last layers, float32, 2 cores (Zen 4), the op alone, interleaved against the scatter
// (benchmarks/RESULTS.md): 0.51-0.52x its time on the 2 calls of seeds 1-8 and the suite, 0.33-0.78x on the 3 of
// seeds 9-24 (held out); AVX2 0.45-0.93x (5 calls of seeds 1-24), bfloat16 0.32x (1).
constexpr int64_t kDepthwisePhasesMaxYPerX = 4;
inline bool cpu_depthwise_phases(const ConvGeometry& g, bool channels_last, bool instead_of_grouped_scatter = false) {
  const bool one_y_channel = g.conv_in_channels == g.groups, one_x_channel = g.conv_out_channels == g.groups;
  const bool grouped = instead_of_grouped_scatter && g.groups > 1;
  if (!channels_last || g.mode != PaddingMode::Zeros || !(one_y_channel || one_x_channel || grouped)) return false;
  if (g.stride[2] > 1 && g.conv_in_sizes[2] < kDepthwisePhasesMinColumns * g.stride[2]) return false;
  if (one_y_channel && one_x_channel) return true;
  if (g.conv_in_channels < kDepthwisePhasesMinYChannels && (!instead_of_grouped_scatter || !one_y_channel)) {
    return false;
  }
  for (int64_t phase = 0; phase < transpose_phase_count(g); ++phase) {
    if (expanded_rows_bytes(transpose_phase_as_conv(g, phase).conv) > kExpandedRowsMaxBytes) return false;
  }
  return true;
}

// Whether depthwise.cpp's channels-last register tiles (NhwcRows: a tile of 8 output pixels x a vector of channels in
// registers over every tap) run on AVX-512's 16 floats (cpu/nhwc_tiles_avx512.cpp) rather than at::vec's vectors of
// the build (AVX2's 8 floats): where the CPU has AVX-512F, the accumulation is float (float32, bfloat16, float16
// tensors) and the rows have 16 channels or more (a strided row of 4 KiB pixels keeps NhwcRows' per-pixel loop). The
// tiles load as many vectors and issue as many FMAs per tap as AVX2's, each twice as wide. NCHW's channel blocks
// (cpu_depthwise_channel_blocks) then hold 16 channels per vector, which doubles a block's channels-last image: only
// where it stays within kChannelBlocksAvx512MaxBytes (the suite's NCHW k3 s2 layers at 112^2 and 190^2, 0.8-2.3 MB
// images, ran 1.15-1.18x the time of 8-channel blocks; its k5 s2 layer at 95^2, 0.58 MB, 0.85x). 2 cores (Zen 5),
// interleaved, against the AVX2 tiles (benchmarks/RESULTS.md): the suite's 11 channels-last depthwise layers 0.42-0.78x
// their time forward (k5 s1 C480 0.42x), its 7 NCHW channel-block layers 0.63-0.77x, 35 random layers of seeds 1-4
// 0.52-1.00x, the channels-last input gradients (stride phases) 0.42-0.87x; bfloat16 on the suite 0.29-0.92x. The
// channels-last depthwise weight gradient's row kernel (weight_grad_nhwc) is chosen alike.
constexpr int64_t kChannelBlocksAvx512MaxBytes = int64_t(640) << 10;
constexpr int64_t kNhwcTilesAvx512Lanes = 16;  // floats per AVX-512 vector
inline bool cpu_nhwc_tiles_avx512(const ConvGeometry& g, bool channels_last, CpuIsa isa, int64_t element_bytes) {
  constexpr int64_t kLanes = kNhwcTilesAvx512Lanes;
  return isa >= CpuIsa::Avx512 && element_bytes == 4 && g.conv_out_channels >= kLanes &&
         (channels_last || g.conv_in_volume() * kLanes * element_bytes <= kChannelBlocksAvx512MaxBytes);
}

// Whether the channels-last tiles of a row of 9-15 float32 channels run on AVX-512 as one vector masked to the
// channels, where at::vec's AVX2 tiles run two 8-float vectors that overlap (the second ends at C) and load each input
// twice. Masked loads of 16-bit values would need AVX-512BW, which the dispatch does not check: float32 only. Not the
// weight gradient's rows, whose channels past the whole vectors run one by one, nor NCHW's channel blocks. 2 cores
// (Sapphire Rapids), interleaved, against the AVX2 tiles (benchmarks/RESULTS.md): 11 calls of random seeds 1-12 with
// 10-15 channels ran 0.62-0.91x their time (a grouped k7 conv to 12 channels 3.96 against 5.93 ms); with 8 channels
// (one AVX2 vector, half the masked vector idle) 3 calls ran 1.08-1.16x, hence 9.
constexpr int64_t kNhwcTilesAvx512MinMaskedChannels = 9;
inline bool cpu_nhwc_tiles_avx512_masked(const ConvGeometry& g, bool channels_last, CpuIsa isa, int64_t element_bytes,
                                         bool reduced_precision) {
  return channels_last && isa >= CpuIsa::Avx512 && element_bytes == 4 && !reduced_precision &&
         g.conv_out_channels >= kNhwcTilesAvx512MinMaskedChannels && g.conv_out_channels < kNhwcTilesAvx512Lanes;
}
// Whether the forward tiles (conv's, and the convs of a transposed conv's depthwise phases) run on AVX-512: whole
// vectors of channels (cpu_nhwc_tiles_avx512) or one masked vector (cpu_nhwc_tiles_avx512_masked).
inline bool cpu_nhwc_conv_tiles_avx512(const ConvGeometry& g, bool channels_last, CpuIsa isa, int64_t element_bytes,
                                       bool reduced_precision) {
  return cpu_nhwc_tiles_avx512(g, channels_last, isa, element_bytes) ||
         cpu_nhwc_tiles_avx512_masked(g, channels_last, isa, element_bytes, reduced_precision);
}

// Whether the channels-last depthwise tiles slide along the row (cpu/nhwc_tiles_kernel.h's nhwc_sliding_tile): each
// input vector a tile's tap row reads is loaded once for all its (position, tap) pairs, not once per pair. Needs
// one input channel per output channel (a depthwise conv, not expanded rows), dilation 1 along the row, stride 1 or 2,
// and 2 to kNhwcSlidingMaxTaps taps per row (the weights of a tap row stay in registers beside the tile's 8
// accumulators). The sums are the same as the tiles' that load an input per multiply-add. The op alone against those
// tiles, the conv and input-gradient calls that run them, 2 cores (Zen 4), interleaved (benchmarks/RESULTS.md): float32
// on AVX-512 189 calls of random seeds 1-24 and the suite 0.61-1.02x (geomean 0.95; seed 6's random011, 30 channels
// k5 over 179 x 179, 0.61); AVX2 83 calls 0.58-1.07x (0.93), bfloat16 0.65-1.00x (0.94). Those were interior tiles
// only; the border tiles too (their input columns looked up once per input, not per pair), against interior only:
// 86 calls of seeds 1-8 and the suite 0.54-1.11x (geomean 0.89; the 1.11 0.99 re-run; seed 6's random026, 442
// channels k6 3-d over 9-wide rows, where nearly every tile is a border tile, 0.56x), held out, seeds 9-24, 103 calls
// 0.55-1.03x (0.88). The same sliding for the weight gradient's sums (blocks of 8 columns) ran 0.80-1.20x (geomean
// 0.99): not kept.
constexpr int64_t kNhwcSlidingMaxTaps = 7;
inline bool cpu_nhwc_tiles_slide(const ConvGeometry& g, bool groups) {
  return !groups && g.dilation[2] == 1 && g.stride[2] <= 2 && g.kernel[2] >= 2 && g.kernel[2] <= kNhwcSlidingMaxTaps;
}

// Whether a channels-last grouped conv with more than one input channel per group runs depthwise.cpp's channels-last
// kernel over expanded rows (cpu_grouped_expanded): each output channel's lane reads its own group's input channels,
// so every lane of a vector of output channels is a real one, where the blocked kernel puts one group's output channels
// in a vector of their own (2 per group: an eighth of AVX-512's lanes). But the expanded rows hold the input times the
// output channels per group, each value written once per output channel of its group and loaded once per tap that
// reads it, from a cache that mostly outgrows L1; and the blocked kernel's tiles run better the longer a group's
// reduction. So only where
// - a group has at most kGroupedExpandedMaxOutChannels output channels, and at most kGroupedExpandedMaxGroupWeights
//   weights per tap (input x output channels per group);
// - the kernel has at least kGroupedExpandedMinTapsPerStride taps for each input position the strides step over
//   (the taps that read each copied value);
// - there are at least kGroupedExpandedMinChannels output channels (one vector of the kernel's tiles; fewer run a loop
//   per pixel), and the rows stay within kExpandedRowsMaxBytes, as for the depthwise multiplier.
// Random layers, float32, 2 cores, interleaved, against the blocked kernel: inside these bounds 0.32-0.97x its time on
// 14 layers of seeds 1-9; outside, 4 per group 0.91-7.2x and 5-14 per group 1.4-4.7x (14 layers), 4 taps at stride 3x3
// 1.07x, 16 taps at 3x3 1.18x, 46 and 50 weights per tap 1.13x and 1.35x.
// (These bounds were set when the expansion gathered value by value; reading each input value once and writing it m
// times took 0.62-0.90x the op's time on the 17 convs of random seeds 1-8 this takes.)
constexpr int64_t kGroupedExpandedMaxOutChannels = 3;
constexpr int64_t kGroupedExpandedMaxGroupWeights = 40;
constexpr int64_t kGroupedExpandedMinTapsPerStride = 2;
constexpr int64_t kGroupedExpandedMinChannels = 8;
inline bool cpu_grouped_expanded(const ConvGeometry& g, bool channels_last) {
  const int64_t in_per_group = g.conv_in_channels_per_group(), out_per_group = g.conv_out_channels_per_group();
  return channels_last && g.groups > 1 && in_per_group > 1 && out_per_group <= kGroupedExpandedMaxOutChannels &&
         in_per_group * out_per_group <= kGroupedExpandedMaxGroupWeights &&
         g.kernel_volume() >= kGroupedExpandedMinTapsPerStride * g.stride[0] * g.stride[1] * g.stride[2] &&
         g.conv_out_channels >= kGroupedExpandedMinChannels && expanded_rows_bytes(g) <= kExpandedRowsMaxBytes;
}

// Whether an NCHW conv with several groups of a few input (R) and output (m) channels runs depthwise.cpp's NCHW
// kernel (cpu_grouped_planes): each output plane's band summed in registers over the group's R input planes and the
// taps, R x kernel volume multiply-adds per output position with no lane wasted, where the blocked kernel gives each
// group's m output channels a vector of their own, and the tap tiles a GEMM of m rows per group. Up to
// kGroupedPlanesMaxInChannels input channels per group (16 and more take the blocked kernel's reductions; at 16,
// random058 ran 1.33x and 1.35x the blocked kernel's time on AVX2 and in bfloat16), up to kGroupedPlanesMaxOutChannels
// output channels, and at least kGroupedPlanesMinOutputs output positions per image and channel: on smaller outputs
// the gather of the group's planes outweighs the sums (5-25 positions: 1.19-1.72x the time of the kernel before on 4
// of 8 calls). Random NCHW layers, float32, 2 cores (Zen 4), the op alone, interleaved against the path before
// (benchmarks/RESULTS.md): seeds 1-4 and the suite, 38 calls 0.28-1.06x, geomean 0.73 (random082's 32 groups of 2
// channels 0.43x); seeds 5-8, before the bound on outputs, 29 calls 0.40-1.72x, geomean 0.85; held out, seeds 9-12,
// 29 calls 0.24-1.25x, geomean 0.83 (the 1.25 a 3-d k4 stride-3 conv with one output channel per group). Seeds 1-4
// with up to 16 input channels: bfloat16 0.24-1.35x (geomean 0.74), AVX2 0.33-1.33x (0.74), float64 (against the
// column GEMM) 0.19-1.56x (0.43).
constexpr int64_t kGroupedPlanesMaxInChannels = 15;
constexpr int64_t kGroupedPlanesMaxOutChannels = 16;
constexpr int64_t kGroupedPlanesMinOutputs = 32;
inline bool cpu_grouped_planes(const ConvGeometry& g, bool channels_last) {
  return !channels_last && g.groups > 1 && g.conv_in_channels_per_group() > 1 &&
         g.conv_in_channels_per_group() <= kGroupedPlanesMaxInChannels &&
         g.conv_out_channels_per_group() <= kGroupedPlanesMaxOutChannels &&
         g.conv_out_volume() >= kGroupedPlanesMinOutputs;
}

// Whether a channels-last grouped conv that the blocked kernel (with its phase planes) would take runs the same NCHW
// kernel (cpu_grouped_planes) on the channels-last tensors themselves, as cpu_depthwise_strided_planes does: its
// planes gathered from, and its outputs stored to, pixels C elements apart. The blocked kernel gives each group's m
// output channels a vector of their own, at most a quarter of AVX-512's lanes (half of AVX2's) where m is at most
// kGroupedPlanesOverChannelsLastMaxChannels; the NCHW kernel's vectors run along rows, full. Its cost is the gather
// of each group's R input planes, strided here, so only for at most that many input channels per group and at
// least kGroupedPlanesOverChannelsLastMinTapsPerStride taps for each input position the strides step over (the taps
// each gathered value feeds). Channels-last calls whose path moved, the op alone, interleaved, medians of 7 rounds
// (2 cores, Zen 4; benchmarks/results/2026-12-05-cpu-zen4-grouped-planes-channels-last/): random seeds 1-24 and the
// suite, float32 AVX-512 5 calls 0.38-1.02x (seed 6's random047, a 3-d k4 conv with 3 input and 4 output channels
// per group, 7.57 -> 2.85 ms), AVX2 5 calls 0.44-1.11x, bfloat16 6 calls 0.35-0.79x; held out, seeds 25-64, 2 calls
// 0.75x and 0.90x. With 2 taps per stride step the rule also took a 2-d k3 stride-2 conv of seed 17 that ran
// 0.97-1.20x in four runs. Every grouped channels-last call, without the bounds on channels and taps: 114 calls
// 0.37-3.64x (geomean 1.24).
constexpr int64_t kGroupedPlanesOverChannelsLastMaxChannels = 4;
constexpr int64_t kGroupedPlanesOverChannelsLastMinTapsPerStride = 3;
inline bool cpu_grouped_planes_over_channels_last(const ConvGeometry& g, bool channels_last) {
  return channels_last && g.conv_in_channels_per_group() <= kGroupedPlanesOverChannelsLastMaxChannels &&
         g.conv_out_channels_per_group() <= kGroupedPlanesOverChannelsLastMaxChannels &&
         g.kernel_volume() >=
             kGroupedPlanesOverChannelsLastMinTapsPerStride * g.stride[0] * g.stride[1] * g.stride[2] &&
         cpu_grouped_planes(g, /*channels_last=*/false);
}

// Whether a channels-last transposed conv (x on the conv_out side, m channels per group; y, R) with more than one
// group runs depthwise.cpp's channels-last scatter with each x pixel expanded per group (cpu_grouped_expanded): per
// x pixel and tap, m multiply-adds over y's channels, every lane a real one, where the GEMM + col2im runs a GEMM and a
// col2im of R channels per group, and the blocked kernel gives each group's R y channels a vector of their own. Up to
// kGroupedExpandedTransposeMaxGroupWeights weights per tap of a group (R x m), and not where the zeros-mode blocked
// conv takes the problem (choose_conv_transpose_path). Random channels-last layers of seeds 1-8 whose input gradient
// (or transposed forward) it takes, float32 forward+backward, 2 cores, interleaved: 0.32-1.01x the time with the GEMM +
// col2im or the folded blocked conv before, on all 29 within these bounds; outside them (seeds 1-4), the zeros-mode
// blocked conv 0.96x and 1.37x, 8 weights per tap 1.15x, 30-64 1.07-1.51x (benchmarks/RESULTS.md). With
// kGroupedExpandedTransposeOverBlockedMinGroups groups or more it takes the zeros-mode problems the blocked conv would
// too: where x has that many channels, each a group of its own, the blocked conv's phase convs give each group's few
// y channels a vector (channels-last calls whose path moved, 2026-12-04: seeds 1-32 and the suite 13 calls
// 0.18-13.2x, those with 64 groups or more 0.18-0.62x and the others 0.61-13.2x; held out with this floor, seeds
// 33-72, 5 calls 0.21-1.07x, geomean 0.51, the 1.07 (876 groups, one y channel each) 1.19 and 1.09 in re-runs;
// AVX2 and bfloat16, seeds 1-40, 4 calls each 0.15-0.48x).
constexpr int64_t kGroupedExpandedTransposeMaxGroupWeights = 6;
constexpr int64_t kGroupedExpandedTransposeOverBlockedMinGroups = 64;
inline bool cpu_grouped_expanded_transpose(const ConvGeometry& g, bool channels_last) {
  return channels_last && g.groups > 1 &&
         g.conv_in_channels_per_group() * g.conv_out_channels_per_group() <= kGroupedExpandedTransposeMaxGroupWeights &&
         !cpu_depthwise(g, channels_last);
}

// Whether torch's own convolution computes the problem with no padded copy: zero padding, and pad_lo on both sides
// of every dimension gives the same output size. Every output then reads the same positions, and where torch's pad_hi
// differs from the problem's, the difference is never read. fastpad has no copy to save there, and on CPU torch's
// NCHW kernels (oneDNN) are the faster ones except against fastpad's depthwise kernels (float32, 2 cores:
// resnet50.dense_k3s1_c64 took 1.26x torch's time in fastpad; efficientnet_b0 dw_k5s1_c480 0.39x).
inline bool torch_pads_match(const ConvGeometry& g) {
  if (g.mode != PaddingMode::Zeros) return false;
  for (int d = 0; d < kMaxSpatial; ++d) {
    if (g.pad_lo[d] < 0 || conv_out_size(g.conv_in_sizes[d], g.pad_lo[d], g.pad_lo[d], g.kernel[d], g.stride[d],
                                         g.dilation[d]) != g.conv_out_sizes[d]) {
      return false;
    }
  }
  return true;
}

// torch's output_padding along dim d for a transposed convolution (the adjoint of g) cropped by crop_lo (pad_lo) at
// both ends: the output positions past the cropped full output.
inline int64_t torch_output_padding(const ConvGeometry& g, int d) {
  return g.conv_in_sizes[d] + 2 * g.pad_lo[d] -
         transposed_full_size(g.conv_out_sizes[d], g.kernel[d], g.stride[d], g.dilation[d]);
}

// The same as torch_pads_match for a transposed convolution: torch crops crop_lo from both ends of the full output and
// adds output_padding positions at the end, which it allows below max(stride, dilation).
inline bool torch_crop_matches(const ConvGeometry& g) {
  if (g.mode != PaddingMode::Zeros) return false;
  for (int d = 0; d < kMaxSpatial; ++d) {
    const int64_t output_padding = torch_output_padding(g, d);
    if (g.pad_lo[d] < 0 || output_padding < 0 || output_padding >= std::max(g.stride[d], g.dilation[d])) return false;
  }
  return true;
}

// The multiply-adds of g's convolution (and of its adjoint, the transposed conv).
inline int64_t conv_multiply_adds(const ConvGeometry& g) {
  return g.batch * g.conv_out_channels * g.conv_out_volume() * g.conv_in_channels_per_group() * g.kernel_volume();
}

// The most elements (input plus output) of a problem left to torch: its CPU convolution reorders the whole input
// and output into blocked copies (2x64x1M float32, 'same' k4 pads (1, 1): 500 MiB beyond input and output, fastpad's
// tiles 8 MiB), so larger problems keep fastpad's bounded buffers.
constexpr int64_t kTorchMaxElements = int64_t(1) << 24;
// The fewest multiply-adds of a problem left to torch: below, oneDNN's fixed cost per call outweighs its faster
// loops (random layers, float32: a 15x12x61 k3 s2 conv1d of 0.3 M multiply-adds took 0.28 ms through torch's,
// 0.18 ms in fastpad's; 27 M multiply-adds of 9x38x7x7 k6 s2 took 0.90 ms through torch's, 1.68 ms in fastpad's).
constexpr int64_t kTorchMinMultiplyAdds = int64_t(1) << 24;

// Whether a channels-last bfloat16 problem that torch's padding expresses goes to torch's convolution on a CPU with
// AVX512_BF16, where oneDNN multiplies bfloat16 with dot products and fastpad's kernels would run in float: one group,
// and
// - conv: an odd number of input channels (fastpad's dot-product kernel, cpu_blocked_direct's Avx512Bf16 variant,
//   takes pairs of them and was as fast as torch's: 0.56-1.18x);
// - conv_transpose (fastpad has no dot-product kernel for it): 2-d, strides of at most 2 with at least as many taps
//   (torch's strided or 3-d bfloat16 deconvolutions ran up to 11x fastpad's time: a 3 -> 122 channel 3-d k4 one), and
//   kChannelsLastBf16TorchMinYChannels y channels or more (3-16 y channels: 0.54-5.4x).
// bfloat16 channels-last calls this moves, the op alone, 2 cores (Zen 4), interleaved, torch's time over fastpad's
// (benchmarks/RESULTS.md): 42 calls of random seeds 1-16 and the suite 0.18-1.43x, geomean 0.54 (the UNet transposed
// convs 0.46-0.48; above 1.0 a 5 -> 259 channel k4x2 s2 transposed conv, 1.16x, and a 3-d conv to 3 channels, 1.43x);
// held out, seeds 17-24, 20 calls 0.37-0.74x, geomean 0.51.
constexpr int64_t kChannelsLastBf16TorchMinYChannels = 17;
inline bool cpu_channels_last_bf16_to_torch(const ConvGeometry& g, bool transposed) {
  if (g.groups != 1) return false;
  if (!transposed) return g.conv_in_channels % 2 != 0;
  bool small_strides = g.kernel[0] == 1 && g.stride[0] == 1;  // 2-d
  for (int d = 1; d < kMaxSpatial; ++d) small_strides = small_strides && g.stride[d] <= 2 && g.kernel[d] >= g.stride[d];
  return small_strides && g.conv_in_channels >= kChannelsLastBf16TorchMinYChannels;
}

// The CPU conv and conv_transpose problems fastpad's own kernels leave to torch (see torch_pads_match): NCHW, not
// depthwise, between kTorchMinMultiplyAdds and kTorchMaxElements, with channels on both sides (torch rejects an empty
// reduction), and not a strided 1x1 kernel (1x313x96x96 -> 3 channels, stride 3: 5.6 ms through torch's, 1.6 ms
// in fastpad's). The weight gradient stays with fastpad, whose kernels were as fast or faster than torch's backward.
// float16 stays with fastpad, and so does bfloat16 unless the CPU has AVX512_BF16 (isa Avx512Bf16, which cpu_isa_for in
// conv_params.h gives bfloat16 tensors only): without native bf16 instructions (AVX2), torch 2.13's bf16 convolution ran
// resnet50.dense_k3s1_c64 at 1.8% of the float32 FMA peak, 28.7x ONNX Runtime's float32 time and 4.3x torch.compile's;
// with them (AMD EPYC, 2 cores), F.pad + torch's bf16 conv took 0.31-0.62x fastpad's time on the suite's transposed layers
// and 0.91x on resnet50.dense_k3s1_c64 even with fastpad's dot-product kernel.
// Channels-last stays with fastpad: torch 2.13's CPU convolution backward in channels-last gave wrong weight
// gradients (1x1 stride 3 over 15x18), NaN input gradients (3x3 stride 2 pads 1 over 57x57) and, for one random
// shape, did not return; except bfloat16 on AVX512_BF16 (cpu_channels_last_bf16_to_torch), whose forward (conv, or
// conv_transpose: what fastpad asks of torch) runs there natively.
inline bool cpu_leaves_to_torch(const ConvGeometry& g, bool channels_last, bool pads_match, bool reduced_precision,
                                CpuIsa isa, bool transposed) {
  const int64_t elements =
      g.batch * (g.conv_in_channels * g.conv_in_volume() + g.conv_out_channels * g.conv_out_volume());
  const int64_t multiply_adds = conv_multiply_adds(g);
  const bool strided_1x1 = g.kernel_volume() == 1 && g.stride[0] * g.stride[1] * g.stride[2] > 1;
  const bool bf16_dot_products = reduced_precision && isa == CpuIsa::Avx512Bf16;
  return pads_match && (!reduced_precision || bf16_dot_products) &&
         (!channels_last || (bf16_dot_products && cpu_channels_last_bf16_to_torch(g, transposed))) &&
         !cpu_depthwise(g, channels_last) &&
         elements <= kTorchMaxElements &&
         multiply_adds >= kTorchMinMultiplyAdds && !strided_1x1 && g.conv_in_channels > 0 && g.conv_out_channels > 0;
}

// The shortest reduction (input channels per group x taps) of a channels-last conv with few channels per group that
// the blocked kernel takes: below, a tile's loop over the reduction is too short to pay for the tile (random layers,
// float32, against cpu_channels_last_direct: 1 x 1 taps 1.35x slower, 1 x 3 1.24x; 1 x 9 0.52x, 3 x 9 0.95x).
constexpr int64_t kBlockedMinReduction = 8;

// Whether the register-blocked direct kernel takes a CPU conv: float accumulation (float32, bfloat16, float16) and a
// vector ISA it is built for; then any conv with kTapGemmMinChannels input channels per group, and below that
// - channels-last: a reduction of kBlockedMinReduction or more (random layers with 1-15 channels per group, float32,
//   2 cores, forward: 0.41-0.82x cpu_channels_last_direct's time on 13 of 15, 1.00x and 1.04x on two; stems
//   0.78-0.95x);
// - NCHW: grouped convs, whose GEMM per group is narrow (5 random layers with 3-13 channels per group: 0.09-0.89x its
//   time), and stems (one group) with a reduction of kBlockedStemMinReduction or more. Shorter ones take the tap tiles
//   (cpu_tap_tiles); they had taken the column GEMM, one GEMM over all output channels, which the transposing gather
//   into channels-last planes did not beat there (float32, 2 cores, interleaved: reductions of 27-48 1.04-2.1x its time,
//   72-108 0.84-1.25x; 128-2376 0.64-0.89x on 9 stems, resnet50's 7x7 0.89x, a 3-d k6 over 11 channels 0.65x).
//   On AVX-512, shorter stems whose output rows are narrower than kBlockedStemMaxColumns with more than half a vector
//   of output channels take the blocked kernel too: the tap tiles' vectors run along those short rows, the blocked
//   kernel's along the channels (a 5 -> 141 k5x3 s3 conv over 109 x 16, rows of 6: 0.82x the tiles' time). The conv
//   alone, 2 cores (Zen 4), interleaved, against the tap tiles: the 18 calls of random seeds 1-8 and the suite this
//   moves 0.47-1.05x, geomean 0.86; held out, seeds 9-16, 14 calls 0.59-1.06x, 0.87; bfloat16 18 calls 0.54-1.08x,
//   0.87. Not AVX2, whose 8 lanes let 5-8 output channels in: 22 calls 0.51-1.38x, 0.95 (benchmarks/RESULTS.md).
constexpr int64_t kBlockedStemMinReduction = 128, kBlockedStemMaxColumns = 28;
inline bool cpu_blocked_direct(const ConvGeometry& g, bool channels_last, CpuIsa isa, int64_t element_bytes) {
  if (isa == CpuIsa::Baseline || element_bytes != 4) return false;
  // An NCHW 1x1 conv is one GEMM straight off the input (cpu_tap_tiles), where the blocked kernel first transposes
  // the input into planes (a 1x191x16^3 3-d conv to 76 channels: 2.19x the tap GEMM's time).
  if (!channels_last && g.kernel_volume() == 1) return false;
  const int64_t c_in = g.conv_in_channels_per_group();
  if (c_in >= kTapGemmMinChannels) return true;
  if (channels_last) return c_in * g.kernel_volume() >= kBlockedMinReduction;
  if (c_in <= 0) return false;
  if (g.groups > 1 || c_in * g.kernel_volume() >= kBlockedStemMinReduction) return true;
  return isa >= CpuIsa::Avx512 && g.conv_out_sizes[2] < kBlockedStemMaxColumns &&
         2 * g.conv_out_channels_per_group() > cpu::kBlockedDirectVectorAvx512;
}

// Whether the blocked kernel reads a channels-last input in place instead of gathering phase planes: float32 (the
// planes of 16-bit inputs convert them), and no tap of any output reads padding (reads_no_padding: 'valid' convs, 1x1
// kernels with zero pads), so that each tap of a band is the input at a fixed offset, its positions stride x C apart.
// The gather copies every input value once per stride phase that reads it: on a 2-core Zen 4 it took 30% of a
// grouped 64 -> 64 k2 s2 conv's time (random layer, 11 x 52 x 52 input). In place, float32, interleaved against the
// planes: that conv 0.64x; every call of random layers of seeds 1-4 and the suite this takes 0.40-1.07x (24, geomean
// 0.83), of held-out seeds 5-8 0.53-1.20x (22, 0.81; the 1.20x, a long process's, 0.80-0.84x in fresh ones), AVX2
// 0.39-1.02x (24, 0.83).
inline bool cpu_blocked_no_planes(const ConvGeometry& g, bool channels_last, bool reduced_precision) {
  return channels_last && !reduced_precision && g.reads_no_padding();
}

// Whether a GEMM of the CPU kernels may run on fastpad's register tiles (cpu/reduction_tiles.h) instead of torch's
// GEMM (MKL at 37-42% of the FMA peak on a Zen 5): where it accumulates in float32 and the CPU has AVX2. The NCHW
// transposed phase planes (phase_plane_transpose_nchw in conv_transpose.cpp) take them for their tap GEMMs,
// planes_tap[Cg_y, band] += W_tap^T @ x_band over Cg_x, wherever this holds (A/B on 2 cores of a Zen 5, float32, the op
// alone: EnCodec's input gradient 0.52x, 27 random layers of seeds 1-8 0.48-0.93x, benchmarks/RESULTS.md); so does the
// GEMM + col2im's GEMM (the op alone: 134 calls of random layers of seeds 1-4 and the suite 0.17-1.08x, geomean 0.74;
// 139 of seeds 5-8, 0.72; the calls above 1.05x take 12-50 us); the weight gradients within cpu_weight_grad_tiles'
// bound; and the NCHW convs the blocked kernel does not take (cpu_tap_tiles).
inline bool cpu_reduction_tiles(CpuIsa isa, int64_t element_bytes) {
  return isa != CpuIsa::Baseline && element_bytes == 4;
}

// Whether a conv with float accumulation runs its tap GEMMs summed on the reduction tiles (cpu_tap_tiles_*), vectors
// along the output positions, in place of the blocked kernel (vectors along the output channels), with a reduction
// (input channels per group x taps) of kBlockedMinReduction or more: where the blocked kernel's vectors would leave
// lanes empty and the output rows are wide enough that the tiles' vectors, which also run over each row's discarded
// columns (the phase planes' pitch), waste fewer. NCHW: half the lanes or more empty (at most half a vector of output
// channels per group) on rows of kTapTilesMinColumns or more (kTapTilesMinStridedColumns with a stride); or, at stride
// 1 on rows of kTapTilesMinStridedColumns or more, fewer than two vectors of channels, except where the bfloat16 dot
// products (twice the multiply-adds per instruction) take the conv. Channels-last, whose planes are gathered a run of
// channels per pixel at a time and whose output is written back a pixel's channels at a time (both beyond the blocked
// kernel's plain copies): half a vector on the same rows, with kTapTilesChannelsLastMinTaps taps per stride phase or
// more. A sweep (float32, 2 cores of a Zen 5, AVX-512, 64 input channels, k3/k5, the op alone): NCHW 3 or 8 output
// channels 0.21-0.85x the blocked kernel's time on 14-56 wide rows at stride 1, 0.54-0.91x on 28 wide ones at stride 2,
// but 0.82-1.13x on 14 wide strided rows and 0.58-1.13x on 7 wide ones; 12-24 channels at stride 1 0.62-0.94x on 28-56
// wide rows, 0.89-1.15x on 14 wide ones; 32 channels 1.00-1.14x. Channels-last k3: 3-8 channels 0.41-0.88x at stride 1,
// 0.98-1.14x at stride 2 (2.25 taps per phase), 12-24 channels 0.82-1.17x; the random layers' channels-last 1x1 convs
// 1.2-1.6x. On the random layers' calls the rule takes, 0.16-0.94x (AVX2 0.24-1.07x, bfloat16 0.16-1.10x, the ratios
// above 1 calls of 41-78 us): benchmarks/RESULTS.md.
constexpr int64_t kTapTilesMinColumns = 14, kTapTilesMinStridedColumns = 28, kTapTilesChannelsLastMinTaps = 4;
// Why cpu_tap_tiles_reason takes a conv in place of the blocked kernel: at most half a vector of output channels per
// group (either layout), or, NCHW at stride 1, fewer than two vectors.
enum class TapTilesReason { None, HalfVector, TwoVectors };
inline TapTilesReason cpu_tap_tiles_reason(const ConvGeometry& g, bool channels_last, CpuIsa isa,
                                           int64_t element_bytes) {
  if (isa == CpuIsa::Baseline || element_bytes != 4) return TapTilesReason::None;
  const int64_t c_in = g.conv_in_channels_per_group(), c_out = g.conv_out_channels_per_group();
  const int64_t reduction = c_in * g.kernel_volume();
  if (reduction < kBlockedMinReduction) return TapTilesReason::None;
  if (!cpu_blocked_direct(g, channels_last, isa, element_bytes)) return TapTilesReason::None;
  const int64_t lanes = cpu_float_lanes(isa);
  const int64_t phases = g.stride[0] * g.stride[1] * g.stride[2], columns = g.conv_out_sizes[2];
  const bool wide_rows = columns >= (phases > 1 ? kTapTilesMinStridedColumns : kTapTilesMinColumns);
  if (channels_last) {
    return 2 * c_out <= lanes && wide_rows && g.kernel_volume() >= kTapTilesChannelsLastMinTaps * phases
               ? TapTilesReason::HalfVector
               : TapTilesReason::None;
  }
  if (2 * c_out <= lanes && wide_rows) return TapTilesReason::HalfVector;
  const bool dot_products = isa == CpuIsa::Avx512Bf16 && c_in % 2 == 0;
  return !dot_products && phases == 1 && c_out < 2 * lanes && columns >= kTapTilesMinStridedColumns
             ? TapTilesReason::TwoVectors
             : TapTilesReason::None;
}
// Whether a conv runs on the tap tiles: by cpu_tap_tiles_reason, and every NCHW conv the blocked kernel does not take
// (1x1 kernels, grouped or not; stems, one group under kTapGemmMinChannels input channels with a reduction under
// kBlockedStemMinReduction, but for AVX-512's narrow rows of many channels), in place of torch's GEMM per tap or per
// column buffer (cpu_tap_gemms, cpu_column_gemm, which keep float64 and CPUs without AVX2). Those pay a GEMM call per
// (image, group, band) and, the columns, an im2col copy; the tiles sum every tap's product in registers. Float32, 2
// cores of a Zen 5, the op alone, interleaved: every such call of the random layers of seeds 1-4 and the suite
// 0.25-1.01x their time (35 calls, geomean 0.65; a grouped 1x1 s3 conv, 30 x 24 -> 184 channels in 8 groups, 0.150 ->
// 0.063 ms), held-out seeds 5-8 0.29-0.96x (27, 0.69), AVX2 0.27-1.10x (36, 0.70; the 1.10x a 1x1 3 -> 313 channel conv
// over 286 x 286), bfloat16 0.39-1.01x (14, 0.74). The rule before took NCHW stems with a reduction of 8-127 on rows 14
// wide or more only (19 stem shapes 0.46-0.85x the column GEMM's time, tf_efficientnet_b0's stem 0.68x).
inline bool cpu_tap_tiles(const ConvGeometry& g, bool channels_last, CpuIsa isa, int64_t element_bytes) {
  if (!channels_last && cpu_reduction_tiles(isa, element_bytes) && !cpu_blocked_direct(g, false, isa, element_bytes)) {
    return true;
  }
  return cpu_tap_tiles_reason(g, channels_last, isa, element_bytes) != TapTilesReason::None;
}

// Whether a float32 channels-last grouped conv that cpu_grouped_expanded takes runs on the tap tiles instead: at
// stride 1, on rows of kTapTilesMinStridedColumns or more, with a group reduction (input channels x taps) of
// kTapTilesOverExpandedMinReduction or more, where cpu_tap_tiles takes it (a group's output channels fill at most half
// a vector). The expanded rows hold Cg_in x C_out values per pixel and load one per multiply-add, from a cache that
// outgrows L1 as the group's input channels grow; the tiles' vectors run along the row's positions, their weights
// broadcast. cpu_grouped_expanded's bounds predate channels-last convs on the tap tiles. Random layers' calls, 2 cores
// (Zen 4), the op alone, interleaved medians, against the expanded rows: taking every conv cpu_tap_tiles takes, seeds
// 1-40 and the suite, 2-d stride 1 ran 0.42-1.20x (random011 of seed 1, 2 x 32 x 106 x 106 -> 12 k7 d2 in 4 groups,
// 3.18 -> 1.34 ms; 6.58 -> 1.62 ms on AVX2, where it read 1.56x F.pad + conv), strided convs 0.77-1.96x (2-4 input
// channels per group 0.77-1.96x, 5-17 0.80-1.02x), rows of 14-24 1.04-1.20x; group reductions of 8-24 products, seeds
// 41-100, 0.69-1.74x. Within these bounds, held out (seeds 101-200): AVX-512 16 calls 0.32-1.29x (geomean 0.72; the
// 1.29 re-ran at 1.05, random073's 66 groups of 2 -> 2 channels 1.26 and 1.23x), AVX2 16 calls 0.38-0.81x (0.53).
// bfloat16 on the same calls 0.37-1.60x (0.91; groups of 2-5 input channels 1.28-1.60x): it keeps the expanded rows.
constexpr int64_t kTapTilesOverExpandedMinReduction = 32;
inline bool cpu_tap_tiles_over_grouped_expanded(const ConvGeometry& g, bool channels_last, CpuIsa isa,
                                                int64_t element_bytes, bool reduced_precision) {
  return !reduced_precision && g.stride[0] * g.stride[1] * g.stride[2] == 1 &&
         g.conv_out_sizes[2] >= kTapTilesMinStridedColumns &&
         g.conv_in_channels_per_group() * g.kernel_volume() >= kTapTilesOverExpandedMinReduction &&
         cpu_tap_tiles(g, channels_last, isa, element_bytes);
}

// The geometry of the full transposed conv of g with zero padding: every position a tap reaches (transposed_full_size
// per dim, from the first at crop 0), and on to the end of y where the taps stop short of it (a stride leaves the
// last rows unread). A conv_transpose in another mode computes it, then folds the positions outside y back onto
// those the mode reads them from (conv_transpose.cpp's fold_padding).
inline ConvGeometry full_transpose_geometry(const ConvGeometry& g) {
  ConvGeometry full = g;
  full.mode = PaddingMode::Zeros;
  for (int d = 0; d < kMaxSpatial; ++d) {
    full.conv_in_sizes[d] = std::max(transposed_full_size(g.conv_out_sizes[d], g.kernel[d], g.stride[d], g.dilation[d]),
                                     g.pad_lo[d] + g.conv_in_sizes[d]);
    full.pad_lo[d] = 0;
  }
  return full;
}

// Whether the blocked kernel takes the convs a transposed conv's stride phases are (transpose_phase_as_conv: one per
// phase, one at stride 1; their input channels are x's, their taps about kernel_volume / phases). By the channels-last
// rule of cpu_blocked_direct in either layout: the transposed op has no column GEMM to keep NCHW stems, and its
// alternative is the GEMM + col2im, which writes and scatters C_y x taps values per x position (stride-1 input
// gradients of random layers, float32, 2 cores: 451 <- 3 channels NCHW replicate k6x7 0.07x its time; five more, 2-99
// x channels per group, 0.15-0.91x; 1.02x the phase planes). With a stride: below kTapGemmMinChannels x channels per
// group, where the col2im's scatter outweighs its GEMM; with more, only on AVX-512 (AVX2's blocked phases ran
// 1.00-1.27x the phase planes' and GEMM + col2im's time on a Zen 3, and 0.89-1.25x on a Zen 5: benchmarks/RESULTS.md),
// in zeros mode, with kTapGemmMinChannels y channels per group or more (the phase convs' output vectors: a stem's
// input gradient, 3 y channels, ran 1.1-3.2x slower), a tap per phase on average (k2 s3 d2, 4 taps over 9 phases:
// 1.49x), and kBlockedWidePhaseMinPositions y positions per phase over the batch (each phase is a parallel region of
// its own, and fewer positions left a core idle: batch-1 layers of 100-361 positions per phase ran 1.13-1.57x). On
// AVX-512 (a Zen 5, 2 cores, float32) that took 0.44-0.83x the time of the suite's strided transposed layers and
// ResNet-50 k3 s2 input gradient, and 0.48-1.12x (geomean 0.70) on the 20 random transposed layers and input
// gradients of seeds 1-8 it moves.
// The phase convs compute every y position over all its taps, zeros around x included, where the col2im adds only
// x's products: so y may be at most kBlockedTransposeMaxGrowth times what the stride makes of x (a 'valid' k7 d2 3-d
// transposed conv over 7^3, y 19^3, 20x: 1.57x slower; an input gradient whose y is 1.01x: 0.15x). And a kernel no
// wider than the stride leaves one tap per phase, whose col2im adds each product once (k2 s2, 8 x channels per group:
// 1.61x slower), so a stride needs 2 taps per phase on average.
// Each stride phase, and each fold of another mode, costs fixed work (weights repacked, a parallel region), which small
// problems do not repay: with a stride, below kBlockedPhaseMinMultiplyAdds per phase (input gradients of random
// layers with 3-14 x channels per group, float32, 2 cores, each phase writing its view of y in place: 0.04 M and
// 0.12 M per phase 2.2x and 2.5x the col2im's time; 0.39-3.4 M per phase 0.28-0.66x on five, 0.83 M 1.15x on one);
// folded at stride 1, below kBlockedFoldedMinMultiplyAdds (0.86 M: 1.65x; 1.8 M: 0.28x). An NCHW 1x1 kernel keeps
// the phase planes, as conv keeps its GEMM (3.27x slower folded).
// At stride 1 with kTapGemmMinChannels x channels per group or more, the phase conv's vectors run along y's channels:
// under kBlockedTransposeMinYChannels per group (1-9 of a vector's 16 lanes) a kernel wider than 1x1 takes GEMM +
// col2im (random layers, float32, 2 cores, interleaved: 0.23-1.12x the blocked kernel's time on 10 calls of seeds 1-4,
// geomean 0.61; 0.33-1.21x on 9 of seeds 5-8, 0.65; AVX2 0.27-1.30x on seeds 1-4's 10, 0.77; 11-15 y channels had run
// 1.15-1.16x, and a 1x1 kernel 1.73x).
constexpr int64_t kBlockedTransposeMaxGrowth = 4;
constexpr int64_t kBlockedWidePhaseMinPositions = 1024;
constexpr int64_t kBlockedPhaseMinMultiplyAdds = int64_t(1) << 18;
constexpr int64_t kBlockedFoldedMinMultiplyAdds = int64_t(1) << 20;
constexpr int64_t kBlockedTransposeMinYChannels = 10;
// At stride 1 the blocked kernel's conv multiplies every y position's taps (another mode's: the full conv's, folded
// after), zeros around x included, in whole vectors of y channels, where the GEMM + col2im multiplies x's products
// only, in lanes all used. Its multiply-adds per product of x with a weight (the waste) are that growth times the
// lanes per y channel. With kCol2imMinXChannels x channels per group or more, where the GEMM's reduction is long
// enough to outweigh col2im's scatter of its C_y x taps values per x position, a waste of
// kBlockedTransposeMaxWaste or more takes GEMM + col2im, also in NCHW (where the phase planes ran 1.12-1.52x the
// blocked kernel's time on three calls). Random layers' calls, float32, 2 cores, interleaved: 0.30-1.01x the blocked
// kernel's time on 15 of seeds 1-12 (geomean 0.61; a 350 -> 20 k6 over 20 x 20, 2.5x the products: 0.46x), 0.72x and
// 0.80x on the 2 of seeds 13-16 (held out); AVX2 0.28-0.97x on 8 of seeds 1-4 (0.57). Fewer x channels lost: 76 at
// 1.69x the products 1.12x (phase planes), 28 at 2.15x 1.74x (GEMM + col2im).
constexpr int64_t kCol2imMinXChannels = 96;
constexpr double kBlockedTransposeMaxWaste = 1.5;
inline double blocked_transpose_waste(const ConvGeometry& g, CpuIsa isa) {
  const int64_t y_positions =
      g.mode == PaddingMode::Zeros ? g.conv_in_volume() : full_transpose_geometry(g).conv_in_volume();
  const int64_t vector = cpu_float_lanes(isa);
  const int64_t c_y = g.conv_in_channels_per_group();
  return static_cast<double>(y_positions) / static_cast<double>(g.conv_out_volume()) *
         static_cast<double>(ceil_div(c_y, vector) * vector) / static_cast<double>(c_y);
}

// An NCHW GEMM + col2im on the tiles (float32) runs as the channels-last one, on channels-last copies of x and y
// (the weight packed tap-major), where y has kCol2imNhwcMinYChannels channels per group or more, a kernel wider than
// 1x1 and kCol2imNhwcMinSpread or more y channels x taps (cols' row), and x more than one row and
// kCol2imNhwcMinPositions positions over the batch. The NCHW GEMM's columns are x's positions (few on small images:
// a batch-1 239 -> 150 k5 over 9 x 9 ran its GEMM at a fifth of the peak) and its col2im scatters row by row, where
// the channels-last one adds whole runs of y channels; the copies cost x and y once, the packing the weight once.
// Random layers' NCHW calls, float32, 2 cores, Sapphire Rapids class, interleaved: 0.92-3.32x faster on the 7 of
// seeds 1-4 (geomean 1.99), 0.87-2.16x on the 10 of seeds 5-8 (held out, 1.49), AVX2 0.79-2.82x on 16 of seeds 1-8
// (1.54). A first rule (8 or more y channels, any row of cols, any positions) ran 0.38-3.35x on 31 calls of seeds
// 1-4 (geomean 1.22): its losers had rows of 84-2124 or 25 positions (a 420 -> 221 7x7 whose 18 MB weight was
// packed for them, 0.66x).
constexpr int64_t kCol2imNhwcMinYChannels = 16;
constexpr int64_t kCol2imNhwcMinSpread = 1024;
constexpr int64_t kCol2imNhwcMinPositions = 64;
inline bool cpu_gemm_col2im_nhwc(const ConvGeometry& g, bool channels_last, int64_t element_bytes,
                                 bool reduced_precision) {
  return !channels_last && element_bytes == 4 && !reduced_precision && g.kernel_volume() > 1 &&
         g.conv_in_channels_per_group() >= kCol2imNhwcMinYChannels &&
         g.conv_in_channels_per_group() * g.kernel_volume() >= kCol2imNhwcMinSpread &&
         g.batch * g.conv_out_volume() >= kCol2imNhwcMinPositions && g.conv_out_sizes[0] * g.conv_out_sizes[1] > 1;
}

// An NCHW GEMM + col2im on the tiles (float32) over fewer than kCol2imNhwcMinPositions x positions in all (the batch's)
// runs with a row of cols per x position (transpose_gemm_rows): vectors along y channels x taps (cols' row, at least
// kCol2imRowsMinSpread), the weight read once in its own order. The NCHW GEMM puts its vectors along x's positions,
// which on so few fill one or two vectors, and cuts them into tiles of whole x rows that each read the whole weight
// (a batch-1 420 -> 221 7x7 input gradient over 5 x 5: 3 tiles of 10 or 5 positions, each 18 MB of weight). Each
// thread takes runs of kCol2imRowsRunMinColumns columns or more; a row shorter than two runs runs on one thread, so
// from kCol2imRowsMaxNarrowPositions positions, where the NCHW GEMM's vectors fill, it keeps the NCHW GEMM (it took
// 1-d calls over 58-60 positions with rows of 72-162: 1.10-1.32x, seeds 9-12). AVX2's tiles (4 rows x 3 vectors of 8)
// win only under kCol2imRowsMaxPositionsAvx2 positions (seeds 1-8: 7 calls there 0.37-0.88x; from 24 positions 12
// calls 0.59-1.29x). Random layers' calls, float32, 2 cores, AVX-512, the op alone, interleaved against the path
// before (benchmarks/RESULTS.md): 7 of seeds 1-4 and the suite 0.09-1.07x (geomean 0.51; 0.09 and 0.36 where torch's
// transposed conv had taken the call), 15 of seeds 5-8 0.36-1.02x (0.73), 11 of seeds 9-12 0.31-0.89x (0.64), 11 of
// seeds 13-16 (held out) 0.18-1.09x (0.69).
constexpr int64_t kCol2imRowsMinSpread = 64;
constexpr int64_t kCol2imRowsRunMinColumns = 128;
constexpr int64_t kCol2imRowsMaxNarrowPositions = 32;
constexpr int64_t kCol2imRowsMaxPositionsAvx2 = 24;
inline bool cpu_gemm_col2im_rows(const ConvGeometry& g, bool channels_last, CpuIsa isa, int64_t element_bytes,
                                 bool reduced_precision) {
  const int64_t positions = g.batch * g.conv_out_volume(), spread = g.conv_in_channels_per_group() * g.kernel_volume();
  const int64_t max_positions = isa >= CpuIsa::Avx512 ? kCol2imNhwcMinPositions : kCol2imRowsMaxPositionsAvx2;
  return !channels_last && element_bytes == 4 && !reduced_precision && positions < max_positions &&
         spread >= kCol2imRowsMinSpread &&
         (positions < kCol2imRowsMaxNarrowPositions || spread >= 2 * kCol2imRowsRunMinColumns);
}

// Whether a float32 transposed conv that the blocked kernel takes (zeros, or folded from the full transposed conv)
// runs the convs its stride phases are on conv's tap tiles instead: vectors along y's positions, where the blocked
// kernel's vectors along y's channels leave lanes empty. At stride 1, or on AVX-512 channels-last with a stride (each
// phase writing its y positions a stride apart: 8 random calls of seeds 1-16 1.07-1.66x faster than the blocked
// phases; AVX2 1 call 0.95x). Where cpu_tap_tiles takes the (first) phase's conv for its few output (y) channels per
// group: half a vector, or on AVX-512 NCHW's fewer than two vectors where the blocked kernel's vectors would leave 30%
// of their lanes or more empty (kTapTilesTransposeMaxLaneUse); not as an NCHW stem (a stem's alternative there is the
// column GEMM, here the blocked kernel). Random layers' calls, 2 cores (Sapphire Rapids),
// interleaved, against the blocked kernel (benchmarks/RESULTS.md): 10 of seeds 1-4 + suite 1.07-3.24x faster (geomean
// 1.92), 10 of seeds 5-12 1.15-2.59x, 10 of seeds 13-16 (held out) 1.06-2.70x (1.64), AVX2 5 of seeds 1-8
// 1.22-2.37x. Taking every conv cpu_tap_tiles takes, the stems ran 0.81-1.23x, and on AVX-512 NCHW convs to 13-29 y
// channels per group (the blocked kernel's lanes 72-94% used) 0.61-1.18x; on AVX2 the fewer-than-two-vectors rule
// 0.80-1.20x. bfloat16 and float16 keep the blocked kernel (not measured).
constexpr double kTapTilesTransposeMaxLaneUse = 0.7;
inline bool cpu_tap_tiles_transpose(const ConvGeometry& g, bool channels_last, CpuIsa isa, int64_t element_bytes,
                                    bool reduced_precision) {
  if (reduced_precision) return false;
  if (transpose_phase_count(g) != 1 && (!channels_last || isa < CpuIsa::Avx512)) return false;
  const TapTilesReason reason =
      cpu_tap_tiles_reason(transpose_phase_as_conv(g, 0).conv, channels_last, isa, element_bytes);
  if (reason == TapTilesReason::HalfVector) return true;
  const int64_t c_y = g.conv_in_channels_per_group(), lanes = cpu::kBlockedDirectVectorAvx512;
  return reason == TapTilesReason::TwoVectors && isa >= CpuIsa::Avx512 &&
         static_cast<double>(c_y) <= kTapTilesTransposeMaxLaneUse * static_cast<double>(ceil_div(c_y, lanes) * lanes);
}

inline bool cpu_blocked_transpose_wasteful(const ConvGeometry& g, CpuIsa isa) {
  return transpose_phase_count(g) == 1 && g.kernel_volume() > 1 &&
         g.conv_out_channels_per_group() >= kCol2imMinXChannels &&
         blocked_transpose_waste(g, isa) >= kBlockedTransposeMaxWaste;
}
inline bool cpu_blocked_transpose(const ConvGeometry& g, bool channels_last, CpuIsa isa, int64_t element_bytes) {
  if (isa == CpuIsa::Baseline || element_bytes != 4 || (!channels_last && g.kernel_volume() == 1)) return false;
  const int64_t c_in = g.conv_out_channels_per_group(), phases = transpose_phase_count(g);
  if (g.conv_in_volume() > kBlockedTransposeMaxGrowth * phases * g.conv_out_volume()) return false;
  const int64_t min_multiply_adds = phases > 1                        ? phases * kBlockedPhaseMinMultiplyAdds
                                    : g.mode != PaddingMode::Zeros ? kBlockedFoldedMinMultiplyAdds
                                                                     : 0;
  if (conv_multiply_adds(g) < min_multiply_adds) return false;
  if (c_in >= kTapGemmMinChannels) {
    if (phases == 1) {
      return g.kernel_volume() == 1 || g.conv_in_channels_per_group() >= kBlockedTransposeMinYChannels;
    }
    return isa >= CpuIsa::Avx512 && g.mode == PaddingMode::Zeros &&
           g.conv_in_channels_per_group() >= kTapGemmMinChannels && g.kernel_volume() >= phases &&
           g.batch * g.conv_in_volume() >= kBlockedWidePhaseMinPositions * phases;
  }
  return c_in > 0 && (phases == 1 || g.kernel_volume() >= 2 * phases) &&
         c_in * std::max<int64_t>(1, g.kernel_volume() / phases) >= kBlockedMinReduction;
}

// Whether the stride phases of a channels-last float32 transposed conv in zeros mode all read no padding of x
// (transpose_phase_as_conv: a kernel no wider than the stride along every dim, and crops that keep every phase's taps
// inside x), so that the blocked kernel reads x in place for each (cpu_blocked_no_planes). Where the blocked transpose
// takes the problem anyway, and where x has fewer than kTapGemmMinChannels channels per group and y at least
// kBlockedNoPlanesTransposeMinYChannels (the phase convs' output vectors half full on AVX-512) in place of the
// GEMM + col2im, whose GEMM reduces over those few x channels; every phase with a tap (a kernel at least as wide as
// the stride), since each phase costs a weight packing and a parallel region. Float32, 2 cores of a Zen 4,
// interleaved, against the path before (the col2im, or the blocked kernel on phase planes): the random layers' and
// the suite's calls 0.31-0.96x (9 of seeds 1-4 and the suite, geomean 0.67; random066's k2 s2 input gradient with 8
// channels per group 0.70x), 0.33-0.99x (5 of seeds 5-8, 0.63), 0.49-0.97x (4 of seeds 9-12, held out of the phase
// bound), AVX2 0.28-0.99x (8 of seeds 1-4, 0.68). Before the phase bound and the channel bounds: with 16 or more x
// channels per group or one y channel per group 1.38-2.75x on 6 calls of seeds 1-4 (0.86x on a 7th), kernels
// narrower than the stride 1.25-4.9x on 3 of seeds 5-8 (5-22 of 9-27 phases without taps).
constexpr int64_t kBlockedNoPlanesTransposeMinYChannels = 8;
inline bool transpose_phases_read_no_padding(const ConvGeometry& g) {
  for (int64_t phase = 0; phase < transpose_phase_count(g); ++phase) {
    if (!transpose_phase_as_conv(g, phase).conv.reads_no_padding()) return false;
  }
  return true;
}
inline bool cpu_blocked_no_planes_transpose(const ConvGeometry& g, bool channels_last, bool reduced_precision) {
  return channels_last && !reduced_precision && g.mode == PaddingMode::Zeros && transpose_phases_read_no_padding(g);
}
inline bool cpu_blocked_no_planes_transpose_few_x_channels(const ConvGeometry& g, bool channels_last,
                                                           bool reduced_precision, CpuIsa isa, int64_t element_bytes) {
  for (int d = 0; d < kMaxSpatial; ++d) {
    if (g.kernel[d] < g.stride[d]) return false;  // a phase without taps
  }
  return isa != CpuIsa::Baseline && element_bytes == 4 && g.conv_out_channels_per_group() > 0 &&
         g.conv_out_channels_per_group() < kTapGemmMinChannels &&
         g.conv_in_channels_per_group() >= kBlockedNoPlanesTransposeMinYChannels &&
         cpu_blocked_no_planes_transpose(g, channels_last, reduced_precision);
}

// Whether an NCHW transposed conv (x on the conv_out side, m channels per group; y, R) with several groups and more
// than one y channel per group runs depthwise.cpp's NCHW kernel (cpu_grouped_planes): each y plane's phase planes
// summed in registers over the group's m x channels and the taps, m x kernel volume multiply-adds per y position with
// no lane wasted, where the GEMM + col2im runs a GEMM of R rows and a col2im per group, and the blocked kernel gives
// each group's R y channels a vector of their own. Up to kGroupedPlanesMaxXChannels x channels per group and
// kGroupedPlanesMaxYChannels y channels (the range measured). Random NCHW layers, float32, 2 cores, the op alone,
// interleaved against the path before: with at most 4 x channels per group 0.14-0.79x its time on 29 calls of seeds
// 1-4, 0.09-0.91x on all 22 of seeds 5-8 (not used to set the bound); with 5-8, 0.30-1.51x (8 of 11 slower); with
// 12-51 mixed, 0.30-2.01x.
constexpr int64_t kGroupedPlanesMaxXChannels = 4;
constexpr int64_t kGroupedPlanesMaxYChannels = 16;
inline bool cpu_grouped_planes_transpose(const ConvGeometry& g, bool channels_last) {
  return !channels_last && g.groups > 1 && g.conv_in_channels_per_group() > 1 &&
         g.conv_in_channels_per_group() <= kGroupedPlanesMaxYChannels &&
         g.conv_out_channels_per_group() <= kGroupedPlanesMaxXChannels;
}

// The most elements of the full transposed conv's float32 buffer: an output-sized buffer beyond the output, which the
// GEMM + col2im (tiled) does not need, so long rows keep it.
constexpr int64_t kFoldedTransposeMaxElements = int64_t(1) << 24;

// Whether the folded transposed conv can run: y starts inside the full conv's positions along every dim (pad_lo >= 0;
// the fold narrows to y), and the full buffer is at most kFoldedTransposeMaxElements.
inline bool folded_transpose_fits(const ConvGeometry& g) {
  for (int d = 0; d < kMaxSpatial; ++d) {
    if (g.pad_lo[d] < 0) return false;
  }
  return g.batch * g.conv_in_channels * full_transpose_geometry(g).conv_in_volume() <= kFoldedTransposeMaxElements;
}

// Whether a channels-last transposed conv in reflect, replicate or circular mode (a conv's input gradient) runs the
// depthwise phases (cpu_depthwise_phases) over the full transposed conv (full_transpose_geometry: zeros), which
// fold_padding then folds into y (cpu_depthwise_phases_folded): where the phases would take the full conv, in
// float32 or float64 (the fold adds in the output's type), within folded_transpose_fits. Three passes over a
// y-sized buffer beyond the phases, so a depthwise conv with multiplier 1, whose scatter folds the mode in as it adds
// and stays near memory speed over few taps, keeps the scatter under kDepthwisePhasesFoldedMinTaps taps and under a
// vector of y channels (the per-pixel loop). Random channels-last layers, float32, 2 cores (Sapphire Rapids class),
// the op alone, interleaved against the path before (the scatter, the grouped scatter, the GEMM + col2im): 0.09-0.92x
// its time on 22 calls of seeds 1-24 with a multiplier or 20 taps and more (the bounds set on seeds 1-16; the 2 calls
// of seeds 17-24 0.21-0.24x), AVX2 0.11-0.99x on 11 of seeds 1-8; multiplier 1 over 4-16 taps 0.95-1.17x (3 calls),
// 2 channels over 49 taps 1.16x.
constexpr int64_t kDepthwisePhasesFoldedMinTaps = 20;
inline bool cpu_depthwise_phases_folded(const ConvGeometry& g, bool channels_last, bool reduced_precision,
                                        bool instead_of_grouped_scatter = false) {
  const bool multiplier = g.conv_in_channels > g.groups || g.conv_out_channels > g.groups;
  return g.mode != PaddingMode::Zeros && !reduced_precision && folded_transpose_fits(g) &&
         (multiplier ||
          (g.kernel_volume() >= kDepthwisePhasesFoldedMinTaps && g.conv_in_channels >= kDepthwisePhasesMinYChannels)) &&
         cpu_depthwise_phases(full_transpose_geometry(g), channels_last, instead_of_grouped_scatter);
}

// What the CUDA choice needs beyond the geometry: whether the input's channels load as aligned 16-byte vectors
// (channel_vectors(x) in conv_params.h; the depthwise vector kernels need it, the pipelined GEMMs get it from a copy),
// whether the GPU has cp.async and the tensor cores' mma.sync for bfloat16 and TF32 (sm_80 or later), and whether
// float32 may run on TF32 tensor cores (tf32_allowed() in conv_params.h: torch.backends.cudnn.allow_tf32, which torch's
// own CUDA convolutions follow).
struct CudaInputs {
  bool channel_vectors = false;
  bool sm80 = false;
  bool tf32 = false;
};

// Whether conv runs the pipelined tensor-core GEMM (cuda/pipelined_gemm.cuh) on sm_80 or later: bfloat16/float16, or
// float32 on TF32 tensor cores where TF32 is allowed (exact float32 runs the FMA GEMM, as torch runs it without TF32),
// and whole 16-byte vectors of input channels in every group. It loads each position's channels as 16-byte vectors:
// an input without them (NCHW, (N, C, L), or misaligned) is first copied channels-contiguous, and the output back
// (cuda_stages_channels). The implicit GEMM it replaces there gathers element by element: on an H100 (bfloat16,
// batch 256) it ran the 1-d layers and stems at 1.7-7.3 TFLOP/s, 3-16x F.pad + cuDNN's time, where the pipelined GEMM
// ran channels_last layers at 40-90 TFLOP/s; the copies cost a pass over input and output each (not yet measured).
//
// The input channels per group it reads from each position (cuda_pipelined_channels): Cg_in where those are whole
// 16-byte vectors. Fewer channels than one vector in a single group (an RGB stem's 3: 8 bfloat16 or 4 float32 lanes)
// are rounded up to one vector, where that at most triples them: the binding's channels-contiguous copy of x fills the
// added channels with zeros and its copy of the weight gives them zero taps, so they add nothing to any sum. conv and
// its weight gradient pad (pad_channels); conv_transpose's stride phases do not; conv takes cuda_few_channels first,
// so it pads only more than kFewChannelsMax channels (5-7 16-bit ones). The element-gather implicit GEMM they replace
// ran tf_efficientnet_b0's stem (bfloat16, batch 256, H200, 2026-12-04) in 3.5 ms, 5x F.pad + cuDNN.
constexpr int64_t kMaxChannelPaddingFactor = 3;
inline int64_t cuda_pipelined_channels(const ConvGeometry& g, int64_t storage_bytes, bool pad_channels) {
  const int64_t lanes = cuda::kVectorBytes / storage_bytes, channels = g.conv_in_channels_per_group();
  if (channels % lanes == 0) return channels;
  return pad_channels && g.groups == 1 && channels < lanes && lanes <= kMaxChannelPaddingFactor * channels ? lanes
                                                                                                           : 0;
}
inline bool cuda_pipelined_gemm(const ConvGeometry& g, int64_t element_bytes, bool reduced_precision,
                                const CudaInputs& cuda, bool pad_channels) {
  const int64_t storage_bytes = reduced_precision ? 2 : element_bytes;
  const bool tensor_cores = reduced_precision || (storage_bytes == 4 && cuda.tf32);
  return cuda.sm80 && tensor_cores && cuda_pipelined_channels(g, storage_bytes, pad_channels) > 0;
}

// Whether a depthwise conv or conv_transpose runs the channel-vector kernel (cuda/depthwise_vectors.cuh; a
// conv_transpose as the convs its stride phases are): channels-last on sm_80 or later with the channels in whole
// 16-byte vectors and one output channel per input channel. (conv_transpose also needs zeros mode: it folds no
// padding back.)
inline bool cuda_depthwise_vectors(const ConvGeometry& g, bool channels_last, int64_t element_bytes,
                                   bool reduced_precision, const CudaInputs& cuda) {
  const int64_t storage_bytes = reduced_precision ? 2 : element_bytes;
  return channels_last && cuda.sm80 && cuda.channel_vectors && g.conv_in_channels == g.groups &&
         g.conv_out_channels == g.groups && g.conv_in_channels % (cuda::kVectorBytes / storage_bytes) == 0;
}

// Whether a CUDA conv runs the few-channels kernel (conv.cu: few_channels_kernel): one group of at most
// kFewChannelsMax input channels, an RGB stem. Its reduction (taps x channels: 27 for a 3x3 RGB stem) is too short
// for a GEMM: each thread sums kFewChannelsOutputs output channels of one position directly, on the FMA units, in any
// dtype, layout and padding mode. The pipelined GEMM it replaces there ran on x padded to one 16-byte vector of
// channels (3 -> 8 bfloat16), a copy plus 2.7x the loads and multiply-adds: tf_efficientnet_b0's stem (bfloat16,
// batch 256, H200) took 1.50 ms forward, 2.2x F.pad + cuDNN. The few-channels kernel has not run on a GPU.
constexpr int64_t kFewChannelsMax = 4;
inline bool cuda_few_channels(const ConvGeometry& g) {
  return g.groups == 1 && g.conv_in_channels > 0 && g.conv_in_channels <= kFewChannelsMax;
}

// Whether a channels-last float32 conv runs cpu/channel_dots.h: few output channels per group (at most
// kChannelDotsMaxOutAvx512 or kChannelDotsMaxOutAvx2), where the blocked kernel's vectors along them leave most lanes
// empty; at least kChannelDotsMinInChannels input channels per group (two AVX-512 vectors, four AVX2 ones), along
// which the dot products' vectors run; and at least kChannelDotsMinReduction products in each output value (input
// channels x taps per group), which repay a pixel's fixed costs (listing its taps, summing its vectors' lanes).
// choose_conv_path asks only where the tap tiles, whose vectors run along the output positions, do not take the call:
// against them the dot products ran 1.04-2.49x their time (11 of 12 random calls). The bounds were set on random
// layers' channels-last calls (float32, 2 cores, Zen 4, the op alone, interleaved, against the path before): on
// AVX-512, 7 output channels ran 0.39-1.30x (9 calls; the losers had 45-61 input channels) and 8 0.90-2.03x (8 calls);
// on AVX2, 5-8 output channels 0.64-1.84x (12 of 19 calls above 1.0), and 16-31 input channels 0.23-1.82x (2 of 13
// above 1.0); a reduction of 42-116 products (1x1 kernels) 0.87-1.55x. Within them (benchmarks/RESULTS.md): AVX-512
// 15 calls of seeds 1-24 and the suite 0.12-0.56x (geomean 0.35), 54 of seeds 25-104 0.14-0.90x (0.44); AVX2 23 of
// seeds 1-64 0.20-0.95x (0.48).
constexpr int64_t kChannelDotsMaxOutAvx512 = 6;
constexpr int64_t kChannelDotsMaxOutAvx2 = 4;
constexpr int64_t kChannelDotsMinInChannels = 32;
constexpr int64_t kChannelDotsMinReduction = 128;
inline bool cpu_channel_dots(const ConvGeometry& g, bool channels_last, CpuIsa isa, int64_t element_bytes,
                             bool reduced_precision) {
  if (!channels_last || reduced_precision || element_bytes != 4 || isa < CpuIsa::Avx2) return false;
  const int64_t most_out = isa >= CpuIsa::Avx512 ? kChannelDotsMaxOutAvx512 : kChannelDotsMaxOutAvx2;
  return g.conv_out_channels_per_group() <= most_out && g.conv_in_channels_per_group() >= kChannelDotsMinInChannels &&
         g.conv_in_channels_per_group() * g.kernel_volume() >= kChannelDotsMinReduction;
}

// The kernel path of a conv. element_bytes: the size of the accumulation type, which sizes the CUDA halo patch and
// picks the CPU kernels that accumulate in float. reduced_precision: bfloat16 or float16 tensors. isa:
// cpu_isa_for(input), in conv_params.h (ignored for CUDA).
inline ConvPath choose_conv_path(const ConvGeometry& g, Backend backend, bool channels_last, int64_t element_bytes,
                                 bool reduced_precision, CpuIsa isa, const CudaInputs& cuda = {}) {
  if (backend == Backend::Cuda) {
    if (cuda_few_channels(g)) return ConvPath::CudaFewChannels;
    if (cuda_pipelined_gemm(g, element_bytes, reduced_precision, cuda, /*pad_channels=*/true)) {
      return ConvPath::CudaPipelinedGemm;
    }
    if (g.conv_in_channels_per_group() != 1) return ConvPath::CudaImplicitGemm;
    if (cuda_depthwise_vectors(g, channels_last, element_bytes, reduced_precision, cuda)) {
      return ConvPath::CudaDepthwiseVectors;
    }
    if (!channels_last && cuda::row_plan(g, element_bytes).fits) return ConvPath::CudaDepthwiseRows;
    return !channels_last && cuda::halo_plan(g, element_bytes).fits ? ConvPath::CudaDepthwiseHalo
                                                                     : ConvPath::CudaDirect;
  }
  if (cpu_leaves_to_torch(g, channels_last, torch_pads_match(g), reduced_precision, isa, /*transposed=*/false)) {
    return ConvPath::CpuTorch;
  }
  if (cpu_depthwise_strided_planes(g, channels_last, element_bytes)) return ConvPath::CpuDepthwiseStridedPlanes;
  const bool avx512_tiles = cpu_nhwc_conv_tiles_avx512(g, channels_last, isa, element_bytes, reduced_precision);
  if (cpu_depthwise(g, channels_last, /*expanded_rows=*/true)) {
    if (cpu_depthwise_channel_blocks(g, channels_last, element_bytes, avx512_tiles)) {
      return avx512_tiles ? ConvPath::CpuDepthwiseChannelBlocksAvx512 : ConvPath::CpuDepthwiseChannelBlocks;
    }
    return channels_last && avx512_tiles ? ConvPath::CpuDepthwiseAvx512 : ConvPath::CpuDepthwise;
  }
  if (cpu_grouped_expanded(g, channels_last) &&
      !cpu_tap_tiles_over_grouped_expanded(g, channels_last, isa, element_bytes, reduced_precision)) {
    return avx512_tiles ? ConvPath::CpuGroupedExpandedAvx512 : ConvPath::CpuGroupedExpanded;
  }
  if (cpu_grouped_planes(g, channels_last)) return ConvPath::CpuGroupedPlanes;
  if (cpu_tap_tiles(g, channels_last, isa, element_bytes)) {
    return isa >= CpuIsa::Avx512 ? ConvPath::CpuTapTilesAvx512 : ConvPath::CpuTapTilesAvx2;
  }
  if (cpu_channel_dots(g, channels_last, isa, element_bytes, reduced_precision)) {
    return isa >= CpuIsa::Avx512 ? ConvPath::CpuChannelDotsAvx512 : ConvPath::CpuChannelDotsAvx2;
  }
  if (cpu_blocked_direct(g, channels_last, isa, element_bytes)) {
    if (cpu_blocked_no_planes(g, channels_last, reduced_precision)) {
      return isa >= CpuIsa::Avx512 ? ConvPath::CpuBlockedNoPlanesAvx512 : ConvPath::CpuBlockedNoPlanesAvx2;
    }
    if (cpu_grouped_planes_over_channels_last(g, channels_last)) return ConvPath::CpuGroupedPlanes;
    if (isa == CpuIsa::Avx512Bf16 && g.conv_in_channels_per_group() % 2 == 0) return ConvPath::CpuBlockedAvx512Bf16;
    return isa >= CpuIsa::Avx512 ? ConvPath::CpuBlockedAvx512 : ConvPath::CpuBlockedAvx2;
  }
  if (!channels_last) {
    return g.conv_in_channels_per_group() >= kTapGemmMinChannels ? ConvPath::CpuTapGemms : ConvPath::CpuColumnGemm;
  }
  if (g.conv_in_channels_per_group() < kTapGemmMinChannels) return ConvPath::CpuChannelsLastDirect;
  return g.groups == 1 ? ConvPath::CpuChannelsLastPhasePlanes : ConvPath::CpuChannelsLastIm2col;
}

// An NCHW depthwise transposed conv (multiplier 1) at stride 1 in zeros mode is one conv, of x by the flipped taps (its
// one stride phase, transpose_phase_as_conv): conv's channel blocks take it where they take that conv
// (cpu_depthwise_channel_blocks), instead of the NCHW scatter. A depthwise conv's input gradient at stride 1 is one.
inline std::optional<ConvTransposePath> cpu_depthwise_channel_blocks_transpose(const ConvGeometry& g,
                                                                              bool channels_last, CpuIsa isa,
                                                                              int64_t element_bytes,
                                                                              bool reduced_precision) {
  if (channels_last || g.mode != PaddingMode::Zeros || transpose_phase_count(g) != 1) return std::nullopt;
  const ConvGeometry conv = transpose_phase_as_conv(g, 0).conv;
  const bool avx512_tiles = cpu_nhwc_conv_tiles_avx512(conv, channels_last, isa, element_bytes, reduced_precision);
  if (!cpu_depthwise_channel_blocks(conv, channels_last, element_bytes, avx512_tiles)) return std::nullopt;
  return avx512_tiles ? ConvTransposePath::CpuDepthwiseChannelBlocksAvx512 : ConvTransposePath::CpuDepthwiseChannelBlocks;
}

// Whether an NCHW depthwise transposed conv (one x and one y channel per group) in zeros mode runs as its stride
// phases' convs on blocks of channels (conv_transpose_nchw_channel_block_phases): per image and block of channels, x's
// planes transposed into a channels-last image, the channels-last phases (cpu_depthwise_phases' TransposePhaseRows)
// writing the block's y row by row in registers over every tap, and y transposed back, instead of the NCHW scatter,
// which adds each tap into y's phase planes in turn. Float accumulation only; where every stride phase takes a tap
// and each y position two taps or more on average (the kernel's taps at least twice the phases), and x rows hold at
// most kChannelBlockPhasesMaxRow positions: the two transposes cost about what a tap does, a phase no tap reaches is
// a pass of its own, and the scatter's long rows are long vector runs already. Float32, 2 cores (Zen 5),
// conv_transpose alone, interleaved, against the scatter (benchmarks/RESULTS.md): before these bounds, 37 calls of
// random seeds 1-8 and the suite 0.32-1.55x its time, the ones above 1.05x 1-tap kernels (a 2x2 at stride 2 1.55x)
// and 1-d rows of 180-4096 x positions (1.13-1.27x); within them, 19 calls 0.31-1.02x, geomean 0.57 (the suite's ten
// strided depthwise input gradients 0.31-0.67x, B0's k5 s2 672-channel layer 1.72 -> 0.54 ms). Held out, seeds 9-20:
// 19 calls 0.38-1.41x, geomean 0.71 (a k4 s2 d2 kernel, whose taps all land in one phase, had taken 1.90x before
// the phase bound; above 1.0x only a 21 us 1-d call, 1.41x).
constexpr int64_t kChannelBlockPhasesMaxRow = 128;
inline bool cpu_depthwise_channel_block_phases(const ConvGeometry& g, bool channels_last, int64_t element_bytes) {
  if (g.mode != PaddingMode::Zeros || element_bytes != 4 || !nchw_channel_blocks_fit(g, channels_last, element_bytes) ||
      g.kernel_volume() < 2 * transpose_phase_count(g) || g.conv_out_sizes[2] > kChannelBlockPhasesMaxRow) {
    return false;
  }
  for (int64_t phase = 0; phase < transpose_phase_count(g); ++phase) {
    if (transpose_phase_as_conv(g, phase).conv.kernel_volume() == 0) return false;
  }
  return true;
}

// Whether an NCHW transposed conv's shape suits the phase planes (cpu_phase_planes_*): enough channels on both sides
// and x positions per image slice.
inline bool cpu_phase_plane_transpose_shape(const ConvGeometry& g, bool channels_last) {
  return !channels_last && g.conv_in_channels_per_group() >= kTapGemmMinChannels &&
         g.conv_out_channels_per_group() >= kTapGemmMinChannels &&
         g.conv_out_sizes[1] * g.conv_out_sizes[2] >= kTapGemmMinPositions;
}

// Whether an NCHW strided transposed conv in zeros mode that the blocked kernel would run as its stride phases runs on
// the phase planes' tap GEMMs instead (cpu_phase_planes_avx512: float accumulation on AVX-512): 2-d (one tap and
// stride 1 along depth), strided along H and W, each kernel dim a multiple of its stride with at most
// kPhasePlanesMaxTapsPerPhase taps per phase along it (every phase the same few taps), and kPhasePlanesMinXChannels
// x channels per group or more (the GEMMs' reduction).
// There the blocked kernel's gather of channel-contiguous x planes and the transpose of its outputs back to NCHW took
// a fifth of its time (UNet's k2 s2: 12% and 7% of the samples), where the tap GEMMs read x's planes as they are.
// 2 cores (Zen 4), the op alone, interleaved, against the blocked kernel (benchmarks/RESULTS.md): the 8 calls of random
// seeds 1-56 and the suite 0.49-1.02x its time, geomean 0.75 (UNet's k2 s2 0.88-0.95x and k4 s2 0.93-0.97x over four
// runs; the 4 of seeds 25-56, held out, 0.58-1.02x); bfloat16 1 call, 0.66x. Not 1-d (HiFi-GAN's k4 s2 0.90x, but 3
// random 1-d calls 1.09-1.70x) and not under 24 x channels (16 x channels to 271 y channels, k4 s2: 1.34x).
constexpr int64_t kPhasePlanesMaxTapsPerPhase = 2;
constexpr int64_t kPhasePlanesMinXChannels = 24;
inline bool cpu_phase_planes_over_blocked(const ConvGeometry& g, bool channels_last, CpuIsa isa,
                                          int64_t element_bytes) {
  if (g.mode != PaddingMode::Zeros || isa < CpuIsa::Avx512 || !cpu_reduction_tiles(isa, element_bytes) ||
      !cpu_phase_plane_transpose_shape(g, channels_last) ||
      g.conv_out_channels_per_group() < kPhasePlanesMinXChannels) {
    return false;
  }
  if (g.kernel[0] != 1 || g.stride[0] != 1) return false;
  for (int d = 1; d < kMaxSpatial; ++d) {
    if (g.stride[d] == 1 || g.dilation[d] != 1 || g.kernel[d] % g.stride[d] != 0 ||
        g.kernel[d] / g.stride[d] > kPhasePlanesMaxTapsPerPhase) {
      return false;
    }
  }
  return true;
}

// Whether a channels-last grouped transposed conv that the blocked kernel would take on AVX-512 runs instead as its
// stride phases' grouped convs over x rows expanded per thread (cpu_depthwise_phases with instead_of_grouped_scatter,
// or its folded twin in another mode): the blocked kernel's phase convs give each group's R y channels a vector of 16
// lanes of their own, so at most kGroupedPhasesMaxYPerGroup y channels per group use a quarter of them or less, where
// the phases' tiles run along all of y's channels (at least kGroupedPhasesMinYChannels: a whole AVX-512 vector), each
// lane reading its own group's expanded x channels. A 1x1 kernel reads each expanded value once, which the expansion
// does not repay (a 424 -> 16 channel 1x1, 53 x channels per group: 1.27x the time), hence two taps or more. AVX2's
// blocked vectors hold 8 lanes, of which 3 y channels per group fill more: there the phases ran 0.46-1.71x the
// blocked kernel's time (18 calls of seeds 1-56), so AVX2 keeps it. Random channels-last layers, the op alone, 2
// cores (Zen 4), interleaved against the blocked kernel (benchmarks/RESULTS.md): float32, 6 calls of seeds 1-24 and
// the suite 0.39-0.69x its time (seed 7's random091, 96 <- 256 channels in 32 groups, k6 3-d replicate: 15.9 -> 6.9
// ms), held out, seeds 25-56, 3 calls 0.17-0.71x (27.4 -> 4.7 ms); bfloat16 16 calls of seeds 1-56 0.22-0.70x.
constexpr int64_t kGroupedPhasesMaxYPerGroup = 4, kGroupedPhasesMinYChannels = 16;
inline bool cpu_grouped_phases_over_blocked(const ConvGeometry& g, bool channels_last, CpuIsa isa) {
  return channels_last && isa >= CpuIsa::Avx512 && g.groups > 1 && !cpu_depthwise(g, channels_last) &&
         g.conv_in_channels_per_group() <= kGroupedPhasesMaxYPerGroup &&
         g.conv_in_channels >= kGroupedPhasesMinYChannels && g.kernel_volume() >= 2;
}

// The CPU path of conv_transpose among fastpad's own kernels (choose_conv_transpose_path's arguments).
template <class WeightFinite>
ConvTransposePath choose_cpu_own_transpose_path(const ConvGeometry& g, bool channels_last, int64_t element_bytes,
                                                bool reduced_precision, CpuIsa isa, WeightFinite&& weight_finite) {
  if (cpu_depthwise_strided_planes(g, channels_last, element_bytes)) {
    return ConvTransposePath::CpuDepthwiseStridedPlanes;
  }
  // The tiles run over y's channels, those of the phase convs' output.
  const auto depthwise_phases = [&](bool folded) {
    const bool avx512_tiles = cpu_nhwc_conv_tiles_avx512(
        transpose_phase_as_conv(folded ? full_transpose_geometry(g) : g, 0).conv, channels_last, isa, element_bytes,
        reduced_precision);
    if (folded) {
      return avx512_tiles ? ConvTransposePath::CpuDepthwisePhasesFoldedAvx512
                          : ConvTransposePath::CpuDepthwisePhasesFolded;
    }
    return avx512_tiles ? ConvTransposePath::CpuDepthwisePhasesAvx512 : ConvTransposePath::CpuDepthwisePhases;
  };
  const auto phases_path = [&](bool instead_of_grouped_scatter) -> std::optional<ConvTransposePath> {
    if (cpu_depthwise_phases(g, channels_last, instead_of_grouped_scatter)) return depthwise_phases(/*folded=*/false);
    if (cpu_depthwise_phases_folded(g, channels_last, reduced_precision, instead_of_grouped_scatter)) {
      return depthwise_phases(/*folded=*/true);
    }
    return std::nullopt;
  };
  // One x channel per group and more y channels than kDepthwisePhasesMaxYPerX: the phases only where the GEMM + col2im
  // would take the call.
  const bool many_y_per_x =
      g.conv_out_channels == g.groups && g.conv_in_channels_per_group() > kDepthwisePhasesMaxYPerX;
  if (!many_y_per_x) {
    if (const auto path = phases_path(/*instead_of_grouped_scatter=*/false)) return *path;
  }
  if (const auto path = cpu_depthwise_channel_blocks_transpose(g, channels_last, isa, element_bytes,
                                                               reduced_precision)) {
    return *path;
  }
  if (cpu_depthwise_channel_block_phases(g, channels_last, element_bytes)) {
    return cpu_nhwc_tiles_avx512(g, channels_last, isa, element_bytes)
               ? ConvTransposePath::CpuDepthwiseChannelBlockPhasesAvx512
               : ConvTransposePath::CpuDepthwiseChannelBlockPhases;
  }
  if (cpu_depthwise(g, channels_last)) return ConvTransposePath::CpuDepthwise;
  if (cpu_grouped_planes_transpose(g, channels_last)) return ConvTransposePath::CpuGroupedPlanes;
  // Each stride phase is a conv (transpose_phase_as_conv), whose reduction runs over x's channels. Like the phase
  // planes, those convs multiply weights by the zeros around x, so they take only finite weights.
  // Another padding mode runs the full transposed conv and folds (float32 only: the fold adds in the output's type).
  const bool folded = g.mode != PaddingMode::Zeros;
  const bool blocked = cpu_blocked_transpose(g, channels_last, isa, element_bytes) ||
                       cpu_blocked_no_planes_transpose_few_x_channels(g, channels_last, reduced_precision, isa,
                                                                      element_bytes);
  if (cpu_grouped_expanded_transpose(g, channels_last) &&
      (folded || !blocked || g.groups >= kGroupedExpandedTransposeOverBlockedMinGroups)) {
    if (const auto path = phases_path(/*instead_of_grouped_scatter=*/true)) return *path;
    return ConvTransposePath::CpuGroupedExpanded;
  }
  const bool tiles = cpu_reduction_tiles(isa, element_bytes), avx512 = isa >= CpuIsa::Avx512;
  const bool nhwc = tiles && cpu_gemm_col2im_nhwc(g, channels_last, element_bytes, reduced_precision);
  const bool rows = tiles && cpu_gemm_col2im_rows(g, channels_last, isa, element_bytes, reduced_precision);
  const ConvTransposePath gemm_col2im = !tiles ? ConvTransposePath::CpuGemmCol2im
                                        : avx512 ? (nhwc ? ConvTransposePath::CpuGemmCol2imNhwcAvx512
                                                    : rows ? ConvTransposePath::CpuGemmCol2imRowsAvx512
                                                           : ConvTransposePath::CpuGemmCol2imAvx512)
                                                 : (nhwc ? ConvTransposePath::CpuGemmCol2imNhwcAvx2
                                                    : rows ? ConvTransposePath::CpuGemmCol2imRowsAvx2
                                                           : ConvTransposePath::CpuGemmCol2imAvx2);
  if (blocked && (!folded || (!reduced_precision && folded_transpose_fits(g))) && weight_finite()) {
    if (cpu_phase_planes_over_blocked(g, channels_last, isa, element_bytes)) {
      return ConvTransposePath::CpuPhasePlanesAvx512;
    }
    if (cpu_blocked_transpose_wasteful(g, isa)) return gemm_col2im;
    if (cpu_tap_tiles_transpose(g, channels_last, isa, element_bytes, reduced_precision)) {
      if (avx512) return folded ? ConvTransposePath::CpuTapTilesFoldedAvx512 : ConvTransposePath::CpuTapTilesAvx512;
      return folded ? ConvTransposePath::CpuTapTilesFoldedAvx2 : ConvTransposePath::CpuTapTilesAvx2;
    }
    if (cpu_blocked_no_planes_transpose(g, channels_last, reduced_precision)) {
      return isa >= CpuIsa::Avx512 ? ConvTransposePath::CpuBlockedNoPlanesAvx512
                                   : ConvTransposePath::CpuBlockedNoPlanesAvx2;
    }
    if (cpu_grouped_phases_over_blocked(g, channels_last, isa)) {
      if (const auto path = phases_path(/*instead_of_grouped_scatter=*/true)) return *path;
    }
    if (isa >= CpuIsa::Avx512) {
      return folded ? ConvTransposePath::CpuBlockedFoldedAvx512 : ConvTransposePath::CpuBlockedAvx512;
    }
    return folded ? ConvTransposePath::CpuBlockedFoldedAvx2 : ConvTransposePath::CpuBlockedAvx2;
  }
  if (many_y_per_x) {
    if (const auto path = phases_path(/*instead_of_grouped_scatter=*/false)) return *path;
  }
  if (!cpu_phase_plane_transpose_shape(g, channels_last) || !weight_finite()) return gemm_col2im;
  // So do NCHW calls with kCol2imMinXChannels x channels per group or more on AVX-512 in float32: one GEMM over x's
  // channels for every tap, where the phase planes run a GEMM per tap (random layers' calls, float32, 2 cores,
  // interleaved: 0.31-1.02x the phase planes' time on 6 of seeds 1-4 and the suite, geomean 0.60; 0.42-0.93x on the 5
  // of seeds 5-8, held out, 0.67). AVX2 keeps the phase planes: there the suite's UNet and HiFi-GAN k4 s2 transposed
  // convs, which AVX-512 runs as blocked phases, ran 1.42-1.53x on GEMM + col2im.
  if (tiles && avx512 && !reduced_precision && g.conv_out_channels_per_group() >= kCol2imMinXChannels) {
    return gemm_col2im;
  }
  if (!tiles) return ConvTransposePath::CpuPhasePlanes;
  return avx512 ? ConvTransposePath::CpuPhasePlanesAvx512 : ConvTransposePath::CpuPhasePlanesAvx2;
}

constexpr int64_t kBlockedTransposeMinPositions = 256;
constexpr int64_t kCol2imMaxRowsPerChannel = 4;

// conv_transpose (its input x is on the geometry's conv_out side, its output y on the conv_in side). element_bytes,
// reduced_precision and isa as for conv.
// weight_finite() says whether the weight holds no inf or NaN; the CPU phase planes and the stride-1 blocked conv
// multiply weights by the zeros of positions outside x, so they take only finite weights. It reads the whole weight,
// so it is called only where one of them would otherwise be chosen.
template <class WeightFinite>
ConvTransposePath choose_conv_transpose_path(const ConvGeometry& g, Backend backend, bool channels_last,
                                             int64_t element_bytes, bool reduced_precision, CpuIsa isa,
                                             WeightFinite&& weight_finite, const CudaInputs& cuda = {}) {
  const bool strided = g.stride[0] * g.stride[1] * g.stride[2] > 1;
  if (backend == Backend::Cuda) {
    // Each stride phase is a conv (transpose_phase_as_conv), run on the pipelined GEMM when conv would take it (the
    // phases differ only in their taps and sizes). Like the phase GEMMs, the convs multiply weights by the zeros
    // around x, and add no padding mode's folds: the kernels' gather pass then folds padded positions back and
    // recomputes the outputs where an inf or NaN weight met a zero (a device flag: the choice reads no values).
    if (cuda_pipelined_gemm(transpose_phase_as_conv(g, 0).conv, element_bytes, reduced_precision, cuda,
                            /*pad_channels=*/false)) {
      return ConvTransposePath::CudaPipelinedGemm;
    }
    if (g.mode == PaddingMode::Zeros &&
        cuda_depthwise_vectors(g, channels_last, element_bytes, reduced_precision, cuda)) {
      return ConvTransposePath::CudaDepthwiseVectors;
    }
    // At stride 1 in zeros mode a 1-d depthwise layer (one x channel per y channel) is the conv its one stride
    // phase is, a single row: the rows kernel, where it had gathered every tap of every element (Mamba's causal k4
    // conv, batch 256, bfloat16: 462.8 ms of input and weight gradients on an H100, against 68.8 ms forward).
    if (g.mode == PaddingMode::Zeros && !strided && !channels_last && g.conv_in_channels == g.groups &&
        g.conv_out_channels == g.groups && cuda::row_plan(transpose_phase_as_conv(g, 0).conv, element_bytes).fits) {
      return ConvTransposePath::CudaDepthwiseRows;
    }
    if (g.conv_out_channels_per_group() < cuda::kPhaseGemmMinChannels) return ConvTransposePath::CudaDirectGather;
    return g.mode == PaddingMode::Zeros ? ConvTransposePath::CudaPhaseGemm : ConvTransposePath::CudaPhaseGemmFold;
  }
  if (!cpu_leaves_to_torch(g, channels_last, torch_crop_matches(g), reduced_precision, isa, /*transposed=*/true)) {
    return choose_cpu_own_transpose_path(g, channels_last, element_bytes, reduced_precision, isa, weight_finite);
  }
  // torch's own transposed convolution takes the call where it measured faster than fastpad's own kernels.
  // - float32 on AVX-512: fastpad's kernels (the random layers' and the suite's calls this moved from torch, float32,
  //   2 cores, interleaved: 0.17-1.06x torch's time on 23 calls of seeds 1-4 and the suite, geomean 0.65; 0.16-0.94x,
  //   0.45, on 24 of seeds 5-8), except two shapes where torch's was the faster: the blocked kernel over fewer than
  //   kBlockedTransposeMinPositions x positions, whose packed weights so few positions do not repay (a 243 -> 178 k7
  //   'same' input gradient over 8 x 8: 2.3-4.1x torch's time), and GEMM + col2im whose y channels x taps per group
  //   (cols' rows) outnumber x's channels per group more than kCol2imMaxRowsPerChannel times, where col2im's scatter
  //   outweighs the GEMM (6 calls with 6.1-364 rows per x channel: 1.07-2.22x; 14 with 0.04-2.5, 0.23-0.97x; 3 with
  //   6.9-280 had been faster, 0.19-0.94x). Set on seeds 1-8: no seed was held out of the col2im bound. The GEMM
  //   with a row of cols per x position (cpu_gemm_col2im_rows) keeps its calls: the two such calls torch had taken ran
  //   there in 0.09x and 0.36x torch's time (a 367 -> 300 7x7x7 over one x position: 74.2 -> 6.4 ms).
  // - otherwise torch, except where fastpad's phase planes run with a stride: oneDNN's strided deconvolution is slow
  //   there (HiFi-GAN k4 s2 over 2048 samples: torch 2.4x fastpad's time), while at stride 1 (resnet50 k3 64 channels
  //   @56: fastpad 1.37x torch's) and where fastpad takes GEMM + col2im (HiFi-GAN k16 s8 over 32 samples: fastpad
  //   1.57x) torch is the faster (float64, no tiles). In bfloat16 on AVX512_BF16 torch's is the faster there too
  //   (HiFi-GAN k4 s2: 0.62x fastpad's time; the random layers' and the suite's calls, fastpad's 0.04-6.4x torch's,
  //   geomean 1.02). fastpad's AVX2 kernels were measured only against torch's AVX-512 ones (0.21-1.92x, geomean
  //   0.91), so AVX2 keeps this rule.
  if (reduced_precision || element_bytes != 4 || isa < CpuIsa::Avx512) {
    const bool strided_phase_planes =
        cpu_phase_plane_transpose_shape(g, channels_last) && strided && !reduced_precision;
    return strided_phase_planes
               ? choose_cpu_own_transpose_path(g, channels_last, element_bytes, reduced_precision, isa, weight_finite)
               : ConvTransposePath::CpuTorch;
  }
  const ConvTransposePath own =
      choose_cpu_own_transpose_path(g, channels_last, element_bytes, reduced_precision, isa, weight_finite);
  const int64_t col_rows = g.conv_in_channels_per_group() * g.kernel_volume();
  const bool torch_faster =
      (own == ConvTransposePath::CpuBlockedAvx512 && g.batch * g.conv_out_volume() < kBlockedTransposeMinPositions) ||
      ((own == ConvTransposePath::CpuGemmCol2imAvx512 || own == ConvTransposePath::CpuGemmCol2imNhwcAvx512) &&
       col_rows > kCol2imMaxRowsPerChannel * g.conv_out_channels_per_group());
  return torch_faster ? ConvTransposePath::CpuTorch : own;
}

// Whether conv_weight_grad runs the pipelined tensor-core GEMM (cuda/pipelined_gemm.cuh) on sm_80 or later:
// bfloat16/float16, or float32 on TF32 where allowed (as for conv), and whole 16-byte vectors of input and output
// channels in every group (input channels padded as for conv: cuda_pipelined_channels); x and grad_output without
// channel vectors are copied channels-contiguous first, as for conv.
inline bool cuda_pipelined_weight_grad(const ConvGeometry& g, int64_t element_bytes, bool reduced_precision,
                                       const CudaInputs& cuda) {
  const int64_t storage_bytes = reduced_precision ? 2 : element_bytes;
  return cuda_pipelined_gemm(g, element_bytes, reduced_precision, cuda, /*pad_channels=*/true) &&
         g.conv_out_channels_per_group() % (cuda::kVectorBytes / storage_bytes) == 0;
}

// A grouped channels-last weight gradient runs the NCHW kernels (the phase planes; depthwise with a multiplier, the
// depthwise kernel) on NCHW copies of the input and grad_output: the channels-last GEMM's im2col copies each group's
// channels of each tap of each pixel, a run of 1-17 values, where the phase planes copy rows. Copies included, on 17
// grouped channels-last random layers (float32, 2 cores) they took 0.16-0.80x its time where an image has 96 output
// positions or more, and 1.32x and 1.51x with 20. One group keeps the channels-last GEMM (9 layers: 0.83-1.58x).
// So does a grouped one (not depthwise) whose input holds as many elements as grad_output times the taps or more
// (nchw_weight_grad_copies_repaid): x's copy then outweighs the kernels' reads, as where a kernel shorter than its
// stride skips input positions (a 3-d g32 k2 s3 layer over 23^3: the copy 27% of its forward+backward). Random layers,
// float32, 2 cores, the op alone, interleaved: 0.09-1.14x the NCHW copies' time on 9 calls of seeds 1-4 (geomean
// 0.33), 0.08-1.85x on 16 of seeds 5-8 (0.46; above 1.0 only two calls under 0.06 ms); AVX2 0.08-1.29x (0.35).
constexpr int64_t kWeightGradNchwMinPositions = 64;
inline bool nchw_weight_grad_copies_repaid(const ConvGeometry& g) {
  return cpu_depthwise(g, /*channels_last=*/false) ||
         g.conv_in_channels * g.conv_in_volume() < g.conv_out_channels * g.conv_out_volume() * g.kernel_volume();
}

// Whether a channels-last depthwise weight gradient with a multiplier reads x's rows expanded in place (ExpandedRows,
// as the forward does) rather than NCHW copies of x and gy: where the output rows hold kExpandedWeightGradMinColumns
// positions or more, or the output has under kWeightGradNchwMinPositions positions (which had taken the channels-last
// GEMM). Each thread expands every row it reads (all of its channels, for its block of them), which shorter rows,
// whose tiles run a few positions per row, do not repay. Random layers of seeds 1-8, float32, 2 cores, the op alone,
// interleaved: 1.09-6.53x faster than the copies on 9 calls with 30-110 positions per output row, 4.56-15.2x faster
// than the GEMM on 6 under 64 positions; 0.56-0.92x on 7 with 12-24 (strided or 3-d; one with rows of 8 and 344
// channels 1.62x).
constexpr int64_t kExpandedWeightGradMinColumns = 28;
inline bool cpu_depthwise_weight_grad_expanded(const ConvGeometry& g) {
  return g.conv_out_sizes[2] >= kExpandedWeightGradMinColumns || g.conv_out_volume() < kWeightGradNchwMinPositions;
}

// A conv with one output channel and R input channels per group has the weight gradient of the depthwise conv over
// its input (one group per input channel, multiplier 1) whose grad_output repeats each of its channels R times:
// gw[g, r, tap] = sum over positions of gy[g] x[g * R + r] at the tap. This is that depthwise geometry.
inline ConvGeometry depthwise_of_repeated_grad_output(const ConvGeometry& g) {
  ConvGeometry depthwise = g;
  depthwise.conv_out_channels = g.conv_in_channels;
  depthwise.groups = g.conv_in_channels;
  return depthwise;
}

// Whether a channels-last weight gradient with one output channel and several input channels per group runs as the
// depthwise one (depthwise_of_repeated_grad_output: weight_grad_nhwc with each thread expanding its channels of each
// grad_output row, cpu_depthwise_repeated): the sums run along the input's channels, every lane a real one, where the
// channels-last GEMM reduces one output channel per group over im2col columns and the NCHW tap dots copy both
// tensors. Random channels-last layers, the op alone, interleaved against the path before (2 cores, Sapphire Rapids
// class): float32 0.05-1.35x its time on 31 calls of seeds 1-16 and the suite (geomean 0.30; above 1.0x only two
// calls of 73 and 256 us, with 2 input channels per group against the tap dots), 0.08-0.74x on the 9 of seeds 17-24,
// AVX2 0.12-0.94x on 15 of seeds 1-8, bfloat16 0.11-1.11x on 15.
inline bool cpu_depthwise_weight_grad_repeated(const ConvGeometry& g, bool channels_last) {
  return channels_last && g.groups > 1 && g.conv_out_channels == g.groups && g.conv_in_channels_per_group() > 1;
}

// Whether an NCHW depthwise weight gradient with multiplier 1 runs on blocks of channels
// (weight_grad_nchw_channel_blocks): per thread's block of channels and image, the block's x and grad_output planes
// are transposed into channels-last images, and the channels-last weight gradient's row sums (weight_grad_nhwc's: per
// vector of channels and run of up to 8 taps, the sums in registers along a row) run over them, where the NCHW kernel
// gathers each channel's phase planes per band and reduces every tap over them in short dot products. Float
// accumulation only (float32, bfloat16, float16), and output rows of at most kWeightGradChannelBlocksMaxRow: the NCHW
// kernel's long rows are long vector runs already. Float32, 2 cores (Zen 5), conv_weight_grad alone, interleaved,
// against the NCHW kernel (benchmarks/RESULTS.md): the 51 calls of random seeds 1-8 and the suite within the bound
// 0.33-0.96x its time, geomean 0.55 (B0's k5 s1 480-channel layer 1.95 -> 0.98 ms, its k3 s2 96-channel layer 3.6 ->
// 1.5 ms); the five 1-d rows of 578-4096 outputs past it 0.95-1.43x. On AVX2's tiles 0.38-0.95x (31 calls of seeds
// 1-4 and the suite), bfloat16 0.36-1.15x (31; geomean 0.63). float64 (AVX2's 4-double vectors) ran 0.55-2.79x,
// geomean 1.15: excluded.
constexpr int64_t kWeightGradChannelBlocksMaxRow = 512;
inline bool cpu_depthwise_weight_grad_channel_blocks(const ConvGeometry& g, bool channels_last, int64_t element_bytes) {
  return element_bytes == 4 && nchw_channel_blocks_fit(g, channels_last, element_bytes) &&
         g.conv_out_sizes[2] <= kWeightGradChannelBlocksMaxRow;
}

// The most output channels per group whose NCHW weight gradient runs depthwise.cpp's kernel, generalized to any
// number of input channels per group (cpu_tap_dots): per input channel and band, its phase planes gathered once, then
// register blocks of 3 output channels x 4 taps of dot products over the band. The phase planes' GEMMs instead reduce
// a band's positions into a [C_out, C_in x taps] partial gradient: for few output channels a skinny product that
// re-reads and re-writes the partial per band. Random layers, float32, 2 cores, the op alone, interleaved against the
// phase planes: up to 12 output channels per group 0.09-1.07x its time on 58 calls of seeds 1-2 (a 451 -> 3 k6x7
// conv 0.10x); 13-63 mixed, 0.22-2.63x. Under this bound on seeds 3-5: geomean 0.51x on 81 calls, 4 above 1.05x (up
// to 1.36x: a stride-3 1x1 kernel, and 1-d rows of 9-18 outputs).
constexpr int64_t kTapDotsMaxOutChannels = 12;

// Whether the weight gradient's GEMM reductions (the phase planes', the channels-last im2col's) run on fastpad's
// register tiles (cpu/reduction_tiles.h) instead of torch's GEMM: where cpu_reduction_tiles allows them (float64 keeps
// torch's GEMM, and so does a CPU without AVX2). Torch's GEMM (MKL) ran at 37-42% of the FMA peak of a
// Zen 5 (its generic AVX2 kernel there), which the tiles double. The phase planes' product is transposed on the tiles
// (partial[Cg_in*K, Cg_out] += cols @ gy^T), with gy copied as rows of channels, so they need a reduction (Cg_in x
// taps) of kWeightGradTilesMinReduction or more: a 1x1 3 -> 313 transposed conv ran 3.7x slower for that copy, 6 -> 103
// 2.6x, 4 -> 15 1.02x. A/B on 2 cores of a Zen 5, float32, conv_weight_grad alone (benchmarks/RESULTS.md): the
// suite's 19 layers on these paths and random layers of seeds 1-4 faster but for calls of 13-17 us at 1.0-1.07x.
constexpr int64_t kWeightGradTilesMinReduction = 8;
inline bool cpu_weight_grad_tiles(const ConvGeometry& g, bool channels_last_gemm, CpuIsa isa, int64_t element_bytes) {
  if (!cpu_reduction_tiles(isa, element_bytes)) return false;
  return channels_last_gemm || g.conv_in_channels_per_group() * g.kernel_volume() >= kWeightGradTilesMinReduction;
}

// Whether the channels-last weight gradient runs a GEMM per tap over x in place (conv_weight_grad.cpp's
// weight_grad_taps) instead of gathering im2col columns first (cpu_channels_last_gemm): float32, no padding read but
// zeros, and
// - input channels per group that fill kWeightGradTapsMinLaneUse of their vectors or more: the tap GEMMs' vectors run
//   along the input channels (the columns' along input channels x taps), and a part-empty vector costs as much as a
//   full one (17 -> 15 k5 s3: 1.49x the time, 7 -> 8 k6 s3 1.13x; those that won, 7-19 channels, 0.59-0.86x);
// - at most kWeightGradTapsMaxOutPerIn times as many output channels per group as input channels, and at most
//   kWeightGradTapsMaxOutChannels: past those the gather the tap GEMMs save is a small part of the GEMM's time (the
//   stems' 3 -> 32-64 channels 2.7-4.0x, 4-30 -> 39-414 1.1-2.4x, 344 -> 322 and 153 -> 452 1.05x and 1.12x);
// - kWeightGradTapsMinSlicePositions output positions per (image, depth) slice or more: fewer make calls of a few
//   positions each (39 -> 29 k7 over 6 x 6: 1.12x).
// Random layers' and the suite's channels-last weight gradients, float32, 2 cores of a Zen 4, conv_weight_grad alone,
// interleaved, against the im2col path (benchmarks/RESULTS.md): 22 calls of seeds 1-4 and the suite 0.45-1.01x the
// time (geomean 0.72; the suite's k4 s1 64 -> 64 0.84x), 16 of seeds 13-16 0.18-1.00x (0.64), held out 15 of seeds
// 17-20 0.26-0.93x (0.62), AVX2 seeds 1-4 and the suite 0.47-0.99x. Without the lane bound, seeds 17-20 had run
// 0.22-0.92x (geomean of every changed call 0.57 against 0.71), but seeds 13-16 up to 1.19x and 1-4 1.09x.
constexpr double kWeightGradTapsMinLaneUse = 0.6;
constexpr int64_t kWeightGradTapsMaxOutPerIn = 2;
constexpr int64_t kWeightGradTapsMaxOutChannels = 256;
constexpr int64_t kWeightGradTapsMinSlicePositions = 64;
inline bool cpu_weight_grad_taps(const ConvGeometry& g, bool channels_last, int64_t element_bytes,
                                 bool reduced_precision, CpuIsa isa) {
  const int64_t in_per_group = g.conv_in_channels_per_group(), out_per_group = g.conv_out_channels_per_group();
  const int64_t lanes = cpu_float_lanes(isa);
  const int64_t lanes_taken = std::max<int64_t>(ceil_div(in_per_group, lanes), 1) * lanes;
  const double lane_use = static_cast<double>(in_per_group) / static_cast<double>(lanes_taken);
  return channels_last && element_bytes == 4 && !reduced_precision &&
         (g.mode == PaddingMode::Zeros || g.reads_no_padding()) && lane_use >= kWeightGradTapsMinLaneUse &&
         out_per_group <= kWeightGradTapsMaxOutPerIn * in_per_group && out_per_group <= kWeightGradTapsMaxOutChannels &&
         g.conv_out_sizes[1] * g.conv_out_sizes[2] >= kWeightGradTapsMinSlicePositions;
}

// Whether the NCHW phase planes' weight gradient on the tiles writes the gradient's rows in place,
// grad[Cg_out, Cg_in*K] = gy @ cols^T with each band's columns transposed into [positions, Cg_in*K], instead of the
// transposed product partial[Cg_in*K, Cg_out] += cols @ gy^T. That one zeroes its partial, transposes it into the
// gradient and copies it out: passes over the whole weight that a reduction over few positions does not repay (a
// 300 -> 367 k7 d2 3-d conv over one output position: 147 ms, 44 ms in rows). The rows' transposes of the columns
// move Cg_in*K x positions values instead, which outweigh those passes from about twice Cg_out positions, and their
// tiles, whose depth is the positions, ran slower than the transposed product's on longer reductions: forced on all
// 145 calls of seeds 1-4 and the suite, 0.30-1.02x the time up to 128 positions (but 1.10x for 19 output channels
// over 125), 0.78-1.50x from 129 to 512, 0.44-3.49x past. A 3-d output deeper than one slice reduces slice by slice,
// each slice a pass over the gradient (8 -> 99 k6 over 16 images of 2x2x2 outputs: 1.11x the time, AVX2 1.28x):
// excluded.
// Random layers, float32, 2 cores, conv_weight_grad alone, interleaved (benchmarks/RESULTS.md): 15 calls of seeds
// 1-4 and the suite 1.05-3.32x faster (geomean 1.54), held out 64 of seeds 5-16 0.87-4.09x (1.38; under 1.0x only
// calls of 20-112 us, and one of 1.2 ms at 0.97x), AVX2 37 calls of seeds 1-8 0.96-3.63x (1.39).
constexpr int64_t kWeightGradRowsMaxPositions = 128;
inline bool cpu_weight_grad_rows(const ConvGeometry& g) {
  return g.conv_out_sizes[0] == 1 &&
         g.batch * g.conv_out_volume() <= std::min(kWeightGradRowsMaxPositions, 2 * g.conv_out_channels_per_group());
}

// Whether a depthwise conv_weight_grad (one input and one output channel per group) runs on channel vectors
// (conv_weight_grad.cu: depthwise_weight_grad_vectors_kernel): x and grad_output with their channels in aligned
// 16-byte vectors (cuda.channel_vectors says both), whole vectors of channels. The reduction path it replaces gave
// each (channel, tap) one block reading its channel element by element, one 32-byte sector per 2-byte value in
// channels_last: b0's 96-channel k3 s2 layer at batch 256, bfloat16, took 12.0 ms on an H100 (Nsight Compute), 71% of
// its forward+backward. The vector kernel has not run on a GPU.
inline bool cuda_depthwise_weight_grad_vectors(const ConvGeometry& g, int64_t element_bytes, bool reduced_precision,
                                               const CudaInputs& cuda) {
  const int64_t storage_bytes = reduced_precision ? 2 : element_bytes;
  return cuda.channel_vectors && g.conv_in_channels == g.groups && g.conv_out_channels == g.groups &&
         g.conv_in_channels % (cuda::kVectorBytes / storage_bytes) == 0;
}

// conv_weight_grad. element_bytes, reduced_precision, isa and cuda as for conv (cuda.channel_vectors: of x and
// grad_output both).
inline WeightGradPath choose_weight_grad_path(const ConvGeometry& g, Backend backend, bool channels_last,
                                              int64_t element_bytes, bool reduced_precision, CpuIsa isa,
                                              const CudaInputs& cuda = {}) {
  if (backend == Backend::Cuda) {
    if (cuda_pipelined_weight_grad(g, element_bytes, reduced_precision, cuda)) return WeightGradPath::CudaPipelinedGemm;
    if (cuda_depthwise_weight_grad_vectors(g, element_bytes, reduced_precision, cuda)) {
      return WeightGradPath::CudaDepthwiseVectors;
    }
    return g.conv_in_channels_per_group() == 1 ? WeightGradPath::CudaDepthwiseReduction
                                               : WeightGradPath::CudaSplitKGemm;
  }
  if (cpu_depthwise_strided_planes(g, channels_last, element_bytes)) return WeightGradPath::CpuDepthwiseStridedPlanes;
  if (cpu_depthwise_weight_grad_channel_blocks(g, channels_last, element_bytes)) {
    return cpu_nhwc_tiles_avx512(g, channels_last, isa, element_bytes)
               ? WeightGradPath::CpuDepthwiseChannelBlocksAvx512
               : WeightGradPath::CpuDepthwiseChannelBlocks;
  }
  if (cpu_depthwise(g, channels_last, /*expanded_rows=*/cpu_depthwise_weight_grad_expanded(g))) {
    return channels_last && cpu_nhwc_tiles_avx512(g, channels_last, isa, element_bytes)
               ? WeightGradPath::CpuDepthwiseAvx512
               : WeightGradPath::CpuDepthwise;
  }
  if (cpu_depthwise_weight_grad_repeated(g, channels_last)) {
    return cpu_nhwc_tiles_avx512(depthwise_of_repeated_grad_output(g), channels_last, isa, element_bytes)
               ? WeightGradPath::CpuDepthwiseRepeatedAvx512
               : WeightGradPath::CpuDepthwiseRepeated;
  }
  const bool avx512 = isa >= CpuIsa::Avx512;
  if (channels_last && (g.groups == 1 || g.conv_out_volume() < kWeightGradNchwMinPositions ||
                        !nchw_weight_grad_copies_repaid(g))) {
    if (!cpu_weight_grad_tiles(g, /*channels_last_gemm=*/true, isa, element_bytes)) {
      return WeightGradPath::CpuChannelsLastGemm;
    }
    if (cpu_weight_grad_taps(g, channels_last, element_bytes, reduced_precision, isa)) {
      return avx512 ? WeightGradPath::CpuChannelsLastTapsAvx512 : WeightGradPath::CpuChannelsLastTapsAvx2;
    }
    return avx512 ? WeightGradPath::CpuChannelsLastGemmAvx512 : WeightGradPath::CpuChannelsLastGemmAvx2;
  }
  if (cpu_depthwise(g, /*channels_last=*/false)) return WeightGradPath::CpuDepthwise;
  if (g.conv_out_channels_per_group() <= kTapDotsMaxOutChannels) return WeightGradPath::CpuTapDots;
  if (!cpu_weight_grad_tiles(g, /*channels_last_gemm=*/false, isa, element_bytes)) return WeightGradPath::CpuPhasePlanes;
  if (cpu_weight_grad_rows(g)) {
    return avx512 ? WeightGradPath::CpuPhasePlanesRowsAvx512 : WeightGradPath::CpuPhasePlanesRowsAvx2;
  }
  return avx512 ? WeightGradPath::CpuPhasePlanesAvx512 : WeightGradPath::CpuPhasePlanesAvx2;
}

// Whether a CUDA op copies a tensor channels-contiguous before its kernel runs (conv and conv_transpose copy their
// output back into the input's layout after): the pipelined GEMMs load each position's channels as 16-byte vectors,
// which a tensor without them (channel_vectors in conv_params.h) gets from the copy (cuda_pipelined_gemm says why). An
// input whose channels the GEMM pads (cuda_pipelined_channels) has none: its copy holds the padded channels.
inline bool cuda_stages_channels(ConvPath path, bool channel_vectors) {
  return path == ConvPath::CudaPipelinedGemm && !channel_vectors;
}
inline bool cuda_stages_channels(ConvTransposePath path, bool channel_vectors) {
  return path == ConvTransposePath::CudaPipelinedGemm && !channel_vectors;
}
inline bool cuda_stages_channels(WeightGradPath path, bool channel_vectors) {
  return path == WeightGradPath::CudaPipelinedGemm && !channel_vectors;
}

// Whether a CPU weight-gradient path reads channels-last tensors in place; where it does not, the op gives it NCHW
// copies of the input and grad_output (see kWeightGradNchwMinPositions).
inline bool cpu_weight_grad_reads_channels_last(WeightGradPath path, const ConvGeometry& g, bool channels_last) {
  return channels_last && (path == WeightGradPath::CpuChannelsLastGemm ||
                           path == WeightGradPath::CpuChannelsLastGemmAvx2 ||
                           path == WeightGradPath::CpuChannelsLastGemmAvx512 ||
                           path == WeightGradPath::CpuChannelsLastTapsAvx2 ||
                           path == WeightGradPath::CpuChannelsLastTapsAvx512 ||
                           path == WeightGradPath::CpuDepthwiseAvx512 || path == WeightGradPath::CpuDepthwiseRepeated ||
                           path == WeightGradPath::CpuDepthwiseRepeatedAvx512 ||
                           path == WeightGradPath::CpuDepthwiseStridedPlanes ||
                           (path == WeightGradPath::CpuDepthwise &&
                            cpu_depthwise(g, channels_last, /*expanded_rows=*/cpu_depthwise_weight_grad_expanded(g))));
}

inline const char* path_name(ConvPath path) {
  switch (path) {
    case ConvPath::CpuTorch: return "cpu_torch";
    case ConvPath::CpuBlockedAvx2: return "cpu_blocked_avx2";
    case ConvPath::CpuBlockedAvx512: return "cpu_blocked_avx512";
    case ConvPath::CpuBlockedNoPlanesAvx2: return "cpu_blocked_no_planes_avx2";
    case ConvPath::CpuBlockedNoPlanesAvx512: return "cpu_blocked_no_planes_avx512";
    case ConvPath::CpuBlockedAvx512Bf16: return "cpu_blocked_avx512_bf16";
    case ConvPath::CpuChannelDotsAvx2: return "cpu_channel_dots_avx2";
    case ConvPath::CpuChannelDotsAvx512: return "cpu_channel_dots_avx512";
    case ConvPath::CpuDepthwise: return "cpu_depthwise";
    case ConvPath::CpuDepthwiseAvx512: return "cpu_depthwise_avx512";
    case ConvPath::CpuDepthwiseChannelBlocks: return "cpu_depthwise_channel_blocks";
    case ConvPath::CpuDepthwiseChannelBlocksAvx512: return "cpu_depthwise_channel_blocks_avx512";
    case ConvPath::CpuDepthwiseStridedPlanes: return "cpu_depthwise_strided_planes";
    case ConvPath::CpuGroupedExpanded: return "cpu_grouped_expanded";
    case ConvPath::CpuGroupedExpandedAvx512: return "cpu_grouped_expanded_avx512";
    case ConvPath::CpuGroupedPlanes: return "cpu_grouped_planes";
    case ConvPath::CpuTapGemms: return "cpu_tap_gemms";
    case ConvPath::CpuTapTilesAvx2: return "cpu_tap_tiles_avx2";
    case ConvPath::CpuTapTilesAvx512: return "cpu_tap_tiles_avx512";
    case ConvPath::CpuColumnGemm: return "cpu_column_gemm";
    case ConvPath::CpuChannelsLastDirect: return "cpu_channels_last_direct";
    case ConvPath::CpuChannelsLastPhasePlanes: return "cpu_channels_last_phase_planes";
    case ConvPath::CpuChannelsLastIm2col: return "cpu_channels_last_im2col";
    case ConvPath::CudaFewChannels: return "cuda_few_channels";
    case ConvPath::CudaPipelinedGemm: return "cuda_pipelined_gemm";
    case ConvPath::CudaImplicitGemm: return "cuda_implicit_gemm";
    case ConvPath::CudaDepthwiseVectors: return "cuda_depthwise_vectors";
    case ConvPath::CudaDepthwiseRows: return "cuda_depthwise_rows";
    case ConvPath::CudaDepthwiseHalo: return "cuda_depthwise_halo";
    case ConvPath::CudaDirect: return "cuda_direct";
  }
  return "?";
}

inline const char* path_name(ConvTransposePath path) {
  switch (path) {
    case ConvTransposePath::CpuTorch: return "cpu_torch";
    case ConvTransposePath::CpuBlockedAvx2: return "cpu_blocked_avx2";
    case ConvTransposePath::CpuBlockedAvx512: return "cpu_blocked_avx512";
    case ConvTransposePath::CpuBlockedNoPlanesAvx2: return "cpu_blocked_no_planes_avx2";
    case ConvTransposePath::CpuBlockedNoPlanesAvx512: return "cpu_blocked_no_planes_avx512";
    case ConvTransposePath::CpuBlockedFoldedAvx2: return "cpu_blocked_folded_avx2";
    case ConvTransposePath::CpuBlockedFoldedAvx512: return "cpu_blocked_folded_avx512";
    case ConvTransposePath::CpuTapTilesAvx2: return "cpu_tap_tiles_avx2";
    case ConvTransposePath::CpuTapTilesAvx512: return "cpu_tap_tiles_avx512";
    case ConvTransposePath::CpuTapTilesFoldedAvx2: return "cpu_tap_tiles_folded_avx2";
    case ConvTransposePath::CpuTapTilesFoldedAvx512: return "cpu_tap_tiles_folded_avx512";
    case ConvTransposePath::CpuDepthwise: return "cpu_depthwise";
    case ConvTransposePath::CpuDepthwiseChannelBlocks: return "cpu_depthwise_channel_blocks";
    case ConvTransposePath::CpuDepthwiseChannelBlocksAvx512: return "cpu_depthwise_channel_blocks_avx512";
    case ConvTransposePath::CpuDepthwiseStridedPlanes: return "cpu_depthwise_strided_planes";
    case ConvTransposePath::CpuDepthwisePhases: return "cpu_depthwise_phases";
    case ConvTransposePath::CpuDepthwisePhasesAvx512: return "cpu_depthwise_phases_avx512";
    case ConvTransposePath::CpuDepthwiseChannelBlockPhases: return "cpu_depthwise_channel_block_phases";
    case ConvTransposePath::CpuDepthwiseChannelBlockPhasesAvx512: return "cpu_depthwise_channel_block_phases_avx512";
    case ConvTransposePath::CpuDepthwisePhasesFolded: return "cpu_depthwise_phases_folded";
    case ConvTransposePath::CpuDepthwisePhasesFoldedAvx512: return "cpu_depthwise_phases_folded_avx512";
    case ConvTransposePath::CpuGroupedExpanded: return "cpu_grouped_expanded";
    case ConvTransposePath::CpuGroupedPlanes: return "cpu_grouped_planes";
    case ConvTransposePath::CpuPhasePlanes: return "cpu_phase_planes";
    case ConvTransposePath::CpuPhasePlanesAvx2: return "cpu_phase_planes_avx2";
    case ConvTransposePath::CpuPhasePlanesAvx512: return "cpu_phase_planes_avx512";
    case ConvTransposePath::CpuGemmCol2im: return "cpu_gemm_col2im";
    case ConvTransposePath::CpuGemmCol2imAvx2: return "cpu_gemm_col2im_avx2";
    case ConvTransposePath::CpuGemmCol2imAvx512: return "cpu_gemm_col2im_avx512";
    case ConvTransposePath::CpuGemmCol2imNhwcAvx2: return "cpu_gemm_col2im_nhwc_avx2";
    case ConvTransposePath::CpuGemmCol2imNhwcAvx512: return "cpu_gemm_col2im_nhwc_avx512";
    case ConvTransposePath::CpuGemmCol2imRowsAvx2: return "cpu_gemm_col2im_rows_avx2";
    case ConvTransposePath::CpuGemmCol2imRowsAvx512: return "cpu_gemm_col2im_rows_avx512";
    case ConvTransposePath::CudaPipelinedGemm: return "cuda_pipelined_gemm";
    case ConvTransposePath::CudaDepthwiseVectors: return "cuda_depthwise_vectors";
    case ConvTransposePath::CudaDepthwiseRows: return "cuda_depthwise_rows";
    case ConvTransposePath::CudaDirectGather: return "cuda_direct_gather";
    case ConvTransposePath::CudaPhaseGemm: return "cuda_phase_gemm";
    case ConvTransposePath::CudaPhaseGemmFold: return "cuda_phase_gemm_fold";
  }
  return "?";
}

inline const char* path_name(WeightGradPath path) {
  switch (path) {
    case WeightGradPath::CpuDepthwise: return "cpu_depthwise";
    case WeightGradPath::CpuDepthwiseAvx512: return "cpu_depthwise_avx512";
    case WeightGradPath::CpuDepthwiseRepeated: return "cpu_depthwise_repeated";
    case WeightGradPath::CpuDepthwiseRepeatedAvx512: return "cpu_depthwise_repeated_avx512";
    case WeightGradPath::CpuDepthwiseChannelBlocks: return "cpu_depthwise_channel_blocks";
    case WeightGradPath::CpuDepthwiseChannelBlocksAvx512: return "cpu_depthwise_channel_blocks_avx512";
    case WeightGradPath::CpuDepthwiseStridedPlanes: return "cpu_depthwise_strided_planes";
    case WeightGradPath::CpuTapDots: return "cpu_tap_dots";
    case WeightGradPath::CpuPhasePlanes: return "cpu_phase_planes";
    case WeightGradPath::CpuPhasePlanesAvx2: return "cpu_phase_planes_avx2";
    case WeightGradPath::CpuPhasePlanesAvx512: return "cpu_phase_planes_avx512";
    case WeightGradPath::CpuPhasePlanesRowsAvx2: return "cpu_phase_planes_rows_avx2";
    case WeightGradPath::CpuPhasePlanesRowsAvx512: return "cpu_phase_planes_rows_avx512";
    case WeightGradPath::CpuChannelsLastGemm: return "cpu_channels_last_gemm";
    case WeightGradPath::CpuChannelsLastGemmAvx2: return "cpu_channels_last_gemm_avx2";
    case WeightGradPath::CpuChannelsLastGemmAvx512: return "cpu_channels_last_gemm_avx512";
    case WeightGradPath::CpuChannelsLastTapsAvx2: return "cpu_channels_last_taps_avx2";
    case WeightGradPath::CpuChannelsLastTapsAvx512: return "cpu_channels_last_taps_avx512";
    case WeightGradPath::CudaPipelinedGemm: return "cuda_pipelined_gemm";
    case WeightGradPath::CudaDepthwiseVectors: return "cuda_depthwise_vectors";
    case WeightGradPath::CudaDepthwiseReduction: return "cuda_depthwise_reduction";
    case WeightGradPath::CudaSplitKGemm: return "cuda_split_k_gemm";
  }
  return "?";
}

}  // namespace fastpad
