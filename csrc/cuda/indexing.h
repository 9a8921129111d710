// Index helpers every CUDA kernel of fastpad shares: element access through strides (any layout, no copies of the
// input), the accumulation type and flat-index decoding. Host + device and free of torch (only c10's header-only
// 16-bit types), so the launchers compile as plain C++ under the CUDA execution shim (tests/cuda_sim/).
// Layout: a tensor is seen as [N, C, D, H, W]; 1-d and 2-d tensors have leading spatial dims of size 1 (stride 0).
// Padding: none here; kernels resolve padded positions with geometry.h's source_index.
#pragma once

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <type_traits>

#include "geometry.h"

namespace fastpad::cuda {

// float32 accumulation for float32 and the 16-bit types; float64 for float64.
template <typename scalar_t>
using acc_type = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;

template <typename scalar_t>
constexpr bool is_16_bit = std::is_same_v<scalar_t, c10::Half> || std::is_same_v<scalar_t, c10::BFloat16>;

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

// index / divisor and index % divisor, for index >= 0 and divisor > 0. In 32 bits when both fit: GPUs have no 64-bit
// integer divide instruction and run a software routine several times as long instead.
struct QuotientRemainder {
  int64_t quotient;
  int64_t remainder;
};

C10_HOST_DEVICE inline QuotientRemainder divide(int64_t index, int64_t divisor) {
  const int64_t quotient = ((index | divisor) >> 32) == 0
                               ? int64_t{static_cast<uint32_t>(index) / static_cast<uint32_t>(divisor)}
                               : index / divisor;
  return {quotient, index - quotient * divisor};
}

// pos = the 3-d position of flat index `index` in a row-major box of `sizes`, and returns index / box volume: the
// index along whatever dimension lies outside the box (an image, a channel).
C10_HOST_DEVICE inline int64_t unflatten(int64_t index, const int64_t* sizes, int64_t* pos) {
  for (int d = kMaxSpatial - 1; d >= 0; --d) {
    const QuotientRemainder qr = divide(index, sizes[d]);
    pos[d] = qr.remainder;
    index = qr.quotient;
  }
  return index;
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
  if (channels_last) {
    const QuotientRemainder qr = divide(index, channels);
    e.c = qr.remainder;
    e.n = unflatten(qr.quotient, sizes, e.pos);
  } else {
    const QuotientRemainder qr = divide(unflatten(index, sizes, e.pos), channels);
    e.c = qr.remainder;
    e.n = qr.quotient;
  }
  return e;
}

template <typename acc_t, typename scalar_t>
C10_HOST_DEVICE inline acc_t load(const scalar_t* data, int64_t offset) {
  return static_cast<acc_t>(data[offset]);
}

// Threads per block of every kernel.
constexpr int kThreads = 256;
// The blocks per SM the kernels' launch bounds keep registers for (at most 128 per thread). With the thread count
// alone, ptxas (nvcc 13.0, sm_90) held several kernels to 64 registers and spilled.
constexpr int kMinBlocksPerSm = 2;

}  // namespace fastpad::cuda
