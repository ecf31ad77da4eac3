//===- Linear.cpp - Matmul, embedding and cross-entropy -------------------===//
//
// The ops that carry the model's weights and its loss, with the gradients of
// embedding and cross-entropy. Matmul brings both operands to row-major
// [M, K] x [K, N] blocks and runs the i-k-j loop, whose inner loop walks
// rows of the rhs and the result contiguously.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include "dialects/Loom/LoomOps.h"

#include <cmath>

using namespace mlir;

namespace loom::interp {

//===----------------------------------------------------------------------===//
// matmul
//===----------------------------------------------------------------------===//

/// The elements of `x` with its last two dimensions swapped.
static std::vector<double> transposeLastTwo(const Tensor &x) {
  int64_t rows = x.shape()[x.rank() - 2], cols = x.shape().back();
  int64_t batch = x.numElements() / (rows * cols);
  std::vector<double> t(x.f().size());
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        t[(b * cols + c) * rows + r] = x.f()[(b * rows + r) * cols + c];
  return t;
}

/// `lhs` is [B..., M, K] and `rhs` [K, N] (shared by every batch element) or
/// [B..., K, N], after the transposes the attributes ask for.
static Tensor matmul(MatmulOp op, const Tensor &lhs, const Tensor &rhs) {
  ArrayRef<int64_t> shape = shapeOf(op);
  int64_t m = shape[shape.size() - 2], n = shape.back();
  int64_t k =
      op.getTransposeLhs() ? lhs.shape()[lhs.rank() - 2] : lhs.shape().back();
  int64_t batch = numElementsOf(shape) / (m * n);
  std::vector<double> lhsT, rhsT;
  if (op.getTransposeLhs())
    lhsT = transposeLastTwo(lhs);
  if (op.getTransposeRhs())
    rhsT = transposeLastTwo(rhs);
  const double *a = op.getTransposeLhs() ? lhsT.data() : lhs.f().data();
  const double *b = op.getTransposeRhs() ? rhsT.data() : rhs.f().data();
  bool sharedRhs = rhs.rank() == 2;

  std::vector<double> c(batch * m * n, 0.0);
  for (int64_t bi = 0; bi < batch; ++bi) {
    const double *aBlock = a + bi * m * k;
    const double *bBlock = b + (sharedRhs ? 0 : bi * k * n);
    double *cBlock = c.data() + bi * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p) {
        double aip = aBlock[i * k + p];
        const double *bRow = bBlock + p * n;
        double *cRow = cBlock + i * n;
        for (int64_t j = 0; j < n; ++j)
          cRow[j] += aip * bRow[j];
      }
  }
  return floatsLike(op, std::move(c));
}

//===----------------------------------------------------------------------===//
// embedding
//===----------------------------------------------------------------------===//

/// Checks that every id is a row of a [vocab, ...] table.
static llvm::Error checkIds(Operation *op, const Tensor &ids, int64_t vocab,
                            llvm::StringRef what) {
  for (size_t e = 0; e < ids.i().size(); ++e)
    if (ids.i()[e] < 0 || ids.i()[e] >= vocab)
      return opError(op, llvm::Twine(what) + " " + llvm::Twine(ids.i()[e]) +
                             " at flat index " + llvm::Twine(e) +
                             " is outside [0, " + llvm::Twine(vocab) + ")");
  return llvm::Error::success();
}

static llvm::Expected<Results> embedding(EmbeddingOp op, const Tensor &table,
                                         const Tensor &ids) {
  int64_t vocab = table.shape()[0], dim = table.shape()[1];
  if (llvm::Error error = checkIds(op, ids, vocab, "id"))
    return std::move(error);
  std::vector<double> rows(ids.i().size() * dim);
  for (size_t t = 0; t < ids.i().size(); ++t)
    std::copy_n(table.f().begin() + ids.i()[t] * dim, dim,
                rows.begin() + t * dim);
  return Results{floatsLike(op, std::move(rows))};
}

/// Scatter-adds each row of `dy` into the row of its id.
static llvm::Expected<Results>
embeddingGrad(EmbeddingGradOp op, const Tensor &dy, const Tensor &ids) {
  int64_t vocab = shapeOf(op)[0], dim = shapeOf(op)[1];
  if (llvm::Error error = checkIds(op, ids, vocab, "id"))
    return std::move(error);
  std::vector<double> dtable(vocab * dim, 0.0);
  for (size_t t = 0; t < ids.i().size(); ++t)
    for (int64_t d = 0; d < dim; ++d)
      dtable[ids.i()[t] * dim + d] += dy.f()[t * dim + d];
  return Results{floatsLike(op, std::move(dtable))};
}

//===----------------------------------------------------------------------===//
// cross_entropy
//===----------------------------------------------------------------------===//

/// log(sum(exp(row))), computed stably from the row's maximum.
static double logSumExp(const double *row, int64_t size) {
  double max = *std::max_element(row, row + size);
  if (std::isinf(max))
    return max;
  double sum = 0.0;
  for (int64_t v = 0; v < size; ++v)
    sum += std::exp(row[v] - max);
  return max + std::log(sum);
}

/// The mean over tokens of logsumexp(logits[t]) - logits[t, labels[t]]
/// (the sum over `token_count` when set).
static llvm::Expected<Results>
crossEntropy(CrossEntropyOp op, const Tensor &logits, const Tensor &labels) {
  int64_t vocab = logits.shape().back();
  if (llvm::Error error = checkIds(op, labels, vocab, "label"))
    return std::move(error);
  int64_t tokens = labels.numElements();
  double denominator = op.getTokenCount() ? *op.getTokenCount() : tokens;
  double total = 0.0;
  for (int64_t t = 0; t < tokens; ++t) {
    const double *row = logits.f().data() + t * vocab;
    total += logSumExp(row, vocab) - row[labels.i()[t]];
  }
  return Results{floatsLike(op, {total / denominator})};
}

/// dlogits[t] = dloss * (softmax(logits[t]) - onehot(labels[t])) / T.
static llvm::Expected<Results> crossEntropyGrad(CrossEntropyGradOp op,
                                                const Tensor &dloss,
                                                const Tensor &logits,
                                                const Tensor &labels) {
  int64_t vocab = logits.shape().back();
  if (llvm::Error error = checkIds(op, labels, vocab, "label"))
    return std::move(error);
  int64_t tokens = labels.numElements();
  double scale = dloss.f().front() /
                 double(op.getTokenCount() ? *op.getTokenCount() : tokens);
  std::vector<double> dlogits(logits.f().size());
  for (int64_t t = 0; t < tokens; ++t) {
    const double *row = logits.f().data() + t * vocab;
    double lse = logSumExp(row, vocab);
    double *drow = dlogits.data() + t * vocab;
    for (int64_t v = 0; v < vocab; ++v)
      drow[v] = scale * std::exp(row[v] - lse);
    drow[labels.i()[t]] -= scale;
  }
  return Results{floatsLike(op, std::move(dlogits))};
}

void addLinearKernels(KernelTable &table) {
  table.add<MatmulOp>(
      [](MatmulOp op, Operands in) { return matmul(op, *in[0], *in[1]); });
  table.add<EmbeddingOp>([](EmbeddingOp op, Operands in) {
    return embedding(op, *in[0], *in[1]);
  });
  table.add<EmbeddingGradOp>([](EmbeddingGradOp op, Operands in) {
    return embeddingGrad(op, *in[0], *in[1]);
  });
  table.add<CrossEntropyOp>([](CrossEntropyOp op, Operands in) {
    return crossEntropy(op, *in[0], *in[1]);
  });
  table.add<CrossEntropyGradOp>([](CrossEntropyGradOp op, Operands in) {
    return crossEntropyGrad(op, *in[0], *in[1], *in[2]);
  });
}

} // namespace loom::interp
