//===- DecomposeAttentionTest.cpp - Unfused attention equals fused --------===//
//
// --loom-decompose-attention must not change what a model computes: imported
// models (GPT-2 with attention, embedding and residual dropout; Llama with
// grouped-query heads, with and without attention dropout) are differentiated
// with and without the decomposition, and the loss and every gradient of
// @forward_backward agree to 1e-12 relative in the float64 interpreter. The
// models' head size 16 or 4 makes the scale 1/sqrt(d) exact in f32, the type
// of the constant that scales Q.
//
//===----------------------------------------------------------------------===//

#include "loom/Import/ModelImporter.h"
#include "loom/Interpreter/Interpreter.h"
#include "passes/Autodiff/Passes.h"
#include "passes/Transforms/Passes.h"

#include "dialects/Loom/LoomDialect.h"
#include "dialects/Loom/LoomOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <random>

using namespace mlir;
using loom::interp::Precision;
using loom::interp::Tensor;

namespace {

constexpr double kTolerance = 1e-12;

class DecomposeAttentionTest : public ::testing::Test {
protected:
  DecomposeAttentionTest() {
    context.loadDialect<loom::LoomDialect, func::FuncDialect,
                        arith::ArithDialect>();
  }

  /// Imports `json` for 2 sequences of 8 tokens and adds @forward_backward,
  /// decomposing attention first when `decompose`.
  OwningOpRef<ModuleOp> build(StringRef json, bool decompose) {
    auto config = loom::parseModelConfig(json, "test.json");
    EXPECT_TRUE(static_cast<bool>(config))
        << llvm::toString(config.takeError());
    if (!config)
      return nullptr;
    vocab = config->vocab;
    loom::ImportOptions options;
    options.microBatch = 2;
    options.seqLen = 8;
    options.seed = 1234;
    auto module = loom::importModel(context, *config, options);
    EXPECT_TRUE(static_cast<bool>(module))
        << llvm::toString(module.takeError());
    if (!module)
      return nullptr;
    PassManager pm(&context);
    if (decompose)
      pm.addPass(loom::createLoomDecomposeAttention());
    pm.addPass(loom::createLoomAutodiff());
    EXPECT_TRUE(succeeded(pm.run(**module)));
    return std::move(*module);
  }

  /// Floats N(0, 0.5) (norm scales around 1), token ids and labels below
  /// the vocabulary, the step 3.
  std::vector<Tensor> randomArgs(func::FuncOp fn) {
    std::mt19937_64 rng(7);
    std::normal_distribution<double> normal(0.0, 0.5);
    std::uniform_int_distribution<int64_t> token(0, vocab - 1);
    std::vector<Tensor> args;
    for (Type type : fn.getArgumentTypes()) {
      auto tensor = cast<RankedTensorType>(type);
      int64_t n = tensor.getNumElements();
      if (isa<FloatType>(tensor.getElementType())) {
        std::vector<double> values(n);
        for (double &v : values)
          v = normal(rng) + (tensor.getRank() == 1 ? 1.0 : 0.0);
        args.push_back(Tensor::floats(tensor.getElementType(),
                                      tensor.getShape(), std::move(values)));
      } else {
        std::vector<int64_t> values(n, 3);
        if (tensor.getRank() > 0)
          for (int64_t &v : values)
            v = token(rng);
        args.push_back(Tensor::ints(tensor.getElementType(), tensor.getShape(),
                                    std::move(values)));
      }
    }
    return args;
  }

  /// Runs @forward_backward of both forms on the same arguments and
  /// compares the loss and every gradient.
  void checkEquivalent(StringRef json) {
    OwningOpRef<ModuleOp> fused = build(json, /*decompose=*/false);
    OwningOpRef<ModuleOp> unfused = build(json, /*decompose=*/true);
    ASSERT_TRUE(fused && unfused);
    auto fusedFn = fused->lookupSymbol<func::FuncOp>("forward_backward");
    auto unfusedFn = unfused->lookupSymbol<func::FuncOp>("forward_backward");
    ASSERT_TRUE(fusedFn && unfusedFn);

    // The rewrite did happen: no fused attention left, and the backward
    // uses softmax_grad instead of attention_grad.
    int64_t fusedOps = 0, softmaxGrads = 0;
    unfused->walk([&](Operation *op) {
      fusedOps += isa<loom::AttentionOp, loom::AttentionGradOp>(op);
      softmaxGrads += isa<loom::SoftmaxGradOp>(op);
    });
    EXPECT_EQ(fusedOps, 0);
    EXPECT_GT(softmaxGrads, 0);

    std::vector<Tensor> args = randomArgs(fusedFn);
    auto expected = loom::interp::run(fusedFn, args, Precision::F64);
    auto actual = loom::interp::run(unfusedFn, args, Precision::F64);
    ASSERT_TRUE(static_cast<bool>(expected))
        << llvm::toString(expected.takeError());
    ASSERT_TRUE(static_cast<bool>(actual))
        << llvm::toString(actual.takeError());
    ASSERT_EQ(actual->size(), expected->size());
    for (size_t r = 0; r < expected->size(); ++r) {
      const std::vector<double> &e = (*expected)[r].f(), &a = (*actual)[r].f();
      ASSERT_EQ(a.size(), e.size());
      double largest = 0, worst = 0;
      for (size_t i = 0; i < e.size(); ++i) {
        largest = std::max(largest, std::abs(e[i]));
        worst = std::max(worst, std::abs(a[i] - e[i]));
      }
      ASSERT_GT(largest, 0.0) << "result #" << r << " is zero";
      EXPECT_LT(worst / largest, kTolerance) << "result #" << r;
    }
  }

  MLIRContext context;
  int64_t vocab = 0;
};

TEST_F(DecomposeAttentionTest, GPT2WithAttentionDropout) {
  checkEquivalent(R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 32,
                      "n_head": 2, "vocab_size": 48, "n_positions": 8,
                      "embd_pdrop": 0.1, "resid_pdrop": 0.1,
                      "attn_pdrop": 0.2})");
}

TEST_F(DecomposeAttentionTest, LlamaGroupedQuery) {
  checkEquivalent(R"({"model_type": "llama", "num_hidden_layers": 2,
                      "hidden_size": 16, "num_attention_heads": 4,
                      "num_key_value_heads": 2, "intermediate_size": 24,
                      "vocab_size": 48, "max_position_embeddings": 8})");
}

TEST_F(DecomposeAttentionTest, LlamaGroupedQueryWithAttentionDropout) {
  checkEquivalent(R"({"model_type": "llama", "num_hidden_layers": 2,
                      "hidden_size": 64, "num_attention_heads": 4,
                      "num_key_value_heads": 1, "intermediate_size": 96,
                      "vocab_size": 48, "max_position_embeddings": 8,
                      "attention_dropout": 0.3})");
}

} // namespace
