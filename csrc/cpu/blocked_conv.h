// The torch-side drivers of conv's register-blocked direct kernels (conv.cpp's blocked_direct_conv: conv's
// cpu_blocked_* paths) and of its tap tiles, which conv_transpose hands the convs its stride phases are.
#pragma once

#include <ATen/core/Tensor.h>

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

// y = conv(x, weight, bias) for g on conv's tap tiles (conv.cpp's tap_gemm_conv on cpu/reduction_tiles.h, AVX-512 or
// AVX2: kernel_paths.h's cpu_tap_tiles), x and y in the layout channels_last says: NCHW y dense, a channels-last y any
// strided tensor of the output's shape whose channels are contiguous; float accumulation. conv_transpose's
// cpu_tap_tiles_* paths hand it the convs a transposed conv's stride phases are.
void tap_tiles_conv(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                    at::Tensor& y, bool channels_last, bool avx512);

}  // namespace fastpad::cpu
