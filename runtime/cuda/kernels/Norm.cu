//===- Norm.cu - Normalizations, activations, softmax, rope, dropout ------===//
//
// The row-wise and pointwise neural kernels, with the formulas of
// runtime/cpu/kernels/Norm.cpp (which cites the interpreter). Rows are the
// last dimension, of size D: a block walks a row, its statistics reduced
// over the block. The gradients of the norms' weights (dgamma, dbeta) are
// sums over rows: each row kernel leaves its statistics in scratch, a
// second kernel sums chunks of rows per column into partial sums (32
// columns x 8 row lanes per block, neighbouring threads on neighbouring
// columns), and a third adds the partials in a fixed order, so the result
// does not depend on scheduling.
//
// Dropout draws each element's mask with DropoutMask.h's Philox at the
// element's global index, the host working out the global strides and
// offset from the mask block as the CPU kernels do: the masks are the CPU
// path's, bit for bit.
//
//===----------------------------------------------------------------------===//

#include "Activation.cuh"
#include "Device.cuh"

#include "loom/DropoutMask.h"
#include "loom/RopeFrequency.h"

#include <cstdlib>
#include <cstring>

// The CUDA vocabulary NormRows.cuh takes from its includer.
namespace loom::cuda::rows {
using Tensor = Floats;
} // namespace loom::cuda::rows
#define LOOM_ROWS_DEVICE __device__ __forceinline__
#define LOOM_ROWS_KERNEL __global__ __launch_bounds__(256)
#include "NormRows.cuh"

namespace loom::cuda {
namespace {

unsigned rowBlocks(const Rows &rows) {
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>(rows.count, 1 << 16)));
}

/// Checks the shapes of a norm or norm gradient: the `weights` operands
/// from `gammaIndex` on (gamma, and layernorm's beta) and the results after
/// the first (dgamma, dbeta) are [D]; every other operand (x, dy, a norm
/// gradient's residual) and result 0 have the result's rows of D.
int32_t checkNormShapes(const KernelArgs &args, const char *op,
                        int64_t gammaIndex, int64_t weights) {
  Rows rows = rowsOf(args.out(0));
  auto isWeight = [&](int64_t operand) {
    return operand >= gammaIndex && operand < gammaIndex + weights;
  };
  for (int64_t i = 0; i < args.numOperands(); ++i) {
    int64_t want = isWeight(i) ? rows.size : args.out(0).numElements();
    if (args.in(i).numElements() != want)
      return fail(
          isWeight(i) ? "loom_cuda_%s: operand %lld is not [D] for the rows "
                        "of D = %lld"
                      : "loom_cuda_%s: operand %lld does not match the "
                        "result (rows of D = %lld)",
          op, static_cast<long long>(i), static_cast<long long>(rows.size));
  }
  for (int64_t r = 1; r < args.numResults(); ++r)
    if (args.out(r).numElements() != rows.size)
      return fail("loom_cuda_%s: result %lld is not [D] for the rows of D = "
                  "%lld",
                  op, static_cast<long long>(r),
                  static_cast<long long>(rows.size));
  return 0;
}

//===----------------------------------------------------------------------===//
// layernorm, rmsnorm
//===----------------------------------------------------------------------===//

/// The mean and 1 / sqrt(biased variance + epsilon) of row `base`.
__device__ float2 rowMoments(Floats x, int64_t base, int64_t size,
                             float epsilon) {
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < size; j += blockDim.x)
    sum += x[base + j];
  float mean = blockReduce(sum, SumOp(), 0.0f) / static_cast<float>(size);
  float squares = 0.0f;
  for (int64_t j = threadIdx.x; j < size; j += blockDim.x) {
    float centered = x[base + j] - mean;
    squares += centered * centered;
  }
  float variance =
      blockReduce(squares, SumOp(), 0.0f) / static_cast<float>(size);
  return make_float2(mean, 1.0f / sqrtf(variance + epsilon));
}

/// 1 / sqrt(mean(row^2) + epsilon).
__device__ float rowRmsScale(Floats x, int64_t base, int64_t size,
                             float epsilon) {
  float squares = 0.0f;
  for (int64_t j = threadIdx.x; j < size; j += blockDim.x) {
    float value = x[base + j];
    squares += value * value;
  }
  float mean = blockReduce(squares, SumOp(), 0.0f) / static_cast<float>(size);
  return 1.0f / sqrtf(mean + epsilon);
}

/// y = (x - mean) * rstd * gamma + beta.
__global__ void layernorm_forward_kernel(Floats x, Floats gamma, Floats beta,
                                         Floats y, int64_t rows, int64_t size,
                                         float epsilon) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t base = r * size;
    float2 m = rowMoments(x, base, size, epsilon);
    for (int64_t j = threadIdx.x; j < size; j += blockDim.x)
      y.store(base + j, (x[base + j] - m.x) * m.y * gamma[j] + beta[j]);
  }
}

/// With xhat = (x - mean) * rstd and g = dy * gamma:
///   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) [+ residual].
/// Leaves (mean, rstd) of row r in stats[2r], stats[2r + 1].
__global__ void layernorm_backward_kernel(Floats dy, Floats x, Floats gamma,
                                          Floats residual, Floats dx,
                                          float *stats, int64_t rows,
                                          int64_t size, float epsilon) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t base = r * size;
    float2 m = rowMoments(x, base, size, epsilon);
    float sumG = 0.0f, sumGXhat = 0.0f;
    for (int64_t j = threadIdx.x; j < size; j += blockDim.x) {
      float g = dy[base + j] * gamma[j];
      sumG += g;
      sumGXhat += g * (x[base + j] - m.x) * m.y;
    }
    float meanG = blockReduce(sumG, SumOp(), 0.0f) / static_cast<float>(size);
    float meanGXhat =
        blockReduce(sumGXhat, SumOp(), 0.0f) / static_cast<float>(size);
    for (int64_t j = threadIdx.x; j < size; j += blockDim.x) {
      float xhat = (x[base + j] - m.x) * m.y;
      float value = m.y * (dy[base + j] * gamma[j] - meanG - xhat * meanGXhat);
      dx.store(base + j, residual.data ? value + residual[base + j] : value);
    }
    if (threadIdx.x == 0) {
      stats[2 * r] = m.x;
      stats[2 * r + 1] = m.y;
    }
  }
}

/// y = x * s * gamma, s = rowRmsScale(x).
__global__ void rmsnorm_forward_kernel(Floats x, Floats gamma, Floats y,
                                       int64_t rows, int64_t size,
                                       float epsilon) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t base = r * size;
    float s = rowRmsScale(x, base, size, epsilon);
    for (int64_t j = threadIdx.x; j < size; j += blockDim.x)
      y.store(base + j, x[base + j] * s * gamma[j]);
  }
}

/// Since ds/dx_k = -s^3 x_k / D:
///   dx_k = s * g_k - x_k * s^3 / D * sum_j g_j x_j [+ residual_k],
///   g = dy * gamma. Leaves s of row r in stats[r].
__global__ void rmsnorm_backward_kernel(Floats dy, Floats x, Floats gamma,
                                        Floats residual, Floats dx,
                                        float *stats, int64_t rows,
                                        int64_t size, float epsilon) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t base = r * size;
    float s = rowRmsScale(x, base, size, epsilon);
    float dot = 0.0f;
    for (int64_t j = threadIdx.x; j < size; j += blockDim.x)
      dot += dy[base + j] * x[base + j] * gamma[j];
    dot = blockReduce(dot, SumOp(), 0.0f);
    float coefficient = s * s * s * dot / static_cast<float>(size);
    for (int64_t j = threadIdx.x; j < size; j += blockDim.x) {
      float value = s * dy[base + j] * gamma[j] - x[base + j] * coefficient;
      dx.store(base + j, residual.data ? value + residual[base + j] : value);
    }
    if (threadIdx.x == 0)
      stats[r] = s;
  }
}

constexpr int kColumns = 32, kRowLanes = 8;

/// One row's contribution to dgamma (dy * xhat, xhat = (x - mean) * rstd
/// for layernorm, x * s for rmsnorm) and dbeta (dy).
__device__ __forceinline__ float normXhat(float value, const float *stats,
                                          bool layer, int64_t r) {
  return layer ? (value - stats[2 * r]) * stats[2 * r + 1] : value * stats[r];
}

/// Partial sums over chunk blockIdx.y of the rows, per column: dgamma and,
/// for layernorm, dbeta. `partials` is [chunks, D] for dgamma, then
/// [chunks, D] for dbeta. With `vector` (D a multiple of 8, dy and x
/// 16-byte aligned) each thread takes 8 neighbouring columns with one
/// 16-byte load per bf16 row (a block 256 columns), else one column (a
/// block 32). Either way a column's rows go to its 8 row lanes in turn,
/// r = first + lane, first + lane + 8, ..., and the lanes are added in
/// order.
__global__ void norm_weight_partials_kernel(Floats dy, Floats x,
                                            const float *stats, bool layer,
                                            int64_t rows, int64_t size,
                                            int64_t rowsPerChunk, bool vector,
                                            float *partials) {
  constexpr int kWidth = 8;
  __shared__ float lanes[2][kRowLanes][kColumns * kWidth];
  int width = vector ? kWidth : 1;
  int64_t column =
      (blockIdx.x * static_cast<int64_t>(kColumns) + threadIdx.x) * width;
  int64_t first = blockIdx.y * rowsPerChunk;
  int64_t last = min(rows, first + rowsPerChunk);
  float dgamma[kWidth] = {}, dbeta[kWidth] = {};
  if (column < size) {
    if (vector) {
      for (int64_t r = first + threadIdx.y; r < last; r += kRowLanes) {
        float grad[kWidth], value[kWidth];
        load8(dy, r * size + column, grad);
        load8(x, r * size + column, value);
#pragma unroll
        for (int k = 0; k < kWidth; ++k) {
          dgamma[k] += grad[k] * normXhat(value[k], stats, layer, r);
          dbeta[k] += grad[k];
        }
      }
    } else {
      for (int64_t r = first + threadIdx.y; r < last; r += kRowLanes) {
        float grad = dy[r * size + column];
        dgamma[0] += grad * normXhat(x[r * size + column], stats, layer, r);
        dbeta[0] += grad;
      }
    }
  }
#pragma unroll
  for (int k = 0; k < kWidth; ++k) {
    lanes[0][threadIdx.y][threadIdx.x * kWidth + k] = dgamma[k];
    lanes[1][threadIdx.y][threadIdx.x * kWidth + k] = dbeta[k];
  }
  __syncthreads();
  if (threadIdx.y != 0 || column >= size)
    return;
  int64_t chunks = gridDim.y;
  for (int k = 0; k < width; ++k) {
    float sumGamma = lanes[0][0][threadIdx.x * kWidth + k],
          sumBeta = lanes[1][0][threadIdx.x * kWidth + k];
    for (int lane = 1; lane < kRowLanes; ++lane) {
      sumGamma += lanes[0][lane][threadIdx.x * kWidth + k];
      sumBeta += lanes[1][lane][threadIdx.x * kWidth + k];
    }
    partials[blockIdx.y * size + column + k] = sumGamma;
    if (layer)
      partials[(chunks + blockIdx.y) * size + column + k] = sumBeta;
  }
}

/// dgamma[j] (and dbeta[j]) = the sum of the chunks' partials: 32 columns
/// per block, each column's chunks shared by 8 lanes (chunk c to lane
/// c % 8, in order) whose sums are added in lane order, so the result
/// does not depend on scheduling. One thread per column walking every
/// chunk alone was a chain of a thousand dependent loads.
__global__ void norm_weight_sums_kernel(const float *partials, int64_t chunks,
                                        int64_t size, Floats dgamma,
                                        Floats dbeta, bool layer) {
  __shared__ float lanes[2][kRowLanes][kColumns];
  int64_t j = blockIdx.x * static_cast<int64_t>(kColumns) + threadIdx.x;
  float sumGamma = 0.0f, sumBeta = 0.0f;
  if (j < size)
    for (int64_t c = threadIdx.y; c < chunks; c += kRowLanes) {
      sumGamma += partials[c * size + j];
      if (layer)
        sumBeta += partials[(chunks + c) * size + j];
    }
  lanes[0][threadIdx.y][threadIdx.x] = sumGamma;
  lanes[1][threadIdx.y][threadIdx.x] = sumBeta;
  __syncthreads();
  if (threadIdx.y != 0 || j >= size)
    return;
  for (int lane = 1; lane < kRowLanes; ++lane) {
    sumGamma += lanes[0][lane][threadIdx.x];
    sumBeta += lanes[1][lane][threadIdx.x];
  }
  dgamma.store(j, sumGamma);
  if (layer)
    dbeta.store(j, sumBeta);
}

/// The weight gradients of a norm from the statistics the backward kernel
/// left at the start of scratch (`statBytes`). The rows are cut into
/// enough chunks for about 1024 blocks of partial sums (the whole GPU,
/// several times over), each at least 8 rows.
int32_t normWeightGrads(loom_cuda_context *context, const char *op,
                        const View &dy, const View &x, const Rows &rows,
                        int64_t statBytes, bool layer, const View &dgamma,
                        const View *dbeta) {
  bool vector = rows.size % 8 == 0 && aligned16(dy.data) && aligned16(x.data);
  int64_t columnsPerBlock = kColumns * (vector ? 8 : 1);
  int64_t columnBlocks = (rows.size + columnsPerBlock - 1) / columnsPerBlock;
  int64_t perChunk = (layer ? 2 : 1) * rows.size * sizeof(float);
  int64_t room = (context->scratchBytes - statBytes) / perChunk;
  int64_t chunks = std::min<int64_t>({(1024 + columnBlocks - 1) / columnBlocks,
                                      (rows.count + 7) / 8, room, 65535});
  chunks = std::max<int64_t>(chunks, 1);
  if (int32_t status = needScratch(context, op, statBytes + chunks * perChunk))
    return status;
  int64_t rowsPerChunk = (rows.count + chunks - 1) / chunks;
  const float *stats = static_cast<const float *>(context->scratch);
  float *partials = reinterpret_cast<float *>(
      static_cast<char *>(context->scratch) + statBytes);
  dim3 grid(static_cast<unsigned>(columnBlocks), static_cast<unsigned>(chunks));
  norm_weight_partials_kernel<<<grid, dim3(kColumns, kRowLanes), 0,
                                context->stream>>>(
      floats(dy), floats(x), stats, layer, rows.count, rows.size, rowsPerChunk,
      vector, partials);
  if (int32_t status = checkLaunch(op))
    return status;
  norm_weight_sums_kernel<<<static_cast<unsigned>((rows.size + kColumns - 1) /
                                                  kColumns),
                            dim3(kColumns, kRowLanes), 0, context->stream>>>(
      partials, chunks, rows.size, floats(dgamma),
      dbeta ? floats(*dbeta) : floats(dgamma), layer);
  return checkLaunch(op);
}

/// The slots per lane of NormRows.cuh's warp-per-row kernels for rows
/// like `rows`, or 0 for the block-per-row kernels: rows longer than
/// rows::kMaxSize, or LOOM_CUDA_NORM=block.
int warpRowSlots(const Rows &rows) {
  const char *choice = std::getenv("LOOM_CUDA_NORM");
  if (choice && std::strcmp(choice, "block") == 0)
    return 0;
  return rows::slotsFor(rows.size);
}

unsigned warpRowBlocks(const Rows &rows) {
  return static_cast<unsigned>(std::max<int64_t>(
      1, std::min<int64_t>((rows.count + rows::kWarps - 1) / rows::kWarps,
                           1 << 16)));
}

int32_t layerNorm(KernelArgs &args, loom_cuda_context *context) {
  if (int32_t status = args.expect("layernorm", 3, 1))
    return status;
  if (int32_t status = checkNormShapes(args, "layernorm", 1, 2))
    return status;
  float epsilon =
      static_cast<float>(readAttrs<Kernel::layernorm>(args).epsilon);
  Rows rows = rowsOf(args.in(0));
  if (rows.count == 0)
    return 0;
  Floats x = floats(args.in(0)), gamma = floats(args.in(1)),
         beta = floats(args.in(2)), y = floats(args.out(0));
  int slots = warpRowSlots(rows);
  if (slots == 0)
    layernorm_forward_kernel<<<rowBlocks(rows), threadsForRow(rows.size), 0,
                               context->stream>>>(x, gamma, beta, y, rows.count,
                                                  rows.size, epsilon);
  else
    rows::withSlots(slots, [&](auto s) {
      rows::layernorm_warp_forward<decltype(s)::value>
          <<<warpRowBlocks(rows), rows::kThreads, 0, context->stream>>>(
              x, gamma, beta, y, rows.count, rows.size, epsilon);
    });
  return checkLaunch("layernorm");
}

/// The residual a fused norm gradient adds to dx: its fourth operand, if
/// it has one (--loom-fuse's norm gradients), else none (null data).
Floats residualOf(const KernelArgs &args) {
  return args.numOperands() == 4 ? floats(args.in(3))
                                 : Floats{nullptr, LOOM_DTYPE_F32};
}

/// Operands dy, x, gamma[, residual]; results dx (+ residual), dgamma,
/// dbeta.
int32_t layerNormGrad(KernelArgs &args, loom_cuda_context *context) {
  if (int32_t status =
          args.expect("layernorm_grad", args.numOperands() == 4 ? 4 : 3, 3))
    return status;
  if (int32_t status = checkNormShapes(args, "layernorm_grad", 2, 1))
    return status;
  float epsilon =
      static_cast<float>(readAttrs<Kernel::layernorm_grad>(args).epsilon);
  Rows rows = rowsOf(args.in(1));
  // No rows still leaves D weights, whose gradients (zeros) are written.
  if (rows.size == 0)
    return 0;
  int64_t statBytes = 2 * rows.count * sizeof(float);
  if (int32_t status = needScratch(context, "layernorm_grad",
                                   statBytes + 2 * rows.size * sizeof(float)))
    return status;
  Floats dy = floats(args.in(0)), x = floats(args.in(1)),
         gamma = floats(args.in(2)), residual = residualOf(args),
         dx = floats(args.out(0));
  float *stats = static_cast<float *>(context->scratch);
  int slots = warpRowSlots(rows);
  if (slots == 0)
    layernorm_backward_kernel<<<rowBlocks(rows), threadsForRow(rows.size), 0,
                                context->stream>>>(
        dy, x, gamma, residual, dx, stats, rows.count, rows.size, epsilon);
  else
    rows::withSlots(slots, [&](auto s) {
      rows::layernorm_warp_backward<decltype(s)::value>
          <<<warpRowBlocks(rows), rows::kThreads, 0, context->stream>>>(
              dy, x, gamma, residual, dx, stats, rows.count, rows.size,
              epsilon);
    });
  if (int32_t status = checkLaunch("layernorm_grad"))
    return status;
  return normWeightGrads(context, "layernorm_grad", args.in(0), args.in(1),
                         rows, statBytes, true, args.out(1), &args.out(2));
}

int32_t rmsNorm(KernelArgs &args, loom_cuda_context *context) {
  if (int32_t status = args.expect("rmsnorm", 2, 1))
    return status;
  if (int32_t status = checkNormShapes(args, "rmsnorm", 1, 1))
    return status;
  float epsilon = static_cast<float>(readAttrs<Kernel::rmsnorm>(args).epsilon);
  Rows rows = rowsOf(args.in(0));
  if (rows.count == 0)
    return 0;
  rmsnorm_forward_kernel<<<rowBlocks(rows), threadsForRow(rows.size), 0,
                           context->stream>>>(
      floats(args.in(0)), floats(args.in(1)), floats(args.out(0)), rows.count,
      rows.size, epsilon);
  return checkLaunch("rmsnorm");
}

/// Operands dy, x, gamma[, residual]; results dx (+ residual), dgamma.
int32_t rmsNormGrad(KernelArgs &args, loom_cuda_context *context) {
  if (int32_t status =
          args.expect("rmsnorm_grad", args.numOperands() == 4 ? 4 : 3, 2))
    return status;
  if (int32_t status = checkNormShapes(args, "rmsnorm_grad", 2, 1))
    return status;
  float epsilon =
      static_cast<float>(readAttrs<Kernel::rmsnorm_grad>(args).epsilon);
  Rows rows = rowsOf(args.in(1));
  // No rows still leaves D weights, whose gradients (zeros) are written.
  if (rows.size == 0)
    return 0;
  int64_t statBytes = rows.count * sizeof(float);
  if (int32_t status = needScratch(context, "rmsnorm_grad",
                                   statBytes + rows.size * sizeof(float)))
    return status;
  rmsnorm_backward_kernel<<<rowBlocks(rows), threadsForRow(rows.size), 0,
                            context->stream>>>(
      floats(args.in(0)), floats(args.in(1)), floats(args.in(2)),
      residualOf(args), floats(args.out(0)),
      static_cast<float *>(context->scratch), rows.count, rows.size, epsilon);
  if (int32_t status = checkLaunch("rmsnorm_grad"))
    return status;
  return normWeightGrads(context, "rmsnorm_grad", args.in(0), args.in(1), rows,
                         statBytes, false, args.out(1), nullptr);
}

//===----------------------------------------------------------------------===//
// gelu, gelu_erf, silu
//===----------------------------------------------------------------------===//

enum class Activation { Gelu, GeluErf, Silu };

template <Activation kind> __device__ __forceinline__ float activate(float x) {
  if constexpr (kind == Activation::Gelu)
    return gelu(x);
  else if constexpr (kind == Activation::GeluErf)
    return geluErf(x);
  else
    return silu(x);
}

template <Activation kind>
__device__ __forceinline__ float derivative(float x) {
  if constexpr (kind == Activation::Gelu)
    return geluDerivative(x);
  else if constexpr (kind == Activation::GeluErf)
    return geluErfDerivative(x);
  else
    return siluDerivative(x);
}

template <Activation kind>
__global__ void activation_forward_kernel(Floats x, Floats y, int64_t n,
                                          bool vector) {
  pointwise(x, y, n, vector, [](float v) { return activate<kind>(v); });
}

template <Activation kind>
__global__ void activation_backward_kernel(Floats dy, Floats x, Floats dx,
                                           int64_t n, bool vector) {
  pointwise(dy, x, dx, n, vector,
            [](float g, float v) { return g * derivative<kind>(v); });
}

template <Activation kind>
int32_t activation_forward(KernelArgs &args, loom_cuda_context *context,
                           const char *op) {
  if (int32_t status = args.expect(op, 1, 1))
    return status;
  int64_t n = args.out(0).numElements();
  if (args.in(0).numElements() != n)
    return fail("loom_cuda_%s: the operand and the result differ in size", op);
  if (n == 0)
    return 0;
  bool vector = aligned16(args.in(0).data) && aligned16(args.out(0).data);
  activation_forward_kernel<kind>
      <<<pointwiseBlocks(n, vector), kThreads, 0, context->stream>>>(
          floats(args.in(0)), floats(args.out(0)), n, vector);
  return checkLaunch(op);
}

/// Operands dy, x; result dx = dy * derivative(x).
template <Activation kind>
int32_t activation_backward(KernelArgs &args, loom_cuda_context *context,
                            const char *op) {
  if (int32_t status = args.expect(op, 2, 1))
    return status;
  int64_t n = args.out(0).numElements();
  if (args.in(0).numElements() != n || args.in(1).numElements() != n)
    return fail("loom_cuda_%s: dy, x and dx differ in size", op);
  if (n == 0)
    return 0;
  bool vector = aligned16(args.in(0).data) && aligned16(args.in(1).data) &&
                aligned16(args.out(0).data);
  activation_backward_kernel<kind>
      <<<pointwiseBlocks(n, vector), kThreads, 0, context->stream>>>(
          floats(args.in(0)), floats(args.in(1)), floats(args.out(0)), n,
          vector);
  return checkLaunch(op);
}

//===----------------------------------------------------------------------===//
// softmax
//===----------------------------------------------------------------------===//

/// exp(x - max(x)) / sum(exp(x - max(x))) along each row. Causal: row r is
/// row r mod D of a [D, D] matrix and only its first (r mod D) + 1 elements
/// take part; the others are 0.
__global__ void softmax_forward_kernel(Floats x, Floats y, int64_t rows,
                                       int64_t size, bool causal) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t base = r * size;
    int64_t used = causal ? r % size + 1 : size;
    float max = -INFINITY;
    for (int64_t j = threadIdx.x; j < used; j += blockDim.x)
      max = fmaxf(max, x[base + j]);
    max = blockReduce(max, MaxOp(), -INFINITY);
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < used; j += blockDim.x)
      sum += expf(x[base + j] - max);
    float inverse = 1.0f / blockReduce(sum, SumOp(), 0.0f);
    for (int64_t j = threadIdx.x; j < size; j += blockDim.x)
      y.store(base + j, j < used ? expf(x[base + j] - max) * inverse : 0.0f);
  }
}

/// dx = y * (dy - sum(dy * y)) along each row.
__global__ void softmax_backward_kernel(Floats dy, Floats y, Floats dx,
                                        int64_t rows, int64_t size) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t base = r * size;
    float dot = 0.0f;
    for (int64_t j = threadIdx.x; j < size; j += blockDim.x)
      dot += dy[base + j] * y[base + j];
    dot = blockReduce(dot, SumOp(), 0.0f);
    for (int64_t j = threadIdx.x; j < size; j += blockDim.x)
      dx.store(base + j, y[base + j] * (dy[base + j] - dot));
  }
}

//===----------------------------------------------------------------------===//
// rope
//===----------------------------------------------------------------------===//

/// table[s * D/2 + i] = the cosine and sine of direction * (start + s) *
/// theta^(-2i/D) (as scaled), the angle and both in double as the CPU
/// kernel's table, rounded to float (`start`: a sequence shard's first
/// position). Computed once per call for the S x D/2 angles rather than
/// for each of the B x S x H x D/2 pairs, whose double pow, cos and sin
/// took most of the time of the rotation.
__global__ void rope_table_kernel(float2 *table, int64_t seq, int64_t dim,
                                  double theta, RopeScaling scaling,
                                  double direction, int64_t start) {
  int64_t half = dim / 2;
  LOOM_GRID_STRIDE(p, seq * half) {
    int64_t i = p % half, s = p / half;
    double angle = direction * static_cast<double>(start + s) *
                   ropeFrequency(i, dim, theta, scaling);
    table[p] = make_float2(static_cast<float>(cos(angle)),
                           static_cast<float>(sin(angle)));
  }
}

/// Rotates each pair (x[i], x[i + D/2]) of x [B, S, H, D] by its position's
/// angle from `table`. Index is int32_t where the pairs allow, for cheaper
/// divisions.
template <typename Index>
__global__ void rope_forward_kernel(Floats x, Floats y, const float2 *table,
                                    Index pairs, Index seq, Index heads,
                                    Index half) {
  for (Index p = blockIdx.x * blockDim.x + threadIdx.x; p < pairs;
       p += static_cast<Index>(gridDim.x) * blockDim.x) {
    Index i = p % half, row = p / half;
    Index s = (row / heads) % seq;
    int64_t base = static_cast<int64_t>(row) * (2 * half);
    float2 angle = table[static_cast<int64_t>(s) * half + i];
    float c = angle.x, sn = angle.y;
    float x1 = x[base + i], x2 = x[base + i + half];
    y.store(base + i, x1 * c - x2 * sn);
    y.store(base + i + half, x2 * c + x1 * sn);
  }
}

template <Kernel K>
int32_t rotatePairs(KernelArgs &args, const loom_call_frame *frame,
                    loom_cuda_context *context, const char *op,
                    double direction) {
  if (int32_t status = args.expect(op, 1, 1))
    return status;
  auto attrs = readAttrs<K>(args);
  double theta = attrs.theta;
  RopeScaling scaling;
  scaling.factor = attrs.scaling_factor;
  scaling.lowFreqFactor = attrs.low_freq_factor;
  scaling.highFreqFactor = attrs.high_freq_factor;
  scaling.originalMaxPositions = attrs.original_max_positions;
  const View &x = args.in(0);
  if (x.rank != 4 || x.dims[3] % 2 != 0 ||
      args.out(0).numElements() != x.numElements())
    return fail("loom_cuda_%s: expected [B, S, H, D] with even D", op);
  int64_t start = 0;
  char error[256];
  if (!kernels::readPositionStart(args, frame, attrs.has_positions, x.dims, 4,
                                  1, &start, error, sizeof error))
    return fail("loom_cuda_%s: %s", op, error);
  int64_t pairs = x.numElements() / 2;
  if (pairs == 0)
    return 0;
  int64_t seq = x.dims[1], heads = x.dims[2], half = x.dims[3] / 2;
  if (int32_t status = growScratch(context, op, seq * half * sizeof(float2)))
    return status;
  float2 *table = static_cast<float2 *>(context->scratch);
  rope_table_kernel<<<blocksFor(seq * half), kThreads, 0, context->stream>>>(
      table, seq, x.dims[3], theta, scaling, direction, start);
  if (int32_t status = checkLaunch(op))
    return status;
  // Below 2^30 a grid stride (at most 2^24) cannot take int32_t past 2^31.
  if (pairs < (int64_t{1} << 30))
    rope_forward_kernel<int32_t>
        <<<blocksFor(pairs), kThreads, 0, context->stream>>>(
            floats(x), floats(args.out(0)), table, static_cast<int32_t>(pairs),
            static_cast<int32_t>(seq), static_cast<int32_t>(heads),
            static_cast<int32_t>(half));
  else
    rope_forward_kernel<int64_t>
        <<<blocksFor(pairs), kThreads, 0, context->stream>>>(
            floats(x), floats(args.out(0)), table, pairs, seq, heads, half);
  return checkLaunch(op);
}

//===----------------------------------------------------------------------===//
// dropout
//===----------------------------------------------------------------------===//

/// Where the local tensor sits in the global one (readMaskIndex).
struct MaskIndex {
  int rank = 0;
  int64_t dims[kMaxRank];
  int64_t strides[kMaxRank];
  int64_t base = 0;

  __device__ uint64_t globalIndex(int64_t e) const {
    int64_t index = base;
    for (int d = rank - 1; d >= 0; --d) {
      index += (e % dims[d]) * strides[d];
      e /= dims[d];
    }
    return static_cast<uint64_t>(index);
  }
};

/// out = x / (1 - rate) where the mask keeps the element, else 0; the
/// product in double, as on the CPU.
__global__ void dropout_forward_kernel(Floats x, Floats y, Indices step,
                                       MaskIndex mask, uint64_t seed,
                                       uint64_t key, double rate, int64_t n) {
  uint64_t stepValue = static_cast<uint64_t>(step[0]);
  double scale = 1.0 / (1.0 - rate);
  LOOM_GRID_STRIDE(e, n) {
    bool keeps = dropoutKeeps(seed, key, stepValue, mask.globalIndex(e), rate);
    y.store(e, keeps ? static_cast<float>(static_cast<double>(x[e]) * scale)
                     : 0.0f);
  }
}

/// `x` (or `dy`) times the mask: dropout is linear in `x`, so its gradient
/// applies the same mask to `dy`.
template <Kernel K>
int32_t applyDropoutMask(KernelArgs &args, const loom_call_frame *frame,
                         loom_cuda_context *context, const char *op) {
  if (int32_t status = args.expect(op, 2, 1, /*notFloat=*/1u << 1))
    return status;
  const View &x = args.in(0), &step = args.in(1);
  if (!step.isIndex())
    return fail("loom_cuda_%s: the step is not an integer", op);
  if (args.out(0).numElements() != x.numElements())
    return fail("loom_cuda_%s: the operand and the result differ in size", op);
  auto attrs = readAttrs<K>(args);
  double rate = attrs.rate;
  uint64_t seed = static_cast<uint64_t>(attrs.seed);
  uint64_t key = static_cast<uint64_t>(attrs.key);
  MaskIndex mask;
  mask.rank = static_cast<int>(x.rank);
  for (int64_t d = 0; d < x.rank; ++d)
    mask.dims[d] = x.dims[d];
  if (int32_t status = readMaskIndex(args, frame, x.rank, x.dims, x.rank,
                                     nullptr, mask.strides, &mask.base))
    return status;
  int64_t n = x.numElements();
  if (n == 0)
    return 0;
  dropout_forward_kernel<<<blocksFor(n), kThreads, 0, context->stream>>>(
      floats(x), floats(args.out(0)), indices(step), mask, seed, key, rate, n);
  return checkLaunch(op);
}

} // namespace
} // namespace loom::cuda

using namespace loom::cuda;

#define LOOM_ROW_KERNEL(name, call)                                            \
  extern "C" int32_t loom_cuda_##name(                                         \
      const loom_call_frame *frame, void *const *buffers, const int64_t *meta, \
      loom_cuda_context *context) {                                            \
    (void)frame;                                                               \
    ProfileScope scope(context, #name);                                        \
    KernelArgs args(buffers, meta);                                            \
    return call;                                                               \
  }

LOOM_ROW_KERNEL(layernorm, layerNorm(args, context))
LOOM_ROW_KERNEL(layernorm_grad, layerNormGrad(args, context))
LOOM_ROW_KERNEL(rmsnorm, rmsNorm(args, context))
LOOM_ROW_KERNEL(rmsnorm_grad, rmsNormGrad(args, context))
LOOM_ROW_KERNEL(gelu,
                activation_forward<Activation::Gelu>(args, context, "gelu"))
LOOM_ROW_KERNEL(gelu_grad, activation_backward<Activation::Gelu>(args, context,
                                                                 "gelu_grad"))
LOOM_ROW_KERNEL(gelu_erf, activation_forward<Activation::GeluErf>(args, context,
                                                                  "gelu_erf"))
LOOM_ROW_KERNEL(gelu_erf_grad,
                activation_backward<Activation::GeluErf>(args, context,
                                                         "gelu_erf_grad"))
LOOM_ROW_KERNEL(silu,
                activation_forward<Activation::Silu>(args, context, "silu"))
LOOM_ROW_KERNEL(silu_grad, activation_backward<Activation::Silu>(args, context,
                                                                 "silu_grad"))
LOOM_ROW_KERNEL(rope,
                rotatePairs<Kernel::rope>(args, frame, context, "rope", 1.0))
LOOM_ROW_KERNEL(rope_grad, rotatePairs<Kernel::rope_grad>(args, frame, context,
                                                          "rope_grad", -1.0))
LOOM_ROW_KERNEL(dropout, applyDropoutMask<Kernel::dropout>(args, frame, context,
                                                           "dropout"))
LOOM_ROW_KERNEL(dropout_grad,
                applyDropoutMask<Kernel::dropout_grad>(args, frame, context,
                                                       "dropout_grad"))

extern "C" int32_t loom_cuda_softmax(const loom_call_frame *,
                                     void *const *buffers, const int64_t *meta,
                                     loom_cuda_context *context) {
  ProfileScope scope(context, "softmax");
  KernelArgs args(buffers, meta);
  if (int32_t status = args.expect("softmax", 1, 1))
    return status;
  bool causal = readAttrs<Kernel::softmax>(args).causal;
  const View &x = args.in(0);
  Rows rows = rowsOf(x);
  if (causal && (x.rank < 2 || x.dims[x.rank - 2] != rows.size))
    return fail("loom_cuda_softmax: causal needs [.., S, S] rows");
  if (rows.count == 0)
    return 0;
  softmax_forward_kernel<<<rowBlocks(rows), threadsForRow(rows.size), 0,
                           context->stream>>>(floats(x), floats(args.out(0)),
                                              rows.count, rows.size, causal);
  return checkLaunch("softmax");
}

/// Operands dy, y; result dx.
extern "C" int32_t loom_cuda_softmax_grad(const loom_call_frame *,
                                          void *const *buffers,
                                          const int64_t *meta,
                                          loom_cuda_context *context) {
  ProfileScope scope(context, "softmax_grad");
  KernelArgs args(buffers, meta);
  if (int32_t status = args.expect("softmax_grad", 2, 1))
    return status;
  Rows rows = rowsOf(args.in(1));
  if (rows.count == 0)
    return 0;
  softmax_backward_kernel<<<rowBlocks(rows), threadsForRow(rows.size), 0,
                            context->stream>>>(
      floats(args.in(0)), floats(args.in(1)), floats(args.out(0)), rows.count,
      rows.size);
  return checkLaunch("softmax_grad");
}
