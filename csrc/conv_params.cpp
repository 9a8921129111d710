#include "conv_params.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <c10/util/irange.h>
#include <c10/util/strides.h>

#include <algorithm>
#include <limits>
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

// The bound that keeps every index and buffer size the kernels derive from a problem inside int64 (they compute in
// int64 and do not check for overflow). Per spatial dim, every size, pad, crop, out_size, effective kernel and padded
// extent is at most kMaxExtent, so the sums of a few of them in geometry.h cannot overflow. Per image,
// check_problem_size bounds channels x kernel taps x padded positions by kMaxExtent too: that product bounds, up to a
// small factor for buffer slack and 8-byte accumulators, the positions, column buffers and phase planes (all their
// stride phases included) the kernels work with; make_geometry sets the strides and dilations that do not act to 1,
// so every stride and dilation is at most the padded extent of its dim. 2^56 leaves a factor of 128 below overflow
// and is far above real problems: a 2048-channel 7x7 convolution over a 16384x16384 image is about 2^45.
constexpr int64_t kMaxExtent = int64_t{1} << 56;
constexpr const char* kMaxExtentStr = "2^56";

// Checks that `values` has one entry per spatial dim, each >= min_value and, where `bounded`, <= kMaxExtent.
void check_list(const char* op, const char* name, at::IntArrayRef values, int64_t spatial, int64_t min_value,
                bool bounded = false) {
  TORCH_CHECK(static_cast<int64_t>(values.size()) == spatial, op, ": ", name, " must have ", spatial,
              " entries (one per spatial dim), got ", shape_str(values));
  for (const auto v : values) {
    TORCH_CHECK(v >= min_value, op, ": every entry of ", name, " must be >= ", min_value, ", got ",
                shape_str(values));
    TORCH_CHECK(!bounded || v <= kMaxExtent, op, ": every entry of ", name, " must be <= ", kMaxExtentStr, ", got ",
                shape_str(values));
  }
}

void check_spatial_sizes(const char* op, const char* name, at::IntArrayRef shape) {
  for (const auto size : shape.slice(2)) {
    TORCH_CHECK(size >= 1, op, ": ", name, " has an empty spatial dim, shape ", shape_str(shape));
    TORCH_CHECK(size <= kMaxExtent, op, ": ", name, " has a spatial dim larger than ", kMaxExtentStr, ", shape ",
                shape_str(shape));
  }
}

// d * (k - 1) + 1 for a kernel size k >= 1 and dilation d >= 1, checked to be at most kMaxExtent.
int64_t checked_effective_kernel(const char* op, int64_t dim, int64_t kernel, int64_t dilation) {
  TORCH_CHECK(kernel - 1 <= (kMaxExtent - 1) / dilation, op, ": kernel size ", kernel, " with dilation ", dilation,
              " in spatial dim ", dim, " gives an effective kernel size dilation * (kernel - 1) + 1 larger than ",
              kMaxExtentStr);
  return effective_kernel(kernel, dilation);
}

// Checks that `count` windows of effective size k_eff, `stride` apart, span at most kMaxExtent positions:
// (count - 1) * stride + k_eff, which is transposed_full_size (conv_transpose: its full output; conv_weight_grad: the
// padded input that grad_output implies). `name` is the tensor whose size is `count`.
void check_span(const char* op, const char* name, int64_t dim, int64_t count, int64_t stride, int64_t k_eff) {
  TORCH_CHECK(count - 1 <= (kMaxExtent - k_eff) / stride, op, ": ", name, " size ", count, " with stride ", stride,
              " and effective kernel size ", k_eff, " in spatial dim ", dim, " spans (size - 1) * stride + ", k_eff,
              " positions, more than ", kMaxExtentStr);
}

// The extent of the padded input along one dim, from its first padded position to the end of the input or of the
// padding, whichever is further: pad_lo + size + max(pad_hi, 0). Each term is at most kMaxExtent.
int64_t padded_extent(int64_t pad_lo, int64_t size, int64_t pad_hi) {
  return pad_lo + size + std::max<int64_t>(pad_hi, 0);
}

// Bounds channels x kernel taps x padded positions per image by kMaxExtent (see there), with the larger of the two
// channel counts (a kernel's buffers hold either side). `extent` holds each spatial dim's padded extent, at most
// 3 * kMaxExtent each.
void check_problem_size(const char* op, int64_t in_channels, int64_t out_channels, at::IntArrayRef kernel,
                        const std::vector<int64_t>& extent) {
  const int64_t channels = std::max<int64_t>({in_channels, out_channels, 1});
  std::vector<int64_t> factors(kernel.begin(), kernel.end());
  factors.insert(factors.end(), extent.begin(), extent.end());
  int64_t product = channels;
  bool fits = true;
  for (const auto factor : factors) {  // every factor is >= 1
    fits = fits && factor <= kMaxExtent / product;
    if (fits) product *= factor;
  }
  TORCH_CHECK(fits, op, ": the problem is too large: ", channels, " channels x kernel ", shape_str(kernel),
              " x padded extent ", shape_str(extent), " (pad_lo + size + max(pad_hi, 0) per spatial dim) is more than ",
              kMaxExtentStr, " elements per image; check stride, dilation, the pads and the sizes");
}

// groups is positive and divides each of the channel counts.
void check_groups(const char* op, int64_t groups, at::IntArrayRef channels) {
  TORCH_CHECK(groups > 0, op, ": groups must be positive, got ", groups);
  for (const auto count : channels) {
    TORCH_CHECK(count % groups == 0, op, ": groups=", groups, " must divide the channel counts, got ",
                shape_str(channels));
  }
}

// The geometry of one problem, with 1-d and 2-d problems padded to 3-d. The channels and sizes are the
// convolution's (see ConvGeometry).
ConvGeometry make_geometry(int64_t batch, int64_t conv_in_channels, int64_t conv_out_channels, int64_t groups,
                           PaddingMode mode, int64_t spatial, at::IntArrayRef conv_in_sizes,
                           at::IntArrayRef conv_out_sizes, at::IntArrayRef kernel, at::IntArrayRef stride,
                           at::IntArrayRef dilation, at::IntArrayRef pad_lo) {
  ConvGeometry g;
  g.batch = batch;
  g.conv_in_channels = conv_in_channels;
  g.conv_out_channels = conv_out_channels;
  g.groups = groups;
  g.mode = mode;
  const int64_t offset = kMaxSpatial - spatial;
  for (const auto i : c10::irange(spatial)) {
    g.conv_in_sizes[offset + i] = conv_in_sizes[i];
    g.conv_out_sizes[offset + i] = conv_out_sizes[i];
    g.kernel[offset + i] = kernel[i];
    // A stride acts only between two outputs (for conv_transpose: two scattering inputs), and a dilation only
    // between two taps. Where there is one, they are set to 1, which changes nothing in the result: torch accepts
    // any stride there, and the kernels size buffers by it (cpu/phase_planes.h keeps all stride phases). Every other
    // stride and dilation is at most the padded extent of its dim, so check_problem_size bounds them too.
    g.stride[offset + i] = conv_out_sizes[i] == 1 ? 1 : stride[i];
    g.dilation[offset + i] = kernel[i] == 1 ? 1 : dilation[i];
    g.pad_lo[offset + i] = pad_lo[i];
  }
  // Without padding read, every mode is zeros: then the kernels that serve zeros alone may take it (torch's own
  // convolution, the transposed conv without folds; a 1x191x16^3 1x1x1 'same' replicate conv ran 2.8x torch's time
  // on the tap GEMMs).
  if (g.reads_no_padding()) g.mode = PaddingMode::Zeros;
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

PaddingMode parse_padding_mode(const char* op, c10::string_view mode) {
  if (mode == "zeros") return PaddingMode::Zeros;
  if (mode == "reflect") return PaddingMode::Reflect;
  if (mode == "replicate") return PaddingMode::Replicate;
  if (mode == "circular") return PaddingMode::Circular;
  TORCH_CHECK(false, op, ": padding_mode must be 'zeros', 'reflect', 'replicate' or 'circular', got '",
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
  check_list(op, "pad_lo", pad_lo, spatial, 0, /*bounded=*/true);
  check_list(op, "pad_hi", pad_hi, spatial, std::numeric_limits<int64_t>::min(), /*bounded=*/true);
  const int64_t in_channels = input.size(1), out_channels = weight.size(0);
  // As in torch. Zero input channels are fine (the output is the bias).
  TORCH_CHECK(out_channels >= 1, op, ": weight must have at least one output channel (dim 0), got shape ",
              shape_str(weight.sizes()));
  check_groups(op, groups, {in_channels, out_channels});
  TORCH_CHECK(weight.size(1) == in_channels / groups, op, ": input has ", in_channels, " channels but weight ",
              shape_str(weight.sizes()), " with groups=", groups, " has ", weight.size(1),
              " input channels per group, expected ", in_channels / groups);
  check_bias(op, bias, input, out_channels);
  const auto mode = parse_padding_mode(op, padding_mode);

  const auto in_size = input.sizes().slice(2);
  const auto kernel = weight.sizes().slice(2);
  std::vector<int64_t> out_size(spatial), extent(spatial);
  check_spatial_sizes(op, "weight", weight.sizes());
  check_spatial_sizes(op, "input", input.sizes());
  for (const auto i : c10::irange(spatial)) {
    const int64_t k_eff = checked_effective_kernel(op, i, kernel[i], dilation[i]);
    // Compared before conv_out_size subtracts: pad_hi may be as low as INT64_MIN.
    TORCH_CHECK(in_size[i] + pad_lo[i] + pad_hi[i] >= k_eff, op, ": the kernel (effective size ", k_eff,
                ") is larger than the padded input (", in_size[i], " + ", pad_lo[i], " + ", pad_hi[i],
                ") in spatial dim ", i);
    out_size[i] = conv_out_size(in_size[i], pad_lo[i], pad_hi[i], kernel[i], stride[i], dilation[i]);
    extent[i] = padded_extent(pad_lo[i], in_size[i], pad_hi[i]);
  }
  check_mode_pads(op, mode, spatial, in_size, pad_lo, pad_hi.vec());
  check_problem_size(op, in_channels, out_channels, kernel, extent);

  return make_geometry(input.size(0), in_channels, out_channels, groups, mode, spatial, in_size, out_size, kernel,
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
  check_list(op, "crop_lo", crop_lo, spatial, 0, /*bounded=*/true);
  check_list(op, "out_size", out_size, spatial, 1, /*bounded=*/true);
  // Named after the convolution this op is the adjoint of (see ConvGeometry): input is on its output side, and the
  // output (out_size) on its input side.
  const int64_t conv_out_channels = input.size(1);
  TORCH_CHECK(conv_out_channels == weight.size(0), op, ": input has ", conv_out_channels, " channels but weight ",
              shape_str(weight.sizes()), " expects ", weight.size(0));
  // As in torch. Zero output channels are fine (the output is empty).
  TORCH_CHECK(conv_out_channels >= 1, op, ": weight must have at least one input channel (dim 0), got shape ",
              shape_str(weight.sizes()));
  check_groups(op, groups, {conv_out_channels});
  // groups divides conv_out_channels = weight.size(0), so this is at most weight.numel(): it cannot overflow.
  const int64_t conv_in_channels = weight.size(1) * groups;
  check_bias(op, bias, input, conv_in_channels);
  const auto mode = parse_padding_mode(op, padding_mode);

  const auto conv_out_sizes = input.sizes().slice(2);
  const auto kernel = weight.sizes().slice(2);
  std::vector<int64_t> crop_hi(spatial), extent(spatial);
  check_spatial_sizes(op, "weight", weight.sizes());
  check_spatial_sizes(op, "input", input.sizes());
  for (const auto i : c10::irange(spatial)) {
    const int64_t k_eff = checked_effective_kernel(op, i, kernel[i], dilation[i]);
    check_span(op, "input", i, conv_out_sizes[i], stride[i], k_eff);
    crop_hi[i] = transposed_full_size(conv_out_sizes[i], kernel[i], stride[i], dilation[i]) - crop_lo[i] - out_size[i];
    extent[i] = padded_extent(crop_lo[i], out_size[i], crop_hi[i]);
  }
  check_mode_pads(op, mode, spatial, out_size, crop_lo, crop_hi);
  check_problem_size(op, conv_in_channels, conv_out_channels, kernel, extent);

  return make_geometry(input.size(0), conv_in_channels, conv_out_channels, groups, mode, spatial,
                       /*conv_in_sizes=*/out_size, conv_out_sizes, kernel, stride, dilation, crop_lo);
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
  check_list(op, "pad_lo", pad_lo, spatial, 0, /*bounded=*/true);
  const int64_t in_channels = input.size(1), out_channels = weight_shape[0];
  check_groups(op, groups, {in_channels, out_channels});
  TORCH_CHECK(weight_shape[1] == in_channels / groups, op, ": input has ", in_channels, " channels but weight_shape ",
              shape_str(weight_shape), " with groups=", groups, " has ", weight_shape[1],
              " input channels per group, expected ", in_channels / groups);
  TORCH_CHECK(grad_output.size(0) == input.size(0) && grad_output.size(1) == out_channels, op,
              ": grad_output shape ", shape_str(grad_output.sizes()), " does not match batch ", input.size(0),
              " and ", out_channels, " output channels");
  const auto mode = parse_padding_mode(op, padding_mode);

  const auto in_size = input.sizes().slice(2);
  const auto out_size = grad_output.sizes().slice(2);
  const auto kernel = weight_shape.slice(2);
  std::vector<int64_t> pad_hi(spatial), extent(spatial);
  check_spatial_sizes(op, "input", input.sizes());
  check_spatial_sizes(op, "grad_output", grad_output.sizes());
  for (const auto i : c10::irange(spatial)) {
    // The pad_hi that makes a conv over input give grad_output's size (negative where it leaves input's end unread).
    const int64_t k_eff = checked_effective_kernel(op, i, kernel[i], dilation[i]);
    check_span(op, "grad_output", i, out_size[i], stride[i], k_eff);
    pad_hi[i] = transposed_full_size(out_size[i], kernel[i], stride[i], dilation[i]) - pad_lo[i] - in_size[i];
    extent[i] = padded_extent(pad_lo[i], in_size[i], pad_hi[i]);
  }
  check_mode_pads(op, mode, spatial, in_size, pad_lo, pad_hi);
  check_problem_size(op, in_channels, out_channels, kernel, extent);

  return make_geometry(input.size(0), in_channels, out_channels, groups, mode, spatial, in_size, out_size, kernel,
                       stride, dilation, pad_lo);
}

int64_t accumulator_bytes(const at::Tensor& t) { return t.scalar_type() == at::kDouble ? 8 : 4; }

bool is_reduced_precision(const at::Tensor& t) {
  return t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf;
}

bool channel_vectors(const at::Tensor& t) {
  constexpr int64_t kBytes = 16;
  const int64_t elements = kBytes / t.element_size();
  if (t.stride(1) != 1) return false;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d != 1 && t.size(d) > 1 && t.stride(d) % elements != 0) return false;
  }
  return reinterpret_cast<uintptr_t>(t.const_data_ptr()) % kBytes == 0;
}

bool tf32_allowed() { return at::globalContext().allowTF32CuDNN(at::Float32Op::CONV); }

at::Tensor transpose_phase_weight(const ConvGeometry& g, const at::Tensor& weight, int64_t phase) {
  const TransposePhase t = transpose_phase_as_conv(g, phase);
  const int64_t spatial_dims = weight.dim() - 2;
  const int64_t x_per_group = g.conv_out_channels_per_group(), y_per_group = g.conv_in_channels_per_group();
  std::vector<int64_t> conv_shape{g.conv_in_channels, x_per_group};
  for (int64_t d = 0; d < spatial_dims; ++d) conv_shape.push_back(t.conv.kernel[kMaxSpatial - spatial_dims + d]);
  if (weight.is_cpu()) {
    // One pass: conv_weight[group's y channel, x channel, j] = weight[group's x channel, y channel, the phase's tap
    // first + (taps - 1 - j) * step] per dim (ATen's slice, reshape, transpose and flip, timed from Python, took
    // 26 us for a 23 x 28 x 2 x 2 phase weight, copies of a few kilobytes each). With one group conv_weight is
    // stored x channels outermost, as the weight is, so that both sides run in order.
    constexpr int64_t kMinElementsPerThread = int64_t(1) << 15;
    const int64_t* k = t.conv.kernel;
    std::vector<int64_t> x_major_shape(conv_shape);
    std::swap(x_major_shape[0], x_major_shape[1]);
    at::Tensor conv_weight = g.groups == 1 ? at::empty(x_major_shape, weight.options()).transpose(0, 1)
                                           : at::empty(conv_shape, weight.options());
    const int64_t out_y_stride = conv_weight.stride(0), out_x_stride = conv_weight.stride(1);
    const auto w_strides = element_strides(weight);  // [x channel, y channel, d, h, w]
    std::vector<int64_t> tap_offsets;  // of the phase's taps in conv_weight's order, from a (x, y) channel's taps
    for (int64_t jd = 0; jd < k[0]; ++jd) {
      for (int64_t jh = 0; jh < k[1]; ++jh) {
        for (int64_t jw = 0; jw < k[2]; ++jw) {
          tap_offsets.push_back((t.tap_first[0] + (k[0] - 1 - jd) * t.tap_step[0]) * w_strides[2] +
                                (t.tap_first[1] + (k[1] - 1 - jh) * t.tap_step[1]) * w_strides[3] +
                                (t.tap_first[2] + (k[2] - 1 - jw) * t.tap_step[2]) * w_strides[4]);
        }
      }
    }
    const int64_t taps = static_cast<int64_t>(tap_offsets.size());
    const int64_t grain = std::max<int64_t>(1, kMinElementsPerThread / std::max<int64_t>(y_per_group * taps, 1));
    // At stride 1 in a contiguous weight a channel's taps are one block, which the phase reads backwards.
    const bool whole_block_reversed = taps > 0 && taps == g.kernel_volume() && weight.numel() > 0 &&
                                      weight.select(0, 0).select(0, 0).is_contiguous();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, weight.scalar_type(), "transpose_phase_weight", [&] {
      const scalar_t* w = weight.const_data_ptr<scalar_t>();
      scalar_t* out = conv_weight.mutable_data_ptr<scalar_t>();
      // Over (group, x channel): each writes its own conv_weight[group's y channels, x channel], a tap at a time
      // along the y channels (a plain strided loop: a nest over the taps inside each y channel took 3.5x as long on
      // a 512 x 256 x 2 x 2 weight's phases).
      at::parallel_for(0, g.groups * x_per_group, grain, [&](int64_t begin, int64_t end) {
        for (int64_t item = begin; item < end; ++item) {
          const int64_t group = item / x_per_group, c_x = item % x_per_group;
          const scalar_t* channel = w + item * w_strides[0];
          scalar_t* dst = out + group * y_per_group * out_y_stride + c_x * out_x_stride;
          const int64_t src_step = w_strides[1], dst_step = out_y_stride;
          if (whole_block_reversed) {
            for (int64_t c_y = 0; c_y < y_per_group; ++c_y) {
              const scalar_t* block = channel + c_y * src_step;
              std::reverse_copy(block, block + taps, dst + c_y * dst_step);
            }
            continue;
          }
          for (int64_t j = 0; j < taps; ++j) {
            const scalar_t* src = channel + tap_offsets[j];
            for (int64_t c_y = 0; c_y < y_per_group; ++c_y) dst[c_y * dst_step + j] = src[c_y * src_step];
          }
        }
      });
    });
    return conv_weight;
  }
  // On the GPU (the CUDA bindings' phase weights), ATen's views and copies on the device.
  at::Tensor taps = weight;  // [C_x, C_y / groups, *k], then the phase's taps of each dim
  std::vector<int64_t> flipped;
  for (int64_t d = 0; d < spatial_dims; ++d) {
    const int64_t dim = kMaxSpatial - spatial_dims + d;
    taps = taps.slice(2 + d, t.tap_first[dim], t.tap_first[dim] + t.conv.kernel[dim] * t.tap_step[dim],
                      t.tap_step[dim]);
    flipped.push_back(3 + d);
  }
  std::vector<int64_t> grouped{g.groups, x_per_group, y_per_group};
  for (int64_t d = 0; d < spatial_dims; ++d) grouped.push_back(taps.size(2 + d));
  return taps.reshape(grouped).transpose(1, 2).flip(flipped).reshape(conv_shape);
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

at::Tensor weight_grad_in_input_layout(const at::Tensor& grad, at::IntArrayRef weight_shape, const at::Tensor& input) {
  const at::MemoryFormat format = output_memory_format(input);
  // The strides at::empty(weight_shape, format) has, computed without allocating a weight-sized tensor per call.
  const auto contiguous = c10::contiguous_strides(weight_shape);
  const std::vector<int64_t> strides =
      format == at::MemoryFormat::ChannelsLast     ? c10::get_channels_last_strides_2d(weight_shape)
      : format == at::MemoryFormat::ChannelsLast3d ? c10::get_channels_last_strides_3d(weight_shape)
                                                   : std::vector<int64_t>(contiguous.begin(), contiguous.end());
  if (!grad.is_view() && grad.sizes().equals(weight_shape) && grad.strides().equals(strides) &&
      grad.scalar_type() == input.scalar_type()) {
    return grad;
  }
  auto result = at::empty(weight_shape, input.options().memory_format(format));
  result.copy_(grad.reshape(weight_shape));
  return result;
}

std::vector<int64_t> tensor_shape(int64_t batch, int64_t channels, const int64_t* sizes, int64_t spatial_dims) {
  std::vector<int64_t> shape = {batch, channels};
  for (int64_t i = kMaxSpatial - spatial_dims; i < kMaxSpatial; ++i) shape.push_back(sizes[i]);
  return shape;
}

std::array<int64_t, 2 + kMaxSpatial> element_strides(const at::Tensor& t) {
  std::array<int64_t, 2 + kMaxSpatial> strides = {t.stride(0), t.stride(1), 0, 0, 0};
  for (int64_t dim = 2; dim < t.dim(); ++dim) strides[2 + kMaxSpatial - t.dim() + dim] = t.stride(dim);
  return strides;
}

}  // namespace fastpad
