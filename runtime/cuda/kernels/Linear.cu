//===- Linear.cu - Embedding and cross-entropy ----------------------------===//
//
// The lookup and the loss, with their gradients (matmul has its own file).
// Ids and labels outside the vocabulary can only be seen on the device:
// the kernel records the first in the context's error word and reads the
// row as zeros; loom_cuda_context_synchronize reports it with the CPU
// kernel's message. Embedding's gradient scatter-adds dy rows with f32
// atomics (a bf16 result accumulates in f32 scratch first); cross-entropy's
// loss sums per-block partials in a fixed order, so it is deterministic.
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"

namespace loom::cuda {
namespace {

/// result[t, :] = table[ids[t], :].
__global__ void embedding_forward_kernel(Floats table, Indices ids, Floats out,
                                         int64_t tokens, int64_t vocab,
                                         int64_t dim, long long *error) {
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    int64_t id = ids[t];
    bool valid = id >= 0 && id < vocab;
    if (!valid && threadIdx.x == 0)
      recordError(error, kEmbeddingId, t, id, vocab);
    for (int64_t d = threadIdx.x; d < dim; d += blockDim.x)
      out.store(t * dim + d, valid ? table[id * dim + d] : 0.0f);
  }
}

/// table[ids[t], :] += dy[t, :], from zeros, in f32.
__global__ void embedding_backward_kernel(Floats dy, Indices ids, float *table,
                                          int64_t tokens, int64_t vocab,
                                          int64_t dim, long long *error) {
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    int64_t id = ids[t];
    if (id < 0 || id >= vocab) {
      if (threadIdx.x == 0)
        recordError(error, kEmbeddingGradId, t, id, vocab);
      continue;
    }
    for (int64_t d = threadIdx.x; d < dim; d += blockDim.x)
      atomicAdd(table + id * dim + d, dy[t * dim + d]);
  }
}

__global__ void convert_kernel(const float *from, Floats to, int64_t n) {
  LOOM_GRID_STRIDE(e, n) { to.store(e, from[e]); }
}

/// max(row) and sum(exp(row - max)) of row `base` over the block, reading
/// the row once: each thread keeps its running maximum and its sum scaled
/// to it (rescaled when the maximum grows, the online softmax), then the
/// block takes the largest maximum and the threads' sums rescaled to it. An
/// infinite maximum gives the sum 1 (the interpreter's logSumExp is the
/// maximum itself then); -inf logits add nothing.
__device__ float2 rowExpSum(Floats logits, int64_t base, int64_t vocab) {
  float max = -INFINITY, sum = 0.0f;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
    float x = logits[base + v];
    if (x > max) {
      sum = sum * expf(max - x) + 1.0f; // expf(-inf) = 0 at the first
      max = x;
    } else if (x != -INFINITY) {
      sum += expf(x - max);
    }
  }
  float rowMax = blockReduce(max, MaxOp(), -INFINITY);
  if (isinf(rowMax))
    return make_float2(rowMax, 1.0f);
  // A thread that saw only -inf adds nothing; one whose sum a NaN logit
  // spoiled (its maximum still -inf) passes the NaN on, as the CPU does.
  float scaled =
      max == -INFINITY && !isnan(sum) ? 0.0f : sum * expf(max - rowMax);
  return make_float2(rowMax, blockReduce(scaled, SumOp(), 0.0f));
}

/// dlogits[base..] = scale * (softmax(row) - onehot(label)) from the row's
/// maximum and sum of exponentials `m` (zeros for an invalid label).
__device__ void writeRowGrad(Floats logits, Floats dlogits, int64_t base,
                             int64_t vocab, float2 m, int64_t label, bool valid,
                             float scale) {
  float factor = scale / m.y;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
    float p = expf(logits[base + v] - m.x) * factor;
    dlogits.store(base + v, valid ? (v == label ? p - scale : p) : 0.0f);
  }
}

/// partials[block] = the sum over the block's rows of logsumexp(row) -
/// row[label]; with `dlogits` data (cross_entropy_with_grad) each row's
/// gradient too, dloss / tokenCount * (softmax - onehot), from the same
/// read of the row's statistics.
__global__ void cross_entropy_rows_kernel(Floats logits, Indices labels,
                                          int64_t tokens, int64_t vocab,
                                          double *partials, long long *error,
                                          Floats dloss, Floats dlogits,
                                          double tokenCount) {
  double total = 0.0;
  float scale =
      dlogits.data
          ? static_cast<float>(static_cast<double>(dloss[0]) / tokenCount)
          : 0.0f;
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    int64_t base = t * vocab;
    float2 m = rowExpSum(logits, base, vocab);
    int64_t label = labels[t];
    bool valid = label >= 0 && label < vocab;
    if (dlogits.data)
      writeRowGrad(logits, dlogits, base, vocab, m, label, valid, scale);
    if (!valid) {
      if (threadIdx.x == 0)
        recordError(error, kCrossEntropyLabel, t, label, vocab);
      continue;
    }
    double lse = isinf(m.x) ? static_cast<double>(m.x)
                            : static_cast<double>(m.x) + log(m.y);
    total += lse - static_cast<double>(logits[base + label]);
  }
  if (threadIdx.x == 0)
    partials[blockIdx.x] = total;
}

__global__ void cross_entropy_total_kernel(const double *partials,
                                           int64_t count, double tokens,
                                           Floats loss) {
  double total = 0.0;
  for (int64_t i = 0; i < count; ++i)
    total += partials[i];
  loss.store(0, static_cast<float>(total / tokens));
}

/// dlogits[t] = dloss / tokens * (softmax(logits[t]) - onehot(labels[t])).
__global__ void cross_entropy_backward_kernel(Floats dloss, Floats logits,
                                              Indices labels, Floats dlogits,
                                              int64_t tokens, int64_t vocab,
                                              double tokenCount,
                                              long long *error) {
  float scale = static_cast<float>(static_cast<double>(dloss[0]) / tokenCount);
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    int64_t base = t * vocab;
    float2 m = rowExpSum(logits, base, vocab);
    int64_t label = labels[t];
    bool valid = label >= 0 && label < vocab;
    if (!valid && threadIdx.x == 0)
      recordError(error, kCrossEntropyGradLabel, t, label, vocab);
    writeRowGrad(logits, dlogits, base, vocab, m, label, valid, scale);
  }
}

/// The loss of `logits` and `labels` into `out`, and with `dloss` the
/// gradient into `dlogits` in the same pass over the rows (`op` names the
/// kernel in messages).
int32_t crossEntropy(loom_cuda_context *context, const View &logits,
                     const View &labels, const View &out, const View *dloss,
                     const View *dlogits, int64_t tokenCount, const char *op) {
  if (!labels.isIndex() || logits.rank < 1 || out.numElements() != 1)
    return fail("loom_cuda_%s: expected [..., vocab] logits, i32 or i64 "
                "labels and a scalar loss",
                op);
  int64_t vocab = logits.dims[logits.rank - 1], tokens = labels.numElements();
  if (logits.numElements() != tokens * vocab)
    return fail("loom_cuda_%s: the labels do not match the logits", op);
  int64_t blocks =
      std::min<int64_t>({std::max<int64_t>(tokens, 1), 1024,
                         std::max<int64_t>(context->scratchBytes / 8, 1)});
  if (int32_t status = needScratch(context, op, 8 * blocks))
    return status;
  double *partials = static_cast<double *>(context->scratch);
  double count = static_cast<double>(tokenCount != 0 ? tokenCount : tokens);
  Floats none = {nullptr, LOOM_DTYPE_F32};
  cross_entropy_rows_kernel<<<static_cast<unsigned>(blocks),
                              threadsForRow(vocab), 0, context->stream>>>(
      floats(logits), indices(labels), tokens, vocab, partials,
      context->deviceError, dloss ? floats(*dloss) : none,
      dlogits ? floats(*dlogits) : none, count);
  if (int32_t status = checkLaunch(op))
    return status;
  cross_entropy_total_kernel<<<1, 1, 0, context->stream>>>(partials, blocks,
                                                           count, floats(out));
  return checkLaunch(op);
}

unsigned tokenBlocks(int64_t tokens) {
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>(tokens, 1 << 16)));
}

} // namespace
} // namespace loom::cuda

using namespace loom::cuda;

extern "C" {

/// Operands table [V, D], ids; result [ids..., D].
int32_t loom_cuda_embedding(const loom_call_frame *, void *const *buffers,
                            const int64_t *meta, loom_cuda_context *context) {
  ProfileScope scope(context, "embedding");
  KernelArgs args(buffers, meta);
  if (int32_t status = args.expect("embedding", 2, 1, /*notFloat=*/1u << 1))
    return status;
  const View &table = args.in(0), &ids = args.in(1), &out = args.out(0);
  if (table.rank != 2 || !ids.isIndex())
    return fail("loom_cuda_embedding: expected a [vocab, dim] table and i32 "
                "or i64 ids");
  int64_t tokens = ids.numElements(), dim = table.dims[1];
  if (out.numElements() != tokens * dim)
    return fail("loom_cuda_embedding: the result is not [ids..., dim]");
  if (tokens == 0)
    return 0;
  embedding_forward_kernel<<<tokenBlocks(tokens), threadsForRow(dim), 0,
                             context->stream>>>(
      floats(table), indices(ids), floats(out), tokens, table.dims[0], dim,
      context->deviceError);
  return checkLaunch("embedding");
}

/// Operands dy [ids..., D], ids; result [V, D].
int32_t loom_cuda_embedding_grad(const loom_call_frame *, void *const *buffers,
                                 const int64_t *meta,
                                 loom_cuda_context *context) {
  ProfileScope scope(context, "embedding_grad");
  KernelArgs args(buffers, meta);
  if (int32_t status =
          args.expect("embedding_grad", 2, 1, /*notFloat=*/1u << 1))
    return status;
  const View &dy = args.in(0), &ids = args.in(1), &out = args.out(0);
  if (out.rank != 2 || !ids.isIndex())
    return fail("loom_cuda_embedding_grad: expected a [vocab, dim] result and "
                "i32 or i64 ids");
  int64_t tokens = ids.numElements(), vocab = out.dims[0], dim = out.dims[1];
  if (dy.numElements() != tokens * dim)
    return fail("loom_cuda_embedding_grad: dy is not [ids..., dim]");
  bool direct = out.dtype == LOOM_DTYPE_F32;
  int64_t bytes = vocab * dim * static_cast<int64_t>(sizeof(float));
  if (!direct)
    if (int32_t status = needScratch(context, "embedding_grad", bytes))
      return status;
  float *table = direct ? static_cast<float *>(out.data)
                        : static_cast<float *>(context->scratch);
  cudaError_t status = cudaMemsetAsync(table, 0, bytes, context->stream);
  if (status != cudaSuccess)
    return fail("loom_cuda_embedding_grad: %s", cudaGetErrorString(status));
  if (tokens > 0) {
    embedding_backward_kernel<<<tokenBlocks(tokens), threadsForRow(dim), 0,
                                context->stream>>>(floats(dy), indices(ids),
                                                   table, tokens, vocab, dim,
                                                   context->deviceError);
    if (int32_t result = checkLaunch("embedding_grad"))
      return result;
  }
  if (direct)
    return 0;
  convert_kernel<<<blocksFor(vocab * dim), kThreads, 0, context->stream>>>(
      table, floats(out), vocab * dim);
  return checkLaunch("embedding_grad");
}

/// The mean over tokens of logsumexp(logits[t]) - logits[t, labels[t]],
/// divided by token_count instead when it is set (non-zero).
int32_t loom_cuda_cross_entropy(const loom_call_frame *, void *const *buffers,
                                const int64_t *meta,
                                loom_cuda_context *context) {
  ProfileScope scope(context, "cross_entropy");
  KernelArgs args(buffers, meta);
  if (int32_t status = args.expect("cross_entropy", 2, 1, /*notFloat=*/1u << 1))
    return status;
  return crossEntropy(
      context, args.in(0), args.in(1), args.out(0), nullptr, nullptr,
      readAttrs<Kernel::cross_entropy>(args).token_count, "cross_entropy");
}

/// Operands dloss, logits, labels; results the loss and dlogits, the rows'
/// statistics taken once for both.
int32_t loom_cuda_cross_entropy_with_grad(const loom_call_frame *,
                                          void *const *buffers,
                                          const int64_t *meta,
                                          loom_cuda_context *context) {
  ProfileScope scope(context, "cross_entropy_with_grad");
  KernelArgs args(buffers, meta);
  if (int32_t status = args.expect("cross_entropy_with_grad", 3, 2,
                                   /*notFloat=*/1u << 2))
    return status;
  const View &dloss = args.in(0), &logits = args.in(1), &dlogits = args.out(1);
  if (dloss.numElements() != 1 || dlogits.numElements() != logits.numElements())
    return fail("loom_cuda_cross_entropy_with_grad: expected a scalar dloss "
                "and dlogits of the logits' shape");
  return crossEntropy(
      context, logits, args.in(2), args.out(0), &dloss, &dlogits,
      readAttrs<Kernel::cross_entropy_with_grad>(args).token_count,
      "cross_entropy_with_grad");
}

/// Operands dloss (0-d), logits, labels; result dlogits.
int32_t loom_cuda_cross_entropy_grad(const loom_call_frame *,
                                     void *const *buffers, const int64_t *meta,
                                     loom_cuda_context *context) {
  ProfileScope scope(context, "cross_entropy_grad");
  KernelArgs args(buffers, meta);
  if (int32_t status =
          args.expect("cross_entropy_grad", 3, 1, /*notFloat=*/1u << 2))
    return status;
  const View &dloss = args.in(0), &logits = args.in(1), &labels = args.in(2),
             &out = args.out(0);
  int64_t tokenCount = readAttrs<Kernel::cross_entropy_grad>(args).token_count;
  if (!labels.isIndex() || logits.rank < 1 || dloss.numElements() != 1 ||
      out.numElements() != logits.numElements())
    return fail("loom_cuda_cross_entropy_grad: expected a scalar dloss, "
                "[..., vocab] logits and dlogits, i32 or i64 labels");
  int64_t vocab = logits.dims[logits.rank - 1], tokens = labels.numElements();
  if (logits.numElements() != tokens * vocab)
    return fail("loom_cuda_cross_entropy_grad: the labels do not match the "
                "logits");
  if (tokens == 0)
    return 0;
  double count = static_cast<double>(tokenCount != 0 ? tokenCount : tokens);
  cross_entropy_backward_kernel<<<tokenBlocks(tokens), threadsForRow(vocab), 0,
                                  context->stream>>>(
      floats(dloss), floats(logits), indices(labels), floats(out), tokens,
      vocab, count, context->deviceError);
  return checkLaunch("cross_entropy_grad");
}

} // extern "C"
