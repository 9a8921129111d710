// Channels-last float32 convs with few output channels per group and long runs of input channels (kernel_paths.h's
// cpu_channel_dots): each output value is a sum of dot products, one per tap, along the input channels of the pixel
// the tap reads. In channels-last tensors those channels are contiguous in the input and, once packed, in the weight,
// so the vectors run along them and every lane is used, where the blocked kernel's vectors along the output channels
// would leave most lanes empty (4 output channels fill a quarter of AVX-512's 16).
#pragma once

#include <cstdint>

namespace fastpad::cpu {

struct ChannelDots {
  const float* x;       // channels-last input: pixel p's in_channels at x + p * in_channels
  const float* weight;  // [out_channels][taps][in_channels_per_group], contiguous along the input channels
  const float* bias;    // out_channels values, or null
  int64_t in_channels, out_channels, groups, taps;
};

// `pixels` output pixels' out_channels values to y (pixel k's at y + k * out_channels): rows[k * taps + t] holds the
// input channels that pixel k reads through tap t (the input pixel's, or a row of zeros where the tap reads a zero of
// the padding).
void channel_dots_avx2(const ChannelDots& p, const float* const* rows, int64_t pixels, float* y);
void channel_dots_avx512(const ChannelDots& p, const float* const* rows, int64_t pixels, float* y);

}  // namespace fastpad::cpu
