// The im2col/col2im GEMM paths: a fused im2col of one tile of output pixels into a cache-sized column buffer,
// cols[p, (kd, kh, kw), c], and the GEMM that consumes it (channels-last convolutions), and its adjoint, GEMM then
// col2im (the GEMM + col2im path of conv_transpose, channels-last or NCHW). Padding is resolved while gathering
// (tap_source): the padded input never exists.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cpu/row_ops.h"
#include "geometry.h"

namespace fastpad::cpu {

// Target size of one thread's column buffer: small enough to stay in L2.
constexpr int64_t kColumnBufferBytes = 512 * 1024;

// Splits the output positions of one image into tiles whose column buffer stays cache-sized. A tile is a run
// of output pixels (channels-last), or of whole output rows (NCHW, so that col2im goes by rows) where a row fits the
// buffer or is no longer than kMinTilePixels; a longer row (a long 1-d signal) is split into runs of at least
// kMinTilePixels pixels, so that no buffer grows with the row.
constexpr int64_t kMinTilePixels = 1024;

// The most positions a GEMM over several whole images covers, where each image has fewer: a GEMM over an image's few
// positions re-reads (or, for a weight gradient, re-writes) the whole weight for them (12 images of 6 positions, 303
// x channels, 1134 columns: one GEMM over 36 positions took 0.4 ms, six over 6 positions 2.8 ms, single-threaded).
// Past this many, one image's GEMM is wide enough, and tiles of several images only spread the col2im's writes over
// more of y than the cache holds (11 images of 26 x 26 x positions, 8 channels per group: 5 images per GEMM took 1.39x
// the time of one).
constexpr int64_t kSharedGemmPositions = 256;

// Whole images per shared GEMM for images of `positions` positions (1 where they have kSharedGemmPositions / 2 or
// more), at most an even share of the (image, group) slices per thread, so that every thread still gets work where the
// groups are few.
inline int64_t images_per_shared_gemm(int64_t positions, int64_t batch, int64_t groups, int64_t threads) {
  return std::clamp<int64_t>(std::min(kSharedGemmPositions / std::max<int64_t>(positions, 1),
                                      (batch * groups + threads - 1) / threads / groups),
                             1, std::max<int64_t>(batch, 1));
}

// Images per run, at most `most`, where each (run, group) item is one task of a parallel_for, which hands each thread
// a contiguous ceil(items / threads) of them: the runs are raised in number until the items split evenly between the
// threads (or each run is one image), so that 16 images of at most 7 per run go 4 + 4 | 4 + 4, not 7 + 7 | 2. (A
// transposed conv's GEMM + col2im over 16 images of 6 x 6 x positions, 2 cores: 0.35 ms -> 0.21 ms. The weight
// gradient keeps its runs: it hands each thread jobs [k * jobs / threads, (k + 1) * jobs / threads), 11 | 11 + 2.)
inline int64_t images_per_even_run(int64_t most, int64_t batch, int64_t groups, int64_t threads) {
  batch = std::max<int64_t>(batch, 1);
  int64_t runs = ceil_div(batch, std::clamp<int64_t>(most, 1, batch));
  while (runs < batch && runs * groups % std::max<int64_t>(threads, 1) != 0) ++runs;
  return ceil_div(batch, runs);
}

struct TilePlan {
  struct Tile {
    int64_t pixel_begin, pixels;  // output positions [pixel_begin, pixel_begin + pixels) of the image
  };

  TilePlan(const ConvGeometry& g, bool channels_last, int64_t bytes_per_position) : total(g.conv_out_volume()) {
    const int64_t bytes = std::max<int64_t>(bytes_per_position, 1);
    const int64_t row = g.conv_out_sizes[2];
    if (channels_last) {
      tile_pixels = kColumnBufferBytes / bytes;
    } else if (bytes * row <= kColumnBufferBytes || row <= kMinTilePixels) {
      tile_pixels = std::max<int64_t>(kColumnBufferBytes / (bytes * row), 1) * row;
    } else {
      tile_pixels = std::max(kColumnBufferBytes / bytes, kMinTilePixels);
    }
    tile_pixels = std::clamp<int64_t>(tile_pixels, 1, std::max<int64_t>(total, 1));
    tiles = (total + tile_pixels - 1) / tile_pixels;
  }

  // Cuts the positions into at least `count` tiles of equal size (to a position; never larger than before).
  void split_evenly(int64_t count) {
    count = std::clamp<int64_t>(std::max(count, tiles), 1, std::max<int64_t>(total, 1));
    tile_pixels = std::max<int64_t>((total + count - 1) / count, 1);
    tiles = (total + tile_pixels - 1) / tile_pixels;
  }

  Tile tile(int64_t index) const {
    const int64_t begin = index * tile_pixels;
    return {begin, std::min(tile_pixels, total - begin)};
  }
  int64_t buffer_positions() const { return tile_pixels; }

  int64_t total, tile_pixels = 1, tiles = 1;
};

// [N, C, positions] (NCHW) or [N, positions, C] (channels-last) view of a tensor stored in that layout. A view,
// never a copy: the kernels write their output through it, so a layout mismatch must raise, not drop the writes.
inline at::Tensor flatten_positions(const at::Tensor& t, bool channels_last) {
  const int64_t positions = t.numel() / std::max<int64_t>(t.size(0) * t.size(1), 1);
  return channels_last ? t.movedim(1, -1).view({t.size(0), positions, t.size(1)})
                       : t.view({t.size(0), t.size(1), positions});
}

// Channels-last: cols[t * row_pitch + ((kd, kh, kw), c)] for output pixels [pixel_begin, pixel_end), t = pixel -
// pixel_begin; a row's values past the kernel volume x C_in/groups are left as they are. `x_image` points at one image
// [D, H, W, C_in]; the group's channels start at group * C_in/groups. Only the rows of taps (kd, kh) numbered
// [tap_row_begin, tap_row_end) in (kd, kh) order, where given: each pixel's row then starts at that first tap row.
template <typename scalar_t, typename acc_t>
void im2col_nhwc(const ConvGeometry& g, const scalar_t* x_image, int64_t group, int64_t pixel_begin,
                 int64_t pixel_end, acc_t* cols, int64_t row_pitch, int64_t tap_row_begin = 0,
                 int64_t tap_row_end = -1) {
  if (tap_row_end < 0) tap_row_end = g.kernel[0] * g.kernel[1];
  const int64_t in_h = g.conv_in_sizes[1], in_w = g.conv_in_sizes[2];
  const int64_t out_h = g.conv_out_sizes[1], out_w = g.conv_out_sizes[2];
  const int64_t channels = g.conv_in_channels_per_group(), kernel_w = g.kernel[2];
  const scalar_t* x_group = x_image + group * channels;
  // With one group and no dilation along W, a row of taps inside the input reads kernel_w consecutive pixels, whose
  // channels are one contiguous run: copied at once (a stem's 3 channels per tap made each copy too short to pay).
  const bool whole_tap_rows = g.groups == 1 && g.dilation[2] == 1;
  for (int64_t pixel = pixel_begin; pixel < pixel_end; ++pixel) {
    acc_t* dst = cols + (pixel - pixel_begin) * row_pitch;
    const int64_t ow = pixel % out_w, oh = (pixel / out_w) % out_h, od = pixel / (out_w * out_h);
    const int64_t iw_first = g.tap_position(2, ow, 0);
    const bool row_inside = whole_tap_rows && iw_first >= 0 && iw_first + kernel_w <= in_w;
    for (int64_t tap_row = tap_row_begin; tap_row < tap_row_end; ++tap_row) {
      const int64_t id = g.tap_source(0, od, tap_row / g.kernel[1]), ih = g.tap_source(1, oh, tap_row % g.kernel[1]);
      if (row_inside && id >= 0 && ih >= 0) {
        at::vec::convert(x_group + ((id * in_h + ih) * in_w + iw_first) * g.conv_in_channels, dst, kernel_w * channels);
        dst += kernel_w * channels;
        continue;
      }
      for (int64_t kw = 0; kw < kernel_w; ++kw, dst += channels) {
        const int64_t iw = g.tap_source(2, ow, kw);
        if (id < 0 || ih < 0 || iw < 0) {
          std::fill_n(dst, channels, acc_t(0));
        } else {
          at::vec::convert(x_group + ((id * in_h + ih) * in_w + iw) * g.conv_in_channels, dst, channels);
        }
      }
    }
  }
}

// The sources of a channels-last im2col tile, which every group of a grouped conv shares: for each output pixel of
// [pixel_begin, pixel_end) and each tap (kd, kh, kw), in cols' order, the offset of the tap's input pixel in the
// image, ((id * H + ih) * W + iw) * C_in, or -1 where the tap reads zero padding; `taps` entries per pixel.
inline void im2col_sources_nhwc(const ConvGeometry& g, int64_t pixel_begin, int64_t pixel_end,
                                std::vector<int64_t>& sources) {
  const int64_t in_h = g.conv_in_sizes[1], in_w = g.conv_in_sizes[2];
  const int64_t out_h = g.conv_out_sizes[1], out_w = g.conv_out_sizes[2];
  sources.resize((pixel_end - pixel_begin) * g.kernel_volume());
  int64_t* source = sources.data();
  for (int64_t pixel = pixel_begin; pixel < pixel_end; ++pixel) {
    const int64_t ow = pixel % out_w, oh = (pixel / out_w) % out_h, od = pixel / (out_w * out_h);
    for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
      const int64_t id = g.tap_source(0, od, kd);
      for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
        const int64_t ih = g.tap_source(1, oh, kh);
        for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
          const int64_t iw = g.tap_source(2, ow, kw);
          *source++ = id < 0 || ih < 0 || iw < 0 ? -1 : ((id * in_h + ih) * in_w + iw) * g.conv_in_channels;
        }
      }
    }
  }
}

// im2col_nhwc's columns of one group from the shared sources: for each of `pixels` pixels, taps [tap_begin,
// tap_end) of its `taps` sources, each the group's `channels` values (x_group: the image's first channel of the group)
// or zeros, one pixel's values per row of cols, row_pitch apart.
template <typename scalar_t, typename acc_t>
void im2col_nhwc_gather(const int64_t* sources, int64_t pixels, int64_t taps, int64_t tap_begin, int64_t tap_end,
                        const scalar_t* x_group, int64_t channels, acc_t* cols, int64_t row_pitch) {
  for (int64_t t = 0; t < pixels; ++t) {
    acc_t* dst = cols + t * row_pitch;
    const int64_t* pixel_sources = sources + t * taps;
    for (int64_t tap = tap_begin; tap < tap_end; ++tap, dst += channels) {
      const int64_t source = pixel_sources[tap];
      if (source < 0) {
        std::fill_n(dst, channels, acc_t(0));
      } else {
        const scalar_t* src = x_group + source;
        for (int64_t c = 0; c < channels; ++c) dst[c] = static_cast<acc_t>(src[c]);
      }
    }
  }
}

// out = a @ b (+ bias broadcast to out's shape), written into a strided view of the output.
// The product runs in a's dtype (the accumulation type); a reduced-precision `out` receives a rounded copy.
inline void matmul_into(at::Tensor out, const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias) {
  if (out.scalar_type() == a.scalar_type()) {
    if (bias.defined()) {
      at::addmm_out(out, bias.expand(out.sizes()), a, b);
    } else {
      at::mm_out(out, a, b);
    }
  } else {
    out.copy_(bias.defined() ? at::addmm(bias.expand(out.sizes()), a, b) : at::mm(a, b));
  }
}

// A tensor over a raw buffer of the accumulation type (the column buffers).
template <typename acc_t>
at::Tensor wrap_buffer(acc_t* data, at::IntArrayRef sizes) {
  return at::from_blob(data, sizes, at::TensorOptions().dtype(c10::CppTypeToScalarType<acc_t>::value));
}

}  // namespace fastpad::cpu
