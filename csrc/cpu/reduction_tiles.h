// The register-tiled GEMM of the CPU weight gradients (cpu_channels_last_gemm_avx2/_avx512 and
// cpu_phase_planes_avx2/_avx512 in conv_weight_grad.cpp) and of conv_transpose.cpp's NCHW phase planes and GEMM +
// col2im (cpu_phase_planes_avx2/_avx512, cpu_gemm_col2im_avx2/_avx512): c[r][v] += sum over d < depth of
// a[r, d] * b[d][v] (or c = the sum, overwrite), a tile
// of rows x vectors of c in registers for the whole depth, so that c is read and written once per call. a is read one
// value at a time (broadcast, any strides: a weight gradient's grad_output or its columns, a transposed conv's
// weight), b and c by vectors along v.
// The interface between the torch-side drivers and the micro-kernel of reduction_tiles_kernel.h, compiled once per
// instruction set (in blocked_direct_avx2.cpp and blocked_direct_avx512.cpp, beside the forward's tiles) and chosen
// when the op runs. Free of torch.
//
// Torch's GEMM (MKL) ran at 37-42% of this machine's FMA peak on these shapes (an AMD Zen 5: MKL takes its generic
// AVX2 kernel there, mkl_blas_def_sgemm_kernel_0_zen in a profile), where fastpad's forward tiles reach 80-90%.
#pragma once

#include <cstdint>

namespace fastpad::cpu {

struct ReductionTiles {
  const float* a;  // a[r, d] at a + r * a_row_stride + d * a_depth_stride
  int64_t a_row_stride, a_depth_stride;
  const float* b;  // b[d][v] at b + d * b_depth_stride + v
  int64_t b_depth_stride;
  float* c;  // c[r][v] at c + r * c_row_stride + v
  int64_t c_row_stride;
  int64_t rows, columns, depth;  // columns: any number, a last part vector read and written through masks
  // c = a b: c's values are neither read nor need initialising. Otherwise c += a b, the products summed from zero
  // in the registers and then added to c (not c's values carried through every product: see the kernel).
  bool overwrite = false;
  // Several taps summed in the same registers: c[r][v] += sum over k < taps, d < depth of a[r, d] of tap k (at
  // + k * a_tap_stride) * b_taps[k][d * b_depth_stride + v] (NCHW conv's tap GEMMs over phase planes, whose output
  // is then read and written once for all taps). Without b_taps, one tap: b.
  const float* const* b_taps = nullptr;
  int64_t taps = 1, a_tap_stride = 0;
  // > 0 (one tap only): each column of tiles reduces over depth_chunk steps of depth at a time, all its tiles of rows
  // in turn, so that the chunk's rows of b it reads stay in L1 across those tiles (the tiles' sums go through c
  // between chunks); 0: over the whole depth at once.
  int64_t depth_chunk = 0;
  // With overwrite: c[r][v] = row_init[r] + the sum (a conv's bias, where its tiles write the output itself).
  const float* row_init = nullptr;
};

// Most callers give b and c whole vectors of columns, so that no mask is needed: the weight gradients' transposed
// products and the GEMM + col2im pad their buffers with zero columns, whose results they drop, to whole AVX-512
// vectors (kReductionTilesPaddedMultiple, reduction_tiles_columns); the transposed phase planes' rows are whole
// vectors of at::vec's 8 (this multiple). The weight gradient's rows (cpu_weight_grad_rows) write the gradient itself,
// and the channels-last weight gradient's blocks of tap rows their columns of the partial: their last vector through
// masks.
constexpr int64_t kReductionTilesColumnMultiple = 8;
constexpr int64_t kReductionTilesPaddedMultiple = 16;
inline int64_t reduction_tiles_columns(int64_t columns) {
  return (columns + kReductionTilesPaddedMultiple - 1) / kReductionTilesPaddedMultiple * kReductionTilesPaddedMultiple;
}

void reduction_tiles_avx2(const ReductionTiles& t);
void reduction_tiles_avx512(const ReductionTiles& t);

// The tiles of one ISA, or null for torch's GEMM (float64, or a CPU without AVX2), as the drivers take them.
using ReductionTilesKernel = void (*)(const ReductionTiles&);

}  // namespace fastpad::cpu
