//===- Linear.cpp - Matmul, embedding and cross-entropy -------------------===//
//
// The ops that carry the model's weights and its loss, with the gradients of
// embedding and cross-entropy. Matmul is one OpenBLAS GEMM per batch element
// (a single one when a shared rhs lets the batch fold into M). Ids and
// labels outside the vocabulary fail the kernel, as they fail the
// interpreter; cross-entropy has no ignore index.
//
//===----------------------------------------------------------------------===//

#include "Activation.h"
#include "KernelArgs.h"
#include "MatmulEpilogue.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace loom::cpu {
namespace {

//===----------------------------------------------------------------------===//
// matmul
//===----------------------------------------------------------------------===//

/// C[m, n] = op(A) op(B), all row-major: A is [m, k] ([k, m] when
/// `transA`), B is [k, n] ([n, k] when `transB`).
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
          const float *a, const float *b, float *c) {
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a,
              transA ? m : k, b, transB ? k : n, 0.0f, c, n);
}

void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
          const double *a, const double *b, double *c) {
  cblas_dgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, m, n, k, 1.0, a,
              transA ? m : k, b, transB ? k : n, 0.0, c, n);
}

/// `lhs` is [B..., M, K] and `rhs` [K, N] (shared by every batch element) or
/// [B..., K, N], before the transposes the attributes ask for.
template <typename T>
void matmul(const View &lhs, const View &rhs, const View &out,
            bool transposeLhs, bool transposeRhs) {
  int64_t m = out.dims[out.rank - 2], n = out.dims[out.rank - 1];
  int64_t k = transposeLhs ? lhs.dims[lhs.rank - 2] : lhs.dims[lhs.rank - 1];
  if (m * n == 0)
    return; // an empty result (and no batch count to divide out)
  int64_t batch = out.numElements() / (m * n);
  const T *a = static_cast<const T *>(lhs.data);
  const T *b = static_cast<const T *>(rhs.data);
  T *c = static_cast<T *>(out.data);
  bool sharedRhs = rhs.rank == 2;
  // The batch elements of an untransposed lhs are consecutive rows of one
  // [B * M, K] matrix.
  if (sharedRhs && !transposeLhs) {
    gemm(false, transposeRhs, batch * m, n, k, a, b, c);
    return;
  }
  for (int64_t i = 0; i < batch; ++i)
    gemm(transposeLhs, transposeRhs, m, n, k, a + i * m * k,
         b + (sharedRhs ? 0 : i * k * n), c + i * m * n);
}

//===----------------------------------------------------------------------===//
// embedding
//===----------------------------------------------------------------------===//

bool isIndexType(loom_dtype dtype) {
  return dtype == LOOM_DTYPE_I32 || dtype == LOOM_DTYPE_I64;
}

/// Checks that every element of `ids` is in [0, vocab); fails naming the
/// first that is not, as the interpreter's message does.
int32_t checkIds(const char *op, const char *what, const View &ids,
                 int64_t vocab) {
  if (!isIndexType(ids.dtype))
    return fail("%s: %ss of element type %d are neither i32 nor i64", op, what,
                static_cast<int>(ids.dtype));
  for (int64_t e = 0, n = ids.numElements(); e < n; ++e) {
    int64_t id = ids.index(e);
    if (id < 0 || id >= vocab)
      return fail("%s: %s %lld at flat index %lld is outside [0, %lld)", op,
                  what, static_cast<long long>(id), static_cast<long long>(e),
                  static_cast<long long>(vocab));
  }
  return 0;
}

/// Scatter-adds each row of `dy` into the row of its id, from zeros.
template <typename T>
void embeddingGrad(const View &dyView, const View &ids, const View &out) {
  const T *dy = static_cast<const T *>(dyView.data);
  T *table = static_cast<T *>(out.data);
  int64_t dim = out.dims[1];
  std::memset(table, 0, out.numElements() * sizeof(T));
  for (int64_t t = 0, n = ids.numElements(); t < n; ++t) {
    T *row = table + ids.index(t) * dim;
    const T *dyRow = dy + t * dim;
    for (int64_t d = 0; d < dim; ++d)
      row[d] += dyRow[d];
  }
}

//===----------------------------------------------------------------------===//
// cross_entropy
//===----------------------------------------------------------------------===//

/// The maximum of a row, as std::max_element finds it (a leading NaN
/// stays, later ones are passed over), over four independent lanes.
template <typename T> T rowMax(const T *row, int64_t size) {
  T lanes[4] = {row[0], row[0], row[0], row[0]};
  int64_t v = 1;
  for (; v + 4 <= size; v += 4)
    for (int j = 0; j < 4; ++j)
      lanes[j] = row[v + j] > lanes[j] ? row[v + j] : lanes[j];
  for (; v < size; ++v)
    lanes[0] = row[v] > lanes[0] ? row[v] : lanes[0];
  T max = lanes[0];
  for (int j = 1; j < 4; ++j)
    max = lanes[j] > max ? lanes[j] : max;
  return max;
}

/// y[v] = exp(x[v] - shift) for a run; returns their sum, in double. The
/// exponentials are computed first and summed after, so that the calls do
/// not wait on the sum.
template <typename T> double expShifted(const T *x, int64_t n, T shift, T *y) {
  for (int64_t v = 0; v < n; ++v)
    y[v] = std::exp(x[v] - shift);
  return sumRun(y, n);
}

/// log(sum(exp(row))), stable from the row's maximum, summed in double.
template <typename T> double logSumExp(const T *row, int64_t size) {
  T max = rowMax(row, size);
  if (std::isinf(max))
    return max;
  constexpr int64_t kChunk = 1024;
  T chunk[kChunk];
  double sum = 0.0;
  for (int64_t v = 0; v < size; v += kChunk)
    sum += expShifted(row + v, std::min(kChunk, size - v), max, chunk);
  return static_cast<double>(max) + std::log(sum);
}

/// The sum over tokens of logsumexp(logits[t]) - logits[t, labels[t]].
template <typename T>
double crossEntropySum(const View &logitsView, const View &labels) {
  const T *logits = static_cast<const T *>(logitsView.data);
  int64_t vocab = logitsView.dims[logitsView.rank - 1];
  double total = 0.0;
  for (int64_t t = 0, n = labels.numElements(); t < n; ++t) {
    const T *row = logits + t * vocab;
    total += logSumExp(row, vocab) - static_cast<double>(row[labels.index(t)]);
  }
  return total;
}

/// dlogits[t] = scale * (softmax(logits[t]) - onehot(labels[t])).
template <typename T>
void crossEntropyGrad(double scale, const View &logitsView, const View &labels,
                      const View &out) {
  const T *logits = static_cast<const T *>(logitsView.data);
  T *dlogits = static_cast<T *>(out.data);
  int64_t vocab = logitsView.dims[logitsView.rank - 1];
  for (int64_t t = 0, n = labels.numElements(); t < n; ++t) {
    const T *row = logits + t * vocab;
    T *drow = dlogits + t * vocab;
    T max = rowMax(row, vocab);
    // exp(row - max) once, kept in drow, then scaled by 1 / sum. With an
    // infinite maximum the interpreter's logSumExp is the maximum itself:
    // the sum is taken as 1.
    double sum = expShifted(row, vocab, max, drow);
    if (std::isinf(max))
      sum = 1.0;
    double factor = scale / sum;
    int64_t label = labels.index(t);
    double atLabel = drow[label];
    for (int64_t v = 0; v < vocab; ++v)
      drow[v] = static_cast<T>(drow[v] * factor);
    drow[label] = static_cast<T>(atLabel * factor - scale);
  }
}

/// Reads a 0-d float tensor.
double scalarOf(const View &view) {
  return view.dtype == LOOM_DTYPE_F64 ? *view.f64() : *view.f32();
}

bool isFloatType(loom_dtype dtype) {
  return dtype == LOOM_DTYPE_F32 || dtype == LOOM_DTYPE_F64;
}

/// The epilogue after the product in results[0] (loom_cpu_kernels.h), in
/// the order and precision of the ops it stands for: the bias added, then
/// the residual, each sum rounded to f32; gelu_grad's dy * gelu'(pre); a
/// bias gradient summed over rows in double, as reduce_sum does. So a
/// fused f32 step computes the same bits as the unfused one.
void applyEpilogue(const KernelArgs &args, int64_t epilogue) {
  kernels::EpilogueForm form;
  kernels::epilogueForm(epilogue, form);
  const View &out = args.out(0);
  int64_t n = out.dims[out.rank - 1];
  int64_t rows = n == 0 ? 0 : out.numElements() / n;
  float *sum = out.f32();
  const float *bias = form.bias >= 0 ? args.in(form.bias).f32() : nullptr;
  const float *residual =
      form.residual >= 0 ? args.in(form.residual).f32() : nullptr;
  const float *pre = form.pre >= 0 ? args.in(form.pre).f32() : nullptr;
  float *activation = form.keepsSum ? args.out(1).f32() : sum;
  bool elementwise = bias || residual || pre || form.gelu;
  for (int64_t r = 0; elementwise && r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      int64_t e = r * n + j;
      float x = sum[e];
      if (bias)
        x = x + bias[j];
      if (residual)
        x = x + residual[e];
      if (pre)
        x = x * geluDerivative(pre[e]);
      sum[e] = x;
      if (form.gelu)
        activation[e] = gelu(x);
    }
  if (!form.biasGrad)
    return;
  // bias_grad sums the rows of the rhs [k, n], dgelu_bias_grad those of dpre.
  const View &summed =
      epilogue == LOOM_EPILOGUE_BIAS_GRAD ? args.in(1) : args.out(0);
  int64_t summedRows = n == 0 ? 0 : summed.numElements() / n;
  const float *x = summed.f32();
  std::vector<double> sums(static_cast<size_t>(n), 0.0);
  for (int64_t r = 0; r < summedRows; ++r)
    for (int64_t j = 0; j < n; ++j)
      sums[j] += x[r * n + j];
  float *db = args.out(1).f32();
  for (int64_t j = 0; j < n; ++j)
    db[j] = static_cast<float>(sums[j]);
}

/// The mean over tokens (or token_count) of logsumexp(logits) -
/// logits[label], into the scalar `out`.
int32_t crossEntropy(const View &logits, const View &labels, const View &out,
                     int64_t tokenCount) {
  int64_t vocab = logits.dims[logits.rank - 1];
  if (int32_t status = checkIds("cross_entropy", "label", labels, vocab))
    return status;
  if (!isFloatType(out.dtype))
    return fail("cross_entropy: a loss of element type %d",
                static_cast<int>(out.dtype));
  double total;
  if (logits.dtype == LOOM_DTYPE_F32)
    total = crossEntropySum<float>(logits, labels);
  else if (logits.dtype == LOOM_DTYPE_F64)
    total = crossEntropySum<double>(logits, labels);
  else
    return fail("cross_entropy: element type %d is neither f32 nor f64",
                static_cast<int>(logits.dtype));
  double tokens =
      static_cast<double>(tokenCount != 0 ? tokenCount : labels.numElements());
  double loss = total / tokens;
  if (out.dtype == LOOM_DTYPE_F64)
    *out.f64() = loss;
  else
    *out.f32() = static_cast<float>(loss);
  return 0;
}

/// dlogits = dloss / tokens * (softmax(logits) - onehot(labels)) into `out`.
int32_t crossEntropyGradient(const View &dloss, const View &logits,
                             const View &labels, const View &out,
                             int64_t tokenCount) {
  int64_t vocab = logits.dims[logits.rank - 1];
  if (int32_t status = checkIds("cross_entropy_grad", "label", labels, vocab))
    return status;
  if (!isFloatType(dloss.dtype) || logits.dtype != out.dtype)
    return fail("cross_entropy_grad: dloss, logits and dlogits have element "
                "types %d, %d and %d",
                static_cast<int>(dloss.dtype), static_cast<int>(logits.dtype),
                static_cast<int>(out.dtype));
  double tokens =
      static_cast<double>(tokenCount != 0 ? tokenCount : labels.numElements());
  double scale = scalarOf(dloss) / tokens;
  if (out.dtype == LOOM_DTYPE_F32)
    crossEntropyGrad<float>(scale, logits, labels, out);
  else if (out.dtype == LOOM_DTYPE_F64)
    crossEntropyGrad<double>(scale, logits, labels, out);
  else
    return fail("cross_entropy_grad: element type %d is neither f32 nor f64",
                static_cast<int>(out.dtype));
  return 0;
}

} // namespace
} // namespace loom::cpu

using namespace loom::cpu;

extern "C" {

int32_t loom_cpu_matmul(const loom_call_frame *, void *const *buffers,
                        const int64_t *meta) {
  KernelArgs args(buffers, meta);
  auto attrs = readAttrs<Kernel::matmul>(args);
  bool transposeLhs = attrs.transpose_lhs, transposeRhs = attrs.transpose_rhs;
  int64_t epilogue = attrs.epilogue;
  char error[256];
  if (!loom::kernels::checkMatmulEpilogue(args, epilogue, transposeRhs,
                                          "loom_cpu", error, sizeof error))
    return fail("%s", error);
  const View &lhs = args.in(0), &rhs = args.in(1), &out = args.out(0);
  if (lhs.rank < 2 || rhs.rank < 2 || out.rank != lhs.rank)
    return fail("matmul: operands of rank %lld and %lld, result of rank %lld",
                static_cast<long long>(lhs.rank),
                static_cast<long long>(rhs.rank),
                static_cast<long long>(out.rank));
  for (int64_t t = 1; t < args.numOperands() + args.numResults(); ++t)
    if (args.tensor(t).dtype != lhs.dtype)
      return fail("matmul: operands and results of element types %d and %d",
                  static_cast<int>(lhs.dtype),
                  static_cast<int>(args.tensor(t).dtype));
  if (out.dtype == LOOM_DTYPE_F32) {
    matmul<float>(lhs, rhs, out, transposeLhs, transposeRhs);
    applyEpilogue(args, epilogue);
  } else if (out.dtype == LOOM_DTYPE_F64 && epilogue == LOOM_EPILOGUE_NONE) {
    matmul<double>(lhs, rhs, out, transposeLhs, transposeRhs);
  } else {
    return fail("matmul: element type %d is neither f32 nor f64 (f32 only "
                "with an epilogue)",
                static_cast<int>(out.dtype));
  }
  return 0;
}

/// result[i..., :] = table[ids[i...], :], rows moved by their bytes.
int32_t loom_cpu_embedding(const loom_call_frame *, void *const *buffers,
                           const int64_t *meta) {
  KernelArgs args(buffers, meta);
  const View &table = args.in(0), &ids = args.in(1), &out = args.out(0);
  if (table.rank != 2)
    return fail("embedding: the table has rank %lld, expected [vocab, dim]",
                static_cast<long long>(table.rank));
  int64_t vocab = table.dims[0];
  if (int32_t status = checkIds("embedding", "id", ids, vocab))
    return status;
  int64_t rowBytes = table.dims[1] * table.elementBytes();
  const char *rows = static_cast<const char *>(table.data);
  char *result = static_cast<char *>(out.data);
  for (int64_t t = 0, n = ids.numElements(); t < n; ++t)
    std::memcpy(result + t * rowBytes, rows + ids.index(t) * rowBytes,
                rowBytes);
  return 0;
}

/// result[V, D] = 0, then dy[i..., :] added into row ids[i...].
int32_t loom_cpu_embedding_grad(const loom_call_frame *, void *const *buffers,
                                const int64_t *meta) {
  KernelArgs args(buffers, meta);
  const View &dy = args.in(0), &ids = args.in(1), &out = args.out(0);
  if (out.rank != 2)
    return fail("embedding_grad: the result has rank %lld, expected "
                "[vocab, dim]",
                static_cast<long long>(out.rank));
  if (int32_t status = checkIds("embedding_grad", "id", ids, out.dims[0]))
    return status;
  if (dy.dtype != out.dtype)
    return fail("embedding_grad: dy of element type %d, result of %d",
                static_cast<int>(dy.dtype), static_cast<int>(out.dtype));
  if (out.dtype == LOOM_DTYPE_F32)
    embeddingGrad<float>(dy, ids, out);
  else if (out.dtype == LOOM_DTYPE_F64)
    embeddingGrad<double>(dy, ids, out);
  else
    return fail("embedding_grad: element type %d is neither f32 nor f64",
                static_cast<int>(out.dtype));
  return 0;
}

/// The mean over tokens of logsumexp(logits[t]) - logits[t, labels[t]];
/// divided by token_count instead of the number of labels when it is set
/// (non-zero).
int32_t loom_cpu_cross_entropy(const loom_call_frame *, void *const *buffers,
                               const int64_t *meta) {
  KernelArgs args(buffers, meta);
  int64_t tokenCount = readAttrs<Kernel::cross_entropy>(args).token_count;
  return crossEntropy(args.in(0), args.in(1), args.out(0), tokenCount);
}

int32_t loom_cpu_cross_entropy_grad(const loom_call_frame *,
                                    void *const *buffers, const int64_t *meta) {
  KernelArgs args(buffers, meta);
  int64_t tokenCount = readAttrs<Kernel::cross_entropy_grad>(args).token_count;
  return crossEntropyGradient(args.in(0), args.in(1), args.in(2), args.out(0),
                              tokenCount);
}

/// Operands dloss, logits, labels; results the loss and dlogits: the two
/// kernels above, one after the other (the CUDA kernel reads the logits
/// once for both).
int32_t loom_cpu_cross_entropy_with_grad(const loom_call_frame *,
                                         void *const *buffers,
                                         const int64_t *meta) {
  KernelArgs args(buffers, meta);
  if (args.numOperands() != 3 || args.numResults() != 2)
    return fail("cross_entropy_with_grad: expected dloss, logits and labels, "
                "and the loss and dlogits");
  int64_t tokenCount =
      readAttrs<Kernel::cross_entropy_with_grad>(args).token_count;
  if (int32_t status =
          crossEntropy(args.in(1), args.in(2), args.out(0), tokenCount))
    return status;
  return crossEntropyGradient(args.in(0), args.in(1), args.in(2), args.out(1),
                              tokenCount);
}

} // extern "C"
