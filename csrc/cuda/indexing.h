// Index helpers every CUDA kernel of fastpad shares: element access through strides (any layout, no copies of the
// input), the accumulation type and flat-index decoding. Host + device, and free of CUDA runtime headers, so the
// kernels' index math also compiles as plain C++ (tests/cuda_emulator.cpp runs it on CPU).
// Layout: a tensor is seen as [N, C, D, H, W]; 1-d and 2-d tensors have leading spatial dims of size 1 (stride 0).
// Padding: none here; kernels resolve padded positions with geometry.h's source_index.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <type_traits>

#include "geometry.h"

namespace fastpad::cuda {

// float32 accumulation for float32 and the 16-bit types; float64 for float64.
template <typename scalar_t>
using acc_type = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;

template <typename scalar_t>
constexpr bool is_16_bit = std::is_same_v<scalar_t, at::Half> || std::is_same_v<scalar_t, at::BFloat16>;

// Element strides of the [N, C, D, H, W] view of a 3-d, 4-d or 5-d tensor. Strides are taken as they are, so
// channels_last, strided and expanded (stride 0) tensors are read in place.
struct Strides {
  int64_t batch = 0;
  int64_t channel = 0;
  int64_t spatial[kMaxSpatial] = {0, 0, 0};

  C10_HOST_DEVICE int64_t position(const int64_t* pos) const {
    return pos[0] * spatial[0] + pos[1] * spatial[1] + pos[2] * spatial[2];
  }
};

inline Strides strides_of(const at::Tensor& t) {
  Strides s;
  s.batch = t.stride(0);
  s.channel = t.stride(1);
  const int64_t offset = kMaxSpatial - (t.dim() - 2);
  for (int64_t i = 2; i < t.dim(); ++i) s.spatial[offset + i - 2] = t.stride(i);
  return s;
}

// pos = the 3-d position of flat index `index` in a row-major box of `sizes`.
C10_HOST_DEVICE inline void unflatten(int64_t index, const int64_t* sizes, int64_t* pos) {
  pos[2] = index % sizes[2];
  index /= sizes[2];
  pos[1] = index % sizes[1];
  pos[0] = index / sizes[1];
}

// Decodes the flat index of an element of an output tensor [batch, channels, *sizes] in its memory order
// (channels innermost when channels_last), so consecutive threads write consecutive addresses.
struct ElementIndex {
  int64_t n;
  int64_t c;
  int64_t pos[kMaxSpatial];
};

C10_HOST_DEVICE inline ElementIndex decode_element(int64_t index, bool channels_last, int64_t channels,
                                                   const int64_t* sizes) {
  ElementIndex e;
  const int64_t volume = sizes[0] * sizes[1] * sizes[2];
  if (channels_last) {
    e.c = index % channels;
    index /= channels;
    unflatten(index % volume, sizes, e.pos);
    e.n = index / volume;
  } else {
    unflatten(index % volume, sizes, e.pos);
    index /= volume;
    e.c = index % channels;
    e.n = index / channels;
  }
  return e;
}

template <typename acc_t, typename scalar_t>
C10_HOST_DEVICE inline acc_t load(const scalar_t* data, int64_t offset) {
  return static_cast<acc_t>(data[offset]);
}

// Threads per block of every kernel.
constexpr int kThreads = 256;

}  // namespace fastpad::cuda
