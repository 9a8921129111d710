// Argument checks and geometry for the three ops, shared by the CPU and CUDA backends.
// Every check is a TORCH_CHECK that names the argument and its value, so a direct call of
// torch.ops.fastpad.* with malformed arguments raises instead of reading out of bounds.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

#include <array>
#include <optional>
#include <vector>

#include "geometry.h"
#include "kernel_paths.h"

namespace fastpad {

PaddingMode parse_padding_mode(const char* op, c10::string_view mode);

// conv: input [N, C_in, *in], weight [C_out, C_in/groups, *k]; output [N, C_out, *out].
// pad_hi may be negative (the end of the input is then not read); it only fixes the output extent.
ConvGeometry conv_geometry(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                           at::IntArrayRef stride, at::IntArrayRef pad_lo, at::IntArrayRef pad_hi,
                           at::IntArrayRef dilation, int64_t groups, c10::string_view padding_mode);

// conv_transpose: input [N, C_in, *in], weight [C_in, C_out/groups, *k]; output [N, C_out, *out_size].
// The returned geometry is that of the convolution this op is the adjoint of (see ConvGeometry).
ConvGeometry conv_transpose_geometry(const at::Tensor& input, const at::Tensor& weight,
                                     const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                     at::IntArrayRef crop_lo, at::IntArrayRef out_size, at::IntArrayRef dilation,
                                     int64_t groups, c10::string_view padding_mode);

// conv_weight_grad: input [N, C_in, *in], grad_output [N, C_out, *out]; result has weight_shape.
ConvGeometry conv_weight_grad_geometry(const at::Tensor& input, const at::Tensor& grad_output,
                                       at::IntArrayRef weight_shape, at::IntArrayRef stride, at::IntArrayRef pad_lo,
                                       at::IntArrayRef dilation, int64_t groups, c10::string_view padding_mode);

// The layout every op writes its output in: channels_last when the input is (and is not also
// plain contiguous), else contiguous. The fake kernels in fastpad/_ops.py follow the same rule.
at::MemoryFormat output_memory_format(const at::Tensor& input);

// conv_weight_grad's result in its input's layout (output_memory_format, as the fake kernel gives it: a channels-last
// weight's gradient then needs no copy into the weight's layout), with the strides at::empty gives that layout even
// where a dim has size 1: `grad` itself where it is that tensor already (a fresh one of weight_shape in `input`'s
// dtype), else a copy.
at::Tensor weight_grad_in_input_layout(const at::Tensor& grad, at::IntArrayRef weight_shape, const at::Tensor& input);

// Bytes of the type t's kernels accumulate in: 8 for float64, 4 for float32, bfloat16 and float16 (float).
int64_t accumulator_bytes(const at::Tensor& t);

// Whether t holds bfloat16 or float16.
bool is_reduced_precision(const at::Tensor& t);

// cpu_isa() for a CPU op on t, the ops and the private path ops alike: AVX512_BF16 serves bfloat16 tensors only (its
// dot-product kernel, and torch's native bfloat16 convolution), so any other type gets at most AVX-512. Defined with
// cpu_isa() in kernel_paths.cpp, which the CUDA execution shim does not build.
CpuIsa cpu_isa_for(const at::Tensor& t);

// Whether every element of t is finite (no inf or NaN), for the CPU kernels that multiply weights by the zeros around
// their input, which the reference never does: one vectorized pass for a CPU float32 tensor, at::isfinite otherwise
// (the private path ops take tensors on any device). Defined in kernel_paths.cpp, like cpu_isa_for.
bool cpu_all_finite(const at::Tensor& t);

// Whether t's channels can be read as aligned 16-byte vectors (8 bfloat16/float16, 4 float32, 2 float64 channels):
// channel stride 1, the stride of every other dimension longer than 1 a multiple of the vector's elements, and the
// data aligned to 16 bytes.
bool channel_vectors(const at::Tensor& t);

// Whether float32 convolutions may run on TF32 tensor cores: torch.backends.cudnn.allow_tf32 (the conv setting of
// torch.backends.cudnn.conv.fp32_precision), which torch's own CUDA convolutions follow.
bool tf32_allowed();

// The weight of the conv one stride phase of a transposed conv is (transpose_phase_as_conv in geometry.h): of the
// transposed weight [C_x, C_y / groups, *k], the phase's taps, flipped, each group's two channel dims swapped, as
// [C_y, C_x / groups, *taps]. A view where possible; at stride 1 (one phase) every tap.
at::Tensor transpose_phase_weight(const ConvGeometry& g, const at::Tensor& weight, int64_t phase);

// The shape [batch, channels, *sizes] of a tensor with `spatial_dims` spatial dims, where `sizes` is one of a
// geometry's padded-to-3-d size arrays (its last `spatial_dims` entries are the real ones).
std::vector<int64_t> tensor_shape(int64_t batch, int64_t channels, const int64_t* sizes, int64_t spatial_dims);

// A tensor's element strides as [n, c, d, h, w]: the inverse of tensor_shape's padding to 3-d, a 1-d or 2-d tensor's
// missing dims having one position (stride 0).
std::array<int64_t, 2 + kMaxSpatial> element_strides(const at::Tensor& t);

}  // namespace fastpad
