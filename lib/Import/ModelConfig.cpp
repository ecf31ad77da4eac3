//===- ModelConfig.cpp - Reading Hugging Face config.json -----------------===//
//
// Key names and defaults follow transformers' GPT2Config, LlamaConfig,
// Qwen2Config, MistralConfig and GPTNeoXConfig.
//
//===----------------------------------------------------------------------===//

#include "loom/Import/ModelConfig.h"

#include "dialects/Loom/ShapeInference.h"
#include "loom/Support/Json.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"

#include <cmath>

using namespace llvm;

namespace loom {
namespace {

/// Reads keys of one JSON object, remembering the first error.
class ConfigReader {
public:
  ConfigReader(const json::Object &object, StringRef fileName)
      : object(object), fileName(fileName) {}

  /// A positive integer of at most `max`; `fallback` when the key is absent
  /// (or null) and a fallback is given.
  int64_t positive(StringRef key, int64_t max,
                   std::optional<int64_t> fallback = {}) {
    const json::Value *value = object.get(key);
    if (!value || value->kind() == json::Value::Null) {
      if (!fallback)
        fail(Twine("missing key \"") + key + "\"");
      return fallback.value_or(1);
    }
    std::optional<int64_t> number = value->getAsInteger();
    if (!number || *number <= 0) {
      fail(Twine("key \"") + key + "\" must be a positive integer");
      return 1;
    }
    if (*number > max) {
      fail(Twine("key \"") + key + "\" = " + Twine(*number) +
           " is beyond what Loom handles (at most " + Twine(max) + ")");
      return 1;
    }
    return *number;
  }

  /// A number in [low, high).
  double number(StringRef key, double fallback, double low, double high) {
    const json::Value *value = object.get(key);
    if (!value || value->kind() == json::Value::Null)
      return fallback;
    std::optional<double> number = value->getAsNumber();
    if (!number || !(*number >= low && *number < high)) {
      fail(Twine("key \"") + key + "\" must be a number in [" +
           formatNumber(low) + ", " + formatNumber(high) + ")");
      return fallback;
    }
    return *number;
  }

  /// A string key, `fallback` when absent (or null); must be one of the
  /// keys of `allowed`, whose value it returns.
  template <typename T>
  T choice(StringRef key, T fallback,
           ArrayRef<std::pair<StringRef, T>> allowed) {
    const json::Value *value = object.get(key);
    if (!value || value->kind() == json::Value::Null)
      return fallback;
    std::optional<StringRef> text = value->getAsString();
    for (const auto &[name, result] : allowed)
      if (text && *text == name)
        return result;
    SmallVector<StringRef> names;
    for (const auto &entry : allowed)
      names.push_back(entry.first);
    fail(Twine("key \"") + key + "\" has an unsupported value (supported: " +
         llvm::join(names, ", ") + ")");
    return fallback;
  }

  /// Fails when `key` is present with a value other than null or `allowed`
  /// (a feature Loom does not build).
  void require(StringRef key, double allowed, StringRef what) {
    const json::Value *value = object.get(key);
    if (!value || value->kind() == json::Value::Null)
      return;
    std::optional<double> number = value->getAsNumber();
    if (!number || *number != allowed)
      fail(Twine("key \"") + key + "\" " + what);
  }

  bool boolean(StringRef key, bool fallback) {
    const json::Value *value = object.get(key);
    if (!value || value->kind() == json::Value::Null)
      return fallback;
    std::optional<bool> flag = value->getAsBoolean();
    if (!flag) {
      fail(Twine("key \"") + key + "\" must be true or false");
      return fallback;
    }
    return *flag;
  }

  /// A string key that, when present, must be one of `allowed`.
  void expectOneOf(StringRef key, ArrayRef<StringRef> allowed) {
    const json::Value *value = object.get(key);
    if (!value || value->kind() == json::Value::Null)
      return;
    std::optional<StringRef> text = value->getAsString();
    if (!text || !llvm::is_contained(allowed, *text))
      fail(Twine("key \"") + key + "\" has an unsupported value (supported: " +
           llvm::join(allowed, ", ") + ")");
  }

  void fail(const Twine &message) {
    if (!error)
      error = (fileName + ": " + message).str();
  }

  Error takeError() {
    if (!error)
      return Error::success();
    return createStringError(inconvertibleErrorCode(), *error);
  }

  const json::Object &object;

private:
  StringRef fileName;
  std::optional<std::string> error;
};

/// Bounds of each size, far past any model trained today (GPT-3: 96
/// layers, width 12288; vocabularies of 256K), that keep every count
/// derived from them (parameters, FLOPs, bytes, searches over layers)
/// inside 64-bit integers and the planner's searches short.
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxWidth = int64_t(1) << 20;
constexpr int64_t kMaxHeads = int64_t(1) << 16;
constexpr int64_t kMaxVocab = int64_t(1) << 24;
constexpr int64_t kMaxPositions = int64_t(1) << 24;

void readGPT2(ConfigReader &reader, ModelConfig &config) {
  config.type = ModelType::GPT2;
  config.numLayers = reader.positive("n_layer", kMaxLayers);
  config.hidden = reader.positive("n_embd", kMaxWidth);
  config.numHeads = reader.positive("n_head", kMaxHeads);
  config.numKVHeads = config.numHeads;
  config.intermediate =
      reader.positive("n_inner", kMaxWidth, 4 * config.hidden);
  config.vocab = reader.positive("vocab_size", kMaxVocab);
  config.maxPositions = reader.positive("n_positions", kMaxPositions);
  config.normEpsilon = reader.number("layer_norm_epsilon", 1e-5, 0, 1);
  config.ropeTheta = 0;
  config.tieEmbeddings = true;
  config.embdDropout = reader.number("embd_pdrop", 0.1, 0, 1);
  config.residDropout = reader.number("resid_pdrop", 0.1, 0, 1);
  config.attnDropout = reader.number("attn_pdrop", 0.1, 0, 1);
  reader.expectOneOf("activation_function", {"gelu_new", "gelu_pytorch_tanh"});
  config.headDimension = 0; // n_embd / n_head, once checked to divide
  config.activation = Activation::GeluTanh;
  config.qkvBias = true;
}

/// Llama 3.1's `rope_scaling`: {"rope_type": "llama3" (or "type"),
/// "factor", "low_freq_factor", "high_freq_factor",
/// "original_max_position_embeddings"}; any other type is an error.
void readRopeScaling(ConfigReader &reader, const json::Value &value,
                     RopeScalingConfig &scaling) {
  const json::Object *object = value.getAsObject();
  if (!object) {
    reader.fail("key \"rope_scaling\" must be an object or null");
    return;
  }
  std::optional<StringRef> type = object->getString("rope_type");
  if (!type)
    type = object->getString("type");
  if (!type || *type != "llama3") {
    reader.fail("key \"rope_scaling\": rope_type \"" + type.value_or("") +
                "\" is not supported (\"llama3\", Llama 3.1's, is)");
    return;
  }
  auto field = [&](StringRef key) -> double {
    std::optional<double> number = object->getNumber(key);
    if (!number || !(*number > 0) || !std::isfinite(*number)) {
      reader.fail("key \"rope_scaling\": \"" + key +
                  "\" must be a positive number");
      return 1;
    }
    return *number;
  };
  scaling.factor = field("factor");
  scaling.lowFreqFactor = field("low_freq_factor");
  scaling.highFreqFactor = field("high_freq_factor");
  scaling.originalMaxPositions = field("original_max_position_embeddings");
  if (!(scaling.highFreqFactor > scaling.lowFreqFactor))
    reader.fail("key \"rope_scaling\": \"high_freq_factor\" must be above "
                "\"low_freq_factor\"");
}

/// The keys Llama, Qwen2 and Mistral share; `kvHeads` is the config
/// class's default of num_key_value_heads (0: num_attention_heads).
void readLlamaLike(ConfigReader &reader, ModelConfig &config, ModelType type,
                   int64_t kvHeads) {
  config.type = type;
  config.numLayers = reader.positive("num_hidden_layers", kMaxLayers);
  config.hidden = reader.positive("hidden_size", kMaxWidth);
  config.numHeads = reader.positive("num_attention_heads", kMaxHeads);
  config.numKVHeads = reader.positive("num_key_value_heads", kMaxHeads,
                                      kvHeads ? kvHeads : config.numHeads);
  config.intermediate = reader.positive("intermediate_size", kMaxWidth);
  config.vocab = reader.positive("vocab_size", kMaxVocab);
  config.maxPositions =
      reader.positive("max_position_embeddings", kMaxPositions);
  config.normEpsilon = reader.number("rms_norm_eps", 1e-6, 0, 1);
  config.ropeTheta = reader.number("rope_theta", 10000.0, 1, 1e12);
  config.tieEmbeddings = reader.boolean("tie_word_embeddings", false);
  config.embdDropout = config.residDropout = 0;
  config.attnDropout = reader.number("attention_dropout", 0.0, 0, 1);
  reader.expectOneOf("hidden_act", {"silu"});
  // transformers' LlamaAttention: getattr(config, "head_dim", hidden // heads).
  config.headDimension = reader.positive("head_dim", kMaxWidth, 0);
  if (const json::Value *scaling = reader.object.get("rope_scaling"))
    if (scaling->kind() != json::Value::Null)
      readRopeScaling(reader, *scaling, config.ropeScaling);
  config.activation = Activation::Silu;
}

void readLlama(ConfigReader &reader, ModelConfig &config) {
  readLlamaLike(reader, config, ModelType::Llama, 0);
  if (const json::Value *bias = reader.object.get("attention_bias"))
    if (bias->getAsBoolean().value_or(false))
      reader.fail("key \"attention_bias\" = true is not supported");
}

/// Qwen2: Llama with biases on q, k and v (Qwen2Attention); a sliding
/// window only with use_sliding_window.
void readQwen2(ConfigReader &reader, ModelConfig &config) {
  readLlamaLike(reader, config, ModelType::Qwen2, 0);
  config.qkvBias = true;
  if (reader.boolean("use_sliding_window", false))
    config.slidingWindow =
        reader.positive("sliding_window", kMaxPositions, 4096);
}

/// Mistral: Llama with grouped-query heads by default and a sliding window
/// (MistralConfig's default 4096; null turns it off).
void readMistral(ConfigReader &reader, ModelConfig &config) {
  readLlamaLike(reader, config, ModelType::Mistral, 8);
  const json::Value *window = reader.object.get("sliding_window");
  if (!window || window->kind() != json::Value::Null)
    config.slidingWindow =
        reader.positive("sliding_window", kMaxPositions, 4096);
}

/// GPT-NeoX (Pythia): LayerNorm with biases, one query_key_value
/// projection, RoPE over the leading rotary_pct of each head, the exact
/// GELU, a parallel residual, an untied embed_out.
void readGPTNeoX(ConfigReader &reader, ModelConfig &config, double &rotaryPct) {
  config.type = ModelType::GPTNeoX;
  config.numLayers = reader.positive("num_hidden_layers", kMaxLayers);
  config.hidden = reader.positive("hidden_size", kMaxWidth);
  config.numHeads = reader.positive("num_attention_heads", kMaxHeads);
  config.numKVHeads = config.numHeads;
  config.intermediate = reader.positive("intermediate_size", kMaxWidth);
  config.vocab = reader.positive("vocab_size", kMaxVocab);
  config.maxPositions =
      reader.positive("max_position_embeddings", kMaxPositions);
  config.normEpsilon = reader.number("layer_norm_eps", 1e-5, 0, 1);
  // Newer configs call the base rope_theta, older ones rotary_emb_base.
  config.ropeTheta = reader.number(
      "rope_theta", reader.number("rotary_emb_base", 10000.0, 1, 1e12), 1,
      1e12);
  rotaryPct = reader.number("rotary_pct", 0.25, 0, 2);
  if (rotaryPct > 1)
    reader.fail("key \"rotary_pct\" must be a number in [0, 1]");
  config.parallelResidual = reader.boolean("use_parallel_residual", true);
  config.tieEmbeddings = reader.boolean("tie_word_embeddings", false);
  config.qkvBias = reader.boolean("attention_bias", true);
  config.activation =
      reader.choice<Activation>("hidden_act", Activation::GeluErf,
                                {{"gelu", Activation::GeluErf},
                                 {"gelu_new", Activation::GeluTanh},
                                 {"gelu_pytorch_tanh", Activation::GeluTanh}});
  config.embdDropout = config.residDropout = 0;
  config.attnDropout = reader.number("attention_dropout", 0.0, 0, 1);
  reader.require("hidden_dropout", 0.0,
                 "is not supported (only attention_dropout)");
  config.headDimension = 0;
  if (const json::Value *scaling = reader.object.get("rope_scaling"))
    if (scaling->kind() != json::Value::Null)
      reader.fail("key \"rope_scaling\" is not supported (only plain RoPE)");
}

} // namespace

Expected<ModelConfig> parseModelConfig(StringRef text, StringRef fileName) {
  Expected<json::Value> parsed = parseJson(text);
  if (!parsed)
    return createStringError(inconvertibleErrorCode(), "%s: not valid JSON: %s",
                             fileName.str().c_str(),
                             toString(parsed.takeError()).c_str());
  const json::Object *object = parsed->getAsObject();
  if (!object)
    return createStringError(inconvertibleErrorCode(),
                             "%s: expected a JSON object at the top level",
                             fileName.str().c_str());
  std::optional<StringRef> modelType = object->getString("model_type");
  if (!modelType)
    return createStringError(inconvertibleErrorCode(),
                             "%s: missing key \"model_type\"",
                             fileName.str().c_str());

  ModelConfig config{};
  ConfigReader reader(*object, fileName);
  double rotaryPct = 1.0;
  if (*modelType == "gpt2")
    readGPT2(reader, config);
  else if (*modelType == "llama")
    readLlama(reader, config);
  else if (*modelType == "qwen2")
    readQwen2(reader, config);
  else if (*modelType == "mistral")
    readMistral(reader, config);
  else if (*modelType == "gpt_neox")
    readGPTNeoX(reader, config, rotaryPct);
  else
    return createStringError(inconvertibleErrorCode(),
                             "%s: unknown \"model_type\" \"%s\" (supported: "
                             "gpt2, llama, qwen2, mistral, gpt_neox)",
                             fileName.str().c_str(), modelType->str().c_str());
  if (Error error = reader.takeError())
    return std::move(error);

  StringRef headsKey = *modelType == "gpt2" ? "n_head" : "num_attention_heads";
  if (config.headDimension == 0 && config.hidden % config.numHeads != 0)
    return createStringError(
        inconvertibleErrorCode(),
        "%s: key \"%s\" = %lld does not divide the hidden size %lld",
        fileName.str().c_str(), headsKey.str().c_str(),
        (long long)config.numHeads, (long long)config.hidden);
  if (config.headDimension == 0)
    config.headDimension = config.hidden / config.numHeads;
  if (config.attentionWidth() > kMaxWidth)
    return createStringError(
        inconvertibleErrorCode(),
        "%s: key \"head_dim\" = %lld times %lld heads is beyond what Loom "
        "handles (an attention width of at most %lld)",
        fileName.str().c_str(), (long long)config.headDimension,
        (long long)config.numHeads, (long long)kMaxWidth);
  if (config.numHeads % config.numKVHeads != 0)
    return createStringError(
        inconvertibleErrorCode(),
        "%s: key \"num_key_value_heads\" = %lld does not divide "
        "\"num_attention_heads\" = %lld",
        fileName.str().c_str(), (long long)config.numKVHeads,
        (long long)config.numHeads);
  // GPTNeoXAttention: rotary_ndims = int(head_size * rotary_pct).
  if (config.type != ModelType::GPT2)
    config.rotaryDim = static_cast<int64_t>(config.headDim() * rotaryPct);
  if (config.isLlamaLike() && config.headDim() % 2 != 0)
    return createStringError(
        inconvertibleErrorCode(),
        "%s: the head dimension %lld must be even for RoPE",
        fileName.str().c_str(), (long long)config.headDim());
  if (config.rotaryDim % 2 != 0)
    return createStringError(
        inconvertibleErrorCode(),
        "%s: key \"rotary_pct\" gives %lld rotary dimensions of the head's "
        "%lld; RoPE needs an even number",
        fileName.str().c_str(), (long long)config.rotaryDim,
        (long long)config.headDim());
  return config;
}

StringRef ModelConfig::typeName() const {
  switch (type) {
  case ModelType::GPT2:
    return "gpt2";
  case ModelType::Llama:
    return "llama";
  case ModelType::Qwen2:
    return "qwen2";
  case ModelType::Mistral:
    return "mistral";
  case ModelType::GPTNeoX:
    return "gpt_neox";
  }
  llvm_unreachable("unknown model type");
}

std::string ModelConfig::layerPrefix(int64_t l) const {
  StringRef stem = type == ModelType::GPT2      ? "transformer.h."
                   : type == ModelType::GPTNeoX ? "gpt_neox.layers."
                                                : "model.layers.";
  return (stem + Twine(l) + ".").str();
}

} // namespace loom
