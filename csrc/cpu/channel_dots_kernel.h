// cpu/channel_dots.h's kernel for the Isa of the file that includes it (blocked_direct_avx2.cpp,
// blocked_direct_avx512.cpp). Included inside that file's namespace, after its Isa.

// The pixels a block shares each weight vector between: as many as the registers hold, kOut accumulators and an input
// vector for each pixel, with a weight vector and a spare, at most 8 (AVX-512: 3 pixels of 8 output channels, 6 of 4,
// 8 of 1; AVX2: 1 of 8, 2 of 4, 7 of 1), so that even one output channel has enough independent accumulators not to
// wait on the FMAs' latency.
template <int kOut>
constexpr int channel_dots_pixels() {
  return std::max(1, std::min(8, (Isa::kRegisters - 2) / (kOut + 1)));
}

// kOut output channels of one group at kPixels pixels, summed over every tap and input channel of the group.
// rows[k * taps + t]: the input channels (all groups') that pixel k reads through tap t.
template <int kOut, int kPixels>
void channel_dots_block(const ChannelDots& p, const float* const* rows, int64_t group, int64_t first_out,
                        float* y) {
  using V = typename Isa::V;
  const int64_t reduction = p.in_channels / p.groups, whole = reduction / Isa::kLanes * Isa::kLanes;
  const int rest = static_cast<int>(reduction - whole);
  const int64_t out0 = group * (p.out_channels / p.groups) + first_out;
  const int64_t w_step = p.taps * reduction;  // from one output channel's weights to the next's
  V acc[kPixels][kOut];
  for (int k = 0; k < kPixels; ++k) {
    for (int j = 0; j < kOut; ++j) acc[k][j] = Isa::zero();
  }
  for (int64_t t = 0; t < p.taps; ++t) {
    const float* x[kPixels];
    for (int k = 0; k < kPixels; ++k) x[k] = rows[k * p.taps + t] + group * reduction;
    const float* w = p.weight + (out0 * p.taps + t) * reduction;
    for (int64_t i = 0; i < whole; i += Isa::kLanes) {
      V xv[kPixels];
      for (int k = 0; k < kPixels; ++k) xv[k] = Isa::load(x[k] + i);
      for (int j = 0; j < kOut; ++j) {
        const V wv = Isa::load(w + j * w_step + i);
        for (int k = 0; k < kPixels; ++k) acc[k][j] = Isa::fmadd(xv[k], wv, acc[k][j]);
      }
    }
    if (rest) {
      V xv[kPixels];
      for (int k = 0; k < kPixels; ++k) xv[k] = Isa::load_first(x[k] + whole, rest);
      for (int j = 0; j < kOut; ++j) {
        const V wv = Isa::load_first(w + j * w_step + whole, rest);
        for (int k = 0; k < kPixels; ++k) acc[k][j] = Isa::fmadd(xv[k], wv, acc[k][j]);
      }
    }
  }
  for (int k = 0; k < kPixels; ++k) {
    for (int j = 0; j < kOut; ++j) {
      y[k * p.out_channels + out0 + j] = Isa::sum(acc[k][j]) + (p.bias ? p.bias[out0 + j] : 0.0f);
    }
  }
}

// kOut output channels of one group at `pixels` pixels: blocks of channel_dots_pixels<kOut>(), then one at a time.
template <int kOut>
void channel_dots_pixels_of_group(const ChannelDots& p, const float* const* rows, int64_t pixels, int64_t group,
                                  int64_t first_out, float* y) {
  constexpr int kPixels = channel_dots_pixels<kOut>();
  int64_t k = 0;
  for (; k + kPixels <= pixels; k += kPixels) {
    channel_dots_block<kOut, kPixels>(p, rows + k * p.taps, group, first_out, y + k * p.out_channels);
  }
  for (; k < pixels; ++k) channel_dots_block<kOut, 1>(p, rows + k * p.taps, group, first_out, y + k * p.out_channels);
}

constexpr int kChannelDotsMaxBlock = 8;  // output channels per block

inline void channel_dots(const ChannelDots& p, const float* const* rows, int64_t pixels, float* y) {
  const int64_t out_per_group = p.out_channels / p.groups;
  for (int64_t group = 0; group < p.groups; ++group) {
    for (int64_t first = 0; first < out_per_group; first += kChannelDotsMaxBlock) {
      const auto run = [&](auto out) {
        channel_dots_pixels_of_group<decltype(out)::value>(p, rows, pixels, group, first, y);
      };
      switch (std::min<int64_t>(kChannelDotsMaxBlock, out_per_group - first)) {
        case 1: run(std::integral_constant<int, 1>()); break;
        case 2: run(std::integral_constant<int, 2>()); break;
        case 3: run(std::integral_constant<int, 3>()); break;
        case 4: run(std::integral_constant<int, 4>()); break;
        case 5: run(std::integral_constant<int, 5>()); break;
        case 6: run(std::integral_constant<int, 6>()); break;
        case 7: run(std::integral_constant<int, 7>()); break;
        default: run(std::integral_constant<int, 8>()); break;
      }
    }
  }
}
