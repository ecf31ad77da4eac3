//===- GemmStagingTest.cpp - Staged GEMMs, run on the host ----------------===//
//
// Runs runtime/cuda/kernels/GemmStaging.h's plans (what loom_cuda_matmul
// does with a leading dimension that is not a multiple of 16 bytes) with
// host copies and a reference GEMM in place of cudaMemcpy2DAsync and
// cuBLASLt. Elements are small integers (int16 or int32 storage, the sizes
// of bf16 and f32), so every result is exact. Each GEMM call is checked as
// cuBLASLt would need it: every leading dimension and pointer 16-byte
// aligned, staged matrices inside the scratch and clear of the workspace.
// On a GPU, unit/CudaKernelTest checks loom_cuda_matmul's odd shapes, with
// a small scratch that forces chunks, against the CPU kernel.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/kernels/GemmStaging.h"

#include "gtest/gtest.h"

#include <cstring>
#include <random>
#include <vector>

namespace {

using loom::cuda::GemmCall;
using loom::cuda::GemmShape;
using loom::cuda::GemmStagingPlan;
using loom::cuda::planGemmStaging;

/// A buffer whose data starts at a multiple of 256 bytes, as cudaMalloc's.
struct Aligned {
  std::vector<char> bytes;
  char *data;
  explicit Aligned(size_t size) : bytes(size + 256, 0x5a) {
    auto address = reinterpret_cast<uintptr_t>(bytes.data());
    data = bytes.data() + (256 - address % 256) % 256;
  }
};

bool aligned16(const void *p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

/// The host side of a plan: copies, and a GEMM that checks its call.
template <typename In, typename Out> struct HostOps {
  const GemmShape &shape;
  const GemmStagingPlan &plan;
  const char *scratch;
  int64_t scratchBytes;
  int calls = 0;

  int32_t copy(void *dst, int64_t dstPitch, const void *src, int64_t srcPitch,
               int64_t width, int64_t height) {
    EXPECT_GE(dstPitch, width);
    EXPECT_GE(srcPitch, width);
    for (int64_t row = 0; row < height; ++row)
      std::memcpy(static_cast<char *>(dst) + row * dstPitch,
                  static_cast<const char *>(src) + row * srcPitch, width);
    return 0;
  }

  /// Fails the test unless [p, p + bytes) lies in the scratch after the
  /// workspace, when p is in the scratch at all.
  void expectStagingArea(const void *p, int64_t bytes) {
    const char *c = static_cast<const char *>(p);
    if (c < scratch || c >= scratch + scratchBytes)
      return;
    EXPECT_GE(c, scratch + plan.workspaceBytes);
    EXPECT_LE(c + bytes, scratch + scratchBytes);
  }

  int32_t gemm(const GemmCall &call) {
    ++calls;
    const GemmShape &s = shape;
    EXPECT_GT(call.rows, 0);
    EXPECT_LE(call.rows, plan.chunkRows);
    EXPECT_EQ(call.workspace, scratch);
    if (plan.staged()) {
      for (int64_t ld :
           {call.ldLhs * int64_t(sizeof(In)), call.ldRhs * int64_t(sizeof(In)),
            call.ldOut * int64_t(sizeof(Out))})
        EXPECT_EQ(ld % 16, 0) << "leading dimension of " << ld << " bytes";
      EXPECT_TRUE(aligned16(call.lhs) && aligned16(call.rhs) &&
                  aligned16(call.out));
    }
    expectStagingArea(call.lhs, (s.transA ? s.k : call.rows) * call.ldLhs *
                                    int64_t(sizeof(In)));
    expectStagingArea(call.rhs, (s.transB ? s.n : s.k) * call.ldRhs *
                                    int64_t(sizeof(In)));
    expectStagingArea(call.out, call.rows * call.ldOut * int64_t(sizeof(Out)));
    auto *lhs = reinterpret_cast<const In *>(call.lhs);
    auto *rhs = reinterpret_cast<const In *>(call.rhs);
    auto *out = reinterpret_cast<Out *>(call.out);
    auto *aux = reinterpret_cast<Out *>(call.aux);
    for (int64_t i = 0; i < call.rows; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        int64_t sum = 0;
        for (int64_t p = 0; p < s.k; ++p)
          sum += int64_t(s.transA ? lhs[p * call.ldLhs + i]
                                  : lhs[i * call.ldLhs + p]) *
                 int64_t(s.transB ? rhs[j * call.ldRhs + p]
                                  : rhs[p * call.ldRhs + j]);
        out[i * call.ldOut + j] = static_cast<Out>(sum);
        if (aux)
          aux[i * s.n + j] = static_cast<Out>(-sum);
      }
    return 0;
  }
};

struct Case {
  int64_t m, n, k;
};

/// Runs `s` through its plan for `scratchBytes` and compares the result
/// (and an aux written as its negation) with the product computed here.
template <typename In, typename Out>
void expectStagedProduct(const GemmShape &s, int64_t scratchBytes,
                         int *chunks) {
  std::mt19937 rng(static_cast<unsigned>(s.m * 131 + s.n * 7 + s.k));
  std::uniform_int_distribution<int> small(-3, 3);
  Aligned lhsBuffer(s.m * s.k * sizeof(In)), rhsBuffer(s.k * s.n * sizeof(In));
  Aligned outBuffer(s.m * s.n * sizeof(Out)),
      auxBuffer(s.m * s.n * sizeof(Out));
  Aligned scratch(scratchBytes);
  auto *lhs = reinterpret_cast<In *>(lhsBuffer.data);
  auto *rhs = reinterpret_cast<In *>(rhsBuffer.data);
  for (int64_t i = 0; i < s.m * s.k; ++i)
    lhs[i] = static_cast<In>(small(rng));
  for (int64_t i = 0; i < s.k * s.n; ++i)
    rhs[i] = static_cast<In>(small(rng));

  GemmStagingPlan plan =
      planGemmStaging(s, sizeof(In), sizeof(Out), scratchBytes);
  HostOps<In, Out> ops{s, plan, scratch.data, scratchBytes};
  ASSERT_EQ(loom::cuda::runGemmStaging(plan, s, sizeof(In), sizeof(Out), lhs,
                                       rhs, outBuffer.data, auxBuffer.data,
                                       scratch.data, ops),
            0);
  *chunks = ops.calls;
  auto *out = reinterpret_cast<const Out *>(outBuffer.data);
  auto *aux = reinterpret_cast<const Out *>(auxBuffer.data);
  int64_t mismatches = 0;
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) {
      int64_t want = 0;
      for (int64_t p = 0; p < s.k; ++p)
        want += int64_t(s.transA ? lhs[p * s.m + i] : lhs[i * s.k + p]) *
                int64_t(s.transB ? rhs[j * s.k + p] : rhs[p * s.n + j]);
      mismatches += int64_t(out[i * s.n + j]) != want ||
                    int64_t(aux[i * s.n + j]) != -want;
    }
  EXPECT_EQ(mismatches, 0) << "m " << s.m << " n " << s.n << " k " << s.k
                           << " transA " << s.transA << " transB " << s.transB
                           << " scratch " << scratchBytes;
}

/// Every case, transposes and scratch size; returns the most chunks any
/// GEMM ran in.
template <typename In, typename Out>
int sweep(const std::vector<Case> &cases,
          const std::vector<int64_t> &scratchSizes) {
  int most = 0;
  for (const Case &c : cases)
    for (bool transA : {false, true})
      for (bool transB : {false, true})
        for (int64_t scratchBytes : scratchSizes) {
          GemmShape s;
          s.transA = transA;
          s.transB = transB;
          s.m = c.m;
          s.n = c.n;
          s.k = c.k;
          int chunks = 0;
          expectStagedProduct<In, Out>(s, scratchBytes, &chunks);
          most = std::max(most, chunks);
        }
  return most;
}

const std::vector<Case> kOddCases = {
    {200, 37, 24}, {130, 64, 33}, {64, 50, 50}, {1, 9, 7}, {129, 1, 3}};

TEST(GemmStagingTest, TwoByteElementsInChunks) {
  // 16 KiB: a quarter for the workspace, about 64 rows of staging.
  EXPECT_GT((sweep<int16_t, int16_t>(kOddCases, {16 << 10, 1 << 20})), 1);
}

TEST(GemmStagingTest, TwoByteInputsFourByteResult) {
  EXPECT_GT((sweep<int16_t, int32_t>(kOddCases, {16 << 10, 1 << 20})), 1);
}

TEST(GemmStagingTest, FourByteElements) {
  EXPECT_GT((sweep<int32_t, int32_t>(kOddCases, {24 << 10, 1 << 20})), 1);
}

TEST(GemmStagingTest, AlignedShapesRunAsGiven) {
  GemmShape s;
  s.m = 100;
  s.n = 40;
  s.k = 24;
  GemmStagingPlan plan = planGemmStaging(s, 2, 2, 1 << 20);
  EXPECT_FALSE(plan.staged());
  EXPECT_EQ(plan.chunkRows, 100);
  EXPECT_EQ(plan.workspaceBytes, 1 << 20);
  int chunks = 0;
  expectStagedProduct<int16_t, int16_t>(s, 1 << 20, &chunks);
  EXPECT_EQ(chunks, 1);
}

TEST(GemmStagingTest, BatchesAndTooLittleScratchRunAsGiven) {
  GemmShape batched;
  batched.m = 8;
  batched.n = 9;
  batched.k = 5;
  batched.batch = 3;
  EXPECT_FALSE(planGemmStaging(batched, 2, 2, 1 << 20).staged());
  // 64 rows of a 1001-wide f32 result need 256 KiB.
  GemmShape wide;
  wide.transB = true; // rhs [n, k]: 16 f32 per row, aligned
  wide.m = 500;
  wide.n = 1001;
  wide.k = 16;
  EXPECT_FALSE(planGemmStaging(wide, 4, 4, 64 << 10).staged());
  GemmStagingPlan plan = planGemmStaging(wide, 4, 4, 1 << 20);
  EXPECT_TRUE(plan.out.staged);
  EXPECT_EQ(plan.out.ld, 1004);
  EXPECT_EQ(plan.chunkRows % 64, 0);
  EXPECT_FALSE(plan.lhs.staged || plan.rhs.staged);
}

TEST(GemmStagingTest, Gpt2LmHeadShapes) {
  // Micro-batch 8 x 1024 tokens, vocabulary 50257, width 768, bf16, with
  // the 154 MB scratch a GPT-2 124M session has: the logits, the gradient
  // into the embedding's input and into the embedding, each staged in a
  // handful of chunks.
  const int64_t tokens = 8192, vocab = 50257, width = 768;
  const int64_t scratch = 154'400'000;
  GemmShape logits{false, true, tokens, vocab, width};
  GemmShape dInput{false, false, tokens, width, vocab};
  GemmShape dEmbedding{true, false, vocab, width, tokens};
  for (const GemmShape &s : {logits, dInput, dEmbedding}) {
    GemmStagingPlan plan = planGemmStaging(s, 2, 2, scratch);
    EXPECT_TRUE(plan.staged());
    EXPECT_FALSE(plan.rhs.staged);
    EXPECT_EQ(plan.workspaceBytes, 32 << 20);
    int64_t chunks = (s.m + plan.chunkRows - 1) / plan.chunkRows;
    EXPECT_GE(chunks, 1);
    EXPECT_LE(chunks, 16) << "m " << s.m << " chunk " << plan.chunkRows;
  }
  EXPECT_EQ(planGemmStaging(logits, 2, 2, scratch).out.ld, 50264);
  EXPECT_EQ(planGemmStaging(dInput, 2, 2, scratch).lhs.ld, 50264);
}

} // namespace
