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
};

// AVX-512 (16 floats per vector) for float accumulation; groups: R > 1. Called only where the CPU and the OS support
// AVX-512F and the row has 16 channels or more.
void nhwc_row_tiles_avx512(const NhwcRowTiles<float, float>& row, bool groups);
void nhwc_row_tiles_avx512(const NhwcRowTiles<BFloat16Bits, float>& row, bool groups);
void nhwc_row_tiles_avx512(const NhwcRowTiles<Float16Bits, float>& row, bool groups);

}  // namespace fastpad::cpu
