// The CPU problems kernel_paths.h leaves to torch's own convolution (torch_pads_match, torch_crop_matches): zero
// padding that torch's symmetric padding (or crop, plus output_padding) expresses, so torch reads no padded copy
// either. The geometry's arguments are given to at::convolution as they are.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "kernel_paths.h"

namespace fastpad::cpu {

// torch's per-dimension arguments for the last `spatial` of the geometry's three dimensions.
struct TorchConvArguments {
  std::vector<int64_t> stride, padding, dilation, output_padding;

  TorchConvArguments(const ConvGeometry& g, int64_t spatial, bool transposed) {
    for (int d = kMaxSpatial - static_cast<int>(spatial); d < kMaxSpatial; ++d) {
      stride.push_back(g.stride[d]);
      padding.push_back(g.pad_lo[d]);
      dilation.push_back(g.dilation[d]);
      output_padding.push_back(transposed ? torch_output_padding(g, d) : 0);  // torch_crop_matches bounds it
    }
  }
};

// conv (transposed = false) or conv_transpose (true), in the layout `format` whose strides the op promises (the fake
// kernels'): torch's result where it has those strides, else a copy. The op allocates no output of its own first.
inline at::Tensor torch_convolution(const ConvGeometry& g, const at::Tensor& x, const at::Tensor& weight,
                                    const at::Tensor& bias, bool transposed, at::MemoryFormat format) {
  const TorchConvArguments a(g, x.dim() - 2, transposed);
  at::Tensor result =
      at::convolution(x, weight, bias, a.stride, a.padding, a.dilation, transposed, a.output_padding, g.groups);
  const at::TensorOptions promised = result.options().memory_format(format);
  if (result.strides() == at::empty(result.sizes(), promised.device(at::kMeta)).strides()) return result;
  return at::empty(result.sizes(), promised).copy_(result);
}

}  // namespace fastpad::cpu
