//===- InterpreterTest.cpp - Numerics, dropout, errors, imported models ---===//
//
// The F32 rounding mode and bf16/f16 rounding against APFloat, error
// messages, dropout's Philox against Random123's known answers and its mask
// statistics, and the imported tiny GPT-2 and Llama, whose loss with small
// random weights is close to ln(vocab).
//
//===----------------------------------------------------------------------===//

#include "InterpreterTestSupport.h"

using namespace mlir;
using namespace loom::interp::testing;
using loom::interp::Precision;
using loom::interp::Tensor;

namespace {

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

/// The text of examples/configs/<name>. The directory comes from CMake, not
/// from __FILE__, which ccache's base_dir makes relative to the build.
std::string readConfig(llvm::StringRef name) {
  std::string path =
      (llvm::Twine(LOOM_EXAMPLES_DIR) + "/configs/" + name).str();
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
  options.attnDropout = 0.1;
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
