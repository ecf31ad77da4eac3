//===- TestModels.h - GPT-2 configs of given shapes for unit tests --------===//

#ifndef LOOM_TEST_UNIT_TESTMODELS_H
#define LOOM_TEST_UNIT_TESTMODELS_H

#include "loom/Import/ModelConfig.h"

#include <gtest/gtest.h>

#include <string>

namespace loom::unittest {

/// The shape of a GPT-2 model and its dropout probabilities (the config
/// defaults, 0.1, unless set).
struct GPTShape {
  int64_t layers, hidden, heads, vocab, positions;
  double residDropout = 0.1, attnDropout = 0.1;
};

/// The config of `s`, parsed from a config.json as Hugging Face writes it.
inline ModelConfig gpt2Config(const GPTShape &s) {
  std::string json =
      "{\"model_type\": \"gpt2\", \"n_layer\": " + std::to_string(s.layers) +
      ", \"n_embd\": " + std::to_string(s.hidden) +
      ", \"n_head\": " + std::to_string(s.heads) +
      ", \"vocab_size\": " + std::to_string(s.vocab) +
      ", \"n_positions\": " + std::to_string(s.positions) +
      ", \"attn_pdrop\": " + std::to_string(s.attnDropout) +
      ", \"resid_pdrop\": " + std::to_string(s.residDropout) + "}";
  llvm::Expected<ModelConfig> config = parseModelConfig(json, "test.json");
  EXPECT_TRUE(static_cast<bool>(config)) << llvm::toString(config.takeError());
  return config ? *config : ModelConfig{};
}

} // namespace loom::unittest

#endif // LOOM_TEST_UNIT_TESTMODELS_H
