//===- Norm.cpp - Normalizations, activations, softmax, rope, dropout -----===//
//
// The row-wise and pointwise neural kernels, with the meaning the reference
// interpreter gives them (lib/Interpreter/Norm.cpp, Elementwise.cpp and
// Attention.cpp's rope). Rows are the last dimension, of size D; every
// leading index is another row. Elements are float32; row statistics
// (means, variances, softmax sums) and the dgamma / dbeta sums over rows
// accumulate in double.
//
// Dropout draws each element's mask at its index in the global tensor
// (loom/DropoutMask.h): readMaskIndex turns the mask
// block of the meta (loom_cpu_kernels.h) and this rank's grid coordinates
// into global strides and the global index of local element 0, as
// interp::maskIndices does. Attention.cpp uses it too.
//
//===----------------------------------------------------------------------===//

#include "Activation.h"
#include "KernelArgs.h"

#include "loom/DropoutMask.h"
#include "loom/RopeFrequency.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace loom::cpu {

namespace {

/// Fails unless every tensor of `args` but the operand `except` (-1: none)
/// is float32.
int32_t requireF32(const KernelArgs &args, const char *op,
                   int64_t except = -1) {
  for (int64_t t = 0; t < args.numOperands() + args.numResults(); ++t) {
    const View &view =
        t < args.numOperands() ? args.in(t) : args.out(t - args.numOperands());
    if (t != except && view.dtype != LOOM_DTYPE_F32)
      return fail("loom_cpu_%s: tensor %lld is not f32", op,
                  static_cast<long long>(t));
  }
  return 0;
}

/// Checks the operand count (`operands`, or one more with `residual`: a
/// norm gradient's residual, added to dx) and that `gamma` (operand
/// `gammaIndex`) is [D].
int32_t checkNormShapes(const KernelArgs &args, const char *op,
                        int64_t operands, int64_t gammaIndex,
                        bool residual = false) {
  if (args.numOperands() != operands &&
      !(residual && args.numOperands() == operands + 1))
    return fail("loom_cpu_%s: expected %lld operands%s", op,
                static_cast<long long>(operands),
                residual ? " (one more: a residual added to dx)" : "");
  if (args.numOperands() > operands &&
      args.in(operands).numElements() != args.out(0).numElements())
    return fail("loom_cpu_%s: the residual does not match dx", op);
  if (int32_t status = requireF32(args, op))
    return status;
  const View &gamma = args.in(gammaIndex);
  if (gamma.numElements() != rowsOf(args.out(0)).size)
    return fail("loom_cpu_%s: gamma does not match the rows", op);
  return 0;
}

//===----------------------------------------------------------------------===//
// layernorm, rmsnorm
//===----------------------------------------------------------------------===//

/// A row's mean and 1 / sqrt(biased variance + epsilon), in double.
struct RowMoments {
  double mean, rstd;
};

RowMoments momentsOf(const float *row, int64_t size, double epsilon) {
  double sum = 0.0;
  for (int64_t j = 0; j < size; ++j)
    sum += row[j];
  double mean = sum / static_cast<double>(size);
  double squares = 0.0;
  for (int64_t j = 0; j < size; ++j) {
    double centered = row[j] - mean;
    squares += centered * centered;
  }
  return {mean, 1.0 / std::sqrt(squares / static_cast<double>(size) + epsilon)};
}

/// 1 / sqrt(mean(row^2) + epsilon).
double rmsScale(const float *row, int64_t size, double epsilon) {
  double squares = 0.0;
  for (int64_t j = 0; j < size; ++j)
    squares += static_cast<double>(row[j]) * row[j];
  return 1.0 / std::sqrt(squares / static_cast<double>(size) + epsilon);
}

/// row[j] += residual[j]: a second pass over the stored row, so that each
/// element is rounded before the add, as an add op's operand is.
void addRow(float *row, const float *residual, int64_t size) {
  for (int64_t j = 0; j < size; ++j)
    row[j] += residual[j];
}

/// y = (x - mean) * rstd * gamma + beta.
int32_t layerNorm(KernelArgs &args) {
  if (int32_t status = checkNormShapes(args, "layernorm", 3, 1))
    return status;
  double epsilon = readAttrs<Kernel::layernorm>(args).epsilon;
  const float *x = args.in(0).f32(), *gamma = args.in(1).f32(),
              *beta = args.in(2).f32();
  float *y = args.out(0).f32();
  Rows rows = rowsOf(args.in(0));
  for (int64_t r = 0; r < rows.count; ++r) {
    const float *row = x + r * rows.size;
    float *out = y + r * rows.size;
    RowMoments m = momentsOf(row, rows.size, epsilon);
    float mean = static_cast<float>(m.mean), rstd = static_cast<float>(m.rstd);
    for (int64_t j = 0; j < rows.size; ++j)
      out[j] = (row[j] - mean) * rstd * gamma[j] + beta[j];
  }
  return 0;
}

/// The residual a fused norm gradient adds to dx (its fourth operand), or
/// null.
const float *residualOf(const KernelArgs &args) {
  return args.numOperands() == 4 ? args.in(3).f32() : nullptr;
}

/// With xhat = (x - mean) * rstd and g = dy * gamma:
///   dx     = rstd * (g - mean(g) - xhat * mean(g * xhat)) [+ residual]
///   dgamma = sum over rows of dy * xhat,   dbeta = sum over rows of dy.
/// dx is rounded to float before the residual is added, as a separate add
/// would (the fused call keeps the unfused step's bits).
int32_t layerNormGrad(KernelArgs &args) {
  if (int32_t status = checkNormShapes(args, "layernorm_grad", 3, 2,
                                       /*residual=*/true))
    return status;
  if (args.numResults() != 3)
    return fail("loom_cpu_layernorm_grad: expected dx, dgamma and dbeta");
  double epsilon = readAttrs<Kernel::layernorm_grad>(args).epsilon;
  const float *dy = args.in(0).f32(), *x = args.in(1).f32(),
              *gamma = args.in(2).f32();
  Rows rows = rowsOf(args.in(1));
  const float *residual = residualOf(args);
  std::vector<double> sums(2 * rows.size, 0.0);
  double *dgamma = sums.data(), *dbeta = sums.data() + rows.size;
  float *dx = args.out(0).f32();
  for (int64_t r = 0; r < rows.count; ++r) {
    const float *row = x + r * rows.size, *dyRow = dy + r * rows.size;
    RowMoments m = momentsOf(row, rows.size, epsilon);
    double sumG = 0.0, sumGXhat = 0.0;
    for (int64_t j = 0; j < rows.size; ++j) {
      double xhat = (row[j] - m.mean) * m.rstd;
      double g = static_cast<double>(dyRow[j]) * gamma[j];
      sumG += g;
      sumGXhat += g * xhat;
      dgamma[j] += dyRow[j] * xhat;
      dbeta[j] += dyRow[j];
    }
    float meanG = static_cast<float>(sumG / static_cast<double>(rows.size));
    float meanGXhat =
        static_cast<float>(sumGXhat / static_cast<double>(rows.size));
    float mean = static_cast<float>(m.mean), rstd = static_cast<float>(m.rstd);
    float *dxRow = dx + r * rows.size;
    for (int64_t j = 0; j < rows.size; ++j) {
      float xhat = (row[j] - mean) * rstd;
      dxRow[j] = rstd * (dyRow[j] * gamma[j] - meanG - xhat * meanGXhat);
    }
    if (residual)
      addRow(dxRow, residual + r * rows.size, rows.size);
  }
  for (int64_t j = 0; j < rows.size; ++j) {
    args.out(1).f32()[j] = static_cast<float>(dgamma[j]);
    args.out(2).f32()[j] = static_cast<float>(dbeta[j]);
  }
  return 0;
}

/// y = x * s * gamma, s = rmsScale(x).
int32_t rmsNorm(KernelArgs &args) {
  if (int32_t status = checkNormShapes(args, "rmsnorm", 2, 1))
    return status;
  double epsilon = readAttrs<Kernel::rmsnorm>(args).epsilon;
  const float *x = args.in(0).f32(), *gamma = args.in(1).f32();
  float *y = args.out(0).f32();
  Rows rows = rowsOf(args.in(0));
  for (int64_t r = 0; r < rows.count; ++r) {
    const float *row = x + r * rows.size;
    float *out = y + r * rows.size;
    float s = static_cast<float>(rmsScale(row, rows.size, epsilon));
    for (int64_t j = 0; j < rows.size; ++j)
      out[j] = row[j] * s * gamma[j];
  }
  return 0;
}

/// Since ds/dx_k = -s^3 x_k / D:
///   dx_k   = s * g_k - x_k * s^3 / D * sum_j g_j x_j [+ residual_k],
///            g = dy * gamma
///   dgamma = sum over rows of dy * x * s.
int32_t rmsNormGrad(KernelArgs &args) {
  if (int32_t status = checkNormShapes(args, "rmsnorm_grad", 3, 2,
                                       /*residual=*/true))
    return status;
  if (args.numResults() != 2)
    return fail("loom_cpu_rmsnorm_grad: expected dx and dgamma");
  double epsilon = readAttrs<Kernel::rmsnorm_grad>(args).epsilon;
  const float *dy = args.in(0).f32(), *x = args.in(1).f32(),
              *gamma = args.in(2).f32();
  Rows rows = rowsOf(args.in(1));
  const float *residual = residualOf(args);
  std::vector<double> dgamma(rows.size, 0.0);
  float *dx = args.out(0).f32();
  for (int64_t r = 0; r < rows.count; ++r) {
    const float *row = x + r * rows.size, *dyRow = dy + r * rows.size;
    double s = rmsScale(row, rows.size, epsilon);
    double dot = 0.0;
    for (int64_t j = 0; j < rows.size; ++j) {
      double dyx = static_cast<double>(dyRow[j]) * row[j];
      dot += dyx * gamma[j];
      dgamma[j] += dyx * s;
    }
    float sf = static_cast<float>(s);
    float coefficient =
        static_cast<float>(s * s * s * dot / static_cast<double>(rows.size));
    float *dxRow = dx + r * rows.size;
    for (int64_t j = 0; j < rows.size; ++j)
      dxRow[j] = sf * dyRow[j] * gamma[j] - row[j] * coefficient;
    if (residual)
      addRow(dxRow, residual + r * rows.size, rows.size);
  }
  for (int64_t j = 0; j < rows.size; ++j)
    args.out(1).f32()[j] = static_cast<float>(dgamma[j]);
  return 0;
}

//===----------------------------------------------------------------------===//
// gelu, gelu_erf, silu
//===----------------------------------------------------------------------===//

template <typename Fn>
int32_t pointwise(KernelArgs &args, const char *op, Fn fn) {
  if (args.numOperands() != 1)
    return fail("loom_cpu_%s: expected one operand", op);
  if (int32_t status = requireF32(args, op))
    return status;
  const float *x = args.in(0).f32();
  float *y = args.out(0).f32();
  for (int64_t e = 0, n = args.in(0).numElements(); e < n; ++e)
    y[e] = fn(x[e]);
  return 0;
}

/// dx = dy * derivative(x).
template <typename Fn>
int32_t pointwiseGrad(KernelArgs &args, const char *op, Fn derivative) {
  if (args.numOperands() != 2)
    return fail("loom_cpu_%s: expected dy and x", op);
  if (int32_t status = requireF32(args, op))
    return status;
  const float *dy = args.in(0).f32(), *x = args.in(1).f32();
  float *dx = args.out(0).f32();
  for (int64_t e = 0, n = args.in(1).numElements(); e < n; ++e)
    dx[e] = dy[e] * derivative(x[e]);
  return 0;
}

//===----------------------------------------------------------------------===//
// softmax
//===----------------------------------------------------------------------===//

/// exp(x - max(x)) / sum(exp(x - max(x))) along each row. Causal: row r is
/// row i = r mod D of a [D, D] matrix and only its first i + 1 elements
/// take part; the others are 0.
int32_t softmax(KernelArgs &args) {
  if (int32_t status = requireF32(args, "softmax"))
    return status;
  bool causal = readAttrs<Kernel::softmax>(args).causal;
  const View &xView = args.in(0);
  Rows rows = rowsOf(xView);
  if (causal && (xView.rank < 2 || xView.dims[xView.rank - 2] != rows.size))
    return fail("loom_cpu_softmax: causal needs [.., S, S] rows");
  const float *x = xView.f32();
  float *y = args.out(0).f32();
  for (int64_t r = 0; r < rows.count; ++r) {
    const float *row = x + r * rows.size;
    float *out = y + r * rows.size;
    int64_t used = causal ? r % rows.size + 1 : rows.size;
    float max = row[0];
    for (int64_t j = 1; j < used; ++j)
      max = std::fmax(max, row[j]);
    double sum = 0.0;
    for (int64_t j = 0; j < used; ++j)
      sum += out[j] = std::exp(row[j] - max);
    float inverse = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j < used; ++j)
      out[j] *= inverse;
    for (int64_t j = used; j < rows.size; ++j)
      out[j] = 0.0f;
  }
  return 0;
}

/// dx = y * (dy - sum(dy * y)) along each row.
int32_t softmaxGrad(KernelArgs &args) {
  if (args.numOperands() != 2)
    return fail("loom_cpu_softmax_grad: expected dy and y");
  if (int32_t status = requireF32(args, "softmax_grad"))
    return status;
  const float *dy = args.in(0).f32(), *y = args.in(1).f32();
  float *dx = args.out(0).f32();
  Rows rows = rowsOf(args.in(1));
  for (int64_t r = 0; r < rows.count; ++r) {
    const float *yRow = y + r * rows.size, *dyRow = dy + r * rows.size;
    double dot = 0.0;
    for (int64_t j = 0; j < rows.size; ++j)
      dot += static_cast<double>(dyRow[j]) * yRow[j];
    float dotF = static_cast<float>(dot);
    float *dxRow = dx + r * rows.size;
    for (int64_t j = 0; j < rows.size; ++j)
      dxRow[j] = yRow[j] * (dyRow[j] - dotF);
  }
  return 0;
}

//===----------------------------------------------------------------------===//
// rope
//===----------------------------------------------------------------------===//

/// Rotates each pair (x[i], x[i + D/2]) of `x` [B, S, H, D] at position s
/// (along dimension 1, global: a shard of the sequence starts at its
/// position block's offset) by `direction * s * theta^(-2i/D)`: +1 for
/// rope, -1 for its gradient (the inverse rotation).
template <Kernel K>
int32_t rotatePairs(KernelArgs &args, const loom_call_frame *frame,
                    const char *op, double direction) {
  if (args.numOperands() != 1)
    return fail("loom_cpu_%s: expected one operand", op);
  if (int32_t status = requireF32(args, op))
    return status;
  auto attrs = readAttrs<K>(args);
  double theta = attrs.theta;
  RopeScaling scaling;
  scaling.factor = attrs.scaling_factor;
  scaling.lowFreqFactor = attrs.low_freq_factor;
  scaling.highFreqFactor = attrs.high_freq_factor;
  scaling.originalMaxPositions = attrs.original_max_positions;
  const View &xView = args.in(0);
  if (xView.rank != 4 || xView.dims[3] % 2 != 0)
    return fail("loom_cpu_%s: expected [B, S, H, D] with even D", op);
  int64_t batch = xView.dims[0], seq = xView.dims[1], heads = xView.dims[2],
          dim = xView.dims[3], half = dim / 2;
  int64_t start = 0;
  char error[256];
  if (!kernels::readPositionStart(args, frame, attrs.has_positions, xView.dims,
                                  4, 1, &start, error, sizeof error))
    return fail("loom_cpu_%s: %s", op, error);
  // cos and sin of every (position, pair), shared by batches and heads.
  std::vector<float> table(2 * seq * half);
  for (int64_t s = 0; s < seq; ++s)
    for (int64_t i = 0; i < half; ++i) {
      double frequency = ropeFrequency(i, dim, theta, scaling);
      double angle = direction * static_cast<double>(start + s) * frequency;
      table[2 * (s * half + i)] = static_cast<float>(std::cos(angle));
      table[2 * (s * half + i) + 1] = static_cast<float>(std::sin(angle));
    }
  const float *x = xView.f32();
  float *y = args.out(0).f32();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < seq; ++s) {
      const float *angles = &table[2 * s * half];
      for (int64_t h = 0; h < heads; ++h) {
        int64_t base = ((b * seq + s) * heads + h) * dim;
        for (int64_t i = 0; i < half; ++i) {
          float c = angles[2 * i], sn = angles[2 * i + 1];
          float x1 = x[base + i], x2 = x[base + i + half];
          y[base + i] = x1 * c - x2 * sn;
          y[base + i + half] = x2 * c + x1 * sn;
        }
      }
    }
  return 0;
}

//===----------------------------------------------------------------------===//
// dropout
//===----------------------------------------------------------------------===//

/// `x` (or `dy`) times the mask of DropoutMask.h, kept elements scaled by
/// 1 / (1 - rate): dropout is linear in `x`, so its gradient applies the
/// same mask to `dy`.
template <Kernel K>
int32_t applyDropoutMask(KernelArgs &args, const loom_call_frame *frame,
                         const char *op) {
  if (args.numOperands() != 2)
    return fail("loom_cpu_%s: expected the tensor and the step", op);
  if (int32_t status = requireF32(args, op, /*except=*/1))
    return status;
  const View &x = args.in(0), &step = args.in(1);
  if (step.dtype != LOOM_DTYPE_I32 && step.dtype != LOOM_DTYPE_I64)
    return fail("loom_cpu_%s: the step is not an integer", op);
  auto attrs = readAttrs<K>(args);
  double rate = attrs.rate;
  uint64_t seed = static_cast<uint64_t>(attrs.seed);
  uint64_t key = static_cast<uint64_t>(attrs.key);
  if (x.rank > kMaxRank)
    return fail("loom_cpu_%s: rank %lld is over %d", op,
                static_cast<long long>(x.rank), kMaxRank);
  int64_t strides[kMaxRank], base;
  if (int32_t status = readMaskIndex(args, frame, x.rank, x.dims, x.rank,
                                     nullptr, strides, &base))
    return status;
  uint64_t stepValue = static_cast<uint64_t>(step.index(0));
  double scale = 1.0 / (1.0 - rate);
  const float *in = x.f32();
  float *out = args.out(0).f32();
  // Rows of the last dimension, whose global stride is 1; `position` counts
  // the leading dimensions.
  Rows rows = rowsOf(x);
  int64_t position[kMaxRank] = {};
  for (int64_t r = 0; r < rows.count; ++r) {
    int64_t rowIndex = base;
    for (int64_t d = 0; d + 1 < x.rank; ++d)
      rowIndex += position[d] * strides[d];
    for (int64_t j = 0; j < rows.size; ++j) {
      int64_t e = r * rows.size + j;
      uint64_t index = static_cast<uint64_t>(rowIndex + j);
      out[e] = dropoutKeeps(seed, key, stepValue, index, rate)
                   ? static_cast<float>(in[e] * scale)
                   : 0.0f;
    }
    for (int64_t d = x.rank - 2; d >= 0; --d) {
      if (++position[d] < x.dims[d])
        break;
      position[d] = 0;
    }
  }
  return 0;
}

} // namespace

} // namespace loom::cpu

using namespace loom::cpu;

extern "C" {

int32_t loom_cpu_layernorm(const loom_call_frame *, void *const *buffers,
                           const int64_t *meta) {
  KernelArgs args(buffers, meta);
  return layerNorm(args);
}

int32_t loom_cpu_layernorm_grad(const loom_call_frame *, void *const *buffers,
                                const int64_t *meta) {
  KernelArgs args(buffers, meta);
  return layerNormGrad(args);
}

int32_t loom_cpu_rmsnorm(const loom_call_frame *, void *const *buffers,
                         const int64_t *meta) {
  KernelArgs args(buffers, meta);
  return rmsNorm(args);
}

int32_t loom_cpu_rmsnorm_grad(const loom_call_frame *, void *const *buffers,
                              const int64_t *meta) {
  KernelArgs args(buffers, meta);
  return rmsNormGrad(args);
}

int32_t loom_cpu_gelu(const loom_call_frame *, void *const *buffers,
                      const int64_t *meta) {
  KernelArgs args(buffers, meta);
  return pointwise(args, "gelu", gelu);
}

int32_t loom_cpu_gelu_grad(const loom_call_frame *, void *const *buffers,
                           const int64_t *meta) {
  KernelArgs args(buffers, meta);
  return pointwiseGrad(args, "gelu_grad", geluDerivative);
}

int32_t loom_cpu_gelu_erf(const loom_call_frame *, void *const *buffers,
                          const int64_t *meta) {
  KernelArgs args(buffers, meta);
  return pointwise(args, "gelu_erf", geluErf);
}

int32_t loom_cpu_gelu_erf_grad(const loom_call_frame *, void *const *buffers,
                               const int64_t *meta) {
  KernelArgs args(buffers, meta);
  return pointwiseGrad(args, "gelu_erf_grad", geluErfDerivative);
}

int32_t loom_cpu_silu(const loom_call_frame *, void *const *buffers,
                      const int64_t *meta) {
  KernelArgs args(buffers, meta);
  return pointwise(args, "silu", silu);
}

int32_t loom_cpu_silu_grad(const loom_call_frame *, void *const *buffers,
                           const int64_t *meta) {
  KernelArgs args(buffers, meta);
  return pointwiseGrad(args, "silu_grad", siluDerivative);
}

int32_t loom_cpu_softmax(const loom_call_frame *, void *const *buffers,
                         const int64_t *meta) {
  KernelArgs args(buffers, meta);
  return softmax(args);
}

int32_t loom_cpu_softmax_grad(const loom_call_frame *, void *const *buffers,
                              const int64_t *meta) {
  KernelArgs args(buffers, meta);
  return softmaxGrad(args);
}

int32_t loom_cpu_rope(const loom_call_frame *frame, void *const *buffers,
                      const int64_t *meta) {
  KernelArgs args(buffers, meta);
  return rotatePairs<Kernel::rope>(args, frame, "rope", 1.0);
}

int32_t loom_cpu_rope_grad(const loom_call_frame *frame, void *const *buffers,
                           const int64_t *meta) {
  KernelArgs args(buffers, meta);
  return rotatePairs<Kernel::rope_grad>(args, frame, "rope_grad", -1.0);
}

int32_t loom_cpu_dropout(const loom_call_frame *frame, void *const *buffers,
                         const int64_t *meta) {
  KernelArgs args(buffers, meta);
  return applyDropoutMask<Kernel::dropout>(args, frame, "dropout");
}

int32_t loom_cpu_dropout_grad(const loom_call_frame *frame,
                              void *const *buffers, const int64_t *meta) {
  KernelArgs args(buffers, meta);
  return applyDropoutMask<Kernel::dropout_grad>(args, frame, "dropout_grad");
}

} // extern "C"
