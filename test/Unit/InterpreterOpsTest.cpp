//===- InterpreterOpsTest.cpp - Forward ops against hand-written formulas ===//
//
// Each op runs through the interpreter and is compared with a reference
// written here independently of lib/Interpreter: a case computed by hand, or
// the op's formula spelled out with explicit loops (attention from an
// explicit softmax of q.k^T, layernorm from its mean and variance, rope in
// Hugging Face's rotate-half form, AdamW in torch's form). Forward ops are
// exact to 1e-12 in the F64 mode.
//
//===----------------------------------------------------------------------===//

#include "InterpreterTestSupport.h"

using namespace mlir;
using namespace loom::interp::testing;
using loom::interp::Precision;
using loom::interp::Tensor;

namespace {

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

TEST_F(InterpreterTest, BinaryOpsBroadcastLikeNumpy) {
  func::FuncOp fn = parse(R"mlir(
    func.func @main(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %c: tensor<2x1xf32>,
                    %r: tensor<1x3xf32>, %s: tensor<f32>)
        -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
      %0 = loom.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
      %1 = loom.sub %a, %c : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
      %2 = loom.mul %r, %c : (tensor<1x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
      %3 = loom.div %a, %s : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
      return %0, %1, %2, %3 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
    })mlir");
  auto r = run(fn, {floats({2, 3}, {1, 2, 3, 4, 5, 6}),
                    floats({3}, {10, 20, 30}), floats({2, 1}, {2, 4}),
                    floats({1, 3}, {10, 20, 30}), floats({}, {2})});
  ASSERT_EQ(r.size(), 4u);
  expectAllNear(r[0].f(), {11, 22, 33, 14, 25, 36}, 0);
  expectAllNear(r[1].f(), {-1, 0, 1, 0, 1, 2}, 0);
  expectAllNear(r[2].f(), {20, 40, 60, 40, 80, 120}, 0);
  expectAllNear(r[3].f(), {0.5, 1, 1.5, 2, 2.5, 3}, 0);
}

TEST_F(InterpreterTest, UnaryOpsAreTheLibmFunctions) {
  func::FuncOp fn = parse(R"mlir(
    func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>,
        tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
      %0 = loom.neg %x : tensor<4xf32>
      %1 = loom.exp %x : tensor<4xf32>
      %2 = loom.log %x : tensor<4xf32>
      %3 = loom.sqrt %x : tensor<4xf32>
      %4 = loom.rsqrt %x : tensor<4xf32>
      %5 = loom.tanh %x : tensor<4xf32>
      return %0, %1, %2, %3, %4, %5 : tensor<4xf32>, tensor<4xf32>,
          tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
    })mlir");
  std::vector<double> x = {0.25, 1.0, 2.25, 4.0};
  auto r = run(fn, {floats({4}, x)});
  ASSERT_EQ(r.size(), 6u);
  expectAllNear(r[0].f(), {-0.25, -1.0, -2.25, -4.0}, 0);
  expectAllNear(r[1].f(), {std::exp(0.25), M_E, std::exp(2.25), std::exp(4.0)},
                kExact);
  expectAllNear(r[2].f(), {-2 * M_LN2, 0.0, 2 * std::log(1.5), 2 * M_LN2},
                kExact);
  expectAllNear(r[3].f(), {0.5, 1.0, 1.5, 2.0}, kExact);
  expectAllNear(r[4].f(), {2.0, 1.0, 1 / 1.5, 0.5}, kExact);
  expectAllNear(
      r[5].f(),
      {std::tanh(0.25), std::tanh(1.0), std::tanh(2.25), std::tanh(4.0)},
      kExact);
}

TEST_F(InterpreterTest, GeluAndSiluAtKnownPoints) {
  func::FuncOp fn = parse(R"mlir(
    func.func @main(%x: tensor<3xf32>)
        -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
      %0 = loom.gelu %x : tensor<3xf32>
      %1 = loom.silu %x : tensor<3xf32>
      %2 = loom.gelu_erf %x : tensor<3xf32>
      return %0, %1, %2 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
    })mlir");
  auto r = run(fn, {floats({3}, {1.0, -0.5, 0.0})});
  ASSERT_EQ(r.size(), 3u);
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), evaluated in Python.
  expectAllNear(r[0].f(), {0.8411919906082768, -0.15428599017485606, 0.0},
                kExact);
  // x / (1 + e^-x).
  expectAllNear(r[1].f(),
                {1.0 / (1.0 + std::exp(-1.0)), -0.5 / (1.0 + std::exp(0.5)), 0},
                kExact);
  // 0.5 x (1 + erf(x / sqrt(2))), evaluated in Python.
  expectAllNear(r[2].f(), {0.8413447460685429, -0.15426876936299344, 0.0},
                kExact);
}

//===----------------------------------------------------------------------===//
// Layout ops and reductions
//===----------------------------------------------------------------------===//

TEST_F(InterpreterTest, ReshapeKeepsRowMajorOrderOfFloatsAndInts) {
  func::FuncOp fn = parse(R"mlir(
    func.func @main(%x: tensor<2x3xf32>, %i: tensor<2x3xi32>)
        -> (tensor<3x2xf32>, tensor<6xi32>) {
      %0 = loom.reshape %x : tensor<2x3xf32> -> tensor<3x2xf32>
      %1 = loom.reshape %i : tensor<2x3xi32> -> tensor<6xi32>
      return %0, %1 : tensor<3x2xf32>, tensor<6xi32>
    })mlir");
  auto r = run(fn, {iota({2, 3}), ints({2, 3}, {5, 4, 3, 2, 1, 0})});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].shape(), ArrayRef<int64_t>({3, 2}));
  expectAllNear(r[0].f(), {0, 1, 2, 3, 4, 5}, 0);
  EXPECT_FALSE(r[1].isFloat());
  EXPECT_EQ(r[1].i(), (std::vector<int64_t>{5, 4, 3, 2, 1, 0}));
  EXPECT_TRUE(r[1].elementType().isInteger(32));
}

TEST_F(InterpreterTest, TransposeResultDimIsOperandDimPermutationI) {
  func::FuncOp fn = parse(R"mlir(
    func.func @main(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
      %0 = loom.transpose %x [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
      return %0 : tensor<4x2x3xf32>
    })mlir");
  auto r = run(fn, {iota({2, 3, 4})});
  ASSERT_EQ(r.size(), 1u);
  // result[i][j][k] = x[j][k][i].
  std::vector<double> expected;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k)
        expected.push_back(j * 12 + k * 4 + i);
  expectAllNear(r[0].f(), expected, 0);
}

TEST_F(InterpreterTest, BroadcastStretchesSizeOneAndLeadingDims) {
  func::FuncOp fn = parse(R"mlir(
    func.func @main(%x: tensor<3x1xf32>) -> tensor<2x3x4xf32> {
      %0 = loom.broadcast %x : tensor<3x1xf32> -> tensor<2x3x4xf32>
      return %0 : tensor<2x3x4xf32>
    })mlir");
  auto r = run(fn, {floats({3, 1}, {7, 8, 9})});
  ASSERT_EQ(r.size(), 1u);
  std::vector<double> expected;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c)
        expected.push_back(7 + b);
  expectAllNear(r[0].f(), expected, 0);
}

TEST_F(InterpreterTest, SlicePadAndConcatMoveBoxes) {
  func::FuncOp fn = parse(R"mlir(
    func.func @main(%x: tensor<3x4xf32>, %p: tensor<2x2xf32>,
                    %a: tensor<2x1xi64>, %b: tensor<2x2xi64>)
        -> (tensor<2x2xf32>, tensor<3x3xf32>, tensor<2x3xi64>, tensor<4x2xf32>) {
      %0 = loom.slice %x [1, 1] : tensor<3x4xf32> -> tensor<2x2xf32>
      %1 = loom.pad %p low [1, 0] : tensor<2x2xf32> -> tensor<3x3xf32>
      %2 = loom.concat %a, %b {axis = 1 : i64}
          : (tensor<2x1xi64>, tensor<2x2xi64>) -> tensor<2x3xi64>
      %3 = loom.concat %p, %p {axis = 0 : i64}
          : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<4x2xf32>
      return %0, %1, %2, %3 : tensor<2x2xf32>, tensor<3x3xf32>, tensor<2x3xi64>, tensor<4x2xf32>
    })mlir");
  auto r = run(fn, {iota({3, 4}), floats({2, 2}, {1, 2, 3, 4}),
                    ints({2, 1}, {1, 2}), ints({2, 2}, {3, 4, 5, 6})});
  ASSERT_EQ(r.size(), 4u);
  expectAllNear(r[0].f(), {5, 6, 9, 10}, 0);
  expectAllNear(r[1].f(), {0, 0, 0, 1, 2, 0, 3, 4, 0}, 0);
  EXPECT_EQ(r[2].i(), (std::vector<int64_t>{1, 3, 4, 2, 5, 6}));
  expectAllNear(r[3].f(), {1, 2, 3, 4, 1, 2, 3, 4}, 0);
}

TEST_F(InterpreterTest, ReductionsOverDimsWithAndWithoutKeepDims) {
  func::FuncOp fn = parse(R"mlir(
    func.func @main(%x: tensor<2x3x4xf32>)
        -> (tensor<3xf32>, tensor<2x1x4xf32>, tensor<2x3xf32>) {
      %0 = loom.reduce_sum %x [0, 2] : tensor<2x3x4xf32> -> tensor<3xf32>
      %1 = loom.reduce_mean %x [1] {keep_dims} : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
      %2 = loom.reduce_max %x [2] : tensor<2x3x4xf32> -> tensor<2x3xf32>
      return %0, %1, %2 : tensor<3xf32>, tensor<2x1x4xf32>, tensor<2x3xf32>
    })mlir");
  Tensor x = random({2, 3, 4});
  auto at = [&](int a, int b, int c) { return x.f()[(a * 3 + b) * 4 + c]; };
  auto r = run(fn, {x});
  ASSERT_EQ(r.size(), 3u);
  std::vector<double> sums(3, 0.0), means(8, 0.0), maxima(6, -INFINITY);
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c) {
        sums[b] += at(a, b, c);
        means[a * 4 + c] += at(a, b, c) / 3.0;
        maxima[a * 3 + b] = std::max(maxima[a * 3 + b], at(a, b, c));
      }
  expectAllNear(r[0].f(), sums, kExact);
  EXPECT_EQ(r[1].shape(), ArrayRef<int64_t>({2, 1, 4}));
  expectAllNear(r[1].f(), means, kExact);
  expectAllNear(r[2].f(), maxima, 0);
}

TEST_F(InterpreterTest, ReduceMaxGradSharesTiesEvenly) {
  func::FuncOp fn = parse(R"mlir(
    func.func @main(%dy: tensor<2xf32>, %x: tensor<2x3xf32>) -> tensor<2x3xf32> {
      %0 = loom.reduce_max_grad %dy, %x [1] : tensor<2xf32>, tensor<2x3xf32>
      return %0 : tensor<2x3xf32>
    })mlir");
  auto r = run(fn, {floats({2}, {6, 1}), floats({2, 3}, {1, 5, 5, 7, 2, 3})});
  ASSERT_EQ(r.size(), 1u);
  expectAllNear(r[0].f(), {0, 3, 3, 1, 0, 0}, 0);
}

//===----------------------------------------------------------------------===//
// Matmul
//===----------------------------------------------------------------------===//

struct MatmulCase {
  bool transposeLhs, transposeRhs, batchedRhs;
};

class InterpreterMatmulTest : public InterpreterTest,
                              public ::testing::WithParamInterface<MatmulCase> {
};

std::string tensorType(ArrayRef<int64_t> shape) {
  std::string text = "tensor<";
  for (int64_t d : shape)
    text += std::to_string(d) + "x";
  return text + "f32>";
}

/// lhs [2, 2, M, K] (or [.., K, M]) times rhs [K, N] or [2, 2, K, N] (or
/// [.., N, K]) against the triple loop over explicit indices.
TEST_P(InterpreterMatmulTest, MatchesTheTripleLoop) {
  const MatmulCase &c = GetParam();
  const int64_t batch = 4, m = 3, k = 5, n = 2;
  std::vector<int64_t> lhsShape = {2, 2, c.transposeLhs ? k : m,
                                   c.transposeLhs ? m : k};
  std::vector<int64_t> rhsShape = {c.transposeRhs ? n : k,
                                   c.transposeRhs ? k : n};
  if (c.batchedRhs)
    rhsShape.insert(rhsShape.begin(), {2, 2});
  std::string attrs;
  if (c.transposeLhs || c.transposeRhs)
    attrs = std::string("{") + (c.transposeLhs ? "transpose_lhs" : "") +
            (c.transposeLhs && c.transposeRhs ? ", " : "") +
            (c.transposeRhs ? "transpose_rhs" : "") + "}";
  std::string lhsT = tensorType(lhsShape), rhsT = tensorType(rhsShape),
              outT = tensorType({2, 2, m, n});
  func::FuncOp fn =
      parse("func.func @main(%a: " + lhsT + ", %b: " + rhsT + ") -> " + outT +
            " {\n  %0 = loom.matmul %a, %b " + attrs + " : (" + lhsT + ", " +
            rhsT + ") -> " + outT + "\n  return %0 : " + outT + "\n}");
  Tensor lhs = random(lhsShape), rhs = random(rhsShape);
  auto a = [&](int64_t b, int64_t i, int64_t p) {
    return lhs.f()[b * m * k + (c.transposeLhs ? p * m + i : i * k + p)];
  };
  auto bAt = [&](int64_t b, int64_t p, int64_t j) {
    int64_t base = c.batchedRhs ? b * k * n : 0;
    return rhs.f()[base + (c.transposeRhs ? j * k + p : p * n + j)];
  };
  std::vector<double> expected;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p)
          sum += a(b, i, p) * bAt(b, p, j);
        expected.push_back(sum);
      }
  auto r = run(fn, {lhs, rhs});
  ASSERT_EQ(r.size(), 1u);
  expectAllNear(r[0].f(), expected, kExact);
}

INSTANTIATE_TEST_SUITE_P(Interpreter, InterpreterMatmulTest,
                         ::testing::Values(MatmulCase{false, false, false},
                                           MatmulCase{false, false, true},
                                           MatmulCase{true, false, true},
                                           MatmulCase{false, true, false},
                                           MatmulCase{false, true, true},
                                           MatmulCase{true, true, true}));

//===----------------------------------------------------------------------===//
// Normalizations, softmax, rope, attention
//===----------------------------------------------------------------------===//

TEST_F(InterpreterTest, LayerNormIsMeanAndBiasedVariance) {
  func::FuncOp fn = parse(R"mlir(
    func.func @main(%x: tensor<3x5xf32>, %g: tensor<5xf32>, %b: tensor<5xf32>)
        -> tensor<3x5xf32> {
      %0 = loom.layernorm %x, %g, %b {epsilon = 1.0e-03 : f64} : tensor<3x5xf32>, tensor<5xf32>
      return %0 : tensor<3x5xf32>
    })mlir");
  Tensor x = random({3, 5}), g = random({5}), b = random({5});
  std::vector<double> expected;
  for (int r = 0; r < 3; ++r) {
    double mean = 0, var = 0;
    for (int j = 0; j < 5; ++j)
      mean += x.f()[r * 5 + j] / 5;
    for (int j = 0; j < 5; ++j)
      var += std::pow(x.f()[r * 5 + j] - mean, 2) / 5;
    for (int j = 0; j < 5; ++j)
      expected.push_back((x.f()[r * 5 + j] - mean) / std::sqrt(var + 1e-3) *
                             g.f()[j] +
                         b.f()[j]);
  }
  auto r = run(fn, {x, g, b});
  ASSERT_EQ(r.size(), 1u);
  expectAllNear(r[0].f(), expected, kExact);

  // By hand: mean 2.5 and variance 1.25 of (1, 2, 3, 4), epsilon 0.
  func::FuncOp plain = parse(R"mlir(
    func.func @main(%x: tensor<4xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>)
        -> tensor<4xf32> {
      %0 = loom.layernorm %x, %g, %b {epsilon = 0.0 : f64} : tensor<4xf32>, tensor<4xf32>
      return %0 : tensor<4xf32>
    })mlir");
  auto h = run(plain, {floats({4}, {1, 2, 3, 4}), floats({4}, {1, 1, 1, 2}),
                       floats({4}, {0, 0, 0, 1})});
  ASSERT_EQ(h.size(), 1u);
  double s = std::sqrt(1.25);
  expectAllNear(h[0].f(), {-1.5 / s, -0.5 / s, 0.5 / s, 3.0 / s + 1}, kExact);
}

TEST_F(InterpreterTest, RMSNormByHand) {
  func::FuncOp fn = parse(R"mlir(
    func.func @main(%x: tensor<2x2xf32>, %g: tensor<2xf32>) -> tensor<2x2xf32> {
      %0 = loom.rmsnorm %x, %g {epsilon = 0.0 : f64} : tensor<2x2xf32>, tensor<2xf32>
      return %0 : tensor<2x2xf32>
    })mlir");
  // Rows (3, 4): rms sqrt(12.5); (1, 1): rms 1.
  auto r = run(fn, {floats({2, 2}, {3, 4, 1, 1}), floats({2}, {1, 2})});
  ASSERT_EQ(r.size(), 1u);
  double rms = std::sqrt(12.5);
  expectAllNear(r[0].f(), {3 / rms, 8 / rms, 1, 2}, kExact);
}

TEST_F(InterpreterTest, SoftmaxByHandAndStableForLargeInputs) {
  func::FuncOp fn = parse(R"mlir(
    func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
      %0 = loom.softmax %x : tensor<2x3xf32>
      return %0 : tensor<2x3xf32>
    })mlir");
  auto r = run(fn, {floats({2, 3}, {1, 2, 3, 1000, 1001, 1000})});
  ASSERT_EQ(r.size(), 1u);
  double z = M_E + M_E * M_E + M_E * M_E * M_E, w = 2 + M_E;
  expectAllNear(
      r[0].f(),
      {M_E / z, M_E * M_E / z, M_E * M_E * M_E / z, 1 / w, M_E / w, 1 / w},
      kExact);
}

TEST_F(InterpreterTest, CausalSoftmaxMasksTheUpperTriangle) {
  func::FuncOp fn = parse(R"mlir(
    func.func @main(%x: tensor<2x3x3xf32>) -> tensor<2x3x3xf32> {
      %0 = loom.softmax %x {causal} : tensor<2x3x3xf32>
      return %0 : tensor<2x3x3xf32>
    })mlir");
  // Masked elements (huge on purpose) take no part and come out exactly 0.
  auto r = run(fn, {floats({2, 3, 3}, {5, 1e9, 1e9, 1, 2, 1e9, 1, 2, 3, //
                                       0, 7, 7, 1000, 1000, 7, 0, 0, 0})});
  ASSERT_EQ(r.size(), 1u);
  double z = M_E + M_E * M_E + M_E * M_E * M_E;
  std::vector<double> expected = {1,
                                  0,
                                  0,
                                  1 / (1 + M_E),
                                  M_E / (1 + M_E),
                                  0,
                                  M_E / z,
                                  M_E * M_E / z,
                                  M_E * M_E * M_E / z,
                                  1,
                                  0,
                                  0,
                                  0.5,
                                  0.5,
                                  0,
                                  1.0 / 3,
                                  1.0 / 3,
                                  1.0 / 3};
  expectAllNear(r[0].f(), expected, kExact);
  for (int64_t e : {1, 2, 5, 10, 11, 14})
    EXPECT_EQ(r[0].f()[e], 0.0) << "at flat index " << e;
}

TEST_F(InterpreterTest, RopeIsHuggingFaceRotateHalf) {
  func::FuncOp fn = parse(R"mlir(
    func.func @main(%x: tensor<2x3x2x6xf32>) -> tensor<2x3x2x6xf32> {
      %0 = loom.rope %x {theta = 100.0 : f64} : tensor<2x3x2x6xf32>
      return %0 : tensor<2x3x2x6xf32>
    })mlir");
  Tensor x = random({2, 3, 2, 6});
  // q * cos(emb) + rotate_half(q) * sin(emb), emb = cat(freqs, freqs),
  // freqs[i] = s / theta^(2i / D), rotate_half(q) = cat(-q2, q1).
  std::vector<double> expected;
  for (int b = 0; b < 2; ++b)
    for (int s = 0; s < 3; ++s)
      for (int h = 0; h < 2; ++h) {
        const double *q = &x.f()[((b * 3 + s) * 2 + h) * 6];
        double emb[6], rotated[6];
        for (int i = 0; i < 3; ++i)
          emb[i] = emb[i + 3] = s / std::pow(100.0, 2.0 * i / 6);
        for (int i = 0; i < 3; ++i) {
          rotated[i] = -q[i + 3];
          rotated[i + 3] = q[i];
        }
        for (int d = 0; d < 6; ++d)
          expected.push_back(q[d] * std::cos(emb[d]) +
                             rotated[d] * std::sin(emb[d]));
      }
  auto r = run(fn, {x});
  ASSERT_EQ(r.size(), 1u);
  expectAllNear(r[0].f(), expected, kExact);
}

/// Attention dropout in referenceAttention: rate 0 is none.
struct ReferenceDropout {
  double rate = 0.0;
  uint64_t seed = 0, key = 0, step = 0;
};

/// out = softmax(scale * q k^T + mask) v and its row log-sum-exp, from
/// explicit loops; query head h reads kv head h / (Hq / Hkv). With
/// `dropout`, probability (b, h, s, t) is kept (and scaled by 1 / (1 -
/// rate)) as loom.dropout keeps element (b, h, s, t) of a [B, H, S, T]
/// tensor.
void referenceAttention(const Tensor &q, const Tensor &k, const Tensor &v,
                        bool causal, double scale, std::vector<double> &out,
                        std::vector<double> &lse,
                        ReferenceDropout dropout = {}) {
  int64_t B = q.shape()[0], S = q.shape()[1], H = q.shape()[2],
          D = q.shape()[3], T = k.shape()[1], KH = k.shape()[2];
  auto Q = [&](int64_t b, int64_t s, int64_t h, int64_t d) {
    return q.f()[((b * S + s) * H + h) * D + d];
  };
  auto K = [&](const Tensor &t, int64_t b, int64_t s, int64_t h, int64_t d) {
    return t.f()[((b * T + s) * KH + h) * D + d];
  };
  out.assign(q.f().size(), 0.0);
  lse.assign(B * H * S, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      int64_t kh = h / (H / KH);
      for (int64_t s = 0; s < S; ++s) {
        std::vector<double> weights(T, 0.0);
        double total = 0;
        for (int64_t t = 0; t < T; ++t) {
          if (causal && t > s)
            continue;
          double score = 0;
          for (int64_t d = 0; d < D; ++d)
            score += Q(b, s, h, d) * K(k, b, t, kh, d);
          weights[t] = std::exp(scale * score);
          total += weights[t];
        }
        lse[(b * H + h) * S + s] = std::log(total);
        for (int64_t t = 0; t < T; ++t) {
          double p = weights[t] / total;
          if (dropout.rate > 0.0)
            p = loom::dropoutKeeps(dropout.seed, dropout.key, dropout.step,
                                   ((b * H + h) * S + s) * T + t, dropout.rate)
                    ? p / (1.0 - dropout.rate)
                    : 0.0;
          for (int64_t d = 0; d < D; ++d)
            out[((b * S + s) * H + h) * D + d] += p * K(v, b, t, kh, d);
        }
      }
    }
}

TEST_F(InterpreterTest, CausalGroupedQueryAttentionMatchesExplicitSoftmax) {
  func::FuncOp fn = parse(R"mlir(
    func.func @main(%q: tensor<2x4x4x3xf32>, %k: tensor<2x4x2x3xf32>, %v: tensor<2x4x2x3xf32>)
        -> (tensor<2x4x4x3xf32>, tensor<2x4x4xf32>) {
      %o, %lse = loom.attention %q, %k, %v {causal, scale = 0.7 : f64}
          : (tensor<2x4x4x3xf32>, tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>)
          -> (tensor<2x4x4x3xf32>, tensor<2x4x4xf32>)
      return %o, %lse : tensor<2x4x4x3xf32>, tensor<2x4x4xf32>
    })mlir");
  Tensor q = random({2, 4, 4, 3}), k = random({2, 4, 2, 3}),
         v = random({2, 4, 2, 3});
  std::vector<double> out, lse;
  referenceAttention(q, k, v, /*causal=*/true, 0.7, out, lse);
  auto r = run(fn, {q, k, v});
  ASSERT_EQ(r.size(), 2u);
  expectAllNear(r[0].f(), out, kExact);
  expectAllNear(r[1].f(), lse, kExact);
  EXPECT_TRUE(r[1].elementType().isF32());
}

TEST_F(InterpreterTest, AttentionDropoutMatchesExplicitLoops) {
  func::FuncOp fn = parse(R"mlir(
    func.func @main(%q: tensor<2x6x4x3xf32>, %k: tensor<2x6x2x3xf32>, %v: tensor<2x6x2x3xf32>, %step: tensor<i64>)
        -> (tensor<2x6x4x3xf32>, tensor<2x4x6xf32>) {
      %o, %lse = loom.attention %q, %k, %v, %step {causal, scale = 0.7 : f64,
          dropout_rate = 0.3 : f64, dropout_seed = 17 : i64, dropout_key = 5 : i64}
          : (tensor<2x6x4x3xf32>, tensor<2x6x2x3xf32>, tensor<2x6x2x3xf32>, tensor<i64>)
          -> (tensor<2x6x4x3xf32>, tensor<2x4x6xf32>)
      return %o, %lse : tensor<2x6x4x3xf32>, tensor<2x4x6xf32>
    })mlir");
  Tensor q = random({2, 6, 4, 3}), k = random({2, 6, 2, 3}),
         v = random({2, 6, 2, 3});
  std::vector<double> out, lse, undroppedOut, undroppedLse;
  referenceAttention(q, k, v, /*causal=*/true, 0.7, out, lse,
                     {.rate = 0.3, .seed = 17, .key = 5, .step = 9});
  referenceAttention(q, k, v, /*causal=*/true, 0.7, undroppedOut, undroppedLse);
  auto r = run(fn, {q, k, v, ints({}, {9})});
  ASSERT_EQ(r.size(), 2u);
  expectAllNear(r[0].f(), out, kExact);
  // The log-sum-exp is that of the probabilities before dropout.
  expectAllNear(r[1].f(), undroppedLse, kExact);
  // Dropout changed the output (it dropped something).
  double change = 0;
  for (size_t e = 0; e < out.size(); ++e)
    change = std::max(change, std::abs(out[e] - undroppedOut[e]));
  EXPECT_GT(change, 0.1);
}

/// The fused op with dropout equals the unfused ops with loom.dropout on the
/// [B, H, S, T] probabilities: the same mask, element for element.
TEST_F(InterpreterTest, AttentionDropoutMatchesUnfusedOps) {
  func::FuncOp fn = parse(R"mlir(
    func.func @main(%q: tensor<2x5x3x4xf32>, %k: tensor<2x5x3x4xf32>, %v: tensor<2x5x3x4xf32>, %step: tensor<i64>)
        -> (tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>) {
      %o, %lse = loom.attention %q, %k, %v, %step {causal, scale = 0.5 : f64,
          dropout_rate = 0.4 : f64, dropout_seed = 3 : i64, dropout_key = 11 : i64}
          : (tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<i64>)
          -> (tensor<2x5x3x4xf32>, tensor<2x3x5xf32>)
      %qt = loom.transpose %q [0, 2, 1, 3] : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
      %kt = loom.transpose %k [0, 2, 1, 3] : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
      %vt = loom.transpose %v [0, 2, 1, 3] : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
      %c = arith.constant dense<0.5> : tensor<f32>
      %qs = loom.mul %qt, %c : (tensor<2x3x5x4xf32>, tensor<f32>) -> tensor<2x3x5x4xf32>
      %s = loom.matmul %qs, %kt {transpose_rhs} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x5xf32>
      %p = loom.softmax %s {causal} : tensor<2x3x5x5xf32>
      %pd = loom.dropout %p, %step {key = 11 : i64, rate = 0.4 : f64, seed = 3 : i64} : tensor<2x3x5x5xf32>, tensor<i64>
      %ot = loom.matmul %pd, %vt : (tensor<2x3x5x5xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x4xf32>
      %o2 = loom.transpose %ot [0, 2, 1, 3] : tensor<2x3x5x4xf32> -> tensor<2x5x3x4xf32>
      return %o, %o2 : tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>
    })mlir");
  auto r = run(fn, {random({2, 5, 3, 4}), random({2, 5, 3, 4}),
                    random({2, 5, 3, 4}), ints({}, {4})});
  ASSERT_EQ(r.size(), 2u);
  expectAllNear(r[0].f(), r[1].f(), kExact);
}

TEST_F(InterpreterTest, NonCausalAttentionWithLongerKeys) {
  func::FuncOp fn = parse(R"mlir(
    func.func @main(%q: tensor<1x3x2x4xf32>, %k: tensor<1x5x2x4xf32>, %v: tensor<1x5x2x4xf32>)
        -> (tensor<1x3x2x4xf32>, tensor<1x2x3xf32>) {
      %o, %lse = loom.attention %q, %k, %v {scale = 0.5 : f64}
          : (tensor<1x3x2x4xf32>, tensor<1x5x2x4xf32>, tensor<1x5x2x4xf32>)
          -> (tensor<1x3x2x4xf32>, tensor<1x2x3xf32>)
      return %o, %lse : tensor<1x3x2x4xf32>, tensor<1x2x3xf32>
    })mlir");
  Tensor q = random({1, 3, 2, 4}), k = random({1, 5, 2, 4}),
         v = random({1, 5, 2, 4});
  std::vector<double> out, lse;
  referenceAttention(q, k, v, /*causal=*/false, 0.5, out, lse);
  auto r = run(fn, {q, k, v});
  ASSERT_EQ(r.size(), 2u);
  expectAllNear(r[0].f(), out, kExact);
  expectAllNear(r[1].f(), lse, kExact);
}

//===----------------------------------------------------------------------===//
// Embedding, cross-entropy, optimizers
//===----------------------------------------------------------------------===//

TEST_F(InterpreterTest, EmbeddingGathersRows) {
  func::FuncOp fn = parse(R"mlir(
    func.func @main(%t: tensor<4x3xf32>, %ids: tensor<2x2xi32>) -> tensor<2x2x3xf32> {
      %0 = loom.embedding %t, %ids : (tensor<4x3xf32>, tensor<2x2xi32>) -> tensor<2x2x3xf32>
      return %0 : tensor<2x2x3xf32>
    })mlir");
  auto r = run(fn, {iota({4, 3}), ints({2, 2}, {3, 0, 3, 1})});
  ASSERT_EQ(r.size(), 1u);
  expectAllNear(r[0].f(), {9, 10, 11, 0, 1, 2, 9, 10, 11, 3, 4, 5}, 0);
  std::string error = runError(fn, {iota({4, 3}), ints({2, 2}, {0, 4, 1, 1})});
  EXPECT_NE(error.find("'loom.embedding'"), std::string::npos) << error;
  EXPECT_NE(error.find("id 4 at flat index 1 is outside [0, 4)"),
            std::string::npos)
      << error;
}

TEST_F(InterpreterTest, CrossEntropyIsMeanNegativeLogLikelihood) {
  func::FuncOp fn = parse(R"mlir(
    func.func @main(%l: tensor<2x3xf32>, %y: tensor<2xi64>) -> tensor<f32> {
      %0 = loom.cross_entropy %l, %y : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
      return %0 : tensor<f32>
    })mlir");
  auto r = run(fn, {floats({2, 3}, {1, 2, 3, 0, 0, 0}), ints({2}, {2, 1})});
  ASSERT_EQ(r.size(), 1u);
  double first = std::log(M_E + M_E * M_E + M_E * M_E * M_E) - 3;
  double second = std::log(3.0);
  expectAllNear(r[0].f(), {(first + second) / 2}, kExact);
  EXPECT_TRUE(r[0].shape().empty());
  std::string error =
      runError(fn, {floats({2, 3}, {1, 2, 3, 0, 0, 0}), ints({2}, {2, -1})});
  EXPECT_NE(error.find("label -1 at flat index 1 is outside [0, 3)"),
            std::string::npos)
      << error;
}

TEST_F(InterpreterTest, AdamWAndSGDInTorchForm) {
  func::FuncOp fn = parse(R"mlir(
    func.func @main(%p: tensor<5xf32>, %g: tensor<5xf32>, %m: tensor<5xf32>,
                    %v: tensor<5xf32>, %t: tensor<i64>)
        -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>) {
      %p2, %m2, %v2 = loom.adamw_update %p, %g, %m, %v, %t
          {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-08 : f64,
           lr = 1.0e-02 : f64, weight_decay = 0.1 : f64}
          : tensor<5xf32>, tensor<5xf32>, tensor<i64>
      %s = loom.sgd_update %p, %g {lr = 0.5 : f64, weight_decay = 0.2 : f64}
          : tensor<5xf32>, tensor<5xf32>
      return %p2, %m2, %v2, %s : tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>
    })mlir");
  Tensor p = random({5}), g = random({5}), m = random({5}, 0.1),
         v = random({5});
  for (double &x : v.f())
    x = x * x;
  auto r = run(fn, {p, g, m, v, ints({}, {3})});
  ASSERT_EQ(r.size(), 4u);
  for (int e = 0; e < 5; ++e) {
    // torch.optim.AdamW: decay first, then the bias-corrected Adam step.
    double m2 = 0.9 * m.f()[e] + 0.1 * g.f()[e];
    double v2 = 0.95 * v.f()[e] + 0.05 * g.f()[e] * g.f()[e];
    double decayed = p.f()[e] * (1 - 1e-2 * 0.1);
    double mHat = m2 / (1 - std::pow(0.9, 3)),
           vHat = v2 / (1 - std::pow(0.95, 3));
    EXPECT_NEAR(r[0].f()[e], decayed - 1e-2 * mHat / (std::sqrt(vHat) + 1e-8),
                kExact);
    EXPECT_NEAR(r[1].f()[e], m2, kExact);
    EXPECT_NEAR(r[2].f()[e], v2, kExact);
    // torch.optim.SGD: the decay is added to the gradient.
    EXPECT_NEAR(r[3].f()[e], p.f()[e] - 0.5 * (g.f()[e] + 0.2 * p.f()[e]),
                kExact);
  }
  std::string error = runError(fn, {p, g, m, v, ints({}, {0})});
  EXPECT_NE(error.find("step 0 is not 1-based"), std::string::npos) << error;
}

} // namespace
