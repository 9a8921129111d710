// The micro-kernels of cpu/blocked_direct.h, written once over a vector type `Isa` and included by one source file
// per instruction set, inside that file's `#pragma GCC target` region and its own namespace (so that nothing here is
// shared between instruction sets). Isa provides the float32 accumulators: V, kLanes (floats per vector), kRegisters,
// kVectors (the most vectors of output channels per block), load, store, fmadd; and the operands: Element (what the
// planes and weights hold), kDepth (input channels per multiply-add: 1, or 2 for bfloat16 pairs), W (an operand
// vector), broadcast (one position's kDepth inputs into every lane), load_weights, multiply_add(x, w, acc); for the
// float32 weight packing, load_first, zero and transpose (kLanes rows into columns). A tile of
// U vectors takes as many positions P as its U x P accumulators, U weight vectors and one broadcast leave registers
// for.
//
// Included only from blocked_direct_<isa>.cpp: no include guard, no includes (they come before the target region).

// Where a tile's positions read and write: a run within a row (RowRun: position p reads at x0 + p x the position
// stride from each tap's start and writes at out + p x the output pitch), or positions listed one by one
// (ListedPositions), which may run on into the next rows.
struct RowRun {
  int64_t x0;
  float* out;
  int64_t x(const BlockedDirectArgs<typename Isa::Element>& a, int p) const { return x0 + p * a.x_position_stride; }
  float* output(const BlockedDirectArgs<typename Isa::Element>& a, int p) const { return out + p * a.out_pitch; }
};
template <int P>
struct ListedPositions {
  int64_t x_offsets[P];
  float* outs[P];
  int64_t x(const BlockedDirectArgs<typename Isa::Element>&, int p) const { return x_offsets[p]; }
  float* output(const BlockedDirectArgs<typename Isa::Element>&, int p) const { return outs[p]; }
};

// A tile of P positions (`at`) x U vectors of channels at c0, over every tap and input channel: out is set from
// init, or added onto (a.accumulate). The block's weights (taps x lanes x width floats) stream from L2 once per tile:
// splitting the reduction into L1-sized passes, re-reading and re-writing out between them, measured slower.
using Args = BlockedDirectArgs<typename Isa::Element>;
using Element = typename Isa::Element;

template <int P, int U, class Positions>
__attribute__((noinline)) void tile(const Args& a, const Element* w_block, int64_t block_width, const Positions& at,
                                    int64_t c0, int last_lanes) {
  using V = typename Isa::V;
  using W = typename Isa::W;
  const bool partial = last_lanes < Isa::kLanes;  // the last vector's lanes past the channels are not out's
  V acc[P][U];
#pragma GCC unroll 32
  for (int p = 0; p < P; ++p) {
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u) {
      float* out = at.output(a, p) + c0 + u * Isa::kLanes;
      if (!a.accumulate) {
        acc[p][u] = Isa::load(a.init + c0 + u * Isa::kLanes);
      } else {
        acc[p][u] = u == U - 1 && partial ? Isa::load_first(out, last_lanes) : Isa::load(out);
      }
    }
  }
  int64_t x_offsets[P];
#pragma GCC unroll 32
  for (int p = 0; p < P; ++p) x_offsets[p] = at.x(a, p);
  const int64_t lanes = a.lanes;
  for (int64_t tap = 0; tap < a.num_taps; ++tap) {
    const Element* x = a.taps[tap];
    const Element* w = w_block + tap * a.weight_tap_pitch;
    for (int64_t ci = 0; ci < lanes; ci += Isa::kDepth, x += Isa::kDepth, w += Isa::kDepth * block_width) {
      W wv[U];
#pragma GCC unroll 4
      for (int u = 0; u < U; ++u) wv[u] = Isa::load_weights(w + u * Isa::kDepth * Isa::kLanes);
#pragma GCC unroll 32
      for (int p = 0; p < P; ++p) {
        const W xv = Isa::broadcast(x + x_offsets[p]);
#pragma GCC unroll 4
        for (int u = 0; u < U; ++u) acc[p][u] = Isa::multiply_add(xv, wv[u], acc[p][u]);
      }
    }
  }
#pragma GCC unroll 32
  for (int p = 0; p < P; ++p) {
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u) {
      float* out = at.output(a, p) + c0 + u * Isa::kLanes;
      if (u == U - 1 && partial) {
        Isa::store_first(out, acc[p][u], last_lanes);
      } else {
        Isa::store(out, acc[p][u]);
      }
    }
  }
}

// Positions per tile of U vectors of channels: as many as the registers hold, at most kMaxPositions.
constexpr int kMaxPositions = 16;
template <int U>
constexpr int kTilePositions = std::min(kMaxPositions, (Isa::kRegisters - U - 1) / U);

// A tile of exactly `left` (<= P) positions.
template <int P, int U, class Positions>
inline void remainder_tile(int64_t left, const Args& a, const Element* w_block, int64_t block_width,
                           const Positions& at, int64_t c0, int last_lanes) {
  if constexpr (P > 1) {
    if (left < P) return remainder_tile<P - 1, U>(left, a, w_block, block_width, at, c0, last_lanes);
  }
  tile<P, U>(a, w_block, block_width, at, c0, last_lanes);
}

// The band's rows one after the other as one run of positions, in tiles of P or fewer listed one by one (a tile
// runs on into the next row), of sizes that differ by one at most.
template <int P, int U>
inline void listed_positions(const Args& a, const Element* w_block, int64_t block_width, int64_t c0, int last_lanes) {
  const int64_t run = a.rows * a.cols, tiles = (run + P - 1) / P, size = run / tiles, larger = run % tiles;
  ListedPositions<P> at;
  int64_t r = 0, c = 0;  // the next position's row and column
  for (int64_t i = 0; i < tiles; ++i) {
    const int64_t positions = size + (i < larger ? 1 : 0);
    for (int64_t p = 0; p < positions; ++p) {
      at.x_offsets[p] = r * a.x_row_stride + c * a.x_position_stride;
      at.outs[p] = a.out + r * a.out_row_stride + c * a.out_pitch;
      if (++c == a.cols) {
        c = 0;
        ++r;
      }
    }
    remainder_tile<P, U>(positions, a, w_block, block_width, at, c0, last_lanes);
  }
}

// Every kept position of the band for U vectors of channels at c0 (the columns past a row's last kept one are never
// computed): as few tiles as hold a run of positions, of P positions where they divide it, else of sizes that differ
// by one at most (20 positions at P = 9: 7, 7 and 6, where 9, 9 and 2 left a tile that loads U weight vectors per
// 2 x U multiply-adds). Where P is at most Isa::kMaxListedPositions the run is the band's rows one after the other
// (listed_positions): within rows, short ones split into small tiles (rows of 8 at P = 6: 4 + 4), each loading the
// weights for fewer positions. Otherwise each row is a run, unless its tiles would hold fewer positions than a
// listed tile's Isa::kMaxListedPositions: a grouped conv's rows of 3 outputs ran as tiles of 3 positions x 2 vectors,
// 6 multiply-adds per 5 loads (half of a 2 x 224 x 58 x 9 -> 320 g16 conv's time), where listed tiles take 9. Calls
// this moves, 2 cores (Zen 4), interleaved medians: that conv 0.84-0.92x; seeds 1-8 and the suite, 74 calls
// 0.78-1.05x (geomean 0.98); held out, seeds 9-16, 78 calls 0.81-1.15x (0.985; the two above 1.05 re-ran at 1.00 and
// 0.95); bfloat16, 71 calls 0.83-1.11x (0.983; the 1.11 re-ran at 1.04). Slower in every run: a 3-d NCHW conv of 3
// channels over rows of 4 (1.05-1.09x), whose single vector gains nothing from more positions a tile (each broadcasts
// its input for one multiply-add); keeping 1-vector tiles to rows lost more elsewhere (seeds 1-16, 152 calls: geomean
// 1.002, against 0.985 with them).
template <int P, int U>
inline void all_positions(const Args& a, const Element* w_block, int64_t block_width, int64_t c0, int last_lanes) {
  if (a.cols <= 0 || a.rows <= 0) return;
  if constexpr (P <= Isa::kMaxListedPositions) {
    listed_positions<P, U>(a, w_block, block_width, c0, last_lanes);
  } else {
    const int64_t tiles = (a.cols + P - 1) / P, size = a.cols / tiles, larger = a.cols % tiles;
    if constexpr (Isa::kMaxListedPositions > 0) {
      const int64_t row_tile = size + (larger > 0 ? 1 : 0);  // the largest tile of a row
      if (a.rows > 1 && row_tile < Isa::kMaxListedPositions) {
        return listed_positions<Isa::kMaxListedPositions, U>(a, w_block, block_width, c0, last_lanes);
      }
    }
    for (int64_t r = 0; r < a.rows; ++r) {
      RowRun at{r * a.x_row_stride, a.out + r * a.out_row_stride};  // the row's first position's
      for (int64_t i = 0; i < tiles; ++i) {
        const int64_t positions = size + (i < larger ? 1 : 0);
        remainder_tile<P, U>(positions, a, w_block, block_width, at, c0, last_lanes);
        at.x0 += positions * a.x_position_stride;
        at.out += positions * a.out_pitch;
      }
    }
  }
}

// The block's vectors of channels that hold real ones, U of them: one tile shape each.
template <int U>
inline void block_of_vectors(int64_t vectors, const Args& a, const Element* w_block, int64_t block_width,
                             int64_t c0, int last_lanes) {
  if constexpr (U > 1) {
    if (vectors < U) return block_of_vectors<U - 1>(vectors, a, w_block, block_width, c0, last_lanes);
  }
  all_positions<kTilePositions<U>, U>(a, w_block, block_width, c0, last_lanes);
}

inline void blocked_direct(const Args& a, int64_t channels) {
  const int64_t block_width = a.block_width;  // at most Isa::kVectors vectors
  for (int64_t b = a.co_block_begin; b < a.co_block_end; ++b) {
    const int64_t c0 = b * block_width, real = std::min(channels - c0, block_width);
    const int64_t vectors = (real + Isa::kLanes - 1) / Isa::kLanes;
    const int last_lanes = static_cast<int>(real - (vectors - 1) * Isa::kLanes);  // the last vector's real channels
    block_of_vectors<Isa::kVectors>(vectors, a, a.weights + b * a.weight_block_stride, block_width, c0, last_lanes);
  }
}

// kAccumulators independent FMA chains (more than the FMA latency times the FMA units), `iterations` times. Each chain
// starts from its own value: chains the compiler could prove equal it would merge into one (it did, when they all
// started from the same one), and the loop would time one FMA while counting twelve.
inline int64_t fma_peak_loop(int64_t iterations, float* sink) {
  using V = typename Isa::V;
  constexpr int kAccumulators = 12;
  float ones[Isa::kLanes], starts[kAccumulators][Isa::kLanes];
  std::fill_n(ones, Isa::kLanes, 1.0f);
  for (int i = 0; i < kAccumulators; ++i) std::fill_n(starts[i], Isa::kLanes, 1e-7f * static_cast<float>(i + 1));
  V acc[kAccumulators];
  const V x = Isa::load(ones), y = Isa::load(starts[0]);
#pragma GCC unroll 12
  for (int i = 0; i < kAccumulators; ++i) acc[i] = Isa::load(starts[i]);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kAccumulators; ++i) acc[i] = Isa::fmadd(x, y, acc[i]);
  }
#pragma GCC unroll 12
  for (int i = 1; i < kAccumulators; ++i) acc[0] = Isa::fmadd(x, acc[i], acc[0]);
  Isa::store(sink, acc[0]);  // keeps the loop from being optimised away
  return iterations * kAccumulators * Isa::kLanes;
}

// WeightLanes (cpu/blocked_direct.h) for float32: runs of kLanes values of kLanes output channels, loaded as rows
// (Isa::load_first: the run's last values, zeros past them), turned into columns by Isa::transpose, one store per tap
// and input channel. A template, so that an Isa without a transpose (the bfloat16 pairs) never instantiates it.
template <class I = Isa>
void pack_weight_lanes(const WeightLanes& w) {
  using V = typename I::V;
  const bool one_run = w.run_stride == w.run_length;
  const int64_t passes = one_run ? 1 : w.runs, values = one_run ? w.runs * w.run_length : w.run_length;
  for (int64_t pass = 0; pass < passes; ++pass) {
    const float* source = w.src + pass * w.run_stride;
    int64_t run = pass, tap = 0;  // of value j0 + i
    for (int64_t j0 = 0; j0 < values; j0 += I::kLanes) {
      const int n = static_cast<int>(std::min<int64_t>(I::kLanes, values - j0));
      V r[I::kLanes];
      for (int i = 0; i < I::kLanes; ++i) {
        r[i] = i < w.rows ? I::load_first(source + i * w.row_stride + j0, n) : I::zero();
      }
      I::transpose(r);
      for (int i = 0; i < n; ++i) {
        I::store(w.dst + tap * w.tap_pitch + run * w.block_width, r[i]);
        if (++tap == w.run_length) {
          tap = 0;
          ++run;
        }
      }
    }
  }
}

// FloatTranspose (cpu/blocked_direct.h): blocks of up to kLanes positions x kLanes channels loaded as rows (the first
// n channels of each), turned into columns by Isa::transpose, each channel's first m positions stored (every second
// value of y where its column stride is 2, the values between left as they are).
template <class I = Isa>
void transpose_floats(const FloatTranspose& t) {
  using V = typename I::V;
  for (int64_t j0 = 0; j0 < t.cols; j0 += I::kLanes) {
    const int n = static_cast<int>(std::min<int64_t>(I::kLanes, t.cols - j0));
    for (int64_t i0 = 0; i0 < t.rows; i0 += I::kLanes) {
      const int m = static_cast<int>(std::min<int64_t>(I::kLanes, t.rows - i0));
      V r[I::kLanes];
      for (int i = 0; i < I::kLanes; ++i) {
        r[i] = i < m ? I::load_first(t.src + (i0 + i) * t.src_row_stride + j0, n) : I::zero();
      }
      I::transpose(r);
      for (int j = 0; j < n; ++j) {
        float* column = t.dst + (j0 + j) * t.dst_row_stride + i0 * t.dst_col_stride;
        if (t.dst_col_stride == 1) {
          I::store_first(column, r[j], m);
        } else {
          I::store_first_even(column, r[j], m);
        }
      }
    }
  }
}
