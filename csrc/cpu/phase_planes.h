// Phase planes: the implicitly padded input of one (H, W) slice, for a band of output rows (or a tile of the columns
// of one row too long for the cache), split by stride phase so that every tap of every output position in the band is
// one contiguous run.
//
// Phase plane (ph, pw) holds padded positions (row * s_h + ph, col * s_w + pw). Tap (kh, kw) has padded offset
// (kh * d_h, kw * d_w), so for output (oh, ow) it reads phase ((kh*d_h) % s_h, (kw*d_w) % s_w) at
// (oh + (kh*d_h) / s_h, ow + (kw*d_w) / s_w). With the band's outputs flattened at the phase planes' row pitch,
// t = (oh - row0) * pitch + (ow - col0), a tap reads all of them at t + tap_offset: the kernels become long
// vector loops with no index math and no predicate. Columns past the band's own of the flattened band are computed
// and discarded (pitch - cols extra columns per row, a few percent on typical layers).
//
// Only this cache-sized band buffer is ever padded. The padding mode is resolved once per column phase (which
// input column each border position reads) and once per phase row; scatter_add is gather's exact adjoint.
#pragma once

#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

#include "cpu/blocked_direct.h"
#include "cpu/row_ops.h"
#include "geometry.h"

namespace fastpad::cpu {

// A 3-d conv's output depths share input depth slices: the slices one output depth reads lie within a window of this
// many consecutive slices, so a slice whose planes a driver keeps in slot slice % span stays there until another slice
// takes the slot, and is gathered about once per band rather than once per output depth that reads it.
inline int64_t depth_slot_span(const ConvGeometry& g) { return (g.kernel[0] - 1) * g.dilation[0] + 1; }

// Target size of one thread's phase planes: a band of output rows is chosen to fit it (L2-resident).
constexpr int64_t kPhasePlaneBytes = 256 * 1024;
// For the GEMM kernels: the phase planes of a whole group plus the band's GEMM buffers, larger for wider GEMMs.
constexpr int64_t kGemmPhasePlaneBytes = 1024 * 1024;
// The narrowest column tile of a row too long for the budget: wide enough that the tile's halo and per-tile costs
// stay small, and no 2-d image up to this width is split.
constexpr int64_t kMinTileColumns = 1024;

// The narrowest column tile of a row split only so that the threads share it (one output row: a 1-d problem, where
// the other work items do not divide evenly among the threads). The calls this split, the op alone against one tile,
// 2 cores (Zen 4), interleaved (benchmarks/RESULTS.md): float32 on AVX-512 13 calls of random seeds 1-24 and the
// suite 0.51-0.90x (geomean 0.73; seed 6's random096, batch 1, 162 -> 37 k4 over 597, had run on one core: 0.55x),
// bfloat16 12 calls 0.63-0.98x (0.80), AVX2 one call 0.78x. Splitting also where the items divided evenly (batch 2
// on 2 threads) ran 0.89-1.12x there.
constexpr int64_t kMinThreadTileColumns = 64;

// Where the NCHW gather into lanes (PhasePlanes::gather) goes through the register transpose (float32, unit stride
// along the row): kGatherTransposeLanes channels' rows at a time, each swept along its whole interior run, so that the
// copy reads 16 rows of x in order, as the copy a value at a time does. The whole block of lanes per run of positions
// (each position's lanes written whole, 128 rows of x read side by side) took HiFi-GAN's 1-d k4 s2 transposed conv
// from 17.0 to 19.2 ms; by blocks of 16 lanes it took 14.5 ms (2 cores, Zen 4). Rows of 8-33 positions had lost
// through the transpose (Sapphire Rapids, benchmarks/RESULTS.md), hence the least run of kGatherTransposeMinPositions.
constexpr int64_t kGatherTransposeLanes = 16, kGatherTransposeMinPositions = 64;
inline bool gather_transpose_pays(int64_t positions, int64_t lanes) {
  return positions >= kGatherTransposeMinPositions && lanes >= kGatherTransposeLanes;
}

// A band: output rows [row0, row0 + rows) and, of each, output columns [col0, col0 + cols). Columns are split
// (cols < out_w) only where one whole row does not fit the budget, and then a band is one row.
struct Band {
  int64_t row0, rows, col0, cols;
};

// The fewest copies of `items` work items (bands, runs of channels) that divide evenly among the threads.
inline int64_t threads_share_multiple(int64_t items) {
  const int64_t threads = at::get_num_threads();
  return threads / std::gcd(std::max<int64_t>(items, 1), threads);
}

template <typename acc_t>
class PhasePlanes {
 public:
  using Vec = at::vec::Vectorized<acc_t>;

  // Planes for `channels` input channels at once (NCHW: the channels of one group), each its own set of phases.
  // Channels-last instead keeps `lanes` channels inside every position (channels = 1): a tap is then a
  // [positions, lanes] matrix. The band is sized so that the planes plus the caller's own buffers,
  // `bytes_per_position` for each flattened output position, fit `budget_bytes`: whole rows where one row fits, else
  // a tile of one row's columns with the halo its taps read (never narrower than kMinTileColumns), so that a long
  // 1-d row never sizes a buffer. wanted_row_bands: whole rows are split into up to this many bands (more work items
  // for the threads), none shorter than its halo (so no row is gathered more than twice); row_band_multiple: their
  // count is rounded up to a multiple of it (conv.cpp's thread_band_multiple), bands then shorter than the halo.
  explicit PhasePlanes(const ConvGeometry& g, int64_t channels = 1, int64_t budget_bytes = kPhasePlaneBytes,
                       int64_t bytes_per_position = 0, int64_t lanes = 1, int64_t wanted_row_bands = 1,
                       int64_t row_band_multiple = 1)
      : g_(g),
        stride_h_(g.stride[1]),
        stride_w_(g.stride[2]),
        extra_rows_(((g.kernel[1] - 1) * g.dilation[1]) / g.stride[1]),
        extra_cols_(((g.kernel[2] - 1) * g.dilation[2]) / g.stride[2]),
        lanes_(lanes),
        used_(stride_h_ * stride_w_, false),
        columns_(stride_w_) {
    const int64_t phases = stride_h_ * stride_w_, out_w = std::max<int64_t>(g.conv_out_sizes[2], 1);
    const int64_t position_bytes = channels * phases * lanes * static_cast<int64_t>(sizeof(acc_t)) + bytes_per_position;
    tile_cols_ = out_w;
    if (position_bytes * (out_w + extra_cols_) * (1 + extra_rows_) > budget_bytes) {
      tile_cols_ = std::min(out_w, std::max(kMinTileColumns,
                                            budget_bytes / (position_bytes * (1 + extra_rows_)) - extra_cols_));
    }
    if (tile_cols_ == out_w && g.conv_out_sizes[1] == 1 && wanted_row_bands > 1 && row_band_multiple > 1) {
      // One output row (1-d) has no rows to split: where the other work items do not divide evenly among the threads
      // (row_band_multiple > 1), its columns go in up to wanted_row_bands tiles (a multiple of row_band_multiple) of
      // kMinThreadTileColumns or more, so that the threads share it.
      const int64_t tiles = std::min(ceil_div(wanted_row_bands, row_band_multiple) * row_band_multiple,
                                     out_w / kMinThreadTileColumns);
      if (tiles > 1) tile_cols_ = ceil_div(out_w, tiles);
    }
    col_tiles_ = (out_w + tile_cols_ - 1) / tile_cols_;
    pitch_ = tile_cols_ + extra_cols_;
    band_rows_ = col_tiles_ > 1 ? 1
                                : std::clamp<int64_t>(budget_bytes / (position_bytes * pitch_) - extra_rows_, 1,
                                                      std::max({ceil_div(g.conv_out_sizes[1], wanted_row_bands),
                                                                extra_rows_, int64_t(1)}));
    row_bands_ = (g.conv_out_sizes[1] + band_rows_ - 1) / band_rows_;
    // A whole multiple of row_band_multiple bands (capped at one a row), so that the threads share them evenly.
    if (row_band_multiple > 1) {
      row_bands_ = std::min(ceil_div(row_bands_, row_band_multiple) * row_band_multiple, g.conv_out_sizes[1]);
    }
    // As many bands, of rows as even as they divide (27 rows at most 11 a band: 9 + 9 + 9, not 11 + 11 + 5; 20 rows in
    // 8 bands: 2 + 3 + 2 + 3 ...); band_rows_ is the most.
    if (row_bands_ > 0) band_rows_ = (g.conv_out_sizes[1] + row_bands_ - 1) / row_bands_;
    plane_rows_ = band_rows_ + extra_rows_;
    // Vector loops run over a whole number of vectors, so every buffer has one vector (plus the widest tap
    // offset past the last phase row) of zeroed slack; those lanes land in discarded columns.
    plane_size_ = (plane_rows_ * pitch_ + extra_cols_ + Vec::size()) * lanes;
    channel_stride_ = phases * plane_size_;
    data_.assign(channels * channel_stride_, acc_t(0));
    for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
      for (int64_t kw = 0; kw < g.kernel[2]; ++kw) used_[phase_index(kh, kw)] = true;
    }
    for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
      for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
        taps_.push_back(data_.data() + phase_index(kh, kw) * plane_size_ +
                        (((kh * g.dilation[1]) / stride_h_) * pitch_ + (kw * g.dilation[2]) / stride_w_) * lanes);
      }
    }
  }

  int64_t pitch() const { return pitch_; }
  int64_t bands() const { return row_bands_ * col_tiles_; }
  // Band b: column tiles vary fastest, so one thread's bands of a slice go along each row in order.
  Band band(int64_t b) const {
    const int64_t row_band = b / col_tiles_, col0 = (b % col_tiles_) * tile_cols_;
    const int64_t row0 = row_band * g_.conv_out_sizes[1] / row_bands_;
    return {row0, (row_band + 1) * g_.conv_out_sizes[1] / row_bands_ - row0, col0,
            std::min(tile_cols_, g_.conv_out_sizes[2] - col0)};
  }
  // Flattened positions a vector loop covers for a band of `rows` output rows: a whole number of vectors.
  int64_t positions(int64_t rows) const { return (rows * pitch_ + Vec::size() - 1) / Vec::size() * Vec::size(); }
  // The most outputs a band keeps (rows times columns).
  int64_t band_outputs() const { return band_rows_ * tile_cols_; }
  // Buffer size for a flattened band of outputs at this pitch, slack included.
  int64_t band_buffer_size() const { return positions(band_rows_); }

  // Elements between the planes of consecutive channels.
  int64_t channel_stride() const { return channel_stride_; }

  // Fills the phase planes of `channel` for `band` from one (H, W) input slice whose pixels are `pixel_stride`
  // elements apart (channels-last: the input's channel count). With lanes, a pixel's channels are `lane_stride`
  // apart in the slice: 1 from channels-last, H * W from NCHW (the copy then transposes the band: through
  // `transpose`, the ISA's transpose_floats, where gather_transpose_pays).
  template <typename scalar_t>
  void gather(const scalar_t* slice, const Band& band, int64_t channel = 0, int64_t pixel_stride = 1,
              int64_t lane_stride = 1, void (*transpose)(const FloatTranspose&) = nullptr) {
    for_each_phase_row(channel, band, [&](acc_t* dst, int64_t in_row, const Columns& columns) {
      if (in_row < 0) {
        std::fill_n(dst, pitch_ * lanes_, acc_t(0));
        return;
      }
      const scalar_t* src = slice + in_row * g_.conv_in_sizes[2] * pixel_stride;
      // Each position takes `lanes` channels of one input pixel: also one lane from a channels-last slice, whose
      // pixels are pixel_stride apart (the one-lane copy below reads consecutive pixels).
      if (lanes_ > 1 || pixel_stride > 1) {
        // One pixel's channels into position t's lanes.
        const auto copy_pixel = [&](const scalar_t* pixel, acc_t* lanes) {
          if (lane_stride == 1) {
            at::vec::convert(pixel, lanes, lanes_);
          } else {
            for (int64_t lane = 0; lane < lanes_; ++lane) lanes[lane] = static_cast<acc_t>(pixel[lane * lane_stride]);
          }
        };
        for (const auto& [t, source] : columns.borders) {
          if (source < 0) {
            std::fill_n(dst + t * lanes_, lanes_, acc_t(0));
          } else {
            copy_pixel(src + source * pixel_stride, dst + t * lanes_);
          }
        }
        const scalar_t* first = src + columns.interior_source * pixel_stride;
        acc_t* out = dst + columns.interior_begin * lanes_;
        if (lane_stride == 1) {
          copy_pixels(first, stride_w_ * pixel_stride, out, columns.interior_count);
        } else {  // NCHW: kLaneBlock channels' rows at a time, each read in order, each position's lanes written whole
          if constexpr (std::is_same_v<scalar_t, float> && std::is_same_v<acc_t, float>) {
            if (transpose != nullptr && stride_w_ * pixel_stride == 1 &&
                gather_transpose_pays(columns.interior_count, lanes_)) {
              for (int64_t lane0 = 0; lane0 < lanes_; lane0 += kGatherTransposeLanes) {
                transpose({first + lane0 * lane_stride, lane_stride, std::min(kGatherTransposeLanes, lanes_ - lane0),
                           columns.interior_count, out + lane0, lanes_, 1});
              }
              return;
            }
          }
          constexpr int64_t kLaneBlock = 16;
          for (int64_t lane0 = 0; lane0 < lanes_; lane0 += kLaneBlock) {
            const int64_t block = std::min(kLaneBlock, lanes_ - lane0);
            const scalar_t* rows = first + lane0 * lane_stride;
            for (int64_t t = 0; t < columns.interior_count; ++t) {
              const scalar_t* pixel = rows + t * stride_w_ * pixel_stride;
              acc_t* position = out + t * lanes_ + lane0;
              for (int64_t lane = 0; lane < block; ++lane) position[lane] = static_cast<acc_t>(pixel[lane * lane_stride]);
            }
          }
        }
        return;
      }
      for (const auto& [t, source] : columns.borders) dst[t] = source < 0 ? acc_t(0) : static_cast<acc_t>(src[source]);
      const scalar_t* first = src + columns.interior_source;
      acc_t* out = dst + columns.interior_begin;
      const int64_t count = columns.interior_count;
      if (stride_w_ == 1) {
        at::vec::convert(first, out, count);
      } else if (stride_w_ == 2) {  // the common strided case, with a constant step the compiler vectorises
        for (int64_t t = 0; t < count; ++t) out[t] = static_cast<acc_t>(first[2 * t]);
      } else {
        for (int64_t t = 0; t < count; ++t) out[t] = static_cast<acc_t>(first[t * stride_w_]);
      }
    });
  }

  // Fills the phase planes of channels [0, channels) (one lane each) for `band` from one channels-last (H, W) slice
  // whose pixels are `pixel_stride` elements apart, channel c at pixel + c: each pixel's channels are read in runs of
  // kChannelRun (a 64-byte line of float32) and written to their planes, so the slice is read once, where a gather per
  // channel would read every line of it once per channel.
  // transpose (float32 only; transpose_floats_avx2/_avx512 in cpu/blocked_direct.h): each interior run moved through
  // the registers a block of pixels x channels at a time, not a value at a time.
  template <typename scalar_t>
  void gather_channels(const scalar_t* slice, const Band& band, int64_t channels, int64_t pixel_stride,
                       void (*transpose)(const FloatTranspose&) = nullptr) {
    TORCH_INTERNAL_ASSERT(lanes_ == 1, "gather_channels fills planes of one lane per position");
    constexpr int64_t kChannelRun = 16;
    for_each_phase_row(0, band, [&](acc_t* dst, int64_t in_row, const Columns& columns) {
      if (in_row < 0) {
        for (int64_t c = 0; c < channels; ++c) std::fill_n(dst + c * channel_stride_, pitch_, acc_t(0));
        return;
      }
      const scalar_t* src = slice + in_row * g_.conv_in_sizes[2] * pixel_stride;
      for (const auto& [t, source] : columns.borders) {
        for (int64_t c = 0; c < channels; ++c) {
          dst[c * channel_stride_ + t] = source < 0 ? acc_t(0) : static_cast<acc_t>(src[source * pixel_stride + c]);
        }
      }
      const scalar_t* first = src + columns.interior_source * pixel_stride;
      acc_t* out = dst + columns.interior_begin;
      const int64_t step = stride_w_ * pixel_stride;
      if constexpr (std::is_same_v<scalar_t, float> && std::is_same_v<acc_t, float>) {
        if (transpose != nullptr && float_transpose_pays(columns.interior_count, channels)) {  // pixel t's c to c's t
          transpose({first, step, columns.interior_count, channels, out, channel_stride_, 1});
          return;
        }
      }
      for (int64_t c0 = 0; c0 < channels; c0 += kChannelRun) {
        const int64_t run = std::min(kChannelRun, channels - c0);
        for (int64_t t = 0; t < columns.interior_count; ++t) {
          const scalar_t* pixel = first + t * step + c0;
          for (int64_t c = 0; c < run; ++c) out[(c0 + c) * channel_stride_ + t] = static_cast<acc_t>(pixel[c]);
        }
      }
    });
  }

  void zero() { std::fill(data_.begin(), data_.end(), acc_t(0)); }

  // Adjoint of gather (one lane): adds every phase position of the band back onto the input slice position it was
  // read from (dropped where the mode reads zero); the slice's pixels are `pixel_stride` elements apart.
  void scatter_add(acc_t* slice, const Band& band, int64_t channel = 0, int64_t pixel_stride = 1) {
    TORCH_INTERNAL_ASSERT(lanes_ == 1, "scatter_add is implemented for one lane per position");
    for_each_phase_row(channel, band, [&](const acc_t* src, int64_t in_row, const Columns& columns) {
      if (in_row < 0) return;
      acc_t* dst = slice + in_row * g_.conv_in_sizes[2] * pixel_stride;
      for (const auto& [t, source] : columns.borders) {
        if (source >= 0) dst[source * pixel_stride] += src[t];
      }
      acc_t* first = dst + columns.interior_source * pixel_stride;
      const acc_t* in = src + columns.interior_begin;
      const int64_t count = columns.interior_count, step = stride_w_ * pixel_stride;
      if (step == 1) {
        axpy(first, acc_t(1), in, count);
      } else {
        for (int64_t t = 0; t < count; ++t) first[t * step] += in[t];
      }
    });
  }

  // The tap pointers point into this object's buffer, so it is never copied.
  PhasePlanes(const PhasePlanes&) = delete;
  PhasePlanes& operator=(const PhasePlanes&) = delete;

  // taps()[kh * kw_count + kw][t] is tap (kh, kw) of flattened output position t (channel c: + c * channel_stride();
  // with lanes, [t * lanes + lane]).
  const std::vector<acc_t*>& taps() const { return taps_; }

  // The same taps by phase plane, for a kernel that computes the planes themselves (a transposed conv's gather): tap
  // k = kh * kw_count + kw reads phase plane tap_phase(k) from tap_offset(k) on (taps()[k] == phase_plane(tap_phase(k))
  // + tap_offset(k) for channel 0), never beyond max_tap_offset(). A band reads plane_positions(band) positions of
  // each plane (its rows and their halo; a whole number of vectors, at most plane_size()).
  int64_t phase_count() const { return stride_h_ * stride_w_; }
  acc_t* phase_plane(int64_t phase) { return data_.data() + phase * plane_size_; }
  int64_t tap_phase(int64_t k) const { return phase_index(k / g_.kernel[2], k % g_.kernel[2]); }
  int64_t tap_offset(int64_t k) const { return taps_[k] - data_.data() - tap_phase(k) * plane_size_; }
  int64_t max_tap_offset() const { return (extra_rows_ * pitch_ + extra_cols_) * lanes_; }
  int64_t plane_positions(const Band& band) const {
    return ((band.rows + extra_rows_) * pitch_ + Vec::size() - 1) / Vec::size() * Vec::size() * lanes_;
  }
  int64_t plane_size() const { return plane_size_; }

 private:
  // `count` pixels of `lanes_` consecutive values each, pixel t at first + t * step, into consecutive positions: one
  // run where the pixels are adjacent, else a loop of fixed length for a few channels (with_fixed_run: a call per
  // pixel made the gather of a 3-channel stem a sixth of its forward), else a vector copy per pixel.
  template <typename scalar_t>
  void copy_pixels(const scalar_t* first, int64_t step, acc_t* out, int64_t count) const {
    if (step == lanes_) {
      at::vec::convert(first, out, count * lanes_);
      return;
    }
    const bool fixed = with_fixed_run(lanes_, [&](auto lanes) {
      for (int64_t t = 0; t < count; ++t) {
        for (int64_t lane = 0; lane < lanes; ++lane) out[t * lanes + lane] = static_cast<acc_t>(first[t * step + lane]);
      }
    });
    if (!fixed) {
      for (int64_t t = 0; t < count; ++t) at::vec::convert(first + t * step, out + t * lanes_, lanes_);
    }
  }

  int64_t phase_index(int64_t kh, int64_t kw) const {
    return ((kh * g_.dilation[1]) % stride_h_) * stride_w_ + (kw * g_.dilation[2]) % stride_w_;
  }

  // Where the `pitch` elements of a phase row come from, the same for every row of a column phase: an interior
  // run of input columns interior_source, +s, ... and border positions resolved by the padding mode (-1: zero).
  struct Columns {
    int64_t interior_begin = 0, interior_count = 0, interior_source = 0;
    std::vector<std::pair<int64_t, int64_t>> borders;  // (t, source column or -1)
  };

  // The columns of phase pw for a band's column tile. Positions past the last one the tile's kept outputs read
  // (t >= cols + extra_cols, in a short last tile) are never read: they are zero, so that they reach no input.
  Columns columns_of_phase(int64_t pw, const Band& band) const {
    const int64_t start = band.col0 * stride_w_ + pw - g_.pad_lo[2];
    const int64_t read = band.cols + extra_cols_;  // at most pitch_: cols <= tile_cols_
    const InteriorRange interior = interior_range(start, stride_w_, read, g_.conv_in_sizes[2]);
    Columns columns;
    columns.interior_begin = interior.first;
    columns.interior_count = interior.last - interior.first;
    columns.interior_source = start + interior.first * stride_w_;
    for (int64_t t = 0; t < interior.first; ++t) {
      columns.borders.emplace_back(t, source_index(start + t * stride_w_, g_.conv_in_sizes[2], g_.mode));
    }
    for (int64_t t = interior.last; t < pitch_; ++t) {
      columns.borders.emplace_back(t, t < read ? source_index(start + t * stride_w_, g_.conv_in_sizes[2], g_.mode)
                                               : int64_t(-1));
    }
    return columns;
  }

  // body(phase_row, input_row, columns) for every phase row the band reads: input_row is the resolved source
  // row (-1: zero padding).
  template <typename Body>
  void for_each_phase_row(int64_t channel, const Band& band, const Body& body) {
    if (band.col0 != columns_col0_ || band.cols != columns_cols_) {  // a new column tile
      for (int64_t pw = 0; pw < stride_w_; ++pw) columns_[pw] = columns_of_phase(pw, band);
      columns_col0_ = band.col0;
      columns_cols_ = band.cols;
    }
    for (int64_t ph = 0; ph < stride_h_; ++ph) {
      for (int64_t pw = 0; pw < stride_w_; ++pw) {
        if (!used_[ph * stride_w_ + pw]) continue;
        acc_t* plane = data_.data() + channel * channel_stride_ + (ph * stride_w_ + pw) * plane_size_;
        for (int64_t i = 0; i < band.rows + extra_rows_; ++i) {
          const int64_t in_row =
              source_index((band.row0 + i) * stride_h_ + ph - g_.pad_lo[1], g_.conv_in_sizes[1], g_.mode);
          body(plane + i * pitch_ * lanes_, in_row, columns_[pw]);
        }
      }
    }
  }

  const ConvGeometry& g_;
  int64_t stride_h_, stride_w_, extra_rows_, extra_cols_, lanes_;
  int64_t tile_cols_ = 1, col_tiles_ = 1, pitch_ = 1, band_rows_ = 1, row_bands_ = 1, plane_rows_ = 1;
  int64_t plane_size_ = 0, channel_stride_ = 0;
  std::vector<bool> used_;
  std::vector<Columns> columns_;  // per column phase, for the column tile (columns_col0_, columns_cols_)
  int64_t columns_col0_ = -1, columns_cols_ = -1;
  std::vector<acc_t> data_;
  std::vector<acc_t*> taps_;  // into data_, which is never reallocated
};

// Copies a band of one (H, W) output slice (rows out_w pixels wide, `pixel_stride` elements apart) into a band buffer
// at the phase planes' pitch (load), zeroing each row's discarded columns, or back (store).
template <typename scalar_t, typename acc_t>
void load_band(acc_t* buffer, const scalar_t* slice, const Band& band, int64_t pitch, int64_t out_w,
               int64_t pixel_stride = 1) {
  for (int64_t r = 0; r < band.rows; ++r) {
    const scalar_t* row = slice + ((band.row0 + r) * out_w + band.col0) * pixel_stride;
    if (pixel_stride == 1) {
      at::vec::convert(row, buffer + r * pitch, band.cols);
    } else {
      for (int64_t t = 0; t < band.cols; ++t) buffer[r * pitch + t] = static_cast<acc_t>(row[t * pixel_stride]);
    }
    std::fill(buffer + r * pitch + band.cols, buffer + (r + 1) * pitch, acc_t(0));
  }
}

template <typename scalar_t, typename acc_t>
void store_band(scalar_t* slice, const acc_t* buffer, const Band& band, int64_t pitch, int64_t out_w,
                int64_t pixel_stride = 1) {
  for (int64_t r = 0; r < band.rows; ++r) {
    scalar_t* row = slice + ((band.row0 + r) * out_w + band.col0) * pixel_stride;
    if (pixel_stride == 1) {
      at::vec::convert(buffer + r * pitch, row, band.cols);
    } else {
      for (int64_t t = 0; t < band.cols; ++t) row[t * pixel_stride] = static_cast<scalar_t>(buffer[r * pitch + t]);
    }
  }
}

}  // namespace fastpad::cpu
