//===- InterpreterGradientTest.cpp - Gradients against finite differences ===//
//
// Every gradient op is checked against central differences of its forward
// op run in F64: with a random cotangent c and L = sum(c * forward(x)),
// max|dL/dx - fd| / max|fd| < 1e-6. (The gradients of the other ops are
// --loom-autodiff's rules, checked the same way in AutodiffTest.cpp.)
//
//===----------------------------------------------------------------------===//

#include "InterpreterTestSupport.h"

using namespace mlir;
using namespace loom::interp::testing;
using loom::interp::Precision;
using loom::interp::Tensor;

namespace {

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

TEST_F(InterpreterGradientTest, ActivationGradients) {
  const char *source = R"mlir(
    func.func @forward(%x: tensor<4x5xf32>) -> tensor<4x5xf32> {
      %0 = loom.ACT %x : tensor<4x5xf32>
      return %0 : tensor<4x5xf32>
    }
    func.func @backward(%dy: tensor<4x5xf32>, %x: tensor<4x5xf32>) -> tensor<4x5xf32> {
      %0 = loom.ACT_grad %dy, %x : tensor<4x5xf32>
      return %0 : tensor<4x5xf32>
    })mlir";
  for (const char *activation : {"gelu", "gelu_erf", "silu"}) {
    SCOPED_TRACE(activation);
    std::string text = source;
    for (size_t at; (at = text.find("ACT")) != std::string::npos;)
      text.replace(at, 3, activation);
    checkGradients(text, {random({4, 5}, 2.0)}, {0});
  }
}

/// softmax_grad needs no mask of its own: a masked output is 0, and so is
/// its gradient.
TEST_F(InterpreterGradientTest, CausalSoftmaxGrad) {
  checkGradients(R"mlir(
    func.func @forward(%x: tensor<2x5x5xf32>) -> tensor<2x5x5xf32> {
      %0 = loom.softmax %x {causal} : tensor<2x5x5xf32>
      return %0 : tensor<2x5x5xf32>
    }
    func.func @backward(%dy: tensor<2x5x5xf32>, %x: tensor<2x5x5xf32>) -> tensor<2x5x5xf32> {
      %y = loom.softmax %x {causal} : tensor<2x5x5xf32>
      %0 = loom.softmax_grad %dy, %y : tensor<2x5x5xf32>
      return %0 : tensor<2x5x5xf32>
    })mlir",
                 {random({2, 5, 5}, 2.0)}, {0});
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

TEST_F(InterpreterGradientTest, AttentionGradWithDropout) {
  checkGradients(
      R"mlir(
    func.func @forward(%q: tensor<2x5x4x3xf32>, %k: tensor<2x5x2x3xf32>, %v: tensor<2x5x2x3xf32>, %step: tensor<i64>)
        -> tensor<2x5x4x3xf32> {
      %o, %lse = loom.attention %q, %k, %v, %step {causal, scale = 0.6 : f64,
          dropout_rate = 0.3 : f64, dropout_seed = 5 : i64, dropout_key = 2 : i64}
          : (tensor<2x5x4x3xf32>, tensor<2x5x2x3xf32>, tensor<2x5x2x3xf32>, tensor<i64>)
          -> (tensor<2x5x4x3xf32>, tensor<2x4x5xf32>)
      return %o : tensor<2x5x4x3xf32>
    }
    func.func @backward(%do: tensor<2x5x4x3xf32>, %q: tensor<2x5x4x3xf32>, %k: tensor<2x5x2x3xf32>, %v: tensor<2x5x2x3xf32>, %step: tensor<i64>)
        -> (tensor<2x5x4x3xf32>, tensor<2x5x2x3xf32>, tensor<2x5x2x3xf32>) {
      %o, %lse = loom.attention %q, %k, %v, %step {causal, scale = 0.6 : f64,
          dropout_rate = 0.3 : f64, dropout_seed = 5 : i64, dropout_key = 2 : i64}
          : (tensor<2x5x4x3xf32>, tensor<2x5x2x3xf32>, tensor<2x5x2x3xf32>, tensor<i64>)
          -> (tensor<2x5x4x3xf32>, tensor<2x4x5xf32>)
      %dq, %dk, %dv = loom.attention_grad %do, %q, %k, %v, %o, %lse, %step {causal, scale = 0.6 : f64,
          dropout_rate = 0.3 : f64, dropout_seed = 5 : i64, dropout_key = 2 : i64}
          : (tensor<2x5x4x3xf32>, tensor<2x5x4x3xf32>, tensor<2x5x2x3xf32>,
             tensor<2x5x2x3xf32>, tensor<2x5x4x3xf32>, tensor<2x4x5xf32>, tensor<i64>)
          -> (tensor<2x5x4x3xf32>, tensor<2x5x2x3xf32>, tensor<2x5x2x3xf32>)
      return %dq, %dk, %dv : tensor<2x5x4x3xf32>, tensor<2x5x2x3xf32>, tensor<2x5x2x3xf32>
    })mlir",
      {random({2, 5, 4, 3}), random({2, 5, 2, 3}), random({2, 5, 2, 3}),
       ints({}, {3})},
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

} // namespace
