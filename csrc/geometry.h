// Index math shared by the CPU and CUDA kernels (host + device under nvcc).
// Every spatial position here is in input coordinates: a padded-input position q maps to
// input position q - pad_lo, which may fall outside [0, size) and is then resolved by the padding mode.
#pragma once

#include <c10/macros/Macros.h>

#include <cstdint>

namespace fastpad {

enum class PaddingMode : int { Zeros = 0, Reflect = 1, Replicate = 2, Circular = 3 };

// Number of spatial dimensions every kernel works in: 1-d and 2-d problems are
// 3-d problems with leading dimensions of size 1.
constexpr int kMaxSpatial = 3;

C10_HOST_DEVICE inline int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

C10_HOST_DEVICE inline int64_t ceil_div(int64_t a, int64_t b) {
  return -floor_div(-a, b);
}

C10_HOST_DEVICE inline int64_t effective_kernel(int64_t kernel, int64_t dilation) {
  return dilation * (kernel - 1) + 1;
}

// out = floor((in + lo + hi - k_eff) / s) + 1
C10_HOST_DEVICE inline int64_t conv_out_size(int64_t in, int64_t pad_lo, int64_t pad_hi, int64_t kernel,
                                             int64_t stride, int64_t dilation) {
  return floor_div(in + pad_lo + pad_hi - effective_kernel(kernel, dilation), stride) + 1;
}

// Size of the uncropped transposed-convolution output: (in - 1) * s + k_eff.
C10_HOST_DEVICE inline int64_t transposed_full_size(int64_t in, int64_t kernel, int64_t stride, int64_t dilation) {
  return (in - 1) * stride + effective_kernel(kernel, dilation);
}

// Resolves input position p (any integer) to the position it reads from in [0, size),
// or -1 when the padding mode says the value is zero.
//   reflect:   ... 2 1 | 0 1 2 ... n-1 | n-2 n-3 ...   (edge not repeated, periodic beyond one bounce)
//   replicate: clamps to the nearest edge
//   circular:  wraps around
C10_HOST_DEVICE inline int64_t source_index(int64_t p, int64_t size, PaddingMode mode) {
  if (p >= 0 && p < size) return p;
  switch (mode) {
    case PaddingMode::Zeros:
      return -1;
    case PaddingMode::Replicate:
      return p < 0 ? 0 : size - 1;
    case PaddingMode::Circular: {
      const int64_t r = p % size;
      return r < 0 ? r + size : r;
    }
    case PaddingMode::Reflect: {
      if (size == 1) return 0;
      const int64_t period = 2 * (size - 1);
      int64_t r = p % period;
      if (r < 0) r += period;
      return r < size ? r : period - r;
    }
  }
  return -1;
}

// For the arithmetic sequence p_t = start + t * step, t in [0, count), the half-open range
// [first, last) of t for which 0 <= p_t < size. Outside it a kernel must resolve the padding;
// inside it reads directly, with no predicate.
struct InteriorRange {
  int64_t first;
  int64_t last;
};

C10_HOST_DEVICE inline InteriorRange interior_range(int64_t start, int64_t step, int64_t count, int64_t size) {
  int64_t first = start >= 0 ? 0 : ceil_div(-start, step);
  int64_t last = start < size ? ceil_div(size - start, step) : 0;
  if (first > count) first = count;
  if (last > count) last = count;
  if (last < first) last = first;
  return {first, last};
}

// The taps of a transposed convolution that reach padded position q along one dim: the r in [0, kernel) with
// q + pad_lo - r * dilation divisible by stride (phase decomposition: the other taps never reach q). They are
// r = first + t * step for t in [0, count), and tap t reads input position source_first - t * source_step.
struct TransposedTaps {
  int64_t first = 0;
  int64_t step = 1;
  int64_t count = 0;
  int64_t source_first = 0;
  int64_t source_step = 0;
};

C10_HOST_DEVICE inline int64_t greatest_common_divisor(int64_t a, int64_t b) {
  while (b != 0) {
    const int64_t r = a % b;
    a = b;
    b = r;
  }
  return a;
}

// `offset` is q + pad_lo. Taps r and r + step reach positions stride * (dilation / gcd) apart, so one residue class
// of r modulo step = stride / gcd(stride, dilation) holds every tap that reaches q.
C10_HOST_DEVICE inline TransposedTaps transposed_taps(int64_t offset, int64_t kernel, int64_t stride,
                                                      int64_t dilation) {
  TransposedTaps taps;
  const int64_t gcd = greatest_common_divisor(stride, dilation);
  taps.step = stride / gcd;
  taps.source_step = dilation / gcd;
  const int64_t phase = offset - floor_div(offset, stride) * stride;  // offset mod stride, in [0, stride)
  if (phase % gcd != 0) return taps;
  for (int64_t r = 0; r < taps.step && r < kernel; ++r) {
    if ((r * dilation) % stride == phase) {
      taps.first = r;
      taps.count = (kernel - r + taps.step - 1) / taps.step;
      taps.source_first = (offset - r * dilation) / stride;  // exact: r * dilation = offset (mod stride)
      return taps;
    }
  }
  return taps;
}

// The padded positions q whose value the padding mode reads from input position p (source_index(q, size) == p), as
// up to three half-open ranges, p itself first, clipped to the reachable positions [-pad_lo, reach_end). With
// torch's pad limits (reflect: pads < size, circular: pads <= size) one bounce or wrap covers every padded position.
struct Preimages {
  int64_t begin[3] = {0, 0, 0};
  int64_t end[3] = {0, 0, 0};
  int count = 0;

  C10_HOST_DEVICE void add(int64_t first, int64_t last, int64_t pad_lo, int64_t reach_end) {
    first = first > -pad_lo ? first : -pad_lo;
    last = last < reach_end ? last : reach_end;
    if (first < last) {
      begin[count] = first;
      end[count] = last;
      ++count;
    }
  }
};

C10_HOST_DEVICE inline Preimages padding_preimages(int64_t p, int64_t size, int64_t pad_lo, int64_t reach_end,
                                                   PaddingMode mode) {
  Preimages pre;
  pre.add(p, p + 1, pad_lo, reach_end);
  switch (mode) {
    case PaddingMode::Zeros:
      break;
    case PaddingMode::Reflect:
      if (p >= 1) pre.add(-p, -p + 1, pad_lo, reach_end);
      if (p <= size - 2) pre.add(2 * (size - 1) - p, 2 * (size - 1) - p + 1, pad_lo, reach_end);
      break;
    case PaddingMode::Replicate:
      if (p == 0) pre.add(-pad_lo, 0, pad_lo, reach_end);
      if (p == size - 1) pre.add(size, reach_end, pad_lo, reach_end);
      break;
    case PaddingMode::Circular:
      pre.add(p - size, p - size + 1, pad_lo, reach_end);
      pre.add(p + size, p + size + 1, pad_lo, reach_end);
      break;
  }
  return pre;
}

// The geometry of one convolution problem, padded to three spatial dimensions.
// Each op works with one convolution, and every field describes that convolution, whichever op uses it: `conv_in_*`
// its input (the tensor read through the padding, at tap positions o*s - pad_lo + r*d) and `conv_out_*` its output
// (the positions o). conv computes that convolution and conv_weight_grad its weight gradient (grad_output is on the
// conv_out side); conv_transpose is its adjoint, so the transposed input x is on the conv_out side, the transposed
// output y on the conv_in side, and pad_lo is crop_lo.
struct ConvGeometry {
  int64_t batch = 0;
  int64_t conv_in_channels = 0;
  int64_t conv_out_channels = 0;
  int64_t groups = 1;
  int64_t conv_in_sizes[kMaxSpatial] = {1, 1, 1};
  int64_t conv_out_sizes[kMaxSpatial] = {1, 1, 1};
  int64_t kernel[kMaxSpatial] = {1, 1, 1};
  int64_t stride[kMaxSpatial] = {1, 1, 1};
  int64_t dilation[kMaxSpatial] = {1, 1, 1};
  int64_t pad_lo[kMaxSpatial] = {0, 0, 0};
  PaddingMode mode = PaddingMode::Zeros;

  C10_HOST_DEVICE int64_t conv_in_channels_per_group() const { return conv_in_channels / groups; }
  C10_HOST_DEVICE int64_t conv_out_channels_per_group() const { return conv_out_channels / groups; }
  C10_HOST_DEVICE int64_t kernel_volume() const { return kernel[0] * kernel[1] * kernel[2]; }
  C10_HOST_DEVICE int64_t conv_in_volume() const { return conv_in_sizes[0] * conv_in_sizes[1] * conv_in_sizes[2]; }
  C10_HOST_DEVICE int64_t conv_out_volume() const { return conv_out_sizes[0] * conv_out_sizes[1] * conv_out_sizes[2]; }

  // Conv input position read by output position o through tap r along dimension dim (before padding is resolved).
  C10_HOST_DEVICE int64_t tap_position(int dim, int64_t o, int64_t r) const {
    return o * stride[dim] - pad_lo[dim] + r * dilation[dim];
  }
  // tap_position resolved by the padding mode: an index into [0, conv_in_sizes[dim]) or -1 (zero).
  C10_HOST_DEVICE int64_t tap_source(int dim, int64_t o, int64_t r) const {
    return source_index(tap_position(dim, o, r), conv_in_sizes[dim], mode);
  }
  // Whether every tap of every output lands inside the conv input: no padded position is read (or, for
  // conv_transpose, written and folded), so the padding mode changes nothing.
  C10_HOST_DEVICE bool reads_no_padding() const {
    for (int d = 0; d < kMaxSpatial; ++d) {
      if (conv_out_sizes[d] > 0 &&
          (pad_lo[d] > 0 || tap_position(d, conv_out_sizes[d] - 1, kernel[d] - 1) >= conv_in_sizes[d])) {
        return false;
      }
    }
    return true;
  }
  // Taps [first, last) of output o along dim whose tap_source is not -1 (zero padding): contiguous, since
  // tap_position grows with r. Every tap in another padding mode.
  C10_HOST_DEVICE InteriorRange taps_inside(int dim, int64_t o) const {
    InteriorRange taps{0, kernel[dim]};
    while (taps.first < taps.last && tap_source(dim, o, taps.first) < 0) ++taps.first;
    while (taps.last > taps.first && tap_source(dim, o, taps.last - 1) < 0) --taps.last;
    return taps;
  }
  // Range of o along dim whose tap r lands inside the conv input without padding.
  C10_HOST_DEVICE InteriorRange tap_interior(int dim, int64_t r, int64_t count) const {
    return interior_range(tap_position(dim, 0, r), stride[dim], count, conv_in_sizes[dim]);
  }
};

// One stride phase of a transposed convolution as the convolution it is (g: the transposed problem's geometry, named
// after the conv it is the adjoint of), zero padding only: the folds of another padding mode are a separate pass.
// Along each dim the y positions p = y_first + j * stride share their taps (transposed_taps): r = first + t * step for
// t in [0, count), and tap t of output j reads x at source_first + j - t * source_step. That is a stride-1 conv over
// x whose tap u is r = first + (count - 1 - u) * step (the taps flipped), with dilation source_step and
// pad_lo = (count - 1) * source_step - source_first (negative where the crop exceeds the kernel's extent), and whose
// outputs are the phase's y positions; the two sides' sizes and channels are exchanged and each group's two channel
// dims swapped in the weight (transpose_phase_weight in conv_params.h). A dim whose phase no tap reaches (kernel
// below the stride) has count 0: those outputs are the bias. At stride 1 there is one phase: y itself, every tap.
struct TransposePhase {
  ConvGeometry conv;
  int64_t y_first[kMaxSpatial] = {0, 0, 0};  // the phase's first y position; its next ones are a stride apart
  int64_t tap_first[kMaxSpatial] = {0, 0, 0};
  int64_t tap_step[kMaxSpatial] = {1, 1, 1};
};

// The phases of g: one per combination of residues (p + pad_lo) mod stride.
C10_HOST_DEVICE inline int64_t transpose_phase_count(const ConvGeometry& g) {
  return g.stride[0] * g.stride[1] * g.stride[2];
}

// Phase `phase` in [0, transpose_phase_count(g)), the last dim's residue fastest.
C10_HOST_DEVICE inline TransposePhase transpose_phase_as_conv(const ConvGeometry& g, int64_t phase) {
  TransposePhase t;
  ConvGeometry& c = t.conv;
  c = g;
  c.mode = PaddingMode::Zeros;
  c.conv_in_channels = g.conv_out_channels;
  c.conv_out_channels = g.conv_in_channels;
  for (int d = kMaxSpatial - 1; d >= 0; --d) {
    const int64_t residue = phase % g.stride[d];
    phase /= g.stride[d];
    const int64_t y_first = residue - floor_div(residue - g.pad_lo[d], g.stride[d]) * g.stride[d] - g.pad_lo[d];
    const TransposedTaps taps = transposed_taps(y_first + g.pad_lo[d], g.kernel[d], g.stride[d], g.dilation[d]);
    t.y_first[d] = y_first;
    t.tap_first[d] = taps.first;
    t.tap_step[d] = taps.step;
    c.conv_in_sizes[d] = g.conv_out_sizes[d];
    c.conv_out_sizes[d] = y_first < g.conv_in_sizes[d] ? ceil_div(g.conv_in_sizes[d] - y_first, g.stride[d]) : 0;
    c.kernel[d] = taps.count;
    c.stride[d] = 1;
    c.dilation[d] = taps.source_step;
    c.pad_lo[d] = (taps.count - 1) * taps.source_step - taps.source_first;
  }
  return t;
}

}  // namespace fastpad
