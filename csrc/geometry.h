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

// The geometry of one convolution problem, padded to three spatial dimensions.
// For conv and conv_weight_grad, `in_size` is the convolution input and `out_size` its output.
// For conv_transpose the roles swap: `out_size` is the transposed op's input (the positions o that
// scatter) and `in_size` the transposed op's output (the positions o*s - pad_lo + r*d they reach).
struct ConvGeometry {
  int64_t batch = 0;
  int64_t in_channels = 0;   // channels of the tensor indexed by in_size
  int64_t out_channels = 0;  // channels of the tensor indexed by out_size
  int64_t groups = 1;
  int64_t in_size[kMaxSpatial] = {1, 1, 1};
  int64_t out_size[kMaxSpatial] = {1, 1, 1};
  int64_t kernel[kMaxSpatial] = {1, 1, 1};
  int64_t stride[kMaxSpatial] = {1, 1, 1};
  int64_t dilation[kMaxSpatial] = {1, 1, 1};
  int64_t pad_lo[kMaxSpatial] = {0, 0, 0};
  PaddingMode mode = PaddingMode::Zeros;

  C10_HOST_DEVICE int64_t in_channels_per_group() const { return in_channels / groups; }
  C10_HOST_DEVICE int64_t out_channels_per_group() const { return out_channels / groups; }
  C10_HOST_DEVICE int64_t kernel_volume() const { return kernel[0] * kernel[1] * kernel[2]; }
  C10_HOST_DEVICE int64_t in_volume() const { return in_size[0] * in_size[1] * in_size[2]; }
  C10_HOST_DEVICE int64_t out_volume() const { return out_size[0] * out_size[1] * out_size[2]; }

  // Input position read by output position o through tap r along dimension dim (before padding is resolved).
  C10_HOST_DEVICE int64_t tap_position(int dim, int64_t o, int64_t r) const {
    return o * stride[dim] - pad_lo[dim] + r * dilation[dim];
  }
  // tap_position resolved by the padding mode: an index into [0, in_size[dim]) or -1 (zero).
  C10_HOST_DEVICE int64_t tap_source(int dim, int64_t o, int64_t r) const {
    return source_index(tap_position(dim, o, r), in_size[dim], mode);
  }
  // Range of o along dim whose tap r lands inside the input without padding.
  C10_HOST_DEVICE InteriorRange tap_interior(int dim, int64_t r, int64_t count) const {
    return interior_range(tap_position(dim, 0, r), stride[dim], count, in_size[dim]);
  }
};

}  // namespace fastpad
