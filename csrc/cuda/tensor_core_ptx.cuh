// The PTX the CUDA kernels write by hand: for the pipelined implicit GEMM (cuda/pipelined_gemm.cuh), sm_80 and later,
// cp.async with zero-fill, ldmatrix, mma.sync m16n8k16 (bfloat16, float16) and m16n8k8 (TF32) with cvt.rna.tf32.f32;
// and 16-byte global loads and stores (the depthwise channel-vector kernels). Under the CUDA execution shim
// (FASTPAD_CUDA_SIM) each is its emulation from the PTX ISA's semantics (tests/cuda_sim/cuda_sim.h); this header and
// launch.cuh are where the two builds differ. Compiled for an older architecture, the sm_80 instructions trap: the
// binding never picks those paths there.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace fastpad::cuda {

#if !defined(FASTPAD_CUDA_SIM) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define FASTPAD_NO_SM80_PTX 1
#endif

// cp.async.cg 16 bytes from global to shared memory, or 16 zero bytes without reading `global` when !valid: the
// padding of the implicitly padded input, and the rows and columns past the GEMM's edges. Both 16-byte aligned.
__device__ __forceinline__ void cp_async_zfill_16(void* shared, const void* global, bool valid) {
#if defined(FASTPAD_CUDA_SIM)
  ::cuda_sim::async_copy_16(shared, global, valid, std::source_location::current());
#elif defined(FASTPAD_NO_SM80_PTX)
  __trap();
#else
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  const int source_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(global), "r"(source_bytes)
               : "memory");
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if defined(FASTPAD_CUDA_SIM)
  ::cuda_sim::async_commit();
#elif defined(FASTPAD_NO_SM80_PTX)
  __trap();
#else
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most `pending` of this thread's committed groups are still in flight.
template <int pending>
__device__ __forceinline__ void cp_async_wait() {
#if defined(FASTPAD_CUDA_SIM)
  ::cuda_sim::async_wait(pending);
#elif defined(FASTPAD_NO_SM80_PTX)
  __trap();
#else
  asm volatile("cp.async.wait_group %0;\n" ::"n"(pending) : "memory");
#endif
}

// Four 8x8 matrices of 16-bit elements from shared memory: lane l gives the row address of row l % 8 of matrix l / 8;
// register i of lane l receives the two elements at columns 2 (l % 4), +1 of row l / 4 of matrix i.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&registers)[4], const void* row) {
#if defined(FASTPAD_CUDA_SIM)
  ::cuda_sim::ldmatrix_x4(registers, row, std::source_location::current());
#elif defined(FASTPAD_NO_SM80_PTX)
  __trap();
#else
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(registers[0]), "=r"(registers[1]), "=r"(registers[2]), "=r"(registers[3])
               : "r"(address));
#endif
}

// ldmatrix_x4 with .trans: each 8x8 matrix transposed as it loads, so register i of lane l receives the elements at
// rows 2 (l % 4) and 2 (l % 4) + 1 of column l / 4 of matrix i: fragments of operands stored k-major.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&registers)[4], const void* row) {
#if defined(FASTPAD_CUDA_SIM)
  ::cuda_sim::ldmatrix_x4_trans(registers, row, std::source_location::current());
#elif defined(FASTPAD_NO_SM80_PTX)
  __trap();
#else
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(registers[0]), "=r"(registers[1]), "=r"(registers[2]), "=r"(registers[3])
               : "r"(address));
#endif
}

// acc += A B on the tensor cores, for one 16x8 tile of C with K = 16 (float32 accumulation): a holds this lane's A
// fragment (16x16, row-major), b its B fragment (16x8, "col": each column contiguous in K), as the PTX ISA lays out
// mma.m16n8k16. kBFloat16 picks bfloat16 or float16 inputs.
template <bool kBFloat16>
__device__ __forceinline__ void mma_m16n8k16(float (&acc)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(FASTPAD_CUDA_SIM)
  ::cuda_sim::mma_m16n8k16<kBFloat16>(acc, a, b, acc);
#elif defined(FASTPAD_NO_SM80_PTX)
  __trap();
#else
  if constexpr (kBFloat16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#endif
}

// cvt.rna.tf32.f32 in place: a float32 operand of the TF32 mma rounded to TF32 (10 mantissa bits, to nearest, ties
// away from zero), as its 32-bit pattern with the low 13 bits zero.
__device__ __forceinline__ void round_to_tf32(uint32_t& bits) {
#if defined(FASTPAD_CUDA_SIM)
  bits = ::cuda_sim::cvt_rna_tf32(bits);
#elif defined(FASTPAD_NO_SM80_PTX)
  __trap();
#else
  float value;
  memcpy(&value, &bits, sizeof(value));
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(bits) : "f"(value));
#endif
}

// acc += A B on the TF32 tensor cores, for one 16x8 tile of C with K = 8 (float32 accumulation): a holds this lane's
// A fragment (16x8, row-major), b its B fragment (8x8, "col"), as the PTX ISA lays out mma.m16n8k8 for .tf32; every
// operand already rounded by round_to_tf32.
__device__ __forceinline__ void mma_m16n8k8_tf32(float (&acc)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(FASTPAD_CUDA_SIM)
  ::cuda_sim::mma_m16n8k8_tf32(acc, a, b, acc, std::source_location::current());
#elif defined(FASTPAD_NO_SM80_PTX)
  __trap();
#else
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// ld.global.nc.v4.b32: a 16-byte value (a vector of channels) from a 16-byte aligned global address the kernel does
// not write, in one load through the read-only path.
template <typename Vector>
__device__ __forceinline__ Vector load_global_16(const void* global) {
  static_assert(sizeof(Vector) == 16, "a 16-byte vector");
  Vector value;
#if defined(FASTPAD_CUDA_SIM)
  std::memcpy(&value, global, 16);
#else
  uint32_t words[4];
  asm volatile("ld.global.nc.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(words[0]), "=r"(words[1]), "=r"(words[2]), "=r"(words[3])
               : "l"(global));
  memcpy(&value, words, 16);
#endif
  return value;
}

// st.global.v4.b32: the 16 bytes of `lanes` to a 16-byte aligned global address in one store, assembled as four
// 32-bit words in registers. (Storing a 16-byte aligned struct of them, nvcc wrote 2 or 4 bytes at a time.)
template <typename scalar_t, int kLanes>
__device__ __forceinline__ void store_global_16(void* global, const scalar_t (&lanes)[kLanes]) {
  static_assert(kLanes * sizeof(scalar_t) == 16, "a 16-byte vector");
#if defined(FASTPAD_CUDA_SIM)
  std::memcpy(global, lanes, 16);
#else
  uint32_t words[4] = {0, 0, 0, 0};
  for (int j = 0; j < kLanes; ++j) {
    if constexpr (sizeof(scalar_t) == 8) {
      uint64_t raw;
      memcpy(&raw, &lanes[j], sizeof(raw));
      words[2 * j] = static_cast<uint32_t>(raw);
      words[2 * j + 1] = static_cast<uint32_t>(raw >> 32);
    } else {
      std::conditional_t<sizeof(scalar_t) == 4, uint32_t, uint16_t> raw;
      memcpy(&raw, &lanes[j], sizeof(raw));
      words[j * sizeof(scalar_t) / 4] |= uint32_t{raw} << (8 * sizeof(scalar_t) * j % 32);
    }
  }
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(global), "r"(words[0]), "r"(words[1]),
               "r"(words[2]), "r"(words[3])
               : "memory");
#endif
}

}  // namespace fastpad::cuda
