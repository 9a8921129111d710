#include "conv_params.h"

#include <c10/util/irange.h>

#include <string>

namespace fastpad {
namespace {

std::string shape_str(at::IntArrayRef a) {
  std::string s = "[";
  for (const auto i : c10::irange(a.size())) {
    if (i) s += ", ";
    s += std::to_string(a[i]);
  }
  return s + "]";
}

void check_tensor(const char* op, const char* name, const at::Tensor& t, const at::Tensor& input) {
  TORCH_CHECK(t.defined(), op, ": ", name, " is undefined");
  TORCH_CHECK(t.scalar_type() == input.scalar_type(), op, ": ", name, " has dtype ", t.scalar_type(),
              " but input has dtype ", input.scalar_type());
  TORCH_CHECK(t.device() == input.device(), op, ": ", name, " is on ", t.device(), " but input is on ",
              input.device());
}

int64_t check_ranks(const char* op, const at::Tensor& input, int64_t other_dim, const char* other_name) {
  TORCH_CHECK(input.dim() >= 3 && input.dim() <= 5, op,
              ": input must be 3-d, 4-d or 5-d ([N, C, *spatial] with 1 to 3 spatial dims), got shape ",
              shape_str(input.sizes()));
  TORCH_CHECK(other_dim == input.dim(), op, ": ", other_name, " must have ", input.dim(),
              " dims like input (shape ", shape_str(input.sizes()), "), got ", other_dim);
  const auto dtype = input.scalar_type();
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kDouble || dtype == at::kBFloat16 || dtype == at::kHalf, op,
              ": input dtype must be float32, float64, bfloat16 or float16, got ", dtype);
  return input.dim() - 2;
}

void check_list(const char* op, const char* name, at::IntArrayRef values, int64_t spatial, int64_t min_value) {
  TORCH_CHECK(static_cast<int64_t>(values.size()) == spatial, op, ": ", name, " must have ", spatial,
              " entries (one per spatial dim), got ", shape_str(values));
  for (const auto v : values) {
    TORCH_CHECK(v >= min_value, op, ": every entry of ", name, " must be >= ", min_value, ", got ",
                shape_str(values));
  }
}

void check_spatial_sizes(const char* op, const char* name, at::IntArrayRef shape) {
  for (const auto size : shape.slice(2)) {
    TORCH_CHECK(size >= 1, op, ": ", name, " has an empty spatial dim, shape ", shape_str(shape));
  }
}

void check_groups(const char* op, int64_t groups, int64_t in_channels, int64_t out_channels) {
  TORCH_CHECK(groups > 0, op, ": groups must be positive, got ", groups);
  TORCH_CHECK(in_channels % groups == 0 && out_channels % groups == 0, op, ": groups=", groups,
              " must divide both channel counts, got ", in_channels, " and ", out_channels);
}

// The geometry of one problem, with 1-d and 2-d problems padded to 3-d.
ConvGeometry make_geometry(int64_t batch, int64_t in_channels, int64_t out_channels, int64_t groups, PaddingMode mode,
                           int64_t spatial, at::IntArrayRef in_size, at::IntArrayRef out_size, at::IntArrayRef kernel,
                           at::IntArrayRef stride, at::IntArrayRef dilation, at::IntArrayRef pad_lo) {
  ConvGeometry g;
  g.batch = batch;
  g.in_channels = in_channels;
  g.out_channels = out_channels;
  g.groups = groups;
  g.mode = mode;
  const int64_t offset = kMaxSpatial - spatial;
  for (const auto i : c10::irange(spatial)) {
    g.in_size[offset + i] = in_size[i];
    g.out_size[offset + i] = out_size[i];
    g.kernel[offset + i] = kernel[i];
    g.stride[offset + i] = stride[i];
    g.dilation[offset + i] = dilation[i];
    g.pad_lo[offset + i] = pad_lo[i];
  }
  return g;
}

// The padding modes other than zeros read real input positions, so they carry torch's limits:
// reflect needs pads < size, circular pads <= size (no wrapping around more than once).
void check_mode_pads(const char* op, PaddingMode mode, int64_t spatial, at::IntArrayRef in_size,
                     at::IntArrayRef pad_lo, const std::vector<int64_t>& pad_hi) {
  for (const auto i : c10::irange(spatial)) {
    const int64_t size = in_size[i];
    const int64_t widest = std::max(pad_lo[i], pad_hi[i]);
    if (mode == PaddingMode::Reflect) {
      TORCH_CHECK(widest < size, op, ": reflect padding needs pads < input size, got pads (", pad_lo[i], ", ",
                  pad_hi[i], ") for size ", size, " in spatial dim ", i);
    } else if (mode == PaddingMode::Circular) {
      TORCH_CHECK(widest <= size, op, ": circular padding needs pads <= input size, got pads (", pad_lo[i], ", ",
                  pad_hi[i], ") for size ", size, " in spatial dim ", i);
    }
  }
}

void check_bias(const char* op, const std::optional<at::Tensor>& bias, const at::Tensor& input, int64_t channels) {
  if (!bias.has_value() || !bias->defined()) return;
  check_tensor(op, "bias", *bias, input);
  TORCH_CHECK(bias->dim() == 1 && bias->size(0) == channels, op, ": bias must have shape [", channels, "], got ",
              shape_str(bias->sizes()));
}

}  // namespace

PaddingMode parse_padding_mode(c10::string_view mode) {
  if (mode == "zeros") return PaddingMode::Zeros;
  if (mode == "reflect") return PaddingMode::Reflect;
  if (mode == "replicate") return PaddingMode::Replicate;
  if (mode == "circular") return PaddingMode::Circular;
  TORCH_CHECK(false, "fastpad: padding_mode must be 'zeros', 'reflect', 'replicate' or 'circular', got '",
              std::string(mode), "'");
}

ConvGeometry conv_geometry(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                           at::IntArrayRef stride, at::IntArrayRef pad_lo, at::IntArrayRef pad_hi,
                           at::IntArrayRef dilation, int64_t groups, c10::string_view padding_mode) {
  const char* op = "fastpad.conv";
  const int64_t spatial = check_ranks(op, input, weight.dim(), "weight");
  check_tensor(op, "weight", weight, input);
  check_list(op, "stride", stride, spatial, 1);
  check_list(op, "dilation", dilation, spatial, 1);
  check_list(op, "pad_lo", pad_lo, spatial, 0);
  check_list(op, "pad_hi", pad_hi, spatial, std::numeric_limits<int64_t>::min());
  const int64_t out_channels = weight.size(0);
  check_groups(op, groups, input.size(1), out_channels);
  TORCH_CHECK(input.size(1) == weight.size(1) * groups, op, ": input has ", input.size(1),
              " channels but weight ", shape_str(weight.sizes()), " with groups=", groups, " expects ",
              weight.size(1) * groups);
  check_bias(op, bias, input, out_channels);
  const auto mode = parse_padding_mode(padding_mode);

  const auto in_size = input.sizes().slice(2);
  const auto kernel = weight.sizes().slice(2);
  std::vector<int64_t> out_size(spatial);
  check_spatial_sizes(op, "weight", weight.sizes());
  check_spatial_sizes(op, "input", input.sizes());
  for (const auto i : c10::irange(spatial)) {
    out_size[i] = conv_out_size(in_size[i], pad_lo[i], pad_hi[i], kernel[i], stride[i], dilation[i]);
    TORCH_CHECK(out_size[i] >= 1, op, ": the kernel (effective size ", effective_kernel(kernel[i], dilation[i]),
                ") is larger than the padded input (", in_size[i], " + ", pad_lo[i], " + ", pad_hi[i],
                ") in spatial dim ", i);
  }
  check_mode_pads(op, mode, spatial, in_size, pad_lo, pad_hi.vec());

  return make_geometry(input.size(0), input.size(1), out_channels, groups, mode, spatial, in_size, out_size, kernel,
                       stride, dilation, pad_lo);
}

ConvGeometry conv_transpose_geometry(const at::Tensor& input, const at::Tensor& weight,
                                     const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                     at::IntArrayRef crop_lo, at::IntArrayRef out_size, at::IntArrayRef dilation,
                                     int64_t groups, c10::string_view padding_mode) {
  const char* op = "fastpad.conv_transpose";
  const int64_t spatial = check_ranks(op, input, weight.dim(), "weight");
  check_tensor(op, "weight", weight, input);
  check_list(op, "stride", stride, spatial, 1);
  check_list(op, "dilation", dilation, spatial, 1);
  check_list(op, "crop_lo", crop_lo, spatial, 0);
  check_list(op, "out_size", out_size, spatial, 1);
  const int64_t out_channels = weight.size(1) * groups;
  check_groups(op, groups, input.size(1), out_channels);
  TORCH_CHECK(input.size(1) == weight.size(0), op, ": input has ", input.size(1), " channels but weight ",
              shape_str(weight.sizes()), " expects ", weight.size(0));
  check_bias(op, bias, input, out_channels);
  const auto mode = parse_padding_mode(padding_mode);

  const auto scatter_size = input.sizes().slice(2);
  const auto kernel = weight.sizes().slice(2);
  std::vector<int64_t> crop_hi(spatial);
  check_spatial_sizes(op, "weight", weight.sizes());
  check_spatial_sizes(op, "input", input.sizes());
  for (const auto i : c10::irange(spatial)) {
    crop_hi[i] = transposed_full_size(scatter_size[i], kernel[i], stride[i], dilation[i]) - crop_lo[i] - out_size[i];
  }
  check_mode_pads(op, mode, spatial, out_size, crop_lo, crop_hi);

  return make_geometry(input.size(0), out_channels, input.size(1), groups, mode, spatial, out_size, scatter_size,
                       kernel, stride, dilation, crop_lo);
}

ConvGeometry conv_weight_grad_geometry(const at::Tensor& input, const at::Tensor& grad_output,
                                       at::IntArrayRef weight_shape, at::IntArrayRef stride, at::IntArrayRef pad_lo,
                                       at::IntArrayRef dilation, int64_t groups, c10::string_view padding_mode) {
  const char* op = "fastpad.conv_weight_grad";
  const int64_t spatial = check_ranks(op, input, grad_output.dim(), "grad_output");
  check_tensor(op, "grad_output", grad_output, input);
  TORCH_CHECK(static_cast<int64_t>(weight_shape.size()) == input.dim(), op, ": weight_shape must have ",
              input.dim(), " entries, got ", shape_str(weight_shape));
  check_list(op, "weight_shape", weight_shape, input.dim(), 1);
  check_list(op, "stride", stride, spatial, 1);
  check_list(op, "dilation", dilation, spatial, 1);
  check_list(op, "pad_lo", pad_lo, spatial, 0);
  const int64_t out_channels = weight_shape[0];
  check_groups(op, groups, input.size(1), out_channels);
  TORCH_CHECK(input.size(1) == weight_shape[1] * groups, op, ": input has ", input.size(1),
              " channels but weight_shape ", shape_str(weight_shape), " with groups=", groups, " expects ",
              weight_shape[1] * groups);
  TORCH_CHECK(grad_output.size(0) == input.size(0) && grad_output.size(1) == out_channels, op,
              ": grad_output shape ", shape_str(grad_output.sizes()), " does not match batch ", input.size(0),
              " and ", out_channels, " output channels");
  const auto mode = parse_padding_mode(padding_mode);

  const auto in_size = input.sizes().slice(2);
  const auto out_size = grad_output.sizes().slice(2);
  const auto kernel = weight_shape.slice(2);
  std::vector<int64_t> pad_hi(spatial);
  check_spatial_sizes(op, "input", input.sizes());
  check_spatial_sizes(op, "grad_output", grad_output.sizes());
  for (const auto i : c10::irange(spatial)) {
    pad_hi[i] = (out_size[i] - 1) * stride[i] + effective_kernel(kernel[i], dilation[i]) - pad_lo[i] - in_size[i];
  }
  check_mode_pads(op, mode, spatial, in_size, pad_lo, pad_hi);

  return make_geometry(input.size(0), input.size(1), out_channels, groups, mode, spatial, in_size, out_size, kernel,
                       stride, dilation, pad_lo);
}

at::MemoryFormat output_memory_format(const at::Tensor& input) {
  if (input.dim() == 4 && !input.is_contiguous() && input.is_contiguous(at::MemoryFormat::ChannelsLast)) {
    return at::MemoryFormat::ChannelsLast;
  }
  if (input.dim() == 5 && !input.is_contiguous() && input.is_contiguous(at::MemoryFormat::ChannelsLast3d)) {
    return at::MemoryFormat::ChannelsLast3d;
  }
  return at::MemoryFormat::Contiguous;
}

std::vector<int64_t> tensor_shape(int64_t batch, int64_t channels, const int64_t* sizes, int64_t spatial_dims) {
  std::vector<int64_t> shape = {batch, channels};
  for (int64_t i = kMaxSpatial - spatial_dims; i < kMaxSpatial; ++i) shape.push_back(sizes[i]);
  return shape;
}

}  // namespace fastpad
