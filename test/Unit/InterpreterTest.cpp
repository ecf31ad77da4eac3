//===- InterpreterTest.cpp - The reference interpreter against references -===//
//
// Each op runs through the interpreter and is compared with a reference
// written here independently of lib/Interpreter: a case computed by hand, or
// the op's formula spelled out with explicit loops (attention from an
// explicit softmax of q.k^T, layernorm from its mean and variance, rope in
// Hugging Face's rotate-half form, AdamW in torch's form). Forward ops are
// exact to 1e-12 in the F64 mode.
//
// Every gradient op, and the vector-Jacobian product of every other
// differentiable op written with loom ops, is checked against central
// differences of its forward op run in F64: with a random cotangent c and
// L = sum(c * forward(x)), max|dL/dx - fd| / max|fd| < 1e-6.
//
// Further: the F32 rounding mode and bf16/f16 rounding against APFloat,
// error messages, dropout's Philox against Random123's known answers and
// its mask statistics, and the imported tiny GPT-2 and Llama, whose loss
// with small random weights is close to ln(vocab).
//
//===----------------------------------------------------------------------===//

#include "loom/Interpreter/Interpreter.h"
#include "loom/Import/ModelImporter.h"
#include "loom/Interpreter/DropoutMask.h"

#include "dialects/Loom/LoomOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace mlir;
using loom::interp::Precision;
using loom::interp::Tensor;

namespace {

constexpr double kExact = 1e-12;

Tensor floats(ArrayRef<int64_t> shape, std::vector<double> values) {
  return Tensor::floats(nullptr, shape, std::move(values));
}

Tensor ints(ArrayRef<int64_t> shape, std::vector<int64_t> values) {
  return Tensor::ints(nullptr, shape, std::move(values));
}

int64_t count(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// 0, 1, 2, ... in `shape`.
Tensor iota(ArrayRef<int64_t> shape) {
  std::vector<double> values(count(shape));
  for (size_t e = 0; e < values.size(); ++e)
    values[e] = static_cast<double>(e);
  return floats(shape, values);
}

void expectAllNear(const std::vector<double> &actual,
                   const std::vector<double> &expected, double tolerance) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t e = 0; e < actual.size(); ++e)
    EXPECT_NEAR(actual[e], expected[e], tolerance) << "at flat index " << e;
}

class InterpreterTest : public ::testing::Test {
protected:
  InterpreterTest() {
    context.loadDialect<func::FuncDialect, arith::ArithDialect,
                        loom::LoomDialect>();
  }

  /// Parses a module (named test.mlir in locations) and returns its
  /// function `name`; fails the test on a parse or verifier error.
  func::FuncOp parse(llvm::StringRef source, llvm::StringRef name = "main") {
    ParserConfig config(&context);
    modules.push_back(parseSourceString<ModuleOp>(source, config, "test.mlir"));
    if (!modules.back()) {
      ADD_FAILURE() << "cannot parse:\n" << source.str();
      return nullptr;
    }
    auto fn = modules.back()->lookupSymbol<func::FuncOp>(name);
    EXPECT_TRUE(fn) << "no function @" << name.str();
    return fn;
  }

  /// Runs `fn`; fails the test (and returns nothing) on an error.
  std::vector<Tensor> run(func::FuncOp fn, std::vector<Tensor> args,
                          Precision precision = Precision::F64) {
    if (!fn)
      return {};
    auto results = loom::interp::run(fn, args, precision);
    if (!results) {
      ADD_FAILURE() << llvm::toString(results.takeError());
      return {};
    }
    return std::move(*results);
  }

  /// Runs `fn` expecting an error; returns its message.
  std::string runError(func::FuncOp fn, std::vector<Tensor> args,
                       Precision precision = Precision::F64) {
    auto results = loom::interp::run(fn, args, precision);
    if (results) {
      ADD_FAILURE() << "expected an error";
      return "";
    }
    return llvm::toString(results.takeError());
  }

  /// Normally distributed values with standard deviation `scale`.
  Tensor random(ArrayRef<int64_t> shape, double scale = 1.0) {
    std::normal_distribution<double> normal(0.0, scale);
    std::vector<double> values(count(shape));
    for (double &v : values)
      v = normal(rng);
    return floats(shape, values);
  }

  MLIRContext context;
  std::vector<OwningOpRef<ModuleOp>> modules;
  std::mt19937_64 rng{20240611};
};

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
    func.func @main(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
      %0 = loom.gelu %x : tensor<3xf32>
      %1 = loom.silu %x : tensor<3xf32>
      return %0, %1 : tensor<3xf32>, tensor<3xf32>
    })mlir");
  auto r = run(fn, {floats({3}, {1.0, -0.5, 0.0})});
  ASSERT_EQ(r.size(), 2u);
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), evaluated in Python.
  expectAllNear(r[0].f(), {0.8411919906082768, -0.15428599017485606, 0.0},
                kExact);
  // x / (1 + e^-x).
  expectAllNear(r[1].f(),
                {1.0 / (1.0 + std::exp(-1.0)), -0.5 / (1.0 + std::exp(0.5)), 0},
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

/// out = softmax(scale * q k^T + mask) v and its row log-sum-exp, from
/// explicit loops; query head h reads kv head h / (Hq / Hkv).
void referenceAttention(const Tensor &q, const Tensor &k, const Tensor &v,
                        bool causal, double scale, std::vector<double> &out,
                        std::vector<double> &lse) {
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
        for (int64_t t = 0; t < T; ++t)
          for (int64_t d = 0; d < D; ++d)
            out[((b * S + s) * H + h) * D + d] +=
                weights[t] / total * K(v, b, t, kh, d);
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

//===----------------------------------------------------------------------===//
// Gradients against central differences (F64)
//===----------------------------------------------------------------------===//

/// The modules hold `@forward(inputs...) -> y` (further results are
/// ignored) and `@backward(dy, inputs...) -> (one gradient per input in
/// `wrt`, in that order)`.
class InterpreterGradientTest : public InterpreterTest {
protected:
  /// The step of the central differences: its truncation error (h^2) and
  /// rounding error (1e-16 / h) are both far below the 1e-6 bar.
  static constexpr double kStep = 1e-6;

  double loss(func::FuncOp forward, const std::vector<Tensor> &inputs,
              const Tensor &cotangent) {
    auto y = run(forward, inputs);
    if (y.empty())
      return NAN;
    double sum = 0;
    for (size_t e = 0; e < cotangent.f().size(); ++e)
      sum += cotangent.f()[e] * y[0].f()[e];
    return sum;
  }

  void checkGradients(llvm::StringRef source, std::vector<Tensor> inputs,
                      ArrayRef<unsigned> wrt) {
    func::FuncOp forward = parse(source, "forward");
    ASSERT_TRUE(forward);
    auto backward = modules.back()->lookupSymbol<func::FuncOp>("backward");
    ASSERT_TRUE(backward);
    auto y = run(forward, inputs);
    ASSERT_FALSE(y.empty());
    Tensor cotangent = random(y[0].shape());
    std::vector<Tensor> backwardArgs = {cotangent};
    backwardArgs.insert(backwardArgs.end(), inputs.begin(), inputs.end());
    auto grads = run(backward, backwardArgs);
    ASSERT_EQ(grads.size(), wrt.size());
    for (auto [input, grad] : llvm::zip(wrt, grads)) {
      ASSERT_EQ(grad.shape(), inputs[input].shape());
      double worst = 0, largest = 0;
      for (size_t e = 0; e < grad.f().size(); ++e) {
        std::vector<Tensor> shifted = inputs;
        double &x = shifted[input].f()[e];
        double saved = x;
        x = saved + kStep;
        double up = loss(forward, shifted, cotangent);
        x = saved - kStep;
        double down = loss(forward, shifted, cotangent);
        double fd = (up - down) / (2 * kStep);
        worst = std::max(worst, std::abs(fd - grad.f()[e]));
        largest = std::max(largest, std::abs(fd));
      }
      ASSERT_GT(largest, 0.0) << "input #" << input << " has no gradient";
      EXPECT_LT(worst / largest, 1e-6) << "input #" << input;
    }
  }
};

TEST_F(InterpreterGradientTest, LayerNormGrad) {
  checkGradients(R"mlir(
    func.func @forward(%x: tensor<2x3x6xf32>, %g: tensor<6xf32>, %b: tensor<6xf32>) -> tensor<2x3x6xf32> {
      %0 = loom.layernorm %x, %g, %b {epsilon = 1.0e-05 : f64} : tensor<2x3x6xf32>, tensor<6xf32>
      return %0 : tensor<2x3x6xf32>
    }
    func.func @backward(%dy: tensor<2x3x6xf32>, %x: tensor<2x3x6xf32>, %g: tensor<6xf32>, %b: tensor<6xf32>)
        -> (tensor<2x3x6xf32>, tensor<6xf32>, tensor<6xf32>) {
      %dx, %dg, %db = loom.layernorm_grad %dy, %x, %g {epsilon = 1.0e-05 : f64} : tensor<2x3x6xf32>, tensor<6xf32>
      return %dx, %dg, %db : tensor<2x3x6xf32>, tensor<6xf32>, tensor<6xf32>
    })mlir",
                 {random({2, 3, 6}), random({6}), random({6})}, {0, 1, 2});
}

TEST_F(InterpreterGradientTest, RMSNormGrad) {
  checkGradients(R"mlir(
    func.func @forward(%x: tensor<3x5xf32>, %g: tensor<5xf32>) -> tensor<3x5xf32> {
      %0 = loom.rmsnorm %x, %g {epsilon = 1.0e-06 : f64} : tensor<3x5xf32>, tensor<5xf32>
      return %0 : tensor<3x5xf32>
    }
    func.func @backward(%dy: tensor<3x5xf32>, %x: tensor<3x5xf32>, %g: tensor<5xf32>)
        -> (tensor<3x5xf32>, tensor<5xf32>) {
      %dx, %dg = loom.rmsnorm_grad %dy, %x, %g {epsilon = 1.0e-06 : f64} : tensor<3x5xf32>, tensor<5xf32>
      return %dx, %dg : tensor<3x5xf32>, tensor<5xf32>
    })mlir",
                 {random({3, 5}), random({5})}, {0, 1});
}

TEST_F(InterpreterGradientTest, GeluGradAndSiluGrad) {
  const char *source = R"mlir(
    func.func @forward(%x: tensor<4x5xf32>) -> tensor<4x5xf32> {
      %0 = loom.ACT %x : tensor<4x5xf32>
      return %0 : tensor<4x5xf32>
    }
    func.func @backward(%dy: tensor<4x5xf32>, %x: tensor<4x5xf32>) -> tensor<4x5xf32> {
      %0 = loom.ACT_grad %dy, %x : tensor<4x5xf32>
      return %0 : tensor<4x5xf32>
    })mlir";
  for (const char *activation : {"gelu", "silu"}) {
    SCOPED_TRACE(activation);
    std::string text = source;
    for (size_t at; (at = text.find("ACT")) != std::string::npos;)
      text.replace(at, 3, activation);
    checkGradients(text, {random({4, 5}, 2.0)}, {0});
  }
}

TEST_F(InterpreterGradientTest, SoftmaxGrad) {
  checkGradients(R"mlir(
    func.func @forward(%x: tensor<3x6xf32>) -> tensor<3x6xf32> {
      %0 = loom.softmax %x : tensor<3x6xf32>
      return %0 : tensor<3x6xf32>
    }
    func.func @backward(%dy: tensor<3x6xf32>, %x: tensor<3x6xf32>) -> tensor<3x6xf32> {
      %y = loom.softmax %x : tensor<3x6xf32>
      %0 = loom.softmax_grad %dy, %y : tensor<3x6xf32>
      return %0 : tensor<3x6xf32>
    })mlir",
                 {random({3, 6})}, {0});
}

TEST_F(InterpreterGradientTest, RopeGrad) {
  checkGradients(R"mlir(
    func.func @forward(%x: tensor<2x4x3x6xf32>) -> tensor<2x4x3x6xf32> {
      %0 = loom.rope %x {theta = 10000.0 : f64} : tensor<2x4x3x6xf32>
      return %0 : tensor<2x4x3x6xf32>
    }
    func.func @backward(%dy: tensor<2x4x3x6xf32>, %x: tensor<2x4x3x6xf32>) -> tensor<2x4x3x6xf32> {
      %0 = loom.rope_grad %dy {theta = 10000.0 : f64} : tensor<2x4x3x6xf32>
      return %0 : tensor<2x4x3x6xf32>
    })mlir",
                 {random({2, 4, 3, 6})}, {0});
}

TEST_F(InterpreterGradientTest, CausalGroupedQueryAttentionGrad) {
  checkGradients(
      R"mlir(
    func.func @forward(%q: tensor<2x4x4x3xf32>, %k: tensor<2x4x2x3xf32>, %v: tensor<2x4x2x3xf32>)
        -> (tensor<2x4x4x3xf32>, tensor<2x4x4xf32>) {
      %o, %lse = loom.attention %q, %k, %v {causal, scale = 0.6 : f64}
          : (tensor<2x4x4x3xf32>, tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>)
          -> (tensor<2x4x4x3xf32>, tensor<2x4x4xf32>)
      return %o, %lse : tensor<2x4x4x3xf32>, tensor<2x4x4xf32>
    }
    func.func @backward(%do: tensor<2x4x4x3xf32>, %q: tensor<2x4x4x3xf32>, %k: tensor<2x4x2x3xf32>, %v: tensor<2x4x2x3xf32>)
        -> (tensor<2x4x4x3xf32>, tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>) {
      %o, %lse = loom.attention %q, %k, %v {causal, scale = 0.6 : f64}
          : (tensor<2x4x4x3xf32>, tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>)
          -> (tensor<2x4x4x3xf32>, tensor<2x4x4xf32>)
      %dq, %dk, %dv = loom.attention_grad %do, %q, %k, %v, %o, %lse {causal, scale = 0.6 : f64}
          : (tensor<2x4x4x3xf32>, tensor<2x4x4x3xf32>, tensor<2x4x2x3xf32>,
             tensor<2x4x2x3xf32>, tensor<2x4x4x3xf32>, tensor<2x4x4xf32>)
          -> (tensor<2x4x4x3xf32>, tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>)
      return %dq, %dk, %dv : tensor<2x4x4x3xf32>, tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>
    })mlir",
      {random({2, 4, 4, 3}), random({2, 4, 2, 3}), random({2, 4, 2, 3})},
      {0, 1, 2});
}

TEST_F(InterpreterGradientTest, NonCausalAttentionGradWithLongerKeys) {
  checkGradients(
      R"mlir(
    func.func @forward(%q: tensor<1x3x2x4xf32>, %k: tensor<1x5x2x4xf32>, %v: tensor<1x5x2x4xf32>)
        -> tensor<1x3x2x4xf32> {
      %o, %lse = loom.attention %q, %k, %v {scale = 0.5 : f64}
          : (tensor<1x3x2x4xf32>, tensor<1x5x2x4xf32>, tensor<1x5x2x4xf32>)
          -> (tensor<1x3x2x4xf32>, tensor<1x2x3xf32>)
      return %o : tensor<1x3x2x4xf32>
    }
    func.func @backward(%do: tensor<1x3x2x4xf32>, %q: tensor<1x3x2x4xf32>, %k: tensor<1x5x2x4xf32>, %v: tensor<1x5x2x4xf32>)
        -> (tensor<1x3x2x4xf32>, tensor<1x5x2x4xf32>, tensor<1x5x2x4xf32>) {
      %o, %lse = loom.attention %q, %k, %v {scale = 0.5 : f64}
          : (tensor<1x3x2x4xf32>, tensor<1x5x2x4xf32>, tensor<1x5x2x4xf32>)
          -> (tensor<1x3x2x4xf32>, tensor<1x2x3xf32>)
      %dq, %dk, %dv = loom.attention_grad %do, %q, %k, %v, %o, %lse {scale = 0.5 : f64}
          : (tensor<1x3x2x4xf32>, tensor<1x3x2x4xf32>, tensor<1x5x2x4xf32>,
             tensor<1x5x2x4xf32>, tensor<1x3x2x4xf32>, tensor<1x2x3xf32>)
          -> (tensor<1x3x2x4xf32>, tensor<1x5x2x4xf32>, tensor<1x5x2x4xf32>)
      return %dq, %dk, %dv : tensor<1x3x2x4xf32>, tensor<1x5x2x4xf32>, tensor<1x5x2x4xf32>
    })mlir",
      {random({1, 3, 2, 4}), random({1, 5, 2, 4}), random({1, 5, 2, 4})},
      {0, 1, 2});
}

TEST_F(InterpreterGradientTest, EmbeddingGradAddsRepeatedIds) {
  checkGradients(R"mlir(
    func.func @forward(%t: tensor<5x3xf32>, %ids: tensor<2x3xi32>) -> tensor<2x3x3xf32> {
      %0 = loom.embedding %t, %ids : (tensor<5x3xf32>, tensor<2x3xi32>) -> tensor<2x3x3xf32>
      return %0 : tensor<2x3x3xf32>
    }
    func.func @backward(%dy: tensor<2x3x3xf32>, %t: tensor<5x3xf32>, %ids: tensor<2x3xi32>) -> tensor<5x3xf32> {
      %0 = loom.embedding_grad %dy, %ids : (tensor<2x3x3xf32>, tensor<2x3xi32>) -> tensor<5x3xf32>
      return %0 : tensor<5x3xf32>
    })mlir",
                 {random({5, 3}), ints({2, 3}, {4, 1, 4, 0, 1, 4})}, {0});
}

TEST_F(InterpreterGradientTest, CrossEntropyGrad) {
  checkGradients(R"mlir(
    func.func @forward(%l: tensor<2x3x7xf32>, %y: tensor<2x3xi32>) -> tensor<f32> {
      %0 = loom.cross_entropy %l, %y : (tensor<2x3x7xf32>, tensor<2x3xi32>) -> tensor<f32>
      return %0 : tensor<f32>
    }
    func.func @backward(%d: tensor<f32>, %l: tensor<2x3x7xf32>, %y: tensor<2x3xi32>) -> tensor<2x3x7xf32> {
      %0 = loom.cross_entropy_grad %d, %l, %y
          : (tensor<f32>, tensor<2x3x7xf32>, tensor<2x3xi32>) -> tensor<2x3x7xf32>
      return %0 : tensor<2x3x7xf32>
    })mlir",
                 {random({2, 3, 7}, 2.0), ints({2, 3}, {0, 6, 3, 3, 1, 5})},
                 {0});
}

TEST_F(InterpreterGradientTest, DropoutGrad) {
  checkGradients(R"mlir(
    func.func @forward(%x: tensor<4x8xf32>, %t: tensor<i64>) -> tensor<4x8xf32> {
      %0 = loom.dropout %x, %t {key = 3 : i64, rate = 0.3 : f64, seed = 7 : i64} : tensor<4x8xf32>, tensor<i64>
      return %0 : tensor<4x8xf32>
    }
    func.func @backward(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %t: tensor<i64>) -> tensor<4x8xf32> {
      %0 = loom.dropout_grad %dy, %t {key = 3 : i64, rate = 0.3 : f64, seed = 7 : i64} : tensor<4x8xf32>, tensor<i64>
      return %0 : tensor<4x8xf32>
    })mlir",
                 {random({4, 8}), ints({}, {5})}, {0});
}

TEST_F(InterpreterGradientTest, ReduceMaxGrad) {
  checkGradients(R"mlir(
    func.func @forward(%x: tensor<3x4x5xf32>) -> tensor<3x1x5xf32> {
      %0 = loom.reduce_max %x [1] {keep_dims} : tensor<3x4x5xf32> -> tensor<3x1x5xf32>
      return %0 : tensor<3x1x5xf32>
    }
    func.func @backward(%dy: tensor<3x1x5xf32>, %x: tensor<3x4x5xf32>) -> tensor<3x4x5xf32> {
      %0 = loom.reduce_max_grad %dy, %x [1] {keep_dims} : tensor<3x1x5xf32>, tensor<3x4x5xf32>
      return %0 : tensor<3x4x5xf32>
    })mlir",
                 {random({3, 4, 5})}, {0});
}

// The ops without a gradient op of their own: their vector-Jacobian
// products written with loom ops, as reverse-mode autodiff emits them.

TEST_F(InterpreterGradientTest, AddAndSubWithBroadcasting) {
  checkGradients(R"mlir(
    func.func @forward(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
      %0 = loom.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
      return %0 : tensor<2x3xf32>
    }
    func.func @backward(%dy: tensor<2x3xf32>, %a: tensor<2x3xf32>, %b: tensor<3xf32>)
        -> (tensor<2x3xf32>, tensor<3xf32>) {
      %db = loom.reduce_sum %dy [0] : tensor<2x3xf32> -> tensor<3xf32>
      return %dy, %db : tensor<2x3xf32>, tensor<3xf32>
    })mlir",
                 {random({2, 3}), random({3})}, {0, 1});
  checkGradients(R"mlir(
    func.func @forward(%a: tensor<2x1xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
      %0 = loom.sub %a, %b : (tensor<2x1xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
      return %0 : tensor<2x3xf32>
    }
    func.func @backward(%dy: tensor<2x3xf32>, %a: tensor<2x1xf32>, %b: tensor<2x3xf32>)
        -> (tensor<2x1xf32>, tensor<2x3xf32>) {
      %da = loom.reduce_sum %dy [1] {keep_dims} : tensor<2x3xf32> -> tensor<2x1xf32>
      %db = loom.neg %dy : tensor<2x3xf32>
      return %da, %db : tensor<2x1xf32>, tensor<2x3xf32>
    })mlir",
                 {random({2, 1}), random({2, 3})}, {0, 1});
}

TEST_F(InterpreterGradientTest, MulAndDivWithBroadcasting) {
  checkGradients(R"mlir(
    func.func @forward(%a: tensor<2x3xf32>, %b: tensor<2x1xf32>) -> tensor<2x3xf32> {
      %0 = loom.mul %a, %b : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
      return %0 : tensor<2x3xf32>
    }
    func.func @backward(%dy: tensor<2x3xf32>, %a: tensor<2x3xf32>, %b: tensor<2x1xf32>)
        -> (tensor<2x3xf32>, tensor<2x1xf32>) {
      %da = loom.mul %dy, %b : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
      %p = loom.mul %dy, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
      %db = loom.reduce_sum %p [1] {keep_dims} : tensor<2x3xf32> -> tensor<2x1xf32>
      return %da, %db : tensor<2x3xf32>, tensor<2x1xf32>
    })mlir",
                 {random({2, 3}), random({2, 1})}, {0, 1});
  // d(a/b)/db = -(a/b)/b.
  Tensor b = random({3});
  for (double &v : b.f())
    v = std::abs(v) + 0.5;
  checkGradients(R"mlir(
    func.func @forward(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
      %0 = loom.div %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
      return %0 : tensor<2x3xf32>
    }
    func.func @backward(%dy: tensor<2x3xf32>, %a: tensor<2x3xf32>, %b: tensor<3xf32>)
        -> (tensor<2x3xf32>, tensor<3xf32>) {
      %da = loom.div %dy, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
      %y = loom.div %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
      %p = loom.mul %da, %y : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
      %s = loom.reduce_sum %p [0] : tensor<2x3xf32> -> tensor<3xf32>
      %db = loom.neg %s : tensor<3xf32>
      return %da, %db : tensor<2x3xf32>, tensor<3xf32>
    })mlir",
                 {random({2, 3}), b}, {0, 1});
}

TEST_F(InterpreterGradientTest, UnaryMath) {
  // Each backward returns dx for one op; the inputs are positive for log,
  // sqrt and rsqrt.
  struct Case {
    const char *forward, *backward;
  };
  const Case cases[] = {
      {"%y = loom.neg %x : tensor<6xf32>",
       "%dx = loom.neg %dy : tensor<6xf32>"},
      {"%y = loom.exp %x : tensor<6xf32>",
       "%e = loom.exp %x : tensor<6xf32>\n"
       "%dx = loom.mul %dy, %e : (tensor<6xf32>, tensor<6xf32>) -> "
       "tensor<6xf32>"},
      {"%y = loom.log %x : tensor<6xf32>",
       "%dx = loom.div %dy, %x : (tensor<6xf32>, tensor<6xf32>) -> "
       "tensor<6xf32>"},
      {"%y = loom.sqrt %x : tensor<6xf32>",
       "%s = loom.sqrt %x : tensor<6xf32>\n"
       "%twoS = loom.add %s, %s : (tensor<6xf32>, tensor<6xf32>) -> "
       "tensor<6xf32>\n"
       "%dx = loom.div %dy, %twoS : (tensor<6xf32>, tensor<6xf32>) -> "
       "tensor<6xf32>"},
      {"%y = loom.rsqrt %x : tensor<6xf32>",
       "%r = loom.rsqrt %x : tensor<6xf32>\n"
       "%twoX = loom.add %x, %x : (tensor<6xf32>, tensor<6xf32>) -> "
       "tensor<6xf32>\n"
       "%p = loom.mul %dy, %r : (tensor<6xf32>, tensor<6xf32>) -> "
       "tensor<6xf32>\n"
       "%q = loom.div %p, %twoX : (tensor<6xf32>, tensor<6xf32>) -> "
       "tensor<6xf32>\n"
       "%dx = loom.neg %q : tensor<6xf32>"},
      {"%y = loom.tanh %x : tensor<6xf32>",
       "%t = loom.tanh %x : tensor<6xf32>\n"
       "%t2 = loom.mul %t, %t : (tensor<6xf32>, tensor<6xf32>) -> "
       "tensor<6xf32>\n"
       "%p = loom.mul %dy, %t2 : (tensor<6xf32>, tensor<6xf32>) -> "
       "tensor<6xf32>\n"
       "%dx = loom.sub %dy, %p : (tensor<6xf32>, tensor<6xf32>) -> "
       "tensor<6xf32>"},
      {"%y = loom.cast %x : tensor<6xf32> -> tensor<6xbf16>",
       "%dx = loom.cast %dy : tensor<6xbf16> -> tensor<6xf32>"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.forward);
    std::string yType = llvm::StringRef(c.forward).contains("bf16")
                            ? "tensor<6xbf16>"
                            : "tensor<6xf32>";
    Tensor x = random({6});
    for (double &v : x.f())
      v = std::abs(v) + 0.5;
    checkGradients("func.func @forward(%x: tensor<6xf32>) -> " + yType +
                       " {\n" + c.forward + "\nreturn %y : " + yType +
                       "\n}\nfunc.func @backward(%dy: " + yType +
                       ", %x: tensor<6xf32>) -> tensor<6xf32> {\n" +
                       c.backward + "\nreturn %dx : tensor<6xf32>\n}",
                   {x}, {0});
  }
}

TEST_F(InterpreterGradientTest, MatmulWithSharedWeight) {
  // y = x w: dx = dy w^T, dw = x^T dy over all rows.
  checkGradients(R"mlir(
    func.func @forward(%x: tensor<2x3x4xf32>, %w: tensor<4x5xf32>) -> tensor<2x3x5xf32> {
      %0 = loom.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
      return %0 : tensor<2x3x5xf32>
    }
    func.func @backward(%dy: tensor<2x3x5xf32>, %x: tensor<2x3x4xf32>, %w: tensor<4x5xf32>)
        -> (tensor<2x3x4xf32>, tensor<4x5xf32>) {
      %dx = loom.matmul %dy, %w {transpose_rhs} : (tensor<2x3x5xf32>, tensor<4x5xf32>) -> tensor<2x3x4xf32>
      %x2 = loom.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
      %dy2 = loom.reshape %dy : tensor<2x3x5xf32> -> tensor<6x5xf32>
      %dw = loom.matmul %x2, %dy2 {transpose_lhs} : (tensor<6x4xf32>, tensor<6x5xf32>) -> tensor<4x5xf32>
      return %dx, %dw : tensor<2x3x4xf32>, tensor<4x5xf32>
    })mlir",
                 {random({2, 3, 4}), random({4, 5})}, {0, 1});
}

TEST_F(InterpreterGradientTest, BatchedMatmulWithTransposedRhs) {
  // s = q k^T: dq = ds k, dk = ds^T q.
  checkGradients(R"mlir(
    func.func @forward(%q: tensor<2x3x4xf32>, %k: tensor<2x5x4xf32>) -> tensor<2x3x5xf32> {
      %0 = loom.matmul %q, %k {transpose_rhs} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>) -> tensor<2x3x5xf32>
      return %0 : tensor<2x3x5xf32>
    }
    func.func @backward(%ds: tensor<2x3x5xf32>, %q: tensor<2x3x4xf32>, %k: tensor<2x5x4xf32>)
        -> (tensor<2x3x4xf32>, tensor<2x5x4xf32>) {
      %dq = loom.matmul %ds, %k : (tensor<2x3x5xf32>, tensor<2x5x4xf32>) -> tensor<2x3x4xf32>
      %dk = loom.matmul %ds, %q {transpose_lhs} : (tensor<2x3x5xf32>, tensor<2x3x4xf32>) -> tensor<2x5x4xf32>
      return %dq, %dk : tensor<2x3x4xf32>, tensor<2x5x4xf32>
    })mlir",
                 {random({2, 3, 4}), random({2, 5, 4})}, {0, 1});
}

TEST_F(InterpreterGradientTest, TransposeReshapeAndBroadcast) {
  // transpose: the inverse permutation; reshape: back; broadcast: sums.
  checkGradients(R"mlir(
    func.func @forward(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
      %0 = loom.transpose %x [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
      return %0 : tensor<4x2x3xf32>
    }
    func.func @backward(%dy: tensor<4x2x3xf32>, %x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
      %0 = loom.transpose %dy [1, 2, 0] : tensor<4x2x3xf32> -> tensor<2x3x4xf32>
      return %0 : tensor<2x3x4xf32>
    })mlir",
                 {random({2, 3, 4})}, {0});
  checkGradients(R"mlir(
    func.func @forward(%x: tensor<2x6xf32>) -> tensor<3x4xf32> {
      %0 = loom.reshape %x : tensor<2x6xf32> -> tensor<3x4xf32>
      return %0 : tensor<3x4xf32>
    }
    func.func @backward(%dy: tensor<3x4xf32>, %x: tensor<2x6xf32>) -> tensor<2x6xf32> {
      %0 = loom.reshape %dy : tensor<3x4xf32> -> tensor<2x6xf32>
      return %0 : tensor<2x6xf32>
    })mlir",
                 {random({2, 6})}, {0});
  checkGradients(R"mlir(
    func.func @forward(%x: tensor<3x1xf32>) -> tensor<2x3x4xf32> {
      %0 = loom.broadcast %x : tensor<3x1xf32> -> tensor<2x3x4xf32>
      return %0 : tensor<2x3x4xf32>
    }
    func.func @backward(%dy: tensor<2x3x4xf32>, %x: tensor<3x1xf32>) -> tensor<3x1xf32> {
      %0 = loom.reduce_sum %dy [0, 2] : tensor<2x3x4xf32> -> tensor<3xf32>
      %1 = loom.reshape %0 : tensor<3xf32> -> tensor<3x1xf32>
      return %1 : tensor<3x1xf32>
    })mlir",
                 {random({3, 1})}, {0});
}

TEST_F(InterpreterGradientTest, SlicePadAndConcat) {
  // slice <-> pad; concat: the slices of dy.
  checkGradients(R"mlir(
    func.func @forward(%x: tensor<3x4xf32>) -> tensor<2x2xf32> {
      %0 = loom.slice %x [1, 2] : tensor<3x4xf32> -> tensor<2x2xf32>
      return %0 : tensor<2x2xf32>
    }
    func.func @backward(%dy: tensor<2x2xf32>, %x: tensor<3x4xf32>) -> tensor<3x4xf32> {
      %0 = loom.pad %dy low [1, 2] : tensor<2x2xf32> -> tensor<3x4xf32>
      return %0 : tensor<3x4xf32>
    })mlir",
                 {random({3, 4})}, {0});
  checkGradients(R"mlir(
    func.func @forward(%x: tensor<2x2xf32>) -> tensor<3x4xf32> {
      %0 = loom.pad %x low [0, 1] : tensor<2x2xf32> -> tensor<3x4xf32>
      return %0 : tensor<3x4xf32>
    }
    func.func @backward(%dy: tensor<3x4xf32>, %x: tensor<2x2xf32>) -> tensor<2x2xf32> {
      %0 = loom.slice %dy [0, 1] : tensor<3x4xf32> -> tensor<2x2xf32>
      return %0 : tensor<2x2xf32>
    })mlir",
                 {random({2, 2})}, {0});
  checkGradients(R"mlir(
    func.func @forward(%a: tensor<2x1xf32>, %b: tensor<2x2xf32>) -> tensor<2x3xf32> {
      %0 = loom.concat %a, %b {axis = 1 : i64} : (tensor<2x1xf32>, tensor<2x2xf32>) -> tensor<2x3xf32>
      return %0 : tensor<2x3xf32>
    }
    func.func @backward(%dy: tensor<2x3xf32>, %a: tensor<2x1xf32>, %b: tensor<2x2xf32>)
        -> (tensor<2x1xf32>, tensor<2x2xf32>) {
      %da = loom.slice %dy [0, 0] : tensor<2x3xf32> -> tensor<2x1xf32>
      %db = loom.slice %dy [0, 1] : tensor<2x3xf32> -> tensor<2x2xf32>
      return %da, %db : tensor<2x1xf32>, tensor<2x2xf32>
    })mlir",
                 {random({2, 1}), random({2, 2})}, {0, 1});
}

TEST_F(InterpreterGradientTest, ReduceSumAndMean) {
  checkGradients(R"mlir(
    func.func @forward(%x: tensor<2x3x4xf32>) -> tensor<2x4xf32> {
      %0 = loom.reduce_sum %x [1] : tensor<2x3x4xf32> -> tensor<2x4xf32>
      return %0 : tensor<2x4xf32>
    }
    func.func @backward(%dy: tensor<2x4xf32>, %x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
      %0 = loom.reshape %dy : tensor<2x4xf32> -> tensor<2x1x4xf32>
      %1 = loom.broadcast %0 : tensor<2x1x4xf32> -> tensor<2x3x4xf32>
      return %1 : tensor<2x3x4xf32>
    })mlir",
                 {random({2, 3, 4})}, {0});
  checkGradients(R"mlir(
    func.func @forward(%x: tensor<2x3x4xf32>) -> tensor<2x1x4xf32> {
      %0 = loom.reduce_mean %x [1] {keep_dims} : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
      return %0 : tensor<2x1x4xf32>
    }
    func.func @backward(%dy: tensor<2x1x4xf32>, %x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
      %n = arith.constant dense<3.0> : tensor<f32>
      %0 = loom.broadcast %dy : tensor<2x1x4xf32> -> tensor<2x3x4xf32>
      %1 = loom.div %0, %n : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
      return %1 : tensor<2x3x4xf32>
    })mlir",
                 {random({2, 3, 4})}, {0});
}

//===----------------------------------------------------------------------===//
// Precision modes and rounding
//===----------------------------------------------------------------------===//

/// `value` converted to `semantics` by APFloat (correctly rounded, ties to
/// even) and back to double.
double roundWithAPFloat(double value, const llvm::fltSemantics &semantics) {
  llvm::APFloat x(value);
  bool losesInfo;
  x.convert(semantics, llvm::APFloat::rmNearestTiesToEven, &losesInfo);
  x.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven,
            &losesInfo);
  return x.convertToDouble();
}

TEST_F(InterpreterTest, RoundingMatchesAPFloat) {
  Builder b(&context);
  struct Format {
    const char *name;
    Type type;
    const llvm::fltSemantics &semantics;
  };
  const Format formats[] = {
      {"f32", b.getF32Type(), llvm::APFloat::IEEEsingle()},
      {"bf16", b.getBF16Type(), llvm::APFloat::BFloat()},
      {"f16", b.getF16Type(), llvm::APFloat::IEEEhalf()}};
  // Random significands over exponents from below the subnormals of f32 to
  // beyond its range, plus exact ties and values near the largest finite.
  std::vector<double> values = {0.0,
                                -0.0,
                                1.0 + 1.0 / 256,
                                1.0 + 3.0 / 256,
                                65504.0,
                                65520.0,
                                65519.99,
                                3.3895313892515355e38,
                                3.40e38,
                                -1e-8,
                                5.9604644775390625e-8,
                                2.98e-8,
                                1.401298464324817e-45,
                                7e-46,
                                INFINITY,
                                -INFINITY};
  std::uniform_real_distribution<double> significand(1.0, 2.0);
  std::uniform_int_distribution<int> exponent(-155, 130);
  for (int i = 0; i < 20000; ++i)
    values.push_back((i % 2 ? -1 : 1) *
                     std::ldexp(significand(rng), exponent(rng)));
  for (const Format &format : formats)
    for (double v : values) {
      double expected = roundWithAPFloat(v, format.semantics);
      double actual = loom::interp::roundToElementType(v, format.type);
      EXPECT_TRUE(actual == expected &&
                  std::signbit(actual) == std::signbit(expected))
          << "rounding " << v << " to " << format.name << ": " << actual
          << " instead of " << expected;
    }
  EXPECT_TRUE(
      std::isnan(loom::interp::roundToElementType(NAN, b.getBF16Type())));
}

TEST_F(InterpreterTest, F32ModeRoundsEveryResultAndArgument) {
  func::FuncOp fn = parse(R"mlir(
    func.func @main(%a: tensor<2xf32>, %b: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xbf16>) {
      %0 = loom.add %a, %b : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
      %1 = loom.cast %0 : tensor<2xf32> -> tensor<2xbf16>
      return %0, %1 : tensor<2xf32>, tensor<2xbf16>
    })mlir");
  std::vector<Tensor> args = {floats({2}, {1.0, 0.1}),
                              floats({2}, {1e-10, 3.0 / 256})};
  auto wide = run(fn, args, Precision::F64);
  ASSERT_EQ(wide.size(), 2u);
  expectAllNear(wide[0].f(), {1.0 + 1e-10, 0.1 + 3.0 / 256}, 1e-17);
  expectAllNear(wide[1].f(), wide[0].f(), 0);
  EXPECT_TRUE(wide[1].elementType().isBF16());

  auto narrow = run(fn, args, Precision::F32);
  ASSERT_EQ(narrow.size(), 2u);
  // 1 + 1e-10 is 1 in f32; 0.1 enters as float(0.1).
  double sum = static_cast<float>(static_cast<double>(0.1f) +
                                  static_cast<double>(3.0f / 256));
  EXPECT_EQ(narrow[0].f()[0], 1.0);
  EXPECT_EQ(narrow[0].f()[1], sum);
  // bf16 keeps 8 significant bits.
  EXPECT_EQ(narrow[1].f()[0], 1.0);
  EXPECT_EQ(narrow[1].f()[1], roundWithAPFloat(sum, llvm::APFloat::BFloat()));
  EXPECT_TRUE(narrow[0].elementType().isF32());
  EXPECT_TRUE(narrow[1].elementType().isBF16());
}

TEST_F(InterpreterTest, Bf16OpsRoundTiesToEven) {
  func::FuncOp fn = parse(R"mlir(
    func.func @main(%a: tensor<3xbf16>, %b: tensor<3xbf16>) -> tensor<3xbf16> {
      %0 = loom.add %a, %b : (tensor<3xbf16>, tensor<3xbf16>) -> tensor<3xbf16>
      return %0 : tensor<3xbf16>
    })mlir");
  // 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: to even, 1.
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: to 1 + 2^-6.
  // 1 + 2^-8 + 2^-12 is above halfway: to 1 + 2^-7.
  auto r = run(fn,
               {floats({3}, {1, 1, 1}),
                floats({3}, {1.0 / 256, 3.0 / 256, 1.0 / 256 + 1.0 / 4096})},
               Precision::F32);
  ASSERT_EQ(r.size(), 1u);
  expectAllNear(r[0].f(), {1.0, 1.0 + 1.0 / 64, 1.0 + 1.0 / 128}, 0);
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

/// Random123's tests/kat_vectors, the three philox4x32 10 lines (counter,
/// key, expected output).
TEST(InterpreterPhiloxTest, RandomKnownAnswers) {
  struct Vector {
    loom::Philox4x32 counter;
    uint32_t key0, key1;
    loom::Philox4x32 expected;
  };
  const Vector vectors[] = {
      {{{0, 0, 0, 0}},
       0,
       0,
       {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
       0xffffffff,
       0xffffffff,
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
       0xa4093822,
       0x299f31d0,
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (const Vector &v : vectors) {
    loom::Philox4x32 out = loom::philox4x32_10(v.counter, v.key0, v.key1);
    for (int w = 0; w < 4; ++w)
      EXPECT_EQ(out.word[w], v.expected.word[w]) << "word " << w;
  }
  // The dropout bits are the first word for counter {step, index} and key
  // {seed, key}, 32 bits each.
  EXPECT_EQ(loom::dropoutBits(0xa4093822, 0x299f31d0, 0x85a308d3243f6a88ull,
                              0x0370734413198a2eull),
            0xd16cfe09u);
}

TEST_F(InterpreterTest, DropoutMaskStatisticsAndDeterminism) {
  func::FuncOp fn = parse(R"mlir(
    func.func @main(%x: tensor<200x500xf32>, %t: tensor<i64>)
        -> (tensor<200x500xf32>, tensor<200x500xf32>, tensor<200x500xf32>) {
      %0 = loom.dropout %x, %t {key = 1 : i64, rate = 0.25 : f64, seed = 99 : i64} : tensor<200x500xf32>, tensor<i64>
      %1 = loom.dropout %x, %t {key = 2 : i64, rate = 0.25 : f64, seed = 99 : i64} : tensor<200x500xf32>, tensor<i64>
      %2 = loom.dropout_grad %x, %t {key = 1 : i64, rate = 0.25 : f64, seed = 99 : i64} : tensor<200x500xf32>, tensor<i64>
      return %0, %1, %2 : tensor<200x500xf32>, tensor<200x500xf32>, tensor<200x500xf32>
    })mlir");
  const int64_t n = 100000;
  Tensor ones = floats({200, 500}, std::vector<double>(n, 1.0));
  auto first = run(fn, {ones, ints({}, {7})});
  auto again = run(fn, {ones, ints({}, {7})});
  auto nextStep = run(fn, {ones, ints({}, {8})});
  ASSERT_EQ(first.size(), 3u);
  ASSERT_EQ(again.size(), 3u);
  ASSERT_EQ(nextStep.size(), 3u);

  int64_t kept = 0, sameAcrossKeys = 0, sameAcrossSteps = 0;
  for (int64_t e = 0; e < n; ++e) {
    double y = first[0].f()[e];
    ASSERT_TRUE(y == 0.0 || y == 1.0 / 0.75) << "element " << e << ": " << y;
    ASSERT_EQ(y != 0.0, loom::dropoutKeeps(99, 1, 7, e, 0.25))
        << "element " << e;
    kept += y != 0.0;
    sameAcrossKeys += (y != 0.0) == (first[1].f()[e] != 0.0);
    sameAcrossSteps += (y != 0.0) == (nextStep[0].f()[e] != 0.0);
  }
  // Keep probability 0.75: the count is within 5 standard deviations.
  double sigma = std::sqrt(n * 0.75 * 0.25);
  EXPECT_NEAR(static_cast<double>(kept), 0.75 * n, 5 * sigma);
  // Independent masks agree with probability 0.75^2 + 0.25^2 = 0.625.
  EXPECT_NEAR(static_cast<double>(sameAcrossKeys), 0.625 * n, 5 * 153.0);
  EXPECT_NEAR(static_cast<double>(sameAcrossSteps), 0.625 * n, 5 * 153.0);
  // Deterministic, and dropout_grad applies the same mask.
  EXPECT_EQ(first[0].f(), again[0].f());
  EXPECT_EQ(first[0].f(), first[2].f());
}

TEST_F(InterpreterTest, DropoutWithRateZeroIsTheIdentity) {
  func::FuncOp fn = parse(R"mlir(
    func.func @main(%x: tensor<64xf32>, %t: tensor<i32>) -> tensor<64xf32> {
      %0 = loom.dropout %x, %t {key = 0 : i64, rate = 0.0 : f64, seed = 0 : i64} : tensor<64xf32>, tensor<i32>
      return %0 : tensor<64xf32>
    })mlir");
  Tensor x = random({64});
  auto r = run(fn, {x, ints({}, {1})});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].f(), x.f());
}

//===----------------------------------------------------------------------===//
// func.call, arith.constant and errors
//===----------------------------------------------------------------------===//

TEST_F(InterpreterTest, CallsAndConstants) {
  func::FuncOp fn = parse(R"mlir(
    func.func @twice(%x: tensor<2xf32>) -> tensor<2xf32> {
      %0 = loom.add %x, %x : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
      return %0 : tensor<2xf32>
    }
    func.func @main(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<2x2xi32>, tensor<bf16>) {
      %c = arith.constant dense<[1.0, 2.5]> : tensor<2xf32>
      %i = arith.constant dense<3> : tensor<2x2xi32>
      %h = arith.constant dense<0.1> : tensor<bf16>
      %0 = func.call @twice(%x) : (tensor<2xf32>) -> tensor<2xf32>
      %1 = loom.add %0, %c : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
      return %1, %i, %h : tensor<2xf32>, tensor<2x2xi32>, tensor<bf16>
    })mlir");
  auto r = run(fn, {floats({2}, {0.25, -1})});
  ASSERT_EQ(r.size(), 3u);
  expectAllNear(r[0].f(), {1.5, 0.5}, 0);
  EXPECT_EQ(r[1].i(), (std::vector<int64_t>{3, 3, 3, 3}));
  EXPECT_TRUE(r[1].elementType().isInteger(32));
  // The bf16 attribute already holds 0.1 rounded to bf16.
  expectAllNear(r[2].f(), {roundWithAPFloat(0.1, llvm::APFloat::BFloat())}, 0);
}

TEST_F(InterpreterTest, ArgumentMismatchesNameTheArgument) {
  func::FuncOp fn = parse(R"mlir(
    func.func @main(%w: tensor<2x3xf32> {loom.name = "h.0.w"}, %ids: tensor<2xi32>) -> tensor<2x3xf32> {
      return %w : tensor<2x3xf32>
    })mlir");
  std::string error = runError(fn, {iota({2, 3})});
  EXPECT_NE(error.find("@main takes 2 arguments, got 1"), std::string::npos)
      << error;
  error = runError(fn, {iota({3, 2}), ints({2}, {0, 1})});
  EXPECT_NE(error.find("argument #0 ('h.0.w') of @main: expected shape 2x3, "
                       "got 3x2"),
            std::string::npos)
      << error;
  error = runError(fn, {iota({2, 3}), iota({2})});
  EXPECT_NE(error.find("argument #1 of @main: expected integer elements"),
            std::string::npos)
      << error;
  Builder b(&context);
  error = runError(
      fn, {Tensor::floats(b.getBF16Type(), {2, 3}, std::vector<double>(6, 0.0)),
           ints({2}, {0, 1})});
  EXPECT_NE(error.find("expected element type f32, got bf16"),
            std::string::npos)
      << error;
}

TEST_F(InterpreterTest, UnsupportedOpsAreErrorsWithLocations) {
  func::FuncOp fn = parse(R"mlir(
    func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
      %0 = loom.exp %x : tensor<2xf32>
      %1 = arith.addf %0, %x : tensor<2xf32>
      return %1 : tensor<2xf32>
    })mlir");
  std::string error = runError(fn, {iota({2})});
  EXPECT_NE(error.find("test.mlir:4:12: 'arith.addf' is not supported by "
                       "the interpreter"),
            std::string::npos)
      << error;
}

TEST_F(InterpreterTest, RecursionAndMissingBodiesAreErrors) {
  func::FuncOp recursive = parse(R"mlir(
    func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
      %0 = func.call @main(%x) : (tensor<2xf32>) -> tensor<2xf32>
      return %0 : tensor<2xf32>
    })mlir");
  std::string error = runError(recursive, {iota({2})});
  EXPECT_NE(error.find("@main calls itself"), std::string::npos) << error;
  EXPECT_NE(error.find("'func.call' failed"), std::string::npos) << error;

  func::FuncOp external = parse(R"mlir(
    func.func private @ext(tensor<2xf32>) -> tensor<2xf32>
    func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
      %0 = func.call @ext(%x) : (tensor<2xf32>) -> tensor<2xf32>
      return %0 : tensor<2xf32>
    })mlir");
  error = runError(external, {iota({2})});
  EXPECT_NE(error.find("@ext has no body"), std::string::npos) << error;
}

//===----------------------------------------------------------------------===//
// Imported models
//===----------------------------------------------------------------------===//

/// The text of examples/configs/<name>, found from this file's path.
std::string readConfig(llvm::StringRef name) {
  llvm::StringRef thisFile = __FILE__;
  std::string path =
      (thisFile.drop_back(
           llvm::StringRef("test/Unit/InterpreterTest.cpp").size()) +
       "examples/configs/" + name)
          .str();
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer) {
    ADD_FAILURE() << "cannot read " << path;
    return "";
  }
  return (*buffer)->getBuffer().str();
}

class InterpreterModelTest : public InterpreterTest {
protected:
  /// Imports examples/configs/<name> for 4 sequences of 64 tokens, the
  /// shape of the tiny training runs.
  func::FuncOp import(llvm::StringRef name, loom::ImportOptions options) {
    auto config = loom::parseModelConfig(readConfig(name), name);
    if (!config) {
      ADD_FAILURE() << llvm::toString(config.takeError());
      return nullptr;
    }
    vocab = config->vocab;
    options.microBatch = 4;
    options.seqLen = 64;
    auto module = loom::importModel(context, *config, options);
    if (!module) {
      ADD_FAILURE() << llvm::toString(module.takeError());
      return nullptr;
    }
    modules.push_back(std::move(*module));
    return modules.back()->lookupSymbol<func::FuncOp>("forward");
  }

  /// Norm weights 1, biases 0, other weights N(0, 0.02); tokens and labels
  /// uniform over the vocabulary; the dropout step 1.
  std::vector<Tensor> smallRandomArgs(func::FuncOp fn) {
    std::vector<Tensor> args;
    std::uniform_int_distribution<int64_t> token(0, vocab - 1);
    for (auto [index, type] : llvm::enumerate(fn.getArgumentTypes())) {
      auto tensor = cast<RankedTensorType>(type);
      auto name = fn.getArgAttrOfType<StringAttr>(index, "loom.name");
      llvm::StringRef argName = name ? name.getValue() : "";
      if (!isa<FloatType>(tensor.getElementType())) {
        std::vector<int64_t> values(tensor.getNumElements(), 1);
        if (tensor.getRank() > 0)
          for (int64_t &v : values)
            v = token(rng);
        args.push_back(Tensor::ints(nullptr, tensor.getShape(), values));
      } else if (tensor.getRank() == 1) {
        double value = argName.ends_with("bias") ? 0.0 : 1.0;
        args.push_back(
            floats(tensor.getShape(),
                   std::vector<double>(tensor.getNumElements(), value)));
      } else {
        args.push_back(random(tensor.getShape(), 0.02));
      }
    }
    return args;
  }

  int64_t vocab = 0;
};

/// With weights of scale 0.02 the logits have a standard deviation of about
/// 0.02 * sqrt(64) = 0.16 and every token a probability near 1 / vocab: the
/// expected loss is ln(256) + 0.16^2 / 2, give or take 0.16 / sqrt(256
/// tokens) for the random labels.
TEST_F(InterpreterModelTest, TinyGPT2LossIsNearLogVocab) {
  func::FuncOp fn = import("gpt2-tiny.json", {});
  ASSERT_TRUE(fn);
  std::vector<Tensor> args = smallRandomArgs(fn);
  auto wide = run(fn, args, Precision::F64);
  auto narrow = run(fn, args, Precision::F32);
  ASSERT_EQ(wide.size(), 1u);
  ASSERT_EQ(narrow.size(), 1u);
  EXPECT_NEAR(wide[0].f()[0], std::log(256.0), 0.05);
  EXPECT_NEAR(narrow[0].f()[0], wide[0].f()[0], 1e-5);
}

TEST_F(InterpreterModelTest, TinyGPT2WithDropout) {
  loom::ImportOptions options;
  options.embdDropout = 0.1;
  options.residDropout = 0.1;
  func::FuncOp fn = import("gpt2-tiny.json", options);
  ASSERT_TRUE(fn);
  auto r = run(fn, smallRandomArgs(fn), Precision::F32);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NEAR(r[0].f()[0], std::log(256.0), 0.05);
}

TEST_F(InterpreterModelTest, TinyLlamaInBf16) {
  loom::ImportOptions options;
  options.precision = loom::Precision::BF16;
  func::FuncOp fn = import("llama-tiny.json", options);
  ASSERT_TRUE(fn);
  std::vector<Tensor> args = smallRandomArgs(fn);
  auto wide = run(fn, args, Precision::F64);
  auto narrow = run(fn, args, Precision::F32);
  ASSERT_EQ(wide.size(), 1u);
  ASSERT_EQ(narrow.size(), 1u);
  EXPECT_NEAR(wide[0].f()[0], std::log(256.0), 0.05);
  // bf16 activations: about 3 significant digits.
  EXPECT_NEAR(narrow[0].f()[0], wide[0].f()[0], 0.02);
  EXPECT_NE(narrow[0].f()[0], wide[0].f()[0]);
}

} // namespace
