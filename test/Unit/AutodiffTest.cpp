//===- AutodiffTest.cpp - --loom-autodiff against finite differences ------===//
//
// Every gradient rule of --loom-autodiff, and whole 2-layer GPT-2 and Llama
// (GQA) models, checked against central finite differences of the forward
// function. Both sides run in the reference interpreter in float64; the
// bar is a relative error below 1e-6 (norm of the difference over norm of
// the finite-difference gradient, per argument).
//
//===----------------------------------------------------------------------===//

#include "loom/Import/ModelImporter.h"
#include "loom/Interpreter/Interpreter.h"
#include "passes/Autodiff/Passes.h"

#include "dialects/Loom/LoomDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

using namespace mlir;
using loom::interp::Precision;
using loom::interp::Tensor;

namespace {

constexpr double kTolerance = 1e-6;
constexpr double kStep = 1e-5;

struct GradCheckOptions {
  /// Float inputs are drawn from N(0, scale), or |N(0, scale)| + 0.5 when
  /// `positive` (for log, sqrt, rsqrt and divisors).
  double scale = 1.0;
  bool positive = false;
  /// Integer inputs (ids, labels) are below this bound.
  int64_t intBound = 1;
  /// At most this many entries per argument are checked (all if fewer).
  int64_t maxEntries = 64;
};

class AutodiffTest : public ::testing::Test {
protected:
  AutodiffTest() {
    context.loadDialect<loom::LoomDialect, func::FuncDialect,
                        arith::ArithDialect>();
  }

  OwningOpRef<ModuleOp> parse(StringRef text) {
    return parseSourceString<ModuleOp>(text, &context);
  }

  /// Adds @forward_backward to `module`.
  void differentiate(ModuleOp module) {
    PassManager pm(&context);
    pm.addPass(loom::createLoomAutodiff());
    ASSERT_TRUE(succeeded(pm.run(module)));
  }

  /// Random arguments for `fn`: floats as `options` says, integers
  /// deterministic below `options.intBound`.
  std::vector<Tensor> randomArgs(func::FuncOp fn,
                                 const GradCheckOptions &options,
                                 std::mt19937_64 &rng) {
    std::normal_distribution<double> normal(0.0, options.scale);
    std::vector<Tensor> args;
    for (Type type : fn.getArgumentTypes()) {
      auto tensor = cast<RankedTensorType>(type);
      int64_t n = tensor.getNumElements();
      if (isa<FloatType>(tensor.getElementType())) {
        std::vector<double> values(n);
        for (double &v : values)
          v = options.positive ? std::abs(normal(rng)) + 0.5 : normal(rng);
        args.push_back(Tensor::floats(tensor.getElementType(),
                                      tensor.getShape(), std::move(values)));
      } else {
        std::vector<int64_t> values(n);
        for (int64_t i = 0; i < n; ++i)
          values[i] =
              tensor.getRank() == 0 ? 1 : (i * 7 + 3) % options.intBound;
        args.push_back(Tensor::ints(tensor.getElementType(), tensor.getShape(),
                                    std::move(values)));
      }
    }
    return args;
  }

  double loss(func::FuncOp forward, ArrayRef<Tensor> args) {
    auto results = loom::interp::run(forward, args, Precision::F64);
    EXPECT_TRUE(static_cast<bool>(results))
        << llvm::toString(results.takeError());
    return results ? (*results)[0].f()[0] : NAN;
  }

  /// Differentiates `module`'s @forward and compares every float
  /// argument's gradient with central differences; returns the worst
  /// relative error.
  double checkGradients(ModuleOp module, const GradCheckOptions &options) {
    differentiate(module);
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    auto backward = module.lookupSymbol<func::FuncOp>("forward_backward");
    std::mt19937_64 rng(42);
    std::vector<Tensor> args = randomArgs(forward, options, rng);
    auto results = loom::interp::run(backward, args, Precision::F64);
    EXPECT_TRUE(static_cast<bool>(results))
        << llvm::toString(results.takeError());
    if (!results)
      return INFINITY;
    EXPECT_NEAR((*results)[0].f()[0], loss(forward, args), 1e-12);

    double worst = 0;
    size_t result = 1;
    for (size_t a = 0; a < args.size(); ++a) {
      if (!args[a].isFloat())
        continue;
      const std::vector<double> &grad = (*results)[result++].f();
      std::vector<int64_t> entries(args[a].f().size());
      std::iota(entries.begin(), entries.end(), 0);
      std::shuffle(entries.begin(), entries.end(), rng);
      if (static_cast<int64_t>(entries.size()) > options.maxEntries)
        entries.resize(options.maxEntries);
      double diff2 = 0, ref2 = 0;
      for (int64_t i : entries) {
        double saved = args[a].f()[i];
        args[a].f()[i] = saved + kStep;
        double up = loss(forward, args);
        args[a].f()[i] = saved - kStep;
        double down = loss(forward, args);
        args[a].f()[i] = saved;
        double fd = (up - down) / (2 * kStep);
        diff2 += (grad[i] - fd) * (grad[i] - fd);
        ref2 += fd * fd;
      }
      double error = std::sqrt(diff2) / std::max(std::sqrt(ref2), 1e-30);
      if (ref2 == 0) // The loss does not depend on it: the gradient is 0.
        error = std::sqrt(diff2);
      EXPECT_LT(error, kTolerance) << "argument " << a;
      worst = std::max(worst, error);
    }
    return worst;
  }

  double checkGradients(StringRef text, const GradCheckOptions &options = {}) {
    OwningOpRef<ModuleOp> module = parse(text);
    EXPECT_TRUE(module);
    return module ? checkGradients(*module, options) : INFINITY;
  }

  MLIRContext context;
};

//===----------------------------------------------------------------------===//
// One rule at a time. Each loss is sum(y * c) for a random cotangent c, so
// every entry of y's gradient is exercised.
//===----------------------------------------------------------------------===//

TEST_F(AutodiffTest, BroadcastingArithmetic) {
  checkGradients(R"mlir(
func.func @forward(%x: tensor<2x3x4xf32>, %b: tensor<4xf32>, %s: tensor<3x1xf32>, %d: tensor<1x3x4xf32>, %c: tensor<2x3x4xf32>) -> tensor<f32> {
  %0 = loom.add %x, %b : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %1 = loom.mul %0, %s : (tensor<2x3x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
  %2 = loom.sub %1, %d : (tensor<2x3x4xf32>, tensor<1x3x4xf32>) -> tensor<2x3x4xf32>
  %3 = loom.div %2, %s : (tensor<2x3x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
  %4 = loom.div %b, %3 : (tensor<4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %5 = loom.mul %4, %c : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %l = loom.reduce_sum %5 [0, 1, 2] : tensor<2x3x4xf32> -> tensor<f32>
  return %l : tensor<f32>
})mlir",
                 {.positive = true});
}

TEST_F(AutodiffTest, UnaryMath) {
  checkGradients(R"mlir(
func.func @forward(%x: tensor<3x4xf32>, %c: tensor<3x4xf32>) -> tensor<f32> {
  %0 = loom.log %x : tensor<3x4xf32>
  %1 = loom.sqrt %x : tensor<3x4xf32>
  %2 = loom.rsqrt %x : tensor<3x4xf32>
  %3 = loom.tanh %0 : tensor<3x4xf32>
  %4 = loom.exp %3 : tensor<3x4xf32>
  %5 = loom.neg %1 : tensor<3x4xf32>
  %6 = loom.add %4, %5 : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %7 = loom.mul %6, %2 : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %8 = loom.mul %7, %c : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %l = loom.reduce_sum %8 [0, 1] : tensor<3x4xf32> -> tensor<f32>
  return %l : tensor<f32>
})mlir",
                 {.positive = true});
}

TEST_F(AutodiffTest, LayoutOps) {
  checkGradients(R"mlir(
func.func @forward(%a: tensor<2x6xf32>, %b: tensor<2x3xf32>, %r: tensor<2x1xf32>, %c: tensor<3x4x3xf32>) -> tensor<f32> {
  %s = loom.slice %a [0, 1] : tensor<2x6xf32> -> tensor<2x3xf32>
  %j = loom.concat %s, %b {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  %p = loom.pad %j low [1, 0] : tensor<4x3xf32> -> tensor<6x3xf32>
  %t = loom.transpose %p [1, 0] : tensor<6x3xf32> -> tensor<3x6xf32>
  %m = loom.reshape %t : tensor<3x6xf32> -> tensor<3x2x3xf32>
  %rb = loom.broadcast %r : tensor<2x1xf32> -> tensor<3x2x3xf32>
  %x = loom.mul %m, %rb : (tensor<3x2x3xf32>, tensor<3x2x3xf32>) -> tensor<3x2x3xf32>
  %k = loom.reduce_mean %x [1] {keep_dims} : tensor<3x2x3xf32> -> tensor<3x1x3xf32>
  %y = loom.broadcast %k : tensor<3x1x3xf32> -> tensor<3x4x3xf32>
  %z = loom.mul %y, %c : (tensor<3x4x3xf32>, tensor<3x4x3xf32>) -> tensor<3x4x3xf32>
  %l = loom.reduce_sum %z [0, 1, 2] : tensor<3x4x3xf32> -> tensor<f32>
  return %l : tensor<f32>
})mlir");
}

TEST_F(AutodiffTest, ReduceMax) {
  checkGradients(R"mlir(
func.func @forward(%x: tensor<3x5xf32>, %c: tensor<3xf32>) -> tensor<f32> {
  %m = loom.reduce_max %x [1] : tensor<3x5xf32> -> tensor<3xf32>
  %y = loom.mul %m, %c : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = loom.reduce_sum %y [0] : tensor<3xf32> -> tensor<f32>
  return %l : tensor<f32>
})mlir");
}

TEST_F(AutodiffTest, MatmulLayouts) {
  checkGradients(R"mlir(
func.func @forward(%x: tensor<2x3x4xf32>, %w: tensor<4x5xf32>, %wt: tensor<5x4xf32>, %xt: tensor<2x4x3xf32>, %k: tensor<2x6x5xf32>, %c: tensor<2x3x6xf32>) -> tensor<f32> {
  %0 = loom.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %1 = loom.matmul %xt, %wt {transpose_lhs, transpose_rhs} : (tensor<2x4x3xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>
  %2 = loom.add %0, %1 : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %3 = loom.matmul %2, %k {transpose_rhs} : (tensor<2x3x5xf32>, tensor<2x6x5xf32>) -> tensor<2x3x6xf32>
  %4 = loom.mul %3, %c : (tensor<2x3x6xf32>, tensor<2x3x6xf32>) -> tensor<2x3x6xf32>
  %l = loom.reduce_sum %4 [0, 1, 2] : tensor<2x3x6xf32> -> tensor<f32>
  return %l : tensor<f32>
})mlir");
}

TEST_F(AutodiffTest, MatmulBatchedTransposedLhs) {
  checkGradients(R"mlir(
func.func @forward(%a: tensor<2x4x3xf32>, %b: tensor<2x4x5xf32>, %w: tensor<3x2xf32>, %c: tensor<2x5x2xf32>) -> tensor<f32> {
  %0 = loom.matmul %a, %b {transpose_lhs} : (tensor<2x4x3xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  %1 = loom.matmul %0, %w {transpose_lhs} : (tensor<2x3x5xf32>, tensor<3x2xf32>) -> tensor<2x5x2xf32>
  %2 = loom.mul %1, %c : (tensor<2x5x2xf32>, tensor<2x5x2xf32>) -> tensor<2x5x2xf32>
  %l = loom.reduce_sum %2 [0, 1, 2] : tensor<2x5x2xf32> -> tensor<f32>
  return %l : tensor<f32>
})mlir");
}

TEST_F(AutodiffTest, NormsAndActivations) {
  checkGradients(R"mlir(
func.func @forward(%x: tensor<2x3x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>, %r: tensor<8xf32>, %c: tensor<2x3x8xf32>) -> tensor<f32> {
  %0 = loom.layernorm %x, %g, %b {epsilon = 1.0e-05 : f64} : tensor<2x3x8xf32>, tensor<8xf32>
  %1 = loom.gelu %0 : tensor<2x3x8xf32>
  %2 = loom.rmsnorm %1, %r {epsilon = 1.0e-06 : f64} : tensor<2x3x8xf32>, tensor<8xf32>
  %3 = loom.silu %2 : tensor<2x3x8xf32>
  %4 = loom.softmax %3 : tensor<2x3x8xf32>
  %5 = loom.mul %4, %c : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %l = loom.reduce_sum %5 [0, 1, 2] : tensor<2x3x8xf32> -> tensor<f32>
  return %l : tensor<f32>
})mlir");
}

TEST_F(AutodiffTest, RopeAndGroupedQueryAttention) {
  checkGradients(R"mlir(
func.func @forward(%q: tensor<2x5x4x6xf32>, %k: tensor<2x5x2x6xf32>, %v: tensor<2x5x2x6xf32>, %c: tensor<2x5x4x6xf32>) -> tensor<f32> {
  %qr = loom.rope %q {theta = 100.0 : f64} : tensor<2x5x4x6xf32>
  %kr = loom.rope %k {theta = 100.0 : f64} : tensor<2x5x2x6xf32>
  %o, %lse = loom.attention %qr, %kr, %v {causal, scale = 0.4 : f64} : (tensor<2x5x4x6xf32>, tensor<2x5x2x6xf32>, tensor<2x5x2x6xf32>) -> (tensor<2x5x4x6xf32>, tensor<2x4x5xf32>)
  %y = loom.mul %o, %c : (tensor<2x5x4x6xf32>, tensor<2x5x4x6xf32>) -> tensor<2x5x4x6xf32>
  %l = loom.reduce_sum %y [0, 1, 2, 3] : tensor<2x5x4x6xf32> -> tensor<f32>
  return %l : tensor<f32>
})mlir");
}

TEST_F(AutodiffTest, NonCausalAttention) {
  checkGradients(R"mlir(
func.func @forward(%q: tensor<1x3x2x4xf32>, %k: tensor<1x5x2x4xf32>, %v: tensor<1x5x2x4xf32>, %c: tensor<1x3x2x4xf32>) -> tensor<f32> {
  %o, %lse = loom.attention %q, %k, %v {scale = 0.5 : f64} : (tensor<1x3x2x4xf32>, tensor<1x5x2x4xf32>, tensor<1x5x2x4xf32>) -> (tensor<1x3x2x4xf32>, tensor<1x2x3xf32>)
  %y = loom.mul %o, %c : (tensor<1x3x2x4xf32>, tensor<1x3x2x4xf32>) -> tensor<1x3x2x4xf32>
  %l = loom.reduce_sum %y [0, 1, 2, 3] : tensor<1x3x2x4xf32> -> tensor<f32>
  return %l : tensor<f32>
})mlir");
}

TEST_F(AutodiffTest, AttentionDropoutAndConstantScale) {
  checkGradients(R"mlir(
func.func @forward(%q: tensor<2x5x4x6xf32>, %k: tensor<2x5x2x6xf32>, %v: tensor<2x5x2x6xf32>, %step: tensor<i64>, %c: tensor<2x5x4x6xf32>) -> tensor<f32> {
  %half = arith.constant dense<5.000000e-01> : tensor<f32>
  %qs = loom.mul %q, %half : (tensor<2x5x4x6xf32>, tensor<f32>) -> tensor<2x5x4x6xf32>
  %o, %lse = loom.attention %qs, %k, %v, %step {causal, scale = 0.4 : f64, dropout_rate = 0.25 : f64, dropout_seed = 3 : i64, dropout_key = 1 : i64} : (tensor<2x5x4x6xf32>, tensor<2x5x2x6xf32>, tensor<2x5x2x6xf32>, tensor<i64>) -> (tensor<2x5x4x6xf32>, tensor<2x4x5xf32>)
  %y = loom.mul %o, %c : (tensor<2x5x4x6xf32>, tensor<2x5x4x6xf32>) -> tensor<2x5x4x6xf32>
  %l = loom.reduce_sum %y [0, 1, 2, 3] : tensor<2x5x4x6xf32> -> tensor<f32>
  return %l : tensor<f32>
})mlir");
}

TEST_F(AutodiffTest, TiedEmbeddingAndCrossEntropy) {
  checkGradients(R"mlir(
func.func @forward(%wte: tensor<11x6xf32>, %ids: tensor<2x4xi32>, %labels: tensor<2x4xi64>) -> tensor<f32> {
  %e = loom.embedding %wte, %ids : (tensor<11x6xf32>, tensor<2x4xi32>) -> tensor<2x4x6xf32>
  %t = loom.tanh %e : tensor<2x4x6xf32>
  %logits = loom.matmul %t, %wte {transpose_rhs} : (tensor<2x4x6xf32>, tensor<11x6xf32>) -> tensor<2x4x11xf32>
  %l = loom.cross_entropy %logits, %labels : (tensor<2x4x11xf32>, tensor<2x4xi64>) -> tensor<f32>
  return %l : tensor<f32>
})mlir",
                 {.intBound = 11, .maxEntries = 66});
}

TEST_F(AutodiffTest, DropoutAndCasts) {
  checkGradients(R"mlir(
func.func @forward(%x: tensor<4x16xf32>, %step: tensor<i64>, %c: tensor<4x16xf32>) -> tensor<f32> {
  %h = loom.cast %x : tensor<4x16xf32> -> tensor<4x16xbf16>
  %d = loom.dropout %h, %step {key = 5 : i64, rate = 3.0e-01 : f64, seed = 11 : i64} : tensor<4x16xbf16>, tensor<i64>
  %f = loom.cast %d : tensor<4x16xbf16> -> tensor<4x16xf32>
  %y = loom.mul %f, %c : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %l = loom.reduce_sum %y [0, 1] : tensor<4x16xf32> -> tensor<f32>
  return %l : tensor<f32>
})mlir");
}

//===----------------------------------------------------------------------===//
// Whole models, as loom-import builds them.
//===----------------------------------------------------------------------===//

class ModelGradientTest : public AutodiffTest {
protected:
  void checkModel(StringRef json) {
    auto config = loom::parseModelConfig(json, "test.json");
    ASSERT_TRUE(static_cast<bool>(config))
        << llvm::toString(config.takeError());
    loom::ImportOptions options;
    options.microBatch = 2;
    options.seqLen = 6;
    auto module = loom::importModel(context, *config, options);
    ASSERT_TRUE(static_cast<bool>(module))
        << llvm::toString(module.takeError());
    GradCheckOptions check;
    check.scale = 0.5;
    check.intBound = config->vocab;
    check.maxEntries = 12;
    checkGradients(**module, check);
  }
};

TEST_F(ModelGradientTest, GPT2TwoLayers) {
  checkModel(R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 16, "n_head": 2,
                 "vocab_size": 32, "n_positions": 8, "embd_pdrop": 0.1,
                 "resid_pdrop": 0.1, "attn_pdrop": 0.1})");
}

TEST_F(ModelGradientTest, LlamaTwoLayersGroupedQuery) {
  checkModel(
      R"({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 16,
                 "num_attention_heads": 4, "num_key_value_heads": 2,
                 "intermediate_size": 24, "vocab_size": 32,
                 "max_position_embeddings": 8, "rms_norm_eps": 1e-6,
                 "attention_dropout": 0.1})");
}

TEST_F(ModelGradientTest, LlamaTiedEmbeddings) {
  checkModel(
      R"({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 16,
                 "num_attention_heads": 4, "num_key_value_heads": 1,
                 "intermediate_size": 24, "vocab_size": 32,
                 "max_position_embeddings": 8, "tie_word_embeddings": true})");
}

} // namespace
