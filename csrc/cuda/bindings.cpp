// The CUDA ops' tensor side (see cuda/bindings.h): argument checks and geometry (conv_params.h), the output tensors,
// the kernel path (kernel_paths.h) and the launch struct; the kernels themselves are behind cuda/launchers.h.
#include "cuda/bindings.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/all.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/zeros.h>

#include "conv_params.h"
#include "cuda/launchers.h"

namespace fastpad::cuda {
namespace {

ScalarType scalar_type_of(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kDouble: return ScalarType::Float64;
    case at::kFloat: return ScalarType::Float32;
    case at::kHalf: return ScalarType::Float16;
    case at::kBFloat16: return ScalarType::BFloat16;
    default: TORCH_CHECK(false, "fastpad: CUDA kernels take float64, float32, float16 or bfloat16, got ",
                         t.scalar_type());
  }
}

// Element strides of the [N, C, D, H, W] view of a 3-d, 4-d or 5-d tensor, taken as they are (any layout).
Strides strides_of(const at::Tensor& t) {
  Strides s;
  s.batch = t.stride(0);
  s.channel = t.stride(1);
  const int64_t offset = kMaxSpatial - (t.dim() - 2);
  for (int64_t i = 2; i < t.dim(); ++i) s.spatial[offset + i - 2] = t.stride(i);
  return s;
}

const void* data_or_null(const at::Tensor& t) { return t.defined() ? t.const_data_ptr() : nullptr; }

// The kernels' accumulation type for t's dtype: float64 for float64, float32 otherwise.
at::ScalarType accumulator_dtype(const at::Tensor& t) {
  return t.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

// A contiguous copy of t with `channels` entries along its last dim: t's, then zeros.
at::Tensor last_dim_zero_padded(const at::Tensor& t, int64_t channels) {
  if (channels == t.size(-1)) return t.contiguous();
  std::vector<int64_t> sizes = t.sizes().vec();
  sizes.back() = channels;
  at::Tensor padded = at::empty(sizes, t.options());
  padded.narrow(-1, 0, t.size(-1)).copy_(t);
  padded.narrow(-1, t.size(-1), channels - t.size(-1)).zero_();
  return padded;
}

// t itself, or, where the path stages channels (cuda_stages_channels), the same values with each position's channels
// contiguous (channels-last; for 1-d, NLC viewed as NCL): a copy, whose channels load as aligned 16-byte vectors when
// their count is a multiple of the lanes. `channels` is the count the copy holds: t's, or more where the pipelined
// GEMM pads them (cuda_pipelined_channels), the added ones zero.
at::Tensor staged_input(bool staged, const at::Tensor& t, int64_t channels) {
  return staged ? last_dim_zero_padded(t.movedim(1, -1), channels).movedim(-1, 1) : t;
}

// The input channels per group the pipelined GEMM reads (cuda_pipelined_channels: Cg_in, or Cg_in padded with zero
// channels) on the path chosen, and the geometry its kernel runs: g with that many input channels.
struct KernelChannels {
  int64_t channels;
  bool padded;  // more channels than the input's
  ConvGeometry g;

  KernelChannels(const ConvGeometry& geometry, bool pipelined, const at::Tensor& input)
      : channels(pipelined ? cuda_pipelined_channels(geometry, input.element_size(), /*pad_channels=*/true)
                           : geometry.conv_in_channels_per_group()),
        padded(channels != geometry.conv_in_channels_per_group()),
        g(geometry) {
    g.conv_in_channels = channels * g.groups;
  }
};

// The input and output a conv or transposed conv kernel reads and writes: x and y themselves, or, staged, a
// channels-contiguous copy of x (with `channels` channels) and, where y's channels are not contiguous, an
// uninitialised channels-contiguous output, copied into y after the launch (a channels-last y, as where x is staged
// only to pad its channels, is written in place).
struct StagedConvTensors {
  bool staged, staged_y;
  at::Tensor x, y_kernel;

  StagedConvTensors(bool staged, const at::Tensor& input, const at::Tensor& y, int64_t channels)
      : staged(staged),
        staged_y(staged && y.stride(1) != 1),
        x(staged_input(staged, input, channels)),
        y_kernel(staged_y ? at::empty(y.movedim(1, -1).sizes(), y.options()).movedim(-1, 1) : y) {}
  void copy_back(at::Tensor& y) const {
    if (staged_y) y.copy_(y_kernel);
  }
};

at::Tensor contiguous_bias(const std::optional<at::Tensor>& bias) {
  return bias.has_value() && bias->defined() ? bias->contiguous() : at::Tensor();
}

// The weights of the convs the stride phases of a transposed conv are (transpose_phase_weight in conv_params.h), each
// laid out as `layout` gives it, one after the other in phase order: each written straight into its place, with no
// concatenation afterwards.
template <typename Layout>
at::Tensor phase_weights(const ConvGeometry& g, const at::Tensor& weight, Layout layout) {
  std::vector<at::Tensor> phases;
  int64_t elements = 0;
  for (int64_t phase = 0; phase < transpose_phase_count(g); ++phase) {
    phases.push_back(layout(transpose_phase_weight(g, weight, phase)));
    elements += phases.back().numel();
  }
  at::Tensor packed = at::empty({elements}, weight.options());
  int64_t offset = 0;
  for (const at::Tensor& phase : phases) {
    packed.narrow(0, offset, phase.numel()).view(phase.sizes()).copy_(phase);
    offset += phase.numel();
  }
  return packed;
}

// A conv weight [C_out, C_in / groups, *taps] as the pipelined GEMM reads it, tap-major ([C_out][taps][C_in /
// groups]), and as the depthwise vector kernel reads it ([taps][C]).
at::Tensor tap_major(const at::Tensor& weight) { return weight.movedim(1, -1); }
at::Tensor taps_by_channels(const at::Tensor& weight) { return weight.flatten(1).t(); }

}  // namespace

std::pair<at::Tensor, ConvPath> conv_binding(const at::Tensor& input, const at::Tensor& weight,
                                             const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                             at::IntArrayRef pad_lo, at::IntArrayRef pad_hi, at::IntArrayRef dilation,
                                             int64_t groups, c10::string_view padding_mode, bool sm80,
                                             cudaStream_t stream) {
  // The ATen calls inside the kernel work on plain tensors: autograd is this op's own registration.
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  const ConvGeometry g = conv_geometry(input, weight, bias, stride, pad_lo, pad_hi, dilation, groups, padding_mode);
  const auto format = output_memory_format(input);
  const bool channels_last = format != at::MemoryFormat::Contiguous;
  const bool vectors = channel_vectors(input);
  const ConvPath path = choose_conv_path(g, Backend::Cuda, channels_last, accumulator_bytes(input),
                                        is_reduced_precision(input), CpuIsa::Baseline, {vectors, sm80, tf32_allowed()});
  auto y = at::empty(tensor_shape(g.batch, g.conv_out_channels, g.conv_out_sizes, input.dim() - 2),
                     input.options().memory_format(format));
  if (y.numel() == 0) return {y, path};
  // Without channel vectors (or with channels it pads) the pipelined GEMM runs on channels-contiguous copies of x and
  // y.
  const KernelChannels kernel(g, path == ConvPath::CudaPipelinedGemm, input);
  const StagedConvTensors io(cuda_stages_channels(path, vectors && !kernel.padded), input, y,
                             kernel.g.conv_in_channels);
  // The pipelined GEMM reads the weight tap-major, each tap's input channels contiguous (and padded as x is); the
  // depthwise vector kernel reads it as [taps][C]; the few-channels kernel as [taps][C_in][C_out padded to whole
  // chunks] in the accumulation type.
  const auto w = path == ConvPath::CudaPipelinedGemm      ? last_dim_zero_padded(tap_major(weight), kernel.channels)
                 : path == ConvPath::CudaDepthwiseVectors ? taps_by_channels(weight).contiguous()
                 : path == ConvPath::CudaFewChannels
                     ? last_dim_zero_padded(tap_major(weight).movedim(0, -1).to(accumulator_dtype(input)),
                                            cuda::few_channels_plan(g).padded_out)
                     : weight.contiguous();
  const auto b = contiguous_bias(bias);
  launch_conv({kernel.g, path, scalar_type_of(input), io.x.const_data_ptr(), strides_of(io.x), w.const_data_ptr(),
               data_or_null(b), io.y_kernel.mutable_data_ptr(), strides_of(io.y_kernel), channels_last || io.staged,
               stream});
  io.copy_back(y);
  return {y, path};
}

std::pair<at::Tensor, ConvTransposePath> conv_transpose_binding(
    const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
    at::IntArrayRef crop_lo, at::IntArrayRef out_size, at::IntArrayRef dilation, int64_t groups,
    c10::string_view padding_mode, bool sm80, cudaStream_t stream) {
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  const ConvGeometry g =
      conv_transpose_geometry(input, weight, bias, stride, crop_lo, out_size, dilation, groups, padding_mode);
  const auto format = output_memory_format(input);
  const bool channels_last = format != at::MemoryFormat::Contiguous;
  // The CUDA choice does not depend on the weight's values (the kernels read the flag below on the device).
  const bool vectors = channel_vectors(input);
  const ConvTransposePath path = choose_conv_transpose_path(
      g, Backend::Cuda, channels_last, accumulator_bytes(input), is_reduced_precision(input), CpuIsa::Baseline,
      [] { return true; }, {vectors, sm80, tf32_allowed()});
  auto y = at::empty(tensor_shape(g.batch, g.conv_in_channels, g.conv_in_sizes, input.dim() - 2),
                     input.options().memory_format(format));
  if (y.numel() == 0) return {y, path};
  // Without channel vectors the phases' pipelined GEMMs run on channels-contiguous copies of x and y.
  const StagedConvTensors io(cuda_stages_channels(path, vectors), input, y, input.size(1));
  const auto w = weight.contiguous();
  const auto b = contiguous_bias(bias);
  at::Tensor weight_finite;
  if (path != ConvTransposePath::CudaDirectGather && path != ConvTransposePath::CudaDepthwiseVectors &&
      path != ConvTransposePath::CudaDepthwiseRows) {
    weight_finite = at::isfinite(w).all();  // stays on the device: no sync, CUDA graphs capture it
  }
  // The pipelined GEMM and the depthwise vector kernel run the convs the stride phases are, with their weights as each
  // reads a conv's (see conv_binding); the rows kernel runs the conv the one stride phase is, with its weight.
  at::Tensor kernel_weight;
  if (path == ConvTransposePath::CudaPipelinedGemm) kernel_weight = phase_weights(g, w, tap_major);
  if (path == ConvTransposePath::CudaDepthwiseVectors) kernel_weight = phase_weights(g, w, taps_by_channels);
  if (path == ConvTransposePath::CudaDepthwiseRows) kernel_weight = transpose_phase_weight(g, w, 0).contiguous();
  launch_conv_transpose({g, path, scalar_type_of(input), io.x.const_data_ptr(), strides_of(io.x), w.const_data_ptr(),
                         data_or_null(kernel_weight), data_or_null(b), io.y_kernel.mutable_data_ptr(),
                         strides_of(io.y_kernel), channels_last || io.staged,
                         weight_finite.defined() ? weight_finite.const_data_ptr<bool>() : nullptr, stream});
  io.copy_back(y);
  return {y, path};
}

std::pair<at::Tensor, WeightGradPath> conv_weight_grad_binding(const at::Tensor& input,
                                                                const at::Tensor& grad_output,
                                                                at::IntArrayRef weight_shape, at::IntArrayRef stride,
                                                                at::IntArrayRef pad_lo, at::IntArrayRef dilation,
                                                                int64_t groups, c10::string_view padding_mode,
                                                                bool sm80, cudaStream_t stream) {
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  const ConvGeometry g = conv_weight_grad_geometry(input, grad_output, weight_shape, stride, pad_lo, dilation, groups,
                                                   padding_mode);
  const bool channels_last = output_memory_format(input) != at::MemoryFormat::Contiguous;
  const bool x_vectors = channel_vectors(input), gy_vectors = channel_vectors(grad_output);
  const WeightGradPath path =
      choose_weight_grad_path(g, Backend::Cuda, channels_last, accumulator_bytes(input), is_reduced_precision(input),
                              CpuIsa::Baseline, {x_vectors && gy_vectors, sm80, tf32_allowed()});
  if (g.batch == 0) {
    return {at::zeros(weight_shape, input.options().memory_format(output_memory_format(input))), path};
  }
  // Without channel vectors (or with input channels it pads) the pipelined GEMM reads channels-contiguous copies of x
  // and grad_output; with padded channels it computes their gradient too (zero), which is left out below.
  const KernelChannels kernel(g, path == WeightGradPath::CudaPipelinedGemm, input);
  std::vector<int64_t> kernel_shape = weight_shape.vec();
  kernel_shape[1] = kernel.channels;
  auto grad = at::empty(kernel_shape, input.options());  // contiguous: [C_out, C_in / groups * taps]
  const at::Tensor x =
      staged_input(cuda_stages_channels(path, x_vectors && !kernel.padded), input, kernel.g.conv_in_channels);
  const at::Tensor gy = staged_input(cuda_stages_channels(path, gy_vectors), grad_output, grad_output.size(1));
  WeightGradLaunch launch{kernel.g,
                          path,
                          scalar_type_of(input),
                          x.const_data_ptr(),
                          strides_of(x),
                          gy.const_data_ptr(),
                          strides_of(gy),
                          grad.mutable_data_ptr(),
                          nullptr,
                          stream};
  at::Tensor workspace;
  if (const int64_t elements = weight_grad_workspace_elements(launch); elements > 0) {
    workspace = at::empty({elements}, input.options().dtype(accumulator_dtype(input)));
    launch.workspace = workspace.mutable_data_ptr();
  }
  launch_conv_weight_grad(launch);
  return {weight_grad_in_input_layout(kernel.padded ? grad.narrow(1, 0, g.conv_in_channels_per_group()) : grad,
                                      weight_shape, input),
          path};
}

}  // namespace fastpad::cuda
