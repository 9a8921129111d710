// The torch-side driver of the register-blocked direct kernels (conv.cpp's blocked_direct_conv): conv's
// cpu_blocked_* paths, and conv_transpose's, which hand it the conv a stride-1 transposed conv is.
#pragma once

#include <ATen/core/Tensor.h>

#include "geometry.h"

namespace fastpad::cpu {

// y = conv(x, weight, bias) for g, y allocated in x's layout (channels_last or contiguous NCHW); float accumulation
// (float32, bfloat16, float16). avx512: the AVX-512 micro-kernels, else AVX2's.
void blocked_conv(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                  at::Tensor& y, bool channels_last, bool avx512);

}  // namespace fastpad::cpu
