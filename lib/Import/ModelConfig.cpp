//===- ModelConfig.cpp - Reading Hugging Face config.json -----------------===//
//
// Key names and defaults follow transformers' GPT2Config and LlamaConfig.
//
//===----------------------------------------------------------------------===//

#include "loom/Import/ModelConfig.h"

#include "dialects/Loom/ShapeInference.h"

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

  /// A positive integer; `fallback` when the key is absent (or null) and a
  /// fallback is given.
  int64_t positive(StringRef key, std::optional<int64_t> fallback = {}) {
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

void readGPT2(ConfigReader &reader, ModelConfig &config) {
  config.type = ModelType::GPT2;
  config.numLayers = reader.positive("n_layer");
  config.hidden = reader.positive("n_embd");
  config.numHeads = reader.positive("n_head");
  config.numKVHeads = config.numHeads;
  config.intermediate = reader.positive("n_inner", 4 * config.hidden);
  config.vocab = reader.positive("vocab_size");
  config.maxPositions = reader.positive("n_positions");
  config.normEpsilon = reader.number("layer_norm_epsilon", 1e-5, 0, 1);
  config.ropeTheta = 0;
  config.tieEmbeddings = true;
  config.embdDropout = reader.number("embd_pdrop", 0.1, 0, 1);
  config.residDropout = reader.number("resid_pdrop", 0.1, 0, 1);
  config.attnDropout = reader.number("attn_pdrop", 0.1, 0, 1);
  reader.expectOneOf("activation_function", {"gelu_new", "gelu_pytorch_tanh"});
  config.headDimension = 0; // n_embd / n_head, once checked to divide
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

void readLlama(ConfigReader &reader, ModelConfig &config) {
  config.type = ModelType::Llama;
  config.numLayers = reader.positive("num_hidden_layers");
  config.hidden = reader.positive("hidden_size");
  config.numHeads = reader.positive("num_attention_heads");
  config.numKVHeads = reader.positive("num_key_value_heads", config.numHeads);
  config.intermediate = reader.positive("intermediate_size");
  config.vocab = reader.positive("vocab_size");
  config.maxPositions = reader.positive("max_position_embeddings");
  config.normEpsilon = reader.number("rms_norm_eps", 1e-6, 0, 1);
  config.ropeTheta = reader.number("rope_theta", 10000.0, 1, 1e12);
  config.tieEmbeddings = reader.boolean("tie_word_embeddings", false);
  config.embdDropout = config.residDropout = 0;
  config.attnDropout = reader.number("attention_dropout", 0.0, 0, 1);
  reader.expectOneOf("hidden_act", {"silu"});
  // transformers' LlamaAttention: getattr(config, "head_dim", hidden // heads).
  config.headDimension = reader.positive("head_dim", 0);
  if (const json::Value *scaling = reader.object.get("rope_scaling"))
    if (scaling->kind() != json::Value::Null)
      readRopeScaling(reader, *scaling, config.ropeScaling);
  if (const json::Value *bias = reader.object.get("attention_bias"))
    if (bias->getAsBoolean().value_or(false))
      reader.fail("key \"attention_bias\" = true is not supported");
}

} // namespace

Expected<ModelConfig> parseModelConfig(StringRef text, StringRef fileName) {
  Expected<json::Value> parsed = json::parse(text);
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
  if (*modelType == "gpt2")
    readGPT2(reader, config);
  else if (*modelType == "llama")
    readLlama(reader, config);
  else
    return createStringError(
        inconvertibleErrorCode(),
        "%s: unknown \"model_type\" \"%s\" (supported: gpt2, llama)",
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
  if (config.numHeads % config.numKVHeads != 0)
    return createStringError(
        inconvertibleErrorCode(),
        "%s: key \"num_key_value_heads\" = %lld does not divide "
        "\"num_attention_heads\" = %lld",
        fileName.str().c_str(), (long long)config.numKVHeads,
        (long long)config.numHeads);
  if (config.type == ModelType::Llama && config.headDim() % 2 != 0)
    return createStringError(
        inconvertibleErrorCode(),
        "%s: the head dimension %lld must be even for RoPE",
        fileName.str().c_str(), (long long)config.headDim());
  return config;
}

} // namespace loom
