// The CUDA execution shim: force-included (g++ -include) when csrc/cuda/*.cu are compiled as plain C++ with
// FASTPAD_CUDA_SIM, so that the real kernel bodies run on CPU, unchanged.
//
// - Every CUDA thread of a block is a fiber with its own stack; blocks run one at a time, so `__shared__` (a
//   function-scope `static thread_local`) is storage that all fibers of the block share. It is filled with a poison pattern (all
//   bits set: NaN for every float type) before each block, and so is the dynamic shared memory.
// - `__syncthreads()` releases the block only when every live thread waits at the same barrier (same file and line);
//   otherwise the launch fails with "divergent barrier" or "different __syncthreads".
// - Between two synchronisations, threads run in the order of a schedule (ascending, descending, interleaved warps, or
//   seeded random); results must not depend on it. Under ascending and descending, a warp whose collective completes
//   runs ahead of the others to its next synchronisation; under interleaved all warps move in step.
// - A grid cap makes grid-stride loops run several work items per block.
// - nvcuda::wmma: every *_sync call is a warp-collective rendezvous of all 32 lanes with the same arguments; it checks
//   256-bit pointer alignment and an ldm that is a multiple of 16 bytes. A fragment holds its 256 elements spread
//   over the lanes (element e = i * 32 + lane, a legal mapping: CUDA leaves it unspecified), and the MMA is computed
//   once per warp, in float.
// - The PTX instructions of the pipelined GEMM (csrc/cuda/tensor_core_ptx.cuh), from the PTX ISA's semantics:
//   - cp.async 16-byte copies with zero-fill, commit_group and wait_group, per thread. Under the ascending and
//     interleaved schedules a copy lands when it is issued; under descending and random it lands only when a
//     wait_group releases its group, the latest moment PTX allows. A stage read before its wait reads poison or stale
//     data in the one, a stage overwritten while other threads still read it shows in the other, and the schedules
//     must agree bit for bit.
//   - ldmatrix .x4 (.b16), plain and .trans: a warp collective in which each lane gives the address of one 16-byte
//     row.
//   - mma.sync m16n8k16 .row.col with float16 or bfloat16 inputs and float accumulation, and m16n8k8 with TF32
//     inputs: warp collectives over the fragments as the PTX ISA lays them out, computed once per warp in float (a
//     product of two TF32 values is exact in float). A TF32 operand with any of its 13 low bits set fails: the kernel
//     must round it with cvt.rna.tf32.f32, which is emulated too.
// The real cuda_fp16.h / cuda_bf16.h give the 16-bit types and their host conversions; cuda_runtime_api.h gives types
// only (no CUDA runtime call is made).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <source_location>
#include <tuple>
#include <utility>

// The CUDA headers define these as attributes for the host compiler; in the shim they mean plain C++.
#undef __global__
#undef __device__
#undef __host__
#undef __shared__
#undef __forceinline__
#undef __launch_bounds__
#undef __align__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static thread_local
#define __syncthreads() ::cuda_sim::sync_threads(__FILE__, __LINE__)
#define threadIdx (::cuda_sim::thread_index)
#define blockIdx (::cuda_sim::block_index)
#define blockDim (::cuda_sim::block_dim)
#define gridDim (::cuda_sim::grid_dim)

namespace cuda_sim {

struct Index3 {
  unsigned int x = 0, y = 0, z = 0;
};

// The running fiber's thread and block, and the launch's dimensions (1-d grids and blocks).
extern Index3 thread_index, block_index, block_dim, grid_dim;

void sync_threads(const char* file, int line);
unsigned char* dynamic_shared();

// Runs `body` as every thread of every block of the grid (capped, see configure); throws std::runtime_error on a
// barrier or warp-collective error.
void run_grid(unsigned int blocks, unsigned int threads, size_t shared_bytes, const std::function<void()>& body);

template <typename Kernel, typename... Args>
void launch(Kernel kernel, unsigned int blocks, unsigned int threads, size_t shared_bytes, Args&&... args) {
  auto arguments = std::make_tuple(std::decay_t<Args>(std::forward<Args>(args))...);  // by value, as CUDA passes them
  run_grid(blocks, threads, shared_bytes, [&] { std::apply(kernel, arguments); });
}

// A warp-collective call: each lane of the warp leaves its arguments here and waits; once all 32 lanes wait at the
// same call, `execute` runs once with every lane's record (lane order), then the lanes go on.
struct WarpCall {
  void (*execute)(WarpCall* const* lanes);
  const void* fragment;  // this lane's fragment (read or written by execute)
  const void* second;    // mma: b
  const void* third;     // mma: c
  void* result;          // mma: d; store: the memory
  const void* memory;    // load and store: the memory, which must be the same for every lane
  unsigned int ldm;
  int layout;
  const char* file;
  unsigned int line;
};
void warp_collective(WarpCall& call);

// The checks every load/store makes: 256-bit aligned pointer, ldm a multiple of 16 bytes. Throws on failure.
void check_matrix_pointer(const void* pointer, unsigned int ldm, size_t element_bytes, const char* what,
                          const std::source_location& where);

// cp.async.cg.shared.global [shared], [global], 16, (valid ? 16 : 0): copies 16 bytes, or writes 16 zero bytes
// without reading `global`. Both addresses must be 16-byte aligned.
void async_copy_16(void* shared, const void* global, bool valid, const std::source_location& where);
// cp.async.commit_group: the copies issued since the last commit form a group.
void async_commit();
// cp.async.wait_group pending: waits until at most `pending` of this thread's committed groups are incomplete.
void async_wait(int pending);

// ldmatrix.sync.aligned.m8n8.x4.shared.b16: lane l gives `row`, the address of row l % 8 of matrix l / 8 (16 bytes,
// 16-byte aligned); register i of lane l receives elements 2 (l % 4) and 2 (l % 4) + 1 of row l / 4 of matrix i.
void ldmatrix_x4(uint32_t* registers, const void* row, const std::source_location& where);
// ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16: the same rows, each matrix transposed: register i of lane l receives
// the elements at rows 2 (l % 4) and 2 (l % 4) + 1 (low half first) of column l / 4 of matrix i.
void ldmatrix_x4_trans(uint32_t* registers, const void* row, const std::source_location& where);

namespace detail {
inline float half_bits_to_float(uint16_t bits, bool bfloat16) {
  if (bfloat16) {
    const uint32_t widened = uint32_t{bits} << 16;  // bfloat16 is the top half of a float32
    float value;
    std::memcpy(&value, &widened, sizeof(value));
    return value;
  }
  __half_raw raw;
  raw.x = bits;
  return __half2float(__half(raw));
}

// The part every mma shares: gathers C from the lanes (C and D hold row g + 8 (i / 2), column 2 t + i % 2, with
// g = lane / 4 and t = lane % 4), computes D = A B + C in float, k ascending, and gives each lane its D.
template <int kK>
void multiply_accumulate(WarpCall* const* lanes, const float (&a)[16][kK], const float (&b)[kK][8]) {
  float c[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const auto* c_values = static_cast<const float*>(lanes[lane]->third);
    for (int i = 0; i < 4; ++i) c[lane / 4 + 8 * (i / 2)][2 * (lane % 4) + i % 2] = c_values[i];
  }
  for (int lane = 0; lane < 32; ++lane) {
    auto* d = static_cast<float*>(lanes[lane]->result);
    for (int i = 0; i < 4; ++i) {
      const int row = lane / 4 + 8 * (i / 2), col = 2 * (lane % 4) + i % 2;
      float sum = c[row][col];
      for (int k = 0; k < kK; ++k) sum += a[row][k] * b[k][col];
      d[i] = sum;
    }
  }
}

// D = A B + C for mma.m16n8k16 over the warp's fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16"): A register
// r of a lane holds row g + 8 (r % 2), columns 2 t + 8 (r / 2) and the next; B register r holds rows 2 t + 8 r and
// the next of column g.
template <bool kBFloat16>
void execute_mma_m16n8k16(WarpCall* const* lanes) {
  float a[16][16], b[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    const auto* a_registers = static_cast<const uint32_t*>(lanes[lane]->fragment);
    const auto* b_registers = static_cast<const uint32_t*>(lanes[lane]->second);
    for (int r = 0; r < 4; ++r) {
      for (int half = 0; half < 2; ++half) {
        a[g + 8 * (r % 2)][2 * t + 8 * (r / 2) + half] =
            half_bits_to_float(static_cast<uint16_t>(a_registers[r] >> (16 * half)), kBFloat16);
      }
    }
    for (int r = 0; r < 2; ++r) {
      for (int half = 0; half < 2; ++half) {
        b[2 * t + 8 * r + half][g] = half_bits_to_float(static_cast<uint16_t>(b_registers[r] >> (16 * half)),
                                                        kBFloat16);
      }
    }
  }
  multiply_accumulate(lanes, a, b);
}
}  // namespace detail

// One mma.sync as a warp collective that `execute` computes once all 32 lanes have called it (d may alias c).
inline void mma_collective(void (*execute)(WarpCall* const* lanes), float* d, const uint32_t* a, const uint32_t* b,
                           const float* c, const std::source_location& where) {
  WarpCall call{};
  call.execute = execute;
  call.fragment = a;
  call.second = b;
  call.third = c;
  call.result = d;
  call.file = where.file_name();
  call.line = where.line();
  warp_collective(call);
}

// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32 d, a, b, c (d may alias c).
template <bool kBFloat16>
void mma_m16n8k16(float* d, const uint32_t* a, const uint32_t* b, const float* c,
                  std::source_location where = std::source_location::current()) {
  mma_collective(&detail::execute_mma_m16n8k16<kBFloat16>, d, a, b, c, where);
}

// cvt.rna.tf32.f32 on the bits of a float32: rounded to nearest on the 10 mantissa bits TF32 keeps, ties away from
// zero, the 13 low bits cleared; a NaN stays a NaN, and a value past the largest TF32 one becomes an infinity.
uint32_t cvt_rna_tf32(uint32_t bits);

// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 d, a, b, c (d may alias c): A register r of lane l holds row
// l / 4 + 8 (r % 2), column l % 4 + 4 (r / 2); B register r holds row l % 4 + 4 r of column l / 4; C and D as for
// m16n8k16. Every operand must be TF32 (see cvt_rna_tf32).
void mma_m16n8k8_tf32(float* d, const uint32_t* a, const uint32_t* b, const float* c,
                      const std::source_location& where);

}  // namespace cuda_sim

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

constexpr int kLanes = 32;

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "the shim implements the 16x16x16 shape only");
  static constexpr int num_elements = 16 * 16 / kLanes;
  T x[num_elements];
};

namespace detail {
// Lane `lane`'s element i is element i * 32 + lane of the row-major 16 x 16 matrix.
inline int element_of(int lane, int i) { return i * kLanes + lane; }

inline float to_float(float v) { return v; }
inline float to_float(__half v) { return __half2float(v); }
inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename Fragment, typename T, bool kColumnMajor>
void execute_load(cuda_sim::WarpCall* const* lanes) {
  const T* memory = static_cast<const T*>(lanes[0]->memory);
  for (int lane = 0; lane < kLanes; ++lane) {
    auto* frag = static_cast<Fragment*>(const_cast<void*>(lanes[lane]->fragment));
    for (int i = 0; i < Fragment::num_elements; ++i) {
      const int e = element_of(lane, i), row = e / 16, col = e % 16;
      frag->x[i] = kColumnMajor ? memory[col * lanes[0]->ldm + row] : memory[row * lanes[0]->ldm + col];
    }
  }
}

template <typename Fragment>
void execute_store(cuda_sim::WarpCall* const* lanes) {
  float* memory = static_cast<float*>(lanes[0]->result);
  const bool column_major = lanes[0]->layout == mem_col_major;
  for (int lane = 0; lane < kLanes; ++lane) {
    const auto* frag = static_cast<const Fragment*>(lanes[lane]->fragment);
    for (int i = 0; i < Fragment::num_elements; ++i) {
      const int e = element_of(lane, i), row = e / 16, col = e % 16;
      (column_major ? memory[col * lanes[0]->ldm + row] : memory[row * lanes[0]->ldm + col]) = frag->x[i];
    }
  }
}

// D = A B + C over the whole warp's fragments: gathered, computed once in float, scattered back.
template <typename FragA, typename FragB, typename FragC, typename FragD>
void execute_mma(cuda_sim::WarpCall* const* lanes) {
  float a[256], b[256], c[256];
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int i = 0; i < FragA::num_elements; ++i) {
      const int e = element_of(lane, i);
      a[e] = to_float(static_cast<const FragA*>(lanes[lane]->fragment)->x[i]);
      b[e] = to_float(static_cast<const FragB*>(lanes[lane]->second)->x[i]);
      c[e] = static_cast<const FragC*>(lanes[lane]->third)->x[i];
    }
  }
  float d[256];
  for (int row = 0; row < 16; ++row) {
    for (int col = 0; col < 16; ++col) {
      float sum = c[row * 16 + col];
      for (int k = 0; k < 16; ++k) sum += a[row * 16 + k] * b[k * 16 + col];
      d[row * 16 + col] = sum;
    }
  }
  for (int lane = 0; lane < kLanes; ++lane) {
    auto* frag = static_cast<FragD*>(lanes[lane]->result);
    for (int i = 0; i < FragD::num_elements; ++i) frag->x[i] = d[element_of(lane, i)];
  }
}

inline cuda_sim::WarpCall warp_call(const std::source_location& where) {
  cuda_sim::WarpCall call{};
  call.file = where.file_name();
  call.line = where.line();
  return call;
}
}  // namespace detail

template <typename Use, typename T, typename Layout>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout>& frag, T value) {
  for (auto& element : frag.x) element = value;
}

template <typename Use, typename T, typename Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& frag, const T* memory, unsigned int ldm,
                      std::source_location where = std::source_location::current()) {
  static_assert(!std::is_same_v<Use, accumulator>, "the shim loads matrix_a and matrix_b fragments only");
  cuda_sim::check_matrix_pointer(memory, ldm, sizeof(T), "wmma::load_matrix_sync", where);
  auto call = detail::warp_call(where);
  call.execute = &detail::execute_load<fragment<Use, 16, 16, 16, T, Layout>, T, std::is_same_v<Layout, col_major>>;
  call.fragment = &frag;
  call.memory = memory;
  call.ldm = ldm;
  cuda_sim::warp_collective(call);
}

template <typename TA, typename LA, typename TB, typename LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, TA, LA>& a,
              const fragment<matrix_b, 16, 16, 16, TB, LB>& b, const fragment<accumulator, 16, 16, 16, float>& c,
              std::source_location where = std::source_location::current()) {
  static_assert(std::is_same_v<LA, row_major> && std::is_same_v<LB, row_major>,
                "the shim's MMA takes fragments loaded row-major");
  auto call = detail::warp_call(where);
  using Acc = fragment<accumulator, 16, 16, 16, float>;
  call.execute = &detail::execute_mma<fragment<matrix_a, 16, 16, 16, TA, LA>, fragment<matrix_b, 16, 16, 16, TB, LB>,
                                      Acc, Acc>;
  call.fragment = &a;
  call.second = &b;
  call.third = &c;
  call.result = &d;
  cuda_sim::warp_collective(call);
}

inline void store_matrix_sync(float* memory, const fragment<accumulator, 16, 16, 16, float>& frag, unsigned int ldm,
                              layout_t layout, std::source_location where = std::source_location::current()) {
  cuda_sim::check_matrix_pointer(memory, ldm, sizeof(float), "wmma::store_matrix_sync", where);
  auto call = detail::warp_call(where);
  call.execute = &detail::execute_store<fragment<accumulator, 16, 16, 16, float>>;
  call.fragment = &frag;
  call.result = memory;
  call.memory = memory;
  call.ldm = ldm;
  call.layout = layout;
  cuda_sim::warp_collective(call);
}

}  // namespace nvcuda::wmma
