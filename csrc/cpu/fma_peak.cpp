// The private op torch.ops.fastpad._cpu_fma_peak(seconds): the float32 FMA peak of this machine in GFLOP/s, on all of
// torch's threads with the widest vector ISA fastpad's kernels use here (cpu_isa()). `python -m fastpad bench` prints
// it and reports each dense layer's fraction of it.
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "cpu/blocked_direct.h"
#include "kernel_paths.h"

namespace fastpad::cpu {
namespace {

double cpu_fma_peak(double seconds) {
  const CpuIsa isa = cpu_isa();
  TORCH_CHECK(isa != CpuIsa::Baseline, "fastpad: the FMA peak is measured with AVX2 or AVX-512, which this CPU lacks");
  TORCH_CHECK(seconds > 0 && seconds <= 60, "fastpad: seconds must be in (0, 60], got ", seconds);
  const auto loop = isa >= CpuIsa::Avx512 ? &fma_peak_loop_avx512 : &fma_peak_loop_avx2;
  using Clock = std::chrono::steady_clock;
  const auto elapsed = [](Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  const int threads = at::get_num_threads();
  std::vector<float> sink(threads * 16);
  // Calibrate the iterations for one round of about seconds / 5 on one thread, then take the best of five rounds.
  int64_t iterations = 1 << 16;
  for (;;) {
    const auto start = Clock::now();
    loop(iterations, sink.data());
    if (elapsed(start) > seconds / 50 || iterations > (int64_t(1) << 40)) break;
    iterations *= 2;
  }
  const auto start = Clock::now();
  loop(iterations, sink.data());
  iterations = std::max<int64_t>(1, static_cast<int64_t>(iterations * (seconds / 5) / elapsed(start)));
  double best = 0;
  for (int round = 0; round < 5; ++round) {
    std::vector<int64_t> multiply_adds(threads, 0);
    const auto round_start = Clock::now();
    at::parallel_for(0, threads, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) multiply_adds[t] = loop(iterations, sink.data() + t * 16);
    });
    const double time = elapsed(round_start);
    int64_t total = 0;
    for (const int64_t m : multiply_adds) total += m;
    best = std::max(best, 2.0 * static_cast<double>(total) / time / 1e9);
  }
  return best;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(fastpad, m) {
  m.def("_cpu_fma_peak(float seconds) -> float", &cpu_fma_peak);
}

}  // namespace fastpad::cpu
