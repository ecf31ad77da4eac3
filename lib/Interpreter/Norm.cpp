//===- Norm.cpp - Layer/RMS normalization and softmax with gradients ------===//
//
// All of them work on rows: the last dimension, of size D, is one row and
// every leading index another. The gradients recompute the row statistics
// from the forward input, as the ops' descriptions say; the derivations are
// written next to each formula.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include "dialects/Loom/LoomOps.h"

#include <cmath>

using namespace mlir;

namespace loom::interp {

/// The length D of the rows of `x` and their number.
static std::pair<int64_t, int64_t> rowsOf(const Tensor &x) {
  int64_t size = x.shape().back();
  return {size, x.numElements() / size};
}

//===----------------------------------------------------------------------===//
// layernorm
//===----------------------------------------------------------------------===//

namespace {
/// A row's mean and 1 / sqrt(biased variance + epsilon).
struct RowMoments {
  double mean, rstd;
};
} // namespace

static RowMoments momentsOf(const double *row, int64_t size, double epsilon) {
  double sum = 0.0;
  for (int64_t j = 0; j < size; ++j)
    sum += row[j];
  double mean = sum / static_cast<double>(size);
  double squares = 0.0;
  for (int64_t j = 0; j < size; ++j)
    squares += (row[j] - mean) * (row[j] - mean);
  double variance = squares / static_cast<double>(size);
  return {mean, 1.0 / std::sqrt(variance + epsilon)};
}

/// y = (x - mean) * rstd * gamma + beta.
static Tensor layerNorm(LayerNormOp op, const Tensor &x, const Tensor &gamma,
                        const Tensor &beta) {
  auto [size, rows] = rowsOf(x);
  double epsilon = op.getEpsilon().convertToDouble();
  std::vector<double> y(x.f().size());
  for (int64_t r = 0; r < rows; ++r) {
    const double *row = x.f().data() + r * size;
    RowMoments m = momentsOf(row, size, epsilon);
    for (int64_t j = 0; j < size; ++j)
      y[r * size + j] = (row[j] - m.mean) * m.rstd * gamma.f()[j] + beta.f()[j];
  }
  return floatsLike(op, std::move(y));
}

/// With xhat = (x - mean) * rstd and g = dy * gamma (the gradient of xhat):
///   dx     = rstd * (g - mean(g) - xhat * mean(g * xhat))
///   dgamma = sum over rows of dy * xhat,   dbeta = sum over rows of dy.
static Results layerNormGrad(LayerNormGradOp op, const Tensor &dy,
                             const Tensor &x, const Tensor &gamma) {
  auto [size, rows] = rowsOf(x);
  double epsilon = op.getEpsilon().convertToDouble();
  std::vector<double> dx(x.f().size()), dgamma(size, 0.0), dbeta(size, 0.0);
  std::vector<double> xhat(size), g(size);
  for (int64_t r = 0; r < rows; ++r) {
    const double *row = x.f().data() + r * size;
    const double *dyRow = dy.f().data() + r * size;
    RowMoments m = momentsOf(row, size, epsilon);
    double meanG = 0.0, meanGXhat = 0.0;
    for (int64_t j = 0; j < size; ++j) {
      xhat[j] = (row[j] - m.mean) * m.rstd;
      g[j] = dyRow[j] * gamma.f()[j];
      meanG += g[j];
      meanGXhat += g[j] * xhat[j];
      dgamma[j] += dyRow[j] * xhat[j];
      dbeta[j] += dyRow[j];
    }
    meanG /= static_cast<double>(size);
    meanGXhat /= static_cast<double>(size);
    for (int64_t j = 0; j < size; ++j)
      dx[r * size + j] = m.rstd * (g[j] - meanG - xhat[j] * meanGXhat);
  }
  return {floatsLike(op.getDx(), std::move(dx)),
          floatsLike(op.getDgamma(), std::move(dgamma)),
          floatsLike(op.getDbeta(), std::move(dbeta))};
}

//===----------------------------------------------------------------------===//
// rmsnorm
//===----------------------------------------------------------------------===//

/// 1 / sqrt(mean(row^2) + epsilon).
static double rmsScale(const double *row, int64_t size, double epsilon) {
  double squares = 0.0;
  for (int64_t j = 0; j < size; ++j)
    squares += row[j] * row[j];
  return 1.0 / std::sqrt(squares / static_cast<double>(size) + epsilon);
}

/// y = x * s * gamma, s = rmsScale(x).
static Tensor rmsNorm(RMSNormOp op, const Tensor &x, const Tensor &gamma) {
  auto [size, rows] = rowsOf(x);
  double epsilon = op.getEpsilon().convertToDouble();
  std::vector<double> y(x.f().size());
  for (int64_t r = 0; r < rows; ++r) {
    const double *row = x.f().data() + r * size;
    double s = rmsScale(row, size, epsilon);
    for (int64_t j = 0; j < size; ++j)
      y[r * size + j] = row[j] * s * gamma.f()[j];
  }
  return floatsLike(op, std::move(y));
}

/// Since ds/dx_k = -s^3 x_k / D:
///   dx_k   = s * g_k - x_k * s^3 / D * sum_j g_j x_j,  g = dy * gamma
///   dgamma = sum over rows of dy * x * s.
static Results rmsNormGrad(RMSNormGradOp op, const Tensor &dy, const Tensor &x,
                           const Tensor &gamma) {
  auto [size, rows] = rowsOf(x);
  double epsilon = op.getEpsilon().convertToDouble();
  std::vector<double> dx(x.f().size()), dgamma(size, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const double *row = x.f().data() + r * size;
    const double *dyRow = dy.f().data() + r * size;
    double s = rmsScale(row, size, epsilon);
    double dot = 0.0;
    for (int64_t j = 0; j < size; ++j) {
      dot += dyRow[j] * gamma.f()[j] * row[j];
      dgamma[j] += dyRow[j] * row[j] * s;
    }
    double coefficient = s * s * s * dot / static_cast<double>(size);
    for (int64_t j = 0; j < size; ++j)
      dx[r * size + j] = s * dyRow[j] * gamma.f()[j] - row[j] * coefficient;
  }
  return {floatsLike(op.getDx(), std::move(dx)),
          floatsLike(op.getDgamma(), std::move(dgamma))};
}

//===----------------------------------------------------------------------===//
// softmax
//===----------------------------------------------------------------------===//

/// exp(x - max(x)) / sum(exp(x - max(x))) along each row. Causal: row r
/// is row i = r mod S of an [S, S] matrix and only its first i + 1 elements
/// take part; the others are 0.
static Tensor softmax(SoftmaxOp op, const Tensor &x) {
  auto [size, rows] = rowsOf(x);
  std::vector<double> y(x.f().size(), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t used = op.getCausal() ? r % size + 1 : size;
    const double *row = x.f().data() + r * size;
    double *out = y.data() + r * size;
    double max = *std::max_element(row, row + used);
    double sum = 0.0;
    for (int64_t j = 0; j < used; ++j)
      sum += out[j] = std::exp(row[j] - max);
    for (int64_t j = 0; j < used; ++j)
      out[j] /= sum;
  }
  return floatsLike(op, std::move(y));
}

/// dx = y * (dy - sum(dy * y)) along each row.
static Tensor softmaxGrad(SoftmaxGradOp op, const Tensor &dy, const Tensor &y) {
  auto [size, rows] = rowsOf(y);
  std::vector<double> dx(y.f().size());
  for (int64_t r = 0; r < rows; ++r) {
    const double *yRow = y.f().data() + r * size;
    const double *dyRow = dy.f().data() + r * size;
    double dot = 0.0;
    for (int64_t j = 0; j < size; ++j)
      dot += dyRow[j] * yRow[j];
    for (int64_t j = 0; j < size; ++j)
      dx[r * size + j] = yRow[j] * (dyRow[j] - dot);
  }
  return floatsLike(op, std::move(dx));
}

void addNormKernels(KernelTable &table) {
  table.add<LayerNormOp>([](LayerNormOp op, Operands in) {
    return layerNorm(op, *in[0], *in[1], *in[2]);
  });
  table.add<LayerNormGradOp>([](LayerNormGradOp op, Operands in) {
    return layerNormGrad(op, *in[0], *in[1], *in[2]);
  });
  table.add<RMSNormOp>(
      [](RMSNormOp op, Operands in) { return rmsNorm(op, *in[0], *in[1]); });
  table.add<RMSNormGradOp>([](RMSNormGradOp op, Operands in) {
    return rmsNormGrad(op, *in[0], *in[1], *in[2]);
  });
  table.add<SoftmaxOp>(
      [](SoftmaxOp op, Operands in) { return softmax(op, *in[0]); });
  table.add<SoftmaxGradOp>([](SoftmaxGradOp op, Operands in) {
    return softmaxGrad(op, *in[0], *in[1]);
  });
}

} // namespace loom::interp
