// The pipelined implicit GEMM of conv for bfloat16/float16 tensors, and float32 ones on TF32 tensor cores, whose
// channels are contiguous (channels_last), on sm_80 and later: C[m, n] = sum_k A[m, k] B[k, n] per group,
// M = batch * output positions, N = Cg_out, K = taps * Cg_in in tap-major order (k = tap * Cg_in + c), so that 16 bytes
// of consecutive k (8 16-bit or 4 float32 elements) are consecutive channels of one input position: one 16-byte
// cp.async.
// - A (the implicitly padded input) and B (the weight, reordered by the binding to [C_out][taps][Cg_in]) are copied
//   into shared memory by cp.async, kPipelineStages stages deep: the copies of k-tile kt + stages - 1 are in flight
//   while the tensor cores work on k-tile kt.
// - Padding costs nothing: a 16-byte vector whose tap lands in zero padding (or past the GEMM's edges) is a cp.async
//   with source size 0, which writes zeros. reflect/replicate/circular taps copy from the position they resolve to.
// - Each warp multiplies its part of the tile with ldmatrix + mma.sync, accumulating in float32: m16n8k16 for 16-bit
//   elements; m16n8k8 for TF32, whose fragments ldmatrix loads just the same when each 32-bit element is read as a
//   pair of 16-bit ones, rounded to TF32 (cvt.rna) once loaded. A stage row is 64 bytes of k either way (32 16-bit or
//   16 float32 elements), and one mma step 32 bytes.
// Layout: x with channel stride 1 and 16-byte aligned vectors (channel_vectors in conv_params.h); y any strides.
// Index math from geometry.h; the tile shape is chosen by pipelined_tile() (cuda/problems.h) from the problem's size.
// conv_transpose runs each stride phase as such a conv (conv_transpose.cu); conv_weight_grad has its own kernel on
// the same pipeline, at the end of this header.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cuda/indexing.h"
#include "cuda/launch.cuh"
#include "cuda/tensor_core_ptx.cuh"

namespace fastpad::cuda {

constexpr int kPipelineStages = 4;
constexpr int kPipelineRowBytes = 64;   // k per stage, in bytes
constexpr int kPipelineStepBytes = 32;  // k per mma step: m16n8k16 (16-bit) or m16n8k8 (TF32)
constexpr int kPipelineVectorsPerRow = kPipelineRowBytes / kVectorBytes;
constexpr int kPipelinePitchBytes = kPipelineRowBytes + kVectorBytes;  // 80-byte rows: the 8 rows of an ldmatrix
                                                                       // hit 8 different groups of 4 banks

// The element types the pipelined GEMM multiplies: bfloat16 and float16, and float32 as TF32.
template <typename scalar_t>
constexpr bool kPipelinedType = is_16_bit<scalar_t> || std::is_same_v<scalar_t, float>;

// Shared memory of one block: every stage holds tile_m rows of A and tile_n rows of B, kPipelineRowBytes of k each.
constexpr size_t pipelined_shared_bytes(int tile_m, int tile_n) {
  return size_t(kPipelineStages) * (tile_m + tile_n) * kPipelinePitchBytes;
}

// What the tensor cores take of a fragment ldmatrix loaded: 16-bit elements as they are, float32 rounded to TF32.
template <typename scalar_t, int kRegisters>
__device__ __forceinline__ void tensor_core_operands(uint32_t (&fragment)[kRegisters]) {
  if constexpr (std::is_same_v<scalar_t, float>) {
#pragma unroll
    for (int r = 0; r < kRegisters; ++r) round_to_tf32(fragment[r]);
  }
}

// One mma step (kPipelineStepBytes of k) of a 16 x 8 tile of C.
template <typename scalar_t>
__device__ __forceinline__ void mma_step(float (&acc)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  if constexpr (std::is_same_v<scalar_t, float>) {
    mma_m16n8k8_tf32(acc, a, b);
  } else {
    mma_m16n8k16<std::is_same_v<scalar_t, c10::BFloat16>>(acc, a, b);
  }
}

// The multistage main loop of the pipelined kernels, every cp.async wait and barrier of it: while k-tile kt is
// multiplied (multiply(stage)), the copies of k-tile kt + kPipelineStages - 1 are in flight (copy(stage, k_tile)
// issues them). Ends with every copy landed and every warp done with every stage.
template <typename Copy, typename Multiply>
__device__ __forceinline__ void run_pipeline(int64_t k_tiles, Copy&& copy, Multiply&& multiply) {
  for (int stage = 0; stage < kPipelineStages - 1; ++stage) {
    if (stage < k_tiles) copy(stage, int64_t{stage});
    cp_async_commit();  // one group per stage, empty ones included, so the wait below counts k-tiles
  }
  for (int64_t kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<kPipelineStages - 2>();  // this thread's copies of k-tile kt have landed ...
    __syncthreads();                       // ... and everyone's; everyone is done with k-tile kt - 1's stage
    const int64_t next = kt + kPipelineStages - 1;
    if (next < k_tiles) copy(int(next % kPipelineStages), next);
    cp_async_commit();
    multiply(int(kt % kPipelineStages));
  }
  cp_async_wait<0>();
  __syncthreads();  // the next item's first copies overwrite stages other warps may still read
}

// Where one thread's 16-byte vector of the current k-tile lies: channel c of tap (r[0], r[1], r[2]) and its k.
struct TapCursor {
  int64_t k;
  int64_t c;
  int64_t r[kMaxSpatial];

  // Moves on by `step` along k (tap-major, channel-minor). Returns whether it reached another tap.
  C10_HOST_DEVICE bool advance(const ConvGeometry& g, int64_t channels, int64_t step) {
    k += step;
    c += step;
    const bool new_tap = c >= channels;
    while (c >= channels) {
      c -= channels;
      for (int d = kMaxSpatial - 1; d >= 0; --d) {  // the next tap, the last dimension fastest
        if (++r[d] < g.kernel[d] || d == 0) break;
        r[d] = 0;
      }
    }
    return new_tap;
  }
};

// Blocks per SM the conv kernel's registers are sized for: two (128 registers) up to 128 x 64 tiles, whose 32
// accumulators per thread leave room for the copies' addresses; one for 128 x 128 (64 accumulators per thread).
constexpr int pipelined_conv_min_blocks(int tile_m, int tile_n) { return tile_m * tile_n <= 128 * 64 ? 2 : 1; }

template <typename scalar_t, int kTileM, int kTileN, int kWarpsM>
__global__ void __launch_bounds__(kThreads, pipelined_conv_min_blocks(kTileM, kTileN))
    pipelined_conv_kernel(const ConvGeometry g, const scalar_t* x, const Strides xs, const scalar_t* w,
                          const scalar_t* bias, scalar_t* y, const Strides ys) {
  constexpr int kWarpsN = kThreads / 32 / kWarpsM;
  constexpr int kWarpM = kTileM / kWarpsM, kWarpN = kTileN / kWarpsN;  // each warp's part of the tile
  constexpr int kFragmentsM = kWarpM / 16, kFragmentsN = kWarpN / 8;   // its mma tiles (16 x 8)
  constexpr int kRowsPerPass = kThreads / kPipelineVectorsPerRow;      // rows one pass of copies covers
  constexpr int kARows = kTileM / kRowsPerPass, kBRows = kTileN / kRowsPerPass;  // rows each thread copies
  static_assert(kFragmentsN % 2 == 0 && kARows >= 1 && kBRows >= 1, "a tile shape the loops do not cover");
  static_assert(kPipelinedType<scalar_t>, "bfloat16, float16 or float32 (TF32)");
  constexpr int kVector = kVectorBytes / sizeof(scalar_t);        // elements per 16-byte copy
  constexpr int kTileK = kPipelineRowBytes / sizeof(scalar_t);    // k per stage
  constexpr int kStepK = kPipelineStepBytes / sizeof(scalar_t);   // k per mma step
  constexpr int kPitch = kPipelinePitchBytes / sizeof(scalar_t);  // elements per shared row

  auto* shared = reinterpret_cast<scalar_t*>(dynamic_shared_memory());
  constexpr int kStageElements = (kTileM + kTileN) * kPitch;
  const auto a_tile = [&](int stage, int row) { return shared + stage * kStageElements + row * kPitch; };
  const auto b_tile = [&](int stage, int row) { return a_tile(stage, kTileM + row); };

  const int64_t m_size = g.batch * g.conv_out_volume();
  const int64_t channels = g.conv_in_channels_per_group(), n_size = g.conv_out_channels_per_group();
  const int64_t k_size = channels * g.kernel_volume();
  const int64_t tiles_m = (m_size + kTileM - 1) / kTileM, tiles_n = (n_size + kTileN - 1) / kTileN;
  const int64_t items = tiles_m * tiles_n * g.groups;
  const int64_t k_tiles = (k_size + kTileK - 1) / kTileK;
  const int vector = threadIdx.x % kPipelineVectorsPerRow, copy_row = threadIdx.x / kPipelineVectorsPerRow;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warp_row = warp % kWarpsM * kWarpM, warp_col = warp / kWarpsM * kWarpN;

  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int64_t m0 = item % tiles_m * kTileM, n0 = item / tiles_m % tiles_n * kTileN;
    const int64_t group = item / (tiles_m * tiles_n);

    // The rows of A this thread copies: their image and the corner their tap 0 reads (o * stride - pad_lo).
    bool a_valid[kARows];
    int64_t a_base[kARows], a_corner[kARows][kMaxSpatial];
    for (int i = 0; i < kARows; ++i) {
      const int64_t m = m0 + copy_row + i * kRowsPerPass;
      int64_t pos[kMaxSpatial];
      a_valid[i] = m < m_size;
      const int64_t image = unflatten(a_valid[i] ? m : 0, g.conv_out_sizes, pos);
      a_base[i] = image * xs.batch + group * channels;  // channel stride 1
      for (int d = 0; d < kMaxSpatial; ++d) a_corner[i][d] = g.tap_position(d, pos[d], 0);
    }
    const scalar_t* b_rows[kBRows];  // nullptr past N
    for (int i = 0; i < kBRows; ++i) {
      const int64_t n = n0 + copy_row + i * kRowsPerPass;
      b_rows[i] = n < n_size ? w + (group * n_size + n) * k_size : nullptr;
    }

    TapCursor cursor{0, 0, {0, 0, 0}};
    cursor.advance(g, channels, vector * kVector);
    // Where each A row reads the cursor's tap: a_tap[i] + channel, or nowhere (nullptr: padding or past M).
    // Resolved again only when the cursor reaches another tap, which with Cg_in >= 2 kTileK is one k-tile in
    // Cg_in / kTileK or fewer: the other k-tiles' copies cost an add each.
    const scalar_t* a_tap[kARows];
    const auto resolve_tap = [&] {
      for (int i = 0; i < kARows; ++i) {
        bool inside = a_valid[i];
        int64_t offset = a_base[i];
        for (int d = 0; d < kMaxSpatial; ++d) {
          const int64_t source =
              source_index(a_corner[i][d] + cursor.r[d] * g.dilation[d], g.conv_in_sizes[d], g.mode);
          inside = inside && source >= 0;
          offset += source * xs.spatial[d];
        }
        a_tap[i] = inside ? x + offset : nullptr;
      }
    };
    resolve_tap();
    // Issues the copies of the k-tile the cursor is at (the next one: k-tiles are copied in order) into `stage`, then
    // moves the cursor on.
    const auto copy_stage = [&](int stage, int64_t) {
      const bool k_valid = cursor.k < k_size;
      for (int i = 0; i < kARows; ++i) {
        const bool valid = a_tap[i] != nullptr && k_valid;
        cp_async_zfill_16(a_tile(stage, copy_row + i * kRowsPerPass) + vector * kVector,
                          valid ? a_tap[i] + cursor.c : x, valid);
      }
      for (int i = 0; i < kBRows; ++i) {
        const bool valid = b_rows[i] != nullptr && k_valid;
        cp_async_zfill_16(b_tile(stage, copy_row + i * kRowsPerPass) + vector * kVector,
                          valid ? b_rows[i] + cursor.k : w, valid);
      }
      if (cursor.advance(g, channels, kTileK)) resolve_tap();
    };

    float acc[kFragmentsM][kFragmentsN][4] = {};
    run_pipeline(k_tiles, copy_stage, [&](int stage) {
#pragma unroll
      for (int kk = 0; kk < kTileK; kk += kStepK) {
        uint32_t a[kFragmentsM][4], b[kFragmentsN][2];
#pragma unroll
        for (int f = 0; f < kFragmentsM; ++f) {  // rows 0-15 at kk (lanes 0-15) and 16 bytes on (lanes 16-31)
          ldmatrix_x4(a[f], a_tile(stage, warp_row + f * 16 + lane % 16) + kk + lane / 16 * kVector);
          tensor_core_operands<scalar_t>(a[f]);
        }
#pragma unroll
        for (int f = 0; f < kFragmentsN; f += 2) {  // columns f*8 .. f*8 + 15: the step's first 16 bytes, then its last
          uint32_t r[4];
          ldmatrix_x4(r, b_tile(stage, warp_col + f * 8 + lane % 8 + lane / 16 * 8) + kk + lane / 8 % 2 * kVector);
          tensor_core_operands<scalar_t>(r);
          b[f][0] = r[0];
          b[f][1] = r[1];
          b[f + 1][0] = r[2];
          b[f + 1][1] = r[3];
        }
#pragma unroll
        for (int i = 0; i < kFragmentsM; ++i) {
#pragma unroll
          for (int j = 0; j < kFragmentsN; ++j) mma_step<scalar_t>(acc[i][j], a[i], b[j]);
        }
      }
    });

    // acc[i][j][e] is C at row warp_row + 16 i + lane / 4 + 8 (e / 2), column warp_col + 8 j + 2 (lane % 4) + e % 2.
#pragma unroll
    for (int i = 0; i < kFragmentsM; ++i) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int64_t m = m0 + warp_row + i * 16 + lane / 4 + half * 8;
        if (m >= m_size) continue;
        int64_t pos[kMaxSpatial];
        const int64_t image = unflatten(m, g.conv_out_sizes, pos);
        const int64_t row_offset = image * ys.batch + ys.position(pos);
#pragma unroll
        for (int j = 0; j < kFragmentsN; ++j) {
          // This lane's two adjacent columns: one store (4 or 8 bytes) where both exist and y's channels are
          // contiguous and the pair aligned, else element by element.
          const int64_t n = n0 + warp_col + j * 8 + lane % 4 * 2, channel = group * n_size + n;
          if (n >= n_size) continue;
          scalar_t pair[2];
          for (int e = 0; e < 2; ++e) {
            const float bias_value = bias != nullptr && n + e < n_size ? load<float>(bias, channel + e) : 0.0f;
            pair[e] = static_cast<scalar_t>(acc[i][j][half * 2 + e] + bias_value);
          }
          scalar_t* out = y + row_offset + channel * ys.channel;
          if (n + 1 < n_size && ys.channel == 1 && reinterpret_cast<uintptr_t>(out) % sizeof(pair) == 0) {
            std::conditional_t<sizeof(pair) == 4, uint32_t, uint64_t> bits;
            memcpy(&bits, pair, sizeof(bits));
            *reinterpret_cast<decltype(bits)*>(out) = bits;
          } else {
            out[0] = pair[0];
            if (n + 1 < n_size) out[ys.channel] = pair[1];
          }
        }
      }
    }
  }
}

template <typename scalar_t, int kTileM, int kTileN, int kWarpsM>
void launch_pipelined_conv(cudaStream_t stream, const ConvGeometry& g, const scalar_t* x, const Strides& xs,
                           const scalar_t* w, const scalar_t* bias, scalar_t* y, const Strides& ys) {
  const int64_t tiles = (g.batch * g.conv_out_volume() + kTileM - 1) / kTileM *
                        ((g.conv_out_channels_per_group() + kTileN - 1) / kTileN) * g.groups;
  launch(stream, pipelined_conv_kernel<scalar_t, kTileM, kTileN, kWarpsM>, grid_for(tiles),
         pipelined_shared_bytes(kTileM, kTileN), g, x, xs, w, bias, y, ys);
}

// Runs conv on the pipelined GEMM; w is the weight reordered to [C_out][taps][Cg_in] (contiguous).
template <typename scalar_t>
void run_pipelined_conv(cudaStream_t stream, const ConvGeometry& g, const scalar_t* x, const Strides& xs,
                        const scalar_t* w, const scalar_t* bias, scalar_t* y, const Strides& ys) {
  const PipelinedTile tile = pipelined_tile(g);
  // Warps (rows x columns of warps, each warp's part): 2 x 4 of 64 x 32 for 128 x 128, 4 x 2 of 32 x 32 for 128 x 64,
  // 2 x 4 of 32 x 32 for 64 x 128 and 2 x 4 of 32 x 16 for 64 x 64.
  if (tile.m == 128 && tile.n == 128) {
    launch_pipelined_conv<scalar_t, 128, 128, 2>(stream, g, x, xs, w, bias, y, ys);
  } else if (tile.m == 128) {
    launch_pipelined_conv<scalar_t, 128, 64, 4>(stream, g, x, xs, w, bias, y, ys);
  } else if (tile.n == 128) {
    launch_pipelined_conv<scalar_t, 64, 128, 2>(stream, g, x, xs, w, bias, y, ys);
  } else {
    launch_pipelined_conv<scalar_t, 64, 64, 2>(stream, g, x, xs, w, bias, y, ys);
  }
}

// conv_weight_grad on the same pipeline, for 16-bit x and gy (or float32 ones on TF32) whose channels are aligned
// 16-byte vectors: per split of the reduction (make_weight_grad_problem's plan in cuda/problems.h: kTileM x kTileN tiles, the same splits as the
// FMA GEMM), C[m, n] = sum_k A[m, k] B[k, n] with M = Cg_out, N = taps * Cg_in tap-major (8 consecutive n are 8
// channels of one tap: one 16-byte cp.async) and K = the split's share of images x output positions. A is gy, B the
// implicitly padded x under tap n / Cg_in (zero-fill for padding; reflect/replicate/circular copy from the resolved
// position). In memory both have a position's channels contiguous, so shared memory holds them k-major (one row per
// position) and ldmatrix.trans hands out the row-major A and column-major B fragments mma.sync m16n8k16 wants.
// ldmatrix.trans moves 16-bit elements only, so float32 reads its m16n8k8 TF32 fragments with one 4-byte shared load
// per element (conflict-free: the 72-element rows put a fragment's 32 elements in 32 different banks) and rounds
// them with cvt.rna. A stage holds 64 bytes of k per column either way: 32 positions of 16-bit elements, 16 of
// float32.
// The float sums go to the split's slice of the workspace in the FMA GEMM's layout ([split][C_out][Cg_in][taps]),
// which sum_splits_kernel (conv_weight_grad.cu) adds in a fixed order.
constexpr int kWeightGradPitch = kTileM + 8;  // elements per row: 144-byte 16-bit rows, whose 8 rows of an
                                               // ldmatrix.trans hit 8 different groups of 4 banks; 288-byte float rows
constexpr int kWeightGradStageKBytes = 64;  // k per stage and column: 32 positions of 16-bit elements, 16 of float32
// Positions per stage (k per k-tile).
template <typename scalar_t>
constexpr int kWeightGradTileK = kWeightGradStageKBytes / sizeof(scalar_t);

// Shared memory of the kernel: every stage holds its positions' rows of A and of B.
template <typename scalar_t>
constexpr size_t weight_grad_shared_bytes() {
  return size_t(kPipelineStages) * 2 * kWeightGradTileK<scalar_t> * kWeightGradPitch *
         sizeof(scalar_t);
}

template <typename scalar_t>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    pipelined_weight_grad_kernel(const ConvGeometry g, const scalar_t* x, const Strides xs, const scalar_t* gy,
                                 const Strides gys, const PositionSteps steps, float* partial, int64_t splits,
                                 int64_t split_size) {
  static_assert(kPipelinedType<scalar_t> && kTileM == kTileN && kTileM == 64, "16-bit or TF32, 64 x 64 tiles");
  constexpr bool kTf32 = std::is_same_v<scalar_t, float>;
  constexpr int kVector = kVectorBytes / sizeof(scalar_t);
  constexpr int kVectorsPerRow = kTileM / kVector;
  constexpr int kTileK = kWeightGradTileK<scalar_t>;  // positions per stage
  constexpr int kStepK = kPipelineStepBytes / sizeof(scalar_t);                   // positions per mma step
  static_assert(kThreads == kTileK * kVectorsPerRow, "one A and one B vector per thread and stage");
  constexpr int kStageElements = 2 * kTileK * kWeightGradPitch;
  auto* shared = reinterpret_cast<scalar_t*>(dynamic_shared_memory());
  const auto a_tile = [&](int stage, int k) { return shared + stage * kStageElements + k * kWeightGradPitch; };
  const auto b_tile = [&](int stage, int k) { return a_tile(stage, kTileK + k); };

  const int64_t m_size = g.conv_out_channels_per_group(), channels = g.conv_in_channels_per_group();
  const int64_t taps = g.kernel_volume(), n_size = channels * taps, reduce = g.batch * g.conv_out_volume();
  const int64_t tiles_m = (m_size + kTileM - 1) / kTileM, tiles_n = (n_size + kTileN - 1) / kTileN;
  const int64_t items = tiles_m * tiles_n * g.groups * splits;
  const int vector = threadIdx.x % kVectorsPerRow, copy_row = threadIdx.x / kVectorsPerRow;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warp_row = warp % 2 * 32, warp_col = warp / 2 * 16;  // 2 x 4 warps of 32 x 16: 2 x 2 mma tiles each

  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int64_t m0 = item % tiles_m * kTileM, n0 = item / tiles_m % tiles_n * kTileN;
    const int64_t group = item / (tiles_m * tiles_n) % g.groups, split = item / (tiles_m * tiles_n * g.groups);
    const int64_t k_begin = split * split_size, k_end = k_begin + split_size < reduce ? k_begin + split_size : reduce;

    // This thread's vectors: output channels m .. m + 7 of gy, input channels c .. c + 7 of x under tap r.
    const int64_t m = m0 + vector * kVector, n = n0 + vector * kVector;
    const bool m_valid = m < m_size, n_valid = n < n_size;
    int64_t r[kMaxSpatial];
    unflatten(n_valid ? n / channels : 0, g.kernel, r);  // the tap
    const int64_t c = n_valid ? n % channels : 0;
    const int64_t gy_channel = group * m_size + m, x_channel = group * channels + c;  // channel strides 1
    // The outputs whose tap r lies inside x (along each dim), and x's offset from their corner to that tap.
    InteriorRange inside[kMaxSpatial];
    for (int d = 0; d < kMaxSpatial; ++d) inside[d] = g.tap_interior(d, r[d], g.conv_out_sizes[d]);
    const int64_t x_tap = x_channel + tap_offset(g, xs, r);
    // Row copy_row of the k-tile copied next (k-tiles are copied in order): its position and offsets, moved on by a
    // k-tile of positions (steps) after each copy.
    int64_t k = k_begin + copy_row;
    PositionCursor row = position_cursor(g, xs, gys, k < reduce ? k : 0);
    // Issues the copies of the next k-tile into `stage`: row copy_row of A and of B; then moves the row on.
    const auto copy_stage = [&](int stage, int64_t) {
      const bool k_valid = k < k_end;
      const bool a_valid = k_valid && m_valid;
      cp_async_zfill_16(a_tile(stage, copy_row) + vector * kVector, a_valid ? gy + row.gy + gy_channel : gy, a_valid);
      bool b_valid = k_valid && n_valid;
      int64_t offset = row.x + x_tap;
      if (!row.within(inside)) {  // the tap lies in the padding: the padding mode's source, or a zero
        bool reads_x;
        offset = row.x + x_channel + row.padded_tap_offset(g, xs, r, reads_x);
        b_valid = b_valid && reads_x;
      }
      cp_async_zfill_16(b_tile(stage, copy_row) + vector * kVector, b_valid ? x + offset : x, b_valid);
      k += kTileK;
      row.advance(steps, g.conv_out_sizes);
    };

    const int64_t k_tiles = (k_end - k_begin + kTileK - 1) / kTileK;
    float acc[2][2][4] = {};
    run_pipeline(k_tiles, copy_stage, [&](int stage) {
#pragma unroll
      for (int kk = 0; kk < kTileK; kk += kStepK) {
        uint32_t a[2][4], b[2][2];
        if constexpr (kTf32) {
          // m16n8k8: A register r is row lane / 4 + 8 (r % 2), column lane % 4 + 4 (r / 2); B register r is row
          // lane % 4 + 4 r of column lane / 4. Each a float of the k-major tiles, rounded to TF32.
          const int g = lane / 4, t = lane % 4;
#pragma unroll
          for (int f = 0; f < 2; ++f) {
#pragma unroll
            for (int r = 0; r < 4; ++r) {
              memcpy(&a[f][r], a_tile(stage, kk + t + 4 * (r / 2)) + warp_row + f * 16 + g + 8 * (r % 2), 4);
            }
            tensor_core_operands<scalar_t>(a[f]);
          }
#pragma unroll
          for (int f = 0; f < 2; ++f) {
#pragma unroll
            for (int r = 0; r < 2; ++r) memcpy(&b[f][r], b_tile(stage, kk + t + 4 * r) + warp_col + f * 8 + g, 4);
            tensor_core_operands<scalar_t>(b[f]);
          }
        } else {
#pragma unroll
          for (int f = 0; f < 2; ++f) {  // matrices (k 0-7, m 0-7), (k 0-7, m 8-15), (k 8-15, m 0-7), (k 8-15, m 8-15)
            ldmatrix_x4_trans(a[f],
                              a_tile(stage, kk + lane % 8 + lane / 16 * 8) + warp_row + f * 16 + lane / 8 % 2 * 8);
          }
          uint32_t columns[4];  // matrices (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15)
          ldmatrix_x4_trans(columns, b_tile(stage, kk + lane % 8 + lane / 8 % 2 * 8) + warp_col + lane / 16 * 8);
          b[0][0] = columns[0];
          b[0][1] = columns[1];
          b[1][0] = columns[2];
          b[1][1] = columns[3];
        }
#pragma unroll
        for (int i = 0; i < 2; ++i) {
#pragma unroll
          for (int j = 0; j < 2; ++j) mma_step<scalar_t>(acc[i][j], a[i], b[j]);
        }
      }
    });

    // acc[i][j][e] is C at row warp_row + 16 i + lane / 4 + 8 (e / 2), column warp_col + 8 j + 2 (lane % 4) + e % 2;
    // column n is tap n / Cg_in of channel n % Cg_in, stored channel-major as the weight is.
    float* split_partial = partial + ((split * g.groups + group) * m_size) * n_size;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int64_t row = m0 + warp_row + i * 16 + lane / 4 + e / 2 * 8;
          const int64_t column = n0 + warp_col + j * 8 + lane % 4 * 2 + e % 2;
          if (row < m_size && column < n_size) {
            split_partial[row * n_size + column % channels * taps + column / channels] = acc[i][j][e];
          }
        }
      }
    }
  }
}

}  // namespace fastpad::cuda
