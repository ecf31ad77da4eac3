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

#include <cuda_pipeline.h>

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

/// Cross-entropy walks a row with one block of up to kRowThreads threads,
/// two blocks to a multiprocessor. When the rows are 16-byte aligned (the
/// vocabulary a multiple of 8, as padded vocabularies are), each thread
/// takes groups of 8 elements with one 16-byte load, and with a gradient
/// to write keeps the groups it read in shared memory, up to kRowCacheBytes
/// a block (two such blocks fit an sm_90 multiprocessor's 228 KiB), so that
/// the gradient pass reads the row from global memory only where it did
/// not fit: a [65536, 50304] bf16 call reads the logits once instead of
/// twice.
constexpr int kRowThreads = 512;
constexpr int64_t kRowCacheBytes = 110 * 1024;

/// Groups of 8 a thread loads before it uses any, so that their loads are
/// in flight together.
constexpr int kRowBatch = 4;

/// Calls fn(g, v) with the 8 values v of each group g < groups this thread
/// walks (g = threadIdx.x + k * blockDim.x): those below `cached` read from
/// `cache` (row-relative), the others from row `base` of `global`. Each
/// group is read and handed to fn by the same thread in every call, so a
/// thread reads back from `cache` only what it stored there itself.
template <typename Fn>
__device__ __forceinline__ void forEachGroup(Floats global, int64_t base,
                                             Floats cache, int64_t cached,
                                             int64_t groups, Fn fn) {
  for (int64_t first = threadIdx.x; first < groups;
       first += kRowBatch * blockDim.x) {
    float v[kRowBatch][8];
#pragma unroll
    for (int b = 0; b < kRowBatch; ++b) {
      int64_t g = first + b * static_cast<int64_t>(blockDim.x);
      if (g < cached)
        load8(cache, 8 * g, v[b]);
      else if (g < groups)
        load8(global, base + 8 * g, v[b]);
    }
#pragma unroll
    for (int b = 0; b < kRowBatch; ++b) {
      int64_t g = first + b * static_cast<int64_t>(blockDim.x);
      if (g < groups)
        fn(g, v[b]);
    }
  }
}

/// Folds 8 logits into a thread's running maximum and sum of exponentials
/// scaled to it, rescaling the sum once for the group: the online softmax
/// of rowExpSum's scalar loop (the same sums but for rounding).
__device__ __forceinline__ void addExpSum(const float (&v)[8], float &max,
                                          float &sum) {
  float groupMax = max; // fmaxf passes a NaN over, as `x > max` does
#pragma unroll
  for (int k = 0; k < 8; ++k)
    groupMax = fmaxf(groupMax, v[k]);
  if (groupMax > max) {
    sum *= expf(max - groupMax); // expf(-inf) = 0 at the first
    max = groupMax;
  }
  // While the maximum is -inf, each v[k] is -inf (adding nothing) or NaN
  // (spoiling the sum, as the scalar loop's expf(NaN - max) does).
#pragma unroll
  for (int k = 0; k < 8; ++k)
    sum += v[k] == -INFINITY ? 0.0f : expf(v[k] - max);
}

/// max(row) and sum(exp(row - max)) of row `base` over the block, reading
/// the row once: each thread keeps its running maximum and its sum scaled
/// to it (rescaled when the maximum grows, the online softmax; once per
/// group of 8 on the vector path), then the block takes the largest maximum
/// and the threads' sums rescaled to it. An infinite maximum gives the sum
/// 1 (the interpreter's logSumExp is the maximum itself then); -inf logits
/// add nothing. On the vector path the first `cached` groups are read into
/// `cache` first, for writeRowGrad too.
template <bool kVector>
__device__ float2 rowExpSum(Floats logits, int64_t base, int64_t vocab,
                            Floats cache, int64_t cached) {
  float max = -INFINITY, sum = 0.0f;
  if constexpr (kVector) {
    // The cached groups are copied asynchronously, all of a thread's at
    // once: the loads of a whole row in flight, holding no registers.
    int units = logits.dtype == LOOM_DTYPE_BF16 ? 1 : 2; // 16 bytes each
    const uint4 *row =
        static_cast<const uint4 *>(logits.data) + base / 8 * units;
    uint4 *copy = static_cast<uint4 *>(cache.data);
    for (int64_t g = threadIdx.x; g < cached; g += blockDim.x)
      for (int u = 0; u < units; ++u)
        __pipeline_memcpy_async(copy + g * units + u, row + g * units + u, 16);
    __pipeline_commit();
    __pipeline_wait_prior(0);
    forEachGroup(logits, base, cache, cached, vocab / 8,
                 [&](int64_t, float (&v)[8]) { addExpSum(v, max, sum); });
  } else {
    for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
      float x = logits[base + v];
      if (x > max) {
        sum = sum * expf(max - x) + 1.0f; // expf(-inf) = 0 at the first
        max = x;
      } else if (x != -INFINITY) {
        sum += expf(x - max);
      }
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

/// v = factor * exp(v - max), less `scale` at the label, for the 8
/// logits of a row from element `first` on (zeros for an invalid label):
/// writeRowGrad's scalar loop on a group.
__device__ __forceinline__ void gradGroup(float (&v)[8], int64_t first,
                                          float max, float factor,
                                          int64_t label, bool valid,
                                          float scale) {
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    float p = expf(v[k] - max) * factor;
    v[k] = valid ? (first + k == label ? p - scale : p) : 0.0f;
  }
}

/// dlogits[base..] = scale * (softmax(row) - onehot(label)) from the row's
/// maximum and sum of exponentials `m` (zeros for an invalid label); on the
/// vector path the first `cached` groups come from rowExpSum's `cache`.
/// Each element is read before it is written, by the same thread.
template <bool kVector>
__device__ void writeRowGrad(Floats logits, Floats dlogits, int64_t base,
                             int64_t vocab, float2 m, int64_t label, bool valid,
                             float scale, Floats cache, int64_t cached) {
  float factor = scale / m.y;
  if constexpr (kVector) {
    forEachGroup(logits, base, cache, cached, vocab / 8,
                 [&](int64_t g, float (&v)[8]) {
                   gradGroup(v, 8 * g, m.x, factor, label, valid, scale);
                   store8(dlogits, base + 8 * g, v);
                 });
  } else {
    for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
      float p = expf(logits[base + v] - m.x) * factor;
      dlogits.store(base + v, valid ? (v == label ? p - scale : p) : 0.0f);
    }
  }
}

/// partials[block] = the sum over the block's rows of logsumexp(row) -
/// row[label]; with `dlogits` data (cross_entropy_with_grad) each row's
/// gradient too, dloss / tokenCount * (softmax - onehot), from the same
/// read of the row's statistics. kVector and `cached` as in rowExpSum
/// (`cached` groups fill the dynamic shared memory).
template <bool kVector>
__global__ void __launch_bounds__(kRowThreads, 2)
    cross_entropy_rows_kernel(Floats logits, Indices labels, int64_t tokens,
                              int64_t vocab, int64_t cached, double *partials,
                              long long *error, Floats dloss, Floats dlogits,
                              double tokenCount) {
  extern __shared__ uint4 rowCache[];
  Floats cache = {rowCache, logits.dtype};
  double total = 0.0;
  float scale =
      dlogits.data
          ? static_cast<float>(static_cast<double>(dloss[0]) / tokenCount)
          : 0.0f;
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    int64_t base = t * vocab;
    float2 m = rowExpSum<kVector>(logits, base, vocab, cache, cached);
    int64_t label = labels[t];
    bool valid = label >= 0 && label < vocab;
    // Read before the gradient is written, should dlogits be the logits.
    double atLabel = valid ? static_cast<double>(logits[base + label]) : 0.0;
    if (dlogits.data)
      writeRowGrad<kVector>(logits, dlogits, base, vocab, m, label, valid,
                            scale, cache, cached);
    if (!valid) {
      if (threadIdx.x == 0)
        recordError(error, kCrossEntropyLabel, t, label, vocab);
      continue;
    }
    double lse = isinf(m.x) ? static_cast<double>(m.x)
                            : static_cast<double>(m.x) + log(m.y);
    total += lse - atLabel;
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
template <bool kVector>
__global__ void __launch_bounds__(kRowThreads, 2)
    cross_entropy_backward_kernel(Floats dloss, Floats logits, Indices labels,
                                  Floats dlogits, int64_t tokens, int64_t vocab,
                                  int64_t cached, double tokenCount,
                                  long long *error) {
  extern __shared__ uint4 rowCache[];
  Floats cache = {rowCache, logits.dtype};
  float scale = static_cast<float>(static_cast<double>(dloss[0]) / tokenCount);
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    int64_t base = t * vocab;
    float2 m = rowExpSum<kVector>(logits, base, vocab, cache, cached);
    int64_t label = labels[t];
    bool valid = label >= 0 && label < vocab;
    if (!valid && threadIdx.x == 0)
      recordError(error, kCrossEntropyGradLabel, t, label, vocab);
    writeRowGrad<kVector>(logits, dlogits, base, vocab, m, label, valid, scale,
                          cache, cached);
  }
}

/// How the cross-entropy kernels walk rows of `vocab` logits (with
/// `dlogits`, writing the gradient): the vector path when every row starts
/// 16 bytes aligned, threads enough for the row (a power of two from 32 to
/// kRowThreads), and the groups of 8 kept in shared memory.
struct RowPlan {
  bool vector = false;
  int threads = 32;
  int64_t cachedGroups = 0, sharedBytes = 0;
};

RowPlan planRows(const View &logits, const View *dlogits, int64_t vocab) {
  RowPlan plan;
  plan.vector = vocab % 8 == 0 && aligned16(logits.data) &&
                (!dlogits || aligned16(dlogits->data));
  // The scalar path keeps kThreads: its loads are 2 or 4 bytes, and more
  // blocks in flight hide their latency better than wider ones.
  int64_t items = plan.vector ? vocab / 8 : vocab;
  int limit = plan.vector ? kRowThreads : kThreads;
  while (plan.threads < limit && plan.threads < items)
    plan.threads *= 2;
  if (plan.vector && dlogits) {
    int64_t groupBytes = logits.dtype == LOOM_DTYPE_BF16 ? 16 : 32;
    plan.cachedGroups = std::min(vocab / 8, kRowCacheBytes / groupBytes);
    plan.sharedBytes = plan.cachedGroups * groupBytes;
  }
  return plan;
}

/// Lets `kernel` take the plan's shared memory (over the default 48 KiB).
int32_t allowShared(const void *kernel, const RowPlan &plan, const char *op) {
  if (plan.sharedBytes == 0)
    return 0;
  cudaError_t status =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(plan.sharedBytes));
  if (status != cudaSuccess)
    return fail("loom_cuda_%s: cannot give the cross-entropy kernel %lld "
                "bytes of shared memory: %s",
                op, static_cast<long long>(plan.sharedBytes),
                cudaGetErrorString(status));
  return 0;
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
  RowPlan plan = planRows(logits, dlogits, vocab);
  auto kernel = plan.vector ? cross_entropy_rows_kernel<true>
                            : cross_entropy_rows_kernel<false>;
  if (int32_t status =
          allowShared(reinterpret_cast<const void *>(kernel), plan, op))
    return status;
  kernel<<<static_cast<unsigned>(blocks), plan.threads, plan.sharedBytes,
           context->stream>>>(floats(logits), indices(labels), tokens, vocab,
                              plan.cachedGroups, partials, context->deviceError,
                              dloss ? floats(*dloss) : none,
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
  RowPlan plan = planRows(logits, &out, vocab);
  auto kernel = plan.vector ? cross_entropy_backward_kernel<true>
                            : cross_entropy_backward_kernel<false>;
  if (int32_t status = allowShared(reinterpret_cast<const void *>(kernel), plan,
                                   "cross_entropy_grad"))
    return status;
  kernel<<<tokenBlocks(tokens), plan.threads, plan.sharedBytes,
           context->stream>>>(floats(dloss), floats(logits), indices(labels),
                              floats(out), tokens, vocab, plan.cachedGroups,
                              count, context->deviceError);
  return checkLaunch("cross_entropy_grad");
}

} // extern "C"
