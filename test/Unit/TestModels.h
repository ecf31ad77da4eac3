//===- TestModels.h - Model configs and a cluster for unit tests ----------===//

#ifndef LOOM_TEST_UNIT_TESTMODELS_H
#define LOOM_TEST_UNIT_TESTMODELS_H

#include "loom/CostModel/ClusterSpec.h"
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

/// A DGX-A100-like node, spelled out so the test does not depend on the
/// presets' exact numbers.
inline cost::ClusterSpec testCluster(int64_t nodes = 1) {
  cost::ClusterSpec spec;
  spec.name = "test";
  spec.nodes = nodes;
  spec.devicesPerNode = 8;
  spec.device.name = "test-gpu";
  spec.device.peakFlopsFP32 = 19.5e12;
  spec.device.peakFlopsTF32 = 156e12;
  spec.device.peakFlopsBF16 = spec.device.peakFlopsFP16 = 312e12;
  spec.device.memoryBytes = 80.0 * (1ull << 30);
  spec.device.memoryBandwidth = 2.0e12;
  spec.device.launchOverhead = 4e-6;
  spec.device.gemmEfficiency = 0.8;
  spec.device.gemmHalfWork = 1e9;
  spec.device.attentionEfficiency = 0.8;
  spec.device.memoryEfficiency = 0.8;
  spec.intraNode = {"nvswitch", 300e9, 3e-6};
  spec.nicsPerNode = 8;
  spec.nicBandwidth = 25e9;
  spec.interNodeLatency = 8e-6;
  spec.interNodeName = "ib";
  return spec;
}

} // namespace loom::unittest

#endif // LOOM_TEST_UNIT_TESTMODELS_H
