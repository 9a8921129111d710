// Direct CPU kernels for depthwise problems (one conv-input channel per group, channel multiplier
// m = C_out / C_in), for all three ops, where kernel_paths.h's cpu_depthwise says so.
// Layout: contiguous N,C,spatial (any m) or channels-last (any m for the conv, which reads input rows expanded by m;
// m == 1 for the transposed conv and the weight gradient).
// The channels-last conv and transposed conv also take grouped problems with a few channels per group
// (cpu_grouped_expanded): the conv's input rows, and the transposed conv's x pixels, are expanded so that each output
// channel's lane reads its own group's channels. The NCHW conv takes a few input channels per group
// (cpu_grouped_planes: few output channels per group), the NCHW weight gradient any number (cpu_tap_dots: few output
// channels per group), and the NCHW transposed conv any number of y channels per group (cpu_grouped_planes: few x
// channels per group).
// Padding: NCHW rows are read through phase rows whose borders the padding mode resolves; channels-last
// resolves each tap's source pixel. No padded tensor is built.
// channels_last below chooses the kernels, not the tensors' layout: the NCHW kernels (channels_last false, no channel
// blocks) also take channels-last tensors, reading and writing their pixels C elements apart
// (cpu_depthwise_strided_planes, for fewer channels than a vector).
#pragma once

#include <ATen/core/Tensor.h>

#include "geometry.h"

namespace fastpad::cpu {

// y = conv(x, weight, bias); y allocated in x's layout. channel_blocks: NCHW with multiplier 1 on blocks of channels
// transposed to channels-last (cpu_depthwise_channel_blocks). avx512_tiles: the channels-last register tiles (of a
// channels-last conv, or of the channel blocks) on AVX-512 (cpu_nhwc_tiles_avx512).
void depthwise_conv(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                    at::Tensor& y, bool channels_last, bool channel_blocks = false, bool avx512_tiles = false);

// y_acc += conv_transpose(x, weight); y_acc is in the accumulation type, in x's layout.
void depthwise_conv_transpose(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& weight,
                              at::Tensor& y_acc, bool channels_last);

// y = conv_transpose(x, weight, bias), channels-last, multiplier 1, zeros (cpu_depthwise_phases): its stride phases
// as depthwise convs on the channels-last tiles, y row by y row. y: the op's output (channels contiguous).
// channel_blocks: NCHW, multiplier 1, zeros (cpu_depthwise_channel_block_phases): the same on blocks of channels
// transposed to channels-last; y contiguous.
void depthwise_conv_transpose_phases(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& weight,
                                     const at::Tensor& bias, at::Tensor& y, bool channel_blocks, bool avx512_tiles);

// The weight gradient, [C_out, C_in / groups, *k] in the accumulation type. channel_blocks: NCHW with multiplier 1 on
// blocks of channels transposed to channels-last (cpu_depthwise_weight_grad_channel_blocks). avx512_tiles: the
// channels-last sums (of a channels-last tensor, or of the channel blocks) on AVX-512 (cpu_nhwc_tiles_avx512).
// grad_output_repeats > 1 (channels-last, multiplier 1): grad_output holds C_out /
// grad_output_repeats channels, its channel c / grad_output_repeats standing for channel c
// (depthwise_of_repeated_grad_output in kernel_paths.h).
at::Tensor depthwise_weight_grad(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& grad_output,
                                 bool channels_last, bool channel_blocks = false, bool avx512_tiles = false,
                                 int64_t grad_output_repeats = 1);

}  // namespace fastpad::cpu
