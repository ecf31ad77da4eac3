//===- ImportTest.cpp - Imported models against closed-form counts --------===//
//
// Parameters and FLOPs of imported GPT-2-style models compared with the
// published formulas, which are computed here independently of the
// importer: parameters 12*l*h^2 + 13*l*h + V*h + s*h + 2*h, and model FLOPs
// per token 72*l*h^2 + 12*l*s*h + 6*V*h (Narayanan et al. 2021, eq. 3
// divided by B*s, without recomputation).
//
//===----------------------------------------------------------------------===//

#include "loom/Import/ModelSummary.h"

#include "TestModels.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace loom;

namespace {

using unittest::gpt2Config;
using unittest::GPTShape;

class GPTFormulaTest : public ::testing::TestWithParam<GPTShape> {};

TEST_P(GPTFormulaTest, ParametersAndFlopsMatchTheFormulas) {
  const GPTShape &s = GetParam();
  double l = s.layers, h = s.hidden, V = s.vocab, seq = s.positions;
  ModelConfig config = gpt2Config(s);
  ImportOptions options;
  options.microBatch = 2;
  mlir::MLIRContext context;
  auto module = importModel(context, config, options);
  ASSERT_TRUE(static_cast<bool>(module)) << llvm::toString(module.takeError());
  auto forward = (*module)->lookupSymbol<mlir::func::FuncOp>("forward");
  ModelSummary summary = summarizeModel(config, forward);

  int64_t expectedParams = 12 * s.layers * s.hidden * s.hidden +
                           13 * s.layers * s.hidden + s.vocab * s.hidden +
                           s.positions * s.hidden + 2 * s.hidden;
  EXPECT_EQ(summary.parameters, expectedParams);
  double expectedFlops = 72 * l * h * h + 12 * l * seq * h + 6 * V * h;
  EXPECT_NEAR(summary.flopsPerToken, expectedFlops, 1e-9 * expectedFlops);
}

INSTANTIATE_TEST_SUITE_P(Configs, GPTFormulaTest,
                         ::testing::Values(GPTShape{2, 64, 4, 256, 64},
                                           GPTShape{12, 768, 12, 50257, 1024},
                                           GPTShape{24, 1024, 16, 50257, 1024},
                                           GPTShape{3, 96, 6, 1000, 128}));

/// Llama-7B as published: 6,738,415,616 parameters.
TEST(LlamaImport, SevenBillionParameters) {
  const char *json = R"({"model_type": "llama", "num_hidden_layers": 32,
    "hidden_size": 4096, "intermediate_size": 11008,
    "num_attention_heads": 32, "vocab_size": 32000,
    "max_position_embeddings": 2048})";
  llvm::Expected<ModelConfig> config = parseModelConfig(json, "7b.json");
  ASSERT_TRUE(static_cast<bool>(config)) << llvm::toString(config.takeError());
  int64_t params = 0;
  for (const ParamSpec &spec : listParameters(*config))
    params += spec.numElements();
  EXPECT_EQ(params, 6738415616);
}

} // namespace
