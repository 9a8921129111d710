// The index math of fastpad's CUDA kernels, host + device: the implicit GEMM problems of the three ops (what A, B and
// C of each GEMM are), the per-element bodies of the direct kernels, and the host-side plans that size tiles and
// splits. The kernels in conv.cu, conv_transpose.cu and conv_weight_grad.cu run these; under the CUDA execution shim
// (tests/cuda_sim/) those kernels run on CPU, so all of it is checked against the CPU ops without a GPU.
// Layout: any strides (cuda/indexing.h). Padding: resolved per element with geometry.h, never materialised.
#pragma once

#include <algorithm>
#include <cmath>

#include "cuda/indexing.h"

namespace fastpad::cuda {

constexpr int kTileM = 64;
constexpr int kTileN = 64;
// The k steps of the GEMM kernels: FMA tiles (float32/float64) and tensor cores (16-bit).
constexpr int kFmaTileK = 16;
constexpr int kTensorCoreTileK = 32;

// Bytes of one vector load or store of the pipelined GEMM and the channel-vector kernels (16: ld.global.v4,
// cp.async 16).
constexpr int kVectorBytes = 16;
// Blocks a pipelined launch should have to fill an H100 (132 SMs, two blocks each) before the larger tile rows are
// taken. Not measured on a GPU: a starting point.
constexpr int64_t kPipelineTargetBlocks = 264;

// The tile of a problem: 128 rows of C when that still gives kPipelineTargetBlocks blocks, else 64; 64 columns when a
// group has no more output channels, else 128.
struct PipelinedTile {
  int m;
  int n;
};

inline PipelinedTile pipelined_tile(const ConvGeometry& g) {
  const int64_t m_size = g.batch * g.conv_out_volume(), n_size = g.conv_out_channels_per_group();
  const int tile_n = n_size <= 64 ? 64 : 128;
  const int64_t blocks_at_128 = (m_size + 127) / 128 * ((n_size + tile_n - 1) / tile_n) * g.groups;
  return {blocks_at_128 >= kPipelineTargetBlocks ? 128 : 64, tile_n};
}

// A thread's walk over the flattened output positions (images x conv_out positions) of a weight gradient, a fixed
// number of positions at a time. PositionSteps holds that step's digits in the output's mixed radix (unflatten) and
// what it adds to the two offsets a PositionCursor keeps, gy's and x's at the position's corner o * stride (image *
// batch stride + sum of o[d] * stride[d] * spatial stride[d]), with what a carry out of each dimension adds on top.
// Built once on the host and passed as a kernel parameter, it moves a cursor on by adds and one carry per dimension,
// where decoding each position took three divisions and its offsets 64-bit products.
struct PositionSteps {
  int64_t o[kMaxSpatial];
  int64_t gy;
  int64_t x;
  int64_t gy_carry[kMaxSpatial];
  int64_t x_carry[kMaxSpatial];
};

inline PositionSteps position_steps(const ConvGeometry& g, const Strides& xs, const Strides& gys, int64_t positions) {
  PositionSteps steps;
  const int64_t images = unflatten(positions, g.conv_out_sizes, steps.o);
  steps.gy = images * gys.batch;
  steps.x = images * xs.batch;
  for (int d = 0; d < kMaxSpatial; ++d) {
    const int64_t x_stride = g.stride[d] * xs.spatial[d];  // x's offset per output position along d
    steps.gy += steps.o[d] * gys.spatial[d];
    steps.x += steps.o[d] * x_stride;
    // A carry out of d: o[d] drops by its size and the dimension above (or the image) gains one.
    steps.gy_carry[d] = (d > 0 ? gys.spatial[d - 1] : gys.batch) - g.conv_out_sizes[d] * gys.spatial[d];
    steps.x_carry[d] = (d > 0 ? g.stride[d - 1] * xs.spatial[d - 1] : xs.batch) - g.conv_out_sizes[d] * x_stride;
  }
  return steps;
}

// x's offset from a position's corner o * stride to where tap r reads, for a tap inside x.
template <typename Tap>
C10_HOST_DEVICE int64_t tap_offset(const ConvGeometry& g, const Strides& xs, const Tap* r) {
  int64_t offset = 0;
  for (int d = 0; d < kMaxSpatial; ++d) offset += g.tap_position(d, 0, r[d]) * xs.spatial[d];
  return offset;
}

// An output position o and its two offsets (PositionSteps). o[d] + steps.o[d] + carry stays below 2 sizes[d], so
// one subtraction carries.
struct PositionCursor {
  int64_t o[kMaxSpatial];
  int64_t gy;
  int64_t x;

  // Whether o lies in ranges[d] along every dim.
  C10_HOST_DEVICE bool within(const InteriorRange* ranges) const {
    bool inside = true;
    for (int d = 0; d < kMaxSpatial; ++d) inside = inside && o[d] >= ranges[d].first && o[d] < ranges[d].last;
    return inside;
  }

  // x's offset from the corner to the source tap r reads at o, resolved by the padding mode (a tap in the padding);
  // reads_x is false where the mode reads a zero.
  template <typename Tap>
  C10_HOST_DEVICE int64_t padded_tap_offset(const ConvGeometry& g, const Strides& xs, const Tap* r,
                                            bool& reads_x) const {
    int64_t offset = 0;
    reads_x = true;
    for (int d = 0; d < kMaxSpatial; ++d) {
      const int64_t source = g.tap_source(d, o[d], r[d]);
      reads_x = reads_x && source >= 0;
      offset += (source - o[d] * g.stride[d]) * xs.spatial[d];
    }
    return offset;
  }

  C10_HOST_DEVICE void advance(const PositionSteps& steps, const int64_t* sizes) {
    gy += steps.gy;
    x += steps.x;
    bool carry = false;
    for (int d = kMaxSpatial - 1; d >= 0; --d) {
      o[d] += steps.o[d] + carry;
      carry = o[d] >= sizes[d];
      if (carry) {
        o[d] -= sizes[d];
        gy += steps.gy_carry[d];
        x += steps.x_carry[d];
      }
    }
  }
};

// The cursor at flattened output position k.
C10_HOST_DEVICE inline PositionCursor position_cursor(const ConvGeometry& g, const Strides& xs, const Strides& gys,
                                                      int64_t k) {
  PositionCursor at;
  const int64_t image = unflatten(k, g.conv_out_sizes, at.o);
  at.gy = image * gys.batch + gys.position(at.o);
  at.x = image * xs.batch;
  for (int d = 0; d < kMaxSpatial; ++d) at.x += at.o[d] * g.stride[d] * xs.spatial[d];
  return at;
}

// One tile of C: rows [m0, m0 + kTileM) of m_size, columns [n0, n0 + kTileN) of n_size, reducing k_begin..k_end.
struct GemmTile {
  int64_t m0 = 0;
  int64_t n0 = 0;
  int64_t m_size = 0;
  int64_t n_size = 0;
  int64_t k_begin = 0;
  int64_t k_end = 0;
};

// x at padded position pos (one per spatial dim) of the channel at `offset`, or zero where the padding mode says so.
template <typename acc_t, typename scalar_t>
C10_HOST_DEVICE acc_t load_padded(const ConvGeometry& g, const scalar_t* x, const Strides& xs, int64_t offset,
                                  const int64_t* pos) {
  for (int d = 0; d < kMaxSpatial; ++d) {
    const int64_t source = source_index(pos[d], g.conv_in_sizes[d], g.mode);
    if (source < 0) return acc_t(0);
    offset += source * xs.spatial[d];
  }
  return load<acc_t>(x, offset);
}

// The GEMM of a conv, per group: M = batch * output positions, N = output channels of the group,
// K = input channels of the group * kernel taps. A[m, k] is the padded input under tap k of output m; B is the weight.
template <typename scalar_type>
struct ConvProblem {
  using scalar_t = scalar_type;
  using acc_t = acc_type<scalar_t>;
  struct Tile : GemmTile {
    int64_t group = 0;
  };
  struct ARow {
    int64_t x_offset;                 // the row's image and the group's first channel
    int64_t corner[kMaxSpatial];      // o * stride - pad_lo: the position tap 0 reads
  };
  struct BCol {
    int64_t w_offset;
  };

  ConvGeometry g;
  const scalar_t* x;
  Strides xs;
  const scalar_t* w;  // contiguous [C_out, C_in / groups * taps]
  const scalar_t* bias;  // or nullptr
  scalar_t* y;
  Strides ys;
  int64_t tiles_m;
  int64_t tiles_n;

  C10_HOST_DEVICE int64_t items() const { return tiles_m * tiles_n * g.groups; }

  C10_HOST_DEVICE Tile tile(int64_t item) const {
    Tile t;
    t.m0 = item % tiles_m * kTileM;
    item /= tiles_m;
    t.n0 = item % tiles_n * kTileN;
    t.group = item / tiles_n;
    t.m_size = g.batch * g.conv_out_volume();
    t.n_size = g.conv_out_channels_per_group();
    t.k_end = g.conv_in_channels_per_group() * g.kernel_volume();
    return t;
  }

  C10_HOST_DEVICE ARow a_row(const Tile& t, int64_t m) const {
    int64_t o[kMaxSpatial];
    const int64_t n = unflatten(m, g.conv_out_sizes, o);
    ARow row;
    row.x_offset = n * xs.batch + t.group * g.conv_in_channels_per_group() * xs.channel;
    for (int d = 0; d < kMaxSpatial; ++d) row.corner[d] = g.tap_position(d, o[d], 0);
    return row;
  }

  C10_HOST_DEVICE acc_t a(const Tile&, const ARow& row, int64_t k) const {
    int64_t r[kMaxSpatial];
    const int64_t channel = unflatten(k, g.kernel, r);
    int64_t pos[kMaxSpatial];
    for (int d = 0; d < kMaxSpatial; ++d) pos[d] = row.corner[d] + r[d] * g.dilation[d];
    return load_padded<acc_t>(g, x, xs, row.x_offset + channel * xs.channel, pos);
  }

  C10_HOST_DEVICE BCol b_col(const Tile& t, int64_t n) const {
    return {(t.group * g.conv_out_channels_per_group() + n) * t.k_end};
  }

  C10_HOST_DEVICE acc_t b(const Tile&, const BCol& col, int64_t k) const { return load<acc_t>(w, col.w_offset + k); }

  C10_HOST_DEVICE void store(const Tile& t, int64_t m, int64_t n, acc_t value) const {
    int64_t o[kMaxSpatial];
    const int64_t image = unflatten(m, g.conv_out_sizes, o);
    const int64_t c = t.group * g.conv_out_channels_per_group() + n;
    if (bias != nullptr) value += load<acc_t>(bias, c);
    y[image * ys.batch + c * ys.channel + ys.position(o)] = static_cast<scalar_t>(value);
  }
};

template <typename scalar_t>
ConvProblem<scalar_t> make_conv_problem(const ConvGeometry& g, const scalar_t* x, const Strides& xs, const scalar_t* w,
                                        const scalar_t* bias, scalar_t* y, const Strides& ys) {
  return {g, x, xs, w, bias, y, ys, ceil_div(g.batch * g.conv_out_volume(), kTileM),
          ceil_div(g.conv_out_channels_per_group(), kTileN)};
}

// conv_transpose: y, the transposed output, is on the geometry's conv_in side and x, the positions that scatter, on
// its conv_out side (see ConvGeometry). The weight is [C_x, C_y / groups, *kernel].

// The GEMM of one (stride phase, group): M = batch * outputs of the phase, N = y channels of the group,
// K = x channels of the group * the phase's taps. A[m, k] is the x element tap k of output m reads, B the weight.
template <typename scalar_type>
struct PhaseProblem {
  using scalar_t = scalar_type;
  using acc_t = acc_type<scalar_t>;
  struct Tile : GemmTile {
    int64_t group = 0;
    int64_t phase[kMaxSpatial];   // outputs p = phase + j * stride
    int64_t count[kMaxSpatial];   // how many such outputs
    TransposedTaps taps[kMaxSpatial];
    int64_t tap_volume = 0;
  };
  struct ARow {
    int64_t x_offset;
    int64_t source[kMaxSpatial];  // the x position tap 0 of the phase reads
  };
  struct BCol {
    int64_t w_offset;
  };

  ConvGeometry g;
  const scalar_t* x;
  Strides xs;
  const scalar_t* w;     // contiguous [C_x, C_y / groups, *kernel]
  const scalar_t* bias;  // or nullptr
  scalar_t* y;
  Strides ys;
  int64_t tiles_m;  // for the largest phase, phase 0
  int64_t tiles_n;
  int64_t phases;

  C10_HOST_DEVICE int64_t items() const { return tiles_m * tiles_n * g.groups * phases; }

  C10_HOST_DEVICE Tile tile(int64_t item) const {
    Tile t;
    t.m0 = item % tiles_m * kTileM;
    item /= tiles_m;
    t.n0 = item % tiles_n * kTileN;
    item /= tiles_n;
    t.group = item % g.groups;
    int64_t phase = item / g.groups, outputs = 1;
    t.tap_volume = 1;
    for (int d = kMaxSpatial - 1; d >= 0; --d) {
      t.phase[d] = phase % g.stride[d];
      phase /= g.stride[d];
      t.count[d] = t.phase[d] < g.conv_in_sizes[d] ? ceil_div(g.conv_in_sizes[d] - t.phase[d], g.stride[d]) : 0;
      t.taps[d] = transposed_taps(t.phase[d] + g.pad_lo[d], g.kernel[d], g.stride[d], g.dilation[d]);
      outputs *= t.count[d];
      t.tap_volume *= t.taps[d].count;
    }
    t.m_size = g.batch * outputs;
    t.n_size = g.conv_in_channels_per_group();
    t.k_end = g.conv_out_channels_per_group() * t.tap_volume;
    return t;
  }

  C10_HOST_DEVICE ARow a_row(const Tile& t, int64_t m) const {
    int64_t j[kMaxSpatial];
    const int64_t n = unflatten(m, t.count, j);
    ARow row;
    row.x_offset = n * xs.batch + t.group * g.conv_out_channels_per_group() * xs.channel;
    for (int d = 0; d < kMaxSpatial; ++d) row.source[d] = t.taps[d].source_first + j[d];
    return row;
  }

  // The phase's tap of k, and returns its x channel within the group.
  C10_HOST_DEVICE int64_t tap_of(const Tile& t, int64_t k, int64_t* tap) const {
    const int64_t counts[kMaxSpatial] = {t.taps[0].count, t.taps[1].count, t.taps[2].count};
    return unflatten(k, counts, tap);
  }

  C10_HOST_DEVICE acc_t a(const Tile& t, const ARow& row, int64_t k) const {
    int64_t tap[kMaxSpatial];
    int64_t offset = row.x_offset + tap_of(t, k, tap) * xs.channel;
    for (int d = 0; d < kMaxSpatial; ++d) {
      const int64_t i = row.source[d] - tap[d] * t.taps[d].source_step;
      if (i < 0 || i >= g.conv_out_sizes[d]) return acc_t(0);
      offset += i * xs.spatial[d];
    }
    return load<acc_t>(x, offset);
  }

  C10_HOST_DEVICE BCol b_col(const Tile& t, int64_t n) const { return {n}; }

  C10_HOST_DEVICE acc_t b(const Tile& t, const BCol& col, int64_t k) const {
    int64_t tap[kMaxSpatial];
    const int64_t cx = t.group * g.conv_out_channels_per_group() + tap_of(t, k, tap);
    int64_t r[kMaxSpatial];
    for (int d = 0; d < kMaxSpatial; ++d) r[d] = t.taps[d].first + tap[d] * t.taps[d].step;
    const int64_t taps = g.kernel_volume();
    return load<acc_t>(w, (cx * g.conv_in_channels_per_group() + col.w_offset) * taps +
                              (r[0] * g.kernel[1] + r[1]) * g.kernel[2] + r[2]);
  }

  C10_HOST_DEVICE void store(const Tile& t, int64_t m, int64_t n, acc_t value) const {
    int64_t p[kMaxSpatial];
    const int64_t image = unflatten(m, t.count, p);
    for (int d = 0; d < kMaxSpatial; ++d) p[d] = t.phase[d] + p[d] * g.stride[d];
    const int64_t c = t.group * g.conv_in_channels_per_group() + n;
    if (bias != nullptr) value += load<acc_t>(bias, c);
    y[image * ys.batch + c * ys.channel + ys.position(p)] = static_cast<scalar_t>(value);
  }
};

// Tiles are sized for the largest phase, phase 0; the tiles past a smaller phase's rows are skipped.
template <typename scalar_t>
PhaseProblem<scalar_t> make_phase_problem(const ConvGeometry& g, const scalar_t* x, const Strides& xs,
                                          const scalar_t* w, const scalar_t* bias, scalar_t* y, const Strides& ys) {
  int64_t largest_phase = g.batch, phases = 1;
  for (int d = 0; d < kMaxSpatial; ++d) {
    largest_phase *= ceil_div(g.conv_in_sizes[d], g.stride[d]);
    phases *= g.stride[d];
  }
  return {g, x, xs, w, bias, y, ys, ceil_div(largest_phase, kTileM), ceil_div(g.conv_in_channels_per_group(), kTileN),
          phases};
}

// The GEMM of one (split, group): M = output channels of the group, N = input channels of the group * taps,
// K = this split's share of batch * output positions. A is grad_output, B[k, n] the padded input under tap n at k.
template <typename scalar_type>
struct WeightGradProblem {
  using scalar_t = scalar_type;
  using acc_t = acc_type<scalar_t>;
  struct Tile : GemmTile {
    int64_t group = 0;
    int64_t split = 0;
  };
  struct ARow {
    int64_t gy_offset;
  };
  struct BCol {
    int64_t x_offset;
    int64_t shift[kMaxSpatial];  // r * dilation - pad_lo: position o * stride + shift is read
  };

  ConvGeometry g;
  const scalar_t* x;
  Strides xs;
  const scalar_t* gy;
  Strides gys;
  acc_t* partial;  // [splits, groups, C_out / groups, C_in / groups * taps], set by the caller
  int64_t tiles_m;
  int64_t tiles_n;
  int64_t splits;
  int64_t split_size;  // a multiple of every GEMM kernel's k step

  C10_HOST_DEVICE int64_t items() const { return tiles_m * tiles_n * g.groups * splits; }
  C10_HOST_DEVICE int64_t columns() const { return g.conv_in_channels_per_group() * g.kernel_volume(); }

  C10_HOST_DEVICE Tile tile(int64_t item) const {
    Tile t;
    t.m0 = item % tiles_m * kTileM;
    item /= tiles_m;
    t.n0 = item % tiles_n * kTileN;
    item /= tiles_n;
    t.group = item % g.groups;
    t.split = item / g.groups;
    t.m_size = g.conv_out_channels_per_group();
    t.n_size = columns();
    const int64_t reduce = g.batch * g.conv_out_volume();
    t.k_begin = t.split * split_size;
    t.k_end = t.k_begin + split_size < reduce ? t.k_begin + split_size : reduce;
    return t;
  }

  C10_HOST_DEVICE ARow a_row(const Tile& t, int64_t m) const {
    return {(t.group * g.conv_out_channels_per_group() + m) * gys.channel};
  }

  C10_HOST_DEVICE acc_t a(const Tile&, const ARow& row, int64_t k) const {
    int64_t o[kMaxSpatial];
    const int64_t n = unflatten(k, g.conv_out_sizes, o);
    return load<acc_t>(gy, row.gy_offset + n * gys.batch + gys.position(o));
  }

  C10_HOST_DEVICE BCol b_col(const Tile& t, int64_t n) const {
    int64_t r[kMaxSpatial];
    const int64_t channel = unflatten(n, g.kernel, r);
    BCol col;
    col.x_offset = (t.group * g.conv_in_channels_per_group() + channel) * xs.channel;
    for (int d = 0; d < kMaxSpatial; ++d) col.shift[d] = r[d] * g.dilation[d] - g.pad_lo[d];
    return col;
  }

  C10_HOST_DEVICE acc_t b(const Tile&, const BCol& col, int64_t k) const {
    int64_t o[kMaxSpatial];
    const int64_t n = unflatten(k, g.conv_out_sizes, o);
    int64_t pos[kMaxSpatial];
    for (int d = 0; d < kMaxSpatial; ++d) pos[d] = o[d] * g.stride[d] + col.shift[d];
    return load_padded<acc_t>(g, x, xs, col.x_offset + n * xs.batch, pos);
  }

  C10_HOST_DEVICE void store(const Tile& t, int64_t m, int64_t n, acc_t value) const {
    partial[((t.split * g.groups + t.group) * g.conv_out_channels_per_group() + m) * columns() + n] = value;
  }
};


// conv_weight_grad's split-K: enough tiles to fill the GPU, and at most ceil(reduce / kMinSplit) splits, so that a
// split averages at least about kMinSplit reduction steps (1025 steps: 2 splits of 544 and 481). At most kMaxSplits:
// sum_splits_kernel adds them one after the other per weight element. 256 splits fill an H100/H200 (132 SMs, two
// blocks each) when the weight is one tile, as a stem's is: with 64, on an H200 (2026-12-04, bfloat16, batch 256),
// the 64 blocks of tf_efficientnet_b0's stem weight gradient took 22.0 ms.
constexpr int64_t kTargetBlocks = 1024;
constexpr int64_t kMinSplit = 1024;
constexpr int64_t kMaxSplits = 256;

// `partial` must hold splits * C_out * C_in / groups * taps accumulators; `splits` is set to their number.
template <typename scalar_t>
WeightGradProblem<scalar_t> make_weight_grad_problem(const ConvGeometry& g, const scalar_t* x, const Strides& xs,
                                                     const scalar_t* gy, const Strides& gys) {
  const int64_t tiles_m = ceil_div(g.conv_out_channels_per_group(), kTileM);
  const int64_t tiles_n = ceil_div(g.conv_in_channels_per_group() * g.kernel_volume(), kTileN);
  const int64_t reduce = g.batch * g.conv_out_volume(), tiles = tiles_m * tiles_n * g.groups;
  const int64_t splits = std::clamp<int64_t>(kTargetBlocks / tiles, 1, std::min(kMaxSplits, ceil_div(reduce, kMinSplit)));
  const int64_t split_size = ceil_div(ceil_div(reduce, splits), kTensorCoreTileK) * kTensorCoreTileK;  // whole k steps
  // ceil_div(reduce, split_size) <= splits: no split is empty.
  return {g, x, xs, gy, gys, nullptr, tiles_m, tiles_n, ceil_div(reduce, split_size), split_size};
}

// ---------------------------------------------------------------------------------------------------------------
// Direct kernels, one output element per thread (or per block and thread for the halo kernel).

// conv: y at element e, the grouped convolution written out with each tap's padding resolved.
template <typename scalar_t>
C10_HOST_DEVICE acc_type<scalar_t> direct_conv_sum(const ConvGeometry& g, const scalar_t* x, const Strides& xs,
                                                       const scalar_t* w, const scalar_t* bias,
                                                       const ElementIndex& e) {
  using acc_t = acc_type<scalar_t>;
  const int64_t c_in = g.conv_in_channels_per_group(), taps = g.kernel_volume();
  const int64_t group = e.c / g.conv_out_channels_per_group();
  acc_t sum = bias != nullptr ? load<acc_t>(bias, e.c) : acc_t(0);
  for (int64_t ci = 0; ci < c_in; ++ci) {
    const scalar_t* x_channel = x + e.n * xs.batch + (group * c_in + ci) * xs.channel;
    const scalar_t* w_channel = w + (e.c * c_in + ci) * taps;
    for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
      const int64_t sd = g.tap_source(0, e.pos[0], kd);
      if (sd < 0) continue;
      for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
        const int64_t sh = g.tap_source(1, e.pos[1], kh);
        if (sh < 0) continue;
        for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
          const int64_t sw = g.tap_source(2, e.pos[2], kw);
          if (sw < 0) continue;
          sum += load<acc_t>(w_channel, (kd * g.kernel[1] + kh) * g.kernel[2] + kw) *
                 load<acc_t>(x_channel, sd * xs.spatial[0] + sh * xs.spatial[1] + sw * xs.spatial[2]);
        }
      }
    }
  }
  return sum;
}

// The work of direct_conv_kernel's thread for flat index `index` of y in its memory order.
template <typename scalar_t>
C10_HOST_DEVICE void direct_conv_element(const ConvGeometry& g, const scalar_t* x, const Strides& xs,
                                         const scalar_t* w, const scalar_t* bias, scalar_t* y, const Strides& ys,
                                         bool channels_last, int64_t index) {
  const ElementIndex e = decode_element(index, channels_last, g.conv_out_channels, g.conv_out_sizes);
  y[e.n * ys.batch + e.c * ys.channel + ys.position(e.pos)] =
      static_cast<scalar_t>(direct_conv_sum(g, x, xs, w, bias, e));
}

constexpr int64_t kMaxPatchBytes = 48 * 1024;  // dynamic shared memory per block without the opt-in attribute

// The tiles of the depthwise kernels that stage their input in shared memory: a tile_h x tile_w tile of output
// positions of one plane and the input patch it reads per depth tap, halo included, of patch_h x patch_w positions.
struct PatchTile {
  bool fits = false;  // the patch fits in the dynamic shared memory a block gets without opting in
  int tile_h = 0;
  int tile_w = 0;
  int patch_h = 0;
  int patch_w = 0;
};

// The patch extent along dim d for a tile of `tile` outputs, (tile - 1) * stride + effective kernel, in double so that
// huge strides cannot overflow.
inline double patch_extent(const ConvGeometry& g, int d, int tile) {
  return double(tile - 1) * double(g.stride[d]) + double(g.kernel[d] - 1) * double(g.dilation[d]) + 1;
}

// A tile of `positions` outputs, as wide as the output plane up to max_width (a power of two), or one row for 1-d,
// whose patch fits when it takes at most kMaxPatchBytes at bytes_per_position.
inline PatchTile patch_tile(const ConvGeometry& g, int positions, int max_width, int64_t bytes_per_position) {
  const int64_t* out = g.conv_out_sizes;
  PatchTile t;
  t.tile_w = 1;
  if (out[1] == 1) {
    t.tile_w = positions;
  } else {
    while (t.tile_w < max_width && t.tile_w < out[2]) t.tile_w *= 2;
  }
  t.tile_h = positions / t.tile_w;
  const double patch_h = patch_extent(g, 1, t.tile_h), patch_w = patch_extent(g, 2, t.tile_w);
  t.fits = patch_h * patch_w * double(bytes_per_position) <= kMaxPatchBytes;
  if (t.fits) {
    t.patch_h = static_cast<int>(patch_h);
    t.patch_w = static_cast<int>(patch_w);
  }
  return t;
}

// Tiles per output depth slice of `out`.
C10_HOST_DEVICE inline int64_t tiles_per_slice(const int64_t* out, const PatchTile& t) {
  return ceil_div(out[1], t.tile_h) * ceil_div(out[2], t.tile_w);
}

// Where a tile's work item lies: its first output row and column and its output depth (tiles along W fastest).
struct TileOrigin {
  int64_t od, row0, col0;
  int64_t rest;  // the item's index over whatever lies outside the output volume (images, channels)
};

C10_HOST_DEVICE inline TileOrigin tile_origin(const int64_t* out, const PatchTile& t, int64_t item) {
  TileOrigin o;
  const int64_t tiles_w = ceil_div(out[2], t.tile_w), tiles_h = ceil_div(out[1], t.tile_h);
  o.col0 = item % tiles_w * t.tile_w;
  item /= tiles_w;
  o.row0 = item % tiles_h * t.tile_h;
  item /= tiles_h;
  o.od = item % out[0];
  o.rest = item / out[0];
  return o;
}

// The depthwise halo kernel (conv.cu): a block computes a tile of kThreads outputs of one output plane (up to 32
// wide), staging per depth tap the patch, padding resolved, in the accumulation type.
struct HaloPlan : PatchTile {
  int64_t tiles = 0;  // blocks' work items: batch * channels * out depth * tiles per slice
};

inline HaloPlan halo_plan(const ConvGeometry& g, int64_t element_bytes) {
  HaloPlan plan;
  static_cast<PatchTile&>(plan) = patch_tile(g, kThreads, 32, element_bytes);
  plan.tiles = g.batch * g.conv_out_channels * g.conv_out_sizes[0] * tiles_per_slice(g.conv_out_sizes, plan);
  return plan;
}

// The depthwise kernel for rows (cuda/depthwise_rows.cuh: depthwise_rows_kernel, for conv and, at stride 1,
// conv_transpose): 1-d depthwise layers (a single output row per image and channel), not channels-contiguous. A block computes kRowOutputs consecutive outputs of one (image,
// channel) row, kRowOutputsPerThread per thread, from the input span they read, staged in shared memory once (padding
// resolved). The halo kernel's 1x256 tiles it replaced there did one output per thread, each paying the tile's index
// math, syncs and patch bookkeeping: Mamba's causal k4 conv over 1536 x 4096 (bfloat16, batch 256) ran at 3% of its
// bandwidth bound on an H100.
constexpr int kRowOutputsPerThread = 8;
constexpr int64_t kRowOutputs = int64_t{kThreads} * kRowOutputsPerThread;

struct RowPlan {
  bool fits = false;       // the span fits kMaxPatchBytes
  int span = 0;            // input positions one block's outputs read: (kRowOutputs - 1) * stride + (k - 1) * d + 1
  int64_t row_tiles = 0;   // blocks of kRowOutputs per row
  int64_t tiles = 0;       // work items: batch * channels * row tiles
};

// Whether g is a single row: one output row and depth, and a kernel of one row and depth (1-d layers).
C10_HOST_DEVICE inline bool single_row(const ConvGeometry& g) {
  return g.conv_out_sizes[0] == 1 && g.conv_out_sizes[1] == 1 && g.kernel[0] == 1 && g.kernel[1] == 1;
}

inline RowPlan row_plan(const ConvGeometry& g, int64_t element_bytes) {
  RowPlan plan;
  const int64_t span = (kRowOutputs - 1) * g.stride[2] + (g.kernel[2] - 1) * g.dilation[2] + 1;
  plan.fits = single_row(g) && span * element_bytes <= kMaxPatchBytes;
  if (!plan.fits) return plan;
  plan.span = static_cast<int>(span);
  plan.row_tiles = ceil_div(g.conv_out_sizes[2], kRowOutputs);
  plan.tiles = g.batch * g.conv_out_channels * plan.row_tiles;
  return plan;
}

// Work item `item` of the halo kernel: which image, channel, output depth and tile.
struct HaloItem {
  int64_t n, c, od, row0, col0;  // row0, col0: the tile's first output row and column
};

C10_HOST_DEVICE inline HaloItem halo_item(const ConvGeometry& g, const HaloPlan& plan, int64_t item) {
  const TileOrigin o = tile_origin(g.conv_out_sizes, plan, item);
  return {o.rest / g.conv_out_channels, o.rest % g.conv_out_channels, o.od, o.row0, o.col0};
}

// Patch element `index` for depth source `id`: the input value at the padded position it stands for, or zero.
// Output channel c reads input channel c / multiplier.
template <typename scalar_t>
C10_HOST_DEVICE acc_type<scalar_t> halo_patch_element(const ConvGeometry& g, const HaloPlan& plan, const scalar_t* x,
                                                      const Strides& xs, const HaloItem& it, int64_t id, int index) {
  using acc_t = acc_type<scalar_t>;
  const int64_t sh = source_index(g.tap_position(1, it.row0, 0) + index / plan.patch_w, g.conv_in_sizes[1], g.mode);
  const int64_t sw = source_index(g.tap_position(2, it.col0, 0) + index % plan.patch_w, g.conv_in_sizes[2], g.mode);
  if (sh < 0 || sw < 0) return acc_t(0);
  const int64_t channel = it.c / g.conv_out_channels_per_group();
  return load<acc_t>(x, it.n * xs.batch + channel * xs.channel + id * xs.spatial[0] + sh * xs.spatial[1] +
                            sw * xs.spatial[2]);
}

// The (kh, kw) taps of depth tap kd for the output at (row0 + ty, col0 + tx), read from the staged patch.
template <typename scalar_t>
C10_HOST_DEVICE acc_type<scalar_t> halo_patch_taps(const ConvGeometry& g, const HaloPlan& plan, const scalar_t* w,
                                                   const acc_type<scalar_t>* patch, int64_t c, int64_t kd, int ty,
                                                   int tx) {
  using acc_t = acc_type<scalar_t>;
  const scalar_t* w_tap = w + (c * g.kernel[0] + kd) * g.kernel[1] * g.kernel[2];
  acc_t sum = 0;
  for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
    const acc_t* patch_row = patch + (ty * g.stride[1] + kh * g.dilation[1]) * plan.patch_w + tx * g.stride[2];
    for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
      sum += load<acc_t>(w_tap, kh * g.kernel[2] + kw) * patch_row[kw * g.dilation[2]];
    }
  }
  return sum;
}

// Stores the halo kernel's sum for thread (ty, tx) of a tile, where the tile covers an output.
template <typename scalar_t>
C10_HOST_DEVICE void halo_store(const ConvGeometry& g, const HaloItem& it, int ty, int tx, acc_type<scalar_t> sum,
                                scalar_t* y, const Strides& ys) {
  const int64_t o[kMaxSpatial] = {it.od, it.row0 + ty, it.col0 + tx};
  if (o[1] < g.conv_out_sizes[1] && o[2] < g.conv_out_sizes[2]) {
    y[it.n * ys.batch + it.c * ys.channel + ys.position(o)] = static_cast<scalar_t>(sum);
  }
}

// The taps t in [first, last) of `taps` whose source, source_first - t * source_step, lies in [0, size) (x's extent).
C10_HOST_DEVICE inline InteriorRange taps_inside(const TransposedTaps& taps, int64_t size) {
  const int64_t first = std::max<int64_t>(0, ceil_div(taps.source_first - size + 1, taps.source_step));
  const int64_t last = std::min<int64_t>(taps.count, floor_div(taps.source_first, taps.source_step) + 1);
  return {first, std::max(first, last)};
}

// conv_transpose: the sum of x[i] * w[r] over every padded position q that reads y's element e (padding_preimages)
// and, per q, the taps reaching it (transposed_taps). With fold_only, q = e itself is left out, and `folds` says
// whether any other q exists (else the element is complete as the phase GEMM wrote it).
template <typename scalar_t>
C10_HOST_DEVICE acc_type<scalar_t> transpose_gather_sum(const ConvGeometry& g, const scalar_t* x, const Strides& xs,
                                                        const scalar_t* w, const ElementIndex& e, bool fold_only,
                                                        bool& folds) {
  using acc_t = acc_type<scalar_t>;
  const int64_t c_x = g.conv_out_channels_per_group(), c_y = g.conv_in_channels_per_group(), taps = g.kernel_volume();
  Preimages pre[kMaxSpatial];
  folds = false;
  for (int d = 0; d < kMaxSpatial; ++d) {
    const int64_t reach_end =
        transposed_full_size(g.conv_out_sizes[d], g.kernel[d], g.stride[d], g.dilation[d]) - g.pad_lo[d];
    pre[d] = padding_preimages(e.pos[d], g.conv_in_sizes[d], g.pad_lo[d], reach_end, g.mode);
    for (int r = 0; r < pre[d].count; ++r) {
      folds = folds || pre[d].begin[r] != e.pos[d] || pre[d].end[r] != e.pos[d] + 1;
    }
  }
  acc_t sum = 0;
  if (fold_only && !folds) return sum;
  const int64_t group = e.c / c_y, cy = e.c % c_y;
  int64_t q[kMaxSpatial];
  for (int r0 = 0; r0 < pre[0].count; ++r0)
    for (q[0] = pre[0].begin[r0]; q[0] < pre[0].end[r0]; ++q[0])
      for (int r1 = 0; r1 < pre[1].count; ++r1)
        for (q[1] = pre[1].begin[r1]; q[1] < pre[1].end[r1]; ++q[1])
          for (int r2 = 0; r2 < pre[2].count; ++r2)
            for (q[2] = pre[2].begin[r2]; q[2] < pre[2].end[r2]; ++q[2]) {
              if (fold_only && q[0] == e.pos[0] && q[1] == e.pos[1] && q[2] == e.pos[2]) continue;
              // Per dim, the taps reaching q whose source lies in x: t in [t_first, t_last).
              TransposedTaps tt[kMaxSpatial];
              int64_t t_first[kMaxSpatial], t_last[kMaxSpatial];
              bool any = true;
              for (int d = 0; d < kMaxSpatial; ++d) {
                tt[d] = transposed_taps(q[d] + g.pad_lo[d], g.kernel[d], g.stride[d], g.dilation[d]);
                const InteriorRange inside = taps_inside(tt[d], g.conv_out_sizes[d]);
                t_first[d] = inside.first;
                t_last[d] = inside.last;
                any = any && t_first[d] < t_last[d];
              }
              if (!any) continue;
              for (int64_t cx = 0; cx < c_x; ++cx) {
                const scalar_t* x_channel = x + e.n * xs.batch + (group * c_x + cx) * xs.channel;
                const scalar_t* w_channel = w + ((group * c_x + cx) * c_y + cy) * taps;
                for (int64_t t0 = t_first[0]; t0 < t_last[0]; ++t0)
                  for (int64_t t1 = t_first[1]; t1 < t_last[1]; ++t1)
                    for (int64_t t2 = t_first[2]; t2 < t_last[2]; ++t2) {
                      const int64_t source[kMaxSpatial] = {tt[0].source_first - t0 * tt[0].source_step,
                                                          tt[1].source_first - t1 * tt[1].source_step,
                                                          tt[2].source_first - t2 * tt[2].source_step};
                      const int64_t r[kMaxSpatial] = {tt[0].first + t0 * tt[0].step, tt[1].first + t1 * tt[1].step,
                                                     tt[2].first + t2 * tt[2].step};
                      sum += load<acc_t>(x_channel, xs.position(source)) *
                             load<acc_t>(w_channel, (r[0] * g.kernel[1] + r[1]) * g.kernel[2] + r[2]);
                    }
              }
            }
  return sum;
}

// The passes of the transposed gather kernel.
enum class GatherPass {
  Full,            // y = bias + the whole gather: the direct path
  AfterPhaseGemm,  // completes what the phase GEMMs wrote: see transpose_gather_element
};

// Whether the phase GEMM multiplied a weight, for y's element at pos, by the zero it loads for a tap whose source lies
// outside x: some dim has such a tap, and every dim has a tap (otherwise the GEMM's K is empty).
C10_HOST_DEVICE inline bool phase_gemm_reads_outside(const ConvGeometry& g, const int64_t* pos) {
  bool outside = false;
  for (int d = 0; d < kMaxSpatial; ++d) {
    const TransposedTaps taps = transposed_taps(pos[d] + g.pad_lo[d], g.kernel[d], g.stride[d], g.dilation[d]);
    if (taps.count == 0) return false;
    const InteriorRange inside = taps_inside(taps, g.conv_out_sizes[d]);
    outside = outside || inside.first > 0 || inside.last < taps.count;
  }
  return outside;
}

// The work of the transposed gather kernel's thread for flat index `index` of y in its memory order.
// Full: y = bias + the gather. AfterPhaseGemm: y += the share of the padded positions that read the element (modes
// other than zeros); and where the weight holds an inf or NaN (weight_finite false), every element whose phase GEMM
// multiplied a weight by a zero loaded outside x (0 * inf = NaN, where torch never forms that product) is recomputed
// in full.
template <typename scalar_t>
C10_HOST_DEVICE void transpose_gather_element(const ConvGeometry& g, const scalar_t* x, const Strides& xs,
                                              const scalar_t* w, const scalar_t* bias, scalar_t* y, const Strides& ys,
                                              bool channels_last, GatherPass pass, bool weight_finite, int64_t index) {
  using acc_t = acc_type<scalar_t>;
  const ElementIndex e = decode_element(index, channels_last, g.conv_in_channels, g.conv_in_sizes);
  const int64_t offset = e.n * ys.batch + e.c * ys.channel + ys.position(e.pos);
  bool folds = false;
  if (pass == GatherPass::Full || (!weight_finite && phase_gemm_reads_outside(g, e.pos))) {
    const acc_t sum = transpose_gather_sum(g, x, xs, w, e, /*fold_only=*/false, folds);
    y[offset] = static_cast<scalar_t>((bias != nullptr ? load<acc_t>(bias, e.c) : acc_t(0)) + sum);
    return;
  }
  if (g.mode == PaddingMode::Zeros) return;
  const acc_t sum = transpose_gather_sum(g, x, xs, w, e, /*fold_only=*/true, folds);
  if (folds) y[offset] = static_cast<scalar_t>(load<acc_t>(y, offset) + sum);
}

// The channels one such load holds: 8 bfloat16/float16, 4 float32 or 2 float64.
template <typename scalar_t>
struct alignas(kVectorBytes) ChannelVector {
  static constexpr int kLanes = kVectorBytes / sizeof(scalar_t);
  scalar_t lane[kLanes];
};
// The few-channels kernel (conv.cu: few_channels_kernel, kernel_paths.h's cuda_few_channels): each thread sums
// kFewChannelsOutputs output channels of one output position. The weight is given as [taps][C_in][padded_out] in the
// accumulation type, its output channels padded with zeros to whole chunks of kFewChannelsOutputs.
constexpr int kFewChannelsOutputs = 16;

struct FewChannelsPlan {
  int64_t positions = 0;   // batch * out volume
  int64_t chunks = 0;      // chunks of kFewChannelsOutputs output channels
  int64_t padded_out = 0;  // chunks * kFewChannelsOutputs: the weight's row length
  int64_t items = 0;       // positions * chunks, chunks outermost (a warp's threads share the chunk's weight loads)
};

inline FewChannelsPlan few_channels_plan(const ConvGeometry& g) {
  FewChannelsPlan plan;
  plan.positions = g.batch * g.conv_out_volume();
  plan.chunks = ceil_div(g.conv_out_channels, kFewChannelsOutputs);
  plan.padded_out = plan.chunks * kFewChannelsOutputs;
  plan.items = plan.positions * plan.chunks;
  return plan;
}

// The depthwise channel-vector kernel (cuda/depthwise_vectors.cuh): each thread sums kDepthwiseStrip consecutive
// outputs of one output row for one vector of channels, so that a weight vector loaded for a tap serves that many
// outputs and the thread's index math is paid once for them.
constexpr int kDepthwiseStrip = 4;

struct DepthwiseVectorPlan {
  int64_t vectors = 0;  // channel vectors: channels / lanes (the path takes whole vectors only)
  int64_t strips = 0;   // strips per output row: ceil(out width / kDepthwiseStrip)
  int64_t items = 0;    // threads' work items: batch * out depth * out height * strips * vectors
};

// element_bytes: the tensors' element size (a vector holds kVectorBytes / element_bytes channels).
inline DepthwiseVectorPlan depthwise_vector_plan(const ConvGeometry& g, int64_t element_bytes) {
  DepthwiseVectorPlan plan;
  plan.vectors = g.conv_out_channels / (kVectorBytes / element_bytes);
  plan.strips = ceil_div(g.conv_out_sizes[2], kDepthwiseStrip);
  plan.items = g.batch * g.conv_out_sizes[0] * g.conv_out_sizes[1] * plan.strips * plan.vectors;
  return plan;
}

// Work item `item` of that kernel: its image, output depth and row, its strip's first output column and its channel
// vector (the fastest, so that a warp's loads and stores are contiguous runs of channels).
struct DepthwiseStrip {
  int64_t n, od, oh, ow0, vector;
};

C10_HOST_DEVICE inline DepthwiseStrip depthwise_strip(const ConvGeometry& g, const DepthwiseVectorPlan& plan,
                                                      int64_t item) {
  DepthwiseStrip s;
  QuotientRemainder qr = divide(item, plan.vectors);
  s.vector = qr.remainder;
  qr = divide(qr.quotient, plan.strips);
  s.ow0 = qr.remainder * kDepthwiseStrip;
  qr = divide(qr.quotient, g.conv_out_sizes[1]);
  s.oh = qr.remainder;
  qr = divide(qr.quotient, g.conv_out_sizes[0]);
  s.od = qr.remainder;
  s.n = qr.quotient;
  return s;
}

// Below this many x channels per group the phase GEMMs' K is too short for their tiles: gather directly.
constexpr int64_t kPhaseGemmMinChannels = 4;

// conv_weight_grad, depthwise: one (output channel c, tap r) term of the reduction, at flat k = (image, output).
template <typename scalar_t>
C10_HOST_DEVICE acc_type<scalar_t> depthwise_weight_grad_term(const ConvGeometry& g, const scalar_t* x,
                                                              const Strides& xs, const scalar_t* gy,
                                                              const Strides& gys, int64_t c, const int64_t* r,
                                                              int64_t k) {
  using acc_t = acc_type<scalar_t>;
  int64_t o[kMaxSpatial], source[kMaxSpatial];
  const int64_t n = unflatten(k, g.conv_out_sizes, o);
  for (int d = 0; d < kMaxSpatial; ++d) {
    source[d] = g.tap_source(d, o[d], r[d]);
    if (source[d] < 0) return acc_t(0);
  }
  return load<acc_t>(gy, n * gys.batch + c * gys.channel + gys.position(o)) *
         load<acc_t>(x, n * xs.batch + c / g.conv_out_channels_per_group() * xs.channel + xs.position(source));
}

// conv_weight_grad, depthwise with x and grad_output in channel vectors (conv_weight_grad.cu:
// depthwise_weight_grad_vectors_kernel). gw[c, tap] sums gy[n, o, c] * xpad[n, o*s - pad_lo + tap*d, c] over the
// batch x output positions, P of them. A block takes `block_vectors` channel vectors (consecutive threads, so a
// warp's loads are contiguous runs of channels) times `slots` position slots, and a group of taps whose sums stay in
// registers, so each gy vector is loaded once per tap group; the positions are cut into `splits` ranges of
// `split_size`, whose per-block sums (a fixed-order sum over the slots) go to a [splits][C * taps] workspace that
// sum_splits_kernel adds in order. No atomics: the result is deterministic.
// The taps of a group: 9 (a 3x3 kernel at once) for float32's 4 and float64's 2 lanes; 5 for 16-bit's 8 lanes, whose
// 9 x 8 float sums spilled at the 128 registers of two 256-thread blocks per SM.
constexpr int weight_grad_vector_taps(int64_t element_bytes) { return element_bytes == 2 ? 5 : 9; }
// Blocks the launch should have to fill an H100 (132 SMs) a few times over: splits are added until it has as many,
// each split keeping at least kWeightGradVectorMinRounds positions per slot. Not measured on a GPU: a starting point.
constexpr int64_t kWeightGradVectorTargetBlocks = 1056;
constexpr int64_t kWeightGradVectorMinRounds = 8;
constexpr int64_t kWeightGradVectorMaxSplits = 256;

// The outputs every tap of which lies inside x, along each dim: where the first and the last tap both land inside
// (tap positions grow with the tap). The depthwise weight gradient's vector kernel reads their x without resolving
// any padding: a tap's x is the position's offset plus the tap's (the block keeps its tap group's in shared memory),
// where resolving its source took three products, three comparisons and the padding mode's switch.
struct InteriorOutputs {
  InteriorRange range[kMaxSpatial];
};

inline InteriorOutputs interior_outputs(const ConvGeometry& g) {
  InteriorOutputs outputs;
  for (int d = 0; d < kMaxSpatial; ++d) {
    const InteriorRange first = g.tap_interior(d, 0, g.conv_out_sizes[d]);
    const InteriorRange last = g.tap_interior(d, g.kernel[d] - 1, g.conv_out_sizes[d]);
    outputs.range[d].first = std::max(first.first, last.first);
    outputs.range[d].last = std::max(outputs.range[d].first, std::min(first.last, last.last));
  }
  return outputs;
}

struct DepthwiseGradVectorPlan {
  int block_vectors = 0;     // channel vectors per block (<= 32)
  int slots = 0;             // position slots per block: kThreads / block_vectors
  int64_t vector_blocks = 0;  // blocks of block_vectors over the channel vectors
  int64_t tap_groups = 0;     // groups of weight_grad_vector_taps taps
  int64_t splits = 0;         // ranges of the batch x output positions
  int64_t split_size = 0;
  C10_HOST_DEVICE int64_t items() const { return splits * tap_groups * vector_blocks; }
};

// element_bytes: the tensors' element size (a vector holds kVectorBytes / element_bytes channels).
inline DepthwiseGradVectorPlan depthwise_grad_vector_plan(const ConvGeometry& g, int64_t element_bytes) {
  DepthwiseGradVectorPlan plan;
  const int64_t vectors = ceil_div(g.conv_out_channels, kVectorBytes / element_bytes);
  plan.block_vectors = static_cast<int>(std::min<int64_t>(vectors, 32));
  plan.slots = kThreads / plan.block_vectors;
  plan.vector_blocks = ceil_div(vectors, plan.block_vectors);
  plan.tap_groups = ceil_div(g.kernel_volume(), weight_grad_vector_taps(element_bytes));
  const int64_t positions = g.batch * g.conv_out_volume();
  const int64_t most_splits =
      std::max<int64_t>(1, std::min(kWeightGradVectorMaxSplits, positions / (plan.slots * kWeightGradVectorMinRounds)));
  const int64_t wanted = ceil_div(kWeightGradVectorTargetBlocks, plan.vector_blocks * plan.tap_groups);
  plan.split_size = ceil_div(std::max<int64_t>(positions, 1), std::clamp<int64_t>(wanted, 1, most_splits));
  plan.splits = ceil_div(std::max<int64_t>(positions, 1), plan.split_size);
  return plan;
}

}  // namespace fastpad::cuda
