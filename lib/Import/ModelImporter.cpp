//===- ModelImporter.cpp - GPT-2 and Llama forward graphs -----------------===//
//
// The graphs follow transformers' GPT2LMHeadModel, LlamaForCausalLM,
// Qwen2ForCausalLM, MistralForCausalLM and GPTNeoXForCausalLM op for op, so
// that a checkpoint written by Hugging Face computes the same loss here.
//
//===----------------------------------------------------------------------===//

#include "loom/Import/ModelImporter.h"

#include "dialects/Loom/LoomOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace loom {

int64_t ParamSpec::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

SmallVector<ParamSpec> listParameters(const ModelConfig &c) {
  SmallVector<ParamSpec> params;
  // The layer the parameters added belong to (-1: none), set by the loops
  // over the layers.
  int64_t layer = -1;
  auto add = [&](std::string name, SmallVector<int64_t, 2> shape,
                 InitKind init = InitKind::Normal) {
    params.push_back({std::move(name), std::move(shape), init, layer});
  };
  constexpr InitKind zeros = InitKind::Zeros, ones = InitKind::Ones;
  int64_t h = c.hidden, aw = c.attentionWidth(),
          kv = c.numKVHeads * c.headDim();
  if (c.type == ModelType::GPT2) {
    add("transformer.wte.weight", {c.vocab, h});
    add("transformer.wpe.weight", {c.maxPositions, h});
    for (int64_t l = 0; l < c.numLayers; ++l) {
      layer = l;
      std::string p = "transformer.h." + std::to_string(l) + ".";
      add(p + "ln_1.weight", {h}, ones);
      add(p + "ln_1.bias", {h}, zeros);
      add(p + "attn.c_attn.weight", {h, 3 * aw});
      add(p + "attn.c_attn.bias", {3 * aw}, zeros);
      add(p + "attn.c_proj.weight", {aw, h}, InitKind::ResidualNormal);
      add(p + "attn.c_proj.bias", {h}, zeros);
      add(p + "ln_2.weight", {h}, ones);
      add(p + "ln_2.bias", {h}, zeros);
      add(p + "mlp.c_fc.weight", {h, c.intermediate});
      add(p + "mlp.c_fc.bias", {c.intermediate}, zeros);
      add(p + "mlp.c_proj.weight", {c.intermediate, h},
          InitKind::ResidualNormal);
      add(p + "mlp.c_proj.bias", {h}, zeros);
      layer = -1;
    }
    add("transformer.ln_f.weight", {h}, ones);
    add("transformer.ln_f.bias", {h}, zeros);
    return params;
  }
  if (c.type == ModelType::GPTNeoX) {
    // GPTNeoXLayer registers its norms before attention and MLP.
    add("gpt_neox.embed_in.weight", {c.vocab, h});
    for (int64_t l = 0; l < c.numLayers; ++l) {
      layer = l;
      std::string p = c.layerPrefix(l);
      add(p + "input_layernorm.weight", {h}, ones);
      add(p + "input_layernorm.bias", {h}, zeros);
      add(p + "post_attention_layernorm.weight", {h}, ones);
      add(p + "post_attention_layernorm.bias", {h}, zeros);
      add(p + "attention.query_key_value.weight", {3 * aw, h});
      if (c.qkvBias)
        add(p + "attention.query_key_value.bias", {3 * aw}, zeros);
      add(p + "attention.dense.weight", {h, aw});
      if (c.qkvBias)
        add(p + "attention.dense.bias", {h}, zeros);
      add(p + "mlp.dense_h_to_4h.weight", {c.intermediate, h});
      add(p + "mlp.dense_h_to_4h.bias", {c.intermediate}, zeros);
      add(p + "mlp.dense_4h_to_h.weight", {h, c.intermediate});
      add(p + "mlp.dense_4h_to_h.bias", {h}, zeros);
      layer = -1;
    }
    add("gpt_neox.final_layer_norm.weight", {h}, ones);
    add("gpt_neox.final_layer_norm.bias", {h}, zeros);
    if (!c.tieEmbeddings)
      add("embed_out.weight", {c.vocab, h});
    return params;
  }
  // Llama, Qwen2 and Mistral; Qwen2's q, k and v have biases.
  add("model.embed_tokens.weight", {c.vocab, h});
  for (int64_t l = 0; l < c.numLayers; ++l) {
    layer = l;
    std::string p = c.layerPrefix(l);
    add(p + "self_attn.q_proj.weight", {aw, h});
    if (c.qkvBias)
      add(p + "self_attn.q_proj.bias", {aw}, zeros);
    add(p + "self_attn.k_proj.weight", {kv, h});
    if (c.qkvBias)
      add(p + "self_attn.k_proj.bias", {kv}, zeros);
    add(p + "self_attn.v_proj.weight", {kv, h});
    if (c.qkvBias)
      add(p + "self_attn.v_proj.bias", {kv}, zeros);
    add(p + "self_attn.o_proj.weight", {h, aw});
    add(p + "mlp.gate_proj.weight", {c.intermediate, h});
    add(p + "mlp.up_proj.weight", {c.intermediate, h});
    add(p + "mlp.down_proj.weight", {h, c.intermediate});
    add(p + "input_layernorm.weight", {h}, ones);
    add(p + "post_attention_layernorm.weight", {h}, ones);
    layer = -1;
  }
  add("model.norm.weight", {h}, ones);
  if (!c.tieEmbeddings)
    add("lm_head.weight", {c.vocab, h});
  return params;
}

namespace {

/// Builds the body of @forward: holds the builder, the parameters by name
/// (already in the compute type) and the shapes of this micro-batch.
class ForwardBuilder {
public:
  ForwardBuilder(OpBuilder &builder, Location loc, const ModelConfig &config,
                 const ImportOptions &options, int64_t seqLen, Value step)
      : b(builder), loc(loc), config(config), options(options),
        batch(options.microBatch), seq(seqLen), step(step) {}

  /// Makes `value` (an f32 master weight of `layer`, or -1) available under
  /// `name`, cast to the compute type once.
  void addParam(StringRef name, Value value, int64_t layer) {
    if (options.precision == Precision::BF16) {
      value = CastOp::create(b, loc, value, b.getBF16Type());
      if (layer >= 0)
        value.getDefiningOp()->setAttr(kLayerAttr, b.getI64IntegerAttr(layer));
    }
    params[name] = value;
  }

  /// Marks the ops built while it lives as ops of layer `l` (kLayerAttr).
  class LayerScope {
  public:
    LayerScope(OpBuilder &b, int64_t l)
        : b(b), block(b.getInsertionBlock()), layer(l),
          before(block->empty() ? nullptr : &block->back()) {}
    ~LayerScope() {
      auto it = before ? std::next(before->getIterator()) : block->begin();
      for (Operation &op : llvm::make_range(it, block->end()))
        op.setAttr(kLayerAttr, b.getI64IntegerAttr(layer));
    }

  private:
    OpBuilder &b;
    Block *block;
    int64_t layer;
    Operation *before;
  };

  Value buildGPT2(Value tokens, Value labels);
  Value buildLlama(Value tokens, Value labels);
  Value buildGPTNeoX(Value tokens, Value labels);

private:
  Value param(const Twine &name) {
    Value value = params.lookup(name.str());
    assert(value && "parameter not declared");
    return value;
  }

  /// x @ w (+ bias), with GPT-2's [in, out] or Llama's [out, in] weights.
  Value linear(Value x, const Twine &weight, bool transposed,
               std::optional<Twine> bias = std::nullopt) {
    Value y = MatmulOp::create(b, loc, x, param(weight), false, transposed);
    if (bias)
      y = AddOp::create(b, loc, y, param(*bias));
    return y;
  }

  Value dropout(Value x, double rate) {
    if (rate == 0.0)
      return x;
    return DropoutOp::create(b, loc, x.getType(), x, step,
                             b.getF64FloatAttr(rate),
                             b.getI64IntegerAttr(options.seed),
                             b.getI64IntegerAttr(nextDropoutKey++));
  }

  Value reshape(Value x, ArrayRef<int64_t> shape) {
    return ReshapeOp::create(b, loc, x, shape);
  }

  /// The box of `x` [B, S, H, D] at `offset` along the last dimension,
  /// `width` wide.
  Value lastDims(Value x, int64_t offset, int64_t width) {
    auto type = cast<RankedTensorType>(x.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape.back() = width;
    SmallVector<int64_t> offsets(shape.size(), 0);
    offsets.back() = offset;
    return SliceOp::create(b, loc, type.clone(shape), x,
                           b.getDenseI64ArrayAttr(offsets));
  }

  /// RoPE over the first `config.rotaryDim` dims of each head of `x`
  /// [B, S, H, D], the rest passed through (GPT-NeoX's partial rotary:
  /// the rotated part's frequencies are those of a head of rotaryDim).
  /// With Llama 3.1's frequency scaling when the config has one.
  Value rope(Value x) {
    int64_t d = cast<RankedTensorType>(x.getType()).getShape().back();
    const RopeScalingConfig &scaling = config.ropeScaling;
    auto scaled = [&](double value) {
      return scaling.factor == 0 ? FloatAttr() : b.getF64FloatAttr(value);
    };
    auto rotate = [&](Value part) -> Value {
      return RopeOp::create(
          b, loc, part, b.getF64FloatAttr(config.ropeTheta),
          scaled(scaling.factor), scaled(scaling.lowFreqFactor),
          scaled(scaling.highFreqFactor), scaled(scaling.originalMaxPositions));
    };
    if (config.rotaryDim == d)
      return rotate(x);
    if (config.rotaryDim == 0)
      return x;
    Value rotated = rotate(lastDims(x, 0, config.rotaryDim));
    Value passed = lastDims(x, config.rotaryDim, d - config.rotaryDim);
    return ConcatOp::create(b, loc, ValueRange{rotated, passed}, 3);
  }

  /// The MLP's activation.
  Value activate(Value x) {
    switch (config.activation) {
    case Activation::GeluTanh:
      return GeluOp::create(b, loc, x);
    case Activation::GeluErf:
      return GeluErfOp::create(b, loc, x);
    case Activation::Silu:
      return SiluOp::create(b, loc, x);
    }
    llvm_unreachable("unknown activation");
  }

  /// Causal attention; with `dropoutRate` > 0 it drops the probabilities
  /// (GPT-2's attn_dropout, Llama's attention_dropout) at the next site key.
  Value attention(Value q, Value k, Value v, double dropoutRate) {
    double scale = 1.0 / std::sqrt(static_cast<double>(config.headDim()));
    if (dropoutRate == 0.0)
      return AttentionOp::create(b, loc, q, k, v, /*causal=*/true, scale)
          .getOut();
    return AttentionOp::create(b, loc, q, k, v, /*causal=*/true, scale, step,
                               dropoutRate, options.seed, nextDropoutKey++)
        .getOut();
  }

  Value loss(Value hidden, Value labels, const Twine &head) {
    Value logits = linear(hidden, head, /*transposed=*/true);
    return CrossEntropyOp::create(b, loc, logits, labels);
  }

  OpBuilder &b;
  Location loc;
  const ModelConfig &config;
  const ImportOptions &options;
  int64_t batch, seq;
  Value step;
  llvm::StringMap<Value> params;
  int64_t nextDropoutKey = 0;
};

Value ForwardBuilder::buildGPT2(Value tokens, Value labels) {
  int64_t h = config.hidden, heads = config.numHeads, hd = config.headDim(),
          aw = config.attentionWidth();
  double eps = config.normEpsilon;
  double embdDrop = options.embdDropout.value_or(config.embdDropout);
  double residDrop = options.residDropout.value_or(config.residDropout);
  double attnDrop = options.attnDropout.value_or(config.attnDropout);
  auto layerNorm = [&](Value x, const std::string &prefix) {
    return LayerNormOp::create(b, loc, x, param(prefix + ".weight"),
                               param(prefix + ".bias"), b.getF64FloatAttr(eps));
  };

  // Token embedding plus the first `seq` rows of the learned positions.
  Value tok =
      EmbeddingOp::create(b, loc, param("transformer.wte.weight"), tokens);
  Value wpe = param("transformer.wpe.weight");
  auto posType = cast<RankedTensorType>(wpe.getType()).clone({seq, h});
  Value pos =
      SliceOp::create(b, loc, posType, wpe, b.getDenseI64ArrayAttr({0, 0}));
  Value x = dropout(AddOp::create(b, loc, tok, pos), embdDrop);

  for (int64_t l = 0; l < config.numLayers; ++l) {
    LayerScope scope(b, l);
    std::string p = "transformer.h." + std::to_string(l) + ".";
    // Attention: one fused projection, split into q, k, v, then heads.
    Value qkv = linear(layerNorm(x, p + "ln_1"), p + "attn.c_attn.weight",
                       false, p + "attn.c_attn.bias");
    auto partType =
        cast<RankedTensorType>(qkv.getType()).clone({batch, seq, aw});
    Value qkvParts[3];
    for (int64_t i = 0; i < 3; ++i)
      qkvParts[i] =
          reshape(SliceOp::create(b, loc, partType, qkv,
                                  b.getDenseI64ArrayAttr({0, 0, i * aw})),
                  {batch, seq, heads, hd});
    Value o = attention(qkvParts[0], qkvParts[1], qkvParts[2], attnDrop);
    Value a = linear(reshape(o, {batch, seq, aw}), p + "attn.c_proj.weight",
                     false, p + "attn.c_proj.bias");
    x = AddOp::create(b, loc, x, dropout(a, residDrop));
    // MLP.
    Value f = linear(layerNorm(x, p + "ln_2"), p + "mlp.c_fc.weight", false,
                     p + "mlp.c_fc.bias");
    Value m = linear(activate(f), p + "mlp.c_proj.weight", false,
                     p + "mlp.c_proj.bias");
    x = AddOp::create(b, loc, x, dropout(m, residDrop));
  }
  // The output projection is tied to the token embedding.
  return loss(layerNorm(x, "transformer.ln_f"), labels,
              "transformer.wte.weight");
}

Value ForwardBuilder::buildLlama(Value tokens, Value labels) {
  int64_t aw = config.attentionWidth(), hd = config.headDim();
  double eps = config.normEpsilon;
  double attnDrop = options.attnDropout.value_or(config.attnDropout);
  auto rmsNorm = [&](Value x, const std::string &weight) {
    return RMSNormOp::create(b, loc, x, param(weight), b.getF64FloatAttr(eps));
  };
  auto heads = [&](Value x, int64_t n) {
    return reshape(x, {batch, seq, n, hd});
  };
  // Qwen2's q, k and v projections have biases.
  auto projection = [&](Value x, const std::string &name) {
    if (!config.qkvBias)
      return linear(x, name + ".weight", true);
    return linear(x, name + ".weight", true, name + ".bias");
  };

  Value x =
      EmbeddingOp::create(b, loc, param("model.embed_tokens.weight"), tokens);
  for (int64_t l = 0; l < config.numLayers; ++l) {
    LayerScope scope(b, l);
    std::string p = config.layerPrefix(l);
    Value hn = rmsNorm(x, p + "input_layernorm.weight");
    Value q = heads(projection(hn, p + "self_attn.q_proj"), config.numHeads);
    Value k = heads(projection(hn, p + "self_attn.k_proj"), config.numKVHeads);
    Value v = heads(projection(hn, p + "self_attn.v_proj"), config.numKVHeads);
    q = rope(q);
    k = rope(k);
    Value o = reshape(attention(q, k, v, attnDrop), {batch, seq, aw});
    x = AddOp::create(b, loc, x,
                      linear(o, p + "self_attn.o_proj.weight", true));
    // SwiGLU MLP: down(silu(gate(x)) * up(x)).
    Value hm = rmsNorm(x, p + "post_attention_layernorm.weight");
    Value gate = activate(linear(hm, p + "mlp.gate_proj.weight", true));
    Value up = linear(hm, p + "mlp.up_proj.weight", true);
    Value down = linear(MulOp::create(b, loc, gate, up),
                        p + "mlp.down_proj.weight", true);
    x = AddOp::create(b, loc, x, down);
  }
  return loss(rmsNorm(x, "model.norm.weight"), labels,
              config.tieEmbeddings ? "model.embed_tokens.weight"
                                   : "lm_head.weight");
}

Value ForwardBuilder::buildGPTNeoX(Value tokens, Value labels) {
  int64_t aw = config.attentionWidth(), hd = config.headDim(),
          heads = config.numHeads;
  double attnDrop = options.attnDropout.value_or(config.attnDropout);
  auto layerNorm = [&](Value x, const std::string &prefix) {
    return LayerNormOp::create(b, loc, x, param(prefix + ".weight"),
                               param(prefix + ".bias"),
                               b.getF64FloatAttr(config.normEpsilon));
  };
  auto dense = [&](Value x, const std::string &name, bool bias) {
    if (!bias)
      return linear(x, name + ".weight", true);
    return linear(x, name + ".weight", true, name + ".bias");
  };

  Value x =
      EmbeddingOp::create(b, loc, param("gpt_neox.embed_in.weight"), tokens);
  for (int64_t l = 0; l < config.numLayers; ++l) {
    LayerScope scope(b, l);
    std::string p = config.layerPrefix(l);
    // query_key_value's output is [B, S, heads, 3 * head_dim]: each head's
    // q, k and v side by side.
    Value qkv = reshape(dense(layerNorm(x, p + "input_layernorm"),
                              p + "attention.query_key_value", config.qkvBias),
                        {batch, seq, heads, 3 * hd});
    Value q = rope(lastDims(qkv, 0, hd));
    Value k = rope(lastDims(qkv, hd, hd));
    Value v = lastDims(qkv, 2 * hd, hd);
    Value o = reshape(attention(q, k, v, attnDrop), {batch, seq, aw});
    Value a = dense(o, p + "attention.dense", config.qkvBias);
    auto mlp = [&](Value in) {
      Value up = activate(dense(layerNorm(in, p + "post_attention_layernorm"),
                                p + "mlp.dense_h_to_4h", true));
      return dense(up, p + "mlp.dense_4h_to_h", true);
    };
    // GPTNeoXLayer: mlp + attn + x in parallel, else x + attn first.
    if (config.parallelResidual) {
      x = AddOp::create(b, loc, AddOp::create(b, loc, mlp(x), a), x);
    } else {
      Value attended = AddOp::create(b, loc, a, x);
      x = AddOp::create(b, loc, mlp(attended), attended);
    }
  }
  return loss(layerNorm(x, "gpt_neox.final_layer_norm"), labels,
              config.tieEmbeddings ? "gpt_neox.embed_in.weight"
                                   : "embed_out.weight");
}

/// The most elements one activation may hold.
constexpr int64_t kMaxTensorElements = int64_t(1) << 40;

llvm::Error importError(const Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message.str());
}

} // namespace

llvm::Expected<OwningOpRef<ModuleOp>>
importModel(MLIRContext &context, const ModelConfig &config,
            const ImportOptions &options) {
  int64_t seq = options.seqLenFor(config);
  if (options.microBatch <= 0 || seq <= 0)
    return importError("micro-batch size and sequence length must be positive");
  // GPT-2 learns a table of positions; RoPE computes any position's
  // rotation, so a Llama runs longer sequences than it was trained on.
  if (seq > config.maxPositions && config.type == ModelType::GPT2)
    return importError("sequence length " + Twine(seq) +
                       " exceeds the model's " + Twine(config.maxPositions) +
                       " positions (a learned table; RoPE models take longer "
                       "sequences)");
  // The largest activations are [B, S, vocabulary] logits and
  // [B, S, intermediate] MLP values: each must stay a tensor Loom can
  // address (and every byte count derived from it inside int64).
  int64_t widest = std::max({config.vocab, config.intermediate,
                             config.attentionWidth(), config.hidden});
  std::optional<int64_t> batchTokens =
      llvm::checkedMul(options.microBatch, seq);
  std::optional<int64_t> elements =
      batchTokens ? llvm::checkedMul(*batchTokens, widest) : std::nullopt;
  if (!elements || *elements > kMaxTensorElements)
    return importError("micro-batch " + Twine(options.microBatch) + " x " +
                       Twine(seq) + " tokens x width " + Twine(widest) +
                       " is beyond what Loom handles (at most 2^" +
                       Twine(llvm::Log2_64(kMaxTensorElements)) +
                       " elements in one tensor)");
  // Loom's attention is causal over the whole sequence: a window that
  // cuts it would change the model.
  if (config.slidingWindow && seq > config.slidingWindow)
    return importError("sequence length " + Twine(seq) +
                       " exceeds the sliding window of " +
                       Twine(config.slidingWindow) +
                       " tokens (key \"sliding_window\"); Loom's attention "
                       "attends to the whole causal prefix");
  for (std::optional<double> rate :
       {options.embdDropout, options.residDropout, options.attnDropout})
    if (rate && !(*rate >= 0.0 && *rate < 1.0))
      return importError("dropout probabilities must be in [0, 1)");
  // The families other than GPT-2 have attention dropout only.
  bool usesDropout = options.attnDropout.value_or(config.attnDropout) > 0 ||
                     (config.type == ModelType::GPT2 &&
                      (options.embdDropout.value_or(config.embdDropout) > 0 ||
                       options.residDropout.value_or(config.residDropout) > 0));

  context.loadDialect<func::FuncDialect, LoomDialect>();
  Location loc = FileLineColLoc::get(&context, config.typeName(), 0, 0);
  OpBuilder b(&context);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());

  SmallVector<ParamSpec> specs = listParameters(config);
  SmallVector<Type> inputs;
  for (const ParamSpec &spec : specs)
    inputs.push_back(RankedTensorType::get(spec.shape, b.getF32Type()));
  auto idsType =
      RankedTensorType::get({options.microBatch, seq}, b.getI32Type());
  inputs.append({idsType, idsType});
  if (usesDropout)
    inputs.push_back(RankedTensorType::get({}, b.getI64Type()));
  auto lossType = RankedTensorType::get({}, b.getF32Type());
  auto func = func::FuncOp::create(b, loc, "forward",
                                   b.getFunctionType(inputs, {lossType}));
  for (auto [i, spec] : llvm::enumerate(specs)) {
    func.setArgAttr(i, kNameAttr, b.getStringAttr(spec.name));
    if (spec.layer >= 0)
      func.setArgAttr(i, kLayerAttr, b.getI64IntegerAttr(spec.layer));
  }
  func.setArgAttr(specs.size(), kNameAttr, b.getStringAttr("tokens"));
  func.setArgAttr(specs.size() + 1, kNameAttr, b.getStringAttr("labels"));
  if (usesDropout)
    func.setArgAttr(specs.size() + 2, kNameAttr, b.getStringAttr("step"));

  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  Value step = usesDropout ? entry->getArgument(specs.size() + 2) : Value();
  ForwardBuilder builder(b, loc, config, options, seq, step);
  for (auto [i, spec] : llvm::enumerate(specs))
    builder.addParam(spec.name, entry->getArgument(i), spec.layer);
  Value tokens = entry->getArgument(specs.size());
  Value labels = entry->getArgument(specs.size() + 1);
  Value loss =
      config.type == ModelType::GPT2      ? builder.buildGPT2(tokens, labels)
      : config.type == ModelType::GPTNeoX ? builder.buildGPTNeoX(tokens, labels)
                                          : builder.buildLlama(tokens, labels);
  func::ReturnOp::create(b, loc, loss);
  if (failed(verify(*module)))
    return importError("internal error: the imported module does not verify");
  return module;
}

} // namespace loom
