// The register-blocked direct convolution over channels-last phase planes (cpu_blocked_avx2, cpu_blocked_avx512,
// cpu_blocked_avx512_bf16): the interface between the torch-side driver (conv.cpp) and the micro-kernels, which are
// compiled once per instruction set (blocked_direct_avx2.cpp; blocked_direct_avx512.cpp, with the bfloat16 kernel)
// and chosen when the op runs. Free of torch.
//
// For a band of flattened output positions t (cpu/phase_planes.h, lanes = input channels) and a block of B output
// channels (blocked_direct_block_width), out[t, co] = init[t, co] + sum over taps and ci of
// planes_tap[t * lanes + ci] * w[tap, ci, co]: a tile of P positions x B channels stays in registers for the whole
// reduction, so the output is written once per band (a GEMM per tap would re-read and re-write it for every tap). Each
// weight vector is loaded once for P positions, each input value broadcast once for B channels. The bfloat16 kernel
// takes the input channels in pairs: one AVX512_BF16 dot product (vdpbf16ps) adds x[ci] * w[ci] + x[ci + 1] * w[ci + 1]
// to each float32 lane, so its weights hold each output channel's pair side by side, [tap][ci / 2][co][2].
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

namespace fastpad::cpu {

// Element: float, or uint16_t for the bits of bfloat16 (the planes and weights of the bfloat16 kernel).
template <typename Element>
struct BlockedDirectArgs {
  // Per tap, where position 0 of the band reads its input channels: a phase-plane run, or the input itself
  // (channels-last, where no tap reads padding). Position c of row r reads its lanes input channels (even for the
  // bfloat16 kernel) from there at r * x_row_stride + c * x_position_stride (phase planes: the planes' row pitch x
  // lanes, and lanes).
  const Element* const* taps;
  int64_t num_taps, lanes;
  int64_t x_row_stride, x_position_stride;
  const Element* weights;  // per block b, at b * weight_block_stride: [num_taps][weight_tap_pitch], each tap's
                           // [lanes][block_width] (bfloat16: [lanes / 2][block_width][2]) at its start, zero beyond
                           // the real output channels
  int64_t weight_tap_pitch;  // at least lanes * block_width (blocked_direct_weight_tap_pitch)
  int64_t weight_block_stride;  // num_taps * weight_tap_pitch, or more where a call takes part of a block's taps
  int64_t block_width, co_block_begin, co_block_end;
  // Position c of row r at out + r * out_row_stride + c * out_pitch (a band buffer: out_row_stride = the planes' row
  // pitch * out_pitch, out_pitch the channels rounded up to vectors; or the output itself), block b's channels at
  // b * block_width from there.
  float* out;
  int64_t out_pitch, out_row_stride;
  int64_t rows, cols;  // the positions computed: r < rows, c < cols
  const float* init;  // accumulate == false: out starts from init[co] (the bias, or zeros); true: from out itself
  bool accumulate;
};

// Floats per vector, and the most vectors of output channels a block holds (its tile: 4 positions x 3 vectors on
// AVX2's 16 registers, 6 x 4 on AVX-512's 32).
constexpr int64_t kBlockedDirectVectorAvx2 = 8, kBlockedDirectMaxVectorsAvx2 = 3;
constexpr int64_t kBlockedDirectVectorAvx512 = 16, kBlockedDirectMaxVectorsAvx512 = 4;

// Output channels per block: the most vectors, down to two, that leave no last block of one vector (whose tile,
// 14 positions x 1 vector on AVX2, broadcasts one input per FMA): 128 channels on AVX2 go in blocks of 16, not five
// of 24 and one of 8; 64 go in 24 + 24 + 16. Only the vectors of the last block that hold real channels are computed,
// and channels that fit one block take just their vectors (3 channels on AVX-512: one vector, not a packed weight
// 4 vectors wide, 3 of them zeros).
inline int64_t blocked_direct_block_width(int64_t channels, int64_t vector, int64_t max_vectors) {
  if (channels <= max_vectors * vector) return std::max<int64_t>(1, (channels + vector - 1) / vector) * vector;
  for (int64_t vectors = max_vectors; vectors >= 2; --vectors) {
    const int64_t last = channels % (vectors * vector);
    if (last == 0 || last > vector) return vectors * vector;
  }
  return max_vectors * vector;
}

// Elements from one tap's packed weights to the next: lanes x block_width rounded up to an odd number of 64-byte
// lines, so that packing the weights a column at a time (a store per tap, one pitch apart) spreads its stores over the
// L1 cache's sets. Unpadded, a 12 -> 32 k7 weight's 49 stores per column, 2 KiB apart, met in two of its 64 sets:
// packing took 55% of a batch-1 conv's time.
inline int64_t blocked_direct_weight_tap_pitch(int64_t lanes, int64_t block_width, int64_t element_bytes) {
  const int64_t line = 64 / element_bytes, lines = (lanes * block_width + line - 1) / line;
  return (lines | 1) * line;
}

// Taps read as one: where a tap's input channels are few, consecutive taps whose inputs follow one another, each
// `lanes` elements after the last, form runs that the kernel reads as one tap of run x lanes input channels, its
// weights one block of run x lanes rows, so that its loop over input channels runs run times longer per tap and
// pointer set-up. Such taps are a kernel row's taps at stride 1 and dilation 1 (in the phase planes, or in place over
// all of x's channels: one group). `tap_starts`: where each tap reads position 0, in elements from any common origin.
// Returns the run length, the same for all runs (the gcd of the lengths of the chains found): 1 for none. Only for
// fewer than kTapRunMaxLanes input channels: a run's weights are packed without the tap pitch's odd line padding
// (blocked_direct_weight_tap_pitch), which wider taps need for packing a column at a time. A stride's phases also
// hold chains (taps kw and kw + s_w), but out of the taps' order, so their weights would need packing a value at a
// time: not done. Calls with runs against runs of one, float32 unless named, 2 cores (Sapphire Rapids class), the op
// alone, interleaved, new / old: seeds 1-4 and the suite 0.85-1.02 (55 calls, geomean 0.975), held out (seeds 5-8)
// 0.85-1.05 (60, 0.954), AVX2 0.89-1.04 (56, 0.962), bfloat16 0.88-1.02 (40, 0.977); most where a group's output
// channels fill one vector (a tile of one vector does 16 multiply-adds per weight load, so a tap's set-up weighs the
// most): a channels-last 7 -> 9 k5 transposed conv, 0.418 -> 0.354 ms (benchmarks/RESULTS.md).
constexpr int64_t kTapRunMaxLanes = 16;
inline int64_t blocked_tap_run(const std::vector<int64_t>& tap_starts, int64_t lanes) {
  const int64_t taps = static_cast<int64_t>(tap_starts.size());
  if (lanes <= 0 || lanes >= kTapRunMaxLanes) return 1;
  int64_t run = 0, chain = 1;
  for (int64_t tap = 1; tap <= taps; ++tap) {
    if (tap < taps && tap_starts[tap] == tap_starts[tap - 1] + lanes) {
      ++chain;
    } else {
      run = std::gcd(run, chain);
      chain = 1;
    }
  }
  return std::max<int64_t>(run, 1);
}

// `channels`: the real output channels (per group); the blocks beyond them are never read or written, nor the lanes
// past them in the last vector (masked loads and stores: the output may hold the next group's channels there).
void blocked_direct_avx2(const BlockedDirectArgs<float>& args, int64_t channels);
void blocked_direct_avx512(const BlockedDirectArgs<float>& args, int64_t channels);
void blocked_direct_avx512_bf16(const BlockedDirectArgs<uint16_t>& args, int64_t channels);

// A vector's output channels (16 on AVX-512, 8 on AVX2) of a float32 weight into the blocked layout (conv.cpp's
// weight packing), where each input channel's taps are contiguous in the source: channel r's runs (one per input
// channel ci0 + run, run_length taps, run_stride apart) start at src + r * row_stride, channels r >= rows pack as
// zeros, and tap `tap` of run `run` goes to lane r of dst + tap * tap_pitch + run * block_width. Where the runs follow
// each other (run_stride == run_length) they are read as one run: a vector of values a channel at a time, transposed
// in registers, one vector store each.
struct WeightLanes {
  const float* src;
  int64_t row_stride, rows;
  int64_t runs, run_length, run_stride;
  float* dst;
  int64_t tap_pitch, block_width;
};
void pack_weight_lanes_avx2(const WeightLanes& w);
void pack_weight_lanes_avx512(const WeightLanes& w);

// The blocked driver's copy of a band's channels-last float32 outputs into an NCHW y: dst[j * dst_row_stride + i *
// dst_col_stride] = src[i * src_row_stride + j] for i < rows (positions), j < cols (channels), dst_col_stride 1 or 2
// (float_transpose_takes: a stride-2 transposed conv's phase writes every second column of y), kLanes x kLanes blocks
// at a time through the registers (the weight packing's transpose). Blocks of kLanes destination rows (channels) go in
// the outer loop, each swept along all its positions, so that y's rows are written kLanes at a time (all of them at
// once, a 97-channel output took 1.5x the time of the copy element by element). Element by element, this copy took 22%
// of resnet50's NCHW stem and 31% of a UNet k4 s2 transposed conv (float32, 2 cores, Sapphire Rapids class).
struct FloatTranspose {
  const float* src;
  int64_t src_row_stride, rows, cols;
  float* dst;
  int64_t dst_row_stride, dst_col_stride;
};
inline bool float_transpose_takes(int64_t dst_col_stride) { return dst_col_stride == 1 || dst_col_stride == 2; }
// Whether a copy of `positions` x `channels` goes through the register transpose rather than element by element:
// below these counts most of its kLanes x kLanes blocks are empty lanes (the tap tiles' channels-last output of 2-5
// channels a group took 1.2-1.45x longer through it, benchmarks/RESULTS.md).
constexpr int64_t kTransposeMinPositions = 12, kTransposeMinChannels = 8;
inline bool float_transpose_pays(int64_t positions, int64_t channels) {
  return positions >= kTransposeMinPositions && channels >= kTransposeMinChannels;
}
void transpose_floats_avx2(const FloatTranspose& t);
void transpose_floats_avx512(const FloatTranspose& t);

// Float32 multiply-adds a core can retire per second on this instruction set: `iterations` rounds of independent
// vector FMAs; returns the multiply-adds done (the caller times it).
int64_t fma_peak_loop_avx2(int64_t iterations, float* sink);
int64_t fma_peak_loop_avx512(int64_t iterations, float* sink);

}  // namespace fastpad::cpu
