//===- ParamInit.h - Initial weights as HF initializes them ----*- C++ -*-===//
//
// The weights a freshly constructed Hugging Face model has, drawn from a
// portable, seeded generator (the same bits on every machine):
//
//   GPT-2: embeddings and linear weights ~ N(0, 0.02), the two residual
//          projections (attn.c_proj, mlp.c_proj) ~ N(0, 0.02 / sqrt(2 L)),
//          biases 0, LayerNorm weight 1 and bias 0 (GPT2PreTrainedModel).
//   Llama: embeddings and linear weights ~ N(0, 0.02), RMSNorm weight 1
//          (LlamaPreTrainedModel, initializer_range 0.02).
//
// Normal draws use a SplitMix64 stream per parameter (seeded by the seed
// and the parameter's index) and the Box-Muller transform.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_IMPORT_PARAMINIT_H
#define LOOM_IMPORT_PARAMINIT_H

#include "loom/Checkpoint/Safetensors.h"
#include "loom/Import/ModelConfig.h"

#include <vector>

namespace loom {

/// Every parameter of `config` (state-dict order, HF names and layouts).
std::vector<CheckpointTensor> initParameters(const ModelConfig &config,
                                             uint64_t seed);

} // namespace loom

#endif // LOOM_IMPORT_PARAMINIT_H
