// The tile loops of a channels-last output row (cpu/nhwc_tiles.h), included once per instruction set inside that
// set's namespace (depthwise.cpp, nhwc_tiles_avx512.cpp). Isa gives the vector of accumulators:
//   V, kLanes; load(const scalar_t* or const acc_t*) -> V of acc_t; zero(); fmadd(a, b, c) = a * b + c;
//   store(scalar_t*, V), rounding to scalar_t.
// No include guard: each inclusion compiles these templates for its own instruction set.

// One tile: kNhwcTile positions from ow0 (the first `kept` of them stored) x the vector of channels at c0, over every
// tap row and the input channels per group of each tap (kGroups; otherwise one, known to the compiler).
template <typename Isa, bool kGroups, typename scalar_t, typename acc_t>
void nhwc_tile(const NhwcRowTiles<scalar_t, acc_t>& a, const int64_t* tile_columns, bool interior, int64_t ow0,
               int64_t kept, int64_t c0) {
  using V = typename Isa::V;
  const int64_t reduction = kGroups ? a.reduction : 1;
  const int64_t channels = a.channels, kw_count = a.kw_count;
  const int64_t pixel_values = reduction * channels, pixel_step = a.stride_w * pixel_values;
  V acc[kNhwcTile];
  const V init = a.bias ? Isa::load(a.bias + c0) : Isa::zero();
#pragma GCC unroll 8
  for (int64_t p = 0; p < kNhwcTile; ++p) acc[p] = init;
  for (int64_t r = 0; r < a.row_count; ++r) {
    const scalar_t* x_row = a.x_image + a.rows[r].second * a.in_w * pixel_values + c0;
    const acc_t* w_row = a.w_taps + a.rows[r].first * kw_count * pixel_values + c0;
    for (int64_t kw = 0; kw < kw_count; ++kw) {
      for (int64_t ci = 0; ci < reduction; ++ci) {
        const V w = Isa::load(w_row + (kw * reduction + ci) * channels);
        if (interior) {  // the tile's inputs a stride apart: no column look-up, no test
          const scalar_t* x_tap = x_row + tile_columns[kw] * pixel_values + ci * channels;
#pragma GCC unroll 8
          for (int64_t p = 0; p < kNhwcTile; ++p) acc[p] = Isa::fmadd(Isa::load(x_tap + p * pixel_step), w, acc[p]);
          continue;
        }
#pragma GCC unroll 8
        for (int64_t p = 0; p < kNhwcTile; ++p) {
          const int64_t column = tile_columns[p * kw_count + kw];
          if (column >= 0) acc[p] = Isa::fmadd(Isa::load(x_row + column * pixel_values + ci * channels), w, acc[p]);
        }
      }
    }
  }
  // (A copy of each accumulator is stored: passing acc[p] itself by reference kept the tile out of registers.)
#pragma GCC unroll 8
  for (int64_t p = 0; p < kNhwcTile; ++p) {
    if (p >= kept) break;
    const V out = acc[p];
    Isa::store(a.y_row + (ow0 + p) * a.y_pixel_stride + c0, out);
  }
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
      nhwc_tile<Isa, kGroups>(a, a.columns + ow0 * kw_count, a.interior[tile], ow0,
                              std::min(kNhwcTile, a.out_w - ow0), std::min(c, a.channels - Isa::kLanes));
    }
  }
}
