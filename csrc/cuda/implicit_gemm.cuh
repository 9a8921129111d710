// The implicit GEMM all three ops share: C[m, n] = sum_k A[m, k] * B[k, n] over 64 x 64 tiles of C, where a Problem
// gathers A and B element by element straight from the input tensors (never an im2col buffer) and stores C.
// Layout: whatever the Problem reads; A and B tiles are staged in shared memory. Padding: resolved in the gathers.
// float16/bfloat16 run on tensor cores (WMMA 16x16x16, float32 accumulation); float32/float64 use FMA tiles.
//
// A Problem (cuda/problems.h) provides:
//   scalar_t, acc_t; Tile (derived from GemmTile), ARow, BCol
//   int64_t items() const                      tiles over groups and splits (or phases); host and device
//   Tile tile(int64_t item) const
//   ARow a_row(const Tile&, int64_t m) const   what a row of A needs, computed once per block and row
//   acc_t a(const Tile&, const ARow&, int64_t k) const
//   BCol b_col(const Tile&, int64_t n) const
//   acc_t b(const Tile&, const BCol&, int64_t k) const
//   void store(const Tile&, int64_t m, int64_t n, acc_t value) const
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#ifndef FASTPAD_CUDA_SIM
#include <mma.h>  // the shim brings its own nvcuda::wmma
#endif

#include "cuda/launch.cuh"
#include "cuda/problems.h"

namespace fastpad::cuda {

// Stages tile_k columns of A (kTileM rows) and rows of B (kTileN columns) from k0. Each thread keeps one row of A
// and one column of B (thread % 64) and loads k = k0 + thread / 64 + 4 j, so a_row/b_col are computed once per tile.
template <int tile_k, typename Problem, typename StoreA, typename StoreB>
__device__ __forceinline__ void stage_tiles(const Problem& p, const typename Problem::Tile& t,
                                            const typename Problem::ARow& row, bool row_ok,
                                            const typename Problem::BCol& col, bool col_ok, int64_t k0,
                                            StoreA store_a, StoreB store_b) {
  using acc_t = typename Problem::acc_t;
  constexpr int kLoadLanes = kThreads / kTileM;  // 4 k-columns loaded at once
  const int lane = threadIdx.x % kTileM, k_lane = threadIdx.x / kTileM;
#pragma unroll
  for (int j = 0; j < tile_k / kLoadLanes; ++j) {
    const int kk = k_lane + kLoadLanes * j;
    const int64_t k = k0 + kk;
    const bool k_ok = k < t.k_end;
    store_a(lane, kk, row_ok && k_ok ? p.a(t, row, k) : acc_t(0));
    store_b(kk, lane, col_ok && k_ok ? p.b(t, col, k) : acc_t(0));
  }
}

// float32 / float64: each thread accumulates a 4 x 4 block of C (rows ty + 16 i, columns tx + 16 j).
template <typename Problem>
__global__ void __launch_bounds__(kThreads, sizeof(typename Problem::acc_t) == 8 ? 1 : kMinBlocksPerSm)
    fma_gemm_kernel(const Problem p) {  // float64: 16 double accumulators, 2 registers each
  using acc_t = typename Problem::acc_t;
  constexpr int kTileK = kFmaTileK;
  __shared__ acc_t a_tile[kTileK][kTileM];
  __shared__ acc_t b_tile[kTileK][kTileN];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16, lane = threadIdx.x % kTileM;
  const int64_t items = p.items();
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const auto t = p.tile(item);
    if (t.m0 >= t.m_size) continue;  // the same for the whole block
    const bool row_ok = t.m0 + lane < t.m_size, col_ok = t.n0 + lane < t.n_size;
    const auto row = p.a_row(t, row_ok ? t.m0 + lane : t.m0);
    const auto col = p.b_col(t, col_ok ? t.n0 + lane : t.n0);
    acc_t sum[4][4] = {};
    for (int64_t k0 = t.k_begin; k0 < t.k_end; k0 += kTileK) {
      stage_tiles<kTileK>(
          p, t, row, row_ok, col, col_ok, k0, [&](int m, int k, acc_t v) { a_tile[k][m] = v; },
          [&](int k, int n, acc_t v) { b_tile[k][n] = v; });
      __syncthreads();
#pragma unroll
      for (int kk = 0; kk < kTileK; ++kk) {
        acc_t a[4], b[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          a[i] = a_tile[kk][ty + 16 * i];
          b[i] = b_tile[kk][tx + 16 * i];
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
#pragma unroll
          for (int j = 0; j < 4; ++j) sum[i][j] += a[i] * b[j];
        }
      }
      __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t m = t.m0 + ty + 16 * i, n = t.n0 + tx + 16 * j;
        if (m < t.m_size && n < t.n_size) p.store(t, m, n, sum[i][j]);
      }
    }
  }
}

template <typename scalar_t>
struct TensorCoreType;
template <>
struct TensorCoreType<c10::Half> {
  using type = __half;
  static __device__ __forceinline__ type from_float(float v) { return __float2half_rn(v); }
};
template <>
struct TensorCoreType<c10::BFloat16> {
  using type = __nv_bfloat16;
  static __device__ __forceinline__ type from_float(float v) { return __float2bfloat16_rn(v); }
};

// float16 / bfloat16: 8 warps, each owning a 16 x 32 block of the 64 x 64 tile (two 16 x 16 accumulators). A and B are
// staged in 16-bit (exact: they come from 16-bit tensors), C goes through shared memory to the Problem's store.
template <typename Problem>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm) tensor_core_gemm_kernel(const Problem p) {
  namespace wmma = nvcuda::wmma;
  using Converter = TensorCoreType<typename Problem::scalar_t>;
  using half_t = typename Converter::type;
  constexpr int kTileK = kTensorCoreTileK;
  constexpr int kPad = 8;  // keeps rows 16-byte aligned and spreads them over the banks
  constexpr int kLdA = kTileK + kPad, kLdB = kTileN + kPad, kLdC = kTileN + 4;
  __shared__ __align__(32) half_t a_tile[kTileM][kLdA];
  __shared__ __align__(32) half_t b_tile[kTileK][kLdB];
  __shared__ __align__(32) float c_tile[kTileM][kLdC];
  const int warp = threadIdx.x / 32, warp_m = warp % 4, warp_n = warp / 4, lane = threadIdx.x % kTileM;
  const int64_t items = p.items();
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const auto t = p.tile(item);
    if (t.m0 >= t.m_size) continue;  // the same for the whole block
    const bool row_ok = t.m0 + lane < t.m_size, col_ok = t.n0 + lane < t.n_size;
    const auto row = p.a_row(t, row_ok ? t.m0 + lane : t.m0);
    const auto col = p.b_col(t, col_ok ? t.n0 + lane : t.n0);
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2];
    wmma::fill_fragment(acc[0], 0.0f);
    wmma::fill_fragment(acc[1], 0.0f);
    for (int64_t k0 = t.k_begin; k0 < t.k_end; k0 += kTileK) {
      stage_tiles<kTileK>(
          p, t, row, row_ok, col, col_ok, k0, [&](int m, int k, float v) { a_tile[m][k] = Converter::from_float(v); },
          [&](int k, int n, float v) { b_tile[k][n] = Converter::from_float(v); });
      __syncthreads();
#pragma unroll
      for (int kk = 0; kk < kTileK; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, half_t, wmma::row_major> a_frag;
        wmma::load_matrix_sync(a_frag, &a_tile[warp_m * 16][kk], kLdA);
#pragma unroll
        for (int f = 0; f < 2; ++f) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, half_t, wmma::row_major> b_frag;
          wmma::load_matrix_sync(b_frag, &b_tile[kk][warp_n * 32 + f * 16], kLdB);
          wmma::mma_sync(acc[f], a_frag, b_frag, acc[f]);
        }
      }
      __syncthreads();
    }
#pragma unroll
    for (int f = 0; f < 2; ++f) {
      wmma::store_matrix_sync(&c_tile[warp_m * 16][warp_n * 32 + f * 16], acc[f], kLdC, wmma::mem_row_major);
    }
    __syncthreads();
    for (int e = threadIdx.x; e < kTileM * kTileN; e += kThreads) {
      const int i = e / kTileN, j = e % kTileN;
      const int64_t m = t.m0 + i, n = t.n0 + j;
      if (m < t.m_size && n < t.n_size) p.store(t, m, n, c_tile[i][j]);
    }
    __syncthreads();  // c_tile is rewritten by the next item
  }
}

// Runs the Problem's GEMM on `stream`: tensor cores for 16-bit types, FMA tiles otherwise.
template <typename Problem>
void run_implicit_gemm(cudaStream_t stream, const Problem& p) {
  const int64_t items = p.items();
  if (items <= 0) return;
  if constexpr (is_16_bit<typename Problem::scalar_t>) {
    launch(stream, tensor_core_gemm_kernel<Problem>, grid_for(items), 0, p);
  } else {
    launch(stream, fma_gemm_kernel<Problem>, grid_for(items), 0, p);
  }
}

}  // namespace fastpad::cuda
