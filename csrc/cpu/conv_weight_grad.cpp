// fastpad::conv_weight_grad on CPU: gw[r] = sum_o grad_output[o] * xpad[o*s - pad_lo + r*d] (conv's and
// conv_transpose's weight gradient). Layout: contiguous or channels_last input and grad_output; the result is
// contiguous in the weight's shape. Padding is resolved inside phase planes (NCHW) or fused im2col tiles
// (channels-last), never materialised.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <type_traits>
#include <vector>

#include "conv_params.h"
#include "cpu/depthwise.h"
#include "cpu/gemm_tiles.h"
#include "cpu/phase_planes.h"
#include "cpu/reduction_tiles.h"
#include "kernel_paths.h"

namespace fastpad::cpu {
namespace {

// The depth (positions) of the register tiles' chunks (ReductionTiles::depth_chunk): each column of tiles (4 AVX-512
// vectors of cols) re-reads its rows of cols once per tile of gradient rows; 64 positions' worth (16 KiB, spread over
// the columns' pitch) stay in L1 across those tiles, where a whole 512 KiB tile of columns streams them from L2 each
// time (channels-last resnet50 k3 weight gradients: the tiles at about 63% of the FMA peak, Sapphire Rapids class).
constexpr int64_t kWeightGradTilesDepth = 64;

// The fewest positions a channels-last tile of im2col columns holds on the register tiles: a reduction (Cg_in x taps)
// too long for that many in the column buffer (over 4096 floats) is taken by blocks of rows of taps (kd, kh), each
// block's tile sized for kWeightGradTilesDepth positions. A whole reduction's tile of a few positions re-reads and
// re-writes the whole partial gradient for a few multiply-adds per element (a 3-d conv from 479 channels, k6x6x3:
// 2 positions a tile). Random layers, float32, 2 cores, conv_weight_grad alone, interleaved (benchmarks/RESULTS.md):
// 7 calls of seeds 1-4 1.27x faster (geomean; 0.99-1.90x), held out 23 of seeds 5-16 1.11x (0.88-1.41x, the unchanged
// calls 0.88-1.05x), AVX2 16 of seeds 1-8 1.13x (0.94-1.39x). From 33 positions up, blocks lost (1.08x the time).
constexpr int64_t kWeightGradBlockMinPositions = 32;

// Below this many (image, tile) jobs per thread, the channels-last weight gradient evens its tiles out so that the
// jobs divide among the threads: a 298 -> 48 k5 gradient over one 20 x 20 image had 5 tiles of up to 88 positions,
// 176 positions for one thread and 224 for the other. Not below kWeightGradBalanceMinMultiplyAdds, where a second
// chunk's partial costs more than it saves.
constexpr int64_t kWeightGradBalanceMinJobsPerThread = 4;
constexpr int64_t kWeightGradBalanceMinMultiplyAdds = int64_t(1) << 22;

// [chunks, G, Cg_out, pitch] partials (rows [K, Cg_in], float) -> the weight's [G * Cg_out, Cg_in, K]: each row's
// chunks summed in chunk order, then its [K, Cg_in] transposed into place, one pass where a sum, a reshape and the
// op's copy made three (random layers, float32, 2 cores, every call on the AVX-512 tiles alone: 74 calls of seeds 1-4
// and the suite 0.99-1.30x faster, geomean 1.07; 66 held out of seeds 5-8 1.08; AVX2 66 calls 1.07). A channels-last
// result holds each row as [K, Cg_in]: the sums go in untransposed.
template <typename scalar_t>
at::Tensor summed_partials(const ConvGeometry& g, const at::Tensor& partial, at::IntArrayRef weight_shape,
                           const at::TensorOptions& float_options, at::MemoryFormat result_format) {
  const int64_t chunks = partial.size(0), rows = partial.size(1) * partial.size(2), pitch = partial.size(3);
  const int64_t in_per_group = g.conv_in_channels_per_group(), taps = g.kernel_volume();
  const int64_t reduce = in_per_group * taps;
  const float* partial_data = partial.const_data_ptr<float>();
  const bool untransposed = result_format != at::MemoryFormat::Contiguous;
  auto grad = at::empty(untransposed || std::is_same_v<scalar_t, float> ? weight_shape
                                                                        : at::IntArrayRef{rows, in_per_group, taps},
                        float_options.memory_format(result_format));
  float* grad_data = grad.template mutable_data_ptr<float>();
  at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> sum(reduce);
    for (int64_t row = begin; row < end; ++row) {
      std::copy_n(partial_data + row * pitch, reduce, sum.data());
      for (int64_t chunk = 1; chunk < chunks; ++chunk) {
        const float* other = partial_data + (chunk * rows + row) * pitch;
        for (int64_t i = 0; i < reduce; ++i) sum[i] += other[i];
      }
      if (untransposed) {
        std::copy_n(sum.data(), reduce, grad_data + row * reduce);
      } else {
        transpose_to_rows(sum.data(), 0, in_per_group, 1, in_per_group, taps, grad_data + row * reduce, taps);
      }
    }
  });
  return grad;
}

// Channels-last: the reduction over images and output tiles is split into a fixed number of chunks, each summing
// into its own partial gradient, then the partials are added in chunk order: bitwise reproducible for a fixed thread
// count. partial[Cg_out, K*Cg_in] += gy[tile, Cg_out]^T @ cols[tile, K*Cg_in], with cols a fused im2col tile; on the
// register tiles, cols' rows (and the partial's) are padded with zero columns to whole vectors, or for a long
// reduction, each block of tap rows gathered and reduced in turn (kWeightGradBlockMinPositions). result_format: the
// layout of the op's result (its input's); a channels-last weight's rows are the partials' [K, Cg_in] rows as they are.
template <typename scalar_t>
at::Tensor weight_grad_gemm(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& grad_output,
                            at::IntArrayRef weight_shape, ReductionTilesKernel tiles, at::MemoryFormat result_format) {
  using acc_t = acc_type<scalar_t>;
  const auto acc_dtype = c10::CppTypeToScalarType<acc_t>::value;
  const int64_t groups = g.groups, in_per_group = g.conv_in_channels_per_group(),
                out_per_group = g.conv_out_channels_per_group(), taps = g.kernel_volume();
  const int64_t reduce = in_per_group * taps, pitch = tiles ? reduction_tiles_columns(reduce) : reduce;
  // The tiles' im2col columns by blocks of rows of taps (kd, kh) (kWeightGradBlockMinPositions).
  const int64_t tap_rows = g.kernel[0] * g.kernel[1], row_values = g.kernel[2] * in_per_group;
  const int64_t acc_bytes = static_cast<int64_t>(sizeof(acc_t));
  const int64_t block_rows =
      tiles && kColumnBufferBytes / (pitch * acc_bytes) < kWeightGradBlockMinPositions
          ? std::clamp<int64_t>(kColumnBufferBytes / (kWeightGradTilesDepth * row_values * acc_bytes), 1, tap_rows)
          : tap_rows;
  const int64_t block_pitch = block_rows == tap_rows ? pitch : reduction_tiles_columns(block_rows * row_values);
  const auto gy_flat = flatten_positions(grad_output, /*channels_last=*/true);
  TilePlan plan(g, /*channels_last=*/true, block_pitch * static_cast<int64_t>(sizeof(acc_t)));
  const int64_t threads = at::get_num_threads();
  if (g.batch * plan.tiles < kWeightGradBalanceMinJobsPerThread * threads &&
      conv_multiply_adds(g) >= kWeightGradBalanceMinMultiplyAdds) {
    // Few (image, tile) jobs: each image cut into tiles of equal size, as many as make the jobs a multiple of the
    // threads, so that every chunk sums as many positions; not into tiles under kWeightGradBlockMinPositions, nor
    // where that adds a job per thread or more (each job reads and writes its chunk's whole partial gradient: a
    // batch of 5 images of 256 positions each cut in two, 240 -> 64 channels, took 1.31x the time).
    int64_t count = plan.tiles;
    while ((g.batch * count) % threads != 0) ++count;
    if (g.batch * (count - plan.tiles) < threads && ceil_div(plan.total, count) >= kWeightGradBlockMinPositions) {
      plan.split_evenly(count);
    }
  }
  const int64_t work = g.batch * plan.tiles;  // (image, tile) pairs to reduce over
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(threads, work));
  // On the tiles, each chunk's first job writes its partial (overwrite) rather than adding to zeros: the zero fill of
  // [chunks, G, Cg_out, pitch] took 8% of a 298 -> 48 k5 weight gradient's time (20 x 20, a 2.9 MB partial).
  const bool tiles_overwrite = tiles && std::is_same_v<acc_t, float>;
  auto partial = tiles_overwrite ? at::empty({chunks, groups, out_per_group, pitch}, x.options().dtype(acc_dtype))
                                 : at::zeros({chunks, groups, out_per_group, pitch}, x.options().dtype(acc_dtype));
  const scalar_t* x_data = x.const_data_ptr<scalar_t>();
  acc_t* partial_data = partial.template mutable_data_ptr<acc_t>();

  // Grouped: each job's tap sources resolved once for all its groups (im2col_sources_nhwc), each group then copying
  // its channels from them, where im2col_nhwc resolved every tap of every pixel again for each group.
  const bool shared_sources = groups > 1;
  at::parallel_for(0, chunks * groups, 1, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> cols(block_pitch * plan.buffer_positions());  // zeros: the padding columns stay so
    std::vector<int64_t> sources;
    // Each chunk's jobs in order, and within a job the groups of this range: the job's input tile is read for every
    // group while it is in cache (random066, a g=8 channels-last weight gradient: 0.93x on Zen 4, 0.74-0.77x on
    // Zen 3), and each group's partial still sums its jobs in order, so the result is bitwise the same as group by
    // group.
    for (int64_t chunk = begin / groups; chunk * groups < end; ++chunk) {
      const int64_t group_begin = std::max(begin, chunk * groups) - chunk * groups;
      const int64_t group_end = std::min(end, (chunk + 1) * groups) - chunk * groups;
      for (int64_t job = chunk * work / chunks; job < (chunk + 1) * work / chunks; ++job) {
        const int64_t n = job / plan.tiles;
        const auto [pixel_begin, tile_pixels] = plan.tile(job % plan.tiles);
        const scalar_t* x_image = x_data + n * g.conv_in_volume() * g.conv_in_channels;
        if (shared_sources) im2col_sources_nhwc(g, pixel_begin, pixel_begin + tile_pixels, sources);
        // cols for the group's tap rows [row0, row1), row_pitch apart.
        const auto gather_columns = [&](int64_t group, int64_t row_pitch, int64_t row0, int64_t row1) {
          if (shared_sources) {
            im2col_nhwc_gather(sources.data(), tile_pixels, taps, row0 * g.kernel[2], row1 * g.kernel[2],
                               x_image + group * in_per_group, in_per_group, cols.data(), row_pitch);
          } else {
            im2col_nhwc(g, x_image, group, pixel_begin, pixel_begin + tile_pixels, cols.data(), row_pitch, row0, row1);
          }
        };
        for (int64_t group = group_begin; group < group_end; ++group) {
          acc_t* acc = partial_data + (chunk * groups + group) * out_per_group * pitch;
          const auto gy =
              gy_flat[n].narrow(0, pixel_begin, tile_pixels).narrow(1, group * out_per_group, out_per_group);
          if constexpr (std::is_same_v<acc_t, float>) {
            if (tiles) {
              const at::Tensor gy_float = gy.to(acc_dtype);  // gy itself in float32, else a [tile, Cg_out] copy
              for (int64_t row0 = 0; row0 < tap_rows; row0 += block_rows) {
                const int64_t row1 = std::min(tap_rows, row0 + block_rows);
                gather_columns(group, block_pitch, row0, row1);
                // One block: its padded pitch, zeros past the reduction; a block of several: its columns exactly.
                const int64_t columns = block_rows == tap_rows ? pitch : (row1 - row0) * row_values;
                ReductionTiles product{gy_float.const_data_ptr<float>(), gy_float.stride(1), gy_float.stride(0),
                                       cols.data(), block_pitch, acc + row0 * row_values, pitch,
                                       out_per_group, columns, tile_pixels};
                product.depth_chunk = kWeightGradTilesDepth;
                product.overwrite = job == chunk * work / chunks;  // (columns past the reduction stay unwritten)
                tiles(product);
              }
              continue;
            }
          }
          gather_columns(group, pitch, 0, tap_rows);
          wrap_buffer(acc, {out_per_group, pitch})
              .narrow(1, 0, reduce)
              .addmm_(gy.to(acc_dtype).t(), wrap_buffer(cols.data(), {tile_pixels, reduce}));
        }
      }
    }
  });
  if constexpr (std::is_same_v<acc_t, float>) {
    if (tiles) {
      return summed_partials<scalar_t>(g, partial, weight_shape, x.options().dtype(acc_dtype), result_format);
    }
  }
  // [G, Cg_out, K, Cg_in] -> [G * Cg_out, Cg_in, K]
  return partial.sum(0).narrow(2, 0, reduce).reshape({groups * out_per_group, taps, in_per_group}).transpose(1, 2);
}

// The fewest input channels of a part of a group (phase_plane_weight_grad_nchw): parts of 1-2 channels split a stem's
// 3 as 1 + 2, its work 1:2 between the threads (tf_efficientnet_b0's stem: 1.6-2.7 ms, against 1.2-1.4 ms in chunks of
// images).
constexpr int64_t kMinPartChannels = 4;

// Bands for the NCHW weight gradient: its GEMMs reduce over the band's positions, so wider bands pay off even past
// L2 (k4 64->64 @56, batch 4: 30 ms with 1 MiB bands, 18 ms with 4 MiB).
constexpr int64_t kWeightGradBandBytes = 4 * 1024 * 1024;

// The rows of the gradient the weight_rows product sweeps at a time (a multiple of the tiles' 6 rows on AVX-512 and
// 4 on AVX2): the tiles walk a product column of vectors by column, all rows down each, which over the gradient's
// long rows (a page or more apart) ran 2.6x slower than these short blocks swept along the rows (random layer,
// 8 -> 99 k6 3-d, 128 positions; float32, 2 cores).
constexpr int64_t kWeightRowsBlock = 12;

// NCHW, per (image, output depth, band of output rows), the same chunked reduction: the group's input channels become
// phase planes (cpu/phase_planes.h), the kept columns of every tap are copied from them into
// cols[(ci, kd, kh, kw), band] (contiguous runs, no index math), and
// partial[Cg_out, Cg_in*K] += gy[Cg_out, band] @ cols^T, with gy read in place. Images of few positions (one band and
// no depth) go several to a GEMM (gemm_tiles.h's images_per_shared_gemm): their columns side by side in cols, and
// their gy gathered likewise, so each GEMM re-writes the partial gradient once for all of them. On the register tiles
// the product is transposed, partial[Cg_in*K, Cg_out] += cols @ gy^T, its rows and those of gy^T (a [band, Cg_out]
// copy) padded with zero columns to whole vectors of output channels; and where the groups are fewer than the threads,
// each group's input channels are split into parts, one per thread, each gathering its channels and reducing its rows
// of one partial over every job, instead of chunks of jobs summing into partials of the whole weight (which a weight of
// megabytes over a few hundred positions spent most of its time zeroing, writing and adding).
// weight_rows (the tiles only, kernel_paths.h's cpu_weight_grad_rows): no partial; one chunk, each thread writing
// its part's columns of the gradient in place, grad[Cg_out, Cg_in*K] (=) gy @ cols^T, each job's columns transposed
// into [positions, Cg_in*K] and gy gathered as [Cg_out, positions] in float; the first job overwrites.
template <typename scalar_t>
at::Tensor phase_plane_weight_grad_nchw(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& grad_output,
                                        at::IntArrayRef weight_shape, ReductionTilesKernel tiles,
                                        bool weight_rows = false) {
  using acc_t = acc_type<scalar_t>;
  TORCH_INTERNAL_ASSERT(!weight_rows || (tiles && std::is_same_v<acc_t, float>), "weight_rows runs on the tiles");
  const auto acc_dtype = c10::CppTypeToScalarType<acc_t>::value;
  const int64_t groups = g.groups, c_in = g.conv_in_channels_per_group(), c_out = g.conv_out_channels_per_group();
  const int64_t taps = g.kernel_volume(), taps_2d = g.kernel[1] * g.kernel[2], reduce = c_in * taps;
  const int64_t slice = g.conv_in_sizes[1] * g.conv_in_sizes[2], out_w = g.conv_out_sizes[2];
  // The columns (and, for weight_rows, their transposed copy).
  const int64_t bytes_per_position = (weight_rows ? 2 : 1) * reduce * static_cast<int64_t>(sizeof(acc_t));
  const int64_t bands = PhasePlanes<acc_t>(g, c_in, kWeightGradBandBytes, bytes_per_position).bands();
  const int64_t images_per_job =
      bands == 1 && g.conv_out_sizes[0] == 1
          ? images_per_shared_gemm(g.conv_out_volume(), g.batch, groups, at::get_num_threads())
          : 1;
  const int64_t image_jobs = (g.batch + images_per_job - 1) / images_per_job;
  const int64_t work = image_jobs * g.conv_out_sizes[0] * bands;  // (images, output depth, band) triples to reduce over
  const int64_t threads = at::get_num_threads();
  const int64_t parts = tiles && groups < threads
                            ? std::max<int64_t>(1, std::min(c_in / kMinPartChannels, (threads + groups - 1) / groups))
                            : 1;
  const int64_t chunks = parts > 1 || weight_rows ? 1 : std::max<int64_t>(1, std::min<int64_t>(threads, work));
  const int64_t out_pitch = reduction_tiles_columns(c_out);
  // weight_rows: the gradient itself, [G * Cg_out, Cg_in * K], written by the tiles in place.
  auto grad_rows = weight_rows ? at::empty(std::is_same_v<scalar_t, acc_t> ? weight_shape
                                                                           : at::IntArrayRef{groups * c_out, reduce},
                                           x.options().dtype(acc_dtype))
                               : at::Tensor();
  auto partial = weight_rows ? at::Tensor()
                 : tiles     ? at::zeros({chunks, groups, reduce, out_pitch}, x.options().dtype(acc_dtype))
                             : at::zeros({chunks, groups, c_out, reduce}, x.options().dtype(acc_dtype));
  const auto gy_flat = flatten_positions(grad_output, /*channels_last=*/false);
  const scalar_t* x_data = x.const_data_ptr<scalar_t>();
  // On the tiles, each job's gy and partial are addressed through raw pointers: a job of a small grouped conv is a few
  // microseconds of work, less than the ATen views it once made.
  const scalar_t* gy_data = grad_output.const_data_ptr<scalar_t>();
  const int64_t gy_image_stride = g.conv_out_channels * g.conv_out_volume();
  acc_t* partial_data = weight_rows ? grad_rows.template mutable_data_ptr<acc_t>()
                                    : partial.template mutable_data_ptr<acc_t>();

  at::parallel_for(0, chunks * groups * parts, 1, [&](int64_t begin, int64_t end) {
    PhasePlanes<acc_t> planes(g, c_in, kWeightGradBandBytes, bytes_per_position);
    const int64_t max_columns = planes.band_outputs() * images_per_job;
    // cols: each job writes every row and column it reads (a part's rows of its channels' taps).
    const auto cols = uninitialized_buffer<acc_t>(reduce * max_columns);
    const auto gy_gathered =
        uninitialized_buffer<acc_t>((images_per_job > 1 && !tiles) || weight_rows ? c_out * max_columns : 0);
    std::vector<acc_t> gy_transposed(tiles && !weight_rows ? max_columns * out_pitch : 0);  // zeros: padding stays
    const auto cols_transposed = uninitialized_buffer<acc_t>(weight_rows ? max_columns * reduce : 0);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t chunk = item / (groups * parts), group = item / parts % groups, part = item % parts;
      const int64_t ci_begin = part * c_in / parts, ci_end = (part + 1) * c_in / parts;
      // The partial of (chunk, group): the tiles' [reduce, out_pitch], or torch's GEMM's [Cg_out, reduce].
      acc_t* acc_tiles = tiles ? partial_data + (chunk * groups + group) * reduce * out_pitch : nullptr;
      at::Tensor acc = tiles ? at::Tensor() : partial[chunk][group];
      const int64_t first_job = chunk * work / chunks;
      for (int64_t job = first_job; job < (chunk + 1) * work / chunks; ++job) {
        const int64_t b = job % bands, od = (job / bands) % g.conv_out_sizes[0],
                      n0 = job / (bands * g.conv_out_sizes[0]) * images_per_job;
        const int64_t images = std::min(images_per_job, g.batch - n0);
        const Band band = planes.band(b);
        const int64_t positions = band.rows * band.cols, columns = images * positions;
        for (int64_t image = 0; image < images; ++image) {
          const int64_t n = n0 + image;
          for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
            const int64_t id = g.tap_source(0, od, kd);
            if (id >= 0) {
              for (int64_t ci = ci_begin; ci < ci_end; ++ci) {
                planes.gather(x_data + (n * g.conv_in_channels + group * c_in + ci) * g.conv_in_volume() + id * slice,
                              band, ci);
              }
            }
            for (int64_t ci = ci_begin; ci < ci_end; ++ci) {
              for (int64_t tap = 0; tap < taps_2d; ++tap) {
                acc_t* dst = cols.get() + (ci * taps + kd * taps_2d + tap) * columns + image * positions;
                if (id < 0) {  // the whole slice lies in zero padding along depth
                  std::fill_n(dst, positions, acc_t(0));
                  continue;
                }
                const acc_t* src = planes.taps()[tap] + ci * planes.channel_stride();
                for (int64_t r = 0; r < band.rows; ++r) {
                  std::copy_n(src + r * planes.pitch(), band.cols, dst + r * band.cols);
                }
              }
            }
          }
        }
        // The band's outputs are contiguous in gy: whole rows, or part of one row.
        const int64_t first_output = (od * g.conv_out_sizes[1] + band.row0) * out_w + band.col0;
        if constexpr (std::is_same_v<acc_t, float>) {
          if (weight_rows) {
            // grad[Cg_out, part's columns] (=) gy[Cg_out, columns] @ cols^T: the part's rows of cols transposed into
            // [columns, part's reduce], gy's [Cg_out, images, positions] gathered as [Cg_out, columns] in float.
            const int64_t row_begin = ci_begin * taps, rows = (ci_end - ci_begin) * taps;
            transpose_to_rows(cols.get() + row_begin * columns, 0, columns, 1, columns, rows, cols_transposed.get(),
                              rows);
            const scalar_t* gy_band =
                gy_data + n0 * gy_image_stride + group * c_out * g.conv_out_volume() + first_output;
            for (int64_t co = 0; co < c_out; ++co) {
              for (int64_t image = 0; image < images; ++image) {
                const scalar_t* from = gy_band + image * gy_image_stride + co * g.conv_out_volume();
                std::transform(from, from + positions, gy_gathered.get() + co * columns + image * positions,
                               [](scalar_t v) { return static_cast<float>(v); });
              }
            }
            // By blocks of kWeightRowsBlock rows of the gradient, each swept along its whole width.
            for (int64_t co = 0; co < c_out; co += kWeightRowsBlock) {
              ReductionTiles product{gy_gathered.get() + co * columns, columns, 1, cols_transposed.get(), rows,
                                     partial_data + (group * c_out + co) * reduce + row_begin, reduce,
                                     std::min(kWeightRowsBlock, c_out - co), rows, columns};
              product.overwrite = job == first_job;
              tiles(product);
            }
            continue;
          }
          if (tiles) {
            // gy's [Cg_out, images, positions], channels conv_out_volume() apart, images gy_image_stride apart.
            const scalar_t* gy_band =
                gy_data + n0 * gy_image_stride + group * c_out * g.conv_out_volume() + first_output;
            transpose_to_rows(gy_band, gy_image_stride, g.conv_out_volume(), images, positions, c_out,
                              gy_transposed.data(), out_pitch);
            const int64_t row_begin = ci_begin * taps;  // the part's rows of cols and of the partial
            tiles({cols.get() + row_begin * columns, columns, 1, gy_transposed.data(), out_pitch,
                   acc_tiles + row_begin * out_pitch, out_pitch, (ci_end - ci_begin) * taps, out_pitch, columns});
            continue;
          }
        }
        at::Tensor gy = gy_flat.narrow(0, n0, images)
                            .narrow(1, group * c_out, c_out)
                            .narrow(2, first_output, positions)
                            .transpose(0, 1);  // [Cg_out, images, positions]
        if (images > 1) {
          auto gathered = wrap_buffer(gy_gathered.get(), {c_out, images, positions});
          gathered.copy_(gy);
          gy = gathered;
        }
        acc.addmm_(gy.reshape({c_out, columns}).to(acc_dtype), wrap_buffer(cols.get(), {reduce, columns}).t());
      }
    }
  });
  if (weight_rows) return grad_rows;
  if (!tiles) return partial.sum(0).view({groups * c_out, c_in, taps});
  const at::Tensor sum = chunks == 1 ? partial[0] : partial.sum(0);  // [G, Cg_in*K, out_pitch]
  auto grad = at::empty({groups * c_out, reduce}, sum.options());
  const float* sum_data = sum.const_data_ptr<float>();
  float* grad_data = grad.data_ptr<float>();
  at::parallel_for(0, groups * c_out, 16, [&](int64_t begin, int64_t end) {  // runs of output channels
    for (int64_t row = begin; row < end;) {
      const int64_t group = row / c_out, co = row % c_out, count = std::min(end - row, c_out - co);
      transpose_to_rows(sum_data + group * reduce * out_pitch + co, 0, out_pitch, 1, count, reduce,
                        grad_data + row * reduce, reduce);
      row += count;
    }
  });
  return grad.view({groups * c_out, c_in, taps});
}

// The bytes of x and grad_output (all their channels) a band of weight_grad_taps covers, about: the band's reads stay
// in L2 while the threads run its taps; but at least kWeightGradTapsBandMultiplyAdds, since each band is a parallel
// region.
constexpr int64_t kWeightGradTapsBandBytes = 256 * 1024;
constexpr int64_t kWeightGradTapsBandMultiplyAdds = int64_t(1) << 22;
// The fewest (group, tap, block of gradient rows and columns) items a band is cut into per thread, to even out the
// threads' work.
constexpr int64_t kWeightGradTapsItemsPerThread = 4;
// Gradient rows are split in blocks of a multiple of this: whole register tiles on AVX-512 (6 rows) and AVX2 (4);
// then, where those are still too few, the columns (input channels) in blocks of whole AVX-512 vectors.
constexpr int64_t kWeightGradTapsRowMultiple = 12;
constexpr int64_t kWeightGradTapsColumnMultiple = 16;

// Channels-last float32 where no tap reads padding that is not zero (kernel_paths.h's cpu_weight_grad_taps): the
// gradient of each tap is a GEMM over x in place, grad_tap[Cg_out, Cg_in] += gy[positions, Cg_out]^T @
// x_shifted[positions, Cg_in], over the positions whose tap lands inside x (a zero elsewhere adds nothing). Along w
// those are a run of an output row, whose x values are s_w positions apart; a band's rows are the register tiles'
// taps (ReductionTiles::b_taps), each with its own x row, so one call sums a band's rows. No im2col columns are
// gathered (the fused im2col path copies Cg_in x taps values per position before its GEMM).
// The bands (runs of output rows over the images and depths in turn) go in order; the threads split each band's
// (group, tap, block of gradient rows and columns) items, each adding into its own part of the gradient: no partial
// sums, and the sum of every gradient element runs in one order whatever the threads.
at::Tensor weight_grad_taps(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& grad_output,
                            at::IntArrayRef weight_shape, ReductionTilesKernel tiles, at::MemoryFormat result_format) {
  const int64_t groups = g.groups, in_per_group = g.conv_in_channels_per_group(),
                out_per_group = g.conv_out_channels_per_group(), taps = g.kernel_volume();
  const int64_t pitch = reduction_tiles_columns(in_per_group * taps);
  const int64_t out_d = g.conv_out_sizes[0], out_h = g.conv_out_sizes[1], out_w = g.conv_out_sizes[2];
  const int64_t in_h = g.conv_in_sizes[1], in_w = g.conv_in_sizes[2];
  const int64_t position_bytes = (g.conv_in_channels + g.conv_out_channels) * static_cast<int64_t>(sizeof(float));
  // Bands run over the output rows of every image and depth in turn, (n, od, oh) flattened.
  const int64_t slices = g.batch * out_d, all_rows = slices * out_h;
  const int64_t row_multiply_adds = std::max<int64_t>(out_w * g.conv_out_channels * in_per_group * taps, 1);
  const int64_t band_rows = std::clamp<int64_t>(std::max(kWeightGradTapsBandBytes / (position_bytes * out_w),
                                                         kWeightGradTapsBandMultiplyAdds / row_multiply_adds),
                                                1, all_rows);
  // Blocks of gradient rows, then of columns: halved (to whole multiples) until the items are enough.
  const int64_t threads = at::get_num_threads(), wanted_items = kWeightGradTapsItemsPerThread * threads;
  const auto halved = [](int64_t size, int64_t multiple) { return ceil_div(ceil_div(size, 2), multiple) * multiple; };
  int64_t block_rows = out_per_group, block_columns = in_per_group;
  while (groups * taps * ceil_div(out_per_group, block_rows) < wanted_items &&
         block_rows > kWeightGradTapsRowMultiple) {
    block_rows = halved(block_rows, kWeightGradTapsRowMultiple);
  }
  const int64_t row_blocks = ceil_div(out_per_group, block_rows);
  while (groups * taps * row_blocks * ceil_div(in_per_group, block_columns) < wanted_items &&
         block_columns > kWeightGradTapsColumnMultiple) {
    block_columns = halved(block_columns, kWeightGradTapsColumnMultiple);
  }
  const int64_t column_blocks = ceil_div(in_per_group, block_columns), blocks = row_blocks * column_blocks;
  const int64_t items = groups * taps * blocks;
  const int64_t run_items = std::max<int64_t>(1, items / wanted_items);
  auto sums = at::zeros({1, groups, out_per_group, pitch}, x.options());
  const float* x_data = x.const_data_ptr<float>();
  const float* gy_data = grad_output.const_data_ptr<float>();
  float* sums_data = sums.mutable_data_ptr<float>();
  // Each tap's outputs along a dim whose tap lands inside x: [first, last) (zero padding elsewhere).
  const auto outputs_inside = [&](int dim, int64_t tap) {
    return interior_range(g.tap_position(dim, 0, tap), g.stride[dim], g.conv_out_sizes[dim], g.conv_in_sizes[dim]);
  };
  // Item `item`'s product over the output rows [oh_begin, oh_end) of one slice (n, od); x_rows: room for their x rows.
  const auto run_item = [&](int64_t item, int64_t slice, int64_t oh_begin, int64_t oh_end,
                            std::vector<const float*>& x_rows) {
    const int64_t group = item / (taps * blocks), tap = item / blocks % taps;
    const int64_t row0 = item % blocks / column_blocks * block_rows, column0 = item % column_blocks * block_columns;
    const int64_t kd = tap / (g.kernel[1] * g.kernel[2]), kh = tap / g.kernel[2] % g.kernel[1], kw = tap % g.kernel[2];
    const int64_t n = slice / out_d, od = slice % out_d, id = g.tap_position(0, od, kd);
    const InteriorRange rows = outputs_inside(1, kh), run = outputs_inside(2, kw);
    const int64_t oh_first = std::max(oh_begin, rows.first), oh_last = std::min(oh_end, rows.last);
    if (id < 0 || id >= g.conv_in_sizes[0] || oh_first >= oh_last || run.first >= run.last) return;
    const float* x_plane = x_data + ((n * g.conv_in_sizes[0] + id) * in_h * in_w) * g.conv_in_channels +
                           group * in_per_group + column0;
    const int64_t iw = g.tap_position(2, run.first, kw);
    for (int64_t oh = oh_first; oh < oh_last; ++oh) {
      x_rows[oh - oh_first] = x_plane + (g.tap_position(1, oh, kh) * in_w + iw) * g.conv_in_channels;
    }
    const float* gy_rows = gy_data + ((slice * out_h + oh_first) * out_w + run.first) * g.conv_out_channels +
                           group * out_per_group + row0;
    ReductionTiles product{gy_rows, 1, g.conv_out_channels, nullptr, g.stride[2] * g.conv_in_channels,
                           sums_data + (group * out_per_group + row0) * pitch + tap * in_per_group + column0, pitch,
                           std::min(block_rows, out_per_group - row0), std::min(block_columns, in_per_group - column0),
                           run.last - run.first};
    product.b_taps = x_rows.data();
    product.taps = oh_last - oh_first;
    product.a_tap_stride = out_w * g.conv_out_channels;
    tiles(product);
  };
  for (int64_t band_begin = 0; band_begin < all_rows; band_begin += band_rows) {
    const int64_t band_end = std::min(all_rows, band_begin + band_rows);
    // Each thread takes the next run of items until none is left: the items differ in size (a border tap has fewer
    // rows). Runs of neighbouring items, whose gradient columns share cache lines where a tap's are not whole lines.
    std::atomic<int64_t> next_run{0};
    at::parallel_for(0, std::min(threads, items), 1, [&](int64_t, int64_t) {
      std::vector<const float*> x_rows(std::min(band_rows, out_h));
      for (int64_t first = next_run++ * run_items; first < items; first = next_run++ * run_items) {
        for (int64_t item = first; item < std::min(items, first + run_items); ++item) {
          // The band's rows, slice by slice.
          for (int64_t row = band_begin; row < band_end;) {
            const int64_t slice = row / out_h, oh_begin = row % out_h;
            const int64_t oh_end = std::min(out_h, oh_begin + band_end - row);
            run_item(item, slice, oh_begin, oh_end, x_rows);
            row += oh_end - oh_begin;
          }
        }
      }
    });
  }
  return summed_partials<float>(g, sums, weight_shape, x.options(), result_format);
}

at::Tensor conv_weight_grad_cpu(const at::Tensor& input, const at::Tensor& grad_output, at::IntArrayRef weight_shape,
                                at::IntArrayRef stride, at::IntArrayRef pad_lo, at::IntArrayRef dilation,
                                int64_t groups, c10::string_view padding_mode) {
  // The ATen calls inside the kernel work on plain tensors: autograd is this op's own registration.
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  const ConvGeometry g = conv_weight_grad_geometry(input, grad_output, weight_shape, stride, pad_lo, dilation, groups,
                                                   padding_mode);
  const auto input_format = output_memory_format(input);
  const bool channels_last = input_format != at::MemoryFormat::Contiguous;
  if (g.batch == 0) return at::zeros(weight_shape, input.options().memory_format(input_format));
  const WeightGradPath path = choose_weight_grad_path(g, Backend::Cpu, channels_last, accumulator_bytes(input),
                                                      is_reduced_precision(input), cpu_isa_for(input));
  const bool kernel_channels_last = cpu_weight_grad_reads_channels_last(path, g, channels_last);
  const auto format = kernel_channels_last ? input_format : at::MemoryFormat::Contiguous;
  const auto x = input.contiguous(format);
  const auto gy = grad_output.contiguous(format);
  at::Tensor grad;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, input.scalar_type(), "fastpad_conv_weight_grad_cpu", [&] {
    switch (path) {
      case WeightGradPath::CpuDepthwise:
      case WeightGradPath::CpuTapDots:
        grad = depthwise_weight_grad(g, x, gy, kernel_channels_last);
        break;
      case WeightGradPath::CpuDepthwiseStridedPlanes:  // the NCHW kernel over channels-last x and grad_output
        grad = depthwise_weight_grad(g, x, gy, /*channels_last=*/false);
        break;
      case WeightGradPath::CpuDepthwiseAvx512:
        grad = depthwise_weight_grad(g, x, gy, kernel_channels_last, /*channel_blocks=*/false, /*avx512_tiles=*/true);
        break;
      case WeightGradPath::CpuDepthwiseChannelBlocks:
      case WeightGradPath::CpuDepthwiseChannelBlocksAvx512:
        grad = depthwise_weight_grad(g, x, gy, /*channels_last=*/false, /*channel_blocks=*/true,
                                     path == WeightGradPath::CpuDepthwiseChannelBlocksAvx512);
        break;
      case WeightGradPath::CpuDepthwiseRepeated:
      case WeightGradPath::CpuDepthwiseRepeatedAvx512:
        grad = depthwise_weight_grad(depthwise_of_repeated_grad_output(g), x, gy, /*channels_last=*/true,
                                     /*channel_blocks=*/false, path == WeightGradPath::CpuDepthwiseRepeatedAvx512,
                                     /*grad_output_repeats=*/g.conv_in_channels_per_group());
        break;
      case WeightGradPath::CpuChannelsLastGemm:
        grad = weight_grad_gemm<scalar_t>(g, x, gy, weight_shape, nullptr, input_format);
        break;
      case WeightGradPath::CpuChannelsLastGemmAvx2:
        grad = weight_grad_gemm<scalar_t>(g, x, gy, weight_shape, &reduction_tiles_avx2, input_format);
        break;
      case WeightGradPath::CpuChannelsLastGemmAvx512:
        grad = weight_grad_gemm<scalar_t>(g, x, gy, weight_shape, &reduction_tiles_avx512, input_format);
        break;
      case WeightGradPath::CpuChannelsLastTapsAvx2:
      case WeightGradPath::CpuChannelsLastTapsAvx512:
        TORCH_INTERNAL_ASSERT((std::is_same_v<scalar_t, float>));
        grad = weight_grad_taps(g, x, gy, weight_shape,
                                path == WeightGradPath::CpuChannelsLastTapsAvx512 ? &reduction_tiles_avx512
                                                                                  : &reduction_tiles_avx2,
                                input_format);
        break;
      case WeightGradPath::CpuPhasePlanes:
        grad = phase_plane_weight_grad_nchw<scalar_t>(g, x, gy, weight_shape, nullptr);
        break;
      case WeightGradPath::CpuPhasePlanesAvx2:
        grad = phase_plane_weight_grad_nchw<scalar_t>(g, x, gy, weight_shape, &reduction_tiles_avx2);
        break;
      case WeightGradPath::CpuPhasePlanesAvx512:
        grad = phase_plane_weight_grad_nchw<scalar_t>(g, x, gy, weight_shape, &reduction_tiles_avx512);
        break;
      case WeightGradPath::CpuPhasePlanesRowsAvx2:
        grad = phase_plane_weight_grad_nchw<scalar_t>(g, x, gy, weight_shape, &reduction_tiles_avx2,
                                                      /*weight_rows=*/true);
        break;
      case WeightGradPath::CpuPhasePlanesRowsAvx512:
        grad = phase_plane_weight_grad_nchw<scalar_t>(g, x, gy, weight_shape, &reduction_tiles_avx512,
                                                      /*weight_rows=*/true);
        break;
      default:
        TORCH_INTERNAL_ASSERT(false, "fastpad conv_weight_grad: no CPU path");
    }
  });
  return weight_grad_in_input_layout(grad, weight_shape, input);
}

}  // namespace

TORCH_LIBRARY_IMPL(fastpad, CPU, m) {
  m.impl("conv_weight_grad", &conv_weight_grad_cpu);
}

}  // namespace fastpad::cpu
