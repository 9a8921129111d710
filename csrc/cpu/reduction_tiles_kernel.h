// The micro-kernel of cpu/reduction_tiles.h, written once over blocked_direct_kernel.h's vector type `Isa` (V, kLanes,
// kRegisters, load, store, fmadd, add, broadcast) and included after it by blocked_direct_<isa>.cpp, inside that file's
// `#pragma GCC target` region and namespace.
//
// Included only from blocked_direct_<isa>.cpp: no include guard, no includes.

// A tile of R rows x U vectors of c at (r0, v0), over the whole depth of every tap: R x U accumulators, U vectors of b
// loaded and R values of a broadcast per step of depth. kPart: the one vector (U == 1) holds the row's last `lanes`
// (< kLanes) columns, read and written through masks. The accumulators start from zero (or row_init) and c's values
// are added at the end: loaded at the start instead, each product was rounded against c's whole running sum, which took
// float32 weight gradients over 120 000-214 000 products (summed through c a call and a depth chunk at a time) to
// 4.9-7.0e-6 relative error, 0.7-1.3e-6 this way (benchmarks/RESULTS.md).
template <int R, int U, bool kPart = false>
inline void reduction_tile(const ReductionTiles& t, int64_t r0, int64_t v0, int lanes = Isa::kLanes) {
  using V = typename Isa::V;
  const auto load = [lanes](const float* p) { return kPart ? Isa::load_first(p, lanes) : Isa::load(p); };
  V acc[R][U];
  float* c = t.c + r0 * t.c_row_stride + v0;
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u) {
      acc[r][u] = t.row_init ? Isa::broadcast(t.row_init + r0 + r) : Isa::zero();
    }
  }
  for (int64_t k = 0; k < t.taps; ++k) {
    const float* a = t.a + r0 * t.a_row_stride + k * t.a_tap_stride;
    const float* b = (t.b_taps ? t.b_taps[k] : t.b) + v0;
    for (int64_t d = 0; d < t.depth; ++d, a += t.a_depth_stride, b += t.b_depth_stride) {
      V bv[U];
#pragma GCC unroll 8
      for (int u = 0; u < U; ++u) {
        bv[u] = load(b + u * Isa::kLanes);
        // Loaded once into a register: GCC otherwise folds the load into each of the R multiply-adds that use it (it
        // did for 3 rows x 7 vectors, whose tiles then ran load-bound at 2.4x the time per multiply-add of 4 x 6).
        if constexpr (R > 1) asm("" : "+v"(bv[u]));
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const V av = Isa::broadcast(a + r * t.a_row_stride);
#pragma GCC unroll 8
        for (int u = 0; u < U; ++u) acc[r][u] = Isa::fmadd(av, bv[u], acc[r][u]);
      }
    }
  }
  if (!t.overwrite) {  // the products summed from zero, then added to c
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
      for (int u = 0; u < U; ++u) acc[r][u] = Isa::add(load(c + r * t.c_row_stride + u * Isa::kLanes), acc[r][u]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u) {
      if constexpr (kPart) {
        Isa::store_first(c + r * t.c_row_stride + u * Isa::kLanes, acc[r][u], lanes);
      } else {
        Isa::store(c + r * t.c_row_stride + u * Isa::kLanes, acc[r][u]);
      }
    }
  }
}

// Tiles of U vectors: as many rows as the registers hold beside U vectors of b and one broadcast.
template <int U>
constexpr int kReductionTileRows = std::min(8, (Isa::kRegisters - U - 1) / U);
constexpr int kReductionTileVectors = Isa::kRegisters >= 32 ? 4 : 3;

// The last `rows` (< R) rows of a column of tiles: the tile of exactly that many.
template <int R, int U, bool kPart>
inline void reduction_remainder_rows(int64_t rows, const ReductionTiles& t, int64_t r0, int64_t v0, int lanes) {
  if constexpr (R > 1) {
    if (rows < R) return reduction_remainder_rows<R - 1, U, kPart>(rows, t, r0, v0, lanes);
  }
  reduction_tile<R, U, kPart>(t, r0, v0, lanes);
}

// Every row for the U vectors at v0 (kPart: one vector of `lanes` columns): whole tiles, then the remainder.
template <int U, bool kPart = false>
inline void reduction_tile_column(int64_t vectors, const ReductionTiles& t, int64_t v0, int lanes = Isa::kLanes) {
  if constexpr (U > 1) {
    if (vectors < U) return reduction_tile_column<U - 1, kPart>(vectors, t, v0, lanes);
  }
  constexpr int R = kReductionTileRows<U>;
  int64_t r0 = 0;
  for (; r0 + R <= t.rows; r0 += R) reduction_tile<R, U, kPart>(t, r0, v0, lanes);
  if (r0 < t.rows) reduction_remainder_rows<R - 1, U, kPart>(t.rows - r0, t, r0, v0, lanes);
}

// A product of fewer rows than a tile of kReductionTileVectors holds (NCHW convs to a few output channels): tiles of
// all its rows and as many vectors as the registers hold beside their broadcasts, at most kFewRowsMaxVectors, where
// the tiles of kReductionTileVectors would load a vector of b per R multiply-adds.
constexpr int kFewRowsMaxVectors = 8;
template <int R>
constexpr int kFewRowsVectors = std::min(kFewRowsMaxVectors, (Isa::kRegisters - 1) / (R + 1));

// Every column of a product of exactly R rows: tiles of kFewRowsVectors<R> vectors, then one of the vectors left, then
// the masked half vector.
template <int U, int R>
inline void few_rows_remainder(int64_t vectors, const ReductionTiles& t, int64_t v0) {
  if constexpr (U > 1) {
    if (vectors < U) return few_rows_remainder<U - 1, R>(vectors, t, v0);
  }
  reduction_tile<R, U>(t, 0, v0);
}
template <int R>
inline void few_rows(const ReductionTiles& t) {
  if constexpr (R > 1) {
    if (t.rows < R) return few_rows<R - 1>(t);
  }
  constexpr int U = kFewRowsVectors<R>;
  const int64_t vectors = t.columns / Isa::kLanes;
  int64_t v = 0;
  for (; v + U <= vectors; v += U) reduction_tile<R, U>(t, 0, v * Isa::kLanes);
  if constexpr (U > 1) {
    if (v < vectors) few_rows_remainder<U - 1, R>(vectors - v, t, v * Isa::kLanes);
  }
  const int tail = static_cast<int>(t.columns % Isa::kLanes);
  if (tail > 0) reduction_tile<R, 1, /*kPart=*/true>(t, 0, vectors * Isa::kLanes, tail);
}

inline void reduction_tiles(const ReductionTiles& t) {
  constexpr int kFullRows = kReductionTileRows<kReductionTileVectors>;
  if (t.rows < kFullRows) {
    if (t.rows > 0) few_rows<kFullRows - 1>(t);
    return;
  }
  const int64_t vectors = t.columns / Isa::kLanes;
  const int tail = static_cast<int>(t.columns % Isa::kLanes);  // AVX-512: half a vector
  const int64_t chunk = t.depth_chunk > 0 && t.b_taps == nullptr ? t.depth_chunk : std::max<int64_t>(t.depth, 1);
  // column(part) for each chunk of the depth (one, of depth 0, where there is none: c is still written).
  const auto by_chunks = [&](const auto& column) {
    for (int64_t d0 = 0; d0 == 0 || d0 < t.depth; d0 += chunk) {
      ReductionTiles part = t;  // depth [d0, d0 + chunk), added onto the earlier chunks' sums
      part.a += d0 * t.a_depth_stride;
      part.b += d0 * t.b_depth_stride;
      part.depth = std::min(chunk, t.depth - d0);
      part.overwrite = t.overwrite && d0 == 0;
      part.row_init = d0 == 0 ? t.row_init : nullptr;
      column(part);
    }
  };
  for (int64_t v = 0; v < vectors; v += kReductionTileVectors) {
    by_chunks([&](const ReductionTiles& part) {
      reduction_tile_column<kReductionTileVectors>(vectors - v, part, v * Isa::kLanes);
    });
  }
  if (tail > 0) {
    by_chunks([&](const ReductionTiles& part) {
      reduction_tile_column<1, /*kPart=*/true>(1, part, vectors * Isa::kLanes, tail);
    });
  }
}
