// The tile loops of a channels-last output row (cpu/nhwc_tiles.h), included once per instruction set inside that
// set's namespace (depthwise.cpp, nhwc_tiles_avx512.cpp). Isa gives the vector of accumulators:
//   V, kLanes; load(const scalar_t* or const acc_t*) -> V of acc_t; zero(); fmadd(a, b, c) = a * b + c; add(a, b);
//   store(scalar_t*, V), rounding to scalar_t; store(acc_t*, V); scalar(scalar_t) -> acc_t; kMaskedLanes: whether
//   it has load(const float*, uint32_t lanes_mask) and store(float*, V, uint32_t lanes_mask), for float32 rows of
//   fewer channels than a vector (the other lanes load zeros and are not stored).
// No include guard: each inclusion compiles these templates for its own instruction set.

// A vector of accumulators from p; kMasked: only the lanes set in lanes_mask, the others zero.
template <typename Isa, bool kMasked, typename T>
__attribute__((always_inline)) inline typename Isa::V tile_load(const T* p, uint32_t lanes_mask) {
  if constexpr (kMasked) {
    return Isa::load(p, lanes_mask);
  } else {
    return Isa::load(p);
  }
}

// Stores the first `kept` of a tile's accumulators, positions from ow0, at the vector of channels at c0. Inlined
// always, each accumulator copied before its store: the tile's accumulators behind a pointer or a reference stayed
// out of registers.
template <typename Isa, bool kMasked, typename scalar_t, typename acc_t>
__attribute__((always_inline)) inline void store_tile(const NhwcRowTiles<scalar_t, acc_t>& a,
                                                      const typename Isa::V (&acc)[kNhwcTile], int64_t ow0,
                                                      int64_t kept, int64_t c0, uint32_t lanes_mask) {
#pragma GCC unroll 8
  for (int64_t p = 0; p < kNhwcTile; ++p) {
    if (p >= kept) break;
    const typename Isa::V out = acc[p];
    if constexpr (kMasked) {
      Isa::store(a.y_row + (ow0 + p) * a.y_pixel_stride + c0, out, lanes_mask);
    } else {
      Isa::store(a.y_row + (ow0 + p) * a.y_pixel_stride + c0, out);
    }
  }
}

// One tile: kNhwcTile positions from ow0 (the first `kept` of them stored) x the vector of channels at c0, over every
// tap row and the input channels per group of each tap (kGroups; otherwise one, known to the compiler). kMasked: the
// row has fewer channels than a vector, which loads and stores only the lanes set in lanes_mask (Isa::kMaskedLanes).
template <typename Isa, bool kGroups, bool kMasked, typename scalar_t, typename acc_t>
void nhwc_tile(const NhwcRowTiles<scalar_t, acc_t>& a, const int64_t* tile_columns, bool interior, int64_t ow0,
               int64_t kept, int64_t c0, uint32_t lanes_mask) {
  using V = typename Isa::V;
  const auto load = [lanes_mask](const auto* p) { return tile_load<Isa, kMasked>(p, lanes_mask); };
  const int64_t reduction = kGroups ? a.reduction : 1;
  const int64_t channels = a.channels, kw_count = a.kw_count;
  const int64_t pixel_values = reduction * channels, pixel_step = a.stride_w * pixel_values;
  V acc[kNhwcTile];
  const V init = a.bias ? load(a.bias + c0) : Isa::zero();
#pragma GCC unroll 8
  for (int64_t p = 0; p < kNhwcTile; ++p) acc[p] = init;
  for (int64_t r = 0; r < a.row_count; ++r) {
    const scalar_t* x_row = a.x_image + a.rows[r].second * a.in_w * pixel_values + c0;
    const acc_t* w_row = a.w_taps + a.rows[r].first * kw_count * pixel_values + c0;
    for (int64_t kw = 0; kw < kw_count; ++kw) {
      for (int64_t ci = 0; ci < reduction; ++ci) {
        const V w = load(w_row + (kw * reduction + ci) * channels);
        if (interior) {  // the tile's inputs a stride apart: no column look-up, no test
          const scalar_t* x_tap = x_row + tile_columns[kw] * pixel_values + ci * channels;
#pragma GCC unroll 8
          for (int64_t p = 0; p < kNhwcTile; ++p) acc[p] = Isa::fmadd(load(x_tap + p * pixel_step), w, acc[p]);
          continue;
        }
#pragma GCC unroll 8
        for (int64_t p = 0; p < kNhwcTile; ++p) {
          const int64_t column = tile_columns[p * kw_count + kw];
          if (column >= 0) acc[p] = Isa::fmadd(load(x_row + column * pixel_values + ci * channels), w, acc[p]);
        }
      }
    }
  }
  store_tile<Isa, kMasked>(a, acc, ow0, kept, c0, lanes_mask);
}

// A tile of a depthwise row at stride kStride and dilation 1 (kernel_paths.h's cpu_nhwc_tiles_slide): tap kw of
// position p reads the tile's input kStride * p + kw, so each input vector is loaded once and multiplied into every
// accumulator that reads it. A tap row costs kStride * (kNhwcTile - 1) + kTaps input loads and kTaps weight loads for
// kNhwcTile * kTaps multiply-adds, where nhwc_tile loads one input per multiply-add. Every (position, tap) pair that
// reads input i reads the same column, so a border tile (not kInterior) looks it up once, from the first position
// that reads it, and skips an input in zero padding (or read by no kept position: column -1). Each accumulator still
// takes its taps in nhwc_tile's order (rows, then kw), so the sums are the same.
template <typename Isa, int kTaps, int kStride, bool kMasked, bool kInterior, typename scalar_t, typename acc_t>
void nhwc_sliding_tile(const NhwcRowTiles<scalar_t, acc_t>& a, const int64_t* tile_columns, int64_t ow0,
                       int64_t kept, int64_t c0, uint32_t lanes_mask) {
  using V = typename Isa::V;
  const auto load = [lanes_mask](const auto* p) { return tile_load<Isa, kMasked>(p, lanes_mask); };
  constexpr int kInputs = kStride * (kNhwcTile - 1) + kTaps;
  const int64_t channels = a.channels;
  V acc[kNhwcTile];
  const V init = a.bias ? load(a.bias + c0) : Isa::zero();
#pragma GCC unroll 8
  for (int p = 0; p < kNhwcTile; ++p) acc[p] = init;
  for (int64_t r = 0; r < a.row_count; ++r) {
    const scalar_t* x_row = a.x_image + a.rows[r].second * a.in_w * channels + c0;
    const acc_t* w_row = a.w_taps + a.rows[r].first * kTaps * channels + c0;
    V w[kTaps];
#pragma GCC unroll 8
    for (int kw = 0; kw < kTaps; ++kw) w[kw] = load(w_row + kw * channels);
#pragma GCC unroll 32
    for (int i = 0; i < kInputs; ++i) {
      const int first = i < kTaps ? 0 : (i - kTaps) / kStride + 1;  // the first position that reads input i
      const int64_t column = kInterior ? tile_columns[0] + i : tile_columns[first * kTaps + i - kStride * first];
      if (!kInterior && column < 0) continue;
      const V x = load(x_row + column * channels);
#pragma GCC unroll 8
      for (int kw = 0; kw < kTaps; ++kw) {
        const int q = i - kw;  // position q / kStride reads this input through tap kw
        if (q >= 0 && q % kStride == 0 && q / kStride < kNhwcTile) {
          acc[q / kStride] = Isa::fmadd(x, w[kw], acc[q / kStride]);
        }
      }
    }
  }
  store_tile<Isa, kMasked>(a, acc, ow0, kept, c0, lanes_mask);
}

// One tile: the sliding tile where the row slides (a.sliding), nhwc_tile otherwise.
template <typename Isa, bool kGroups, bool kMasked, typename scalar_t, typename acc_t>
void nhwc_any_tile(const NhwcRowTiles<scalar_t, acc_t>& a, const int64_t* tile_columns, bool interior, int64_t ow0,
                   int64_t kept, int64_t c0, uint32_t lanes_mask) {
  if constexpr (!kGroups) {
    static_assert(kNhwcSlidingMaxTaps == 7, "nhwc_any_tile instantiates the sliding tile for 2 to 7 taps");
    if (a.sliding) {
      const auto slide = [&](auto taps) {
        constexpr int kTaps = decltype(taps)::value;
        const auto at_stride = [&](auto stride) {
          constexpr int kStride = decltype(stride)::value;
          if (interior) {
            nhwc_sliding_tile<Isa, kTaps, kStride, kMasked, true>(a, tile_columns, ow0, kept, c0, lanes_mask);
          } else {
            nhwc_sliding_tile<Isa, kTaps, kStride, kMasked, false>(a, tile_columns, ow0, kept, c0, lanes_mask);
          }
        };
        if (a.stride_w == 1) {
          at_stride(std::integral_constant<int, 1>{});
        } else {
          at_stride(std::integral_constant<int, 2>{});
        }
      };
      switch (a.kw_count) {
        case 2: return slide(std::integral_constant<int, 2>{});
        case 3: return slide(std::integral_constant<int, 3>{});
        case 4: return slide(std::integral_constant<int, 4>{});
        case 5: return slide(std::integral_constant<int, 5>{});
        case 6: return slide(std::integral_constant<int, 6>{});
        default: return slide(std::integral_constant<int, 7>{});
      }
    }
  }
  nhwc_tile<Isa, kGroups, kMasked>(a, tile_columns, interior, ow0, kept, c0, lanes_mask);
}

// One pass along the row, tile by tile, each tile once per vector of channels while its pixels stay in L1. Channels
// past the last whole vector are the last vector that ends at C, whose channels shared with the one before are
// computed again, alike. While a tile runs, the next one's input is prefetched: pixels of up to two lines whole,
// wider ones a 64-byte run of channels at a time, just before the tile's vectors of that run, so that L1 holds about
// one tile's lines at once (prefetching wide pixels whole evicted the tile's own lines: 0.68-0.89x the time on k3
// layers of 64-288 channels, 0.94-1.04x on k5).
template <typename Isa, bool kGroups, typename scalar_t, typename acc_t>
void nhwc_row_tiles(const NhwcRowTiles<scalar_t, acc_t>& a) {
  constexpr int64_t kLineValues = 64 / sizeof(scalar_t);
  const int64_t reduction = kGroups ? a.reduction : 1, kw_count = a.kw_count;
  const int64_t pixel_values = reduction * a.channels;
  const int64_t tiles = (a.out_w + kNhwcTile - 1) / kNhwcTile;
  for (int64_t tile = 0; tile < tiles; ++tile) {
    const int64_t ow0 = tile * kNhwcTile;
    const bool prefetch = tile + 1 < tiles && a.interior[tile + 1];
    const int64_t first = prefetch ? a.columns[(ow0 + kNhwcTile) * kw_count] : 0;
    if (prefetch && a.whole_pixels) {  // the next tile's input pixels, row by row, in order
      const int64_t bytes = kNhwcTile * a.stride_w * pixel_values * static_cast<int64_t>(sizeof(scalar_t));
      for (int64_t r = 0; r < a.row_count; ++r) {
        const char* start =
            reinterpret_cast<const char*>(a.x_image + (a.rows[r].second * a.in_w + first) * pixel_values);
        for (int64_t b = 0; b < bytes + 63; b += 64) __builtin_prefetch(start + b);  // every line it touches
      }
    }
    for (int64_t c = 0; c < a.channels; c += Isa::kLanes) {
      if (prefetch && !a.whole_pixels && c % kLineValues == 0) {
        for (int64_t r = 0; r < a.row_count; ++r) {
          const scalar_t* start = a.x_image + (a.rows[r].second * a.in_w + first) * pixel_values + c;
          for (int64_t i = 0; i < a.read_offset_count; ++i) {
            for (int64_t ci = 0; ci < reduction; ++ci) {
              __builtin_prefetch(start + a.read_offsets[i] * pixel_values + ci * a.channels);
            }
          }
        }
      }
      const int64_t kept = std::min(kNhwcTile, a.out_w - ow0);
      if constexpr (Isa::kMaskedLanes && std::is_same_v<scalar_t, float>) {
        if (a.channels < Isa::kLanes) {  // one vector, masked to the channels (float32 rows: kernel_paths.h)
          nhwc_any_tile<Isa, kGroups, true>(a, a.columns + ow0 * kw_count, a.interior[tile], ow0, kept, 0,
                                            (uint32_t(1) << a.channels) - 1);
          continue;
        }
      }
      nhwc_any_tile<Isa, kGroups, false>(a, a.columns + ow0 * kw_count, a.interior[tile], ow0, kept,
                                         std::min(c, a.channels - Isa::kLanes), 0);
    }
  }
}

// The sums of taps kw0 .. kw0 + kTaps - 1 of one tap row (x_row: its input row) over the output row, for the vector of
// channels at c (NhwcWeightGradRow).
template <typename Isa, int kTaps, typename scalar_t, typename acc_t>
void weight_grad_taps(const NhwcWeightGradRow<scalar_t, acc_t>& a, const scalar_t* x_row, acc_t* sums, int64_t kw0,
                      int64_t c) {
  using V = typename Isa::V;
  const int64_t channels = a.channels, kw_count = a.kw_count;
  V acc[kTaps];  // the row's sums, added to the running sums at the end (see nhwc_weight_grad_row)
#pragma GCC unroll 8
  for (int t = 0; t < kTaps; ++t) acc[t] = Isa::zero();
  const auto border = [&](int64_t ow) {  // columns looked up, taps in zero padding skipped
    const V gy = Isa::load(a.gy_row + ow * channels + c);
#pragma GCC unroll 8
    for (int t = 0; t < kTaps; ++t) {
      const int64_t column = a.columns[ow * kw_count + kw0 + t];
      if (column >= 0) acc[t] = Isa::fmadd(gy, Isa::load(x_row + column * channels + c), acc[t]);
    }
  };
  for (int64_t ow = 0; ow < a.interior_begin; ++ow) border(ow);
  if (a.interior_begin < a.interior_end) {
    const scalar_t* x_tap = x_row + a.columns[a.interior_begin * kw_count + kw0] * channels + c;
    const int64_t tap_step = a.dilation_w * channels, pixel_step = a.stride_w * channels;
    for (int64_t ow = a.interior_begin; ow < a.interior_end; ++ow, x_tap += pixel_step) {
      const V gy = Isa::load(a.gy_row + ow * channels + c);
#pragma GCC unroll 8
      for (int t = 0; t < kTaps; ++t) acc[t] = Isa::fmadd(gy, Isa::load(x_tap + t * tap_step), acc[t]);
    }
  }
  for (int64_t ow = std::max(a.interior_begin, a.interior_end); ow < a.out_w; ++ow) border(ow);
#pragma GCC unroll 8
  for (int t = 0; t < kTaps; ++t) {
    Isa::store(sums + t * a.sum_stride, Isa::add(Isa::load(sums + t * a.sum_stride), acc[t]));
  }
}

// The whole row: vectors of channels in registers, runs of up to 8 taps. Channels past the last whole vector are the
// vector that ends at c_end, its sums kept apart at tail_column (added into the others, the channels it shares with
// the vector before would count twice); under one vector of channels, one by one. Each channel's sums are the same
// fused multiply-adds in the same order either way, so they do not depend on where the blocks split. Each row's sum
// starts from zero and is then added to the running sum: a running sum carried through every product took a float32
// sum over 6 images of 189 x 189 positions to 0.6-1.3e-5 relative error (torch: 1.9e-6).
template <typename Isa, typename scalar_t, typename acc_t>
void nhwc_weight_grad_row(const NhwcWeightGradRow<scalar_t, acc_t>& a) {
  constexpr int64_t kMaxTaps = 8;
  const int64_t vector_end = a.c_begin + (a.c_end - a.c_begin) / Isa::kLanes * Isa::kLanes;
  const bool tail_vector = vector_end < a.c_end && a.c_end >= Isa::kLanes;
  for (int64_t r = 0; r < a.row_count; ++r) {
    const scalar_t* x_row = a.x_image + a.rows[r].second * a.in_w * a.channels;
    acc_t* row_sums = a.sums + a.rows[r].first * a.kw_count * a.sum_stride;
    const auto vector = [&](int64_t c, int64_t column) {
      for (int64_t kw0 = 0; kw0 < a.kw_count; kw0 += kMaxTaps) {
        acc_t* sums = row_sums + kw0 * a.sum_stride + column;
        switch (std::min(kMaxTaps, a.kw_count - kw0)) {
          case 1: weight_grad_taps<Isa, 1>(a, x_row, sums, kw0, c); break;
          case 2: weight_grad_taps<Isa, 2>(a, x_row, sums, kw0, c); break;
          case 3: weight_grad_taps<Isa, 3>(a, x_row, sums, kw0, c); break;
          case 4: weight_grad_taps<Isa, 4>(a, x_row, sums, kw0, c); break;
          case 5: weight_grad_taps<Isa, 5>(a, x_row, sums, kw0, c); break;
          case 6: weight_grad_taps<Isa, 6>(a, x_row, sums, kw0, c); break;
          case 7: weight_grad_taps<Isa, 7>(a, x_row, sums, kw0, c); break;
          default: weight_grad_taps<Isa, 8>(a, x_row, sums, kw0, c); break;
        }
      }
    };
    for (int64_t c = a.c_begin; c < vector_end; c += Isa::kLanes) vector(c, c - a.c_begin);
    if (tail_vector) {
      vector(a.c_end - Isa::kLanes, a.tail_column);
      continue;
    }
    for (int64_t c = vector_end; c < a.c_end; ++c) {
      for (int64_t kw = 0; kw < a.kw_count; ++kw) {
        acc_t sum = 0;
        for (int64_t ow = 0; ow < a.out_w; ++ow) {
          const int64_t column = a.columns[ow * a.kw_count + kw];
          if (column >= 0) {
            const acc_t gy = Isa::scalar(a.gy_row[ow * a.channels + c]);
            sum = std::fma(gy, Isa::scalar(x_row[column * a.channels + c]), sum);
          }
        }
        row_sums[kw * a.sum_stride + c - a.c_begin] += sum;
      }
    }
  }
}
