//===- ModelConfig.h - Hugging Face model configurations --------*- C++ -*-===//
//
// The architecture hyperparameters Loom reads from a Hugging Face
// `config.json`, for the model types it can build: `gpt2` and `llama`.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_IMPORT_MODELCONFIG_H
#define LOOM_IMPORT_MODELCONFIG_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace loom {

enum class ModelType { GPT2, Llama };

/// Llama 3.1's RoPE frequency scaling (`rope_scaling` with `"rope_type":
/// "llama3"`); factor 0: none.
struct RopeScalingConfig {
  double factor = 0, lowFreqFactor = 0, highFreqFactor = 0,
         originalMaxPositions = 0;
};

/// One decoder-only transformer, in the names of Hugging Face's configs.
struct ModelConfig {
  ModelType type;
  int64_t numLayers;     // n_layer / num_hidden_layers
  int64_t hidden;        // n_embd / hidden_size
  int64_t numHeads;      // n_head / num_attention_heads
  int64_t numKVHeads;    // = numHeads for GPT-2; num_key_value_heads (GQA)
  int64_t intermediate;  // n_inner (default 4 * n_embd) / intermediate_size
  int64_t vocab;         // vocab_size
  int64_t maxPositions;  // n_positions / max_position_embeddings
  double normEpsilon;    // layer_norm_epsilon / rms_norm_eps
  double ropeTheta;      // rope_theta (Llama only)
  bool tieEmbeddings;    // always for GPT-2; tie_word_embeddings for Llama
  double embdDropout;    // embd_pdrop (GPT-2 only)
  double residDropout;   // resid_pdrop (GPT-2 only)
  double attnDropout;    // attn_pdrop / attention_dropout
  int64_t headDimension; // head_dim (Llama, default hidden / heads);
                         // n_embd / n_head for GPT-2
  RopeScalingConfig ropeScaling; // rope_scaling (Llama 3.1's "llama3")

  int64_t headDim() const { return headDimension; }
  /// Width of the attention projections: all query heads side by side.
  /// Equals `hidden` unless a Llama config sets its own `head_dim`, or the
  /// cost model views one tensor-parallel rank (fewer heads, same hidden).
  int64_t attentionWidth() const { return numHeads * headDimension; }
  llvm::StringRef typeName() const {
    return type == ModelType::GPT2 ? "gpt2" : "llama";
  }
};

/// Parses the text of a `config.json`. Errors name `fileName` and the
/// offending key: a missing or mistyped key, an unknown `model_type`, heads
/// that do not divide the hidden size, an unsupported activation or RoPE
/// scaling (Llama 3.1's "llama3" is the one supported).
llvm::Expected<ModelConfig> parseModelConfig(llvm::StringRef text,
                                             llvm::StringRef fileName);

} // namespace loom

#endif // LOOM_IMPORT_MODELCONFIG_H
