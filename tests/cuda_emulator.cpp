// A CPU emulation of fastpad's CUDA kernels, for tests on machines without a GPU (tests/test_cuda_emulation.py).
// It runs the kernels' own index math from csrc/cuda/problems.h (the GEMM problems, the direct kernels' element
// bodies, the halo tiles, the split-K plan) with the same dispatch as the .cu host code, serially. It does not run
// the thread mapping, shared-memory staging or tensor-core code of the kernels themselves: only a GPU can.
// Each op returns the result and a code naming the path taken, so tests can show every path is exercised.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <torch/library.h>

#include <array>
#include <limits>
#include <vector>

#include "conv_params.h"
#include "cuda/problems.h"

namespace fastpad::cuda {
namespace {

// The tiles, rows, columns and k range each GEMM kernel uses, summed in k order.
template <typename Problem>
void emulate_gemm(const Problem& p) {
  using acc_t = typename Problem::acc_t;
  for (int64_t item = 0; item < p.items(); ++item) {
    const auto t = p.tile(item);
    if (t.m0 >= t.m_size) continue;
    for (int64_t m = t.m0; m < std::min<int64_t>(t.m0 + kTileM, t.m_size); ++m) {
      const auto row = p.a_row(t, m);
      for (int64_t n = t.n0; n < std::min<int64_t>(t.n0 + kTileN, t.n_size); ++n) {
        const auto col = p.b_col(t, n);
        acc_t sum = 0;
        for (int64_t k = t.k_begin; k < t.k_end; ++k) sum += p.a(t, row, k) * p.b(t, col, k);
        p.store(t, m, n, sum);
      }
    }
  }
}

at::Tensor poisoned_output(at::IntArrayRef shape, const at::Tensor& like, at::MemoryFormat format) {
  return at::full(shape, std::numeric_limits<double>::quiet_NaN(), like.options().memory_format(format));
}

// Path codes: 0 implicit GEMM, 1 depthwise halo kernel, 2 direct kernel.
std::tuple<at::Tensor, int64_t> emulate_conv(const at::Tensor& input, const at::Tensor& weight,
                                             const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                             at::IntArrayRef pad_lo, at::IntArrayRef pad_hi, at::IntArrayRef dilation,
                                             int64_t groups, c10::string_view padding_mode) {
  const ConvGeometry g = conv_geometry(input, weight, bias, stride, pad_lo, pad_hi, dilation, groups, padding_mode);
  const auto format = output_memory_format(input);
  auto y = poisoned_output(tensor_shape(g.batch, g.out_channels, g.out_size, input.dim() - 2), input, format);
  int64_t path = -1;
  if (y.numel() == 0) return {y, path};
  const auto w = weight.contiguous();
  const auto b = bias.has_value() && bias->defined() ? bias->contiguous() : at::Tensor();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, input.scalar_type(), "emulate_conv", [&] {
    using acc_t = acc_type<scalar_t>;
    const scalar_t* x_data = input.const_data_ptr<scalar_t>();
    const scalar_t* w_data = w.const_data_ptr<scalar_t>();
    const scalar_t* bias_data = b.defined() ? b.const_data_ptr<scalar_t>() : nullptr;
    scalar_t* y_data = y.mutable_data_ptr<scalar_t>();
    const Strides xs = strides_of(input), ys = strides_of(y);
    const bool channels_last = format != at::MemoryFormat::Contiguous;
    if (g.in_channels_per_group() != 1) {
      emulate_gemm(make_conv_problem(g, x_data, xs, w_data, bias_data, y_data, ys));
      path = 0;
      return;
    }
    const HaloPlan plan = halo_plan(g, sizeof(acc_t));
    if (!channels_last && plan.fits) {
      // Each block: the patch per depth tap, then every thread's taps.
      std::vector<acc_t> patch(int64_t(plan.patch_h) * plan.patch_w), sums(kThreads);
      for (int64_t item = 0; item < plan.tiles; ++item) {
        const HaloItem it = halo_item(g, plan, item);
        std::fill(sums.begin(), sums.end(), bias_data != nullptr ? load<acc_t>(bias_data, it.c) : acc_t(0));
        for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
          const int64_t id = g.tap_source(0, it.od, kd);
          if (id < 0) continue;
          for (int e = 0; e < plan.patch_h * plan.patch_w; ++e) patch[e] = halo_patch_element(g, plan, x_data, xs, it, id, e);
          for (int thread = 0; thread < kThreads; ++thread) {
            sums[thread] +=
                halo_patch_taps(g, plan, w_data, patch.data(), it.c, kd, thread / plan.tile_w, thread % plan.tile_w);
          }
        }
        for (int thread = 0; thread < kThreads; ++thread) {
          halo_store(g, it, thread / plan.tile_w, thread % plan.tile_w, sums[thread], y_data, ys);
        }
      }
      path = 1;
    } else {
      for (int64_t index = 0; index < y.numel(); ++index) {
        direct_conv_element(g, x_data, xs, w_data, bias_data, y_data, ys, channels_last, index);
      }
      path = 2;
    }
  });
  return {y, path};
}

// Path codes: 0 direct gather, 1 phase GEMMs, 2 phase GEMMs + fold.
std::tuple<at::Tensor, int64_t> emulate_conv_transpose(const at::Tensor& input, const at::Tensor& weight,
                                                       const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                                       at::IntArrayRef crop_lo, at::IntArrayRef out_size,
                                                       at::IntArrayRef dilation, int64_t groups,
                                                       c10::string_view padding_mode) {
  const ConvGeometry g =
      conv_transpose_geometry(input, weight, bias, stride, crop_lo, out_size, dilation, groups, padding_mode);
  const auto format = output_memory_format(input);
  const bool channels_last = format != at::MemoryFormat::Contiguous;
  auto y = poisoned_output(tensor_shape(g.batch, g.in_channels, g.in_size, input.dim() - 2), input, format);
  int64_t path = -1;
  if (y.numel() == 0) return {y, path};
  const auto w = weight.contiguous();
  const auto b = bias.has_value() && bias->defined() ? bias->contiguous() : at::Tensor();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, input.scalar_type(), "emulate_conv_transpose", [&] {
    const scalar_t* x_data = input.const_data_ptr<scalar_t>();
    const scalar_t* w_data = w.const_data_ptr<scalar_t>();
    const scalar_t* bias_data = b.defined() ? b.const_data_ptr<scalar_t>() : nullptr;
    scalar_t* y_data = y.mutable_data_ptr<scalar_t>();
    const Strides xs = strides_of(input), ys = strides_of(y);
    const auto gather = [&](GatherPass pass, bool weight_finite) {
      for (int64_t index = 0; index < y.numel(); ++index) {
        transpose_gather_element(g, x_data, xs, w_data, bias_data, y_data, ys, channels_last, pass, weight_finite,
                                 index);
      }
    };
    if (g.out_channels_per_group() < kPhaseGemmMinChannels) {
      gather(GatherPass::Full, true);
      path = 0;
      return;
    }
    emulate_gemm(make_phase_problem(g, x_data, xs, w_data, bias_data, y_data, ys));
    const bool weight_finite = at::isfinite(w).all().item<bool>();
    path = g.mode == PaddingMode::Zeros ? 1 : 2;
    if (g.mode != PaddingMode::Zeros || !weight_finite) gather(GatherPass::AfterPhaseGemm, weight_finite);
  });
  return {y, path};
}

// Path codes: 0 depthwise block reduction, else the number of K splits of the GEMM.
std::tuple<at::Tensor, int64_t> emulate_conv_weight_grad(const at::Tensor& input, const at::Tensor& grad_output,
                                                         at::IntArrayRef weight_shape, at::IntArrayRef stride,
                                                         at::IntArrayRef pad_lo, at::IntArrayRef dilation,
                                                         int64_t groups, c10::string_view padding_mode) {
  const ConvGeometry g = conv_weight_grad_geometry(input, grad_output, weight_shape, stride, pad_lo, dilation, groups,
                                                   padding_mode);
  if (g.batch == 0) return {at::zeros(weight_shape, input.options()), -1};
  auto grad = poisoned_output(weight_shape, input, at::MemoryFormat::Contiguous);
  int64_t path = -1;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, input.scalar_type(), "emulate_conv_weight_grad", [&] {
    using acc_t = acc_type<scalar_t>;
    const scalar_t* x_data = input.const_data_ptr<scalar_t>();
    const scalar_t* gy_data = grad_output.const_data_ptr<scalar_t>();
    scalar_t* grad_data = grad.mutable_data_ptr<scalar_t>();
    const Strides xs = strides_of(input), gys = strides_of(grad_output);
    if (g.in_channels_per_group() == 1) {
      // Per (channel, tap): thread t sums k = t, t + kThreads, ...; then the tree over threads.
      const int64_t taps = g.kernel_volume(), reduce = g.batch * g.out_volume();
      std::vector<acc_t> partial(kThreads);
      for (int64_t item = 0; item < g.out_channels * taps; ++item) {
        int64_t r[kMaxSpatial];
        const int64_t channel = unflatten(item, g.kernel, r);
        for (int thread = 0; thread < kThreads; ++thread) {
          acc_t sum = 0;
          for (int64_t k = thread; k < reduce; k += kThreads) {
            sum += depthwise_weight_grad_term(g, x_data, xs, gy_data, gys, channel, r, k);
          }
          partial[thread] = sum;
        }
        for (int width = kThreads / 2; width > 0; width /= 2) {
          for (int thread = 0; thread < width; ++thread) partial[thread] += partial[thread + width];
        }
        grad_data[item] = static_cast<scalar_t>(partial[0]);
      }
      path = 0;
      return;
    }
    auto problem = make_weight_grad_problem(g, x_data, xs, gy_data, gys);
    auto partial = at::full({problem.splits, grad.numel()}, std::numeric_limits<double>::quiet_NaN(),
                            input.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
    problem.partial = partial.mutable_data_ptr<acc_t>();
    emulate_gemm(problem);
    const acc_t* partial_data = partial.const_data_ptr<acc_t>();
    for (int64_t i = 0; i < grad.numel(); ++i) {
      acc_t sum = 0;
      for (int64_t s = 0; s < problem.splits; ++s) sum += partial_data[s * grad.numel() + i];
      grad_data[i] = static_cast<scalar_t>(sum);
    }
    path = problem.splits;
  });
  return {grad, path};
}

}  // namespace

TORCH_LIBRARY(fastpad_cuda_emulator, m) {
  m.def(
      "conv(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] pad_lo, int[] pad_hi, int[] dilation, "
      "int groups, str padding_mode) -> (Tensor, int)");
  m.def(
      "conv_transpose(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] crop_lo, int[] out_size, "
      "int[] dilation, int groups, str padding_mode) -> (Tensor, int)");
  m.def(
      "conv_weight_grad(Tensor input, Tensor grad_output, int[] weight_shape, int[] stride, int[] pad_lo, "
      "int[] dilation, int groups, str padding_mode) -> (Tensor, int)");
}

TORCH_LIBRARY_IMPL(fastpad_cuda_emulator, CPU, m) {
  m.impl("conv", &emulate_conv);
  m.impl("conv_transpose", &emulate_conv_transpose);
  m.impl("conv_weight_grad", &emulate_conv_weight_grad);
}

}  // namespace fastpad::cuda
