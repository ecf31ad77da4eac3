//===- FakeCublasLt.cpp - cuBLASLt on the fake device ---------------------===//
//
// The cuBLASLt calls of runtime/cuda/kernels/Matmul.cu: descriptors and
// layouts keep what they are given; the heuristic checks the problem
// against cuBLASLt's rules (cublasLt.h's documentation of the layouts,
// epilogues and aux matrices) and answers with one algorithm that carries
// the preference's reduction schemes; cublasLtMatmul checks it again, with
// every matrix, the bias, the aux and the workspace inside a live
// allocation, and records the GEMM without computing it.
//
//===----------------------------------------------------------------------===//

#include "FakeDevice.h"

#include <cublasLt.h>

#include <cstdlib>
#include <cstring>

namespace loom::fake {
namespace {

constexpr uint64_t kAlgorithmMagic = 0x4c6f6f6d46616b65ull; // "LoomFake"

struct Layout {
  cudaDataType type = CUDA_R_32F;
  int64_t rows = 0, cols = 0, ld = 0;
  int32_t batch = 1;
  int64_t stride = 0;
};

struct MatmulDesc {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale = CUDA_R_32F;
  cublasOperation_t transA = CUBLAS_OP_N, transB = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
  void *aux = nullptr;
  int64_t auxLd = 0, auxStride = 0, biasStride = 0;
  int32_t biasType = -1; ///< -1: the default (D's type)
};

struct Preference {
  uint64_t maxWorkspace = 0;
  uint32_t reductionSchemes = CUBLASLT_REDUCTION_SCHEME_MASK;
};

/// Copies an attribute of `size` bytes into `field`, if sizes agree.
template <typename T>
cublasStatus_t setField(T &field, const void *buf, size_t size) {
  if (size != sizeof(T) || !buf)
    return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&field, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

int64_t bytesOf(int32_t type) {
  switch (type) {
  case CUDA_R_16BF:
  case CUDA_R_16F:
    return 2;
  case CUDA_R_32F:
    return 4;
  case CUDA_R_64F:
    return 8;
  default:
    return 0;
  }
}

/// The bytes a batched column-major matrix spans from its first element.
uint64_t extentOf(const Layout &layout) {
  if (layout.rows == 0 || layout.cols == 0)
    return 0;
  uint64_t elements = static_cast<uint64_t>(layout.cols - 1) * layout.ld +
                      static_cast<uint64_t>(layout.rows) +
                      static_cast<uint64_t>(layout.batch - 1) *
                          static_cast<uint64_t>(layout.stride);
  return elements * static_cast<uint64_t>(bytesOf(layout.type));
}

/// The problem's m, n, k by cuBLASLt's rules, or a violation.
struct Problem {
  int64_t m = 0, n = 0, k = 0;
};

bool checkProblem(const char *call, const MatmulDesc &desc, const Layout &a,
                  const Layout &b, const Layout &c, const Layout &d,
                  Problem &p) {
  if (desc.compute != CUBLAS_COMPUTE_32F || desc.scale != CUDA_R_32F)
    return violation("%s: compute type %d, scale type %d (Loom asks for "
                     "CUBLAS_COMPUTE_32F and CUDA_R_32F)",
                     call, desc.compute, desc.scale);
  bool ta = desc.transA != CUBLAS_OP_N, tb = desc.transB != CUBLAS_OP_N;
  p.m = ta ? a.cols : a.rows;
  p.k = ta ? a.rows : a.cols;
  int64_t bk = tb ? b.cols : b.rows;
  p.n = tb ? b.rows : b.cols;
  if (bk != p.k)
    return violation("%s: op(A) is %lld x %lld but op(B) has %lld rows", call,
                     static_cast<long long>(p.m), static_cast<long long>(p.k),
                     static_cast<long long>(bk));
  for (const Layout *l : {&c, &d})
    if (l->rows != p.m || l->cols != p.n)
      return violation(
          "%s: C or D is %lld x %lld, not m x n = %lld x %lld", call,
          static_cast<long long>(l->rows), static_cast<long long>(l->cols),
          static_cast<long long>(p.m), static_cast<long long>(p.n));
  for (const Layout *l : {&a, &b, &c, &d}) {
    if (l->ld < std::max<int64_t>(1, l->rows))
      return violation("%s: leading dimension %lld below the %lld rows", call,
                       static_cast<long long>(l->ld),
                       static_cast<long long>(l->rows));
    if (l->batch != d.batch)
      return violation("%s: batch counts differ (%d and %d)", call, l->batch,
                       d.batch);
  }
  if (a.type != b.type || (a.type != CUDA_R_16BF && a.type != CUDA_R_32F))
    return violation("%s: A and B of types %d and %d (Loom's GEMMs take two "
                     "bf16 or two f32 inputs)",
                     call, a.type, b.type);
  if (c.type != d.type ||
      (d.type != CUDA_R_32F && !(a.type == CUDA_R_16BF && d.type == a.type)))
    return violation("%s: inputs of type %d into C/D of types %d/%d", call,
                     a.type, c.type, d.type);
  cublasLtEpilogue_t e = desc.epilogue;
  bool bias = e & (CUBLASLT_EPILOGUE_BIAS | CUBLASLT_EPILOGUE_BGRADA |
                   CUBLASLT_EPILOGUE_BGRADB | 16);
  bool aux = e & 128;
  if (bias && !desc.bias)
    return violation("%s: epilogue %d without a bias pointer", call, e);
  if (aux && (!desc.aux || desc.auxLd < p.m || desc.auxLd % 8 != 0))
    return violation("%s: epilogue %d needs an aux pointer and an aux "
                     "leading dimension of at least m = %lld, a multiple of "
                     "8 (given %lld)",
                     call, e, static_cast<long long>(p.m),
                     static_cast<long long>(desc.auxLd));
  return true;
}

/// Whether the epilogue's bias and aux lie in device memory.
bool checkEpilogueMemory(const char *call, const MatmulDesc &desc,
                         const Problem &p, const Layout &d) {
  cublasLtEpilogue_t e = desc.epilogue;
  int32_t biasType = desc.biasType >= 0 ? desc.biasType : d.type;
  bool bias = e & (CUBLASLT_EPILOGUE_BIAS | CUBLASLT_EPILOGUE_BGRADA |
                   CUBLASLT_EPILOGUE_BGRADB | 16);
  if (bias && !inside(desc.bias, p.m * bytesOf(biasType), call, "bias"))
    return false;
  if (e & 128) {
    Layout aux{d.type, p.m, p.n, desc.auxLd, d.batch, desc.auxStride};
    if (!inside(desc.aux, extentOf(aux), call, "aux matrix"))
      return false;
  }
  return true;
}

bool refuseEpilogues() {
  const char *value = std::getenv("LOOM_FAKE_CUBLASLT_EPILOGUES");
  return value && std::strcmp(value, "none") == 0;
}

} // namespace
} // namespace loom::fake

using namespace loom::fake;

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
  *handle = reinterpret_cast<cublasLtHandle_t>(new char);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete reinterpret_cast<char *>(handle);
  return CUBLAS_STATUS_SUCCESS;
}

const char *cublasLtGetStatusString(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS:
    return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_INVALID_VALUE:
    return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_NOT_SUPPORTED:
    return "CUBLAS_STATUS_NOT_SUPPORTED";
  default:
    return "CUBLAS_STATUS_INTERNAL_ERROR";
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *out,
                                          cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  auto *layout = new Layout;
  layout->type = type;
  layout->rows = static_cast<int64_t>(rows);
  layout->cols = static_cast<int64_t>(cols);
  layout->ld = ld;
  *out = reinterpret_cast<cublasLtMatrixLayout_t>(layout);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete reinterpret_cast<Layout *>(layout);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t handle,
                                 cublasLtMatrixLayoutAttribute_t attr,
                                 const void *buf, size_t size) {
  auto &layout = *reinterpret_cast<Layout *>(handle);
  switch (attr) {
  case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
    return setField(layout.batch, buf, size);
  case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
    return setField(layout.stride, buf, size);
  default:
    return CUBLAS_STATUS_INVALID_VALUE;
  }
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *out,
                                        cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  auto *desc = new MatmulDesc;
  desc->compute = compute;
  desc->scale = scale;
  *out = reinterpret_cast<cublasLtMatmulDesc_t>(desc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete reinterpret_cast<MatmulDesc *>(desc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t handle,
                               cublasLtMatmulDescAttributes_t attr,
                               const void *buf, size_t size) {
  auto &desc = *reinterpret_cast<MatmulDesc *>(handle);
  switch (attr) {
  case CUBLASLT_MATMUL_DESC_TRANSA:
    return setField(desc.transA, buf, size);
  case CUBLASLT_MATMUL_DESC_TRANSB:
    return setField(desc.transB, buf, size);
  case CUBLASLT_MATMUL_DESC_EPILOGUE:
    return setField(desc.epilogue, buf, size);
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    return setField(desc.bias, buf, size);
  case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE:
    return setField(desc.biasStride, buf, size);
  case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
    return setField(desc.biasType, buf, size);
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
    return setField(desc.aux, buf, size);
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
    return setField(desc.auxLd, buf, size);
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE:
    return setField(desc.auxStride, buf, size);
  default:
    return CUBLAS_STATUS_INVALID_VALUE;
  }
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *out) {
  *out = reinterpret_cast<cublasLtMatmulPreference_t>(new Preference);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete reinterpret_cast<Preference *>(pref);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t handle,
                                     cublasLtMatmulPreferenceAttributes_t attr,
                                     const void *buf, size_t size) {
  auto &pref = *reinterpret_cast<Preference *>(handle);
  uint32_t alignment = 0;
  switch (attr) {
  case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
    return setField(pref.maxWorkspace, buf, size);
  case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK:
    return setField(pref.reductionSchemes, buf, size);
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
    return setField(alignment, buf, size);
  default:
    return CUBLAS_STATUS_INVALID_VALUE;
  }
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t, cublasLtMatmulDesc_t descHandle,
    cublasLtMatrixLayout_t aHandle, cublasLtMatrixLayout_t bHandle,
    cublasLtMatrixLayout_t cHandle, cublasLtMatrixLayout_t dHandle,
    cublasLtMatmulPreference_t prefHandle, int requested,
    cublasLtMatmulHeuristicResult_t results[], int *returned) {
  const auto &desc = *reinterpret_cast<const MatmulDesc *>(descHandle);
  const auto &pref = *reinterpret_cast<const Preference *>(prefHandle);
  *returned = 0;
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  Problem p;
  if (requested < 1 ||
      !checkProblem("cublasLtMatmulAlgoGetHeuristic", desc,
                    *reinterpret_cast<const Layout *>(aHandle),
                    *reinterpret_cast<const Layout *>(bHandle),
                    *reinterpret_cast<const Layout *>(cHandle),
                    *reinterpret_cast<const Layout *>(dHandle), p))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (desc.epilogue != CUBLASLT_EPILOGUE_DEFAULT && refuseEpilogues())
    return CUBLAS_STATUS_NOT_SUPPORTED;
  cublasLtMatmulHeuristicResult_t &result = results[0];
  std::memset(&result, 0, sizeof result);
  result.algo.data[0] = kAlgorithmMagic;
  result.algo.data[1] = pref.reductionSchemes;
  result.workspaceSize = 0;
  result.state = CUBLAS_STATUS_SUCCESS;
  result.wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t descHandle,
                              const void *alpha, const void *a,
                              cublasLtMatrixLayout_t aHandle, const void *b,
                              cublasLtMatrixLayout_t bHandle, const void *beta,
                              const void *c, cublasLtMatrixLayout_t cHandle,
                              void *dPointer, cublasLtMatrixLayout_t dHandle,
                              const cublasLtMatmulAlgo_t *algo, void *workspace,
                              size_t workspaceBytes, cudaStream_t stream) {
  const char *call = "cublasLtMatmul";
  const auto &desc = *reinterpret_cast<const MatmulDesc *>(descHandle);
  const auto &la = *reinterpret_cast<const Layout *>(aHandle);
  const auto &lb = *reinterpret_cast<const Layout *>(bHandle);
  const auto &lc = *reinterpret_cast<const Layout *>(cHandle);
  const auto &ld = *reinterpret_cast<const Layout *>(dHandle);
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  Problem p;
  if (!checkProblem(call, desc, la, lb, lc, ld, p))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!algo || algo->data[0] != kAlgorithmMagic) {
    violation("%s: an algorithm that no heuristic returned", call);
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (!liveStream(stream)) {
    violation("%s: stream %p is not a live stream", call, (void *)stream);
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  float betaValue = 0.0f;
  std::memcpy(&betaValue, beta, sizeof betaValue);
  (void)alpha;
  if (!inside(a, extentOf(la), call, "A") ||
      !inside(b, extentOf(lb), call, "B") ||
      (betaValue != 0.0f && !inside(c, extentOf(lc), call, "C")) ||
      !inside(dPointer, extentOf(ld), call, "D") ||
      !checkEpilogueMemory(call, desc, p, ld) ||
      !inside(workspace, workspaceBytes, call, "workspace"))
    return CUBLAS_STATUS_INVALID_VALUE;
  ++d.stats.gemms;
  d.gemms.push_back({p.m, p.n, p.k, ld.batch, la.type, ld.type, desc.epilogue,
                     static_cast<uint32_t>(algo->data[1])});
  return CUBLAS_STATUS_SUCCESS;
}

} // extern "C"
