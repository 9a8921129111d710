// fastpad::conv_weight_grad on CPU: gw[r] = sum_o grad_output[o] * xpad[o*s - pad_lo + r*d] (conv's and
// conv_transpose's weight gradient). Layout: contiguous or channels_last input and grad_output; the result is
// contiguous in the weight's shape. Padding is resolved inside phase planes (NCHW) or fused im2col tiles
// (channels-last), never materialised.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "conv_params.h"
#include "cpu/depthwise.h"
#include "cpu/gemm_tiles.h"
#include "cpu/phase_planes.h"
#include "kernel_paths.h"

namespace fastpad::cpu {
namespace {

// Channels-last: the reduction over images and output tiles is split into a fixed number of chunks, each summing
// into its own partial gradient, then the partials are added in chunk order: bitwise reproducible for a fixed thread
// count. partial[Cg_out, K*Cg_in] += gy[tile, Cg_out]^T @ cols[tile, K*Cg_in], with cols a fused im2col tile.
template <typename scalar_t>
at::Tensor weight_grad_gemm(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& grad_output) {
  using acc_t = acc_type<scalar_t>;
  const auto acc_dtype = c10::CppTypeToScalarType<acc_t>::value;
  const int64_t groups = g.groups, in_per_group = g.conv_in_channels_per_group(),
                out_per_group = g.conv_out_channels_per_group(), taps = g.kernel_volume();
  const int64_t reduce = in_per_group * taps;
  const auto gy_flat = flatten_positions(grad_output, /*channels_last=*/true);
  const TilePlan plan(g, /*channels_last=*/true, reduce * static_cast<int64_t>(sizeof(acc_t)));
  const int64_t work = g.batch * plan.tiles;  // (image, tile) pairs to reduce over
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), work));
  auto partial = at::zeros({chunks, groups, out_per_group, reduce}, x.options().dtype(acc_dtype));
  const scalar_t* x_data = x.const_data_ptr<scalar_t>();

  at::parallel_for(0, chunks * groups, 1, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> cols(reduce * plan.buffer_positions());
    for (int64_t item = begin; item < end; ++item) {
      const int64_t chunk = item / groups, group = item % groups;
      auto acc = partial[chunk][group];
      for (int64_t job = chunk * work / chunks; job < (chunk + 1) * work / chunks; ++job) {
        const int64_t n = job / plan.tiles;
        const auto [pixel_begin, tile_pixels] = plan.tile(job % plan.tiles);
        im2col_nhwc(g, x_data + n * g.conv_in_volume() * g.conv_in_channels, group, pixel_begin,
                  pixel_begin + tile_pixels, cols.data());
        const auto gy = gy_flat[n].narrow(0, pixel_begin, tile_pixels).narrow(1, group * out_per_group, out_per_group);
        acc.addmm_(gy.to(acc_dtype).t(), wrap_buffer(cols.data(), {tile_pixels, reduce}));
      }
    }
  });
  // [G, Cg_out, K, Cg_in] -> [G * Cg_out, Cg_in, K]
  return partial.sum(0).view({groups * out_per_group, taps, in_per_group}).transpose(1, 2);
}

// Bands for the NCHW weight gradient: its GEMMs reduce over the band's positions, so wider bands pay off even past
// L2 (k4 64->64 @56, batch 4: 30 ms with 1 MiB bands, 18 ms with 4 MiB).
constexpr int64_t kWeightGradBandBytes = 4 * 1024 * 1024;

// NCHW, per (image, output depth, band of output rows), the same chunked reduction: the group's input channels become
// phase planes (cpu/phase_planes.h), the kept columns of every tap are copied from them into
// cols[(ci, kd, kh, kw), band] (contiguous runs, no index math), and
// partial[Cg_out, Cg_in*K] += gy[Cg_out, band] @ cols^T, with gy read in place. Images of few positions (one band and
// no depth) go several to a GEMM (gemm_tiles.h's images_per_shared_gemm): their columns side by side in cols, and
// their gy gathered likewise, so each GEMM re-writes the partial gradient once for all of them.
template <typename scalar_t>
at::Tensor phase_plane_weight_grad_nchw(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& grad_output) {
  using acc_t = acc_type<scalar_t>;
  const auto acc_dtype = c10::CppTypeToScalarType<acc_t>::value;
  const int64_t groups = g.groups, c_in = g.conv_in_channels_per_group(), c_out = g.conv_out_channels_per_group();
  const int64_t taps = g.kernel_volume(), taps_2d = g.kernel[1] * g.kernel[2], reduce = c_in * taps;
  const int64_t slice = g.conv_in_sizes[1] * g.conv_in_sizes[2], out_w = g.conv_out_sizes[2];
  const int64_t bytes_per_position = reduce * static_cast<int64_t>(sizeof(acc_t));  // the columns
  const int64_t bands = PhasePlanes<acc_t>(g, c_in, kWeightGradBandBytes, bytes_per_position).bands();
  const int64_t images_per_job =
      bands == 1 && g.conv_out_sizes[0] == 1
          ? images_per_shared_gemm(g.conv_out_volume(), g.batch, groups, at::get_num_threads())
          : 1;
  const int64_t image_jobs = (g.batch + images_per_job - 1) / images_per_job;
  const int64_t work = image_jobs * g.conv_out_sizes[0] * bands;  // (images, output depth, band) triples to reduce over
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), work));
  auto partial = at::zeros({chunks, groups, c_out, reduce}, x.options().dtype(acc_dtype));
  const auto gy_flat = flatten_positions(grad_output, /*channels_last=*/false);
  const scalar_t* x_data = x.const_data_ptr<scalar_t>();

  at::parallel_for(0, chunks * groups, 1, [&](int64_t begin, int64_t end) {
    PhasePlanes<acc_t> planes(g, c_in, kWeightGradBandBytes, bytes_per_position);
    std::vector<acc_t> cols(reduce * planes.band_outputs() * images_per_job);
    std::vector<acc_t> gy_gathered(images_per_job > 1 ? c_out * images_per_job * g.conv_out_volume() : 0);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t chunk = item / groups, group = item % groups;
      auto acc = partial[chunk][group];
      for (int64_t job = chunk * work / chunks; job < (chunk + 1) * work / chunks; ++job) {
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
              for (int64_t ci = 0; ci < c_in; ++ci) {
                planes.gather(x_data + (n * g.conv_in_channels + group * c_in + ci) * g.conv_in_volume() + id * slice,
                              band, ci);
              }
            }
            for (int64_t ci = 0; ci < c_in; ++ci) {
              for (int64_t tap = 0; tap < taps_2d; ++tap) {
                acc_t* dst = cols.data() + (ci * taps + kd * taps_2d + tap) * columns + image * positions;
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
        at::Tensor gy = gy_flat.narrow(0, n0, images)
                            .narrow(1, group * c_out, c_out)
                            .narrow(2, (od * g.conv_out_sizes[1] + band.row0) * out_w + band.col0, positions)
                            .transpose(0, 1);  // [Cg_out, images, positions]
        if (images > 1) {
          auto gathered = wrap_buffer(gy_gathered.data(), {c_out, images, positions});
          gathered.copy_(gy);
          gy = gathered;
        }
        acc.addmm_(gy.reshape({c_out, columns}).to(acc_dtype), wrap_buffer(cols.data(), {reduce, columns}).t());
      }
    }
  });
  return partial.sum(0).view({groups * c_out, c_in, taps});
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
  if (g.batch == 0) return at::zeros(weight_shape, input.options());
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
      case WeightGradPath::CpuDepthwiseAvx512:
        grad = depthwise_weight_grad(g, x, gy, kernel_channels_last, /*avx512_tiles=*/true);
        break;
      case WeightGradPath::CpuChannelsLastGemm:
        grad = weight_grad_gemm<scalar_t>(g, x, gy);
        break;
      case WeightGradPath::CpuPhasePlanes:
        grad = phase_plane_weight_grad_nchw<scalar_t>(g, x, gy);
        break;
      default:
        TORCH_INTERNAL_ASSERT(false, "fastpad conv_weight_grad: no CPU path");
    }
  });
  // A fresh tensor, so the strides are the canonical contiguous ones even where a dim has size 1.
  auto result = at::empty(weight_shape, input.options());
  result.copy_(grad.reshape(weight_shape));
  return result;
}

}  // namespace

TORCH_LIBRARY_IMPL(fastpad, CPU, m) {
  m.impl("conv_weight_grad", &conv_weight_grad_cpu);
}

}  // namespace fastpad::cpu
