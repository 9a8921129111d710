// fastpad::conv_transpose on CPU: scatter of x[o] * w[r] to p = o*s - crop_lo + r*d, kept where 0 <= p < out_size
// (padding_mode zeros) or folded onto the position the mode reads p from (the adjoint of conv).
// Layout: contiguous N,C,spatial or channels_last; the output keeps the input's memory format.
// The crop is folded into col2im: positions outside the output are never written, no full-size output exists.
// kernel_paths.h's choose_conv_transpose_path picks the kernel: torch's own where its crop expresses the problem; the
// direct kernels of depthwise.cpp; the convs its stride phases are on the blocked kernels (cpu/blocked_conv.h), in
// another mode than zeros over the full output, then folded (fold_padding);
// for NCHW problems with enough channels and positions, the adjoint of conv's tap GEMMs over phase planes; else a
// GEMM and col2im (with a row of columns per x position where x has few).
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <optional>
#include <type_traits>
#include <vector>

#include "conv_params.h"
#include "cpu/blocked_conv.h"
#include "cpu/col2im_vectors.h"
#include "cpu/depthwise.h"
#include "cpu/gemm_tiles.h"
#include "cpu/huge_pages.h"
#include "cpu/phase_planes.h"
#include "cpu/reduction_tiles.h"
#include "cpu/row_ops.h"
#include "cpu/torch_conv.h"
#include "kernel_paths.h"

namespace fastpad::cpu {
namespace {

// The most a reduced-precision output's float accumulator holds at once (at least one image).
constexpr int64_t kAccumulatorBytes = 16 * 1024 * 1024;
// Channels-last col2im: the fewest y values a thread adds into (fewer run on one thread).
constexpr int64_t kCol2imMinFloatsPerThread = 4096;

// The channels-last GEMM's weight, [groups, x channels per group, pitch]: each x channel's row holds its taps in turn,
// each tap's y channels of the group together, in the accumulation type, zero from spread to pitch. One pass over the
// weight's own strides, parallel over rows: torch's copy into the padded rows took a fifth of a batch-1 239 -> 150 k5
// input gradient over 9 x 9 (weight 3.6 MB, the GEMM 73 M multiply-adds).
template <typename scalar_t>
at::Tensor tap_major_weight(const ConvGeometry& g, const at::Tensor& weight, int64_t pitch) {
  using acc_t = acc_type<scalar_t>;
  const int64_t rows = weight.size(0), y_per_group = g.conv_in_channels_per_group(), taps = g.kernel_volume();
  std::vector<int64_t> tap_offsets(taps);  // of tap (kd, kh, kw) in the weight, row-major over its spatial dims
  for (int64_t tap = 0; tap < taps; ++tap) {
    int64_t rest = tap;
    for (int64_t dim = weight.dim() - 1; dim >= 2; --dim) {
      tap_offsets[tap] += rest % weight.size(dim) * weight.stride(dim);
      rest /= weight.size(dim);
    }
  }
  const int64_t row_stride = weight.stride(0), channel_stride = weight.stride(1);
  // A channels-last weight whose rows are whole vectors already holds that layout: a view, no copy.
  bool tap_major = std::is_same_v<scalar_t, acc_t> && channel_stride == 1 && row_stride == pitch;
  for (int64_t tap = 0; tap < taps; ++tap) tap_major = tap_major && tap_offsets[tap] == tap * y_per_group;
  if (tap_major) return weight.as_strided({g.groups, rows / g.groups, pitch}, {rows / g.groups * pitch, pitch, 1});
  const auto acc_dtype = c10::CppTypeToScalarType<acc_t>::value;
  at::Tensor packed = at::empty({g.groups, rows / g.groups, pitch}, weight.options().dtype(acc_dtype));
  const scalar_t* from = weight.const_data_ptr<scalar_t>();
  acc_t* to = packed.mutable_data_ptr<acc_t>();
  at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const scalar_t* source = from + row * row_stride;
      acc_t* dest = to + row * pitch;
      for (int64_t tap = 0; tap < taps; ++tap) {
        const scalar_t* source_tap = source + tap_offsets[tap];
        acc_t* dest_tap = dest + tap * y_per_group;
        if (channel_stride == 1) {  // a channels-last weight: each tap's channels in a run
          at::vec::convert(source_tap, dest_tap, y_per_group);
        } else {
          for (int64_t c = 0; c < y_per_group; ++c) dest_tap[c] = static_cast<acc_t>(source_tap[c * channel_stride]);
        }
      }
      std::fill(dest + taps * y_per_group, dest + pitch, acc_t(0));
    }
  });
  return packed;
}

// x is on the geometry's conv_out side and y on its conv_in side (see ConvGeometry).
// Per (group, tile of x positions): cols = W^T x (one GEMM), then col2im adds cols into y. A tile is part of one image,
// or, for images of few x positions, a run of whole images (gemm_tiles.h's images_per_shared_gemm), whose GEMM reads
// the group's weights once for all of them; the runs are evened out between the threads (images_per_even_run).
// NCHW: cols[(c, kd, kh, kw), t]; channels-last: cols[t, (kd, kh, kw), c]; t runs over the tile's images in turn.
// tiles: the GEMM on cpu/reduction_tiles.h's register tiles (float accumulation), or null for torch's GEMM. The tiles
// take whole vectors along c's rows: channels-last pads the weight's and cols' rows (spread) with zero columns,
// NCHW copies x's rows (t) into a zero-padded buffer; the padded columns of cols are never read.
template <typename scalar_t>
void transpose_gemm(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& weight, at::Tensor& y_acc,
                    bool channels_last, ReductionTilesKernel tiles, Col2imVectorsKernel col2im_vectors = nullptr) {
  using acc_t = acc_type<scalar_t>;
  const auto acc_dtype = c10::CppTypeToScalarType<acc_t>::value;
  TORCH_INTERNAL_ASSERT(!tiles || (std::is_same_v<acc_t, float>), "fastpad: the reduction tiles accumulate in float");
  TORCH_INTERNAL_ASSERT(!col2im_vectors || (std::is_same_v<acc_t, float>), "fastpad: col2im_vectors adds in float");
  const int64_t groups = g.groups, x_per_group = g.conv_out_channels_per_group(),
                y_per_group = g.conv_in_channels_per_group(), taps = g.kernel_volume();
  const int64_t spread = y_per_group * taps;
  // Channels-last: the pitch of cols' rows (and of the weight's rows on the tiles).
  const int64_t spread_pitch = tiles && channels_last ? reduction_tiles_columns(spread) : spread;
  const int64_t y_h = g.conv_in_sizes[1], y_w = g.conv_in_sizes[2];
  const int64_t x_h = g.conv_out_sizes[1], x_w = g.conv_out_sizes[2], x_volume = g.conv_out_volume();
  // Channels-last: [groups, x_per_group, spread_pitch] (taps, then y channels); NCHW: [groups, x_per_group, spread]
  // (y channels, then taps), the weight's own order.
  const at::Tensor w_acc = channels_last ? tap_major_weight<scalar_t>(g, weight, spread_pitch)
                                         : weight.to(acc_dtype).contiguous().view({groups, x_per_group, spread});
  const auto x_flat = flatten_positions(x, channels_last);
  const TilePlan plan(g, channels_last, spread_pitch * static_cast<int64_t>(sizeof(acc_t)));
  // Whole images per tile where their positions fit the column buffer (then plan.tiles == 1: no two tiles write the
  // same image of y).
  const int64_t threads = at::get_num_threads();
  const int64_t buffer_capacity = kColumnBufferBytes / (spread_pitch * static_cast<int64_t>(sizeof(acc_t)));
  const int64_t images_per_tile =
      images_per_even_run(std::min(images_per_shared_gemm(x_volume, g.batch, groups, threads),
                                   std::max<int64_t>(buffer_capacity / std::max<int64_t>(x_volume, 1), 1)),
                          g.batch, groups, threads);
  TORCH_INTERNAL_ASSERT(images_per_tile == 1 || plan.tiles == 1);
  const int64_t image_tiles = (g.batch + images_per_tile - 1) / images_per_tile;
  const int64_t max_columns = images_per_tile * plan.buffer_positions();
  // NCHW: the pitch of cols' rows and of the gathered x's (whole vectors on the tiles).
  const auto column_pitch = [&](int64_t columns) {
    return tiles && !channels_last ? reduction_tiles_columns(columns) : columns;
  };
  acc_t* y_data = y_acc.mutable_data_ptr<acc_t>();
  // NCHW: the whole x rows on col2im_vectors where it takes them (col2im_vectors_take); its plan: the lanes each
  // kernel column of a whole x row reaches in each vector of a y row, and the terms outside the y row that the
  // padding mode folds back in (RowScatter's). Otherwise where each kernel column's whole x rows land in a y row
  // (RowScatter), the same for every tile, channel and row.
  const Col2imVectorsKernel vector_kernel =
      !channels_last && col2im_vectors_take(x_w, g.stride[2]) ? col2im_vectors : nullptr;
  std::vector<RowScatter> whole_rows;
  for (int64_t kw = 0; !channels_last && kw < g.kernel[2]; ++kw) {
    whole_rows.emplace_back(y_w, g.tap_position(2, 0, kw), g.stride[2], x_w, g.mode);
  }
  Col2imVectorPlan vector_plan;
  if (vector_kernel) {
    vector_plan = col2im_vector_plan(y_w, x_w, g.tap_position(2, 0, 0), g.stride[2], g.dilation[2], g.kernel[2]);
    for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
      whole_rows[kw].for_each_fold([&](int64_t ow, int64_t p) { vector_plan.folds.push_back({kw, ow, p}); });
    }
  }
  // Channels-last: the y column of x column ow's tap kw (-1: none).
  const std::vector<int64_t> w_sources = channels_last ? tap_columns(g, x_w) : std::vector<int64_t>();
  // f(od, oh, ow_begin, ow_end, first_pixel) for each x row's part in the pixels [pixel_begin, pixel_begin + count)
  // of an image (first_pixel: the index of (od, oh, ow_begin) among them); both layouts' col2im walk tiles this way.
  const auto for_each_x_row = [&](int64_t pixel_begin, int64_t count, auto&& f) {
    for (int64_t pixel = pixel_begin; pixel < pixel_begin + count;) {
      const int64_t row = pixel / x_w, ow = pixel % x_w;
      const int64_t end = std::min(x_w, ow + pixel_begin + count - pixel);
      f(row / x_h, row % x_h, ow, end, pixel - pixel_begin);
      pixel += end - ow;
    }
  };
  // The y rows (flattened d, h) that the taps of those pixels write: [first, end), empty where none does.
  const auto tile_y_rows = [&](int64_t pixel_begin, int64_t count) {
    int64_t first = g.conv_in_sizes[0] * y_h, end = 0;
    for_each_x_row(pixel_begin, count, [&](int64_t od, int64_t oh, int64_t, int64_t, int64_t) {
      for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
        const int64_t pd = g.tap_source(0, od, kd);
        for (int64_t kh = 0; kh < g.kernel[1] && pd >= 0; ++kh) {
          const int64_t ph = g.tap_source(1, oh, kh);
          if (ph < 0) continue;
          first = std::min(first, pd * y_h + ph);
          end = std::max(end, pd * y_h + ph + 1);
        }
      }
    });
    return std::pair<int64_t, int64_t>(first, end);
  };

  // c = a b on the tiles, in tasks of kTaskRows rows x kTaskColumns columns split between the threads (serial inside
  // a parallel region): a transposed conv to 3 y channels (3 rows in NCHW) needs its columns split.
  const auto tiles_product = [&](ReductionTiles t) {
    constexpr int64_t kTaskRows = 48, kTaskColumns = 192;  // whole tiles on AVX2 (4 x 24) and AVX-512 (6 x 64)
    t.overwrite = true;
    const int64_t row_tasks = (t.rows + kTaskRows - 1) / kTaskRows;
    const int64_t column_tasks = (t.columns + kTaskColumns - 1) / kTaskColumns;
    at::parallel_for(0, row_tasks * column_tasks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t task = begin; task < end; ++task) {
        const int64_t r0 = task / column_tasks * kTaskRows, c0 = task % column_tasks * kTaskColumns;
        ReductionTiles part = t;
        part.a += r0 * t.a_row_stride;
        part.b += c0;
        part.c += r0 * t.c_row_stride + c0;
        part.rows = std::min(kTaskRows, t.rows - r0);
        part.columns = std::min(kTaskColumns, t.columns - c0);
        tiles(part);
      }
    });
  };

  // Images [n0, n0 + images), or one image n0 (images == 1) and its tile `tile`. The GEMM's operands are addressed
  // through raw pointers: a tile of a small grouped conv is a few microseconds of work, and the ATen views and copies
  // it once made per tile cost more than that.
  const scalar_t* x_data = x.const_data_ptr<scalar_t>();
  const acc_t* w_data = w_acc.const_data_ptr<acc_t>();
  const auto run_tile = [&](int64_t n0, int64_t images, int64_t group, int64_t tile, std::vector<acc_t>& cols,
                            std::vector<acc_t>& x_gathered) {
    const auto [pixel_begin, tile_pixels] = plan.tile(tile);
    const int64_t columns = images * tile_pixels;  // GEMM positions
    const int64_t pitch = column_pitch(columns);  // NCHW: of cols' rows
    const acc_t* w_group = w_data + group * x_per_group * spread_pitch;  // [x_per_group, spread_pitch]
    if (channels_last) {
      // [N * positions, C] rows are contiguous across images: the tile's rows, the group's channels.
      const int64_t first_row = n0 * x_volume + pixel_begin;
      const auto x_tile = [&] {
        return x_flat.view({g.batch * x_volume, g.conv_out_channels})
            .narrow(0, first_row, columns)
            .narrow(1, group * x_per_group, x_per_group)
            .to(acc_dtype);
      };
      if constexpr (std::is_same_v<acc_t, float>) {
        if (tiles) {
          // float32 x is read in place; a reduced-precision x's tile is converted to float32 first.
          at::Tensor converted;
          const float* a;
          int64_t a_row_stride, a_column_stride;
          if constexpr (std::is_same_v<scalar_t, float>) {
            a = x_data + first_row * g.conv_out_channels + group * x_per_group;
            a_row_stride = g.conv_out_channels;
            a_column_stride = 1;
          } else {
            converted = x_tile();
            a = converted.const_data_ptr<float>();
            a_row_stride = converted.stride(0);
            a_column_stride = converted.stride(1);
          }
          tiles_product({a, a_row_stride, a_column_stride, w_group, spread_pitch, cols.data(), spread_pitch, columns,
                         spread_pitch, x_per_group});
        }
      }
      if (!tiles) {
        auto cols_view = wrap_buffer(cols.data(), {columns, spread});
        at::mm_out(cols_view, x_tile(), w_acc[group]);
      }
    } else {
      // The group's channel d of image n0 + i at x_group + i * image_stride + d * x_volume.
      const scalar_t* x_group = x_data + (n0 * g.conv_out_channels + group * x_per_group) * x_volume;
      const int64_t image_stride = g.conv_out_channels * x_volume;
      // The tiles read x's columns in place where they can (float32, one image: whole multiples of the padding, so
      // that in_place + gathered_pitch is pitch); the others (all of them where images sit side by side, or for
      // torch's GEMM) are copied into x_gathered, as rows of gathered_pitch columns, zero-padded.
      int64_t in_place = 0;
      if constexpr (std::is_same_v<scalar_t, float>) {
        if (tiles && images == 1) in_place = columns / kReductionTilesPaddedMultiple * kReductionTilesPaddedMultiple;
      }
      const int64_t gathered = columns - in_place, gathered_pitch = column_pitch(gathered);
      const bool gathers = images > 1 || (tiles && gathered > 0);
      if (gathers) {
        const int64_t run = tile_pixels - in_place;  // each image's columns
        for (int64_t d = 0; d < x_per_group; ++d) {
          acc_t* row = x_gathered.data() + d * gathered_pitch;
          for (int64_t i = 0; i < images; ++i) {
            at::vec::convert(x_group + i * image_stride + d * x_volume + pixel_begin + in_place, row + i * run, run);
          }
          std::fill(row + gathered, row + gathered_pitch, acc_t(0));
        }
      }
      if constexpr (std::is_same_v<acc_t, float>) {
        if (tiles) {  // rows (c, taps), depth x's channels: a[r, d] = w[d, r]
          if constexpr (std::is_same_v<scalar_t, float>) {
            if (in_place > 0) {
              tiles_product({w_group, 1, spread, x_group + pixel_begin, x_volume, cols.data(), pitch, spread, in_place,
                             x_per_group});
            }
          }
          if (gathered > 0) {
            tiles_product({w_group, 1, spread, x_gathered.data(), gathered_pitch, cols.data() + in_place, pitch, spread,
                           gathered_pitch, x_per_group});
          }
        }
      }
      if (!tiles) {
        const at::Tensor x_tile =
            gathers ? wrap_buffer(x_gathered.data(), {x_per_group, gathered_pitch})
                    : x_flat[n0].narrow(0, group * x_per_group, x_per_group).narrow(1, pixel_begin, tile_pixels)
                          .to(acc_dtype);
        auto cols_view = wrap_buffer(cols.data(), {spread, columns});
        at::mm_out(cols_view, w_acc[group].t(), x_tile);
      }
    }
    // NCHW on vector_kernel: the whole x rows of the tile and the y rows each kernel row (kd, kh) adds them onto, the
    // same for every image and channel; the loop below adds the parts of x rows the tile splits.
    std::vector<int64_t> y_offsets, src_offsets;
    bool split_rows = !vector_kernel;
    for (int64_t kd = 0; vector_kernel && kd < g.kernel[0]; ++kd) {
      for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
        for_each_x_row(pixel_begin, tile_pixels, [&](int64_t od, int64_t oh, int64_t ow_begin, int64_t ow_end,
                                                     int64_t first_pixel) {
          const int64_t pd = g.tap_source(0, od, kd), ph = g.tap_source(1, oh, kh);
          if (pd < 0 || ph < 0) return;
          if (ow_end - ow_begin < x_w) {
            split_rows = true;
            return;
          }
          y_offsets.push_back((pd * y_h + ph) * y_w);
          src_offsets.push_back((kd * g.kernel[1] + kh) * g.kernel[2] * pitch + first_pixel);
        });
      }
    }
    for (int64_t image = 0; image < images; ++image) {
      const int64_t n = n0 + image, first_column = image * tile_pixels;
      if (channels_last) {
        acc_t* y_image = y_data + n * g.conv_in_volume() * g.conv_in_channels + group * y_per_group;
        const acc_t* cols_image = cols.data() + first_column * spread_pitch;  // the tile's first pixel's row
        // Each thread owns a run of the y positions the tile writes (flattened d, h, w) and adds there every tap that
        // lands in it, whole channel rows at a time: no two threads write one position. (Split by channel, each
        // thread's adds were a fraction of a row, and the tap arithmetic per add cost more than the add.)
        const auto [first_y_row, end_y_row] = tile_y_rows(pixel_begin, tile_pixels);
        if (first_y_row >= end_y_row) continue;
        const int64_t grain = std::max<int64_t>(1, kCol2imMinFloatsPerThread / y_per_group);
        at::parallel_for(first_y_row * y_w, end_y_row * y_w, grain, [&](int64_t q_begin, int64_t q_end) {
          for_each_x_row(pixel_begin, tile_pixels, [&](int64_t od, int64_t oh, int64_t ow_begin, int64_t ow_end,
                                                       int64_t first_pixel) {
            for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
              const int64_t pd = g.tap_source(0, od, kd);
              for (int64_t kh = 0; kh < g.kernel[1] && pd >= 0; ++kh) {
                const int64_t ph = g.tap_source(1, oh, kh);
                const int64_t row_q = (pd * y_h + ph) * y_w;
                if (ph < 0 || row_q + y_w <= q_begin || row_q >= q_end) continue;
                // This thread's part of the y row: w in [w_lo, w_hi).
                const int64_t w_lo = std::max<int64_t>(q_begin - row_q, 0), w_hi = std::min(q_end - row_q, y_w);
                acc_t* y_row = y_image + row_q * g.conv_in_channels;
                const int64_t first_tap = (kd * g.kernel[1] + kh) * g.kernel[2];
                const auto add_taps = [&](auto add) {
                  for (int64_t ow = ow_begin; ow < ow_end; ++ow) {
                    const acc_t* src =
                        cols_image + (first_pixel + ow - ow_begin) * spread_pitch + first_tap * y_per_group;
                    for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
                      const int64_t pw = w_sources[ow * g.kernel[2] + kw];
                      if (pw < w_lo || pw >= w_hi) continue;  // -1 (a zero) is below w_lo
                      add(y_row + pw * g.conv_in_channels, src + kw * y_per_group);
                    }
                  }
                };
                // Fewer y channels per group than a vector: adds of a length the compiler knows, unrolled (axpy's
                // scalar loop over a stem's 3 channels was most of the col2im's time).
                const bool fixed =
                    y_per_group < at::vec::Vectorized<acc_t>::size() && with_fixed_run(y_per_group, [&](auto n) {
                      add_taps([](acc_t* y, const acc_t* x) {
                        for (int64_t c = 0; c < decltype(n)::value; ++c) y[c] += x[c];
                      });
                    });
                if (!fixed) add_taps([&](acc_t* y, const acc_t* x) { axpy(y, acc_t(1), x, y_per_group); });
              }
            }
          });
        });
      } else {
        acc_t* y_group = y_data + (n * g.conv_in_channels + group * y_per_group) * g.conv_in_volume();
        at::parallel_for(0, y_per_group, 1, [&](int64_t c_begin, int64_t c_end) {
          for (int64_t c = c_begin; c < c_end; ++c) {
            acc_t* plane = y_group + c * g.conv_in_volume();
            const acc_t* src = cols.data() + c * taps * pitch + first_column;
            if constexpr (std::is_same_v<acc_t, float>) {
              if (vector_kernel) {
                vector_kernel({&vector_plan, src, pitch, plane, y_offsets.data(), src_offsets.data(),
                               static_cast<int64_t>(y_offsets.size())});
              }
            }
            for (int64_t kd = 0; split_rows && kd < g.kernel[0]; ++kd) {
              for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
                for (int64_t kw = 0; kw < g.kernel[2]; ++kw, src += pitch) {
                  // The tile's pixels, row by row: whole rows, or the part of a row the tile holds.
                  for_each_x_row(pixel_begin, tile_pixels, [&](int64_t od, int64_t oh, int64_t ow_begin,
                                                               int64_t ow_end, int64_t first_pixel) {
                    const int64_t pd = g.tap_source(0, od, kd), ph = g.tap_source(1, oh, kh);
                    if (pd < 0 || ph < 0) return;
                    acc_t* y_row = plane + (pd * y_h + ph) * y_w;
                    const acc_t* x_row = src + first_pixel;
                    const int64_t count = ow_end - ow_begin;
                    if (count == x_w) {
                      if (!vector_kernel) whole_rows[kw].add(y_row, x_row);
                    } else {
                      RowScatter(y_w, g.tap_position(2, ow_begin, kw), g.stride[2], count, g.mode).add(y_row, x_row);
                    }
                  });
                }
              }
            }
          }
        });
      }
    }
  };

  // Items: (run of images, group); each runs its tiles in turn and owns its images' slices of y.
  const int64_t items = image_tiles * groups;
  const int64_t cols_size = channels_last ? spread_pitch * max_columns : spread * column_pitch(max_columns);
  // NCHW gathers every column of x where images sit side by side, or where the tiles read x converted to float; a
  // float32 image's tiles read all but its last few columns in place (so the buffer does not grow with x's channels).
  const bool gathers_all = images_per_tile > 1 || (tiles && !std::is_same_v<scalar_t, float>);
  const int64_t gathered_size = channels_last || !(gathers_all || tiles)
                                    ? 0
                                    : x_per_group * (gathers_all ? column_pitch(max_columns)
                                                                 : kReductionTilesPaddedMultiple);
  const auto run_item = [&](int64_t item, std::vector<acc_t>& cols, std::vector<acc_t>& x_gathered) {
    const int64_t n0 = (item / groups) * images_per_tile, group = item % groups;
    const int64_t images = std::min(images_per_tile, g.batch - n0);
    for (int64_t tile = 0; tile < plan.tiles; ++tile) run_tile(n0, images, group, tile, cols, x_gathered);
  };
  if (items >= threads) {
    // Enough independent slices of y to keep every thread busy.
    at::parallel_for(0, items, 1, [&](int64_t begin, int64_t end) {
      std::vector<acc_t> cols(cols_size), x_gathered(gathered_size);
      for (int64_t item = begin; item < end; ++item) run_item(item, cols, x_gathered);
    });
  } else {
    // Few slices: run them in turn, with the GEMM and col2im each using every thread.
    std::vector<acc_t> cols(cols_size), x_gathered(gathered_size);
    for (int64_t item = 0; item < items; ++item) run_item(item, cols, x_gathered);
  }
}

// NCHW with few x positions (kernel_paths.h's cpu_gemm_col2im_rows): cols with a row per x position,
// cols[t, (c, taps)] = x^T W over every image's positions at once, the weight read in its own order with vectors along
// y channels x taps, where the NCHW GEMM above puts its vectors along x's few positions (a tile of 10 of them per pass
// over the whole weight, for rows of cols of 10 829). Per group and run of y channels (a thread's own slice of y): the
// run's columns of the GEMM, then their col2im, while they are in cache; the weight is read once in all.
void transpose_gemm_rows(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& weight, at::Tensor& y_acc,
                         ReductionTilesKernel tiles) {
  TORCH_INTERNAL_ASSERT(y_acc.scalar_type() == at::kFloat && y_acc.is_contiguous());
  const int64_t groups = g.groups, x_per_group = g.conv_out_channels_per_group(),
                y_per_group = g.conv_in_channels_per_group(), taps = g.kernel_volume();
  const int64_t spread = y_per_group * taps, x_volume = g.conv_out_volume(), positions = g.batch * x_volume;
  const int64_t y_w = g.conv_in_sizes[2], x_h = g.conv_out_sizes[1], x_w = g.conv_out_sizes[2];
  const at::Tensor w = weight.to(at::kFloat).contiguous().view({groups, x_per_group, spread});
  // a[t, d] = x's channel d at position t (over the batch), each group's rows of its channels together.
  const at::Tensor x_rows =
      x.to(at::kFloat).reshape({g.batch, groups, x_per_group, x_volume}).permute({1, 0, 3, 2}).contiguous();
  // Runs of y channels whose columns of cols for every position fit kColumnBufferBytes, and kRowsRunsPerThread per
  // thread over the groups (a batch-1 420 -> 221 input gradient in 3 runs on 2 threads spent as long waiting as
  // multiplying) where each keeps kCol2imRowsRunMinColumns columns or more (two columns of the tiles' 4 vectors), a
  // whole number per thread where one group has several, evened out.
  constexpr int64_t kRowsRunsPerThread = 4;
  const int64_t threads = at::get_num_threads();
  const int64_t run_bytes = positions * taps * static_cast<int64_t>(sizeof(float));
  int64_t parallel_runs =
      std::min(ceil_div(kRowsRunsPerThread * threads, groups), spread / kCol2imRowsRunMinColumns);
  if (groups == 1 && parallel_runs > threads) parallel_runs -= parallel_runs % threads;
  const int64_t wanted_runs = std::max(parallel_runs, ceil_div(y_per_group * run_bytes, kColumnBufferBytes));
  const int64_t run_channels = ceil_div(y_per_group, std::clamp<int64_t>(wanted_runs, 1, y_per_group));
  const int64_t runs = ceil_div(y_per_group, run_channels);
  const std::vector<int64_t> w_sources = tap_columns(g, x_w);  // the y column of x column ow's tap kw (-1: none)
  const float* w_data = w.const_data_ptr<float>();
  const float* x_data = x_rows.const_data_ptr<float>();
  float* y_data = y_acc.mutable_data_ptr<float>();
  at::parallel_for(0, groups * runs, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> cols(positions * run_channels * taps);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t group = item / runs, c0 = item % runs * run_channels;
      const int64_t channels = std::min(run_channels, y_per_group - c0), columns = channels * taps;
      ReductionTiles product{x_data + group * positions * x_per_group, x_per_group, 1,
                             w_data + group * x_per_group * spread + c0 * taps, spread, cols.data(), columns,
                             positions, columns, x_per_group};
      product.overwrite = true;
      tiles(product);
      for (int64_t n = 0; n < g.batch; ++n) {
        for (int64_t c = 0; c < channels; ++c) {
          float* plane = y_data + (n * g.conv_in_channels + group * y_per_group + c0 + c) * g.conv_in_volume();
          const float* image_cols = cols.data() + n * x_volume * columns + c * taps;  // position 0's taps of c
          for (int64_t row = 0; row < g.conv_out_sizes[0] * x_h; ++row) {
            for_each_tap_row(g, row / x_h, row % x_h, [&](int64_t kd, int64_t kh, int64_t y_row_index) {
              float* y_row = plane + y_row_index * y_w;
              const float* src = image_cols + row * x_w * columns + (kd * g.kernel[1] + kh) * g.kernel[2];
              const int64_t* sources = w_sources.data();
              for (int64_t ow = 0; ow < x_w; ++ow, src += columns, sources += g.kernel[2]) {
                for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
                  if (sources[kw] >= 0) y_row[sources[kw]] += src[kw];
                }
              }
            });
          }
        }
      }
    }
  });
}

// NCHW with enough channels on both sides, the adjoint of conv.cpp's tap GEMMs, per (image, group): for each band
// of x rows, planes_tap[Cg_y, band] += W_tap^T[Cg_y, Cg_x] @ x_band[Cg_x, band] for every (kh, kw) tap into
// zeroed phase planes, which scatter_add then folds into y. Bands of one y plane share halo rows, so one thread owns
// each (image, group, run of y channels). x_band's discarded columns are zero, so they add exactly nothing as long as
// every weight is finite; the caller checks that.
template <typename scalar_t>
void phase_plane_transpose_nchw(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& weight,
                                at::Tensor& y_acc, ReductionTilesKernel tiles) {
  using acc_t = acc_type<scalar_t>;
  const auto acc_dtype = c10::CppTypeToScalarType<acc_t>::value;
  const int64_t groups = g.groups, c_x = g.conv_out_channels_per_group(), c_y = g.conv_in_channels_per_group();
  const int64_t taps_2d = g.kernel[1] * g.kernel[2], y_slice = g.conv_in_sizes[1] * g.conv_in_sizes[2];
  const int64_t x_w = g.conv_out_sizes[2], x_slice = g.conv_out_sizes[1] * x_w;
  // [groups, Cg_y, kd * kh * kw, Cg_x]: per (y channel, tap) a row of the x channels the tap's GEMM reduces over.
  // float accumulation transposes each group's [Cg_x][Cg_y * taps] through registers (transpose_to_rows): torch's
  // copy of the permuted view read each value Cg_y x taps apart, 0.75 ms for UNet's 512 x 256 x 2 x 2 weight (2 MB),
  // 6% of its transposed conv (2-core Zen 4).
  const int64_t taps = g.kernel[0] * taps_2d;
  at::Tensor w_acc;
  if constexpr (std::is_same_v<acc_t, float>) {
    const at::Tensor w = weight.contiguous();
    w_acc = at::empty({groups, c_y, taps, c_x}, w.options().dtype(acc_dtype));
    for (int64_t group = 0; group < groups; ++group) {
      transpose_to_rows(w.const_data_ptr<scalar_t>() + group * c_x * c_y * taps, 0, c_y * taps, 1, c_y * taps, c_x,
                        w_acc.mutable_data_ptr<acc_t>() + group * c_y * taps * c_x, c_x);
    }
  } else {
    w_acc = weight.to(acc_dtype).reshape({groups, c_x, c_y, taps}).permute({0, 2, 3, 1}).contiguous();
  }
  const acc_t* w_data = w_acc.const_data_ptr<acc_t>();
  const scalar_t* x_data = x.const_data_ptr<scalar_t>();
  acc_t* y_data = y_acc.mutable_data_ptr<acc_t>();
  const int64_t bytes_per_position = c_x * static_cast<int64_t>(sizeof(acc_t));
  const auto options = at::TensorOptions(acc_dtype);

  // One (image, group) and its y channels [cy_begin, cy_end): their phase planes, their rows of each tap's GEMM and
  // their scatter; x's band is read whole.
  const auto run_item = [&](int64_t n, int64_t group, int64_t cy_begin, int64_t cy_end) {
    const int64_t rows = cy_end - cy_begin;
    PhasePlanes<acc_t> planes(g, rows, kGemmPhasePlaneBytes, bytes_per_position);
    const int64_t band_size = planes.band_buffer_size();
    std::vector<acc_t> x_band(c_x * band_size, acc_t(0));  // discarded columns stay zero
    for (int64_t od = 0; od < g.conv_out_sizes[0]; ++od) {
      for (int64_t b = 0; b < planes.bands(); ++b) {
        const Band band = planes.band(b);
        const int64_t n_pos = planes.positions(band.rows);
        for (int64_t cx = 0; cx < c_x; ++cx) {
          acc_t* buffer = x_band.data() + cx * band_size;
          load_band(buffer,
                    x_data + ((n * g.conv_out_channels + group * c_x + cx) * g.conv_out_sizes[0] + od) * x_slice,
                    band, planes.pitch(), x_w);
          std::fill(buffer + band.rows * planes.pitch(), buffer + n_pos, acc_t(0));  // a short last band's tail
        }
        const auto x_view = at::from_blob(x_band.data(), {c_x, n_pos}, {band_size, 1}, options);
        for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
          const int64_t id = g.tap_source(0, od, kd);
          if (id < 0) continue;
          planes.zero();
          // tap (kd, tap)'s [rows, Cg_x] matrix: rows taps x Cg_x apart
          const acc_t* w_kd = w_data + ((group * c_y + cy_begin) * taps + kd * taps_2d) * c_x;
          const int64_t w_row_stride = taps * c_x;
          for (int64_t tap = 0; tap < taps_2d; ++tap) {
            if constexpr (std::is_same_v<acc_t, float>) {
              if (tiles) {  // n_pos: whole vectors of at::vec's 8 floats
                tiles({w_kd + tap * c_x, w_row_stride, 1, x_band.data(), band_size, planes.taps()[tap],
                       planes.channel_stride(), rows, n_pos, c_x});
                continue;
              }
            }
            at::from_blob(planes.taps()[tap], {rows, n_pos}, {planes.channel_stride(), 1}, options)
                .addmm_(at::from_blob(const_cast<acc_t*>(w_kd) + tap * c_x, {rows, c_x}, {w_row_stride, 1}, options),
                        x_view);
          }
          for (int64_t cy = 0; cy < rows; ++cy) {
            planes.scatter_add(
                y_data + (n * g.conv_in_channels + group * c_y + cy_begin + cy) * g.conv_in_volume() + id * y_slice,
                band, cy);
          }
        }
      }
    }
  };

  // Items: (image, group, run of y channels). Where images x groups would leave the threads idle more than a tenth of
  // the call (kMinThreadUsePercent: before, a batch-1 layer's input gradient ran on one thread, 3 images on 2 threads
  // took the time of 4), each slice's y channels are split evenly into enough runs to make the items a multiple of the
  // threads, of kMinSplitRows rows or more. Random layers' NCHW calls this splits, float32, 2 cores (Sapphire Rapids
  // class), interleaved against a thread per slice: 1.24-1.93x faster on 5 of seeds 1-4 and the suite (geomean 1.63),
  // 1.12-1.85x on 8 of seeds 5-12 (1.45), 1.70-1.96x on 4 of seeds 13-16 (held out, 1.87); AVX2 1.10-2.07x on 18 of
  // seeds 1-8 (1.58), 1.08-1.91x on 10 of seeds 9-12 (held out, 1.57). Splitting every odd count of slices ran 15
  // images 1.38x slower on AVX2 (two runs of 9 rows on its 4-row tiles, each re-reading x's band and ending in a
  // tile of one row) (benchmarks/RESULTS.md).
  constexpr int64_t kMinThreadUsePercent = 90, kMinSplitRows = 8;
  const int64_t slices = g.batch * groups, threads = at::get_num_threads();
  const bool idle = 100 * slices < kMinThreadUsePercent * ceil_div(slices, threads) * threads;
  const int64_t splits =
      idle ? std::max<int64_t>(1, std::min(threads_share_multiple(slices), c_y / kMinSplitRows)) : 1;
  at::parallel_for(0, slices * splits, 1, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t slice = item / splits, split = item % splits;
      run_item(slice / groups, slice % groups, split * c_y / splits, (split + 1) * c_y / splits);
    }
  });
}

// A [C] bias as [1, C, 1, ...] with `dims` dims, to broadcast over an output's images and positions.
at::Tensor per_channel(const at::Tensor& bias, int64_t dims) {
  std::vector<int64_t> shape(dims, 1);
  shape[1] = bias.numel();
  return bias.view(shape);
}

// A conv whose taps and outputs hold those of every conv in `outputs` (1-d or 2-d stride phases of one transposed conv:
// stride 1, the same dilation and sizes, pads and kernels that differ), each output's tap_row and tap_col set to where
// its taps sit among the covering conv's; none where an output's taps do not fall on the covering conv's (pads that
// differ by other than a multiple of the dilation) or there are no outputs.
std::optional<ConvGeometry> covering_conv(std::vector<BlockedOutput>& outputs) {
  if (outputs.empty()) return std::nullopt;
  ConvGeometry covering = outputs[0].conv;
  for (int d = 1; d < kMaxSpatial; ++d) {
    const int64_t dilation = covering.dilation[d];
    // reach: the offset of an output's last tap from its position, at most
    int64_t pad = covering.pad_lo[d], reach = (covering.kernel[d] - 1) * dilation - covering.pad_lo[d], out = 0;
    for (const BlockedOutput& o : outputs) pad = std::max(pad, o.conv.pad_lo[d]);
    for (const BlockedOutput& o : outputs) {
      const ConvGeometry& c = o.conv;
      if (c.dilation[d] != dilation || c.stride[d] != 1 || (pad - c.pad_lo[d]) % dilation != 0) return std::nullopt;
      reach = std::max(reach, (c.kernel[d] - 1) * dilation - c.pad_lo[d]);
      out = std::max(out, c.conv_out_sizes[d]);
    }
    covering.pad_lo[d] = pad;
    covering.kernel[d] = (reach + pad) / dilation + 1;
    covering.conv_out_sizes[d] = out;
    for (BlockedOutput& o : outputs) (d == 1 ? o.tap_row : o.tap_col) = (pad - o.conv.pad_lo[d]) / dilation;
  }
  return covering;
}

// The most multiply-adds per stride phase where phase_convs runs the phases side by side.
constexpr int64_t kSideBySidePhaseMaxMultiplyAdds = int64_t(1) << 23;

// y = the transposed conv of g in zeros mode as the convs its stride phases are (transpose_phase_as_conv), each on the
// blocked kernel (cpu/blocked_conv.h), reading x in place with no_planes (kernel_paths.h's
// cpu_blocked_no_planes_transpose), or, with tap_tiles (cpu_tap_tiles_transpose), on conv's tap tiles.
// At stride 1 the one phase writes y itself; with a stride, each phase writes its y positions a stride apart in place
// (a strided view of y), and a phase no tap reaches is the bias (or zero). On the phase planes in 1-d and 2-d, the
// phases share one gather of x (blocked_convs, over covering_conv).
void phase_convs(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                 at::Tensor& y, at::MemoryFormat format, BlockedKernel kernel, bool no_planes = false,
                 bool tap_tiles = false) {
  const bool channels_last = format != at::MemoryFormat::Contiguous;
  const int64_t phases = transpose_phase_count(g), spatial = y.dim() - 2;
  TORCH_INTERNAL_ASSERT(!tap_tiles || phases == 1 || channels_last,
                        "fastpad: the tap tiles write the strided y of a phase channels-last only");
  // Phase `phase`'s conv on the chosen kernel, into y_phase (y, or a strided view of it).
  const auto phase_conv = [&](const ConvGeometry& conv, int64_t phase, at::Tensor& y_phase) {
    const at::Tensor conv_weight = transpose_phase_weight(g, weight, phase);
    if (tap_tiles) {
      tap_tiles_conv(conv, x, conv_weight, bias, y_phase, channels_last, kernel == BlockedKernel::Avx512);
    } else {
      blocked_conv(conv, x, conv_weight, bias, y_phase, channels_last, kernel, no_planes);
    }
  };
  if (phases == 1) {
    phase_conv(transpose_phase_as_conv(g, 0).conv, 0, y);
    return;
  }
  // The phase's positions of y (a strided view), or, where no tap reaches them, the bias (or zero) written there.
  const auto phase_view = [&](const TransposePhase& t) {
    at::Tensor y_phase = y;
    for (int64_t dim = 0; dim < spatial; ++dim) {
      const int d = static_cast<int>(kMaxSpatial - spatial + dim);
      y_phase = y_phase.slice(2 + dim, t.y_first[d], g.conv_in_sizes[d], g.stride[d]);
    }
    if (t.conv.kernel_volume() == 0) {
      if (bias.defined()) {
        y_phase.copy_(per_channel(bias, y.dim()).expand_as(y_phase));
      } else {
        y_phase.zero_();
      }
    }
    return y_phase;
  };
  // The phases write disjoint positions of y. Where the kernels would leave threads idle inside each phase (images x
  // groups fewer than the threads, and each phase too small to split its rows among them,
  // kSideBySidePhaseMaxMultiplyAdds), the phases run side by side, a thread each, their kernels inline; otherwise in
  // turn, each kernel using every thread. Random layers' calls this takes, float32, 2 cores (Sapphire Rapids class),
  // interleaved against the phases in turn: 1.10-1.53x faster on the 3 of seeds 1-4 and the suite, 0.95-1.23x on the 3
  // of seeds 5-12, AVX2 1.01-1.47x on the 3 of seeds 1-8 (benchmarks/RESULTS.md).
  const int64_t threads = at::get_num_threads();
  const bool side_by_side = phases >= threads && g.batch * g.groups < threads &&
                            conv_multiply_adds(g) < phases * kSideBySidePhaseMaxMultiplyAdds;
  // Otherwise, on the blocked kernel's phase planes in 1-d and 2-d, the phases with taps are one blocked_convs call:
  // each band of x is gathered once for all of them, where each phase's conv gathered it again (twice at stride 2 in
  // 1-d, four times in 2-d), and one parallel region runs them all. The op alone against a gather per phase (2 cores,
  // Zen 4, interleaved, medians of 7): seeds 1-8 and the suite, 53 calls 0.69-1.04x, geomean 0.93 (HiFi-GAN's k4 s2
  // 0.88-0.91x, ResNet-50's k3 s2 input gradient 0.90-0.97x); held out (seeds 9-24) 98 calls 0.66-1.31x (the 1.31x
  // read 1.02x twice on re-runs), geomean 0.93; AVX2 32 calls 0.79-1.10x, bfloat16 39 calls 0.75-1.02x (both 0.94).
  // A first version, which also took the phases that run side by side and kept a band buffer per phase, made small
  // calls up to 1.36x slower (56 calls, geomean 0.945).
  if (!side_by_side && !tap_tiles && !no_planes && spatial <= 2) {
    std::vector<BlockedOutput> outputs;
    for (int64_t phase = 0; phase < phases; ++phase) {
      const TransposePhase t = transpose_phase_as_conv(g, phase);
      if (t.conv.conv_out_volume() == 0) continue;  // no y position has this phase
      at::Tensor y_phase = phase_view(t);
      if (t.conv.kernel_volume() > 0) outputs.push_back({t.conv, transpose_phase_weight(g, weight, phase), y_phase});
    }
    if (const auto covering = covering_conv(outputs)) {
      blocked_convs(*covering, x, outputs, bias, channels_last, kernel);
      return;
    }
  }
  const auto run_phase = [&](int64_t phase) {
    const TransposePhase t = transpose_phase_as_conv(g, phase);
    if (t.conv.conv_out_volume() == 0) return;  // no y position has this phase
    at::Tensor y_phase = phase_view(t);
    if (t.conv.kernel_volume() > 0) phase_conv(t.conv, phase, y_phase);
  };
  if (side_by_side) {
    at::parallel_for(0, phases, 1, [&](int64_t begin, int64_t end) {
      for (int64_t phase = begin; phase < end; ++phase) run_phase(phase);
    });
    return;
  }
  for (int64_t phase = 0; phase < phases; ++phase) run_phase(phase);
}

// The positions of full_y (full_transpose_geometry(g), a full transposed conv with zeros) folded into y's: y[q] is
// the sum of full_y over the positions p that g's padding mode reads from q (source_index of p - pad_lo). The map is
// a product over dims, so the folds go one dim at a time: each position outside y adds onto its source inside (in
// place: a source is never outside), then the dim narrows to y. Returns a view of full_y.
at::Tensor fold_padding(const ConvGeometry& g, at::Tensor full_y, int64_t spatial) {
  for (int64_t dim = 0; dim < spatial; ++dim) {
    const int d = static_cast<int>(kMaxSpatial - spatial + dim), tensor_dim = static_cast<int>(2 + dim);
    const int64_t pad_lo = g.pad_lo[d], size = g.conv_in_sizes[d];
    for (int64_t p = 0; p < full_y.size(tensor_dim); ++p) {
      if (p >= pad_lo && p < pad_lo + size) continue;
      full_y.select(tensor_dim, pad_lo + source_index(p - pad_lo, size, g.mode)).add_(full_y.select(tensor_dim, p));
    }
    full_y = full_y.narrow(tensor_dim, pad_lo, size);
  }
  return full_y;
}

at::Tensor conv_transpose_cpu(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                              at::IntArrayRef stride, at::IntArrayRef crop_lo, at::IntArrayRef out_size,
                              at::IntArrayRef dilation, int64_t groups, c10::string_view padding_mode) {
  // The ATen calls inside the kernel work on plain tensors: autograd is this op's own registration.
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  const ConvGeometry g =
      conv_transpose_geometry(input, weight, bias, stride, crop_lo, out_size, dilation, groups, padding_mode);
  const auto format = output_memory_format(input);
  const bool channels_last = format != at::MemoryFormat::Contiguous;
  const int64_t spatial = input.dim() - 2;
  const auto y_shape = tensor_shape(g.batch, g.conv_in_channels, g.conv_in_sizes, spatial);
  const auto y_options = input.options().memory_format(format);
  if (c10::multiply_integers(y_shape) == 0) return at::empty(y_shape, y_options);
  const auto x = input.contiguous(format);
  const auto weight_finite = [&] { return cpu_all_finite(weight); };
  const ConvTransposePath path =
      choose_conv_transpose_path(g, Backend::Cpu, channels_last, accumulator_bytes(input), is_reduced_precision(input),
                                 cpu_isa_for(input), weight_finite);
  const auto b = bias.has_value() && bias->defined() ? bias->contiguous() : at::Tensor();
  // torch's convolution allocates its own output, so the op allocates none before it.
  if (path == ConvTransposePath::CpuTorch) return torch_convolution(g, x, weight, b, /*transposed=*/true, format);
  auto y = at::empty(y_shape, y_options);
  advise_huge_pages(y);
  const bool no_planes =
      path == ConvTransposePath::CpuBlockedNoPlanesAvx2 || path == ConvTransposePath::CpuBlockedNoPlanesAvx512;
  const bool tap_tiles = path == ConvTransposePath::CpuTapTilesAvx2 || path == ConvTransposePath::CpuTapTilesAvx512;
  const bool tap_tiles_folded =
      path == ConvTransposePath::CpuTapTilesFoldedAvx2 || path == ConvTransposePath::CpuTapTilesFoldedAvx512;
  const BlockedKernel kernel =
      path == ConvTransposePath::CpuBlockedAvx512 || path == ConvTransposePath::CpuBlockedNoPlanesAvx512 ||
              path == ConvTransposePath::CpuBlockedFoldedAvx512 || path == ConvTransposePath::CpuTapTilesAvx512 ||
              path == ConvTransposePath::CpuTapTilesFoldedAvx512
          ? BlockedKernel::Avx512
          : BlockedKernel::Avx2;
  if (path == ConvTransposePath::CpuBlockedAvx2 || path == ConvTransposePath::CpuBlockedAvx512 || no_planes ||
      tap_tiles) {
    phase_convs(g, x, weight, b, y, format, kernel, no_planes, tap_tiles);
    return y;
  }
  if (path == ConvTransposePath::CpuDepthwiseChannelBlocks ||
      path == ConvTransposePath::CpuDepthwiseChannelBlocksAvx512) {
    depthwise_conv(transpose_phase_as_conv(g, 0).conv, x, transpose_phase_weight(g, weight, 0), b, y,
                   /*channels_last=*/false, /*channel_blocks=*/true,
                   path == ConvTransposePath::CpuDepthwiseChannelBlocksAvx512);
    return y;
  }
  if (path == ConvTransposePath::CpuDepthwisePhases || path == ConvTransposePath::CpuDepthwisePhasesAvx512) {
    depthwise_conv_transpose_phases(g, x, weight, b, y, /*channel_blocks=*/false,
                                    path == ConvTransposePath::CpuDepthwisePhasesAvx512);
    return y;
  }
  if (path == ConvTransposePath::CpuDepthwiseChannelBlockPhases ||
      path == ConvTransposePath::CpuDepthwiseChannelBlockPhasesAvx512) {
    depthwise_conv_transpose_phases(g, x, weight, b, y, /*channel_blocks=*/true,
                                    path == ConvTransposePath::CpuDepthwiseChannelBlockPhasesAvx512);
    return y;
  }
  const bool depthwise_folded = path == ConvTransposePath::CpuDepthwisePhasesFolded ||
                                path == ConvTransposePath::CpuDepthwisePhasesFoldedAvx512;
  if (path == ConvTransposePath::CpuBlockedFoldedAvx2 || path == ConvTransposePath::CpuBlockedFoldedAvx512 ||
      tap_tiles_folded || depthwise_folded) {
    const ConvGeometry full = full_transpose_geometry(g);
    at::Tensor full_y = at::empty(tensor_shape(g.batch, g.conv_in_channels, full.conv_in_sizes, spatial),
                                  input.options().memory_format(format));
    if (depthwise_folded) {
      depthwise_conv_transpose_phases(full, x, weight, at::Tensor(), full_y, /*channel_blocks=*/false,
                                      path == ConvTransposePath::CpuDepthwisePhasesFoldedAvx512);
    } else {
      phase_convs(full, x, weight, at::Tensor(), full_y, format, kernel, /*no_planes=*/false, tap_tiles_folded);
    }
    const at::Tensor folded = fold_padding(g, full_y, spatial);
    if (bias.has_value() && bias->defined()) {
      at::add_out(y, folded, per_channel(*bias, y.dim()));
    } else {
      y.copy_(folded);
    }
    return y;
  }

  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, input.scalar_type(), "fastpad_conv_transpose_cpu", [&] {
    using acc_t = acc_type<scalar_t>;
    const auto acc_dtype = c10::CppTypeToScalarType<acc_t>::value;
    // Scatters accumulate in the accumulation type: into y itself, or, for reduced precision, into a float buffer of
    // a few images at a time (kAccumulatorBytes, at least one image), rounded into y after each chunk of images.
    const bool in_place = acc_dtype == y.scalar_type();
    const int64_t image_bytes = y[0].numel() * static_cast<int64_t>(sizeof(acc_t));
    const int64_t chunk = in_place ? g.batch : std::clamp<int64_t>(kAccumulatorBytes / image_bytes, 1, g.batch);
    at::Tensor buffer = in_place ? y : at::empty_like(y.narrow(0, 0, chunk), y.options().dtype(acc_dtype));
    at::Tensor bias_acc;  // [1, C, 1, ...] in the accumulation type
    if (bias.has_value() && bias->defined()) bias_acc = per_channel(bias->to(acc_dtype), y.dim());
    for (int64_t n0 = 0; n0 < g.batch; n0 += chunk) {
      const int64_t images = std::min(chunk, g.batch - n0);
      ConvGeometry gc = g;
      gc.batch = images;
      const at::Tensor xc = x.narrow(0, n0, images);
      at::Tensor y_acc = buffer.narrow(0, 0, images);
      if (bias_acc.defined()) {
        y_acc.copy_(bias_acc.expand_as(y_acc));
      } else {
        y_acc.zero_();
      }
      switch (path) {
        case ConvTransposePath::CpuDepthwise:
        case ConvTransposePath::CpuGroupedExpanded:
        case ConvTransposePath::CpuGroupedPlanes:
          depthwise_conv_transpose(gc, xc, weight, y_acc, channels_last);
          break;
        case ConvTransposePath::CpuDepthwiseStridedPlanes:  // the NCHW kernel over channels-last x and y
          depthwise_conv_transpose(gc, xc, weight, y_acc, /*channels_last=*/false);
          break;
        case ConvTransposePath::CpuPhasePlanes:
          phase_plane_transpose_nchw<scalar_t>(gc, xc, weight, y_acc, nullptr);
          break;
        case ConvTransposePath::CpuPhasePlanesAvx2:
          phase_plane_transpose_nchw<scalar_t>(gc, xc, weight, y_acc, &reduction_tiles_avx2);
          break;
        case ConvTransposePath::CpuPhasePlanesAvx512:
          phase_plane_transpose_nchw<scalar_t>(gc, xc, weight, y_acc, &reduction_tiles_avx512);
          break;
        case ConvTransposePath::CpuGemmCol2im:
          transpose_gemm<scalar_t>(gc, xc, weight, y_acc, channels_last, nullptr);
          break;
        case ConvTransposePath::CpuGemmCol2imAvx2:
          transpose_gemm<scalar_t>(gc, xc, weight, y_acc, channels_last, &reduction_tiles_avx2);
          break;
        case ConvTransposePath::CpuGemmCol2imAvx512:
          transpose_gemm<scalar_t>(gc, xc, weight, y_acc, channels_last, &reduction_tiles_avx512,
                                   &col2im_vectors_avx512);
          break;
        case ConvTransposePath::CpuGemmCol2imRowsAvx2:
          transpose_gemm_rows(gc, xc, weight, y_acc, &reduction_tiles_avx2);
          break;
        case ConvTransposePath::CpuGemmCol2imRowsAvx512:
          transpose_gemm_rows(gc, xc, weight, y_acc, &reduction_tiles_avx512);
          break;
        case ConvTransposePath::CpuGemmCol2imNhwcAvx2:
        case ConvTransposePath::CpuGemmCol2imNhwcAvx512: {
          // NCHW x and y through channels-last copies (kernel_paths.h's cpu_gemm_col2im_nhwc; x has rows, so 2-3 dims)
          TORCH_INTERNAL_ASSERT(!channels_last && y.dim() >= 4);
          const auto nhwc = y.dim() == 5 ? at::MemoryFormat::ChannelsLast3d : at::MemoryFormat::ChannelsLast;
          at::Tensor y_nhwc = y_acc.contiguous(nhwc);
          transpose_gemm<scalar_t>(gc, xc.contiguous(nhwc), weight, y_nhwc, /*channels_last=*/true,
                                   path == ConvTransposePath::CpuGemmCol2imNhwcAvx512 ? &reduction_tiles_avx512
                                                                                       : &reduction_tiles_avx2);
          y_acc.copy_(y_nhwc);
          break;
        }
        default:
          TORCH_INTERNAL_ASSERT(false, "fastpad conv_transpose: no CPU kernel for path ", path_name(path));
      }
      if (!in_place) y.narrow(0, n0, images).copy_(y_acc);
    }
  });
  return y;
}

}  // namespace

TORCH_LIBRARY_IMPL(fastpad, CPU, m) {
  m.impl("conv_transpose", &conv_transpose_cpu);
}

}  // namespace fastpad::cpu
