// fastpad::conv on CPU: y[o] = bias + sum_r w[r] * xpad[o*s - pad_lo + r*d], 1-3 spatial dims.
// Layout: contiguous N,C,spatial or channels_last (4-d/5-d); the output keeps the input's memory format.
// Padding is never materialised: taps in the padding read zero or their reflected/clamped/wrapped source.
// The kernel is kernel_paths.h's choose_conv_path: torch's own convolution where its padding expresses the pads; the
// direct kernels of depthwise.cpp; GEMMs over phase planes (NCHW, and channels-last with one group); a fused im2col +
// GEMM (grouped channels-last); or, with few input channels per group (stems), a direct kernel (channels-last) or one
// GEMM over columns copied from the phase planes (NCHW).
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
#include "cpu/blocked_direct.h"
#include "cpu/channel_dots.h"
#include "cpu/depthwise.h"
#include "cpu/gemm_tiles.h"
#include "cpu/huge_pages.h"
#include "cpu/phase_planes.h"
#include "cpu/reduction_tiles.h"
#include "cpu/torch_conv.h"
#include "kernel_paths.h"

namespace fastpad::cpu {
namespace {

// Channels-last dense and grouped: per (image, group, tile of output pixels), a fused im2col tile and one GEMM
// straight into the output: y[tile, Cg_out] = cols[tile, K*Cg_in] @ W[K*Cg_in, Cg_out].
template <typename scalar_t>
void gemm_conv_nhwc(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                    at::Tensor& y) {
  using acc_t = acc_type<scalar_t>;
  const auto acc_dtype = c10::CppTypeToScalarType<acc_t>::value;
  const int64_t groups = g.groups, in_per_group = g.conv_in_channels_per_group(),
                out_per_group = g.conv_out_channels_per_group(), taps = g.kernel_volume();
  const int64_t reduce = in_per_group * taps;
  const auto bias_acc = bias.defined() ? bias.to(acc_dtype).view({groups, 1, out_per_group}) : at::Tensor();
  const auto w_acc = weight.to(acc_dtype)
                         .reshape({groups, out_per_group, in_per_group, taps})
                         .permute({0, 3, 2, 1})
                         .contiguous()
                         .view({groups, reduce, out_per_group});
  const auto y_flat = flatten_positions(y, /*channels_last=*/true);
  const TilePlan plan(g, /*channels_last=*/true, reduce * static_cast<int64_t>(sizeof(acc_t)));
  const scalar_t* x_data = x.const_data_ptr<scalar_t>();

  at::parallel_for(0, g.batch * groups * plan.tiles, 1, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> cols(reduce * plan.buffer_positions());
    for (int64_t item = begin; item < end; ++item) {
      const int64_t group = (item / plan.tiles) % groups, n = item / (plan.tiles * groups);
      const auto [pixel_begin, tile_pixels] = plan.tile(item % plan.tiles);
      im2col_nhwc(g, x_data + n * g.conv_in_volume() * g.conv_in_channels, group, pixel_begin,
                  pixel_begin + tile_pixels, cols.data(), reduce);
      const auto out = y_flat[n].narrow(0, pixel_begin, tile_pixels).narrow(1, group * out_per_group, out_per_group);
      matmul_into(out, wrap_buffer(cols.data(), {tile_pixels, reduce}), w_acc[group],
                  bias_acc.defined() ? bias_acc[group] : at::Tensor());
    }
  });
}

// Channels-last with few input channels per group (stems), where im2col would copy C_in values per tap: per output
// pixel, y[co] = bias + sum over (tap, ci) of x[tap's source pixel, ci] * W[tap, ci, co], vectorised along the
// group's output channels. Interior pixels, whose taps all read inside the input, go kPixels at a time with each tap
// at a fixed offset; border pixels resolve their taps by the padding mode (for_each_tap_pixel).
template <typename scalar_t>
void direct_conv_nhwc(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                      at::Tensor& y) {
  using acc_t = acc_type<scalar_t>;
  using Vec = at::vec::Vectorized<acc_t>;
  constexpr int64_t V = Vec::size();
  const int64_t groups = g.groups, c_in = g.conv_in_channels_per_group(), c_out = g.conv_out_channels_per_group();
  const int64_t taps = g.kernel_volume(), width = (c_out + V - 1) / V * V;  // weight rows padded to whole vectors
  // [groups, taps, Cg_in, width] and [groups, width], zero beyond Cg_out (small weight copies, not the input). Copied
  // by plain loops: on the small layers this path takes, ATen's zeros, permute and copy_ cost more than the sums.
  const at::Tensor w_in = weight.contiguous();
  const scalar_t* w_source = w_in.const_data_ptr<scalar_t>();
  std::vector<acc_t> w_acc(groups * taps * c_in * width, acc_t(0)), bias_acc(groups * width, acc_t(0));
  for (int64_t group = 0; group < groups; ++group) {
    for (int64_t co = 0; co < c_out; ++co) {
      for (int64_t ci = 0; ci < c_in; ++ci) {
        const scalar_t* w_row = w_source + ((group * c_out + co) * c_in + ci) * taps;
        for (int64_t tap = 0; tap < taps; ++tap) {
          w_acc[((group * taps + tap) * c_in + ci) * width + co] = static_cast<acc_t>(w_row[tap]);
        }
      }
    }
  }
  const acc_t* w_data = w_acc.data();
  if (bias.defined()) {
    const scalar_t* bias_source = bias.const_data_ptr<scalar_t>();
    for (int64_t group = 0; group < groups; ++group) {
      for (int64_t co = 0; co < c_out; ++co) {
        bias_acc[group * width + co] = static_cast<acc_t>(bias_source[group * c_out + co]);
      }
    }
  }
  const acc_t* bias_data = bias_acc.data();
  const scalar_t* x_data = x.const_data_ptr<scalar_t>();
  scalar_t* y_data = y.mutable_data_ptr<scalar_t>();
  const int64_t out_h = g.conv_out_sizes[1], out_w = g.conv_out_sizes[2];
  // Interior: per dimension, the outputs whose first and last taps (and so all between) land inside the input.
  InteriorRange interior[kMaxSpatial];
  for (int d = 0; d < kMaxSpatial; ++d) {
    const InteriorRange first = g.tap_interior(d, 0, g.conv_out_sizes[d]),
                        last = g.tap_interior(d, g.kernel[d] - 1, g.conv_out_sizes[d]);
    interior[d] = {std::max(first.first, last.first), std::min(first.last, last.last)};
  }
  // The interior's taps as runs of (tap, input channel) pairs that are contiguous in both the input and the weight:
  // one run per tap, or, with one group and unit dilation along W, one per kernel row (kw and ci together).
  struct Run {
    int64_t weight_row, x_offset, length;  // x_offset: from the pixel's first tap, in elements
  };
  std::vector<Run> runs;
  const bool merge_rows = groups == 1 && g.dilation[2] == 1;
  for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
    for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
      for (int64_t kw = 0; kw < (merge_rows ? 1 : g.kernel[2]); ++kw) {
        const int64_t tap = (kd * g.kernel[1] + kh) * g.kernel[2] + kw;
        runs.push_back({tap * c_in,
                        ((kd * g.dilation[0] * g.conv_in_sizes[1] + kh * g.dilation[1]) * g.conv_in_sizes[2] +
                         kw * g.dilation[2]) * g.conv_in_channels,
                        merge_rows ? g.kernel[2] * c_in : c_in});
      }
    }
  }
  const auto inside = [](const InteriorRange& range, int64_t o) { return o >= range.first && o < range.last; };

  // Output channels [c0, c0 + kVectors * V) of group `group` for P pixels: for_each_run(body) calls
  // body(weight_row, x_pixels, length) for every run of taps, x_pixels[p] pointing at pixel p's source pixel of the
  // run's first tap. P pixels x kVectors vectors of accumulators stay in registers, and each weight vector is
  // loaded once for all P pixels.
  const auto block = [&](auto pixel_count, auto vector_count, int64_t group, int64_t c0, const auto& for_each_run,
                         scalar_t* const* y_pixels) {
    constexpr int P = decltype(pixel_count)::value, kVectors = decltype(vector_count)::value;
    const acc_t* w_group = w_data + group * taps * c_in * width + c0;
    Vec acc[P][kVectors];
    for (int p = 0; p < P; ++p) {
      for (int u = 0; u < kVectors; ++u) acc[p][u] = Vec::loadu(bias_data + group * width + c0 + u * V);
    }
    for_each_run([&](int64_t weight_row, const scalar_t* const* x_pixels, int64_t length) {
      const acc_t* w_run = w_group + weight_row * width;
      for (int64_t e = 0; e < length; ++e) {
        Vec w[kVectors];
        for (int u = 0; u < kVectors; ++u) w[u] = Vec::loadu(w_run + e * width + u * V);
        for (int p = 0; p < P; ++p) {
          const Vec xv(static_cast<acc_t>(x_pixels[p][group * c_in + e]));
          for (int u = 0; u < kVectors; ++u) acc[p][u] = at::vec::fmadd(xv, w[u], acc[p][u]);
        }
      }
    });
    acc_t result[kVectors * V];
    for (int p = 0; p < P; ++p) {
      for (int u = 0; u < kVectors; ++u) acc[p][u].store(result + u * V);
      at::vec::convert(result, y_pixels[p] + group * c_out + c0, std::min<int64_t>(kVectors * V, c_out - c0));
    }
  };
  // Every group and block of output channels of P pixels.
  const auto all_channels = [&](auto pixel_count, const auto& for_each_run, scalar_t* const* y_pixels) {
    for (int64_t group = 0; group < groups; ++group) {
      int64_t c0 = 0;
      for (; c0 + 2 * V <= width; c0 += 2 * V) {
        block(pixel_count, std::integral_constant<int, 2>(), group, c0, for_each_run, y_pixels);
      }
      for (; c0 < width; c0 += V) block(pixel_count, std::integral_constant<int, 1>(), group, c0, for_each_run, y_pixels);
    }
  };
  constexpr int kPixels = 4;

  at::parallel_for(0, g.batch * g.conv_out_sizes[0] * out_h, 1, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t oh = row % out_h, od = (row / out_h) % g.conv_out_sizes[0],
                    n = row / (out_h * g.conv_out_sizes[0]);
      const scalar_t* x_image = x_data + n * g.conv_in_volume() * g.conv_in_channels;
      const auto first_tap = [&](int64_t ow) {
        return x_image +
               ((g.tap_position(0, od, 0) * g.conv_in_sizes[1] + g.tap_position(1, oh, 0)) * g.conv_in_sizes[2] +
                g.tap_position(2, ow, 0)) * g.conv_in_channels;
      };
      const bool interior_row = inside(interior[0], od) && inside(interior[1], oh);
      int64_t ow = 0;
      while (ow < out_w) {
        scalar_t* y_pixels[kPixels];
        if (interior_row && inside(interior[2], ow) && ow + kPixels <= interior[2].last) {
          // kPixels interior pixels: every tap at a fixed offset from each pixel's first tap.
          const scalar_t* firsts[kPixels];
          for (int p = 0; p < kPixels; ++p) {
            firsts[p] = first_tap(ow + p);
            y_pixels[p] = y_data + (row * out_w + ow + p) * g.conv_out_channels;
          }
          all_channels(std::integral_constant<int, kPixels>(), [&](const auto& body) {
            const scalar_t* sources[kPixels];
            for (const Run& run : runs) {
              for (int p = 0; p < kPixels; ++p) sources[p] = firsts[p] + run.x_offset;
              body(run.weight_row, sources, run.length);
            }
          }, y_pixels);
          ow += kPixels;
        } else {
          // One pixel, its taps resolved one by one (border pixels, and the interior's last few).
          y_pixels[0] = y_data + (row * out_w + ow) * g.conv_out_channels;
          all_channels(std::integral_constant<int, 1>(), [&](const auto& body) {
            for_each_tap_pixel(g, od, oh, ow, [&](int64_t tap, int64_t in_pixel) {
              const scalar_t* source = x_image + in_pixel * g.conv_in_channels;
              body(tap * c_in, &source, c_in);
            });
          }, y_pixels);
          ow += 1;
        }
      }
    }
  });
}

// The fewest multiply-adds per band where bands are split for the threads (below, batch-1 calls of 12-50 us ran up to
// 1.46x slower split).
constexpr int64_t kBlockedBandMinMultiplyAdds = int64_t(1) << 21;

// PhasePlanes' wanted_row_bands for a driver of `multiply_adds` whose other work items (images x groups x whatever
// else it splits) are `items`: where they leave threads without work, the rows go in more bands (each gathers its
// halo rows again), each of kBlockedBandMinMultiplyAdds or more (waking a thread costs microseconds).
inline int64_t thread_row_bands(int64_t multiply_adds, int64_t items) {
  return std::clamp<int64_t>(multiply_adds / kBlockedBandMinMultiplyAdds, 1,
                             ceil_div(2 * at::get_num_threads(), std::max<int64_t>(items, 1)));
}

// PhasePlanes' row_band_multiple for a driver that splits rows for the threads (wanted_row_bands > 1) and runs `others`
// work items per band (images x groups x whatever else it splits): its bands rounded up to a multiple of this make the
// items a multiple of the threads. A batch-1 conv's 20 rows, whose planes fit 3 rows a band, ran as 7 bands, 4 on one
// thread and 3 on the other. Random layers' calls this changes (blocked kernel and tap tiles), float32, 2 cores
// (Sapphire Rapids class), interleaved: 1.00-1.30x faster on 11 of seeds 1-4 and the suite (geomean 1.12), held out
// 1.05-1.34x on 11 of seeds 5-8 (1.18) and 1.01-1.28x on 12 of seeds 9-12 (1.11), AVX2 1.01-1.24x on 9 of seeds 1-4
// (1.10). A first rule, a multiple of the wanted bands, also split calls already even (2 bands into 4: 0.84-0.92x).
inline int64_t thread_band_multiple(int64_t others, int64_t wanted_row_bands) {
  return wanted_row_bands > 1 ? threads_share_multiple(others) : 1;
}
constexpr int64_t kBlockedWeightPassBytes = 512 * 1024;
// In zeros mode, a band's rows whose kernel rows read only padding along H skip those taps: the band's rows go in runs
// with the same taps inside x, each run a kernel call of its own. That pays where a tap is much work per position,
// input channels per group x output channel blocks of the call >= kRowTapSkipMinWork (2 cores, Zen 4, interleaved
// medians, every call the rule takes: seeds 1-8 and the suite 83 calls 0.58-1.02x, geomean 0.942; held out, seeds
// 9-24, 123 calls 0.55-1.04x, 0.920; AVX2 79 calls, 0.934; bfloat16 33 calls, 0.929). Without the floor, calls with
// 2-12 channels a tap (grouped, few-channel) ran up to 1.32x slower: their extra calls cost more than the taps saved.
// A kernel row skipped is kernel-width taps, so calls under that floor skip rows too where input channels x output
// blocks x the kernel's width >= kRowSkipMinWork and the kernel has more than one row (a kernel of one row has none
// to skip): seeds 1-8 and the suite, 62 calls 0.62-1.09x, geomean 0.937; held out, seeds 9-24, 111 calls 0.63-1.20x,
// 0.929 (the two above 1.05 re-ran at 0.99, 1.07 and 0.96, 0.86); AVX2 67 calls, 0.938; bfloat16 58 calls, 0.952.
constexpr int64_t kRowTapSkipMinWork = 32;
constexpr int64_t kRowSkipMinWork = 40;
// Where rows skip taps and a tap has kColumnSkipMinLanes input channels or more, a run of kColumnSkipMinRows rows or
// more skips the kernel columns that read only padding along W too: its columns go in segments with the same kernel
// columns inside x, each border segment a call per kernel row whose tiles take positions down the columns. The op
// alone against every column's taps (2 cores, Zen 4, interleaved medians, the calls it takes): seeds 1-4 and the
// suite 32 calls 0.90-1.00x (geomean 0.973), held out (seeds 9-12) 29 calls 0.83-1.06x (0.961; the 1.06x 0.94x
// re-run), AVX2 27 calls 0.92-1.04x (0.982), bfloat16 21 calls 0.90-1.00x (0.968). Without the lanes floor, convs of
// 3-7 input channels ran 1.04-1.09x slower on AVX2: a kernel row's call is few multiply-adds a position against its
// tiles' loads and stores of the outputs, and the narrower interior's tiles hold fewer positions.
constexpr int64_t kColumnSkipMinRows = 4, kColumnSkipMinLanes = 16;
// A 3-d kernel's depth taps of consecutive output depths read the same input slices where the depth stride is below
// the kernel's depth: each thread keeps the planes of depth_slot_span slices (depth slots) and gathers each slice
// once per band, where each re-gathered it for every output depth (a channels-last 7 -> 14 k6 s3 conv over 35^3:
// gathers 22% of its time). Where the slots' planes fit kDepthSlotsBytes and the gathers they save a thread are at
// least kDepthSlotsMinSavedPerPlane times the planes they add (each allocated and zeroed once a thread: a 4 x 9 x 7^3
// k7 s2 conv with 2 output depths ran 1.14-1.19x slower with slots). 2 cores (Zen 4), float32, AVX-512, the op
// alone, interleaved, the 3-d calls on the blocked kernel: seeds 1-4 32 calls 0.85-1.05x (geomean 0.969; that conv
// 0.92x), held out, seeds 13-16, 42 calls 0.79-1.33x (0.965; the 1.33x call 1.00x in two re-runs); AVX2 54 calls
// 0.83-1.10x (geomean 0.957-0.973; the 1.10x call 0.97x re-run), bfloat16 17 calls 0.85-1.00x (0.953).
constexpr int64_t kDepthSlotsBytes = 512 * 1024;
constexpr int64_t kDepthSlotsMinSavedPerPlane = 2;

// Dense and grouped with float accumulation on an AVX2 or AVX-512 CPU, NCHW or channels-last: per (image, group, band
// of output rows, range of output-channel blocks), the group's input channels become channels-last phase planes (the
// NCHW copy transposes the band), and the register-blocked micro-kernel of cpu/blocked_direct.h computes every tap
// and input channel of a tile of outputs in registers, out[band, co]. The band's kernel depth slices add onto it.
// Each y may be any strided view (a transposed conv's stride phase writes its positions of the whole output in
// place). Several convs over the same x (`outputs`, blocked_convs in cpu/blocked_conv.h) share one gather per band:
// g is then a conv that covers them all, whose planes every output's taps read. Element: what the planes and weights
// hold, float (converted from scalar_t), or uint16_t for the bfloat16 dot-product kernel, whose planes keep the
// input's bfloat16 and whose weights pair input channels. With no_planes (cpu_blocked_no_planes: a float32
// channels-last x whose padding no tap reads), the tiles read x in place.
template <typename scalar_t, typename Element>
void blocked_direct_conv(const ConvGeometry& g, const at::Tensor& x, const std::vector<BlockedOutput>& outputs,
                         const at::Tensor& bias, bool channels_last, bool no_planes,
                         void (*micro_kernel)(const BlockedDirectArgs<Element>&, int64_t), int64_t vector,
                         int64_t max_vectors, void (*pack_lanes)(const WeightLanes&) = nullptr,
                         void (*transpose)(const FloatTranspose&) = nullptr) {
  constexpr bool kPairs = std::is_same_v<Element, uint16_t>;
  using Plane = std::conditional_t<kPairs, at::BFloat16, float>;
  const int64_t groups = g.groups, c_in = g.conv_in_channels_per_group(), c_out = g.conv_out_channels_per_group();
  const auto output_count = static_cast<int64_t>(outputs.size());
  TORCH_INTERNAL_ASSERT(!kPairs || c_in % 2 == 0, "fastpad: the bfloat16 dot-product kernel takes channel pairs");
  TORCH_INTERNAL_ASSERT(!no_planes || (std::is_same_v<scalar_t, Element> && channels_last && g.reads_no_padding()),
                        "fastpad: the blocked kernel reads only a channels-last input of its own type in place");
  TORCH_INTERNAL_ASSERT(output_count == 1 || (!no_planes && g.kernel[0] == 1 && g.conv_out_sizes[0] == 1),
                        "fastpad: convs share a gather in 1-d and 2-d, from the phase planes");
  const int64_t block_width = blocked_direct_block_width(c_out, vector, max_vectors);
  const int64_t depth = g.kernel[0], taps_2d = g.kernel[1] * g.kernel[2];
  const int64_t co_blocks = (c_out + block_width - 1) / block_width, out_pitch = (c_out + vector - 1) / vector * vector;
  const auto options = at::TensorOptions(at::kFloat);
  const scalar_t* x_data = x.const_data_ptr<scalar_t>();
  const auto y_stride = element_strides(outputs[0].y);  // the same for every output (views of one y, or one y)
  std::vector<scalar_t*> y_data;
  for (const BlockedOutput& o : outputs) {
    TORCH_INTERNAL_ASSERT(element_strides(o.y) == y_stride,
                          "fastpad: the outputs of blocked convs share their strides");
    y_data.push_back(o.y.mutable_data_ptr<scalar_t>());
  }
  const int64_t slice = g.conv_in_sizes[1] * g.conv_in_sizes[2];
  // A float32 output with contiguous channels is written by the tiles in place, the last vector of a group's channels
  // masked to them: no band buffer to fill and copy from. Against the copy (2 cores, interleaved, typical calls): the
  // suite's channels-last blocked layers 0.83-0.99x forward (groups of whole vectors, Zen 5); where a group's channels
  // end inside a vector (Sapphire Rapids), the random layers' calls 0.65-1.03x (seeds 1-4, geomean 0.91), 0.65-1.32x
  // and 0.67-1.19x held out (0.94, 0.92), AVX2 0.68-1.02x (0.93): the copy, a call per pixel, cost most where a group
  // has few channels (benchmarks/RESULTS.md).
  const bool in_place = std::is_same_v<scalar_t, float> && y_stride[1] == 1;
  // In place from the planes, the tiles write each output once where the kernel has one depth tap and each output's
  // weights go in one pass (kBlockedWeightPassBytes): nothing of the output is re-read, so the band's budget holds the
  // planes alone, and bands grow (seed 2's random061 input gradient, 48 -> 298 k5 over 24 x 24: 12 bands of 2 rows
  // became 2 of 12, whose row runs then skip border columns: 0.89-0.94x its time). Taken only where the bands still
  // give each thread whole bands: with fewer bands the output-channel blocks are split across work items, unevenly
  // where the last block is short (a batch-1 30 -> 205 k6 conv over 20 x 20, one band in 4 splits: 1.19x slower).
  bool written_once = in_place && !no_planes && depth == 1;
  for (const BlockedOutput& o : outputs) {
    written_once = written_once && o.conv.kernel[1] * o.conv.kernel[2] * static_cast<int64_t>(sizeof(Element)) *
                                       blocked_direct_weight_tap_pitch(c_in, block_width, sizeof(Element)) <=
                                       kBlockedWeightPassBytes;
  }
  int64_t multiply_adds = 0;
  for (const BlockedOutput& o : outputs) multiply_adds += conv_multiply_adds(o.conv);
  // Where images x groups x output-channel blocks do not divide evenly among the threads, a 1-d or 2-d conv's rows go
  // in the fewest bands that make them divide, where those divide the rows more evenly than the threads divide the
  // items (a batch-5 42 -> 28 k6 s2 transposed conv: 0.85-0.89x). With the written-once bands, the op alone against
  // neither, the calls they change (2 cores, Zen 4, interleaved medians): seeds 1-4 and the suite 58 calls 0.85-1.05x
  // (geomean 0.987; the 1.05x 1.00x re-run), held out (seeds 9-12) 47 calls 0.82-1.02x (0.985), AVX2 71 calls
  // 0.88-1.03x (0.992), bfloat16 11 calls 0.81-1.00x (0.953). For every item count and in 3-d too, AVX2 calls ran up
  // to 1.32x slower (a 3-d conv's 7 rows in bands of 4 and 3, no evener than its 7 blocks, each band re-gathering its
  // halo rows for every output depth).
  const int64_t threads = at::get_num_threads(), items = g.batch * groups * co_blocks;
  const int64_t share = threads_share_multiple(items), out_rows = g.conv_out_sizes[1];
  const bool rows_share_evener =
      depth == 1 && g.conv_out_sizes[0] == 1 &&
      ceil_div(out_rows, share) * share * items < ceil_div(items, threads) * threads * out_rows;
  const int64_t wanted_row_bands =
      std::max(thread_row_bands(multiply_adds, items),
               rows_share_evener ? std::clamp<int64_t>(multiply_adds / kBlockedBandMinMultiplyAdds, 1, share) : 1);
  // Output-channel blocks are split across work items only where images, groups and bands leave threads idle.
  const auto co_splits_of = [&](int64_t slices) {
    return std::clamp<int64_t>((2 * threads + slices - 1) / slices, 1, co_blocks);
  };
  // The bands, planned by a PhasePlanes that only plans them and the band buffer's pitch (each thread has its own
  // planes, none in place). The band buffer's bytes count in its budget: in place (no planes) they alone size the
  // bands (planes of c_in lanes limited a batch-3 410 -> 64 k5 conv over 23 x 23 to bands of one row of 8 positions,
  // its tiles to 4 positions).
  std::optional<PhasePlanes<Plane>> band_planner;
  int64_t bytes_per_position = 0, row_band_multiple = 1;
  const auto emplace_planes = [&](std::optional<PhasePlanes<Plane>>& planes) {
    planes.emplace(g, 1, kPhasePlaneBytes, bytes_per_position, /*lanes=*/no_planes ? 0 : c_in, wanted_row_bands,
                   row_band_multiple);
    return &*planes;
  };
  const auto plan_bands = [&](bool band_buffer) {
    bytes_per_position = band_buffer ? out_pitch * static_cast<int64_t>(sizeof(float)) : 0;  // out[band, out_pitch]
    row_band_multiple = 1;
    emplace_planes(band_planner);
    row_band_multiple = thread_band_multiple(
        g.batch * groups * co_splits_of(g.batch * groups * band_planner->bands()), wanted_row_bands);
    if (band_planner->bands() % row_band_multiple != 0) emplace_planes(band_planner);
  };
  plan_bands(!written_once);
  if (written_once && (g.batch * groups * band_planner->bands()) % threads != 0) plan_bands(true);
  const PhasePlanes<Plane>& band_plan = *band_planner;
  const int64_t bands = band_plan.bands();
  const int64_t slices = g.batch * groups * bands;
  const int64_t co_splits = co_splits_of(slices);

  // In place, tap (kh, kw) of a band reads x from its first position's pixel on, positions stride_w pixels apart and
  // rows stride_h rows apart; the planes hold a position's c_in channels together, a row pitch of positions apart.
  std::vector<int64_t> input_tap_offsets(no_planes ? taps_2d : 0);
  for (int64_t tap = 0; tap < static_cast<int64_t>(input_tap_offsets.size()); ++tap) {
    input_tap_offsets[tap] = ((tap / g.kernel[2]) * g.dilation[1] * g.conv_in_sizes[2] + (tap % g.kernel[2]) *
                              g.dilation[2]) * g.conv_in_channels;
  }
  const int64_t x_position_stride = no_planes ? g.stride[2] * g.conv_in_channels : c_in;
  const int64_t x_row_stride =
      no_planes ? g.stride[1] * g.conv_in_sizes[2] * g.conv_in_channels : band_plan.pitch() * c_in;

  // Each output's weights for the tiles: [groups, kd, co_blocks, kh*kw, tap_pitch], each tap's [Cg_in, block_width]
  // (pairs: [Cg_in / 2, block_width, 2]) at its start, zero beyond Cg_out, in one pass over the weight [C_out, Cg_in,
  // kd, kh, kw] read through its strides (large weights over few positions spent longer in three ATen copies than in
  // the kernel, and a channels-last weight's copy to contiguous took 8% of a batch-1 298 -> 48 k5 conv). Its tap
  // kh * kw_count + kw reads g's tap covering_taps[that]; runs of `run` taps are read as one (blocked_tap_run).
  struct PackedWeights {
    std::vector<int64_t> covering_taps;
    int64_t taps_2d = 0, run = 1, runs = 0, tap_pitch = 0, runs_per_pass = 1;
    at::Tensor packed;
  };
  const auto pack_weights = [&](const BlockedOutput& o) {
    PackedWeights p;
    const int64_t kw_count = o.conv.kernel[2], taps_2d = o.conv.kernel[1] * kw_count;
    p.taps_2d = taps_2d;
    for (int64_t tap = 0; tap < taps_2d; ++tap) {
      p.covering_taps.push_back((o.tap_row + tap / kw_count) * g.kernel[2] + o.tap_col + tap % kw_count);
    }
    const at::Tensor w_source = o.weight.to(kPairs ? at::kBFloat16 : at::kFloat);
    const Element* w_from = reinterpret_cast<const Element*>(w_source.const_data_ptr());
    const auto w_strides = w_source.strides();
    const int64_t w_dims = w_source.dim();
    const int64_t kd_stride = w_dims == 5 ? w_strides[2] : 0, kh_stride = w_dims >= 4 ? w_strides[w_dims - 2] : 0;
    std::vector<int64_t> tap_starts(taps_2d);
    for (int64_t tap = 0; tap < taps_2d; ++tap) {
      const int64_t covering = p.covering_taps[tap];
      tap_starts[tap] = no_planes ? input_tap_offsets[covering] : band_plan.taps()[covering] - band_plan.taps()[0];
    }
    const int64_t run = blocked_tap_run(tap_starts, c_in), runs = taps_2d / run;
    p.run = run;
    p.runs = runs;
    std::vector<int64_t> tap_offsets(taps_2d);  // tap kh * kw_count + kw's, from its (co, ci, kd)
    for (int64_t tap = 0; tap < taps_2d; ++tap) {
      tap_offsets[tap] = (tap / kw_count) * kh_stride + (tap % kw_count) * w_strides[w_dims - 1];
    }
    // A run's taps follow one another with no padding between them: one block of run x c_in rows.
    const int64_t tap_pitch =
        run > 1 ? c_in * block_width : blocked_direct_weight_tap_pitch(c_in, block_width, sizeof(Element));
    p.tap_pitch = tap_pitch;
    p.packed = at::empty({groups * depth * co_blocks * taps_2d * tap_pitch},
                         options.dtype(kPairs ? at::kBFloat16 : at::kFloat));
    Element* w_to = reinterpret_cast<Element*>(p.packed.mutable_data_ptr());
    // Items of kPackChannels input channels: each output channel's source taps are read in runs, and the item's
    // destination (taps x kPackChannels x block_width) stays in cache while it is written a column at a time (a store
    // per tap, tap_pitch apart).
    constexpr int64_t kPackChannels = 16;
    const int64_t ci_chunks = (c_in + kPackChannels - 1) / kPackChannels;
    // Where each input channel's taps are contiguous, pack_lanes (float32) packs a vector of output channels at a time,
    // transposed in registers (random layers' blocked calls, 2 cores, interleaved, AVX-512: 0.65-1.04x the time of the
    // copy a value at a time on 279 calls, geomean 0.96; a batch-1 150 -> 239 k5 conv over 9 x 9 0.77x).
    // A channels-last weight ([C_out, kd, kh, kw, Cg_in] in memory: each tap's input channels contiguous, the taps
    // evenly apart) packs the same way with the roles of taps and input channels swapped: runs of input channels,
    // one per tap, each value (an input channel) a block-width row apart and each run (a tap) a tap pitch apart.
    // Before, its values were copied one at a time, each from another cache line (13% of a batch-1 298 -> 48 k5
    // conv's time).
    bool taps_contiguous = true, channels_contiguous = w_strides[1] == 1;
    for (int64_t tap = 0; tap < taps_2d; ++tap) {
      taps_contiguous = taps_contiguous && tap_offsets[tap] == tap;
      channels_contiguous = channels_contiguous && tap_offsets[tap] == tap * w_strides[w_dims - 1];
    }
    const bool lane_packs = pack_lanes != nullptr && (taps_contiguous || channels_contiguous);
    at::parallel_for(0, groups * depth * co_blocks * ci_chunks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t item = begin; item < end; ++item) {
        const int64_t chunk = item % ci_chunks, block_item = item / ci_chunks;
        const int64_t block = block_item % co_blocks, kd = (block_item / co_blocks) % depth,
                      group = block_item / (co_blocks * depth);
        Element* to = w_to + block_item * taps_2d * tap_pitch;
        const int64_t ci_end = std::min(c_in, (chunk + 1) * kPackChannels);
        if constexpr (!kPairs) {
          if (lane_packs) {
            const int64_t ci0 = chunk * kPackChannels;
            for (int64_t lane0 = 0; lane0 < block_width; lane0 += vector) {
              const int64_t co0 = block * block_width + lane0;
              const float* from = w_from + (group * c_out + co0) * w_strides[0] + ci0 * w_strides[1] + kd * kd_stride;
              const int64_t rows = std::clamp<int64_t>(c_out - co0, 0, vector);
              if (taps_contiguous) {
                pack_lanes({from, w_strides[0], rows, ci_end - ci0, taps_2d, w_strides[1],
                            to + ci0 * block_width + lane0, tap_pitch, block_width});
              } else {
                pack_lanes({from, w_strides[0], rows, taps_2d, ci_end - ci0, w_strides[w_dims - 1],
                            to + ci0 * block_width + lane0, block_width, tap_pitch});
              }
            }
            continue;
          }
        }
        const int64_t lane_step = kPairs ? 2 : 1;
        for (int64_t b = 0; b < block_width; ++b) {
          const int64_t co = block * block_width + b;
          for (int64_t ci = chunk * kPackChannels; ci < ci_end; ++ci) {
            // Pairs: [tap][ci / 2][b][ci % 2]; floats: [tap][ci][b].
            Element* column = to + (kPairs ? (ci / 2) * block_width * 2 + ci % 2 : ci * block_width) + b * lane_step;
            if (co >= c_out) {  // the last block's lanes past the real channels
              for (int64_t tap = 0; tap < taps_2d; ++tap) column[tap * tap_pitch] = Element(0);
              continue;
            }
            const Element* taps = w_from + (group * c_out + co) * w_strides[0] + ci * w_strides[1] + kd * kd_stride;
            for (int64_t tap = 0; tap < taps_2d; ++tap) column[tap * tap_pitch] = taps[tap_offsets[tap]];
          }
        }
      }
    });
    // A block's weights stream from L2 once per tile; where they outgrow it (a 298 -> 48 k5 conv's 25 taps: 1.4 MiB of
    // the Zen 5's 1 MiB), the taps go in passes of at most kBlockedWeightPassBytes of weights, each adding onto the
    // tiles' outputs (random layers with such weights, float32, 2 cores: 0.87-1.01x the time of one pass).
    p.runs_per_pass = std::clamp<int64_t>(
        kBlockedWeightPassBytes / (run * tap_pitch * static_cast<int64_t>(sizeof(Element))), 1, runs);
    return p;
  };
  std::vector<PackedWeights> packed;
  for (const BlockedOutput& o : outputs) packed.push_back(pack_weights(o));
  // The bias (or zeros) [groups, co_blocks * block_width].
  const at::Tensor init = at::zeros({groups, co_blocks * block_width}, options);
  if (bias.defined()) init.narrow(1, 0, c_out).copy_(bias.view({groups, c_out}));
  const float* init_data = init.const_data_ptr<float>();

  // Depth slots (kDepthSlotsBytes): the gathers of depth slices they save a thread against the planes they add.
  int64_t depth_gathers = 0;
  std::vector<bool> slice_read(g.conv_in_sizes[0], false);
  for (int64_t od = 0; od < g.conv_out_sizes[0]; ++od) {
    for (int64_t kd = 0; kd < depth; ++kd) {
      const int64_t id = g.tap_source(0, od, kd);
      if (id < 0) continue;
      ++depth_gathers;
      slice_read[id] = true;
    }
  }
  const int64_t gathers_saved = depth_gathers - std::count(slice_read.begin(), slice_read.end(), true);
  const bool depth_slots =
      depth_slot_span(g) * band_plan.channel_stride() * static_cast<int64_t>(sizeof(Plane)) <= kDepthSlotsBytes &&
      ceil_div(slices, threads) * gathers_saved >= kDepthSlotsMinSavedPerPlane * (depth_slot_span(g) - 1);
  at::parallel_for(0, slices * co_splits, 1, [&](int64_t begin, int64_t end) {
    // The planes of depth_slot_span input depth slices of the band (one slot where depth_slots is false): where the
    // depth taps of consecutive output depths read the same slices (a depth stride below the kernel's depth), each
    // slice is gathered once for all of them. slot_slice: the slice each holds, -1 for none.
    const int64_t slot_count = no_planes ? 0 : (depth_slots ? depth_slot_span(g) : 1);
    std::vector<std::optional<PhasePlanes<Plane>>> slots(slot_count);
    for (auto& slot : slots) emplace_planes(slot);
    std::vector<int64_t> slot_slice(slot_count, -1);
    int64_t slots_item = -1;  // the (image, group, band) the slots hold slices of
    // Per output, where each run's first tap reads: in place, set per band; in the planes, per slot (the same for
    // every band).
    std::vector<std::vector<const Element*>> run_taps(output_count);
    const auto read_slot = [&](int64_t q, int64_t s) {
      const PackedWeights& w = packed[q];
      for (int64_t r = 0; r < w.runs; ++r) {
        run_taps[q][r] = reinterpret_cast<const Element*>(slots[s]->taps()[w.covering_taps[r * w.run]]);
      }
    };
    for (int64_t q = 0; q < output_count; ++q) {
      run_taps[q].resize(packed[q].runs);
      if (!no_planes) read_slot(q, 0);
    }
    std::vector<float> out(in_place ? 0 : band_plan.band_buffer_size() * out_pitch);
    std::vector<float> channel_rows;  // a 16-bit NCHW y's row: its channels transposed in float, then converted
    struct RowRun {
      int64_t first, count;        // the band's rows [first, first + count)
      int64_t run_begin, run_end;  // the weight's tap runs these rows read inside x
    };
    std::vector<RowRun> row_runs;
    std::vector<const Element*> shifted_taps;  // a call's tap pointers, moved to its first position
    struct ColumnSegment {
      int64_t first, count;        // the band's columns [first, first + count)
      int64_t kw_begin, kw_end;    // the kernel columns they read inside x
    };
    std::vector<ColumnSegment> column_segments;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t split = item % co_splits, band_index = (item / co_splits) % bands;
      const int64_t group = (item / (co_splits * bands)) % groups, n = item / (co_splits * bands * groups);
      const Band band = band_plan.band(band_index);
      const int64_t block_begin = split * co_blocks / co_splits, block_end = (split + 1) * co_blocks / co_splits;
      const int64_t co_begin = block_begin * block_width, co_end = std::min(block_end * block_width, c_out);
      for (int64_t od = 0; od < g.conv_out_sizes[0]; ++od) {
        // One output after another, each computed and stored from the one band buffer; with more than one, the kernel
        // has one depth tap, whose planes the first output gathers and the others read.
        for (int64_t q = 0; q < output_count; ++q) {
          const PackedWeights& w = packed[q];
          // Output q's part of the band: its rows and columns (fewer than the band's where its outputs end sooner).
          const ConvGeometry& own = outputs[q].conv;
          const int64_t rows = std::clamp<int64_t>(own.conv_out_sizes[1] - band.row0, 0, band.rows);
          const int64_t cols = std::clamp<int64_t>(own.conv_out_sizes[2] - band.col0, 0, band.cols);
          BlockedDirectArgs<Element> a{run_taps[q].data(), w.runs, w.run * c_in, x_row_stride, x_position_stride,
                                       nullptr, w.run * w.tap_pitch, w.taps_2d * w.tap_pitch, block_width,
                                       block_begin, block_end, out.data(), out_pitch, band_plan.pitch() * out_pitch,
                                       rows, cols, init_data + group * co_blocks * block_width, false};
          // The band's first kept position in y.
          scalar_t* y_band = y_data[q] + n * y_stride[0] + (group * c_out) * y_stride[1] + od * y_stride[2] +
                             band.row0 * y_stride[3] + band.col0 * y_stride[4];
          if constexpr (std::is_same_v<scalar_t, float>) {
            if (in_place) {
              a.out = y_band;
              a.out_pitch = y_stride[4];
              a.out_row_stride = y_stride[3];
            }
          }
          // The band's rows in runs whose kernel rows inside x are the same (kRowTapSkipMinWork); one run of every tap
          // otherwise, and where the rows make one run only. Whole kernel rows are whole tap runs where a run divides
          // the kernel's width.
          const int64_t kernel_width = own.kernel[2];
          const int64_t tap_work = c_in * (block_end - block_begin);
          const bool skips_rows = g.mode == PaddingMode::Zeros && !no_planes && kernel_width % w.run == 0 &&
                                  (tap_work >= kRowTapSkipMinWork ||
                                   (own.kernel[1] > 1 && tap_work * kernel_width >= kRowSkipMinWork));
          row_runs.assign(1, {0, a.rows, 0, w.runs});
          if (skips_rows) {
            row_runs.clear();
            for (int64_t r = 0; r < a.rows; ++r) {
              const InteriorRange kh = own.taps_inside(1, band.row0 + r);
              const int64_t run_begin = kh.first * kernel_width / w.run, run_end = kh.last * kernel_width / w.run;
              if (!row_runs.empty() && row_runs.back().run_begin == run_begin && row_runs.back().run_end == run_end) {
                ++row_runs.back().count;
              } else {
                row_runs.push_back({r, 1, run_begin, run_end});
              }
            }
            if (row_runs.size() <= 1) row_runs.assign(1, {0, a.rows, 0, w.runs});
          }
          // The band's columns in segments of one range of kernel columns inside x (kColumnSkipMinRows), where taps
          // go one by one (a kernel row's taps are then a range of the weight's); one segment of every tap otherwise.
          column_segments.assign(1, {0, cols, 0, kernel_width});
          if (skips_rows && w.run == 1 && c_in >= kColumnSkipMinLanes) {
            column_segments.clear();
            for (int64_t c = 0; c < cols; ++c) {
              const InteriorRange kw = own.taps_inside(2, band.col0 + c);
              if (!column_segments.empty() && column_segments.back().kw_begin == kw.first &&
                  column_segments.back().kw_end == kw.last) {
                ++column_segments.back().count;
              } else {
                column_segments.push_back({c, 1, kw.first, kw.last});
              }
            }
          }
          for (int64_t kd = 0; kd < depth; ++kd) {
            const int64_t id = g.tap_source(0, od, kd);
            if (id < 0) continue;
            if (no_planes) {
              if constexpr (std::is_same_v<scalar_t, Element>) {
                const scalar_t* band_start =
                    x_data + ((n * g.conv_in_sizes[0] + id) * slice + g.tap_position(1, band.row0, 0) *
                              g.conv_in_sizes[2] + g.tap_position(2, band.col0, 0)) * g.conv_in_channels + group * c_in;
                for (int64_t r = 0; r < w.runs; ++r) {
                  run_taps[q][r] = band_start + input_tap_offsets[w.covering_taps[r * w.run]];
                }
              }
            } else if (q == 0) {
              if (item / co_splits != slots_item) {
                std::fill(slot_slice.begin(), slot_slice.end(), -1);
                slots_item = item / co_splits;
              }
              const int64_t s = id % slot_count;  // depth_slot_span's slot
              if (slot_slice[s] != id) {
                slot_slice[s] = id;
                if (channels_last) {
                  slots[s]->gather(x_data + (n * g.conv_in_sizes[0] + id) * slice * g.conv_in_channels + group * c_in,
                                   band, 0, g.conv_in_channels);
                } else {
                  slots[s]->gather(x_data + (n * g.conv_in_channels + group * c_in) * g.conv_in_volume() + id * slice,
                                   band, 0, 1, g.conv_in_volume(), transpose);
                }
              }
              if (slot_count > 1) read_slot(q, s);
            }
            if (rows == 0 || cols == 0) continue;
            const Element* w_kd = reinterpret_cast<const Element*>(w.packed.const_data_ptr()) +
                                  (group * depth + kd) * co_blocks * w.taps_2d * w.tap_pitch;
            for (int64_t run0 = 0; run0 < w.runs; run0 += w.runs_per_pass) {
              const int64_t pass_end = std::min(w.runs_per_pass + run0, w.runs);
              for (const RowRun& rows : row_runs) {
                // This pass's runs that these rows read; a first pass with none still sets them from init.
                const int64_t lo = std::max(run0, rows.run_begin), hi = std::max(lo, std::min(pass_end, rows.run_end));
                if (hi == lo && a.accumulate) continue;
                // The taps [tap_lo, tap_hi) over the rows' columns [col, col + count): moved to their first position,
                // in a call of their own. `down_columns`: the positions taken down each column (the tiles' positions
                // along a column, stride a row), so that a segment of one column still fills tiles.
                const auto call = [&](int64_t tap_lo, int64_t tap_hi, int64_t col, int64_t count, bool down_columns,
                                      bool accumulate) {
                  BlockedDirectArgs<Element> part = a;
                  const int64_t shift = rows.first * x_row_stride + col * x_position_stride;
                  part.taps = run_taps[q].data() + tap_lo;
                  if (shift != 0) {
                    shifted_taps.resize(tap_hi - tap_lo);
                    for (int64_t r = tap_lo; r < tap_hi; ++r) shifted_taps[r - tap_lo] = run_taps[q][r] + shift;
                    part.taps = shifted_taps.data();
                  }
                  part.num_taps = tap_hi - tap_lo;
                  part.weights = w_kd + tap_lo * w.run * w.tap_pitch;
                  part.out = a.out + rows.first * a.out_row_stride + col * a.out_pitch;
                  part.rows = rows.count;
                  part.cols = count;
                  part.accumulate = accumulate;
                  if (down_columns) {
                    std::swap(part.rows, part.cols);
                    std::swap(part.x_row_stride, part.x_position_stride);
                    std::swap(part.out_row_stride, part.out_pitch);
                  }
                  micro_kernel(part, in_place ? c_out : out_pitch);  // the band buffer's lanes past c_out need no mask
                };
                if (column_segments.size() == 1 || rows.count < kColumnSkipMinRows) {
                  call(lo, hi, 0, cols, false, a.accumulate);
                  continue;
                }
                for (const ColumnSegment& columns : column_segments) {
                  if (columns.kw_begin == 0 && columns.kw_end == kernel_width) {
                    call(lo, hi, columns.first, columns.count, false, a.accumulate);
                    continue;
                  }
                  // Each kernel row's taps inside x, this pass's of them; the first call sets them from init.
                  bool accumulate = a.accumulate;
                  for (int64_t kh = rows.run_begin / kernel_width; kh < rows.run_end / kernel_width; ++kh) {
                    const int64_t tap_lo = std::max(lo, kh * kernel_width + columns.kw_begin);
                    const int64_t tap_hi = std::min(hi, kh * kernel_width + columns.kw_end);
                    if (tap_hi <= tap_lo) continue;
                    call(tap_lo, tap_hi, columns.first, columns.count, true, accumulate);
                    accumulate = true;
                  }
                  if (!accumulate) call(lo, lo, columns.first, columns.count, true, false);
                }
              }
              a.accumulate = true;
            }
          }
          if (!a.accumulate) {  // every depth tap read zero padding: the bias alone
            for (int64_t r = 0; r < rows; ++r) {
              for (int64_t c = 0; c < cols; ++c) {
                std::copy(a.init + co_begin, a.init + co_end,
                          a.out + r * a.out_row_stride + c * a.out_pitch + co_begin);
              }
            }
          }
          if (in_place) continue;
          for (int64_t r = 0; r < rows; ++r) {  // the kept columns of each row
            const float* out_row = out.data() + r * band_plan.pitch() * out_pitch;
            scalar_t* y_row = y_band + r * y_stride[3];
            if (y_stride[1] == 1) {  // channels-last: each pixel's channels are contiguous
              for (int64_t c = 0; c < cols; ++c) {
                at::vec::convert(out_row + c * out_pitch + co_begin, y_row + c * y_stride[4] + co_begin,
                                 co_end - co_begin);
              }
            } else if (std::is_same_v<scalar_t, float> && transpose != nullptr &&
                       float_transpose_pays(cols, co_end - co_begin) && float_transpose_takes(y_stride[4])) {
              transpose({out_row + co_begin, out_pitch, cols, co_end - co_begin,
                         reinterpret_cast<float*>(y_row + co_begin * y_stride[1]), y_stride[1], y_stride[4]});
            } else if (sizeof(scalar_t) == 2 && transpose != nullptr &&
                       float_transpose_pays(cols, co_end - co_begin) && y_stride[4] == 1) {
              // 16-bit: the same register transpose into a float row per channel, each converted into y in one
              // vectorized run (value by value, bfloat16 calls took 0.97-2.28x this time, float16 0.98-1.73x).
              channel_rows.resize((co_end - co_begin) * cols);
              transpose({out_row + co_begin, out_pitch, cols, co_end - co_begin, channel_rows.data(), cols, 1});
              for (int64_t co = co_begin; co < co_end; ++co) {
                at::vec::convert(channel_rows.data() + (co - co_begin) * cols, y_row + co * y_stride[1], cols);
              }
            } else {  // transposed kChannelBlock channels at a time: each pixel's channels read whole
              constexpr int64_t kChannelBlock = 16;
              for (int64_t co0 = co_begin; co0 < co_end; co0 += kChannelBlock) {
                const int64_t block_end = std::min(co0 + kChannelBlock, co_end);
                for (int64_t c = 0; c < cols; ++c) {
                  for (int64_t co = co0; co < block_end; ++co) {
                    y_row[co * y_stride[1] + c * y_stride[4]] = static_cast<scalar_t>(out_row[c * out_pitch + co]);
                  }
                }
              }
            }
          }
        }
      }
    }
  });
}

// Channels-last, one group, enough input channels: the NHWC form of the tap GEMMs below. Per (image, band of output
// rows), phase planes keep every position's C_in channels together (lanes), so a tap is a [band, C_in] matrix and
// out[band, C_out] accumulates planes_tap @ W_tap[C_in, C_out] for every (kh, kw) tap: no im2col.
template <typename scalar_t>
void phase_plane_conv_nhwc(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& weight,
                           const at::Tensor& bias, at::Tensor& y) {
  using acc_t = acc_type<scalar_t>;
  const auto acc_dtype = c10::CppTypeToScalarType<acc_t>::value;
  const auto options = at::TensorOptions(acc_dtype);
  const int64_t c_in = g.conv_in_channels, c_out = g.conv_out_channels, taps_2d = g.kernel[1] * g.kernel[2];
  const int64_t slice = g.conv_in_sizes[1] * g.conv_in_sizes[2], out_w = g.conv_out_sizes[2],
                out_slice = g.conv_out_sizes[1] * out_w;
  // [kd, kh*kw, C_in, C_out]
  const at::Tensor w_acc =
      weight.to(acc_dtype).reshape({c_out, c_in, g.kernel[0], taps_2d}).permute({2, 3, 1, 0}).contiguous();
  const acc_t* w_data = w_acc.const_data_ptr<acc_t>();
  const at::Tensor bias_acc = bias.defined() ? bias.to(acc_dtype) : at::zeros({c_out}, options);
  const acc_t* bias_data = bias_acc.const_data_ptr<acc_t>();
  const scalar_t* x_data = x.const_data_ptr<scalar_t>();
  scalar_t* y_data = y.mutable_data_ptr<scalar_t>();
  const int64_t bytes_per_position = c_out * static_cast<int64_t>(sizeof(acc_t));  // out[band, C_out]
  const auto make_planes = [&] { return PhasePlanes<acc_t>(g, 1, kGemmPhasePlaneBytes, bytes_per_position, c_in); };
  const int64_t bands = make_planes().bands();

  at::parallel_for(0, g.batch * bands, 1, [&](int64_t begin, int64_t end) {
    PhasePlanes<acc_t> planes = make_planes();
    const int64_t band_size = planes.band_buffer_size();
    std::vector<acc_t> out(band_size * c_out);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t n = item / bands;
      const Band band = planes.band(item % bands);
      const int64_t n_pos = planes.positions(band.rows);
      auto out_view = at::from_blob(out.data(), {n_pos, c_out}, options);
      for (int64_t od = 0; od < g.conv_out_sizes[0]; ++od) {
        for (int64_t t = 0; t < n_pos; ++t) std::copy_n(bias_data, c_out, out.data() + t * c_out);
        for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
          const int64_t id = g.tap_source(0, od, kd);
          if (id < 0) continue;
          planes.gather(x_data + (n * g.conv_in_sizes[0] + id) * slice * c_in, band, 0, c_in);
          for (int64_t tap = 0; tap < taps_2d; ++tap) {
            out_view.addmm_(at::from_blob(planes.taps()[tap], {n_pos, c_in}, options),
                            wrap_buffer(const_cast<acc_t*>(w_data) + (kd * taps_2d + tap) * c_in * c_out, {c_in, c_out}));
          }
        }
        for (int64_t r = 0; r < band.rows; ++r) {  // the kept columns of each row: cols pixels of C_out channels
          at::vec::convert(
              out.data() + r * planes.pitch() * c_out,
              y_data + ((n * g.conv_out_sizes[0] + od) * out_slice + (band.row0 + r) * out_w + band.col0) * c_out,
              band.cols * c_out);
        }
      }
    }
  });
}

// Dense and grouped, per (image, group, band of output rows): the group's input channels become phase planes
// (cpu/phase_planes.h), one per channel, and out[Cg_out, band] accumulates one GEMM per (kh, kw) tap read straight off
// the planes, W_tap[Cg_out, Cg_in] @ planes_tap[Cg_in, band]: no im2col at all. With `tiles` (cpu_tap_tiles_*: float
// accumulation), the tap GEMMs are summed in cpu/reduction_tiles.h's registers, out read and written once per band
// and kernel depth, vectors along the output positions (no lane wasted on a few output channels); a channels-last x
// is then gathered into the planes a run of channels per pixel at a time, and y written a pixel's channels at a time,
// float32 through `transpose` (the ISA's transpose_floats) where float_transpose_pays: blocks of pixels x channels
// transposed in registers, not a value at a time (random channels-last calls with 8+ channels, 2 cores, Sapphire
// Rapids: up to 1.37x faster, geomean 1.07 on seeds 1-4, 1.01 and 1.16 held out, AVX2 1.04; benchmarks/RESULTS.md).
// Otherwise (NCHW only) torch's GEMM per tap. With few input channels the taps are copied into columns first, so that
// one GEMM reduces over channels and taps together (K = Cg_in * kh * kw).
template <typename scalar_t>
void tap_gemm_conv(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                   at::Tensor& y, bool tap_gemms, bool channels_last = false, ReductionTilesKernel tiles = nullptr,
                   void (*transpose)(const FloatTranspose&) = nullptr) {
  using acc_t = acc_type<scalar_t>;
  TORCH_INTERNAL_ASSERT(!channels_last || tiles, "fastpad: channels-last tap GEMMs run on the tiles only");
  const auto acc_dtype = c10::CppTypeToScalarType<acc_t>::value;
  const int64_t groups = g.groups, c_in = g.conv_in_channels_per_group(), c_out = g.conv_out_channels_per_group();
  const int64_t taps_2d = g.kernel[1] * g.kernel[2], slice = g.conv_in_sizes[1] * g.conv_in_sizes[2];
  const int64_t out_w = g.conv_out_sizes[2], out_slice = g.conv_out_sizes[1] * out_w;
  // Tap GEMMs: [groups, kd, kh*kw, Cg_out, Cg_in]. Columns: [groups, kd, Cg_out, Cg_in * kh*kw].
  const auto w5 = weight.to(acc_dtype).reshape({groups, c_out, c_in, g.kernel[0], taps_2d});
  const at::Tensor w_acc = (tap_gemms ? w5.permute({0, 3, 4, 1, 2}) : w5.permute({0, 3, 1, 2, 4})).contiguous();
  const acc_t* w_data = w_acc.const_data_ptr<acc_t>();
  const at::Tensor bias_acc = bias.defined() ? bias.to(acc_dtype) : at::Tensor();
  const acc_t* bias_data = bias_acc.defined() ? bias_acc.const_data_ptr<acc_t>() : nullptr;
  const scalar_t* x_data = x.const_data_ptr<scalar_t>();
  scalar_t* y_data = y.mutable_data_ptr<scalar_t>();
  const auto y_strides = element_strides(y);  // channels-last: any strided view whose channels are contiguous
  TORCH_INTERNAL_ASSERT(!channels_last || y_strides[1] == 1, "fastpad: a channels-last y's channels are contiguous");
  // The band's own buffers: out[Cg_out, band], plus the columns when they are used.
  const int64_t bytes_per_position = (c_out + (tap_gemms ? 0 : c_in * taps_2d)) * static_cast<int64_t>(sizeof(acc_t));
  // The tiles split the rows in bands for the threads as the blocked kernel does.
  const int64_t wanted_row_bands = tiles ? thread_row_bands(conv_multiply_adds(g), g.batch * groups) : 1;
  const int64_t row_band_multiple = thread_band_multiple(g.batch * groups, wanted_row_bands);
  const auto make_planes = [&] {
    return PhasePlanes<acc_t>(g, c_in, kGemmPhasePlaneBytes, bytes_per_position, 1, wanted_row_bands,
                              row_band_multiple);
  };
  const int64_t bands = make_planes().bands();
  // The bias (or zeros) into `count` positions of each of the group's output channels, `channel_stride` apart.
  const auto fill_bias = [&](auto* first, int64_t channel_stride, int64_t count, int64_t group) {
    for (int64_t co = 0; co < c_out; ++co) {
      std::fill_n(first + co * channel_stride, count, bias_data ? bias_data[group * c_out + co] : acc_t(0));
    }
  };

  at::parallel_for(0, g.batch * groups * bands, 1, [&](int64_t begin, int64_t end) {
    PhasePlanes<acc_t> planes = make_planes();
    const int64_t band_size = planes.band_buffer_size();
    // NCHW float32 with one depth tap, where every band is whole rows of y with no columns between them (a kernel one
    // column wide, the planes' pitch y's width, and band 0's columns, its first tile's, the whole row): the tiles
    // write y itself, each output channel's part of the band one run of its plane, starting from the bias (row_init).
    // The band buffer and its copy into y took a third of a batch-1 1x1 6 -> 103 conv's time over 157 x 157 (2 cores,
    // Zen 4).
    const bool writes_y = tiles && !channels_last && std::is_same_v<scalar_t, float> && g.kernel[0] == 1 &&
                          planes.pitch() == out_w && planes.band(0).cols == out_w;
    std::vector<acc_t> out(writes_y ? 0 : c_out * band_size), cols(tap_gemms ? 0 : c_in * taps_2d * band_size);
    // The group's input channels of depth slice id into the planes of the band.
    const auto gather = [&](int64_t n, int64_t group, int64_t id, const Band& band) {
      if (channels_last) {
        planes.gather_channels(x_data + (n * g.conv_in_sizes[0] + id) * slice * g.conv_in_channels + group * c_in,
                               band, c_in, g.conv_in_channels, transpose);
      } else {
        for (int64_t ci = 0; ci < c_in; ++ci) {
          planes.gather(x_data + (n * g.conv_in_channels + group * c_in + ci) * g.conv_in_volume() + id * slice,
                        band, ci);
        }
      }
    };
    for (int64_t item = begin; item < end; ++item) {
      const int64_t group = (item / bands) % groups, n = item / (bands * groups);
      const Band band = planes.band(item % bands);
      const int64_t n_pos = planes.positions(band.rows);
      const auto acc_options = at::TensorOptions(acc_dtype);
      auto out_view = writes_y ? at::Tensor() : at::from_blob(out.data(), {c_out, n_pos}, {band_size, 1}, acc_options);
      for (int64_t od = 0; od < g.conv_out_sizes[0]; ++od) {
        if constexpr (std::is_same_v<scalar_t, float>) {
          if (writes_y) {
            float* y_band = y_data +
                            ((n * g.conv_out_channels + group * c_out) * g.conv_out_sizes[0] + od) * out_slice +
                            band.row0 * out_w;
            const int64_t id = g.tap_source(0, od, 0), positions = band.rows * out_w;
            if (id < 0) {  // the depth tap reads zero padding: the bias alone
              fill_bias(y_band, g.conv_out_volume(), positions, group);
              continue;
            }
            gather(n, group, id, band);
            ReductionTiles t{w_data + group * taps_2d * c_out * c_in, c_in, 1, nullptr, planes.channel_stride(),
                             y_band, g.conv_out_volume(), c_out, positions, c_in};
            t.b_taps = planes.taps().data();
            t.taps = taps_2d;
            t.a_tap_stride = c_out * c_in;
            t.overwrite = true;
            t.row_init = bias_data ? bias_data + group * c_out : nullptr;
            tiles(t);
            continue;
          }
        }
        // The tiles' first depth tap sets the band buffer from the bias (row_init) instead of adding onto a filled
        // one; without the tiles, or where every depth tap reads zero padding, the bias fills it. The fill, and the
        // tiles' read of it, cost tf_efficientnet_b0's NCHW stem 8% (2 cores, Zen 4). Calls on the tiles, the op
        // alone, interleaved: seeds 1-4 and the suite 68 calls 0.92-1.02x the time (geomean 0.987; the NCHW stems
        // 0.92-0.93), held out (seeds 5-8) 85 calls 0.79-1.07x (0.982), AVX2 62 calls 0.90-1.00x (0.984), bfloat16
        // 25 calls 0.76-1.00x (0.957).
        const bool tiles_set_band = std::is_same_v<acc_t, float> && tiles != nullptr;
        bool band_set = false;
        if (!tiles_set_band) fill_bias(out.data(), band_size, n_pos, group);
        for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
          const int64_t id = g.tap_source(0, od, kd);
          if (id < 0) continue;
          gather(n, group, id, band);
          const acc_t* w_kd = w_data + (group * g.kernel[0] + kd) * taps_2d * c_out * c_in;
          if constexpr (std::is_same_v<acc_t, float>) {
            if (tiles) {
              TORCH_INTERNAL_ASSERT(tap_gemms && n_pos % kReductionTilesColumnMultiple == 0);
              ReductionTiles t{w_kd, c_in, 1, nullptr, planes.channel_stride(), out.data(), band_size, c_out, n_pos,
                               c_in};
              t.b_taps = planes.taps().data();
              t.taps = taps_2d;
              t.a_tap_stride = c_out * c_in;
              if (!band_set) {  // inside the tiles' branch: tiles_set_band
                t.overwrite = true;
                t.row_init = bias_data ? bias_data + group * c_out : nullptr;
                band_set = true;
              }
              tiles(t);
              continue;
            }
          }
          if (tap_gemms) {
            for (int64_t tap = 0; tap < taps_2d; ++tap) {
              const auto w_tap = wrap_buffer(const_cast<acc_t*>(w_kd) + tap * c_out * c_in, {c_out, c_in});
              out_view.addmm_(w_tap, at::from_blob(planes.taps()[tap], {c_in, n_pos},
                                                   {planes.channel_stride(), 1}, at::TensorOptions(acc_dtype)));
            }
          } else {
            for (int64_t ci = 0; ci < c_in; ++ci) {
              for (int64_t tap = 0; tap < taps_2d; ++tap) {
                const acc_t* src = planes.taps()[tap] + ci * planes.channel_stride();
                std::copy_n(src, n_pos, cols.data() + (ci * taps_2d + tap) * band_size);
              }
            }
            out_view.addmm_(wrap_buffer(const_cast<acc_t*>(w_kd), {c_out, c_in * taps_2d}),
                            at::from_blob(cols.data(), {c_in * taps_2d, n_pos}, {band_size, 1},
                                          at::TensorOptions(acc_dtype)));
          }
        }
        if (tiles_set_band && !band_set) fill_bias(out.data(), band_size, n_pos, group);
        if (channels_last) {  // each kept position's c_out values into its pixel's channels
          scalar_t* y_band = y_data + n * y_strides[0] + od * y_strides[2] + band.row0 * y_strides[3] +
                             band.col0 * y_strides[4] + group * c_out;
          for (int64_t r = 0; r < band.rows; ++r) {
            if constexpr (std::is_same_v<scalar_t, float>) {
              if (transpose != nullptr && float_transpose_pays(band.cols, c_out)) {  // out[co, t] to pixel t's co
                transpose({out.data() + r * planes.pitch(), band_size, c_out, band.cols, y_band + r * y_strides[3],
                           y_strides[4], 1});
                continue;
              }
            }
            for (int64_t c = 0; c < band.cols; ++c) {
              const acc_t* position = out.data() + r * planes.pitch() + c;
              scalar_t* pixel = y_band + r * y_strides[3] + c * y_strides[4];
              for (int64_t co = 0; co < c_out; ++co) pixel[co] = static_cast<scalar_t>(position[co * band_size]);
            }
          }
          continue;
        }
        for (int64_t co = 0; co < c_out; ++co) {
          scalar_t* y_slice =
              y_data + ((n * g.conv_out_channels + group * c_out + co) * g.conv_out_sizes[0] + od) * out_slice;
          store_band(y_slice, out.data() + co * band_size, band, planes.pitch(), out_w);
        }
      }
    }
  });
}

// cpu/channel_dots.h over a float32 channels-last x and y: runs of output pixels on the threads, each tap's input
// pixel resolved through the padding mode (tap_source) for each dimension, a row of zeros where it reads a zero.
void channel_dots_conv(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                       at::Tensor& y, bool avx512) {
  constexpr int64_t kRunPixels = 24;  // pixels whose tap rows are listed at a time: whole blocks of 1-4, 6 and 8
  const int64_t taps = g.kernel_volume();
  // [C_out][taps][C_in per group]: a view of a channels-last weight, a copy of another.
  const at::Tensor packed = weight.flatten(2).transpose(1, 2).contiguous();
  const float* x_data = x.data_ptr<float>();
  const ChannelDots problem{x_data, packed.data_ptr<float>(), bias.defined() ? bias.data_ptr<float>() : nullptr,
                            g.conv_in_channels, g.conv_out_channels, g.groups, taps};
  const std::vector<float> zeros(g.conv_in_channels, 0.0f);
  // tap_sources[d][o * kernel[d] + r]: the input index along d that output index o reads through tap r, or -1.
  // (gemm_tiles.h's im2col_sources_nhwc lists the same sources, resolving each tap through the padding mode as it
  // goes; on the 15 calls of seeds 1-24 on this path that ran 0.94-1.08x these tables' time, so they stay.)
  std::vector<int64_t> tap_sources[kMaxSpatial];
  for (int d = 0; d < kMaxSpatial; ++d) {
    for (int64_t o = 0; o < g.conv_out_sizes[d]; ++o) {
      for (int64_t r = 0; r < g.kernel[d]; ++r) tap_sources[d].push_back(g.tap_source(d, o, r));
    }
  }
  const auto dots = avx512 ? &channel_dots_avx512 : &channel_dots_avx2;
  const int64_t out_volume = g.conv_out_volume(), in_volume = g.conv_in_volume();
  const int64_t out_w = g.conv_out_sizes[2], out_h = g.conv_out_sizes[1];
  float* y_data = y.data_ptr<float>();
  at::parallel_for(0, g.batch * out_volume, 1, [&](int64_t begin, int64_t end) {
    std::vector<const float*> rows(kRunPixels * taps);
    for (int64_t first = begin; first < end; first += kRunPixels) {
      const int64_t count = std::min(kRunPixels, end - first);
      for (int64_t k = 0; k < count; ++k) {
        const int64_t pixel = first + k, n = pixel / out_volume, o = pixel % out_volume;
        const int64_t o2 = o % out_w, o1 = o / out_w % out_h, o0 = o / (out_w * out_h);
        const float** tap_rows = rows.data() + k * taps;
        for (int64_t r0 = 0; r0 < g.kernel[0]; ++r0) {
          const int64_t s0 = tap_sources[0][o0 * g.kernel[0] + r0];
          for (int64_t r1 = 0; r1 < g.kernel[1]; ++r1) {
            const int64_t s1 = tap_sources[1][o1 * g.kernel[1] + r1];
            for (int64_t r2 = 0; r2 < g.kernel[2]; ++r2) {
              const int64_t s2 = tap_sources[2][o2 * g.kernel[2] + r2];
              const int64_t source = (s0 * g.conv_in_sizes[1] + s1) * g.conv_in_sizes[2] + s2;
              *tap_rows++ = s0 < 0 || s1 < 0 || s2 < 0 ? zeros.data()
                                                       : x_data + (n * in_volume + source) * g.conv_in_channels;
            }
          }
        }
      }
      dots(problem, rows.data(), count, y_data + first * g.conv_out_channels);
    }
  });
}

at::Tensor conv_cpu(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                    at::IntArrayRef stride, at::IntArrayRef pad_lo, at::IntArrayRef pad_hi, at::IntArrayRef dilation,
                    int64_t groups, c10::string_view padding_mode) {
  // The ATen calls inside the kernel work on plain tensors: autograd is this op's own registration.
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  const ConvGeometry g =
      conv_geometry(input, weight, bias, stride, pad_lo, pad_hi, dilation, groups, padding_mode);
  const auto format = output_memory_format(input);
  const bool channels_last = format != at::MemoryFormat::Contiguous;
  const auto y_shape = tensor_shape(g.batch, g.conv_out_channels, g.conv_out_sizes, input.dim() - 2);
  const auto y_options = input.options().memory_format(format);
  if (c10::multiply_integers(y_shape) == 0) return at::empty(y_shape, y_options);
  const auto x = input.contiguous(format);
  const auto b = bias.has_value() && bias->defined() ? bias->contiguous() : at::Tensor();
  const ConvPath path = choose_conv_path(g, Backend::Cpu, channels_last, accumulator_bytes(input),
                                         is_reduced_precision(input), cpu_isa_for(input));
  // torch's convolution allocates its own output, so the op allocates none before it.
  if (path == ConvPath::CpuTorch) return torch_convolution(g, x, weight, b, /*transposed=*/false, format);
  auto y = at::empty(y_shape, y_options);
  advise_huge_pages(y);
  const bool no_planes = path == ConvPath::CpuBlockedNoPlanesAvx2 || path == ConvPath::CpuBlockedNoPlanesAvx512;
  if (path == ConvPath::CpuBlockedAvx2 || path == ConvPath::CpuBlockedAvx512 ||
      path == ConvPath::CpuBlockedAvx512Bf16 || no_planes) {
    blocked_conv(g, x, weight, b, y, channels_last,
                 path == ConvPath::CpuBlockedAvx512Bf16 ? BlockedKernel::Avx512Bf16
                 : path == ConvPath::CpuBlockedAvx512 || path == ConvPath::CpuBlockedNoPlanesAvx512
                     ? BlockedKernel::Avx512
                     : BlockedKernel::Avx2,
                 no_planes);
    return y;
  }
  const bool channel_blocks =
      path == ConvPath::CpuDepthwiseChannelBlocks || path == ConvPath::CpuDepthwiseChannelBlocksAvx512;
  const bool avx512_tiles = path == ConvPath::CpuDepthwiseAvx512 || path == ConvPath::CpuGroupedExpandedAvx512 ||
                            path == ConvPath::CpuDepthwiseChannelBlocksAvx512;
  if (path == ConvPath::CpuChannelDotsAvx2 || path == ConvPath::CpuChannelDotsAvx512) {
    channel_dots_conv(g, x, weight, b, y, path == ConvPath::CpuChannelDotsAvx512);
    return y;
  }
  // The NCHW kernel, over x and y of either layout (channels-last: cpu_depthwise_strided_planes and
  // cpu_grouped_planes_over_channels_last).
  if (path == ConvPath::CpuDepthwiseStridedPlanes || path == ConvPath::CpuGroupedPlanes) {
    depthwise_conv(g, x, weight, b, y, /*channels_last=*/false);
    return y;
  }
  if (channel_blocks || avx512_tiles || path == ConvPath::CpuDepthwise || path == ConvPath::CpuGroupedExpanded) {
    depthwise_conv(g, x, weight, b, y, channels_last, channel_blocks, avx512_tiles);
    return y;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, input.scalar_type(), "fastpad_conv_cpu", [&] {
    switch (path) {
      case ConvPath::CpuChannelsLastDirect:
        direct_conv_nhwc<scalar_t>(g, x, weight, b, y);
        break;
      case ConvPath::CpuChannelsLastPhasePlanes:
        phase_plane_conv_nhwc<scalar_t>(g, x, weight, b, y);
        break;
      case ConvPath::CpuChannelsLastIm2col:
        gemm_conv_nhwc<scalar_t>(g, x, weight, b, y);
        break;
      case ConvPath::CpuTapGemms:
      case ConvPath::CpuColumnGemm:
        tap_gemm_conv<scalar_t>(g, x, weight, b, y, path == ConvPath::CpuTapGemms);
        break;
      case ConvPath::CpuTapTilesAvx2:
      case ConvPath::CpuTapTilesAvx512:
        tap_tiles_conv(g, x, weight, b, y, channels_last, path == ConvPath::CpuTapTilesAvx512);
        break;
      default:
        TORCH_INTERNAL_ASSERT(false, "fastpad conv: no CPU kernel for path ", path_name(path));
    }
  });
  return y;
}

}  // namespace

void blocked_convs(const ConvGeometry& covering, const at::Tensor& x, const std::vector<BlockedOutput>& outputs,
                   const at::Tensor& bias, bool channels_last, BlockedKernel kernel, bool no_planes) {
  if (kernel == BlockedKernel::Avx512Bf16) {
    TORCH_INTERNAL_ASSERT(x.scalar_type() == at::kBFloat16, "fastpad: the bfloat16 dot-product kernel takes bfloat16");
    blocked_direct_conv<at::BFloat16, uint16_t>(covering, x, outputs, bias, channels_last, no_planes,
                                                &blocked_direct_avx512_bf16, kBlockedDirectVectorAvx512,
                                                kBlockedDirectMaxVectorsAvx512, nullptr, &transpose_floats_avx512);
    return;
  }
  const bool avx512 = kernel == BlockedKernel::Avx512;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "fastpad_blocked_conv", [&] {
    if constexpr (std::is_same_v<acc_type<scalar_t>, float>) {
      blocked_direct_conv<scalar_t, float>(
          covering, x, outputs, bias, channels_last, no_planes,
          avx512 ? &blocked_direct_avx512 : &blocked_direct_avx2,
          avx512 ? kBlockedDirectVectorAvx512 : kBlockedDirectVectorAvx2,
          avx512 ? kBlockedDirectMaxVectorsAvx512 : kBlockedDirectMaxVectorsAvx2,
          avx512 ? &pack_weight_lanes_avx512 : &pack_weight_lanes_avx2,
          avx512 ? &transpose_floats_avx512 : &transpose_floats_avx2);
    } else {
      TORCH_INTERNAL_ASSERT(false, "fastpad: the blocked kernels take float accumulation only");
    }
  });
}

void blocked_conv(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                  at::Tensor& y, bool channels_last, BlockedKernel kernel, bool no_planes) {
  blocked_convs(g, x, {BlockedOutput{g, weight, y}}, bias, channels_last, kernel, no_planes);
}

void tap_tiles_conv(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                    at::Tensor& y, bool channels_last, bool avx512) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "fastpad_tap_tiles_conv", [&] {
    if constexpr (std::is_same_v<acc_type<scalar_t>, float>) {
      tap_gemm_conv<scalar_t>(g, x, weight, bias, y, /*tap_gemms=*/true, channels_last,
                              avx512 ? &reduction_tiles_avx512 : &reduction_tiles_avx2,
                              avx512 ? &transpose_floats_avx512 : &transpose_floats_avx2);
    } else {
      TORCH_INTERNAL_ASSERT(false, "fastpad: the tap tiles take float accumulation only");
    }
  });
}

TORCH_LIBRARY_IMPL(fastpad, CPU, m) {
  m.impl("conv", &conv_cpu);
}

}  // namespace fastpad::cpu
