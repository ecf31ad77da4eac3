//===- CpuKernelTest.cpp - Conformance of the CPU kernels -----------------===//
//
// The elementwise, layout, linear and optimizer kernels of
// runtime/cpu/kernels against the reference interpreter: each test runs a
// function of a few ops through both and compares within float32's
// tolerance (rtol 1e-5, atol 1e-6 unless a case says otherwise). Integer
// results (moved ids) must be exact. Casts between f32 and f64 and `copy`,
// which no loom op of a verifiable function reaches, are called directly.
//
//===----------------------------------------------------------------------===//

#include "CpuKernelTestSupport.h"

#include "loom/loom_cpu_kernels.h"

#include "llvm/ADT/StringExtras.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

using loom::interp::Tensor;
using namespace loom::testing;

namespace {

constexpr double kRtol = 1e-5, kAtol = 1e-6;

Tensor ints(llvm::ArrayRef<int64_t> shape, std::vector<int64_t> values) {
  return Tensor::ints(nullptr, shape, std::move(values));
}

/// Runs @f of `source` on `args` through the kernels and the interpreter
/// and expects the results to agree within `rtol` and `atol`.
void expectKernelsMatch(llvm::StringRef source, llvm::ArrayRef<Tensor> args,
                        double rtol = kRtol, double atol = kAtol) {
  auto ctx = makeKernelTestContext();
  auto module = parseKernelTestModule(*ctx, source);
  ASSERT_TRUE(module);
  auto want = runReference(*module, args);
  ASSERT_TRUE(static_cast<bool>(want)) << llvm::toString(want.takeError());
  auto got = runThroughKernels(*module, args);
  ASSERT_TRUE(static_cast<bool>(got)) << llvm::toString(got.takeError());
  expectAllClose(*want, *got, rtol, atol);
}

/// The message of running @f of `source` through the kernels, which must
/// fail.
std::string kernelError(llvm::StringRef source, llvm::ArrayRef<Tensor> args) {
  auto ctx = makeKernelTestContext();
  auto module = parseKernelTestModule(*ctx, source);
  if (!module)
    return "";
  auto got = runThroughKernels(*module, args);
  if (got) {
    ADD_FAILURE() << "the kernels did not fail";
    return "";
  }
  return llvm::toString(got.takeError());
}

/// "tensor<2x3xf32>" for `shape` and `element`.
std::string tensorType(llvm::ArrayRef<int64_t> shape,
                       llvm::StringRef element = "f32") {
  std::string text = "tensor<";
  for (int64_t d : shape)
    text += std::to_string(d) + "x";
  return text + element.str() + ">";
}

/// Small integers as floats in [0, levels): many ties for reduce_max.
Tensor steps(llvm::ArrayRef<int64_t> shape, unsigned seed, int levels) {
  Tensor t = randomFloats(shape, seed, 0.0, levels);
  for (double &v : t.f())
    v = std::floor(v);
  return t;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

TEST(CpuKernelTest, BinaryOpsOnEqualShapes) {
  expectKernelsMatch(
      R"mlir(
    func.func @f(%a: tensor<3x5xf32>, %b: tensor<3x5xf32>)
        -> (tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>) {
      %0 = loom.add %a, %b : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
      %1 = loom.sub %a, %b : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
      %2 = loom.mul %a, %b : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
      %3 = loom.div %a, %b : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
      return %0, %1, %2, %3 : tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>
    })mlir",
      {randomFloats({3, 5}, 1), randomFloats({3, 5}, 2, 0.5, 2)});
}

/// numpy broadcasting between operands of different ranks: a trailing
/// vector, a lower-rank lhs, size-1 dimensions stretching on both sides, a
/// one-element operand and an outer product.
TEST(CpuKernelTest, BinaryOpsBroadcastLikeNumpy) {
  expectKernelsMatch(R"mlir(
    func.func @f(%x: tensor<2x3x4xf32>, %v: tensor<4xf32>, %c: tensor<2x1x4xf32>,
                 %r: tensor<3x1xf32>, %s: tensor<1x3x1xf32>, %one: tensor<1xf32>,
                 %col: tensor<5x1xf32>, %row: tensor<1x6xf32>)
        -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>,
            tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<5x6xf32>, tensor<2x3x4xf32>) {
      %0 = loom.add %x, %v : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
      %1 = loom.sub %v, %x : (tensor<4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
      %2 = loom.mul %c, %r : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
      %3 = loom.div %s, %c : (tensor<1x3x1xf32>, tensor<2x1x4xf32>) -> tensor<2x3x4xf32>
      %4 = loom.mul %x, %one : (tensor<2x3x4xf32>, tensor<1xf32>) -> tensor<2x3x4xf32>
      %5 = loom.add %col, %row : (tensor<5x1xf32>, tensor<1x6xf32>) -> tensor<5x6xf32>
      %6 = loom.div %x, %r : (tensor<2x3x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
      return %0, %1, %2, %3, %4, %5, %6 : tensor<2x3x4xf32>, tensor<2x3x4xf32>,
          tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<5x6xf32>,
          tensor<2x3x4xf32>
    })mlir",
                     {randomFloats({2, 3, 4}, 1), randomFloats({4}, 2),
                      randomFloats({2, 1, 4}, 3, 0.5, 2),
                      randomFloats({3, 1}, 4, 0.5, 2),
                      randomFloats({1, 3, 1}, 5), randomFloats({1}, 6),
                      randomFloats({5, 1}, 7), randomFloats({1, 6}, 8)});
}

TEST(CpuKernelTest, UnaryMath) {
  expectKernelsMatch(
      R"mlir(
    func.func @f(%x: tensor<4x9xf32>, %p: tensor<4x9xf32>)
        -> (tensor<4x9xf32>, tensor<4x9xf32>, tensor<4x9xf32>, tensor<4x9xf32>,
            tensor<4x9xf32>, tensor<4x9xf32>) {
      %0 = loom.neg %x : tensor<4x9xf32>
      %1 = loom.exp %x : tensor<4x9xf32>
      %2 = loom.tanh %x : tensor<4x9xf32>
      %3 = loom.log %p : tensor<4x9xf32>
      %4 = loom.sqrt %p : tensor<4x9xf32>
      %5 = loom.rsqrt %p : tensor<4x9xf32>
      return %0, %1, %2, %3, %4, %5 : tensor<4x9xf32>, tensor<4x9xf32>,
          tensor<4x9xf32>, tensor<4x9xf32>, tensor<4x9xf32>, tensor<4x9xf32>
    })mlir",
      {randomFloats({4, 9}, 1, -3, 3), randomFloats({4, 9}, 2, 0.05, 4)});
}

TEST(CpuKernelTest, CastToTheSameType) {
  expectKernelsMatch(R"mlir(
    func.func @f(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %0 = loom.cast %x : tensor<3x4xf32> -> tensor<3x4xf32>
      return %0 : tensor<3x4xf32>
    })mlir",
                     {randomFloats({3, 4}, 1)});
}

/// f64 tensors do not verify as loom ops' operands, so the f32 <-> f64
/// casts are called with the meta the encoder would write.
TEST(CpuKernelTest, CastWidensAndRoundsBetweenF32AndF64) {
  float narrow[3] = {1.5f, -0.1f, 3e-20f};
  double wide[3] = {};
  void *widen[2] = {narrow, wide};
  const int64_t widenMeta[] = {1, 1, LOOM_DTYPE_F32, 1, 3, LOOM_DTYPE_F64,
                               1, 3};
  ASSERT_EQ(loom_cpu_cast(nullptr, widen, widenMeta), 0);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(wide[i], static_cast<double>(narrow[i]));

  double exact[3] = {0.1, -2.0 / 3.0, 1e300};
  float rounded[3] = {};
  void *round[2] = {exact, rounded};
  const int64_t roundMeta[] = {1, 1, LOOM_DTYPE_F64, 1, 3, LOOM_DTYPE_F32,
                               1, 3};
  ASSERT_EQ(loom_cpu_cast(nullptr, round, roundMeta), 0);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(rounded[i], static_cast<float>(exact[i]));

  int64_t ids[3] = {1, 2, 3};
  int32_t narrowIds[3] = {};
  void *ints[2] = {ids, narrowIds};
  const int64_t intMeta[] = {1, 1, LOOM_DTYPE_I64, 1, 3, LOOM_DTYPE_I32, 1, 3};
  EXPECT_NE(loom_cpu_cast(nullptr, ints, intMeta), 0);
  EXPECT_NE(std::string(loom_cpu_last_error()).find("cast"), std::string::npos);
}

/// `copy` (a returned argument, a reshape) moves bytes of any type.
TEST(CpuKernelTest, CopyMovesBytesOfAnyElementType) {
  int64_t ids[6] = {1, -2, 3, 1LL << 40, 5, 6};
  int64_t copied[6] = {};
  void *idBuffers[2] = {ids, copied};
  const int64_t idMeta[] = {1, 1, LOOM_DTYPE_I64, 2, 2, 3, LOOM_DTYPE_I64,
                            1, 6};
  ASSERT_EQ(loom_cpu_copy(nullptr, idBuffers, idMeta), 0);
  EXPECT_EQ(std::memcmp(ids, copied, sizeof ids), 0);

  uint16_t bf16[5] = {0x3f80, 0x4000, 0xbf80, 0x0001, 0x7f80};
  uint16_t bf16Copy[5] = {};
  void *bf16Buffers[2] = {bf16, bf16Copy};
  const int64_t bf16Meta[] = {1, 1, LOOM_DTYPE_BF16, 1, 5, LOOM_DTYPE_BF16,
                              1, 5};
  ASSERT_EQ(loom_cpu_copy(nullptr, bf16Buffers, bf16Meta), 0);
  EXPECT_EQ(std::memcmp(bf16, bf16Copy, sizeof bf16), 0);
}

//===----------------------------------------------------------------------===//
// Layout
//===----------------------------------------------------------------------===//

TEST(CpuKernelTest, ReshapeFloatsAndIds) {
  expectKernelsMatch(
      R"mlir(
    func.func @f(%x: tensor<2x3x4xf32>, %i: tensor<2x3xi32>)
        -> (tensor<6x4xf32>, tensor<6xi32>) {
      %0 = loom.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
      %1 = loom.reshape %i : tensor<2x3xi32> -> tensor<6xi32>
      return %0, %1 : tensor<6x4xf32>, tensor<6xi32>
    })mlir",
      {randomFloats({2, 3, 4}, 1), ints({2, 3}, {5, 4, 3, 2, 1, 0})}, 0, 0);
}

/// Permutations that keep the innermost dimension (a memcpy per run) and
/// ones that move it (strided), on 4-byte and 8-byte elements.
TEST(CpuKernelTest, TransposeAnyPermutationAndType) {
  std::vector<int64_t> ids(2 * 3 * 4 * 5);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<int64_t>(i) * 7919 - 100000;
  expectKernelsMatch(
      R"mlir(
    func.func @f(%x: tensor<2x3x4xf32>, %q: tensor<2x3x4x5xi64>, %m: tensor<5x7xi32>)
        -> (tensor<4x2x3xf32>, tensor<2x4x3x5xi64>, tensor<7x5xi32>, tensor<5x4x3x2xi64>) {
      %0 = loom.transpose %x [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
      %1 = loom.transpose %q [0, 2, 1, 3] : tensor<2x3x4x5xi64> -> tensor<2x4x3x5xi64>
      %2 = loom.transpose %m [1, 0] : tensor<5x7xi32> -> tensor<7x5xi32>
      %3 = loom.transpose %q [3, 2, 1, 0] : tensor<2x3x4x5xi64> -> tensor<5x4x3x2xi64>
      return %0, %1, %2, %3 : tensor<4x2x3xf32>, tensor<2x4x3x5xi64>, tensor<7x5xi32>,
          tensor<5x4x3x2xi64>
    })mlir",
      {randomFloats({2, 3, 4}, 1), ints({2, 3, 4, 5}, ids),
       ints({5, 7}, std::vector<int64_t>(ids.begin(), ids.begin() + 35))},
      0, 0);
}

TEST(CpuKernelTest, BroadcastStretchesSizeOneAndLeadingDims) {
  expectKernelsMatch(R"mlir(
    func.func @f(%x: tensor<3x1xf32>, %i: tensor<4xi32>, %s: tensor<1xf32>,
                 %m: tensor<2x1x3xi64>)
        -> (tensor<2x3x4xf32>, tensor<3x4xi32>, tensor<2x2xf32>, tensor<2x5x3xi64>) {
      %0 = loom.broadcast %x : tensor<3x1xf32> -> tensor<2x3x4xf32>
      %1 = loom.broadcast %i : tensor<4xi32> -> tensor<3x4xi32>
      %2 = loom.broadcast %s : tensor<1xf32> -> tensor<2x2xf32>
      %3 = loom.broadcast %m : tensor<2x1x3xi64> -> tensor<2x5x3xi64>
      return %0, %1, %2, %3 : tensor<2x3x4xf32>, tensor<3x4xi32>, tensor<2x2xf32>,
          tensor<2x5x3xi64>
    })mlir",
                     {randomFloats({3, 1}, 1), ints({4}, {7, -8, 9, 10}),
                      randomFloats({1}, 2),
                      ints({2, 1, 3}, {1, 2, 3, 4, 5, 6})},
                     0, 0);
}

TEST(CpuKernelTest, SlicePadAndConcatMoveBoxes) {
  expectKernelsMatch(
      R"mlir(
    func.func @f(%x: tensor<3x4x5xf32>, %i: tensor<4x6xi64>, %p: tensor<2x3xf32>,
                 %a: tensor<2x1x3xf32>, %b: tensor<2x2x3xf32>, %c: tensor<2x4x3xf32>,
                 %j: tensor<2x3xi32>)
        -> (tensor<2x2x3xf32>, tensor<2x3xi64>, tensor<4x6xf32>, tensor<2x7x3xf32>,
            tensor<4x2x3xf32>, tensor<2x2x9xf32>, tensor<2x6xi32>) {
      %0 = loom.slice %x [1, 2, 1] : tensor<3x4x5xf32> -> tensor<2x2x3xf32>
      %1 = loom.slice %i [1, 3] : tensor<4x6xi64> -> tensor<2x3xi64>
      %2 = loom.pad %p low [1, 2] : tensor<2x3xf32> -> tensor<4x6xf32>
      %3 = loom.concat %a, %b, %c {axis = 1 : i64}
          : (tensor<2x1x3xf32>, tensor<2x2x3xf32>, tensor<2x4x3xf32>) -> tensor<2x7x3xf32>
      %4 = loom.concat %b, %b {axis = 0 : i64}
          : (tensor<2x2x3xf32>, tensor<2x2x3xf32>) -> tensor<4x2x3xf32>
      %5 = loom.concat %b, %b, %b {axis = 2 : i64}
          : (tensor<2x2x3xf32>, tensor<2x2x3xf32>, tensor<2x2x3xf32>) -> tensor<2x2x9xf32>
      %6 = loom.concat %j, %j {axis = 1 : i64}
          : (tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x6xi32>
      return %0, %1, %2, %3, %4, %5, %6 : tensor<2x2x3xf32>, tensor<2x3xi64>,
          tensor<4x6xf32>, tensor<2x7x3xf32>, tensor<4x2x3xf32>, tensor<2x2x9xf32>,
          tensor<2x6xi32>
    })mlir",
      {randomFloats({3, 4, 5}, 1),
       ints({4, 6}, {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,
                     12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}),
       randomFloats({2, 3}, 2), randomFloats({2, 1, 3}, 3),
       randomFloats({2, 2, 3}, 4), randomFloats({2, 4, 3}, 5),
       ints({2, 3}, {-1, -2, -3, 4, 5, 6})},
      0, 0);
}

/// Single and multiple reduced dimensions, leading, trailing and
/// interleaved, with and without keep_dims, down to a scalar; the long
/// reductions check the double accumulator.
TEST(CpuKernelTest, ReductionsOverDimsWithAndWithoutKeepDims) {
  expectKernelsMatch(
      R"mlir(
    func.func @f(%x: tensor<2x3x4xf32>, %big: tensor<4x300x5xf32>)
        -> (tensor<3xf32>, tensor<2x1x4xf32>, tensor<2x3xf32>, tensor<f32>,
            tensor<1x3x1xf32>, tensor<4xf32>, tensor<4x1x5xf32>, tensor<300xf32>,
            tensor<4x5xf32>, tensor<1x1x1xf32>) {
      %0 = loom.reduce_sum %x [0, 2] : tensor<2x3x4xf32> -> tensor<3xf32>
      %1 = loom.reduce_mean %x [1] {keep_dims} : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
      %2 = loom.reduce_max %x [2] : tensor<2x3x4xf32> -> tensor<2x3xf32>
      %3 = loom.reduce_sum %x [0, 1, 2] : tensor<2x3x4xf32> -> tensor<f32>
      %4 = loom.reduce_mean %x [0, 2] {keep_dims} : tensor<2x3x4xf32> -> tensor<1x3x1xf32>
      %5 = loom.reduce_max %x [0, 1] : tensor<2x3x4xf32> -> tensor<4xf32>
      %6 = loom.reduce_sum %big [1] {keep_dims} : tensor<4x300x5xf32> -> tensor<4x1x5xf32>
      %7 = loom.reduce_mean %big [0, 2] : tensor<4x300x5xf32> -> tensor<300xf32>
      %8 = loom.reduce_max %big [1] : tensor<4x300x5xf32> -> tensor<4x5xf32>
      %9 = loom.reduce_mean %big [2, 0, 1] {keep_dims} : tensor<4x300x5xf32> -> tensor<1x1x1xf32>
      return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9 : tensor<3xf32>, tensor<2x1x4xf32>,
          tensor<2x3xf32>, tensor<f32>, tensor<1x3x1xf32>, tensor<4xf32>,
          tensor<4x1x5xf32>, tensor<300xf32>, tensor<4x5xf32>, tensor<1x1x1xf32>
    })mlir",
      {randomFloats({2, 3, 4}, 1), randomFloats({4, 300, 5}, 2)});
}

/// The gradient goes to the maxima, shared between ties (small integers
/// make many).
TEST(CpuKernelTest, ReduceMaxGradSharesTies) {
  expectKernelsMatch(R"mlir(
    func.func @f(%dy: tensor<3x1x5xf32>, %x: tensor<3x4x5xf32>, %dz: tensor<4xf32>)
        -> (tensor<3x4x5xf32>, tensor<3x4x5xf32>) {
      %0 = loom.reduce_max_grad %dy, %x [1] {keep_dims} : tensor<3x1x5xf32>, tensor<3x4x5xf32>
      %1 = loom.reduce_max_grad %dz, %x [0, 2] : tensor<4xf32>, tensor<3x4x5xf32>
      return %0, %1 : tensor<3x4x5xf32>, tensor<3x4x5xf32>
    })mlir",
                     {randomFloats({3, 1, 5}, 1), steps({3, 4, 5}, 2, 3),
                      randomFloats({4}, 3)});
}

//===----------------------------------------------------------------------===//
// Matmul
//===----------------------------------------------------------------------===//

/// lhs [2, 3, M, K] (or [.., K, M]) times rhs [K, N] or [2, 3, K, N] (or
/// [.., N, K]), for every combination of the transposes and a shared or
/// batched rhs.
TEST(CpuKernelTest, MatmulAllTransposesSharedAndBatchedRhs) {
  const int64_t m = 4, k = 7, n = 5;
  for (int combination = 0; combination < 8; ++combination) {
    bool transposeLhs = combination & 1, transposeRhs = combination & 2,
         batchedRhs = combination & 4;
    SCOPED_TRACE(::testing::Message()
                 << "transpose_lhs " << transposeLhs << ", transpose_rhs "
                 << transposeRhs << ", batched rhs " << batchedRhs);
    std::vector<int64_t> lhsShape = {2, 3, transposeLhs ? k : m,
                                     transposeLhs ? m : k};
    std::vector<int64_t> rhsShape = {transposeRhs ? n : k,
                                     transposeRhs ? k : n};
    if (batchedRhs)
      rhsShape.insert(rhsShape.begin(), {2, 3});
    std::vector<std::string> attrs;
    if (transposeLhs)
      attrs.push_back("transpose_lhs");
    if (transposeRhs)
      attrs.push_back("transpose_rhs");
    std::string attrText =
        attrs.empty() ? "" : "{" + llvm::join(attrs, ", ") + "}";
    std::string lhsT = tensorType(lhsShape), rhsT = tensorType(rhsShape),
                outT = tensorType({2, 3, m, n});
    expectKernelsMatch(
        "func.func @f(%a: " + lhsT + ", %b: " + rhsT + ") -> " + outT +
            " {\n  %0 = loom.matmul %a, %b " + attrText + " : (" + lhsT + ", " +
            rhsT + ") -> " + outT + "\n  return %0 : " + outT + "\n}",
        {randomFloats(lhsShape, 1), randomFloats(rhsShape, 2)}, kRtol, 1e-5);
  }
}

/// A plain 2-D product and a larger linear layer (OpenBLAS' blocked path).
TEST(CpuKernelTest, MatmulPlainAndLinearLayer) {
  expectKernelsMatch(R"mlir(
    func.func @f(%a: tensor<3x6xf32>, %b: tensor<6x2xf32>, %x: tensor<2x33x96xf32>,
                 %w: tensor<96x130xf32>)
        -> (tensor<3x2xf32>, tensor<2x33x130xf32>) {
      %0 = loom.matmul %a, %b : (tensor<3x6xf32>, tensor<6x2xf32>) -> tensor<3x2xf32>
      %1 = loom.matmul %x, %w : (tensor<2x33x96xf32>, tensor<96x130xf32>) -> tensor<2x33x130xf32>
      return %0, %1 : tensor<3x2xf32>, tensor<2x33x130xf32>
    })mlir",
                     {randomFloats({3, 6}, 1), randomFloats({6, 2}, 2),
                      randomFloats({2, 33, 96}, 3), randomFloats({96, 130}, 4)},
                     kRtol, 1e-5);
}

//===----------------------------------------------------------------------===//
// Embedding and cross-entropy
//===----------------------------------------------------------------------===//

TEST(CpuKernelTest, EmbeddingGathersRowsByI32AndI64Ids) {
  expectKernelsMatch(R"mlir(
    func.func @f(%t: tensor<6x5xf32>, %i: tensor<2x3xi32>, %l: tensor<4xi64>)
        -> (tensor<2x3x5xf32>, tensor<4x5xf32>) {
      %0 = loom.embedding %t, %i : (tensor<6x5xf32>, tensor<2x3xi32>) -> tensor<2x3x5xf32>
      %1 = loom.embedding %t, %l : (tensor<6x5xf32>, tensor<4xi64>) -> tensor<4x5xf32>
      return %0, %1 : tensor<2x3x5xf32>, tensor<4x5xf32>
    })mlir",
                     {randomFloats({6, 5}, 1), ints({2, 3}, {5, 0, 3, 3, 1, 5}),
                      ints({4}, {2, 2, 4, 0})},
                     0, 0);
}

TEST(CpuKernelTest, EmbeddingGradAddsRepeatedIds) {
  expectKernelsMatch(R"mlir(
    func.func @f(%dy: tensor<2x3x4xf32>, %i: tensor<2x3xi32>, %dz: tensor<5x4xf32>,
                 %l: tensor<5xi64>)
        -> (tensor<6x4xf32>, tensor<3x4xf32>) {
      %0 = loom.embedding_grad %dy, %i : (tensor<2x3x4xf32>, tensor<2x3xi32>) -> tensor<6x4xf32>
      %1 = loom.embedding_grad %dz, %l : (tensor<5x4xf32>, tensor<5xi64>) -> tensor<3x4xf32>
      return %0, %1 : tensor<6x4xf32>, tensor<3x4xf32>
    })mlir",
                     {randomFloats({2, 3, 4}, 1),
                      ints({2, 3}, {4, 1, 4, 0, 1, 4}), randomFloats({5, 4}, 2),
                      ints({5}, {2, 2, 2, 0, 2})});
}

TEST(CpuKernelTest, EmbeddingIdOutOfRangeFails) {
  const char *source = R"mlir(
    func.func @f(%t: tensor<4x3xf32>, %i: tensor<2x2xi32>) -> tensor<2x2x3xf32> {
      %0 = loom.embedding %t, %i : (tensor<4x3xf32>, tensor<2x2xi32>) -> tensor<2x2x3xf32>
      return %0 : tensor<2x2x3xf32>
    })mlir";
  std::string error = kernelError(
      source, {randomFloats({4, 3}, 1), ints({2, 2}, {0, 4, 1, 1})});
  EXPECT_NE(error.find("embedding"), std::string::npos) << error;
  EXPECT_NE(error.find("id 4 at flat index 1 is outside [0, 4)"),
            std::string::npos)
      << error;
  error = kernelError(source,
                      {randomFloats({4, 3}, 1), ints({2, 2}, {0, 1, 2, -1})});
  EXPECT_NE(error.find("id -1 at flat index 3"), std::string::npos) << error;
}

TEST(CpuKernelTest, CrossEntropyMeanAndTokenCount) {
  expectKernelsMatch(
      R"mlir(
    func.func @f(%l: tensor<2x3x7xf32>, %y: tensor<2x3xi32>, %z: tensor<6xi64>,
                 %flat: tensor<6x7xf32>)
        -> (tensor<f32>, tensor<f32>, tensor<f32>) {
      %0 = loom.cross_entropy %l, %y : (tensor<2x3x7xf32>, tensor<2x3xi32>) -> tensor<f32>
      %1 = loom.cross_entropy %l, %y {token_count = 10 : i64}
          : (tensor<2x3x7xf32>, tensor<2x3xi32>) -> tensor<f32>
      %2 = loom.cross_entropy %flat, %z : (tensor<6x7xf32>, tensor<6xi64>) -> tensor<f32>
      return %0, %1, %2 : tensor<f32>, tensor<f32>, tensor<f32>
    })mlir",
      {randomFloats({2, 3, 7}, 1, -4, 4), ints({2, 3}, {0, 6, 3, 3, 1, 5}),
       ints({6}, {6, 6, 0, 2, 1, 4}), randomFloats({6, 7}, 2, -20, 20)});
}

TEST(CpuKernelTest, CrossEntropyGradAndTokenCount) {
  expectKernelsMatch(
      R"mlir(
    func.func @f(%d: tensor<f32>, %l: tensor<2x3x7xf32>, %y: tensor<2x3xi32>,
                 %z: tensor<6xi64>, %flat: tensor<6x7xf32>)
        -> (tensor<2x3x7xf32>, tensor<2x3x7xf32>, tensor<6x7xf32>) {
      %0 = loom.cross_entropy_grad %d, %l, %y
          : (tensor<f32>, tensor<2x3x7xf32>, tensor<2x3xi32>) -> tensor<2x3x7xf32>
      %1 = loom.cross_entropy_grad %d, %l, %y {token_count = 12 : i64}
          : (tensor<f32>, tensor<2x3x7xf32>, tensor<2x3xi32>) -> tensor<2x3x7xf32>
      %2 = loom.cross_entropy_grad %d, %flat, %z
          : (tensor<f32>, tensor<6x7xf32>, tensor<6xi64>) -> tensor<6x7xf32>
      return %0, %1, %2 : tensor<2x3x7xf32>, tensor<2x3x7xf32>, tensor<6x7xf32>
    })mlir",
      {randomFloats({}, 3, 0.5, 2), randomFloats({2, 3, 7}, 1, -4, 4),
       ints({2, 3}, {0, 6, 3, 3, 1, 5}), ints({6}, {6, 6, 0, 2, 1, 4}),
       randomFloats({6, 7}, 2, -20, 20)});
}

TEST(CpuKernelTest, CrossEntropyLabelOutOfRangeFails) {
  std::string error = kernelError(
      R"mlir(
    func.func @f(%d: tensor<f32>, %l: tensor<2x3xf32>, %y: tensor<2xi64>) -> tensor<2x3xf32> {
      %0 = loom.cross_entropy_grad %d, %l, %y
          : (tensor<f32>, tensor<2x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
      return %0 : tensor<2x3xf32>
    })mlir",
      {randomFloats({}, 1), randomFloats({2, 3}, 2), ints({2}, {2, 3})});
  EXPECT_NE(error.find("cross_entropy_grad"), std::string::npos) << error;
  EXPECT_NE(error.find("label 3 at flat index 1 is outside [0, 3)"),
            std::string::npos)
      << error;
}

//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

TEST(CpuKernelTest, AdamWAndSGDUpdates) {
  Tensor v = randomFloats({4, 6}, 4, 0, 1);
  for (double &x : v.f())
    x = static_cast<float>(x * x * 1e-2);
  expectKernelsMatch(R"mlir(
    func.func @f(%p: tensor<4x6xf32>, %g: tensor<4x6xf32>, %m: tensor<4x6xf32>,
                 %v: tensor<4x6xf32>, %t: tensor<i64>, %u: tensor<i32>)
        -> (tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>,
            tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>) {
      %p2, %m2, %v2 = loom.adamw_update %p, %g, %m, %v, %t
          {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64,
           lr = 1.0e-02 : f64, weight_decay = 0.1 : f64}
          : tensor<4x6xf32>, tensor<4x6xf32>, tensor<i64>
      %p3, %m3, %v3 = loom.adamw_update %p, %g, %m, %v, %u
          {beta1 = 0.8 : f64, beta2 = 0.999 : f64, eps = 1.0e-06 : f64,
           lr = 3.0e-04 : f64, weight_decay = 0.0 : f64}
          : tensor<4x6xf32>, tensor<4x6xf32>, tensor<i32>
      %s = loom.sgd_update %p, %g {lr = 0.5 : f64, weight_decay = 0.2 : f64}
          : tensor<4x6xf32>, tensor<4x6xf32>
      return %p2, %m2, %v2, %p3, %m3, %v3, %s : tensor<4x6xf32>, tensor<4x6xf32>,
          tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>,
          tensor<4x6xf32>
    })mlir",
                     {randomFloats({4, 6}, 1), randomFloats({4, 6}, 2),
                      randomFloats({4, 6}, 3, -0.1, 0.1), v, ints({}, {3}),
                      ints({}, {1})});
}

TEST(CpuKernelTest, AdamWStepZeroFails) {
  std::string error = kernelError(R"mlir(
    func.func @f(%p: tensor<3xf32>, %t: tensor<i64>)
        -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
      %p2, %m2, %v2 = loom.adamw_update %p, %p, %p, %p, %t
          {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64,
           lr = 1.0e-02 : f64, weight_decay = 0.1 : f64}
          : tensor<3xf32>, tensor<3xf32>, tensor<i64>
      return %p2, %m2, %v2 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
    })mlir",
                                  {randomFloats({3}, 1), ints({}, {0})});
  EXPECT_NE(error.find("step 0 is not 1-based"), std::string::npos) << error;
}

} // namespace
