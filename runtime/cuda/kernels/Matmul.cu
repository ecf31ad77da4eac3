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
// result. The algorithm comes from cuBLASLt's heuristic for the shapes,
// types, the pointers' actual alignment and the context's scratch as its
// workspace; the descriptors are built per call (a cache keyed by shape is
// the next step once a step's calls are timed).
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"

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

/// A column-major layout of `rows` x `cols` (leading dimension `rows`),
/// `batch` of them `stride` elements apart.
cublasStatus_t makeLayout(cublasLtMatrixLayout_t *layout, cudaDataType_t type,
                          int64_t rows, int64_t cols, int64_t batch,
                          int64_t stride) {
  cublasStatus_t status =
      cublasLtMatrixLayoutCreate(layout, type, rows, cols, rows);
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

/// C [batch, m, n] = op(A) op(B) with A [batch, m, k] ([k, m] when
/// `transA`) and B [k, n] ([n, k] when `transB`), row-major; `strideB` 0
/// when B is shared.
int32_t gemm(loom_cuda_context *context, bool transA, bool transB, int64_t m,
             int64_t n, int64_t k, int64_t batch, const View &lhs,
             const View &rhs, int64_t strideB, const View &out) {
  cudaDataType_t inType = cudaTypeOf(lhs.dtype),
                 outType = cudaTypeOf(out.dtype);
  Descriptors d;
  LOOM_CHECK_BLAS(
      cublasLtMatmulDescCreate(&d.matmul, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t opA = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  LOOM_CHECK_BLAS(cublasLtMatmulDescSetAttribute(
      d.matmul, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA));
  LOOM_CHECK_BLAS(cublasLtMatmulDescSetAttribute(
      d.matmul, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB));
  // cuBLASLt's A is rhs stored as [n, k] column-major when transposed, [k, n]
  // read as (n x k) otherwise; its B is lhs likewise; C is (n x m).
  LOOM_CHECK_BLAS(
      makeLayout(&d.a, inType, transB ? k : n, transB ? n : k, batch, strideB));
  LOOM_CHECK_BLAS(
      makeLayout(&d.b, inType, transA ? m : k, transA ? k : m, batch, m * k));
  LOOM_CHECK_BLAS(makeLayout(&d.c, outType, n, m, batch, m * n));

  int64_t inBytes = lhs.elementBytes(), outBytes = out.elementBytes();
  uint64_t workspace = static_cast<uint64_t>(context->scratchBytes);
  uint32_t alignA = alignmentOf(rhs.data, strideB * inBytes, batch);
  uint32_t alignB = alignmentOf(lhs.data, m * k * inBytes, batch);
  uint32_t alignC = alignmentOf(out.data, m * n * outBytes, batch);
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
      d.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignC,
      sizeof alignC));

  cublasLtMatmulHeuristicResult_t heuristic = {};
  int found = 0;
  LOOM_CHECK_BLAS(cublasLtMatmulAlgoGetHeuristic(context->blaslt, d.matmul, d.a,
                                                 d.b, d.c, d.c, d.preference, 1,
                                                 &heuristic, &found));
  if (found == 0)
    return fail("loom_cuda_matmul: cuBLASLt has no algorithm for [%lld x "
                "%lld x %lld] x %lld",
                static_cast<long long>(m), static_cast<long long>(n),
                static_cast<long long>(k), static_cast<long long>(batch));
  float alpha = 1.0f, beta = 0.0f;
  LOOM_CHECK_BLAS(
      cublasLtMatmul(context->blaslt, d.matmul, &alpha, rhs.data, d.a, lhs.data,
                     d.b, &beta, out.data, d.c, out.data, d.c, &heuristic.algo,
                     context->scratch, context->scratchBytes, context->stream));
  return 0;
}

} // namespace
} // namespace loom::cuda

using namespace loom::cuda;

extern "C" int32_t loom_cuda_matmul(const loom_call_frame *,
                                    void *const *buffers, const int64_t *meta,
                                    loom_cuda_context *context) {
  KernelArgs args(buffers, meta);
  if (int32_t status = args.expect("matmul", 2, 1))
    return status;
  const View &lhs = args.in(0), &rhs = args.in(1), &out = args.out(0);
  bool transposeLhs = args.unit(), transposeRhs = args.unit();
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
  if (m * n == 0)
    return 0;
  int64_t batch = out.numElements() / (m * n);
  if (k == 0) {
    cudaError_t status = cudaMemsetAsync(
        out.data, 0, out.numElements() * out.elementBytes(), context->stream);
    return status == cudaSuccess
               ? 0
               : fail("loom_cuda_matmul: %s", cudaGetErrorString(status));
  }
  bool sharedRhs = rhs.rank == 2;
  if (lhs.numElements() != batch * m * k ||
      rhs.numElements() != (sharedRhs ? 1 : batch) * k * n)
    return fail("loom_cuda_matmul: the batch dimensions of the operands do "
                "not match the result's");
  if (sharedRhs && !transposeLhs)
    return gemm(context, false, transposeRhs, batch * m, n, k, 1, lhs, rhs, 0,
                out);
  return gemm(context, transposeLhs, transposeRhs, m, n, k, batch, lhs, rhs,
              sharedRhs ? 0 : k * n, out);
}
