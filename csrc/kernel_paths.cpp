// The private ops torch.ops.fastpad._{conv,conv_transpose,conv_weight_grad}_path: the kernel path kernel_paths.h
// picks for an op's arguments on a backend, with the op's own argument checks. For any device's tensors.
#include "kernel_paths.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>
#include <torch/library.h>

#include <cstdlib>
#include <string>

#include "conv_params.h"

namespace fastpad {

CpuIsa cpu_isa() {
  CpuIsa supported = CpuIsa::Baseline;
#if defined(__x86_64__) && defined(__GNUC__)
  // libgcc's checks include the OS's support for the wider registers (XGETBV), not only the CPUID bits.
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) supported = CpuIsa::Avx2;
  if (supported == CpuIsa::Avx2 && __builtin_cpu_supports("avx512f")) supported = CpuIsa::Avx512;
  if (supported == CpuIsa::Avx512 && __builtin_cpu_supports("avx512bf16")) supported = CpuIsa::Avx512Bf16;
#endif
  const char* limit = std::getenv("FASTPAD_CPU_ISA");
  if (limit == nullptr || *limit == '\0') return supported;
  const std::string requested(limit);
  CpuIsa cap = CpuIsa::Avx512Bf16;
  if (requested == "baseline") {
    cap = CpuIsa::Baseline;
  } else if (requested == "avx2") {
    cap = CpuIsa::Avx2;
  } else if (requested == "avx512") {
    cap = CpuIsa::Avx512;
  } else {
    TORCH_CHECK(requested == "avx512_bf16",
                "fastpad: FASTPAD_CPU_ISA must be 'baseline', 'avx2', 'avx512' or 'avx512_bf16', got '", requested,
                "'");
  }
  return std::min(supported, cap);
}

bool cpu_all_finite(const at::Tensor& t) {
  // Finiteness does not depend on the order: a dense tensor in any memory format (a channels-last weight) is read
  // in its own order, where a copy in NCHW order cost a weight-sized permuted copy per call.
  const at::Tensor c = t.is_non_overlapping_and_dense() ? t : t.contiguous();
  // The private path ops take tensors on any device: only a CPU float32 tensor's data is read here.
  if (c.scalar_type() != at::kFloat || !c.is_cpu()) return at::isfinite(c).all().item<bool>();
  // x * 0 is 0 for a finite x and NaN for an inf or NaN, and a sum with a NaN stays NaN: one vectorized pass.
  using Vec = at::vec::Vectorized<float>;
  const float* data = c.const_data_ptr<float>();
  return at::parallel_reduce(
      0, c.numel(), int64_t(1) << 16, true, [&](int64_t begin, int64_t end, bool finite) {
        Vec sum(0.0f);
        int64_t i = begin;
        for (; i + Vec::size() <= end; i += Vec::size()) sum = sum + Vec::loadu(data + i) * Vec(0.0f);
        float tail = 0.0f;
        for (; i < end; ++i) tail += data[i] * 0.0f;
        float lanes[Vec::size()];
        sum.store(lanes);
        for (const float lane : lanes) tail += lane;
        return finite && tail == 0.0f;
      },
      [](bool a, bool b) { return a && b; });
}

CpuIsa cpu_isa_for(const at::Tensor& t) {
  const CpuIsa isa = cpu_isa();
  return isa == CpuIsa::Avx512Bf16 && t.scalar_type() != at::kBFloat16 ? CpuIsa::Avx512 : isa;
}

namespace {

std::string cpu_isa_name() {
  switch (cpu_isa()) {
    case CpuIsa::Avx512Bf16: return "avx512_bf16";
    case CpuIsa::Avx512: return "avx512";
    case CpuIsa::Avx2: return "avx2";
    case CpuIsa::Baseline: return "baseline";
  }
  return "?";
}

Backend parse_backend(c10::string_view backend) {
  if (backend == "cpu") return Backend::Cpu;
  if (backend == "cuda") return Backend::Cuda;
  TORCH_CHECK(false, "fastpad: backend must be 'cpu' or 'cuda', got '", backend, "'");
}

bool is_channels_last(const at::Tensor& input) {
  return output_memory_format(input) != at::MemoryFormat::Contiguous;
}

std::string conv_path(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                      at::IntArrayRef stride, at::IntArrayRef pad_lo, at::IntArrayRef pad_hi,
                      at::IntArrayRef dilation, int64_t groups, c10::string_view padding_mode,
                      c10::string_view backend) {
  const ConvGeometry g = conv_geometry(input, weight, bias, stride, pad_lo, pad_hi, dilation, groups, padding_mode);
  // The CUDA paths are those of an sm_80 or later GPU (older GPUs never take the pipelined GEMM), with TF32 for float32
  // as torch.backends.cudnn.allow_tf32 says.
  return path_name(choose_conv_path(g, parse_backend(backend), is_channels_last(input), accumulator_bytes(input),
                                    is_reduced_precision(input), cpu_isa_for(input),
                                    {channel_vectors(input), true, tf32_allowed()}));
}

std::string conv_transpose_path(const at::Tensor& input, const at::Tensor& weight,
                                const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                at::IntArrayRef crop_lo, at::IntArrayRef out_size, at::IntArrayRef dilation,
                                int64_t groups, c10::string_view padding_mode, c10::string_view backend) {
  const ConvGeometry g =
      conv_transpose_geometry(input, weight, bias, stride, crop_lo, out_size, dilation, groups, padding_mode);
  const auto weight_finite = [&] { return cpu_all_finite(weight); };
  return path_name(choose_conv_transpose_path(g, parse_backend(backend), is_channels_last(input),
                                              accumulator_bytes(input), is_reduced_precision(input),
                                              cpu_isa_for(input), weight_finite,
                                              {channel_vectors(input), true, tf32_allowed()}));
}

std::string conv_weight_grad_path(const at::Tensor& input, const at::Tensor& grad_output,
                                  at::IntArrayRef weight_shape, at::IntArrayRef stride, at::IntArrayRef pad_lo,
                                  at::IntArrayRef dilation, int64_t groups, c10::string_view padding_mode,
                                  c10::string_view backend) {
  const ConvGeometry g = conv_weight_grad_geometry(input, grad_output, weight_shape, stride, pad_lo, dilation, groups,
                                                   padding_mode);
  return path_name(choose_weight_grad_path(g, parse_backend(backend), is_channels_last(input),
                                          accumulator_bytes(input), is_reduced_precision(input), cpu_isa_for(input),
                                          {channel_vectors(input) && channel_vectors(grad_output), true,
                                           tf32_allowed()}));
}

}  // namespace

TORCH_LIBRARY_IMPL(fastpad, CompositeExplicitAutograd, m) {
  m.impl("_conv_path", &conv_path);
  m.impl("_conv_transpose_path", &conv_transpose_path);
  m.impl("_conv_weight_grad_path", &conv_weight_grad_path);
}

TORCH_LIBRARY_FRAGMENT(fastpad, m) {
  // Private: the vector instruction set the CPU kernels use on this machine (cpu_isa()).
  m.def("_cpu_isa() -> str", &cpu_isa_name);
}

}  // namespace fastpad
