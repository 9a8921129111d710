// The torch-side drivers of conv's register-blocked direct kernels (conv.cpp's blocked_direct_conv: conv's
// cpu_blocked_* paths) and of its tap tiles, which conv_transpose hands the convs its stride phases are.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "geometry.h"

namespace fastpad::cpu {

// The micro-kernels of cpu/blocked_direct.h: float32 FMAs on AVX2 or AVX-512, or AVX512_BF16 dot products (bfloat16
// tensors with an even number of input channels per group only).
enum class BlockedKernel { Avx2, Avx512, Avx512Bf16 };

// y = conv(x, weight, bias) for g, x in the layout channels_last says (channels_last or contiguous NCHW), y any
// strided tensor of the output's shape (a view into a larger output included); float accumulation (float32, bfloat16,
// float16). no_planes: the tiles read x in place (kernel_paths.h's cpu_blocked_no_planes holds).
void blocked_conv(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                  at::Tensor& y, bool channels_last, BlockedKernel kernel, bool no_planes = false);

// One of the convs blocked_convs computes from one gather of x: its geometry (channels and groups the covering conv's,
// its kernel and output sizes within it), weight and output y (any strided tensor of its output's shape; the outputs
// share their strides), and where its taps sit among the covering conv's: its tap (kh, kw) is the covering
// (tap_row + kh, tap_col + kw), its outputs the covering conv's first ones.
struct BlockedOutput {
  ConvGeometry conv;
  at::Tensor weight, y;
  int64_t tap_row = 0, tap_col = 0;
};

// Every output's conv (blocked_conv's) from the phase planes of `covering`, a conv over x whose taps and outputs hold
// theirs: x is gathered once per band for all of them (a transposed conv's stride phases: once, not once per phase).
// More than one output: 1-d and 2-d only, never no_planes.
void blocked_convs(const ConvGeometry& covering, const at::Tensor& x, const std::vector<BlockedOutput>& outputs,
                   const at::Tensor& bias, bool channels_last, BlockedKernel kernel, bool no_planes = false);

// y = conv(x, weight, bias) for g on conv's tap tiles (conv.cpp's tap_gemm_conv on cpu/reduction_tiles.h, AVX-512 or
// AVX2: kernel_paths.h's cpu_tap_tiles), x and y in the layout channels_last says: NCHW y dense, a channels-last y any
// strided tensor of the output's shape whose channels are contiguous; float accumulation. conv_transpose's
// cpu_tap_tiles_* paths hand it the convs a transposed conv's stride phases are.
void tap_tiles_conv(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                    at::Tensor& y, bool channels_last, bool avx512);

}  // namespace fastpad::cpu
