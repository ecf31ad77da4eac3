//===- GemmStaging.h - GEMMs whose leading dimensions break alignment
//------===//
//
// cuBLASLt's tensor-core kernels want every matrix's leading dimension to be
// a multiple of 16 bytes. One that is not (GPT-2's vocabulary, 50257 bf16
// values: the lm head's logits and their gradient) leaves cuBLASLt slow
// kernels: 96 TFLOP/s on the H100 against 640-740 for the aligned GEMMs of
// the same model. So, as Inductor's pad_mm does, such a matrix is staged
// through the context's scratch with its leading dimension rounded up to 16
// bytes: an input copied in before the GEMM, the result copied out after,
// by strided 2-D copies.
//
// The GEMM runs in chunks of rows of the result (a multiple of 64 rows
// each), so that the staged pieces fit in the scratch beside cuBLASLt's
// workspace: per chunk, the lhs' rows (its columns when it is transposed)
// and the result's rows; the rhs, which every chunk reads whole, is staged
// once. A chunk's rows are whole rows of the result, so no chunk sums into
// another's output (the bits may still differ with the chunk size, through
// the algorithm cuBLASLt picks for a chunk's shape). Batched
// GEMMs, and GEMMs whose staged pieces would not fit 64 rows, run as given.
//
// Pure C++ (no CUDA): Matmul.cu runs a plan with cudaMemcpy2DAsync and
// cuBLASLt, test/Unit/GemmStagingTest.cpp with host copies and a reference
// GEMM that checks every call's alignment.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_KERNELS_GEMMSTAGING_H
#define LOOM_RUNTIME_CUDA_KERNELS_GEMMSTAGING_H

#include <algorithm>
#include <cstdint>

namespace loom::cuda {

/// One GEMM: C [batch, m, n] = op(A) op(B) with A [batch, m, k] ([k, m]
/// when `transA`) and B [k, n] ([n, k] when `transB`), row-major;
/// `strideB` 0 when B is shared.
struct GemmShape {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0, batch = 1, strideB = 0;
};

/// What cuBLASLt wants of a leading dimension, and where staged matrices
/// start in the scratch.
constexpr int64_t kLeadingAlignBytes = 16, kStagedAlignBytes = 256;
/// Chunks are a multiple of this many rows of the result.
constexpr int64_t kChunkRows = 64;
/// The most of the scratch a staged GEMM leaves cuBLASLt as its workspace
/// (NVIDIA's recommendation for Hopper); at most a quarter of the scratch.
constexpr int64_t kMaxStagedWorkspaceBytes = int64_t{32} << 20;

/// Where one matrix of the GEMM lives: staged at `offset` in the scratch,
/// or in place; `ld` is its leading dimension (elements) as the GEMM reads
/// it.
struct GemmPlacement {
  bool staged = false;
  int64_t ld = 0, offset = 0;
};

/// How a GEMM runs: `chunkRows` rows of the result per call, cuBLASLt's
/// workspace the scratch's first `workspaceBytes`.
struct GemmStagingPlan {
  GemmPlacement lhs, rhs, out;
  int64_t chunkRows = 0, workspaceBytes = 0;
  bool staged() const { return lhs.staged || rhs.staged || out.staged; }
};

namespace staging {

inline int64_t roundUp(int64_t value, int64_t to) {
  return (value + to - 1) / to * to;
}

/// `ld` rounded up to a multiple of 16 bytes.
inline int64_t alignedLd(int64_t ld, int64_t elementBytes) {
  return roundUp(ld, kLeadingAlignBytes / elementBytes);
}

} // namespace staging

/// The plan for `s` with elements of `inBytes` (lhs, rhs) and `outBytes`
/// (the result), given `scratchBytes` of scratch.
inline GemmStagingPlan planGemmStaging(const GemmShape &s, int64_t inBytes,
                                       int64_t outBytes, int64_t scratchBytes) {
  using staging::alignedLd;
  using staging::roundUp;
  GemmStagingPlan asGiven;
  asGiven.lhs.ld = s.transA ? s.m : s.k;
  asGiven.rhs.ld = s.transB ? s.k : s.n;
  asGiven.out.ld = s.n;
  asGiven.chunkRows = s.m;
  asGiven.workspaceBytes = scratchBytes;
  bool stageLhs = alignedLd(asGiven.lhs.ld, inBytes) != asGiven.lhs.ld;
  bool stageRhs = alignedLd(asGiven.rhs.ld, inBytes) != asGiven.rhs.ld;
  bool stageOut = alignedLd(asGiven.out.ld, outBytes) != asGiven.out.ld;
  if (s.batch != 1 || s.m == 0 || !(stageLhs || stageRhs || stageOut))
    return asGiven;

  GemmStagingPlan plan = asGiven;
  plan.workspaceBytes = std::min(kMaxStagedWorkspaceBytes, scratchBytes / 4) /
                        kStagedAlignBytes * kStagedAlignBytes;
  int64_t used = plan.workspaceBytes;
  if (stageRhs) {
    plan.rhs = {true, alignedLd(asGiven.rhs.ld, inBytes), used};
    used += roundUp((s.transB ? s.n : s.k) * plan.rhs.ld * inBytes,
                    kStagedAlignBytes);
  }
  // Bytes per row of a chunk; a transposed lhs' chunk is a block of its
  // columns, staged with the chunk's width as its leading dimension.
  int64_t perRow = 0;
  if (stageLhs)
    perRow += s.transA ? s.k * inBytes : alignedLd(s.k, inBytes) * inBytes;
  if (stageOut)
    perRow += alignedLd(s.n, outBytes) * outBytes;
  // Two alignment gaps at most after the rhs.
  int64_t room = scratchBytes - used - 2 * kStagedAlignBytes;
  if (room < 0)
    return asGiven;
  int64_t rows = perRow == 0 ? roundUp(s.m, kChunkRows) : room / perRow;
  rows = std::min(rows / kChunkRows * kChunkRows, roundUp(s.m, kChunkRows));
  if (rows == 0)
    return asGiven;
  plan.chunkRows = rows;
  if (stageLhs) {
    plan.lhs = {true, s.transA ? rows : alignedLd(s.k, inBytes), used};
    used += roundUp((s.transA ? s.k : rows) * plan.lhs.ld * inBytes,
                    kStagedAlignBytes);
  }
  if (stageOut)
    plan.out = {true, alignedLd(s.n, outBytes), used};
  return plan;
}

/// One GEMM of a plan: `rows` rows of the result from its row `firstRow`,
/// each matrix at its pointer with its leading dimension (elements);
/// `aux` (when set) has the result's layout in place.
struct GemmCall {
  const char *lhs = nullptr, *rhs = nullptr;
  char *out = nullptr, *aux = nullptr, *workspace = nullptr;
  int64_t ldLhs = 0, ldRhs = 0, ldOut = 0;
  int64_t firstRow = 0, rows = 0, workspaceBytes = 0;
};

/// Runs `plan` for `s`: `ops.copy(dst, dstPitch, src, srcPitch, width,
/// height)` (bytes, as cudaMemcpy2D) stages matrices in and out, and
/// `ops.gemm(call)` runs one chunk; the first nonzero status of either is
/// returned.
template <typename Ops>
int32_t runGemmStaging(const GemmStagingPlan &plan, const GemmShape &s,
                       int64_t inBytes, int64_t outBytes, const void *lhs,
                       const void *rhs, void *out, void *aux, void *scratch,
                       Ops &ops) {
  char *base = static_cast<char *>(scratch);
  const char *lhsBytes = static_cast<const char *>(lhs);
  GemmCall call;
  call.rhs = static_cast<const char *>(rhs);
  call.ldRhs = plan.rhs.ld;
  call.ldLhs = plan.lhs.ld;
  call.ldOut = plan.out.ld;
  call.workspace = base;
  call.workspaceBytes = plan.workspaceBytes;
  if (plan.rhs.staged) {
    int64_t rows = s.transB ? s.n : s.k, width = s.transB ? s.k : s.n;
    char *staged = base + plan.rhs.offset;
    if (int32_t status = ops.copy(staged, plan.rhs.ld * inBytes, rhs,
                                  width * inBytes, width * inBytes, rows))
      return status;
    call.rhs = staged;
  }
  for (int64_t first = 0; first < s.m; first += plan.chunkRows) {
    int64_t rows = std::min(plan.chunkRows, s.m - first);
    call.firstRow = first;
    call.rows = rows;
    // The chunk's rows of lhs ([m, k]) or columns (lhs^T, stored [k, m]).
    const char *lhsChunk = s.transA ? lhsBytes + first * inBytes
                                    : lhsBytes + first * s.k * inBytes;
    call.lhs = lhsChunk;
    if (plan.lhs.staged) {
      char *staged = base + plan.lhs.offset;
      int64_t width = s.transA ? rows : s.k, height = s.transA ? s.k : rows;
      if (int32_t status = ops.copy(staged, plan.lhs.ld * inBytes, lhsChunk,
                                    (s.transA ? s.m : s.k) * inBytes,
                                    width * inBytes, height))
        return status;
      call.lhs = staged;
    }
    char *outChunk = static_cast<char *>(out) + first * s.n * outBytes;
    call.out = plan.out.staged ? base + plan.out.offset : outChunk;
    call.aux =
        aux ? static_cast<char *>(aux) + first * s.n * outBytes : nullptr;
    if (int32_t status = ops.gemm(call))
      return status;
    if (plan.out.staged)
      if (int32_t status =
              ops.copy(outChunk, s.n * outBytes, call.out,
                       plan.out.ld * outBytes, s.n * outBytes, rows))
        return status;
  }
  return 0;
}

} // namespace loom::cuda

#endif // LOOM_RUNTIME_CUDA_KERNELS_GEMMSTAGING_H
