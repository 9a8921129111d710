// The register tiles of one channels-last output row (NhwcRows in depthwise.cpp): the interface between the torch-side
// row kernel and the tile loops of nhwc_tiles_kernel.h, which are compiled once per vector width: at::vec's (AVX2, or
// the build's baseline) in depthwise.cpp, and AVX-512's 16 floats in nhwc_tiles_avx512.cpp, chosen when the op runs
// (kernel_paths.h's cpu_nhwc_tiles_avx512). Free of torch.
#pragma once

#include <cstdint>
#include <utility>

namespace fastpad::cpu {

// Positions per register tile: its accumulators, one weight and one input vector fit in AVX2's 16 registers (and
// leave AVX-512's 32 room to load ahead).
constexpr int64_t kNhwcTile = 8;

// The 16-bit floats as their bits, for the torch-free AVX-512 kernels (c10::BFloat16 and c10::Half have this layout).
struct BFloat16Bits {
  uint16_t bits;
};
struct Float16Bits {
  uint16_t bits;
};

// Output row y_row (out_w pixels y_pixel_stride apart, C_out channels each) from the image x_image (R x C_out values
// per pixel, R = reduction: the input channels per group, 1 for a depthwise conv) through the tap rows `rows`,
// (kd * kh_count + kh, input row) each. scalar_t: the tensors' type; acc_t: the weights', bias' and accumulators'.
template <typename scalar_t, typename acc_t>
struct NhwcRowTiles {
  const scalar_t* x_image;
  const acc_t* w_taps;  // [taps][R][C_out]
  const acc_t* bias;    // C_out values, or null
  scalar_t* y_row;
  int64_t y_pixel_stride;
  const std::pair<int64_t, int64_t>* rows;
  int64_t row_count;
  int64_t channels, reduction, kw_count, in_w, stride_w, out_w;
  // columns[ow * kw_count + kw]: the input column tap kw of output column ow reads, -1 in zero padding and for the
  // positions past out_w that fill the last tile (computed, never stored).
  const int64_t* columns;
  // interior[tile]: every tap of the tile reads inside the row, so tap kw of position p reads column
  // columns[ow0 * kw_count + kw] + p * stride_w.
  const uint8_t* interior;
  // The column offsets from a tile's first input column that some tap reads (prefetched for the next tile).
  const int64_t* read_offsets;
  int64_t read_offset_count;
  bool whole_pixels;  // a tile's input pixels are prefetched whole (else a 64-byte run of channels at a time)
  // Whether the tiles slide along the row (nhwc_sliding_tile): one input channel per output channel, dilation 1,
  // stride 1 or 2, and 2 to kNhwcSlidingMaxTaps taps per row (kernel_paths.h's cpu_nhwc_tiles_slide).
  bool sliding;
};

// The channels-last depthwise weight gradient's sums over one output row (weight_grad_nhwc in depthwise.cpp): for the
// channels [c_begin, c_end) and each tap (tap row r of `rows`, kw), sums[(rows[r].first * kw_count + kw) *
// sum_stride + c - c_begin] += the sum over the row's ow of gy_row[ow * channels + c] * x_image[(rows[r].second * in_w
// + columns[ow * kw_count + kw]) * channels + c], taps in zero padding (column -1) skipped; where c_end - c_begin is no
// whole number of vectors (and c_end at least one), the vector ending at c_end sums at columns tail_column + lane
// instead. Per vector of channels and run of up to 8 taps of a tap row, the run's sums stay in registers along the row.
template <typename scalar_t, typename acc_t>
struct NhwcWeightGradRow {
  const scalar_t* x_image;
  const scalar_t* gy_row;
  acc_t* sums;
  int64_t sum_stride, tail_column;
  const std::pair<int64_t, int64_t>* rows;
  int64_t row_count;
  int64_t channels, c_begin, c_end, kw_count, in_w, stride_w, dilation_w, out_w;
  const int64_t* columns;  // [out_w][kw_count], as NhwcRowTiles' (without the last tile's fill)
  // [interior_begin, interior_end): the output columns whose every tap reads inside the row, at column
  // columns[ow * kw_count] + kw * dilation_w.
  int64_t interior_begin, interior_end;
};

// AVX-512 (16 floats per vector) for float accumulation; groups: R > 1. Called only where the CPU and the OS support
// AVX-512F and the row has 16 channels or more.
void nhwc_row_tiles_avx512(const NhwcRowTiles<float, float>& row, bool groups);
void nhwc_row_tiles_avx512(const NhwcRowTiles<BFloat16Bits, float>& row, bool groups);
void nhwc_row_tiles_avx512(const NhwcRowTiles<Float16Bits, float>& row, bool groups);
void nhwc_weight_grad_row_avx512(const NhwcWeightGradRow<float, float>& row);
void nhwc_weight_grad_row_avx512(const NhwcWeightGradRow<BFloat16Bits, float>& row);
void nhwc_weight_grad_row_avx512(const NhwcWeightGradRow<Float16Bits, float>& row);

}  // namespace fastpad::cpu
