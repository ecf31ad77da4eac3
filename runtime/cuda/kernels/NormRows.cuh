//===- NormRows.cuh - layernorm on rows held in a warp's registers -*- CUDA
//-*-===//
//
// loom_cuda_layernorm and layernorm_grad for rows of at most 1024 elements
// (GPT-2's 768): a warp per row, the row read from memory once into
// registers (element j in lane j % 32, slot j / 32), every statistic a
// warp sum by shuffles, so no block-wide barrier stands between a row's
// load and its store. The block-per-row kernels of Norm.cu spent most of
// their time in barriers: 36 and 116 us for GPT-2's [8192, 768] on the
// H100, 690 and 325 GB/s.
//
// The formulas are Norm.cu's (and the CPU kernels'): mean, biased
// variance, rstd = 1 / sqrt(variance + epsilon), y = (x - mean) * rstd *
// gamma + beta; with g = dy * gamma and xhat = (x - mean) * rstd,
// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), leaving (mean, rstd)
// of row r in stats[2r], stats[2r + 1] for the weight gradients.
//
// Device code alone, with the CUDA vocabulary from its includer, so that
// test/Unit/NormRowsTest.cpp runs it on the host through
// test/Unit/CudaEmulation.h:
//   rows::Tensor                   f32 or bf16: float operator[](i), store(i,
//   v) threadIdx, blockIdx, gridDim, __shfl_xor_sync, sqrtf LOOM_ROWS_DEVICE,
//   LOOM_ROWS_KERNEL   qualifiers (kThreads per block)
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_KERNELS_NORMROWS_CUH
#define LOOM_RUNTIME_CUDA_KERNELS_NORMROWS_CUH

#include <cstdint>
#include <type_traits>

namespace loom::cuda::rows {

constexpr int kThreads = 256, kWarps = kThreads / 32;
/// The longest row a warp holds: 32 slots per lane.
constexpr int64_t kMaxSize = 32 * 32;

LOOM_ROWS_DEVICE float warpSum(float value) {
  for (int offset = 16; offset > 0; offset >>= 1)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

/// The slots per lane a row of `size` elements needs, rounded up to the
/// kernels' instances (8, 16, 24 or 32); 0 when the row is too long.
inline int slotsFor(int64_t size) {
  for (int slots : {8, 16, 24, 32})
    if (size <= 32 * slots)
      return slots;
  return 0;
}

/// Calls `fn(std::integral_constant<int, slots>())`: the kernels'
/// instance for `slots` (a value slotsFor returns, not 0).
template <typename Fn> void withSlots(int slots, Fn fn) {
  switch (slots) {
  case 8:
    return fn(std::integral_constant<int, 8>());
  case 16:
    return fn(std::integral_constant<int, 16>());
  case 24:
    return fn(std::integral_constant<int, 24>());
  default:
    return fn(std::integral_constant<int, 32>());
  }
}

/// A row of `size` elements at `base` of `t`, in the lane's Slots slots
/// (zeros past the end).
template <int Slots>
LOOM_ROWS_DEVICE void loadRow(const Tensor &t, int64_t base, int64_t size,
                              int lane, float (&row)[Slots]) {
#pragma unroll
  for (int i = 0; i < Slots; ++i) {
    int64_t j = lane + 32 * i;
    row[i] = j < size ? t[base + j] : 0.0f;
  }
}

/// (mean, rstd) of the row in `x`: two warp sums (the variance of the
/// centered values, as Norm.cu's).
template <int Slots>
LOOM_ROWS_DEVICE void moments(const float (&x)[Slots], int64_t size, int lane,
                              float epsilon, float &mean, float &rstd) {
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < Slots; ++i)
    sum += x[i];
  mean = warpSum(sum) / static_cast<float>(size);
  float squares = 0.0f;
#pragma unroll
  for (int i = 0; i < Slots; ++i)
    if (lane + 32 * i < size) {
      float centered = x[i] - mean;
      squares += centered * centered;
    }
  rstd = 1.0f / sqrtf(warpSum(squares) / static_cast<float>(size) + epsilon);
}

/// y = (x - mean) * rstd * gamma + beta, a warp per row.
template <int Slots>
LOOM_ROWS_KERNEL void
layernorm_warp_forward(Tensor x, Tensor gamma, Tensor beta, Tensor y,
                       int64_t rows, int64_t size, float epsilon) {
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t r = blockIdx.x * int64_t{kWarps} + warp; r < rows;
       r += int64_t{gridDim.x} * kWarps) {
    int64_t base = r * size;
    float values[Slots];
    loadRow(x, base, size, lane, values);
    float mean, rstd;
    moments(values, size, lane, epsilon, mean, rstd);
#pragma unroll
    for (int i = 0; i < Slots; ++i)
      values[i] = (values[i] - mean) * rstd;
#pragma unroll
    for (int i = 0; i < Slots; ++i) {
      int64_t j = lane + 32 * i;
      if (j < size)
        y.store(base + j, values[i] * gamma[j] + beta[j]);
    }
  }
}

/// dx of a warp per row, plus `residual` where its data is not null (a
/// fused norm gradient); (mean, rstd) of row r into stats[2r],
/// stats[2r+1].
template <int Slots>
LOOM_ROWS_KERNEL void layernorm_warp_backward(Tensor dy, Tensor x, Tensor gamma,
                                              Tensor residual, Tensor dx,
                                              float *stats, int64_t rows,
                                              int64_t size, float epsilon) {
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t r = blockIdx.x * int64_t{kWarps} + warp; r < rows;
       r += int64_t{gridDim.x} * kWarps) {
    int64_t base = r * size;
    float values[Slots], g[Slots];
    loadRow(x, base, size, lane, values);
    loadRow(dy, base, size, lane, g);
    float mean, rstd;
    moments(values, size, lane, epsilon, mean, rstd);
    float sumG = 0.0f, sumGXhat = 0.0f;
#pragma unroll
    for (int i = 0; i < Slots; ++i) {
      int64_t j = lane + 32 * i;
      if (j < size) {
        g[i] *= gamma[j];
        values[i] = (values[i] - mean) * rstd; // xhat from here on
        sumG += g[i];
        sumGXhat += g[i] * values[i];
      }
    }
    float meanG = warpSum(sumG) / static_cast<float>(size);
    float meanGXhat = warpSum(sumGXhat) / static_cast<float>(size);
#pragma unroll
    for (int i = 0; i < Slots; ++i) {
      int64_t j = lane + 32 * i;
      if (j < size) {
        float value = rstd * (g[i] - meanG - values[i] * meanGXhat);
        dx.store(base + j, residual.data ? value + residual[base + j] : value);
      }
    }
    if (lane == 0) {
      stats[2 * r] = mean;
      stats[2 * r + 1] = rstd;
    }
  }
}

} // namespace loom::cuda::rows

#endif // LOOM_RUNTIME_CUDA_KERNELS_NORMROWS_CUH
