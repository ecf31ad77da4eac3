//===- ModelConfig.h - Hugging Face model configurations --------*- C++ -*-===//
//
// The architecture hyperparameters Loom reads from a Hugging Face
// `config.json`, for the model types it can build: `gpt2`, `llama`,
// `qwen2`, `mistral` and `gpt_neox`.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_IMPORT_MODELCONFIG_H
#define LOOM_IMPORT_MODELCONFIG_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace loom {

enum class ModelType { GPT2, Llama, Qwen2, Mistral, GPTNeoX };

/// The MLP's activation: GPT-2's tanh GELU (`gelu_new`), the exact GELU
/// (GPT-NeoX's `gelu`) or SiLU (the SwiGLU gate of Llama, Qwen2, Mistral).
enum class Activation { GeluTanh, GeluErf, Silu };

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
  Activation activation; // gelu_new / hidden_act
  bool qkvBias;          // biases on q, k, v (Qwen2; GPT-NeoX's
                         // attention_bias); GPT-2's c_attn always has one
  bool parallelResidual; // GPT-NeoX use_parallel_residual: x + attn(ln1 x)
                         // + mlp(ln2 x)
  int64_t rotaryDim;     // the leading dims of each head RoPE rotates:
                         // head_dim, GPT-NeoX int(head_dim * rotary_pct);
                         // 0 for GPT-2
  int64_t slidingWindow; // Mistral / Qwen2 sliding_window when in use, else
                         // 0: a sequence may not be longer
  RopeScalingConfig ropeScaling; // rope_scaling (Llama 3.1's "llama3")

  int64_t headDim() const { return headDimension; }
  /// Width of the attention projections: all query heads side by side.
  /// Equals `hidden` unless a Llama config sets its own `head_dim`, or the
  /// cost model views one tensor-parallel rank (fewer heads, same hidden).
  int64_t attentionWidth() const { return numHeads * headDimension; }
  /// Whether the model is Llama-like: RMSNorm, RoPE, SwiGLU MLP, q/k/v/o
  /// projections (Llama, Qwen2, Mistral).
  bool isLlamaLike() const {
    return type == ModelType::Llama || type == ModelType::Qwen2 ||
           type == ModelType::Mistral;
  }
  /// The HF `model_type`.
  llvm::StringRef typeName() const;
  /// The prefix of layer `l`'s parameter names ("transformer.h.0.", ...).
  std::string layerPrefix(int64_t l) const;
};

/// Parses the text of a `config.json`. Errors name `fileName` and the
/// offending key: a missing or mistyped key, an unknown `model_type`, heads
/// that do not divide the hidden size, an unsupported activation, RoPE
/// scaling (Llama 3.1's "llama3" is the one supported) or dropout, a rotary
/// fraction that gives an odd number of dimensions.
llvm::Expected<ModelConfig> parseModelConfig(llvm::StringRef text,
                                             llvm::StringRef fileName);

} // namespace loom

#endif // LOOM_IMPORT_MODELCONFIG_H
