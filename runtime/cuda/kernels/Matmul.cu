//===- Matmul.cu - Matmul through cuBLASLt --------------------------------===//
//
// loom.matmul: lhs [B..., M, K] times rhs [K, N] (shared by the batch) or
// [B..., K, N], each possibly transposed, row-major. cuBLASLt is
// column-major, and a row-major matrix read column-major is its transpose,
// so the product is computed as C^T = op(rhs)^T op(lhs)^T: cuBLASLt's "A"
// is our rhs and its "B" our lhs, with the transposes carried over. An
// untransposed lhs with a shared rhs folds its batch into M (one GEMM);
// otherwise the batch is a strided batch (rhs stride 0 when shared).
//
// Inputs f32 compute in f32 (CUBLAS_COMPUTE_32F: no TF32); bf16 inputs
// multiply on the tensor cores and accumulate in f32, into a bf16 or f32
// result. Split-K algorithms may only reduce their partial sums in the
// compute type (CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE): the other schemes
// add them up in the output type, so a bf16 result would be rounded once
// per partial sum (a partial of magnitude 16 to 32 by up to 0.06), which
// broke the 1e-2 tolerance of a K = 1001 GEMM whose 64-row chunks made
// split-K attractive. The algorithm comes from cuBLASLt's heuristic for the
// shapes, types, the pointers' actual alignment and the context's scratch as
// its workspace, asked once per distinct call: the context keeps its answers
// (the descriptors themselves are cheap and built per call). A matrix
// whose leading dimension is not a multiple of 16 bytes (GPT-2's
// vocabulary) is staged through the scratch with an aligned one, the GEMM
// in chunks of rows (GemmStaging.h).
//
// Epilogues (loom_cpu_kernels.h: bias, bias then gelu, and both pre = sum
// and gelu(pre)). The bias [N] runs along a row of our result, which is a
// column of cuBLASLt's D: one value per row of D, which is what cuBLASLt's
// bias is (batch stride 0: shared by the batch). cuBLASLt adds it
// (CUBLASLT_EPILOGUE_BIAS) and, for a bf16 result, applies the gelu too
// (GELU_BIAS; GELU_AUX_BIAS writes pre as its aux matrix, whose leading
// dimension N must be a multiple of 8). Its gelu is the tanh form, as ours,
// but its kernels may evaluate tanh with the hardware approximation, good
// to about 2^-11: below bf16's precision, not f32's. So an f32 result, an
// aux with N not a multiple of 8, or a cuBLASLt without an algorithm for
// the epilogue take the gelu (and, failing the bias epilogue too, the bias)
// in one pointwise kernel after the GEMM, with Activation.cuh's gelu, the
// gelu kernel's. On that path a bf16 result's gelu is taken of pre as
// stored (rounded), and where cuBLASLt has no bias epilogue at all the
// product is rounded before the bias is added: the ways a bf16 result
// depends on what cuBLASLt supports, all within bf16's precision (an f32
// sum is rounded once on every path).
//
// The other epilogues: a residual is cuBLASLt's C (beta = 1, with or
// without the bias epilogue); bias_grad's sums of the rhs' rows are
// BGRADA's (the rhs is cuBLASLt's A, reduced over k). They take cuBLASLt
// only for an unbatched GEMM that is not staged (their sums would be cut
// by the chunks) and without LOOM_CUDA_GEMM_EPILOGUES=basic; otherwise,
// or when cuBLASLt has no algorithm for them, a plain GEMM is followed by
// epilogue_forward (the residual) or sumRows (Layout.cu's reduction, in
// double). dgelu_bias_grad never takes cuBLASLt's DGELU_BGRAD: at GPT-2's
// MLP gradient ([8192 or 65536, 3072] bf16 on an H200) it ran 0.22 and
// 1.59 ms against 0.18 and 0.97 ms for a plain GEMM followed by
// dgelu_bias_grad_kernel, one pass over the product that takes the gelu
// gradient in place and sums its columns per chunk of rows into the
// scratch, and column_sums_kernel, which adds the chunks in order.
//
//===----------------------------------------------------------------------===//

#include "Activation.cuh"
#include "Device.cuh"
#include "GemmStaging.h"

#include "MatmulEpilogue.h"
#include "loom/loom_cpu_kernels.h"

#include <cstdlib>
#include <cstring>

namespace loom::cuda {
namespace {

/// The largest power of two (at most 256) dividing the address of every
/// batch element.
uint32_t alignmentOf(const void *data, int64_t batchStrideBytes,
                     int64_t batch) {
  uint64_t bits = reinterpret_cast<uintptr_t>(data) | 256u;
  if (batch > 1)
    bits |= static_cast<uint64_t>(batchStrideBytes);
  return static_cast<uint32_t>(bits & (~bits + 1));
}

cudaDataType_t cudaTypeOf(loom_dtype dtype) {
  return dtype == LOOM_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/// Owns the cuBLASLt descriptors of one call.
struct Descriptors {
  cublasLtMatmulDesc_t matmul = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  ~Descriptors() {
    if (preference)
      cublasLtMatmulPreferenceDestroy(preference);
    if (c)
      cublasLtMatrixLayoutDestroy(c);
    if (b)
      cublasLtMatrixLayoutDestroy(b);
    if (a)
      cublasLtMatrixLayoutDestroy(a);
    if (matmul)
      cublasLtMatmulDescDestroy(matmul);
  }
};

/// A column-major layout of `rows` x `cols` with leading dimension `ld`,
/// `batch` of them `stride` elements apart.
cublasStatus_t makeLayout(cublasLtMatrixLayout_t *layout, cudaDataType_t type,
                          int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                          int64_t stride) {
  cublasStatus_t status =
      cublasLtMatrixLayoutCreate(layout, type, rows, cols, ld);
  if (status != CUBLAS_STATUS_SUCCESS || batch == 1)
    return status;
  int32_t count = static_cast<int32_t>(batch);
  status = cublasLtMatrixLayoutSetAttribute(
      *layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
  if (status != CUBLAS_STATUS_SUCCESS)
    return status;
  return cublasLtMatrixLayoutSetAttribute(
      *layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
      sizeof stride);
}

int32_t failBlas(const char *what, cublasStatus_t status) {
  return fail("loom_cuda_matmul: %s: %s", what,
              cublasLtGetStatusString(status));
}

#define LOOM_CHECK_BLAS(call)                                                  \
  do {                                                                         \
    cublasStatus_t blasStatus = (call);                                        \
    if (blasStatus != CUBLAS_STATUS_SUCCESS)                                   \
      return failBlas(#call, blasStatus);                                      \
  } while (0)

/// gemm()'s status when cuBLASLt's heuristic has no algorithm (no message
/// recorded).
constexpr int32_t kNoAlgorithm = -1;

/// What cuBLASLt does after the product: nothing (DEFAULT), add `bias`
/// (one value per column of our C), and apply the gelu, GELU_AUX_BIAS
/// storing its input into `aux` (C's shape and type); BGRADA writes the
/// rhs' column sums into `bias`. With a `residual`, cuBLASLt's C input,
/// the product is added to it (beta = 1).
struct LtEpilogue {
  cublasLtEpilogue_t kind = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
  void *aux = nullptr;
  const void *residual = nullptr;
};

/// Sets the epilogue's attributes on `desc`, with `aux` the chunk's own
/// (GemmCall::aux).
int32_t setEpilogue(cublasLtMatmulDesc_t desc, const GemmShape &s,
                    const LtEpilogue &epilogue, void *aux) {
  LOOM_CHECK_BLAS(
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                     &epilogue.kind, sizeof epilogue.kind));
  LOOM_CHECK_BLAS(
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                     &epilogue.bias, sizeof epilogue.bias));
  int64_t biasStride = 0;
  LOOM_CHECK_BLAS(cublasLtMatmulDescSetAttribute(
      desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &biasStride,
      sizeof biasStride));
  if (!aux)
    return 0;
  // The aux matrix is laid out as our result in place: (n x m) column-major,
  // ld n.
  int64_t auxLd = s.n, auxStride = s.m * s.n;
  LOOM_CHECK_BLAS(cublasLtMatmulDescSetAttribute(
      desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
  LOOM_CHECK_BLAS(cublasLtMatmulDescSetAttribute(
      desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &auxLd, sizeof auxLd));
  LOOM_CHECK_BLAS(cublasLtMatmulDescSetAttribute(
      desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &auxStride,
      sizeof auxStride));
  return 0;
}

/// The element types of a GEMM: the operands' and the result's.
struct GemmTypes {
  cudaDataType_t in, out;
  int64_t inBytes, outBytes;
};

/// The algorithm cuBLASLt's heuristic picks for `key` (everything the
/// descriptors and preferences tell it), asked once per context: 0 with
/// `*algo` set, kNoAlgorithm, or a recorded failure. With `optional` (an
/// epilogue that has a fallback) any refusal of the heuristic counts as
/// no algorithm.
int32_t findAlgorithm(loom_cuda_context *context, std::vector<int64_t> key,
                      const Descriptors &d, bool optional,
                      const cublasLtMatmulAlgo_t **algo) {
  auto [entry, isNew] = context->gemmAlgorithms.try_emplace(std::move(key));
  if (isNew) {
    // The heuristic sees the bias and aux pointers (their alignment)
    // through the matmul descriptor. It answers NOT_SUPPORTED when it finds
    // nothing.
    cublasLtMatmulHeuristicResult_t heuristic = {};
    int found = 0;
    cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        context->blaslt, d.matmul, d.a, d.b, d.c, d.c, d.preference, 1,
        &heuristic, &found);
    bool none = status == CUBLAS_STATUS_NOT_SUPPORTED ||
                (status == CUBLAS_STATUS_SUCCESS && found == 0) ||
                (optional && status != CUBLAS_STATUS_SUCCESS);
    if (status != CUBLAS_STATUS_SUCCESS && !none) {
      context->gemmAlgorithms.erase(entry);
      return failBlas("cublasLtMatmulAlgoGetHeuristic", status);
    }
    entry->second = {!none, heuristic.algo};
  }
  if (!entry->second.first)
    return kNoAlgorithm;
  *algo = &entry->second.second;
  return 0;
}

/// Runs one GEMM of a staging plan for `s` (`call.rows` rows of the
/// result) with `epilogue`: 0, kNoAlgorithm, or a recorded failure.
int32_t gemm(loom_cuda_context *context, const GemmShape &s,
             const GemmTypes &types, const LtEpilogue &epilogue,
             const GemmCall &call) {
  Descriptors d;
  LOOM_CHECK_BLAS(
      cublasLtMatmulDescCreate(&d.matmul, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t opA = s.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = s.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  LOOM_CHECK_BLAS(cublasLtMatmulDescSetAttribute(
      d.matmul, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA));
  LOOM_CHECK_BLAS(cublasLtMatmulDescSetAttribute(
      d.matmul, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB));
  // The epilogues not every cuBLASLt takes (they have fallbacks): a
  // refusal of theirs is no algorithm.
  bool optional =
      epilogue.residual || epilogue.kind == CUBLASLT_EPILOGUE_BGRADA;
  if (epilogue.kind != CUBLASLT_EPILOGUE_DEFAULT)
    if (int32_t status = setEpilogue(d.matmul, s, epilogue, call.aux))
      return optional ? kNoAlgorithm : status;
  // cuBLASLt's A is rhs stored as [n, k] column-major when transposed, [k, n]
  // read as (n x k) otherwise; its B is lhs likewise; C is (n x m).
  int64_t m = call.rows, n = s.n, k = s.k, batch = s.batch;
  LOOM_CHECK_BLAS(makeLayout(&d.a, types.in, s.transB ? k : n, s.transB ? n : k,
                             call.ldRhs, batch, s.strideB));
  LOOM_CHECK_BLAS(makeLayout(&d.b, types.in, s.transA ? m : k, s.transA ? k : m,
                             call.ldLhs, batch, m * k));
  LOOM_CHECK_BLAS(makeLayout(&d.c, types.out, n, m, call.ldOut, batch, m * n));

  uint64_t workspace = static_cast<uint64_t>(call.workspaceBytes);
  uint32_t alignA = alignmentOf(call.rhs, s.strideB * types.inBytes, batch);
  uint32_t alignB = alignmentOf(call.lhs, m * k * types.inBytes, batch);
  // C is the residual (beta = 1) or, unread, the result itself.
  const void *c = epilogue.residual ? epilogue.residual : call.out;
  uint32_t alignC = alignmentOf(c, m * n * types.outBytes, batch);
  uint32_t alignD = alignmentOf(call.out, m * n * types.outBytes, batch);
  LOOM_CHECK_BLAS(cublasLtMatmulPreferenceCreate(&d.preference));
  LOOM_CHECK_BLAS(cublasLtMatmulPreferenceSetAttribute(
      d.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
      sizeof workspace));
  LOOM_CHECK_BLAS(cublasLtMatmulPreferenceSetAttribute(
      d.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignA,
      sizeof alignA));
  LOOM_CHECK_BLAS(cublasLtMatmulPreferenceSetAttribute(
      d.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignB,
      sizeof alignB));
  LOOM_CHECK_BLAS(cublasLtMatmulPreferenceSetAttribute(
      d.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignC,
      sizeof alignC));
  LOOM_CHECK_BLAS(cublasLtMatmulPreferenceSetAttribute(
      d.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignD,
      sizeof alignD));
  uint32_t reductions = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  LOOM_CHECK_BLAS(cublasLtMatmulPreferenceSetAttribute(
      d.preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reductions,
      sizeof reductions));

  const cublasLtMatmulAlgo_t *algo = nullptr;
  // Everything the heuristic is told.
  std::vector<int64_t> key = {types.in, types.out, opA, opB, epilogue.kind};
  key.insert(key.end(), {m, n, k, batch, s.strideB, call.ldLhs, call.ldRhs,
                         call.ldOut, call.workspaceBytes});
  key.insert(key.end(),
             {alignA, alignB, alignC, alignD, alignmentOf(epilogue.bias, 0, 1),
              alignmentOf(call.aux, 0, 1), epilogue.residual != nullptr});
  if (int32_t status =
          findAlgorithm(context, std::move(key), d, optional, &algo))
    return status;
  float alpha = 1.0f, beta = epilogue.residual ? 1.0f : 0.0f;
  LOOM_CHECK_BLAS(cublasLtMatmul(context->blaslt, d.matmul, &alpha, call.rhs,
                                 d.a, call.lhs, d.b, &beta, c, d.c, call.out,
                                 d.c, algo, call.workspace, call.workspaceBytes,
                                 context->stream));
  return 0;
}

/// runGemmStaging's operations on the device, in the context's stream.
struct DeviceStagingOps {
  loom_cuda_context *context;
  const GemmShape &shape;
  const GemmTypes &types;
  const LtEpilogue &epilogue;

  int32_t copy(void *dst, int64_t dstPitch, const void *src, int64_t srcPitch,
               int64_t width, int64_t height) {
    cudaError_t status =
        cudaMemcpy2DAsync(dst, dstPitch, src, srcPitch, width, height,
                          cudaMemcpyDeviceToDevice, context->stream);
    if (status == cudaSuccess)
      return 0;
    cudaGetLastError(); // reported here, not at the next launch check
    return fail("loom_cuda_matmul: staging a matrix: %s",
                cudaGetErrorString(status));
  }
  int32_t gemm(const GemmCall &call) {
    return cuda::gemm(context, shape, types, epilogue, call);
  }
};

/// The GEMM `s` with `epilogue` into `out` (and the epilogue's aux),
/// staged as planned for the context's scratch: 0, kNoAlgorithm, or a
/// recorded failure.
int32_t stagedGemm(loom_cuda_context *context, const GemmShape &s,
                   const View &lhs, const View &rhs, const View &out,
                   const LtEpilogue &epilogue) {
  GemmTypes types = {cudaTypeOf(lhs.dtype), cudaTypeOf(out.dtype),
                     lhs.elementBytes(), out.elementBytes()};
  GemmStagingPlan plan =
      planGemmStaging(s, types.inBytes, types.outBytes, context->scratchBytes);
  DeviceStagingOps ops{context, s, types, epilogue};
  return runGemmStaging(plan, s, types.inBytes, types.outBytes, lhs.data,
                        rhs.data, out.data, epilogue.aux, context->scratch,
                        ops);
}

/// The part of a forward epilogue cuBLASLt did not do, per element of the
/// result (`total` elements in rows of `n`): value = product (0 when
/// `product` has no data: k = 0) + bias[column] (when `bias` has data) +
/// residual (when it has data), stored into `pre` when it has data, and
/// gelu(value) (`applyGelu`) or the value into `out`. `product` may be
/// `pre` or `out`: each thread reads its element before it writes it.
__global__ void epilogue_forward_kernel(Floats product, Floats bias,
                                        Floats residual, Floats pre, Floats out,
                                        bool applyGelu, int64_t n,
                                        int64_t total) {
  LOOM_GRID_STRIDE(e, total) {
    float value = product.data ? product[e] : 0.0f;
    if (bias.data)
      value += bias[e % n];
    if (residual.data)
      value += residual[e];
    if (pre.data)
      pre.store(e, value);
    out.store(e, applyGelu ? gelu(value) : value);
  }
}

/// What epilogue_forward adds to the product (null: nothing).
struct ForwardRest {
  const View *bias = nullptr, *residual = nullptr, *pre = nullptr;
  bool gelu = false;
};

int32_t epilogue_forward(loom_cuda_context *context, const View *product,
                         const ForwardRest &rest, const View &out, int64_t n) {
  Floats none = {nullptr, LOOM_DTYPE_F32};
  auto orNone = [&](const View *view) { return view ? floats(*view) : none; };
  int64_t total = out.numElements();
  epilogue_forward_kernel<<<blocksFor(total), kThreads, 0, context->stream>>>(
      orNone(product), orNone(rest.bias), orNone(rest.residual),
      orNone(rest.pre), floats(out), rest.gelu, n, total);
  return checkLaunch("matmul");
}

/// dpre[e] *= gelu'(pre[e]): gelu_grad of the product in place, where the
/// scratch has no room for dgelu_bias_grad_kernel's partial sums.
__global__ void dgelu_kernel(Floats dpre, Floats pre, int64_t total,
                             bool vector) {
  pointwise(dpre, pre, dpre, total, vector,
            [](float dy, float x) { return dy * geluDerivative(x); });
}

/// Columns [e, e + W) of `t` (W = 8: e a multiple of 8 on 16-byte aligned
/// rows, see aligned16; W = 1: any).
template <int W>
__device__ __forceinline__ void loadColumns(const Floats &t, int64_t e,
                                            float (&v)[W]) {
  if constexpr (W == 8)
    load8(t, e, v);
  else
    v[0] = t[e];
}

/// dpre = dy * gelu'(pre) for columns [e, e + W) of one row, as
/// dgelu_kernel computes and rounds it, stored into `dpre` and added to
/// `sums` as stored: the values sumRows would read back.
template <int W>
__device__ __forceinline__ void
dgeluColumns(const Floats &dpre, int64_t e, float (&dy)[W], const float (&x)[W],
             double (&sums)[W]) {
  bool bf16 = dpre.dtype == LOOM_DTYPE_BF16;
#pragma unroll
  for (int k = 0; k < W; ++k) {
    float value = dy[k] * geluDerivative(x[k]);
    dy[k] = bf16 ? roundBf16(value) : value;
    sums[k] += dy[k];
  }
  if constexpr (W == 8)
    store8(dpre, e, dy);
  else
    dpre.store(e, dy[0]);
}

/// dgelu_bias_grad after a plain GEMM in one pass over [rows, n]: a thread
/// per (group of W columns, chunk of `chunkRows` rows) takes the gelu
/// gradient in place (dpre, the product, is dy) and sums its chunk of
/// each column in double, in row order, into partial[chunk * n + column].
/// Neighbouring threads take neighbouring groups, so that a warp's loads
/// of a row are contiguous. Two rows are loaded before either is stored,
/// for more loads in flight while the gelu gradient's arithmetic runs.
template <int W>
__global__ void __launch_bounds__(kThreads, 3)
    dgelu_bias_grad_kernel(Floats dpre, Floats pre, double *partial,
                           int64_t rows, int64_t n, int64_t chunks,
                           int64_t chunkRows) {
  int64_t groups = n / W;
  LOOM_GRID_STRIDE(i, groups * chunks) {
    int64_t column = i % groups * W, chunk = i / groups;
    int64_t r = chunk * chunkRows, last = min(rows, r + chunkRows);
    double sums[W] = {};
    for (; r + 1 < last; r += 2) {
      int64_t e = r * n + column;
      float dy0[W], x0[W], dy1[W], x1[W];
      loadColumns(dpre, e, dy0);
      loadColumns(pre, e, x0);
      loadColumns(dpre, e + n, dy1);
      loadColumns(pre, e + n, x1);
      dgeluColumns(dpre, e, dy0, x0, sums);
      dgeluColumns(dpre, e + n, dy1, x1, sums);
    }
    if (r < last) {
      int64_t e = r * n + column;
      float dy[W], x[W];
      loadColumns(dpre, e, dy);
      loadColumns(pre, e, x);
      dgeluColumns(dpre, e, dy, x, sums);
    }
#pragma unroll
    for (int k = 0; k < W; ++k)
      partial[chunk * n + column + k] = sums[k];
  }
}

/// The threads of a block of column_sums_kernel: kSumColumns columns by
/// kSumLanes lanes, each lane a strided share of the chunks.
constexpr int kSumColumns = 32, kSumLanes = 32;

/// out[column] = the sum of the column's `chunks` partial sums in double:
/// lane l adds chunks l, l + kSumLanes, ... in order, then lane 0 adds the
/// lanes in order (an order fixed by `chunks`, not by the launch).
__global__ void column_sums_kernel(const double *partial, int64_t chunks,
                                   int64_t n, Floats out) {
  __shared__ double lanes[kSumLanes][kSumColumns];
  int64_t column = blockIdx.x * static_cast<int64_t>(kSumColumns) + threadIdx.x;
  double sum = 0.0;
  if (column < n)
    for (int64_t c = threadIdx.y; c < chunks; c += kSumLanes)
      sum += partial[c * n + column];
  lanes[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y != 0 || column >= n)
    return;
  for (int lane = 1; lane < kSumLanes; ++lane)
    sum += lanes[lane][threadIdx.x];
  out.store(column, static_cast<float>(sum));
}

/// Rows per chunk of dgelu_bias_grad_kernel where the scratch has room:
/// enough per thread to keep its loads streaming, few enough that the grid
/// runs in several waves on a large GPU (GPT-2's [65536, 3072]: 1024 chunks
/// of 384 threads, 1536 blocks) and the partials stay a few percent of the
/// traffic (8 bytes per column per chunk, written and read once, against
/// 6 per element of the chunk for bf16).
constexpr int64_t kDgeluChunkRows = 64;
/// Fewer threads than this do not fill the GPU: a grid cut short by the
/// scratch below both this and its wanted size falls back to dgelu_kernel
/// and sumRows.
constexpr int64_t kDgeluFillThreads = int64_t{1} << 17;

/// The gelu gradient in place and the column sums of `dpre` [rows, n] (its
/// values as stored) into `biasGrad`, in dgelu_bias_grad_kernel and
/// column_sums_kernel with the partial sums in the context's scratch; or,
/// where the scratch is too small for them, in dgelu_kernel and sumRows.
int32_t dgeluBiasGrad(loom_cuda_context *context, const View &dpre,
                      const View &pre, int64_t rows, int64_t n,
                      const View &biasGrad) {
  bool vector = n % 8 == 0 && aligned16(dpre.data) && aligned16(pre.data);
  int64_t groups = vector ? n / 8 : n;
  int64_t wanted = (rows + kDgeluChunkRows - 1) / kDgeluChunkRows;
  int64_t room =
      context->scratchBytes / (n * static_cast<int64_t>(sizeof(double)));
  int64_t chunks = std::min(wanted, room);
  if (chunks == 0 || (chunks < wanted && groups * chunks < kDgeluFillThreads)) {
    int64_t total = rows * n;
    dgelu_kernel<<<pointwiseBlocks(total, vector), kThreads, 0,
                   context->stream>>>(floats(dpre), floats(pre), total, vector);
    if (int32_t status = checkLaunch("matmul"))
      return status;
    return sumRows(context, dpre, rows, n, biasGrad, "matmul");
  }
  int64_t chunkRows = (rows + chunks - 1) / chunks;
  chunks = (rows + chunkRows - 1) / chunkRows;
  double *partial = static_cast<double *>(context->scratch);
  unsigned blocks = blocksFor(groups * chunks);
  if (vector)
    dgelu_bias_grad_kernel<8><<<blocks, kThreads, 0, context->stream>>>(
        floats(dpre), floats(pre), partial, rows, n, chunks, chunkRows);
  else
    dgelu_bias_grad_kernel<1><<<blocks, kThreads, 0, context->stream>>>(
        floats(dpre), floats(pre), partial, rows, n, chunks, chunkRows);
  if (int32_t status = checkLaunch("matmul"))
    return status;
  unsigned sumBlocks =
      static_cast<unsigned>((n + kSumColumns - 1) / kSumColumns);
  column_sums_kernel<<<sumBlocks, dim3(kSumColumns, kSumLanes), 0,
                       context->stream>>>(partial, chunks, n, floats(biasGrad));
  return checkLaunch("matmul");
}

/// A backward epilogue after a plain GEMM, the product in result 0: the
/// gelu gradient at pre in place with the sums of its rows
/// (dgelu_bias_grad), or the sum of the rhs' [k, n] rows (bias_grad), into
/// result 1.
int32_t finishBiasGrad(loom_cuda_context *context, const KernelArgs &args,
                       int64_t n) {
  const View &result = args.out(0);
  bool dgelu = args.numOperands() == 3;
  const View &summed = dgelu ? result : args.in(1);
  int64_t rows = n == 0 ? 0 : summed.numElements() / n;
  if (dgelu && rows > 0)
    return dgeluBiasGrad(context, result, args.in(2), rows, n, args.out(1));
  return sumRows(context, summed, rows, n, args.out(1), "matmul");
}

/// Whether LOOM_CUDA_GEMM_EPILOGUES=basic keeps the residual and bias_grad
/// epilogues out of cuBLASLt (their way in Matmul.cu's own kernels after a
/// plain GEMM stays available for comparison and as a way around a
/// cuBLASLt that computes them wrongly).
bool basicEpilogues() {
  const char *value = std::getenv("LOOM_CUDA_GEMM_EPILOGUES");
  return value && std::strcmp(value, "basic") == 0;
}

/// The product of `s` with `epilogue` into the results: the cuBLASLt
/// epilogues that apply (see the banner) tried in turn, then what the one
/// that ran left undone in Matmul.cu's kernels and sumRows.
int32_t productWithEpilogue(loom_cuda_context *context, const KernelArgs &args,
                            const GemmShape &s, int64_t epilogue) {
  kernels::EpilogueForm form;
  kernels::epilogueForm(epilogue, form);
  const View &lhs = args.in(0), &rhs = args.in(1);
  const View &result = args.out(0);
  const View *bias = form.bias >= 0 ? &args.in(form.bias) : nullptr;
  const View *residual = form.residual >= 0 ? &args.in(form.residual) : nullptr;
  // gelu(pre) goes to result 1 with bias_gelu_aux; the bias gradient too.
  const View &out = args.out(form.keepsSum ? 1 : 0);
  bool bf16 = result.dtype == LOOM_DTYPE_BF16;
  // The epilogues that read or write beside the product in the product's
  // own layout take no staging, whose chunks would cut their sums.
  bool unstaged = !planGemmStaging(s, lhs.elementBytes(), result.elementBytes(),
                                   context->scratchBytes)
                       .staged();
  bool fuseMore = unstaged && s.batch == 1 && !basicEpilogues();

  LtEpilogue tries[3];
  int count = 0;
  auto add = [&](cublasLtEpilogue_t kind, const void *biasPointer,
                 void *aux = nullptr, const void *residualPointer = nullptr) {
    tries[count++] = {kind, biasPointer, aux, residualPointer};
  };
  const void *biasData = bias ? bias->data : nullptr;
  if (form.gelu && bf16 && (!form.keepsSum || s.n % 8 == 0))
    add(form.keepsSum ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                      : CUBLASLT_EPILOGUE_GELU_BIAS,
        biasData, form.keepsSum ? result.data : nullptr);
  if (residual && fuseMore)
    add(bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT, biasData,
        nullptr, residual->data);
  if (epilogue == LOOM_EPILOGUE_BIAS_GRAD && fuseMore)
    add(CUBLASLT_EPILOGUE_BGRADA, args.out(1).data);
  if (bias)
    add(CUBLASLT_EPILOGUE_BIAS, biasData);
  add(CUBLASLT_EPILOGUE_DEFAULT, nullptr);
  int32_t status = 0;
  int done = 0;
  for (; done < count; ++done) {
    const LtEpilogue &lt = tries[done];
    // GELU_AUX_BIAS's D is gelu(pre), its aux pre; otherwise D is result 0.
    bool intoOut = lt.kind == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    status = stagedGemm(context, s, lhs, rhs, intoOut ? out : result, lt);
    // The next epilogue only when cuBLASLt has no algorithm for this one.
    if (status != kNoAlgorithm)
      break;
  }
  if (status == kNoAlgorithm)
    return fail("loom_cuda_matmul: cuBLASLt has no algorithm for [%lld x "
                "%lld x %lld] x %lld",
                static_cast<long long>(s.m), static_cast<long long>(s.n),
                static_cast<long long>(s.k), static_cast<long long>(s.batch));
  if (status != 0)
    return status;

  const LtEpilogue &ran = tries[done];
  if (form.biasGrad)
    return ran.kind == CUBLASLT_EPILOGUE_BGRADA
               ? 0
               : finishBiasGrad(context, args, s.n);
  bool biasAdded = ran.kind == CUBLASLT_EPILOGUE_BIAS ||
                   ran.kind == CUBLASLT_EPILOGUE_GELU_BIAS ||
                   ran.kind == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  bool geluApplied = ran.kind == CUBLASLT_EPILOGUE_GELU_BIAS ||
                     ran.kind == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  ForwardRest rest;
  rest.bias = bias && !biasAdded ? bias : nullptr;
  rest.residual = residual && !ran.residual ? residual : nullptr;
  rest.pre = form.keepsSum && !biasAdded ? &result : nullptr;
  rest.gelu = form.gelu && !geluApplied;
  if (!rest.bias && !rest.residual && !rest.gelu)
    return 0;
  return epilogue_forward(context, &result, rest, out, s.n);
}

} // namespace
} // namespace loom::cuda

using namespace loom::cuda;

extern "C" int32_t loom_cuda_matmul(const loom_call_frame *,
                                    void *const *buffers, const int64_t *meta,
                                    loom_cuda_context *context) {
  ProfileScope scope(context, "matmul");
  KernelArgs args(buffers, meta);
  auto attrs = readAttrs<Kernel::matmul>(args);
  bool transposeLhs = attrs.transpose_lhs, transposeRhs = attrs.transpose_rhs;
  int64_t epilogue = attrs.epilogue;
  loom::kernels::EpilogueForm form;
  char error[256];
  if (!loom::kernels::epilogueForm(epilogue, form) ||
      !loom::kernels::checkMatmulEpilogue(args, epilogue, transposeRhs,
                                          "loom_cuda", error, sizeof error))
    return fail("%s", error);
  if (int32_t status = args.expect("matmul", form.operands, form.results))
    return status;
  const View &lhs = args.in(0), &rhs = args.in(1), &out = args.out(0);
  if (lhs.rank < 2 || rhs.rank < 2 || out.rank != lhs.rank ||
      (rhs.rank != 2 && rhs.rank != lhs.rank))
    return fail("loom_cuda_matmul: operands of rank %lld and %lld, result of "
                "rank %lld",
                static_cast<long long>(lhs.rank),
                static_cast<long long>(rhs.rank),
                static_cast<long long>(out.rank));
  if (lhs.dtype != rhs.dtype ||
      (lhs.dtype == LOOM_DTYPE_F32 && out.dtype != LOOM_DTYPE_F32))
    return fail("loom_cuda_matmul: operands of element types %d and %d, "
                "result of %d (f32 x f32 -> f32, bf16 x bf16 -> bf16 or f32)",
                static_cast<int>(lhs.dtype), static_cast<int>(rhs.dtype),
                static_cast<int>(out.dtype));
  int64_t m = out.dims[out.rank - 2], n = out.dims[out.rank - 1];
  int64_t k = transposeLhs ? lhs.dims[lhs.rank - 2] : lhs.dims[lhs.rank - 1];
  int64_t rhsK = transposeRhs ? rhs.dims[rhs.rank - 1] : rhs.dims[rhs.rank - 2];
  int64_t rhsN = transposeRhs ? rhs.dims[rhs.rank - 2] : rhs.dims[rhs.rank - 1];
  int64_t lhsM = transposeLhs ? lhs.dims[lhs.rank - 1] : lhs.dims[lhs.rank - 2];
  if (rhsK != k || rhsN != n || lhsM != m)
    return fail("loom_cuda_matmul: [%lld x %lld] x [%lld x %lld] does not "
                "give [%lld x %lld]",
                static_cast<long long>(lhsM), static_cast<long long>(k),
                static_cast<long long>(rhsK), static_cast<long long>(rhsN),
                static_cast<long long>(m), static_cast<long long>(n));
  // An empty product still has its bias gradient (of n zeros or of the
  // rhs' rows).
  if (out.numElements() == 0)
    return form.biasGrad ? finishBiasGrad(context, args, n) : 0;
  int64_t batch = out.numElements() / (m * n);
  bool sharedRhs = rhs.rank == 2;
  if (lhs.numElements() != batch * m * k ||
      rhs.numElements() != (sharedRhs ? 1 : batch) * k * n)
    return fail("loom_cuda_matmul: the batch dimensions of the operands do "
                "not match the result's");
  if (k == 0) {
    // The product is zeros: the results are the epilogue's of zeros.
    if (form.bias >= 0 || form.residual >= 0) {
      ForwardRest rest;
      rest.bias = form.bias >= 0 ? &args.in(form.bias) : nullptr;
      rest.residual = form.residual >= 0 ? &args.in(form.residual) : nullptr;
      rest.pre = form.keepsSum ? &out : nullptr;
      rest.gelu = form.gelu;
      return epilogue_forward(context, nullptr, rest,
                              args.out(form.keepsSum ? 1 : 0), n);
    }
    cudaError_t status = cudaMemsetAsync(
        out.data, 0, out.numElements() * out.elementBytes(), context->stream);
    if (status != cudaSuccess)
      return fail("loom_cuda_matmul: %s", cudaGetErrorString(status));
    return form.biasGrad ? finishBiasGrad(context, args, n) : 0;
  }
  scope.label("matmul %lld x [%lld x %lld x %lld]%s%s %s",
              static_cast<long long>(batch), static_cast<long long>(m),
              static_cast<long long>(n), static_cast<long long>(k),
              transposeLhs ? " lhs^T" : "", transposeRhs ? " rhs^T" : "",
              form.name);
  GemmShape shape;
  shape.transA = transposeLhs;
  shape.transB = transposeRhs;
  shape.n = n;
  shape.k = k;
  if (sharedRhs && !transposeLhs) {
    shape.m = batch * m;
  } else {
    shape.m = m;
    shape.batch = batch;
    shape.strideB = sharedRhs ? 0 : k * n;
  }
  return productWithEpilogue(context, args, shape, epilogue);
}
