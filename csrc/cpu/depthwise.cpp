// Direct depthwise kernels (see depthwise.h). Naming, as in ConvGeometry: in every op the "input side" tensor is the
// conv input, indexed by g.conv_in_sizes / g.conv_in_channels (conv input, transposed output), and the "output side"
// the conv output, indexed by g.conv_out_sizes / g.conv_out_channels (conv output, transposed input, grad_output).
// Output-side channel c belongs to input-side channel c / m.
#include "cpu/depthwise.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "conv_params.h"
#include "cpu/nhwc_tiles.h"
#include "cpu/phase_planes.h"
#include "cpu/row_ops.h"

namespace fastpad::cpu {
namespace {

// Channel blocks for the channels-last kernels: one per thread, a whole number of vectors each.
inline int64_t channel_block(int64_t channels, int64_t lanes) {
  const int64_t per_thread = (channels + at::get_num_threads() - 1) / at::get_num_threads();
  return std::max<int64_t>(lanes, (per_thread + lanes - 1) / lanes * lanes);
}

// ---- NCHW: phase planes (cpu/phase_planes.h) ---------------------------------------------------------------
// Every kernel walks (output depth od, band of output rows, kernel depth kd): the band's phase planes come from
// input depth slice tap_source(0, od, kd), and each tap of the (H, W) kernel is one vector loop over the band's
// flattened output positions. Vector loops cover kVecBlock vectors at a time, in registers.
// The planes are gathered from, and the outputs stored to, tensors of either layout (PlaneStrides): contiguous, or
// channels-last where the channels-last kernels' vectors over a pixel's channels would be mostly empty
// (kernel_paths.h's cpu_depthwise_strided_planes).

// Where channel c's position p (flattened over the spatial dims) of image n lies in a tensor: n * image + c * channel
// + p * position. Contiguous: channel = the spatial volume, position = 1; channels-last: channel = 1, position = C. A
// tensor contiguous in both layouts (C == 1, or one position) has the same offsets in both.
struct PlaneStrides {
  int64_t image, channel, position;
  explicit PlaneStrides(const at::Tensor& t) {
    const int64_t channels = t.size(1), volume = t.numel() / std::max<int64_t>(t.size(0) * channels, 1);
    const bool contiguous = t.is_contiguous();
    TORCH_INTERNAL_ASSERT(contiguous || t.is_contiguous(t.dim() == 5 ? at::MemoryFormat::ChannelsLast3d
                                                                      : at::MemoryFormat::ChannelsLast),
                          "fastpad: the phase-plane kernels take contiguous or channels-last tensors");
    image = channels * volume;
    channel = contiguous ? volume : 1;
    position = contiguous ? 1 : channels;
  }
};

constexpr int64_t kVecBlock = 4;

// out[t] += sum over taps k of w[k] * taps[k][t], for t in [0, n), n a multiple of the vector size, only where
// keeps[k][t] (all bits set or clear), so that a masked product adds exactly nothing even when a weight is inf or nan:
// kVecBlock vectors of accumulators stay in registers while every tap is read once per block. (Unmasked:
// add_taps_to_outputs below.)
template <typename acc_t>
void add_masked_taps(acc_t* out, const std::vector<acc_t*>& taps, const acc_t* w, int64_t n,
                     const std::vector<const acc_t*>& keeps) {
  using Vec = at::vec::Vectorized<acc_t>;
  constexpr int64_t V = Vec::size();
  const auto add = [&](size_t k, const Vec& wk, int64_t i, const Vec& acc) {
    return acc + ((wk * Vec::loadu(taps[k] + i)) & Vec::loadu(keeps[k] + i));
  };
  int64_t t = 0;
  for (; t + kVecBlock * V <= n; t += kVecBlock * V) {
    Vec acc[kVecBlock];
    for (int64_t u = 0; u < kVecBlock; ++u) acc[u] = Vec::loadu(out + t + u * V);
    for (size_t k = 0; k < taps.size(); ++k) {
      const Vec wk(w[k]);
      for (int64_t u = 0; u < kVecBlock; ++u) acc[u] = add(k, wk, t + u * V, acc[u]);
    }
    for (int64_t u = 0; u < kVecBlock; ++u) acc[u].store(out + t + u * V);
  }
  for (; t < n; t += V) {
    Vec acc = Vec::loadu(out + t);
    for (size_t k = 0; k < taps.size(); ++k) acc = add(k, Vec(w[k]), t, acc);
    acc.store(out + t);
  }
}

// out[t] += sum over taps k of w[k] * taps[k][t] (t in [0, n), n a multiple of the vector size) for kOuts output bands
// at once (out + j * out_stride, their weights w + j * w_stride, j < kOuts): each tap vector is loaded once for all of
// them, where a pass per output channel loaded it once per channel. kBlock vectors of positions x kOuts accumulators,
// the tap vectors and a weight stay within AVX2's 16 registers (one band: kVecBlock vectors).
template <int64_t kOuts, typename acc_t>
void add_taps_to_outputs(acc_t* out, int64_t out_stride, const std::vector<acc_t*>& taps, const acc_t* w,
                         int64_t w_stride, int64_t n) {
  using Vec = at::vec::Vectorized<acc_t>;
  constexpr int64_t V = Vec::size(), kBlock = kOuts <= 2 ? kVecBlock : kOuts == 3 ? 3 : 2;
  const auto block = [&](int64_t t, auto vectors) {
    constexpr int64_t kVectors = decltype(vectors)::value;
    Vec acc[kOuts][kVectors];
    for (int64_t j = 0; j < kOuts; ++j) {
      for (int64_t u = 0; u < kVectors; ++u) acc[j][u] = Vec::loadu(out + j * out_stride + t + u * V);
    }
    for (size_t k = 0; k < taps.size(); ++k) {
      Vec tap[kVectors];
      for (int64_t u = 0; u < kVectors; ++u) tap[u] = Vec::loadu(taps[k] + t + u * V);
      for (int64_t j = 0; j < kOuts; ++j) {
        const Vec wk(w[j * w_stride + k]);
        for (int64_t u = 0; u < kVectors; ++u) acc[j][u] = at::vec::fmadd(wk, tap[u], acc[j][u]);
      }
    }
    for (int64_t j = 0; j < kOuts; ++j) {
      for (int64_t u = 0; u < kVectors; ++u) acc[j][u].store(out + j * out_stride + t + u * V);
    }
  };
  int64_t t = 0;
  for (; t + kBlock * V <= n; t += kBlock * V) block(t, std::integral_constant<int64_t, kBlock>());
  for (; t < n; t += V) block(t, std::integral_constant<int64_t, 1>());
}

// keep[t]: all bits set where flattened position t of a band (its rows of its columns, at the planes' pitch) is a
// real output, clear elsewhere, for t in [-lead, size). Rebuilt only when the band's shape changes (a short last band
// or column tile).
template <typename acc_t>
class KeepMask {
 public:
  KeepMask(int64_t size, int64_t pitch, int64_t lead = 0) : mask_(lead + size), pitch_(pitch), lead_(lead) {}

  const acc_t* for_band(const Band& band) {
    acc_t* keep = mask_.data() + lead_;
    if (band.rows != rows_ || band.cols != cols_) {
      rows_ = band.rows;
      cols_ = band.cols;
      std::memset(mask_.data(), 0, mask_.size() * sizeof(acc_t));
      for (int64_t r = 0; r < rows_; ++r) std::memset(keep + r * pitch_, 0xff, cols_ * sizeof(acc_t));
    }
    return keep;
  }

 private:
  std::vector<acc_t> mask_;
  int64_t pitch_, lead_, rows_ = -1, cols_ = -1;
};

// The weights that input-side channel c_in meets, [m, kd, kh, kw] (weights.size() values) in the accumulation type:
// those of the m output-side channels of its group, at its place r among the group's R input-side channels
// (w[group * m + j][r][taps]; depthwise: one contiguous run).
template <typename scalar_t, typename acc_t>
void load_channel_weights(const ConvGeometry& g, const scalar_t* w, int64_t c_in, std::vector<acc_t>& weights) {
  const int64_t reduction = g.conv_in_channels_per_group(), m = g.conv_out_channels_per_group(),
                taps = g.kernel_volume();
  const scalar_t* src = w + ((c_in / reduction) * m * reduction + c_in % reduction) * taps;
  for (int64_t j = 0; j < m; ++j) {
    std::transform(src + j * reduction * taps, src + (j * reduction + 1) * taps, weights.begin() + j * taps,
                   [](scalar_t v) { return static_cast<acc_t>(v); });
  }
}

// The weights of group `group`'s m output channels in the order conv_nchw's taps run, [m, kd, R, kh * kw] in the
// accumulation type: per output channel and kernel depth, the (H, W) taps of each of the group's R input channels in
// turn (the weight is [C_out, R, kd, kh, kw]; depthwise, R = 1: [m, kd, kh * kw], one contiguous run).
template <typename scalar_t, typename acc_t>
void load_group_weights(const ConvGeometry& g, const scalar_t* w, int64_t group, std::vector<acc_t>& weights) {
  const int64_t reduction = g.conv_in_channels_per_group(), m = g.conv_out_channels_per_group();
  const int64_t kd_count = g.kernel[0], taps_2d = g.kernel[1] * g.kernel[2];
  for (int64_t j = 0; j < m; ++j) {
    for (int64_t kd = 0; kd < kd_count; ++kd) {
      for (int64_t r = 0; r < reduction; ++r) {
        const scalar_t* src = w + (((group * m + j) * reduction + r) * kd_count + kd) * taps_2d;
        std::transform(src, src + taps_2d, weights.begin() + ((j * kd_count + kd) * reduction + r) * taps_2d,
                       [](scalar_t v) { return static_cast<acc_t>(v); });
      }
    }
  }
}

// Parallel over (image, group); the m output channels of a group share the phase planes of its R input channels
// (depthwise: R = 1, a group is one input plane; cpu_grouped_planes: a few input channels per group). Per band and
// kernel depth, each block of up to kOutputBlock output channels' bands is one pass over the R x kh x kw taps of the
// group's planes (add_taps_to_outputs: each tap vector loaded once for the block), so the sums stay in registers over
// the whole reduction. Loading each tap once per block rather than once per output channel took 0.62-0.99x the time
// on the 25 NCHW depthwise convs with a multiplier of random seeds 1-4 and the suite, and 0.46-1.00x (geomean 0.79) on
// the 31 grouped ones there with 2-16 output channels per group (float32, 2 cores, interleaved; benchmarks/RESULTS.md).
constexpr int64_t kOutputBlock = 4;
template <typename scalar_t>
void conv_nchw(const ConvGeometry& g, const scalar_t* x, PlaneStrides xs, const scalar_t* w, const scalar_t* bias,
               scalar_t* y, PlaneStrides ys) {
  using acc_t = acc_type<scalar_t>;
  const int64_t m = g.conv_out_channels_per_group(), reduction = g.conv_in_channels_per_group(),
                out_w = g.conv_out_sizes[2], slice = g.conv_in_sizes[1] * g.conv_in_sizes[2];
  const int64_t taps_2d = g.kernel[1] * g.kernel[2], out_slice = g.conv_out_sizes[1] * out_w;
  // A 3-d conv's output depths share input depth slices (at stride 1, k_d - 1 of an output depth's k_d). The slices
  // one output depth reads lie within a window of `slots` consecutive slices, so each keeps its phase planes in slot
  // slice % slots until another slice takes the slot, and is gathered about once per band rather than once per output
  // depth that reads it (3-d random layers, float32, 2 cores: 0.55-0.97x the time, 0.75x on a k6 conv over 17^3).
  // 2-d and 1-d convs have one slot. Each slot's band is the one a single slice had; the group's R input channels
  // share it (channel r's planes of slot s: planes channel r * slots + s).
  const int64_t slots = depth_slot_span(g);
  at::parallel_for(0, g.batch * g.groups, 1, [&](int64_t begin, int64_t end) {
    PhasePlanes<acc_t> planes(g, reduction * slots, kPhasePlaneBytes * slots);
    std::vector<std::vector<acc_t*>> slot_taps(slots);  // slot s: the R channels' taps in turn
    for (int64_t s = 0; s < slots; ++s) {
      for (int64_t r = 0; r < reduction; ++r) {
        for (acc_t* tap : planes.taps()) slot_taps[s].push_back(tap + (r * slots + s) * planes.channel_stride());
      }
    }
    std::vector<int64_t> slot_slice(slots);
    const int64_t band_size = planes.band_buffer_size(), weights_per_kd = reduction * taps_2d;
    const int64_t w_stride = g.kernel[0] * weights_per_kd;  // between output channels' weights
    std::vector<acc_t> out(m * band_size), weights(m * reduction * g.kernel_volume());
    for (int64_t item = begin; item < end; ++item) {
      const int64_t group = item % g.groups, n = item / g.groups;
      const scalar_t* x_group = x + n * xs.image + group * reduction * xs.channel;
      load_group_weights(g, w, group, weights);
      for (int64_t b = 0; b < planes.bands(); ++b) {
        const Band band = planes.band(b);
        const int64_t n_pos = planes.positions(band.rows);
        std::fill(slot_slice.begin(), slot_slice.end(), -1);
        for (int64_t od = 0; od < g.conv_out_sizes[0]; ++od) {
          for (int64_t j = 0; j < m; ++j) {
            std::fill_n(out.data() + j * band_size, n_pos, bias ? acc_t(bias[group * m + j]) : acc_t(0));
          }
          for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
            const int64_t id = g.tap_source(0, od, kd);
            if (id < 0) continue;
            const int64_t s = id % slots;
            if (slot_slice[s] != id) {
              for (int64_t r = 0; r < reduction; ++r) {
                planes.gather(x_group + r * xs.channel + id * slice * xs.position, band, r * slots + s,
                              xs.position);
              }
              slot_slice[s] = id;
            }
            for (int64_t j = 0; j < m; j += kOutputBlock) {
              acc_t* out_j = out.data() + j * band_size;
              const acc_t* w_j = &weights[(j * g.kernel[0] + kd) * weights_per_kd];
              switch (std::min(kOutputBlock, m - j)) {
                case 1: add_taps_to_outputs<1>(out_j, band_size, slot_taps[s], w_j, w_stride, n_pos); break;
                case 2: add_taps_to_outputs<2>(out_j, band_size, slot_taps[s], w_j, w_stride, n_pos); break;
                case 3: add_taps_to_outputs<3>(out_j, band_size, slot_taps[s], w_j, w_stride, n_pos); break;
                default: add_taps_to_outputs<4>(out_j, band_size, slot_taps[s], w_j, w_stride, n_pos); break;
              }
            }
          }
          for (int64_t j = 0; j < m; ++j) {
            const int64_t c_out = group * m + j;
            scalar_t* y_slice = y + n * ys.image + c_out * ys.channel + od * out_slice * ys.position;
            store_band(y_slice, out.data() + j * band_size, band, planes.pitch(), out_w, ys.position);
          }
        }
      }
    }
  });
}

// y_acc (input side) += the adjoint of conv_nchw applied to x (output side), for any R y channels per group (depthwise:
// R = 1). Parallel over y planes, each written by one thread. Per band and kernel depth, every phase plane is computed
// as a gather: its position s is the sum, over the taps k that read the plane (from offset o_k) and the m x channels
// j of its group, of w[j, k] * x_j[s - o_k], x_j being the band's x with zeros outside its kept outputs (held in
// shifted_x behind max_tap_offset() zeros); scatter_add then folds the planes back. The sums stay in registers, where scattering each tap into the planes re-read and
// re-wrote them per tap, and stride 1's overlapping taps stalled each load on the previous tap's store (7x7 at
// multiplier 4: 14x conv's time). A channel with an inf or NaN weight masks each product by its x position's keep
// mask, so that the weight reaches only what it multiplies.
template <typename scalar_t>
void conv_transpose_nchw(const ConvGeometry& g, const scalar_t* x, PlaneStrides xs, const scalar_t* w,
                         acc_type<scalar_t>* y_acc, PlaneStrides ys) {
  using acc_t = acc_type<scalar_t>;
  const int64_t m = g.conv_out_channels_per_group(), out_w = g.conv_out_sizes[2],
                slice = g.conv_in_sizes[1] * g.conv_in_sizes[2];
  const int64_t taps_2d = g.kernel[1] * g.kernel[2], out_slice = g.conv_out_sizes[1] * out_w;
  at::parallel_for(0, g.batch * g.conv_in_channels, 1, [&](int64_t begin, int64_t end) {
    PhasePlanes<acc_t> planes(g);
    const int64_t lead = planes.max_tap_offset(), shifted_size = lead + planes.plane_size();
    const int64_t band_size = planes.band_buffer_size();
    std::vector<acc_t> shifted_x(m * shifted_size, acc_t(0)), weights(m * g.kernel_volume());
    std::optional<KeepMask<acc_t>> keep;
    // Per phase plane, its products: pointers at x_j[-o_k], the weights' indexes j * kernel volume + k, and per
    // plane the weights of each kernel depth kd (phase_weights[p][kd * products + i]); where the keep mask is used,
    // pointers into it as into x.
    const int64_t phases = planes.phase_count();
    std::vector<std::vector<acc_t*>> phase_x(phases);
    std::vector<std::vector<const acc_t*>> phase_keep(phases);
    std::vector<std::vector<int64_t>> phase_weight(phases);
    std::vector<std::vector<acc_t>> phase_weights(phases);
    for (int64_t j = 0; j < m; ++j) {
      for (int64_t k = 0; k < taps_2d; ++k) {
        const int64_t p = planes.tap_phase(k);
        phase_x[p].push_back(shifted_x.data() + j * shifted_size + lead - planes.tap_offset(k));
        phase_weight[p].push_back(j * g.kernel_volume() + k);
      }
    }
    for (int64_t p = 0; p < phases; ++p) phase_weights[p].resize(g.kernel[0] * phase_weight[p].size());
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t c_in = plane % g.conv_in_channels, n = plane / g.conv_in_channels;
      const int64_t group = c_in / g.conv_in_channels_per_group();
      load_channel_weights(g, w, c_in, weights);
      const bool masked = !std::all_of(weights.begin(), weights.end(), [](acc_t v) { return std::isfinite(v); });
      if (masked && !keep) keep.emplace(planes.plane_size(), planes.pitch(), lead);
      for (int64_t p = 0; p < phases; ++p) {
        const int64_t products = phase_weight[p].size();
        for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
          for (int64_t i = 0; i < products; ++i) {
            phase_weights[p][kd * products + i] = weights[phase_weight[p][i] + kd * taps_2d];
          }
        }
      }
      for (int64_t od = 0; od < g.conv_out_sizes[0]; ++od) {
        for (int64_t b = 0; b < planes.bands(); ++b) {
          const Band band = planes.band(b);
          for (int64_t j = 0; j < m; ++j) {
            const scalar_t* x_slice =
                x + n * xs.image + (group * m + j) * xs.channel + od * out_slice * xs.position;
            acc_t* x_j = shifted_x.data() + j * shifted_size + lead;
            load_band(x_j, x_slice, band, planes.pitch(), out_w, xs.position);
            std::fill(x_j + band.rows * planes.pitch(), x_j + band_size, acc_t(0));  // a longer band's rows
          }
          if (masked) {
            const acc_t* keep_mask = keep->for_band(band);
            for (int64_t p = 0; p < phases; ++p) {
              phase_keep[p].clear();
              for (const int64_t i : phase_weight[p]) {
                phase_keep[p].push_back(keep_mask - planes.tap_offset(i % taps_2d));
              }
            }
          }
          for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
            const int64_t id = g.tap_source(0, od, kd);
            if (id < 0) continue;
            planes.zero();
            for (int64_t p = 0; p < phases; ++p) {
              if (phase_x[p].empty()) continue;
              const acc_t* w_kd = phase_weights[p].data() + kd * phase_x[p].size();
              if (masked) {
                add_masked_taps(planes.phase_plane(p), phase_x[p], w_kd, planes.plane_positions(band), phase_keep[p]);
              } else {
                add_taps_to_outputs<1>(planes.phase_plane(p), 0, phase_x[p], w_kd, 0, planes.plane_positions(band));
              }
            }
            planes.scatter_add(y_acc + n * ys.image + c_in * ys.channel + id * slice * ys.position, band, 0,
                               ys.position);
          }
        }
      }
    }
  });
}

// The register blocks of the NCHW weight gradient: kDotOutBlock output channels x kDotTapBlock taps of vector sums,
// one gy vector per output channel and one tap vector in AVX2's 16 registers.
constexpr int64_t kDotOutBlock = 3, kDotTapBlock = 4;

// sums[o * sums_stride + k] += sum over t in [0, n) of gy[o][t] * taps[k][t] (kMasked: where keep[t]), for kOut
// output channels (gy rows gy_stride apart) and kTaps taps, n a multiple of the vector size: every gy and tap vector
// is loaded once for all kOut x kTaps sums, which stay in registers, and are added in a fixed order.
template <int64_t kOut, int64_t kTaps, bool kMasked, typename acc_t>
void dot_block(acc_t* sums, int64_t sums_stride, const acc_t* const* taps, const acc_t* gy, int64_t gy_stride,
               const acc_t* keep, int64_t n) {
  using Vec = at::vec::Vectorized<acc_t>;
  constexpr int64_t V = Vec::size();
  Vec acc[kOut][kTaps];
  for (int64_t o = 0; o < kOut; ++o) std::fill_n(acc[o], kTaps, Vec(acc_t(0)));
  for (int64_t t = 0; t < n; t += V) {
    Vec y[kOut];
    for (int64_t o = 0; o < kOut; ++o) y[o] = Vec::loadu(gy + o * gy_stride + t);
    for (int64_t k = 0; k < kTaps; ++k) {
      const Vec x = Vec::loadu(taps[k] + t);
      for (int64_t o = 0; o < kOut; ++o) {
        if constexpr (kMasked) {
          acc[o][k] = acc[o][k] + ((y[o] * x) & Vec::loadu(keep + t));
        } else {
          acc[o][k] = at::vec::fmadd(y[o], x, acc[o][k]);
        }
      }
    }
  }
  for (int64_t o = 0; o < kOut; ++o) {
    for (int64_t k = 0; k < kTaps; ++k) {
      acc_t lanes[V];
      acc[o][k].store(lanes);
      sums[o * sums_stride + k] += std::accumulate(lanes, lanes + V, acc_t(0));
    }
  }
}

// dot_block for `outs` (1..kDotOutBlock) output channels and `tap_count` (1..kDotTapBlock) taps.
template <bool kMasked, typename acc_t>
void dot_block(int64_t outs, int64_t tap_count, acc_t* sums, int64_t sums_stride, const acc_t* const* taps,
               const acc_t* gy, int64_t gy_stride, const acc_t* keep, int64_t n) {
  const auto run = [&](auto out_count) {
    constexpr int64_t kOut = decltype(out_count)::value;
    switch (tap_count) {
      case 1: return dot_block<kOut, 1, kMasked>(sums, sums_stride, taps, gy, gy_stride, keep, n);
      case 2: return dot_block<kOut, 2, kMasked>(sums, sums_stride, taps, gy, gy_stride, keep, n);
      case 3: return dot_block<kOut, 3, kMasked>(sums, sums_stride, taps, gy, gy_stride, keep, n);
      default: return dot_block<kOut, kDotTapBlock, kMasked>(sums, sums_stride, taps, gy, gy_stride, keep, n);
    }
  };
  static_assert(kDotOutBlock == 3 && kDotTapBlock == 4, "the cases below");
  switch (outs) {
    case 1: return run(std::integral_constant<int64_t, 1>());
    case 2: return run(std::integral_constant<int64_t, 2>());
    default: return run(std::integral_constant<int64_t, kDotOutBlock>());
  }
}

// gw[c, r, tap] = sum over images and output positions of gy[c] * the tap's padded input channel r of c's group, for
// any R input and m output channels per group (depthwise: R = 1). Parallel over runs of a group's input channels
// (about one run per thread); each gradient value is summed by one thread in an order fixed by the geometry alone, so
// the result does not depend on the thread count. Per band, the gy of the group's m output channels is loaded once
// for the run; per input channel and kernel depth, its phase planes are gathered once, and dot_block reduces every tap
// against each output channel's gy. The band's discarded columns hold zeros in gy but real input values in the taps,
// which add exactly zero where they are finite. So a run whose sums all come out finite met no inf or NaN there; one
// whose sums do not is summed again with each product masked by its position's keep mask, so that an inf or NaN
// reaches only the sums the reference's products take it to.
template <typename scalar_t>
void weight_grad_nchw(const ConvGeometry& g, const scalar_t* x, PlaneStrides xs, const scalar_t* gy, PlaneStrides gys,
                      acc_type<scalar_t>* gw) {
  using acc_t = acc_type<scalar_t>;
  const int64_t m = g.conv_out_channels_per_group(), reduction = g.conv_in_channels_per_group(),
                out_w = g.conv_out_sizes[2], slice = g.conv_in_sizes[1] * g.conv_in_sizes[2];
  const int64_t taps_2d = g.kernel[1] * g.kernel[2], taps = g.kernel_volume(), out_slice = g.conv_out_sizes[1] * out_w;
  const int64_t runs_per_group = std::min(reduction, (at::get_num_threads() + g.groups - 1) / g.groups);
  const int64_t run_length = (reduction + runs_per_group - 1) / runs_per_group;
  at::parallel_for(0, g.groups * runs_per_group, 1, [&](int64_t begin, int64_t end) {
    PhasePlanes<acc_t> planes(g, 1, kPhasePlaneBytes, m * static_cast<int64_t>(sizeof(acc_t)));  // and the gy bands
    const int64_t band_size = planes.band_buffer_size();
    std::vector<acc_t> gy_bands(m * band_size, acc_t(0)), sums(m * run_length * taps);  // sums: [r - r0][j][tap]
    KeepMask<acc_t> keep(band_size, planes.pitch());
    const auto sum_run = [&](int64_t group, int64_t r0, int64_t run, auto masked) {
      constexpr bool kMasked = decltype(masked)::value;
      std::fill(sums.begin(), sums.end(), acc_t(0));
      for (int64_t n = 0; n < g.batch; ++n) {
        for (int64_t od = 0; od < g.conv_out_sizes[0]; ++od) {
          for (int64_t b = 0; b < planes.bands(); ++b) {
            const Band band = planes.band(b);
            const int64_t n_pos = planes.positions(band.rows);
            const acc_t* keep_mask = kMasked ? keep.for_band(band) : nullptr;
            for (int64_t j = 0; j < m; ++j) {
              acc_t* gy_band = gy_bands.data() + j * band_size;
              load_band(gy_band, gy + n * gys.image + (group * m + j) * gys.channel + od * out_slice * gys.position,
                        band, planes.pitch(), out_w, gys.position);
              std::fill(gy_band + band.rows * planes.pitch(), gy_band + band_size, acc_t(0));  // a longer band's rows
            }
            for (int64_t r = r0; r < r0 + run; ++r) {
              const scalar_t* x_plane = x + n * xs.image + (group * reduction + r) * xs.channel;
              acc_t* r_sums = sums.data() + (r - r0) * m * taps;
              for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
                const int64_t id = g.tap_source(0, od, kd);
                if (id < 0) continue;
                planes.gather(x_plane + id * slice * xs.position, band, 0, xs.position);
                for (int64_t j0 = 0; j0 < m; j0 += kDotOutBlock) {
                  for (int64_t k0 = 0; k0 < taps_2d; k0 += kDotTapBlock) {
                    dot_block<kMasked>(std::min(kDotOutBlock, m - j0), std::min(kDotTapBlock, taps_2d - k0),
                                       r_sums + j0 * taps + kd * taps_2d + k0, taps, planes.taps().data() + k0,
                                       gy_bands.data() + j0 * band_size, band_size, keep_mask, n_pos);
                  }
                }
              }
            }
          }
        }
      }
    };
    for (int64_t item = begin; item < end; ++item) {
      const int64_t group = item / runs_per_group, r0 = (item % runs_per_group) * run_length;
      const int64_t run = std::min(run_length, reduction - r0);
      sum_run(group, r0, run, std::false_type());
      if (!std::all_of(sums.begin(), sums.end(), [](acc_t v) { return std::isfinite(v); })) {
        sum_run(group, r0, run, std::true_type());
      }
      for (int64_t r = r0; r < r0 + run; ++r) {
        for (int64_t j = 0; j < m; ++j) {
          std::copy_n(sums.data() + ((r - r0) * m + j) * taps, taps, gw + ((group * m + j) * reduction + r) * taps);
        }
      }
    }
  });
}

// ---- channels-last (multiplier 1) --------------------------------------------------------------------------
// `w_taps` is the weight transposed to [taps, C] in the accumulation type; every inner loop is a vector over C.


// rows = (kd * kh_count + kh, input row) of each tap row of output row (od, oh) that reads the input side: the tap
// rows as NhwcRows and the weight gradient's row kernel take them.
void tap_rows(const ConvGeometry& g, int64_t od, int64_t oh, std::vector<std::pair<int64_t, int64_t>>& rows) {
  rows.clear();
  for_each_tap_row(g, od, oh, [&](int64_t kd, int64_t kh, int64_t in_row) {
    rows.emplace_back(kd * g.kernel[1] + kh, in_row);
  });
}

// Whether every tap of output columns [ow_begin, ow_end) reads inside the input row, at column ow * stride - pad_lo +
// kw * dilation (no padding mode to resolve).
bool taps_inside_row(const ConvGeometry& g, int64_t ow_begin, int64_t ow_end) {
  const int64_t first = ow_begin * g.stride[2] - g.pad_lo[2];
  const int64_t last = (ow_end - 1) * g.stride[2] - g.pad_lo[2] + (g.kernel[2] - 1) * g.dilation[2];
  return first >= 0 && last < g.conv_in_sizes[2];
}

// The vectors of cpu/nhwc_tiles_kernel.h's tiles as at::vec's: the build's own instruction set (AVX2, or baseline).
template <typename acc_t>
struct AtenVectors {
  using V = at::vec::Vectorized<acc_t>;
  static constexpr int64_t kLanes = V::size();
  static constexpr bool kMaskedLanes = false;  // fewer channels than a vector run NhwcRows' per-pixel loop
  template <typename scalar_t>
  static V load(const scalar_t* p) { return load_vector<acc_t>(p); }
  static V zero() { return V(acc_t(0)); }
  static V fmadd(const V& a, const V& b, const V& c) { return at::vec::fmadd(a, b, c); }
  static V add(const V& a, const V& b) { return a + b; }
  template <typename scalar_t>
  static acc_t scalar(scalar_t v) { return static_cast<acc_t>(v); }
  template <typename scalar_t>
  static void store(scalar_t* p, const V& v) {
    if constexpr (std::is_same_v<scalar_t, acc_t>) {
      v.store(p);
    } else {
      acc_t values[kLanes];
      v.store(values);
      at::vec::convert(values, p, kLanes);
    }
  }
};

#include "cpu/nhwc_tiles_kernel.h"

// The torch-free type (cpu/nhwc_tiles.h) whose bits a float-accumulated scalar_t's values are, for the AVX-512 tiles.
template <typename scalar_t>
using TileBits = std::conditional_t<std::is_same_v<scalar_t, float>, float,
                                    std::conditional_t<std::is_same_v<scalar_t, at::BFloat16>, BFloat16Bits,
                                                       Float16Bits>>;
static_assert(sizeof(TileBits<at::BFloat16>) == sizeof(at::BFloat16) && sizeof(TileBits<at::Half>) == sizeof(at::Half));

// A channels-last conv with R input and m output channels per group reads input channels (c / m) * R + ci, ci < R,
// for output channel c. Its kernels read rows of the input expanded so that output channel c's lane reads them:
// per pixel, R runs of C_out values, run ci holding input channel (c / m) * R + ci at lane c (with R == 1, each
// channel repeated m times). The rows are expanded per thread into a cache keyed by (image, input row): output rows
// `dilation` apart share all but stride x dilation of their tap rows, so with kd x kh x dilation rows cached each
// input row is expanded about once per thread.
template <typename scalar_t>
class ExpandedRows {
 public:
  ExpandedRows(const ConvGeometry& g, const scalar_t* x)
      : x_(x), in_channels_(g.conv_in_channels), reduction_(g.conv_in_channels_per_group()),
        multiplier_(g.conv_out_channels_per_group()), out_channels_(g.conv_out_channels), in_w_(g.conv_in_sizes[2]),
        rows_per_image_(g.conv_in_sizes[0] * g.conv_in_sizes[1]), slots_(slot_count(g)),
        keys_(slots_, -1), last_use_(slots_, 0), values_(slots_ * in_w_ * reduction_ * out_channels_) {}

  // The rows a conv's cache holds: kd x kh x dilation (see above).
  static int64_t slot_count(const ConvGeometry& g) { return g.kernel[0] * g.kernel[1] * g.dilation[1]; }

  const scalar_t* data() const { return values_.data(); }

  // Replaces each row's input row (image n) by the slot that holds it expanded, expanding the rows not held into the
  // slots least recently used.
  void hold(int64_t n, std::vector<std::pair<int64_t, int64_t>>& rows) {
    ++uses_;
    std::vector<size_t> missing;
    for (size_t i = 0; i < rows.size(); ++i) {
      const int64_t slot = std::find(keys_.begin(), keys_.end(), key(n, rows[i].second)) - keys_.begin();
      if (slot == slots_) {
        missing.push_back(i);
      } else {
        last_use_[slot] = uses_;
        rows[i].second = slot;
      }
    }
    for (const size_t i : missing) {
      const int64_t slot = std::min_element(last_use_.begin(), last_use_.end()) - last_use_.begin();
      expand(n, rows[i].second, slot);
      keys_[slot] = key(n, rows[i].second);
      last_use_[slot] = uses_;
      rows[i].second = slot;
    }
  }

 private:
  int64_t key(int64_t n, int64_t in_row) const { return n * rows_per_image_ + in_row; }

  // The row is one run of in_w * C_in values, each written m times in a row. A power-of-two m up to a vector
  // interleaves a vector with itself log2(m) times, which gives its values repeated m times in m vectors. Other values
  // store whole broadcast vectors, whose lanes past the value's m the next value's stores overwrite; the last values,
  // whose stores would run past the row, are written one by one.
  // With R > 1, each input value (group, ci) of a pixel is read once and written m times, to run ci's lanes of the
  // group's m output channels.
  void expand(int64_t n, int64_t in_row, int64_t slot) {
    using Vec = at::vec::Vectorized<scalar_t>;
    constexpr int64_t kLanes = Vec::size();
    const scalar_t* from = x_ + (n * rows_per_image_ + in_row) * in_w_ * in_channels_;
    scalar_t* to = values_.data() + slot * in_w_ * reduction_ * out_channels_;
    if (reduction_ > 1) {
      switch (multiplier_) {
        case 1: return expand_groups<1>(from, to);
        case 2: return expand_groups<2>(from, to);
        case 3: return expand_groups<3>(from, to);
        default: return expand_groups<0>(from, to);
      }
    }
    const int64_t count = in_w_ * in_channels_, m = multiplier_;
    int64_t i = 0;
    switch (m) {
      case 2: i = expand_interleaved<2>(from, to, count); break;
      case 4: i = expand_interleaved<4>(from, to, count); break;
      case 8: i = expand_interleaved<8>(from, to, count); break;
      case 16: i = expand_interleaved<16>(from, to, count); break;
      default: break;
    }
    to += i * m;
    const int64_t stored = (m + kLanes - 1) / kLanes * kLanes;  // values each broadcast value's stores write
    for (; (count - i) * m >= stored; ++i, to += m) {
      const Vec value(from[i]);
      for (int64_t v = 0; v < m; v += kLanes) value.store(to + v);
    }
    for (; i < count; ++i, to += m) std::fill_n(to, m, from[i]);
  }

  // The whole vectors of a row's `count` values with a multiplier of kM, a power of two up to a vector: each vector
  // interleaved with itself log2(kM) times; returns the values done. kM known to the compiler, so that the kM stores
  // unroll: a loop over a run-time m had compiled to a memmove call per vector, a third of seed 2's random034 (a
  // channels-last 1x1 7 -> 14 depthwise conv). The calls that expand such rows, 2 cores (Zen 4), the op alone,
  // interleaved: seeds 1-4 and the suite 20 calls 0.39-0.99x the time (geomean 0.71), held out (seeds 5-12) 27 calls
  // 0.57-0.95x (0.78), AVX2's tiles 0.41-0.98x (0.74), bfloat16 0.80-1.03x (0.93).
  template <int64_t kM>
  int64_t expand_interleaved(const scalar_t* from, scalar_t* to, int64_t count) const {
    using Vec = at::vec::Vectorized<scalar_t>;
    constexpr int64_t kLanes = Vec::size();
    int64_t i = 0;
    if constexpr (kM <= kLanes) {
      for (; i + kLanes <= count; i += kLanes, to += kM * kLanes) {
        Vec repeated[kM];
        repeated[0] = Vec::loadu(from + i);
        for (int64_t copies = 1; copies < kM; copies *= 2) {  // each of `copies` vectors becomes two
          for (int64_t v = copies - 1; v >= 0; --v) {
            std::tie(repeated[2 * v], repeated[2 * v + 1]) = at::vec::interleave2(repeated[v], repeated[v]);
          }
        }
        for (int64_t v = 0; v < kM; ++v) repeated[v].store(to + v * kLanes);
      }
    }
    return i;
  }

  // R > 1: one row's pixels, kMultiplier (0: multiplier_) known to the compiler for the few that grouped convs
  // take (kGroupedExpandedMaxOutChannels), so that the m stores of a value unroll.
  template <int64_t kMultiplier>
  void expand_groups(const scalar_t* from, scalar_t* to) const {
    const int64_t m = kMultiplier > 0 ? kMultiplier : multiplier_, groups = in_channels_ / reduction_;
    for (int64_t iw = 0; iw < in_w_; ++iw, from += in_channels_, to += reduction_ * out_channels_) {
      for (int64_t group = 0; group < groups; ++group) {
        for (int64_t ci = 0; ci < reduction_; ++ci) {
          const scalar_t value = from[group * reduction_ + ci];
          scalar_t* lanes = to + ci * out_channels_ + group * m;
          for (int64_t k = 0; k < m; ++k) lanes[k] = value;
        }
      }
    }
  }

  const scalar_t* x_;
  int64_t in_channels_, reduction_, multiplier_, out_channels_, in_w_, rows_per_image_, slots_;
  std::vector<int64_t> keys_;  // the (image, input row) each slot holds, -1 for none
  std::vector<int64_t> last_use_;  // the call of hold that last used each slot (0: never)
  int64_t uses_ = 0;
  std::vector<scalar_t> values_;  // [slot][in_w][R][C_out]
};

// One output row of a channels-last conv at a time, for conv_nhwc and NCHW's channel blocks. With a vector of
// channels or more: tiles of kNhwcTile output pixels x one vector of channels stay in registers over every tap, each
// tap's input read where it lands (its column resolved by the padding mode once, in `columns`), so each output vector
// is stored once and each multiply-add loads one input vector. Otherwise per pixel: a loop per tap over all C, which
// loads and stores the accumulators for every tap. With a multiplier, or more than one input channel per group
// (cpu_grouped_expanded), the rows are expanded (ExpandedRows), and each tap reduces over the R runs of its pixel
// (kGroups: R > 1; otherwise R is 1, known to the compiler, and the depthwise conv's loops compile as they did before
// grouped convs shared them). w_taps: [taps][R][C_out].
template <bool kGroups, typename scalar_t>
class NhwcRows {
 public:
  using acc_t = acc_type<scalar_t>;
  using Vec = at::vec::Vectorized<acc_t>;

  // avx512: the tiles on AVX-512 (cpu_nhwc_tiles_avx512), for float accumulation and 16 channels or more, or float32
  // and 9-15 channels, one masked vector (cpu_nhwc_tiles_avx512_masked).
  NhwcRows(const ConvGeometry& g, bool avx512)
      : g_(g),
        channels_(g.conv_out_channels),
        reduction_(kGroups ? g.conv_in_channels_per_group() : 1),
        pixel_values_(reduction_ * channels_),
        pixel_bytes_(pixel_values_ * static_cast<int64_t>(sizeof(scalar_t))),
        tiles_((g.conv_out_sizes[2] + kNhwcTile - 1) / kNhwcTile),
        columns_(tap_columns(g, tiles_ * kNhwcTile)),
        interior_(tiles_),
        avx512_(avx512) {
    const int64_t out_w = g.conv_out_sizes[2], kw_count = g.kernel[2];
    for (int64_t tile = 0; tile < tiles_; ++tile) {
      const int64_t ow0 = tile * kNhwcTile;
      interior_[tile] = ow0 + kNhwcTile <= out_w && taps_inside_row(g, ow0, ow0 + kNhwcTile);
    }
    // The column offsets from a tile's first input column that some tile reads: those whose residue modulo the
    // stride is some tap's offset kw * dilation (a 1x1 kernel at stride 2 reads every other column).
    for (int64_t q = 0; q < kNhwcTile * g.stride[2]; ++q) {
      for (int64_t kw = 0; kw < kw_count; ++kw) {
        if ((kw * g.dilation[2]) % g.stride[2] == q % g.stride[2]) {
          read_offsets_.push_back(q);
          break;
        }
      }
    }
    TORCH_INTERNAL_ASSERT(!avx512 || (std::is_same_v<acc_t, float> &&
                                      (channels_ >= kNhwcTilesAvx512Lanes ||
                                       (std::is_same_v<scalar_t, float> &&
                                        channels_ >= kNhwcTilesAvx512MinMaskedChannels))),
                          "fastpad: the AVX-512 tiles need float accumulation and a vector of channels (float32: 9)");
    // Fewer channels than a vector, or a strided row whose pixels are a multiple of 4 KiB apart: the per-pixel loop.
    // In such a row every vector a tile reads at one channel offset falls in the same L1 set, and at stride s tap
    // kw + s re-reads the lines that the taps between evicted (4x1024x28^2 k5 s2: 1.47x the per-pixel loop's time;
    // 4x1000x28^2 0.72x). Otherwise tiles (benchmarks/RESULTS.md: 0.46-0.86x the per-pixel loop's time on the
    // suite's channels-last depthwise layers, which had it from 40 channels on).
    per_pixel_ = channels_ < Vec::size() || (g.stride[2] > 1 && pixel_bytes_ % 4096 == 0);
    // Pixels of up to two lines are prefetched whole (nhwc_tiles_kernel.h).
    whole_pixels_ = pixel_bytes_ <= 128;
    sliding_ = cpu_nhwc_tiles_slide(g, kGroups);
  }

  // Output row y_row (out_w pixels y_pixel_stride apart, C_out channels each) from the image x_image (R x C_out
  // values per pixel) through the tap rows `rows`, (kd * kh_count + kh, input row) each. scratch: C_out values, for
  // the per-pixel loop.
  void run(const scalar_t* x_image, const acc_t* w_taps, const acc_t* bias, scalar_t* y_row, int64_t y_pixel_stride,
           const std::vector<std::pair<int64_t, int64_t>>& rows, std::vector<acc_t>& scratch) const {
    const int64_t out_w = g_.conv_out_sizes[2], kw_count = g_.kernel[2], in_w = g_.conv_in_sizes[2];
    if (per_pixel_) {
      for (int64_t ow = 0; ow < out_w; ++ow) {
        if (bias) {
          std::copy(bias, bias + channels_, scratch.begin());
        } else {
          std::fill(scratch.begin(), scratch.end(), acc_t(0));
        }
        for (const auto& [tap_row, in_row] : rows) {
          for (int64_t kw = 0; kw < kw_count; ++kw) {
            const int64_t column = columns_[ow * kw_count + kw];
            if (column < 0) continue;
            for (int64_t ci = 0; ci < reduction_; ++ci) {
              multiply_add(scratch.data(), w_taps + ((tap_row * kw_count + kw) * reduction_ + ci) * channels_,
                           x_image + (in_row * in_w + column) * pixel_values_ + ci * channels_, channels_);
            }
          }
        }
        at::vec::convert(scratch.data(), y_row + ow * y_pixel_stride, channels_);
      }
      return;
    }
    if constexpr (std::is_same_v<acc_t, float>) {
      if (avx512_) {
        using Bits = TileBits<scalar_t>;
        const auto row = tiles(reinterpret_cast<const Bits*>(x_image), w_taps, bias, reinterpret_cast<Bits*>(y_row),
                               y_pixel_stride, rows);
        nhwc_row_tiles_avx512(row, kGroups);
        return;
      }
    }
    nhwc_row_tiles<AtenVectors<acc_t>, kGroups>(tiles(x_image, w_taps, bias, y_row, y_pixel_stride, rows));
  }

 private:
  // The row as cpu/nhwc_tiles.h takes it, its tensors as T.
  template <typename T>
  NhwcRowTiles<T, acc_t> tiles(const T* x_image, const acc_t* w_taps, const acc_t* bias, T* y_row,
                               int64_t y_pixel_stride, const std::vector<std::pair<int64_t, int64_t>>& rows) const {
    return {x_image, w_taps, bias, y_row, y_pixel_stride, rows.data(), static_cast<int64_t>(rows.size()), channels_,
            reduction_, g_.kernel[2], g_.conv_in_sizes[2], g_.stride[2], g_.conv_out_sizes[2], columns_.data(),
            interior_.data(), read_offsets_.data(), static_cast<int64_t>(read_offsets_.size()), whole_pixels_,
            sliding_};
  }

  const ConvGeometry& g_;
  int64_t channels_, reduction_, pixel_values_, pixel_bytes_, tiles_;
  std::vector<int64_t> columns_;  // see NhwcRowTiles
  std::vector<uint8_t> interior_;
  std::vector<int64_t> read_offsets_;
  bool avx512_, per_pixel_ = false, whole_pixels_ = false, sliding_ = false;
};

// Parallel over (image, depth, output row). y_strides: y's element strides (element_strides in conv_params.h); its
// channels are contiguous.
template <bool kGroups, typename scalar_t>
void conv_nhwc(const ConvGeometry& g, const scalar_t* x, const acc_type<scalar_t>* w_taps,
               const acc_type<scalar_t>* bias, scalar_t* y, const std::array<int64_t, 2 + kMaxSpatial>& y_strides,
               bool avx512) {
  using acc_t = acc_type<scalar_t>;
  const int64_t channels = g.conv_out_channels, out_h = g.conv_out_sizes[1];
  const bool expanded = kGroups || g.conv_out_channels_per_group() > 1;
  const NhwcRows<kGroups, scalar_t> row_kernel(g, avx512);
  at::parallel_for(0, g.batch * g.conv_out_sizes[0] * out_h, 1, [&](int64_t begin, int64_t end) {
    std::vector<std::pair<int64_t, int64_t>> rows;  // (kd * kh_count + kh, input row) of each tap row read
    std::vector<acc_t> scratch(channels);
    std::optional<ExpandedRows<scalar_t>> expanded_rows;
    if (expanded) expanded_rows.emplace(g, x);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t oh = item % out_h, od = (item / out_h) % g.conv_out_sizes[0],
                    n = item / (out_h * g.conv_out_sizes[0]);
      tap_rows(g, od, oh, rows);
      // The source of the rows: R x C_out values per pixel.
      const scalar_t* x_image = x + n * g.conv_in_volume() * channels;
      if (expanded) {
        expanded_rows->hold(n, rows);
        x_image = expanded_rows->data();
      }
      row_kernel.run(x_image, w_taps, bias, y + n * y_strides[0] + od * y_strides[2] + oh * y_strides[3], y_strides[4],
                     rows, scratch);
    }
  });
}

// The weight [C, R, taps] as [taps, R, C] in the accumulation type, for the channels-last kernels.
at::Tensor weight_by_tap(const at::Tensor& weight, at::ScalarType acc_dtype) {
  return weight.to(acc_dtype).reshape({weight.size(0), weight.size(1), -1}).permute({2, 1, 0}).contiguous();
}

// dst[j * dst_stride + i] = src[i * src_stride + j] for i < rows, j < cols: NCHW planes into channels-last positions
// and back. Float: whole 8 x 8 blocks by vector shuffles, the longer dim outermost (the positions), then the strips
// past the last whole block value by value. bfloat16 to float or back: strips of 8 rows and up to
// kTransposeStripColumns columns, converted to float into a buffer row by row (contiguous runs the compiler
// vectorizes: a bfloat16 is a float's upper half), transposed there by the same 8 x 8 blocks, and converted on the
// way out 8 values at a time; the rows past the last whole strip value by value. Value by value throughout, bfloat16
// channel blocks had taken 1.05-2.44x this time (the suite's 2.0-2.4x their float32 time). float16, whose scalar
// conversions the compiler does not vectorize, ran 0.65-1.46x slower this way and stays value by value.
constexpr int64_t kTransposeStripColumns = 64;
template <typename src_t, typename dst_t>
void transpose_matrix(const src_t* src, int64_t src_stride, dst_t* dst, int64_t dst_stride, int64_t rows,
                      int64_t cols) {
  constexpr bool kFloat = std::is_same_v<src_t, float> && std::is_same_v<dst_t, float>;
  constexpr bool kHalfWidth = (std::is_same_v<dst_t, float> && std::is_same_v<src_t, c10::BFloat16>) ||
                              (std::is_same_v<src_t, float> && std::is_same_v<dst_t, c10::BFloat16>);
  const int64_t whole_rows = kFloat || kHalfWidth ? rows / 8 * 8 : 0;
  const int64_t whole_cols = kFloat ? cols / 8 * 8 : kHalfWidth ? cols : 0;
  const auto block = [](const float* from, int64_t from_stride, float* to, int64_t to_stride) {
    at::vec::transpose_mxn<float, 8, 8>(from, from_stride, to, to_stride);
  };
  if constexpr (kFloat) {
    if (whole_rows >= whole_cols) {
      for (int64_t i = 0; i < whole_rows; i += 8) {
        for (int64_t j = 0; j < whole_cols; j += 8) {
          block(src + i * src_stride + j, src_stride, dst + j * dst_stride + i, dst_stride);
        }
      }
    } else {
      for (int64_t j = 0; j < whole_cols; j += 8) {
        for (int64_t i = 0; i < whole_rows; i += 8) {
          block(src + i * src_stride + j, src_stride, dst + j * dst_stride + i, dst_stride);
        }
      }
    }
  } else if constexpr (kHalfWidth) {
    constexpr int64_t K = kTransposeStripColumns;
    float rows_in[8 * K], columns_out[K * 8];
    for (int64_t i = 0; i < whole_rows; i += 8) {
      for (int64_t j0 = 0; j0 < cols; j0 += K) {
        const int64_t width = std::min(K, cols - j0), blocks_end = width / 8 * 8;
        for (int64_t r = 0; r < 8; ++r) {
          const src_t* from = src + (i + r) * src_stride + j0;
          for (int64_t j = 0; j < width; ++j) rows_in[r * K + j] = static_cast<float>(from[j]);
        }
        for (int64_t j = 0; j < blocks_end; j += 8) block(rows_in + j, K, columns_out + j * 8, 8);
        for (int64_t j = blocks_end; j < width; ++j) {
          for (int64_t r = 0; r < 8; ++r) columns_out[j * 8 + r] = rows_in[r * K + j];
        }
        for (int64_t j = 0; j < width; ++j) {
          dst_t* to = dst + (j0 + j) * dst_stride + i;
          for (int64_t r = 0; r < 8; ++r) to[r] = static_cast<dst_t>(columns_out[j * 8 + r]);
        }
      }
    }
  }
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = i < whole_rows ? whole_cols : 0; j < cols; ++j) {
      dst[j * dst_stride + i] = static_cast<dst_t>(src[i * src_stride + j]);
    }
  }
}

// NCHW depthwise with multiplier 1 over blocks of channels: per (image, block), the block's input planes are
// transposed into a channels-last image, NhwcRows' tiles run over it (registers over every tap, each input vector
// loaded once per tap: a strided or short row gives NCHW's vector loops short runs), and the channels-last output is
// transposed back into y's planes. A block holds up to kChannelBlockVectors vectors of channels, as many as keep its
// input image within kChannelBlockBytes (more measured slower on larger planes: the image outgrows L1 and L2), so
// that each row's fixed costs serve several vectors; the vectors past the last whole block are one block of their own,
// which ends at C (channels it shares with the block before are computed again, alike). w_taps: [taps][C].
constexpr int64_t kChannelBlockVectors = 8, kChannelBlockBytes = 64 * 1024;

// NCHW's blocks of channels: whole vectors of V channels, up to max_vectors a block (at most kChannelBlockVectors),
// as many as keep image_values accumulators per channel within kChannelBlockBytes; the vectors past the last whole
// block are one block of their own that ends at C (sharing channels with the block before where V does not divide C).
struct ChannelBlocks {
  int64_t vector, channels, most, whole, rest, count;
  ChannelBlocks(int64_t channels, int64_t vector, int64_t image_values, int64_t acc_bytes, int64_t max_vectors)
      : vector(vector), channels(channels) {
    const int64_t vectors = (channels + vector - 1) / vector;
    const int64_t per_block = std::clamp<int64_t>(kChannelBlockBytes / (image_values * vector * acc_bytes), 1,
                                                  std::min({kChannelBlockVectors, channels / vector, max_vectors}));
    most = per_block * vector;
    whole = vectors / per_block;
    rest = vectors % per_block;
    count = whole + (rest > 0 ? 1 : 0);
  }
  int64_t lanes(int64_t block) const { return block == whole ? rest * vector : most; }
  int64_t first_channel(int64_t block) const { return std::min(block * most, channels - lanes(block)); }
};

// The geometry of one image of a depthwise problem's block of `lanes` channels, as the channels-last kernels see it.
ConvGeometry channel_block_geometry(const ConvGeometry& g, int64_t lanes) {
  ConvGeometry block = g;
  block.batch = 1;
  block.conv_in_channels = block.conv_out_channels = block.groups = lanes;
  return block;
}

template <typename scalar_t>
void conv_nchw_channel_blocks(const ConvGeometry& g, const scalar_t* x, const acc_type<scalar_t>* w_taps,
                              const acc_type<scalar_t>* bias, scalar_t* y, bool avx512) {
  using acc_t = acc_type<scalar_t>;
  // Channels per vector of the tiles.
  const int64_t V = avx512 ? kNhwcTilesAvx512Lanes : at::vec::Vectorized<acc_t>::size();
  const int64_t channels = g.conv_out_channels, taps = g.kernel_volume();
  const int64_t in_volume = g.conv_in_volume(), out_volume = g.conv_out_volume(), out_w = g.conv_out_sizes[2];
  const int64_t out_rows = g.conv_out_sizes[0] * g.conv_out_sizes[1];
  TORCH_INTERNAL_ASSERT(channels >= V, "fastpad: channel blocks need a vector of channels");
  const ChannelBlocks blocks(channels, V, in_volume, sizeof(acc_t), kChannelBlockVectors);
  const ConvGeometry whole_block = channel_block_geometry(g, blocks.most);
  const ConvGeometry rest_block = channel_block_geometry(g, std::max<int64_t>(blocks.rest, 1) * V);
  const NhwcRows<false, acc_t> whole_kernel(whole_block, avx512), rest_kernel(rest_block, avx512);
  at::parallel_for(0, g.batch * blocks.count, 1, [&](int64_t begin, int64_t end) {
    const int64_t most = blocks.most;
    const auto x_lanes = uninitialized_buffer<acc_t>(in_volume * most);
    const auto y_lanes = uninitialized_buffer<acc_t>(out_volume * most);
    std::vector<acc_t> w_block(taps * most), bias_block(most), scratch(most);
    std::vector<std::pair<int64_t, int64_t>> rows;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t n = item / blocks.count, b = item % blocks.count;
      const int64_t lanes = blocks.lanes(b), c0 = blocks.first_channel(b);
      const NhwcRows<false, acc_t>& row_kernel = b == blocks.whole ? rest_kernel : whole_kernel;
      for (int64_t k = 0; k < taps; ++k) std::copy_n(w_taps + k * channels + c0, lanes, w_block.data() + k * lanes);
      if (bias) std::copy_n(bias + c0, lanes, bias_block.data());
      transpose_matrix(x + (n * channels + c0) * in_volume, in_volume, x_lanes.get(), lanes, lanes, in_volume);
      for (int64_t row = 0; row < out_rows; ++row) {
        tap_rows(g, row / g.conv_out_sizes[1], row % g.conv_out_sizes[1], rows);
        row_kernel.run(x_lanes.get(), w_block.data(), bias ? bias_block.data() : nullptr,
                       y_lanes.get() + row * out_w * lanes, lanes, rows, scratch);
      }
      transpose_matrix(y_lanes.get(), lanes, y + (n * channels + c0) * out_volume, out_volume, out_volume, lanes);
    }
  });
}

// The stride phases of a depthwise transposed conv (one y channel per group, zeros; or a multiplier, below) as the
// convs they are (transpose_phase_as_conv), for channels-last pixels: each phase's NhwcRows and its weight by tap, and
// one y row at a time, its column phases written in turn, pixels a stride apart, so that a y row is written once
// while the x rows it reads are in cache (phase by phase over the whole of y, the phases re-read x and swept y once
// each: 1.84x the scatter's time on a 112x112 k3 s2 layer). A phase no tap reaches writes the bias (or zero).
// kMultiplier: m > 1 x channels per group (each phase conv a grouped one reducing over them) or R > 1 y channels per
// group from one x channel (each phase conv a depthwise one with multiplier R), from x rows expanded per thread
// (ExpandedRows of most_rows_conv(): one cache for every phase, as many rows as the phase with the most tap rows
// reads). rows_g: the transposed conv as the rows see it (its channels those of the pixels they read and write); g:
// the op's, whose weight the phases' weights are cut from (NCHW's channel blocks: all of its channels; an undefined
// weight: none, for rows that take their weights from another's).
template <bool kMultiplier, typename scalar_t>
class TransposePhaseRows {
 public:
  using acc_t = acc_type<scalar_t>;

  TransposePhaseRows(const ConvGeometry& rows_g, const ConvGeometry& g, const at::Tensor& weight, bool avx512)
      : g_(rows_g), phase_(transpose_phase_count(rows_g)), row_kernels_(phase_.size()), w_taps_(phase_.size()),
        w_(phase_.size(), nullptr) {
    const auto acc_dtype = c10::CppTypeToScalarType<acc_t>::value;
    const auto tap_row_count = &ExpandedRows<scalar_t>::slot_count;
    for (int64_t p = 0; p < phases(); ++p) {
      phase_[p] = transpose_phase_as_conv(rows_g, p);
      if (tap_row_count(phase_[p].conv) > tap_row_count(phase_[most_rows_].conv)) most_rows_ = p;
      if (phase_[p].conv.conv_out_volume() == 0 || phase_[p].conv.kernel_volume() == 0) continue;
      row_kernels_[p].emplace(phase_[p].conv, avx512);  // keeps a reference to phase_[p], which is never moved
      if (!weight.defined()) continue;
      w_taps_[p] = weight_by_tap(transpose_phase_weight(g, weight, p), acc_dtype);
      w_[p] = w_taps_[p].const_data_ptr<acc_t>();
    }
  }
  TransposePhaseRows(const TransposePhaseRows&) = delete;
  TransposePhaseRows& operator=(const TransposePhaseRows&) = delete;

  int64_t phases() const { return static_cast<int64_t>(phase_.size()); }
  const ConvGeometry& most_rows_conv() const { return phase_[most_rows_].conv; }
  // Phase p's weights by tap, [taps][R][C] for g's C channels (null where no tap reaches the phase), and its taps.
  const acc_t* const* weights() const { return w_.data(); }
  int64_t taps(int64_t p) const { return row_kernels_[p] ? phase_[p].conv.kernel_volume() : 0; }

  // y row (od, oh) of image n, its pixels y_pixel_stride apart, from x_image (the image's x pixels: rows_g's x channels
  // each; with kMultiplier, through expanded_rows); w: each phase's weights [taps][R][C] for rows_g's C channels.
  void run(const scalar_t* x_image, ExpandedRows<scalar_t>* expanded_rows, const acc_t* const* w, const acc_t* bias,
           scalar_t* y_row, int64_t y_pixel_stride, int64_t n, int64_t od, int64_t oh,
           std::vector<std::pair<int64_t, int64_t>>& rows, std::vector<acc_t>& scratch) const {
    const int64_t rd = (od + g_.pad_lo[0]) % g_.stride[0], rh = (oh + g_.pad_lo[1]) % g_.stride[1];
    for (int64_t rw = 0; rw < g_.stride[2]; ++rw) {
      const int64_t p = (rd * g_.stride[1] + rh) * g_.stride[2] + rw;
      const TransposePhase& t = phase_[p];
      const int64_t columns = t.conv.conv_out_sizes[2], pixel_stride = g_.stride[2] * y_pixel_stride;
      scalar_t* y_first = y_row + t.y_first[2] * y_pixel_stride;
      if (columns == 0) continue;
      if (!row_kernels_[p]) {
        for (int64_t j = 0; j < columns; ++j) {
          scalar_t* pixel = y_first + j * pixel_stride;
          for (int64_t c = 0; c < g_.conv_in_channels; ++c) {
            pixel[c] = bias ? static_cast<scalar_t>(bias[c]) : scalar_t(0);
          }
        }
        continue;
      }
      tap_rows(t.conv, (od - t.y_first[0]) / g_.stride[0], (oh - t.y_first[1]) / g_.stride[1], rows);
      const scalar_t* x_rows = x_image;  // the source of the rows: R x C_y values per pixel
      if constexpr (kMultiplier) {
        expanded_rows->hold(n, rows);
        x_rows = expanded_rows->data();
      }
      row_kernels_[p]->run(x_rows, w[p], bias, y_first, pixel_stride, rows, scratch);
    }
  }

 private:
  const ConvGeometry g_;
  std::vector<TransposePhase> phase_;
  std::vector<std::optional<NhwcRows<kMultiplier, scalar_t>>> row_kernels_;
  std::vector<at::Tensor> w_taps_;
  std::vector<const acc_t*> w_;
  int64_t most_rows_ = 0;
};

// y = the channels-last depthwise transposed conv of g (TransposePhaseRows): parallel over (image, y depth, y row).
template <bool kMultiplier, typename scalar_t>
void conv_transpose_nhwc_phases(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& weight,
                                const at::Tensor& bias, at::Tensor& y, bool avx512) {
  using acc_t = acc_type<scalar_t>;
  const TransposePhaseRows<kMultiplier, scalar_t> phases(g, g, weight, avx512);
  const at::Tensor b_acc = bias.defined() ? bias.to(c10::CppTypeToScalarType<acc_t>::value) : at::Tensor();
  const acc_t* b = b_acc.defined() ? b_acc.const_data_ptr<acc_t>() : nullptr;
  const auto strides = element_strides(y);
  TORCH_INTERNAL_ASSERT(strides[1] == 1, "fastpad: the channels-last kernels need contiguous channels");
  const scalar_t* x_data = x.const_data_ptr<scalar_t>();
  scalar_t* y_data = y.mutable_data_ptr<scalar_t>();
  const int64_t y_depth = g.conv_in_sizes[0], y_rows = g.conv_in_sizes[1];
  at::parallel_for(0, g.batch * y_depth * y_rows, 1, [&](int64_t begin, int64_t end) {
    std::vector<std::pair<int64_t, int64_t>> rows;
    std::vector<acc_t> scratch(g.conv_in_channels);
    std::optional<ExpandedRows<scalar_t>> expanded_rows;
    if constexpr (kMultiplier) expanded_rows.emplace(phases.most_rows_conv(), x_data);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t oh = item % y_rows, od = (item / y_rows) % y_depth, n = item / (y_rows * y_depth);
      phases.run(x_data + n * g.conv_out_volume() * g.conv_out_channels, expanded_rows ? &*expanded_rows : nullptr,
                 phases.weights(), b, y_data + n * strides[0] + od * strides[2] + oh * strides[3], strides[4], n, od,
                 oh, rows, scratch);
    }
  });
}

// y = the NCHW depthwise transposed conv of g (multiplier 1, zeros) over blocks of channels as its stride phases'
// convs: per (image, block of whole vectors of channels, as conv_nchw_channel_blocks blocks them), the block's x
// planes are transposed into a channels-last image, TransposePhaseRows writes the block's channels-last y row by row,
// and y is transposed back into its planes. Against the NCHW scatter, which adds every tap into y's phase planes.
template <typename scalar_t>
void conv_transpose_nchw_channel_block_phases(const ConvGeometry& g, const scalar_t* x, const at::Tensor& weight,
                                              const acc_type<scalar_t>* bias, scalar_t* y, bool avx512) {
  using acc_t = acc_type<scalar_t>;
  const int64_t V = avx512 ? kNhwcTilesAvx512Lanes : at::vec::Vectorized<acc_t>::size();
  const int64_t channels = g.conv_in_channels;
  const int64_t x_volume = g.conv_out_volume(), y_volume = g.conv_in_volume();
  const int64_t y_depth = g.conv_in_sizes[0], y_rows = g.conv_in_sizes[1], y_w = g.conv_in_sizes[2];
  TORCH_INTERNAL_ASSERT(channels >= V, "fastpad: channel blocks need a vector of channels");
  const ChannelBlocks blocks(channels, V, y_volume, sizeof(acc_t), kChannelBlockVectors);
  const int64_t most = blocks.most;
  // The whole blocks' phases hold the weights of all C channels; the last block's, where there is one, none.
  const TransposePhaseRows<false, acc_t> whole_phases(channel_block_geometry(g, most), g, weight, avx512);
  std::optional<TransposePhaseRows<false, acc_t>> rest_phases;
  if (blocks.rest > 0) rest_phases.emplace(channel_block_geometry(g, blocks.rest * V), g, at::Tensor(), avx512);
  const int64_t phases = whole_phases.phases();
  at::parallel_for(0, g.batch * blocks.count, 1, [&](int64_t begin, int64_t end) {
    const auto x_lanes = uninitialized_buffer<acc_t>(x_volume * most);
    const auto y_lanes = uninitialized_buffer<acc_t>(y_volume * most);
    std::vector<std::vector<acc_t>> w_block(phases);
    std::vector<const acc_t*> w(phases, nullptr);
    std::vector<acc_t> bias_block(most), scratch(most);
    std::vector<std::pair<int64_t, int64_t>> rows;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t n = item / blocks.count, b = item % blocks.count;
      const int64_t lanes = blocks.lanes(b), c0 = blocks.first_channel(b);
      const TransposePhaseRows<false, acc_t>& block_phases = b == blocks.whole ? *rest_phases : whole_phases;
      for (int64_t p = 0; p < phases; ++p) {  // each phase's weights [taps][C] cut to the block's channels
        const acc_t* full = whole_phases.weights()[p];
        if (full == nullptr) continue;
        w_block[p].resize(whole_phases.taps(p) * lanes);
        for (int64_t k = 0; k < whole_phases.taps(p); ++k) {
          std::copy_n(full + k * channels + c0, lanes, w_block[p].data() + k * lanes);
        }
        w[p] = w_block[p].data();
      }
      if (bias) std::copy_n(bias + c0, lanes, bias_block.data());
      transpose_matrix(x + (n * channels + c0) * x_volume, x_volume, x_lanes.get(), lanes, lanes, x_volume);
      for (int64_t row = 0; row < y_depth * y_rows; ++row) {
        block_phases.run(x_lanes.get(), nullptr, w.data(), bias ? bias_block.data() : nullptr,
                         y_lanes.get() + row * y_w * lanes, lanes, 0, row / y_rows, row % y_rows, rows, scratch);
      }
      transpose_matrix(y_lanes.get(), lanes, y + (n * channels + c0) * y_volume, y_volume, y_volume, lanes);
    }
  });
}

// Parallel over (image, channel block of y): each block of y is written by one thread. With more than one channel per
// group on either side (kExpanded, cpu_grouped_expanded: m x channels and R y channels per group), each x pixel's
// channels are first expanded for the block: per k < m, a run with x channel (c / R) * m + k at y channel c's lane, the
// x channel of c's group that reaches c through weight k. w_taps: [taps][m][C_y] (transpose_weight_by_tap).
template <bool kExpanded, typename scalar_t>
void conv_transpose_nhwc(const ConvGeometry& g, const scalar_t* x, const acc_type<scalar_t>* w_taps,
                         acc_type<scalar_t>* y_acc) {
  using acc_t = acc_type<scalar_t>;
  const int64_t channels = g.conv_in_channels, x_channels = g.conv_out_channels, out_h = g.conv_out_sizes[1],
                out_w = g.conv_out_sizes[2];
  const int64_t m = g.conv_out_channels_per_group(), reduction = g.conv_in_channels_per_group();
  const int64_t block = channel_block(channels, at::vec::Vectorized<acc_t>::size());
  const int64_t blocks = (channels + block - 1) / block;
  at::parallel_for(0, g.batch * blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> x_expanded(kExpanded ? m * block : 0);
    std::vector<int64_t> x_source(kExpanded ? m * block : 0);  // the x channel of each expanded value (for the block)
    for (int64_t item = begin; item < end; ++item) {
      const int64_t n = item / blocks, c0 = (item % blocks) * block, len = std::min(block, channels - c0);
      acc_t* y_image = y_acc + n * g.conv_in_volume() * channels + c0;
      if constexpr (kExpanded) {
        for (int64_t k = 0; k < m; ++k) {
          for (int64_t c = 0; c < len; ++c) x_source[k * block + c] = (c0 + c) / reduction * m + k;
        }
      }
      for (int64_t pixel = 0; pixel < g.conv_out_volume(); ++pixel) {
        const scalar_t* x_pixel = x + (n * g.conv_out_volume() + pixel) * x_channels;
        if constexpr (kExpanded) {
          for (int64_t k = 0; k < m; ++k) {
            for (int64_t c = 0; c < len; ++c) {
              x_expanded[k * block + c] = static_cast<acc_t>(x_pixel[x_source[k * block + c]]);
            }
          }
        }
        for_each_tap_pixel(g, pixel / (out_w * out_h), (pixel / out_w) % out_h, pixel % out_w,
                           [&](int64_t tap, int64_t in_pixel) {
                             acc_t* y_pixel = y_image + in_pixel * channels;
                             if constexpr (kExpanded) {
                               // The group's m runs summed in registers, y read and written once per tap.
                               if (m == 1) {
                                 multiply_add(y_pixel, w_taps + tap * channels + c0, x_expanded.data(), len);
                               } else {
                                 multiply_add_runs(y_pixel, w_taps + tap * m * channels + c0, channels,
                                                   x_expanded.data(), block, m, len);
                               }
                             } else {
                               multiply_add(y_pixel, w_taps + tap * channels + c0, x_pixel + c0, len);
                             }
                           });
      }
    }
  });
}

// Adds one output row's products to its sums (nhwc_weight_grad_row), on AVX-512 where avx512 (float accumulation
// only): row(x_as, gy_as) builds the row's NhwcWeightGradRow over x_image and gy_row, as scalar_t or as its TileBits.
template <typename scalar_t, typename Row>
void add_weight_grad_row(const scalar_t* x_image, const scalar_t* gy_row, bool avx512, const Row& row) {
  using acc_t = acc_type<scalar_t>;
  if constexpr (std::is_same_v<acc_t, float>) {
    if (avx512) {
      using Bits = TileBits<scalar_t>;
      nhwc_weight_grad_row_avx512(row(reinterpret_cast<const Bits*>(x_image), reinterpret_cast<const Bits*>(gy_row)));
      return;
    }
  }
  nhwc_weight_grad_row<AtenVectors<acc_t>>(row(x_image, gy_row));
}

// The output columns of the channels-last weight gradient's rows (NhwcWeightGradRow): each column's tap columns, and
// the interior [interior_begin, interior_end) whose every tap reads inside the row.
struct WeightGradColumns {
  std::vector<int64_t> columns;
  int64_t interior_begin, interior_end;
  explicit WeightGradColumns(const ConvGeometry& g)
      : columns(tap_columns(g, g.conv_out_sizes[2])),
        interior_begin(g.conv_out_sizes[2]),
        interior_end(g.conv_out_sizes[2]) {
    for (int64_t ow = 0; ow < g.conv_out_sizes[2]; ++ow) {
      if (taps_inside_row(g, ow, ow + 1)) {
        interior_begin = std::min(interior_begin, ow);
        interior_end = ow + 1;
      }
    }
  }
};

// Parallel over channel blocks, one per thread, each summing over every output row of every image through
// nhwc_weight_grad_row (cpu/nhwc_tiles.h: per vector of channels and run of taps, the sums in registers along the row;
// on AVX-512 where avx512, cpu_nhwc_tiles_avx512). Each channel sums over (image, row, tap, column) in the same order
// whatever the blocking, so the result is bitwise independent of the thread count. Per pixel and tap, a multiply-add
// over the block's channels into sums in memory took 1.8-5.3x this time (benchmarks/RESULTS.md). With a multiplier,
// each thread reads x's rows expanded (ExpandedRows, as conv_nhwc does), where NCHW copies of x and gy had been made.
// gy_repeats > 1 (multiplier 1): gy has C / gy_repeats channels, its channel c / gy_repeats standing for channel c;
// each thread expands its block's channels of each gy row into a row of C channels (the vector ending at the block's
// end also reads channels before it, whatever the row holds there: their lanes' sums are discarded).
template <typename scalar_t>
void weight_grad_nhwc(const ConvGeometry& g, const scalar_t* x, const scalar_t* gy, acc_type<scalar_t>* gw,
                      bool avx512, int64_t gy_repeats) {
  using acc_t = acc_type<scalar_t>;
  const int64_t channels = g.conv_out_channels, out_h = g.conv_out_sizes[1], out_w = g.conv_out_sizes[2],
                kw_count = g.kernel[2], taps = g.kernel_volume();
  const int64_t lanes = avx512 ? kNhwcTilesAvx512Lanes : at::vec::Vectorized<acc_t>::size();
  const int64_t block = channel_block(channels, lanes), blocks = (channels + block - 1) / block;
  const WeightGradColumns tap_cols(g);
  const bool expanded = g.conv_out_channels_per_group() > 1;
  at::parallel_for(0, blocks, 1, [&](int64_t begin, int64_t end) {
    const int64_t sum_stride = block + lanes;  // the block's channels, then the vector ending at its last channel
    std::vector<acc_t> sums(taps * sum_stride);
    std::vector<std::pair<int64_t, int64_t>> rows;
    std::optional<ExpandedRows<scalar_t>> expanded_rows;
    if (expanded) expanded_rows.emplace(g, x);
    std::vector<scalar_t> gy_repeated(gy_repeats > 1 ? out_w * channels : 0);
    for (int64_t b = begin; b < end; ++b) {
      const int64_t c0 = b * block, len = std::min(block, channels - c0);
      std::fill(sums.begin(), sums.end(), acc_t(0));
      for (int64_t item = 0; item < g.batch * g.conv_out_sizes[0] * out_h; ++item) {
        const int64_t oh = item % out_h, od = (item / out_h) % g.conv_out_sizes[0],
                      n = item / (out_h * g.conv_out_sizes[0]);
        tap_rows(g, od, oh, rows);
        // The source of the rows: C_out values per pixel (a multiplier's rows expanded, as conv_nhwc's).
        const scalar_t* x_image = x + n * g.conv_in_volume() * g.conv_in_channels;
        if (expanded) {
          expanded_rows->hold(n, rows);
          x_image = expanded_rows->data();
        }
        const scalar_t* gy_row = gy + ((n * g.conv_out_sizes[0] + od) * out_h + oh) * out_w * (channels / gy_repeats);
        if (gy_repeats > 1) {
          const int64_t gy_channels = channels / gy_repeats;
          for (int64_t ow = 0; ow < out_w; ++ow) {
            scalar_t* to = gy_repeated.data() + ow * channels;
            for (int64_t c = c0; c < c0 + len;) {  // runs of one gy channel's repeats
              const int64_t run_end = std::min(c0 + len, (c / gy_repeats + 1) * gy_repeats);
              std::fill(to + c, to + run_end, gy_row[ow * gy_channels + c / gy_repeats]);
              c = run_end;
            }
          }
          gy_row = gy_repeated.data();
        }
        const auto row = [&](const auto* x_as, const auto* gy_as) {  // the row, its tensors' values as x_as's
          return NhwcWeightGradRow<std::remove_cv_t<std::remove_pointer_t<decltype(x_as)>>, acc_t>{
              x_as, gy_as, sums.data(), sum_stride, block, rows.data(), static_cast<int64_t>(rows.size()), channels,
              c0, c0 + len, kw_count, g.conv_in_sizes[2], g.stride[2], g.dilation[2], out_w, tap_cols.columns.data(),
              tap_cols.interior_begin, tap_cols.interior_end};
        };
        add_weight_grad_row(x_image, gy_row, avx512, row);
      }
      // Past the whole vectors, the vector ending at the block's end (first channel `tail`) kept its sums apart.
      const int64_t whole = len / lanes * lanes, tail = c0 + len - lanes;
      for (int64_t c = 0; c < len; ++c) {
        const int64_t column = c >= whole && tail >= 0 ? block + c0 + c - tail : c;
        for (int64_t tap = 0; tap < taps; ++tap) gw[(c0 + c) * taps + tap] = sums[tap * sum_stride + column];
      }
    }
  });
}

// The NCHW depthwise weight gradient with multiplier 1 over blocks of channels
// (cpu_depthwise_weight_grad_channel_blocks in kernel_paths.h): parallel over blocks of whole vectors of channels
// (ChannelBlocks: their x images within kChannelBlockBytes, and no more vectors a block than leave every thread one),
// each summed by one thread over every image. Per image, the block's x and gy planes are transposed into
// channels-last images and NhwcWeightGradRow's sums run over each output row of them, as weight_grad_nhwc's do over a
// channels-last tensor: each channel's sums are the same fused multiply-adds in the same order, whatever the
// blocking. The last block, which ends at C, writes only the channels no block before it holds.
template <typename scalar_t>
void weight_grad_nchw_channel_blocks(const ConvGeometry& g, const scalar_t* x, const scalar_t* gy,
                                     acc_type<scalar_t>* gw, bool avx512) {
  using acc_t = acc_type<scalar_t>;
  const int64_t V = avx512 ? kNhwcTilesAvx512Lanes : at::vec::Vectorized<acc_t>::size();
  const int64_t channels = g.conv_out_channels, taps = g.kernel_volume();
  const int64_t in_volume = g.conv_in_volume(), out_volume = g.conv_out_volume(), out_w = g.conv_out_sizes[2];
  const int64_t out_h = g.conv_out_sizes[1], out_rows = g.conv_out_sizes[0] * out_h;
  TORCH_INTERNAL_ASSERT(channels >= V, "fastpad: channel blocks need a vector of channels");
  const int64_t threads = at::get_num_threads(), vectors = (channels + V - 1) / V;
  const ChannelBlocks blocks(channels, V, in_volume, sizeof(acc_t), (vectors + threads - 1) / threads);
  const int64_t most = blocks.most;
  const WeightGradColumns tap_cols(g);
  at::parallel_for(0, blocks.count, 1, [&](int64_t begin, int64_t end) {
    const auto x_lanes = uninitialized_buffer<acc_t>(in_volume * most);
    const auto gy_lanes = uninitialized_buffer<acc_t>(out_volume * most);
    std::vector<acc_t> sums(taps * most);
    std::vector<std::pair<int64_t, int64_t>> rows;
    for (int64_t b = begin; b < end; ++b) {
      const int64_t lanes = blocks.lanes(b), c0 = blocks.first_channel(b);
      std::fill(sums.begin(), sums.end(), acc_t(0));
      for (int64_t n = 0; n < g.batch; ++n) {
        transpose_matrix(x + (n * channels + c0) * in_volume, in_volume, x_lanes.get(), lanes, lanes, in_volume);
        transpose_matrix(gy + (n * channels + c0) * out_volume, out_volume, gy_lanes.get(), lanes, lanes, out_volume);
        for (int64_t row = 0; row < out_rows; ++row) {
          tap_rows(g, row / out_h, row % out_h, rows);
          const auto row_sums = [&](const auto* x_as, const auto* gy_as) {  // the row, its values as x_as's
            return NhwcWeightGradRow<std::remove_cv_t<std::remove_pointer_t<decltype(x_as)>>, acc_t>{
                x_as, gy_as, sums.data(), lanes, /*tail_column=*/0, rows.data(), static_cast<int64_t>(rows.size()),
                lanes, 0, lanes, g.kernel[2], g.conv_in_sizes[2], g.stride[2], g.dilation[2], out_w,
                tap_cols.columns.data(), tap_cols.interior_begin, tap_cols.interior_end};
          };
          add_weight_grad_row(x_lanes.get(), gy_lanes.get() + row * out_w * lanes, avx512, row_sums);
        }
      }
      for (int64_t c = b * most - c0; c < lanes; ++c) {
        for (int64_t tap = 0; tap < taps; ++tap) gw[(c0 + c) * taps + tap] = sums[tap * lanes + c];
      }
    }
  });
}

// The weight [C_x, R, taps] of a transposed conv with m x and R y channels per group as [taps, m, C_y] in the
// accumulation type: [tap][k][c] = weight[(c / R) * m + k][c % R][tap], for conv_transpose_nhwc.
at::Tensor transpose_weight_by_tap(const ConvGeometry& g, const at::Tensor& weight, at::ScalarType acc_dtype) {
  const int64_t m = g.conv_out_channels_per_group(), reduction = g.conv_in_channels_per_group();
  return weight.to(acc_dtype).reshape({g.groups, m, reduction, -1}).permute({3, 1, 0, 2}).contiguous();
}

}  // namespace

void depthwise_conv(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                    at::Tensor& y, bool channels_last, bool channel_blocks, bool avx512_tiles) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "fastpad_depthwise_conv", [&] {
    using acc_t = acc_type<scalar_t>;
    if (channels_last) {
      const auto acc_dtype = c10::CppTypeToScalarType<acc_t>::value;
      const auto w_taps = weight_by_tap(weight, acc_dtype);
      const auto b_acc = bias.defined() ? bias.to(acc_dtype) : at::Tensor();
      const auto conv = g.conv_in_channels_per_group() > 1 ? conv_nhwc<true, scalar_t> : conv_nhwc<false, scalar_t>;
      const auto y_strides = element_strides(y);
      TORCH_INTERNAL_ASSERT(y_strides[1] == 1, "fastpad: the channels-last kernels need contiguous channels");
      conv(g, x.const_data_ptr<scalar_t>(), w_taps.const_data_ptr<acc_t>(),
           b_acc.defined() ? b_acc.const_data_ptr<acc_t>() : nullptr, y.mutable_data_ptr<scalar_t>(), y_strides,
           avx512_tiles);
    } else if (channel_blocks) {
      const auto acc_dtype = c10::CppTypeToScalarType<acc_t>::value;
      const auto w_taps = weight_by_tap(weight, acc_dtype);
      const auto b_acc = bias.defined() ? bias.to(acc_dtype) : at::Tensor();
      conv_nchw_channel_blocks<scalar_t>(g, x.const_data_ptr<scalar_t>(), w_taps.const_data_ptr<acc_t>(),
                                         b_acc.defined() ? b_acc.const_data_ptr<acc_t>() : nullptr,
                                         y.mutable_data_ptr<scalar_t>(), avx512_tiles);
    } else {
      const auto w = weight.contiguous();
      conv_nchw<scalar_t>(g, x.const_data_ptr<scalar_t>(), PlaneStrides(x), w.const_data_ptr<scalar_t>(),
                          bias.defined() ? bias.const_data_ptr<scalar_t>() : nullptr, y.mutable_data_ptr<scalar_t>(),
                          PlaneStrides(y));
    }
  });
}

void depthwise_conv_transpose(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& weight,
                              at::Tensor& y_acc, bool channels_last) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "fastpad_depthwise_conv_transpose", [&] {
    using acc_t = acc_type<scalar_t>;
    if (channels_last) {
      const auto w_taps = transpose_weight_by_tap(g, weight, y_acc.scalar_type());
      const bool expanded = g.conv_out_channels_per_group() > 1 || g.conv_in_channels_per_group() > 1;
      const auto transpose = expanded ? conv_transpose_nhwc<true, scalar_t> : conv_transpose_nhwc<false, scalar_t>;
      transpose(g, x.const_data_ptr<scalar_t>(), w_taps.const_data_ptr<acc_t>(), y_acc.mutable_data_ptr<acc_t>());
    } else {
      const auto w = weight.contiguous();
      conv_transpose_nchw<scalar_t>(g, x.const_data_ptr<scalar_t>(), PlaneStrides(x), w.const_data_ptr<scalar_t>(),
                                    y_acc.mutable_data_ptr<acc_t>(), PlaneStrides(y_acc));
    }
  });
}

void depthwise_conv_transpose_phases(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& weight,
                                     const at::Tensor& bias, at::Tensor& y, bool channel_blocks, bool avx512_tiles) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "fastpad_depthwise_phases", [&] {
    if (channel_blocks) {
      using acc_t = acc_type<scalar_t>;
      const auto b_acc = bias.defined() ? bias.to(c10::CppTypeToScalarType<acc_t>::value) : at::Tensor();
      conv_transpose_nchw_channel_block_phases<scalar_t>(g, x.const_data_ptr<scalar_t>(), weight,
                                                         b_acc.defined() ? b_acc.const_data_ptr<acc_t>() : nullptr,
                                                         y.mutable_data_ptr<scalar_t>(), avx512_tiles);
      return;
    }
    const bool expanded = g.conv_out_channels > g.groups || g.conv_in_channels > g.groups;  // x or y multiplied
    const auto phases =
        expanded ? conv_transpose_nhwc_phases<true, scalar_t> : conv_transpose_nhwc_phases<false, scalar_t>;
    phases(g, x, weight, bias, y, avx512_tiles);
  });
}

at::Tensor depthwise_weight_grad(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& grad_output,
                                 bool channels_last, bool channel_blocks, bool avx512_tiles,
                                 int64_t grad_output_repeats) {
  TORCH_INTERNAL_ASSERT(grad_output_repeats == 1 || (channels_last && g.conv_out_channels == g.groups));
  at::Tensor grad;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "fastpad_depthwise_weight_grad", [&] {
    using acc_t = acc_type<scalar_t>;
    grad = at::empty({g.conv_out_channels, g.conv_in_channels_per_group(), g.kernel_volume()},
                     x.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
    if (channels_last) {
      weight_grad_nhwc<scalar_t>(g, x.const_data_ptr<scalar_t>(), grad_output.const_data_ptr<scalar_t>(),
                                 grad.mutable_data_ptr<acc_t>(), avx512_tiles, grad_output_repeats);
    } else if (channel_blocks) {
      weight_grad_nchw_channel_blocks<scalar_t>(g, x.const_data_ptr<scalar_t>(), grad_output.const_data_ptr<scalar_t>(),
                                                grad.mutable_data_ptr<acc_t>(), avx512_tiles);
    } else {
      weight_grad_nchw<scalar_t>(g, x.const_data_ptr<scalar_t>(), PlaneStrides(x),
                                 grad_output.const_data_ptr<scalar_t>(), PlaneStrides(grad_output),
                                 grad.mutable_data_ptr<acc_t>());
    }
  });
  return grad;
}

}  // namespace fastpad::cpu
