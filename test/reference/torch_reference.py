#!/usr/bin/python3
"""Independent PyTorch reference for one Loom training step.

Given a Hugging Face config.json (model_type "gpt2" -> GPT2LMHeadModel, or
"llama" -> LlamaForCausalLM), safetensors weights in HF layout and a Loom token
file, this computes for one micro-batch:

  * the mean next-token cross-entropy loss over all B*S positions,
  * the gradients of every parameter and their global L2 norm,
  * the parameters after one torch.optim.AdamW / torch.optim.SGD step
    (fresh optimizer state, so AdamW's bias-correction step is t = 1).

The models are written directly from the Hugging Face definitions, not from
Loom's code, as plain functions of a {HF parameter name: tensor} dict.
Dropout (embd_pdrop, resid_pdrop, attn_pdrop; Llama's attention_dropout, or
the --*-pdrop overrides) draws Loom's counter-based masks, so a step is
deterministic and equals Loom's: Philox4x32-10 of (step, element index) keyed
by (seed, site key), sites keyed 0, 1, ... in the order the model runs them
(see Dropout below). Dropout is applied where HF applies it: the embeddings,
the attention probabilities, and each residual branch.

Usage:
  /usr/bin/python3 torch_reference.py --config CONFIG.json --weights IN.safetensors
      --tokens DATA.tokens --micro-batch B --seq-len S [--step 0]
      --optimizer adamw|sgd --lr 1e-3 --beta1 0.9 --beta2 0.999 --eps 1e-8
      --weight-decay 0.01 [--dtype float32|float64]
      [--embd-pdrop P] [--resid-pdrop P] [--attn-pdrop P] [--seed N]
      --out-weights OUT.safetensors --out-json OUT.json [--out-grads G.safetensors]
"""

import argparse
import hashlib
import json
import math
import os
import sys
from collections import OrderedDict

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_io import read_safetensors, write_safetensors  # noqa: E402
from token_io import batch_for_step, read_tokens  # noqa: E402

DTYPES = {"float32": torch.float32, "float64": torch.float64}

# --------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------


def _require(cond, message):
    if not cond:
        raise NotImplementedError(message)


def gpt2_hparams(cfg):
    """Hyperparameters of a GPT2LMHeadModel config (HF defaults filled in)."""
    _require(cfg.get("activation_function", "gelu_new") == "gelu_new",
             "gpt2: only activation_function gelu_new is supported")
    _require(cfg.get("scale_attn_weights", True), "gpt2: scale_attn_weights must be true")
    _require(not cfg.get("scale_attn_by_inverse_layer_idx", False),
             "gpt2: scale_attn_by_inverse_layer_idx is not supported")
    _require(not cfg.get("add_cross_attention", False), "gpt2: cross attention not supported")
    _require(cfg.get("tie_word_embeddings", True), "gpt2: lm_head must be tied to wte")
    embd = cfg["n_embd"]
    return {"layers": cfg["n_layer"], "heads": cfg["n_head"], "embd": embd,
            "inner": cfg.get("n_inner") or 4 * embd, "vocab": cfg["vocab_size"],
            "positions": cfg["n_positions"], "eps": cfg.get("layer_norm_epsilon", 1e-5)}


def llama_hparams(cfg):
    """Hyperparameters of a LlamaForCausalLM config (HF defaults filled in)."""
    _require(cfg.get("hidden_act", "silu") == "silu", "llama: only hidden_act silu is supported")
    scaling = cfg.get("rope_scaling")
    if scaling:
        kind = scaling.get("rope_type", scaling.get("type"))
        _require(kind == "llama3", f"llama: rope_scaling type {kind!r} is not supported")
    _require(not cfg.get("attention_bias", False), "llama: attention_bias is not supported")
    _require(not cfg.get("mlp_bias", False), "llama: mlp_bias is not supported")
    heads = cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads") or heads
    _require(heads % kv_heads == 0, "llama: num_attention_heads % num_key_value_heads != 0")
    return {"layers": cfg["num_hidden_layers"], "heads": heads, "kv_heads": kv_heads,
            "embd": cfg["hidden_size"], "head_dim": cfg.get("head_dim") or cfg["hidden_size"] // heads,
            "inner": cfg["intermediate_size"], "vocab": cfg["vocab_size"],
            "eps": cfg.get("rms_norm_eps", 1e-6), "theta": cfg.get("rope_theta", 10000.0),
            "tied": cfg.get("tie_word_embeddings", False), "rope_scaling": scaling or None}


def hparams(cfg):
    kind = cfg.get("model_type")
    if kind == "gpt2":
        return gpt2_hparams(cfg)
    if kind == "llama":
        return llama_hparams(cfg)
    raise NotImplementedError(f"model_type {kind!r} (expected gpt2 or llama)")


def gpt2_param_specs(hp):
    """[(name, shape, kind)] in GPT2LMHeadModel state-dict order (lm_head tied)."""
    e, f = hp["embd"], hp["inner"]
    specs = [("transformer.wte.weight", (hp["vocab"], e), "embedding"),
             ("transformer.wpe.weight", (hp["positions"], e), "embedding")]
    for i in range(hp["layers"]):
        p = f"transformer.h.{i}."
        specs += [(p + "ln_1.weight", (e,), "norm_weight"), (p + "ln_1.bias", (e,), "norm_bias"),
                  (p + "attn.c_attn.weight", (e, 3 * e), "linear"), (p + "attn.c_attn.bias", (3 * e,), "bias"),
                  (p + "attn.c_proj.weight", (e, e), "linear"), (p + "attn.c_proj.bias", (e,), "bias"),
                  (p + "ln_2.weight", (e,), "norm_weight"), (p + "ln_2.bias", (e,), "norm_bias"),
                  (p + "mlp.c_fc.weight", (e, f), "linear"), (p + "mlp.c_fc.bias", (f,), "bias"),
                  (p + "mlp.c_proj.weight", (f, e), "linear"), (p + "mlp.c_proj.bias", (e,), "bias")]
    specs += [("transformer.ln_f.weight", (e,), "norm_weight"),
              ("transformer.ln_f.bias", (e,), "norm_bias")]
    return specs


def llama_param_specs(hp):
    """[(name, shape, kind)] in LlamaForCausalLM state-dict order.

    HF's LlamaDecoderLayer registers self_attn, mlp, input_layernorm,
    post_attention_layernorm in that order, so that is the per-layer order.
    """
    e, f, d = hp["embd"], hp["inner"], hp["head_dim"]
    q, kv = hp["heads"] * d, hp["kv_heads"] * d
    specs = [("model.embed_tokens.weight", (hp["vocab"], e), "embedding")]
    for i in range(hp["layers"]):
        p = f"model.layers.{i}."
        specs += [(p + "self_attn.q_proj.weight", (q, e), "linear"),
                  (p + "self_attn.k_proj.weight", (kv, e), "linear"),
                  (p + "self_attn.v_proj.weight", (kv, e), "linear"),
                  (p + "self_attn.o_proj.weight", (e, q), "linear"),
                  (p + "mlp.gate_proj.weight", (f, e), "linear"),
                  (p + "mlp.up_proj.weight", (f, e), "linear"),
                  (p + "mlp.down_proj.weight", (e, f), "linear"),
                  (p + "input_layernorm.weight", (e,), "norm_weight"),
                  (p + "post_attention_layernorm.weight", (e,), "norm_weight")]
    specs.append(("model.norm.weight", (e,), "norm_weight"))
    if not hp["tied"]:
        specs.append(("lm_head.weight", (hp["vocab"], e), "linear"))
    return specs


def param_specs(cfg):
    """[(HF name, shape, kind)] of the trainable parameters, HF order."""
    hp = hparams(cfg)
    return gpt2_param_specs(hp) if cfg["model_type"] == "gpt2" else llama_param_specs(hp)


# --------------------------------------------------------------------------
# Dropout: Loom's counter-based masks (runtime/include/loom/DropoutMask.h,
# written again here from Random123's definition of Philox4x32-10)
# --------------------------------------------------------------------------

_U32 = np.uint64(0xFFFFFFFF)


def philox4x32_10(counter, key0, key1):
    """Random123's philox4x32 with 10 rounds on numpy arrays of 32-bit words
    (held in uint64, so the 32x32 -> 64-bit products are exact)."""
    c0, c1, c2, c3 = (np.asarray(w, dtype=np.uint64) & _U32 for w in counter)
    k0, k1 = np.uint64(key0) & _U32, np.uint64(key1) & _U32
    for r in range(10):
        if r > 0:
            k0 = (k0 + np.uint64(0x9E3779B9)) & _U32
            k1 = (k1 + np.uint64(0xBB67AE85)) & _U32
        p0 = np.uint64(0xD2511F53) * c0
        p1 = np.uint64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ k0, p1 & _U32,
                          (p0 >> np.uint64(32)) ^ c3 ^ k1, p0 & _U32)
    return c0, c1, c2, c3


def dropout_keeps(seed, key, step, shape, rate):
    """Bool tensor of `shape`: element i (row-major) is kept iff the first word
    of Philox(counter = {lo step, hi step, lo i, hi i}, key = {lo seed, lo key}),
    read as a number in [0, 1), is at least `rate`."""
    index = np.arange(math.prod(shape), dtype=np.uint64)
    step = np.uint64(step % 2**64)
    r0 = philox4x32_10((step & _U32, step >> np.uint64(32), index & _U32, index >> np.uint64(32)),
                       seed % 2**64, key % 2**64)[0]
    return torch.from_numpy(r0.astype(np.float64) * (1.0 / 4294967296.0) >= rate).reshape(shape)


class Dropout:
    """Dropout rates per site kind ("embd", "resid", "attn"), the seed and
    Loom's 1-based step. `sites()` gives the function one forward pass calls
    at each site in order; a site with rate 0 takes no key."""

    def __init__(self, rates, seed, step):
        self.rates, self.seed, self.step = rates, seed, step

    def sites(self):
        next_key = [0]

        def drop(x, kind):
            rate = self.rates.get(kind, 0.0)
            if rate == 0.0:
                return x
            keep = dropout_keeps(self.seed, next_key[0], self.step, tuple(x.shape), rate)
            next_key[0] += 1
            return x * (keep.to(x.dtype) * (1.0 / (1.0 - rate)))

        return drop


def no_dropout(x, kind):
    return x


def dropout_rates(cfg, embd=None, resid=None, attn=None):
    """The config's dropout rates (HF defaults) with overrides, as loom-import
    reads them: GPT-2 has all three, Llama only attention_dropout."""
    if cfg["model_type"] == "gpt2":
        rates = {"embd": cfg.get("embd_pdrop", 0.1), "resid": cfg.get("resid_pdrop", 0.1),
                 "attn": cfg.get("attn_pdrop", 0.1)}
        overrides = {"embd": embd, "resid": resid, "attn": attn}
    else:
        rates, overrides = {"attn": cfg.get("attention_dropout", 0.0)}, {"attn": attn}
    rates.update({k: v for k, v in overrides.items() if v is not None})
    return rates


# --------------------------------------------------------------------------
# Weights
# --------------------------------------------------------------------------

_BUFFER_SUFFIXES = (".attn.bias", ".attn.masked_bias", "rotary_emb.inv_freq")


def canonical_name(model_type, name):
    """GPT-2 checkpoints may omit the `transformer.` prefix (GPT2Model)."""
    if model_type == "gpt2" and not name.startswith(("transformer.", "lm_head.")):
        return "transformer." + name
    return name


def _tied_copy_name(cfg):
    """Name of a tied lm_head copy that files may carry, or None."""
    tied = cfg["model_type"] == "gpt2" or hparams(cfg)["tied"]
    return "lm_head.weight" if tied else None


def load_params(cfg, path, dtype):
    """Reads HF weights -> OrderedDict {name: leaf tensor requiring grad}."""
    stored, _ = read_safetensors(path)
    stored = {canonical_name(cfg["model_type"], k): v for k, v in stored.items()
              if not k.endswith(_BUFFER_SUFFIXES)}
    stored.pop(_tied_copy_name(cfg), None)
    specs = param_specs(cfg)
    missing = [n for n, _, _ in specs if n not in stored]
    unknown = sorted(set(stored) - {n for n, _, _ in specs})
    if missing or unknown:
        raise ValueError(f"weights do not match config: missing {missing}, unexpected {unknown}")
    params = OrderedDict()
    for name, shape, _ in specs:
        if tuple(stored[name].shape) != shape:
            raise ValueError(f"{name}: shape {tuple(stored[name].shape)}, config says {shape}")
        params[name] = stored[name].to(dtype).clone().requires_grad_(True)
    return params


# --------------------------------------------------------------------------
# Shared pieces
# --------------------------------------------------------------------------


def split_heads(x, heads, head_dim):
    """[B, S, heads*head_dim] -> [B, heads, S, head_dim]."""
    b, s, _ = x.shape
    return x.view(b, s, heads, head_dim).transpose(1, 2)


def merge_heads(x):
    """[B, heads, S, head_dim] -> [B, S, heads*head_dim]."""
    b, h, s, d = x.shape
    return x.transpose(1, 2).reshape(b, s, h * d)


def causal_attention(q, k, v, drop=no_dropout):
    """dropout(softmax(q k^T / sqrt(head_dim), causal)) v, all [B, H, S, D]."""
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    s = q.shape[-2]
    future = torch.ones(s, s, dtype=torch.bool).triu(1)
    scores = scores.masked_fill(future, float("-inf"))
    return torch.matmul(drop(torch.softmax(scores, dim=-1), "attn"), v)


# --------------------------------------------------------------------------
# GPT-2 (GPT2LMHeadModel)
# --------------------------------------------------------------------------


def gelu_new(x):
    """HF `gelu_new`: the tanh approximation of GELU."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def conv1d(x, weight, bias):
    """HF Conv1D: weight stored [in, out], y = x W + b."""
    return torch.matmul(x, weight) + bias


def gpt2_layer_norm(x, p, name, hp):
    return F.layer_norm(x, (hp["embd"],), p[name + ".weight"], p[name + ".bias"], hp["eps"])


def gpt2_attention(x, p, prefix, hp, drop):
    e, h = hp["embd"], hp["heads"]
    qkv = conv1d(x, p[prefix + "c_attn.weight"], p[prefix + "c_attn.bias"])
    q, k, v = (split_heads(t, h, e // h) for t in qkv.split(e, dim=-1))
    out = merge_heads(causal_attention(q, k, v, drop))
    return conv1d(out, p[prefix + "c_proj.weight"], p[prefix + "c_proj.bias"])


def gpt2_mlp(x, p, prefix):
    hidden = gelu_new(conv1d(x, p[prefix + "c_fc.weight"], p[prefix + "c_fc.bias"]))
    return conv1d(hidden, p[prefix + "c_proj.weight"], p[prefix + "c_proj.bias"])


def gpt2_logits(p, tokens, hp, drop=no_dropout):
    """tokens [B, S] -> logits [B, S, vocab]; lm_head is wte (tied)."""
    s = tokens.shape[1]
    if s > hp["positions"]:
        raise ValueError(f"seq_len {s} > n_positions {hp['positions']}")
    wte = p["transformer.wte.weight"]
    h = drop(F.embedding(tokens, wte) + p["transformer.wpe.weight"][:s], "embd")
    for i in range(hp["layers"]):
        pre = f"transformer.h.{i}."
        a = gpt2_attention(gpt2_layer_norm(h, p, pre + "ln_1", hp), p, pre + "attn.", hp, drop)
        h = h + drop(a, "resid")
        m = gpt2_mlp(gpt2_layer_norm(h, p, pre + "ln_2", hp), p, pre + "mlp.")
        h = h + drop(m, "resid")
    h = gpt2_layer_norm(h, p, "transformer.ln_f", hp)
    return torch.matmul(h, wte.t())


# --------------------------------------------------------------------------
# Llama (LlamaForCausalLM)
# --------------------------------------------------------------------------


def rms_norm(x, weight, eps):
    """LlamaRMSNorm, in the working dtype: x * rsqrt(mean(x^2) + eps) * w."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def llama3_inv_freq(inv_freq, scaling):
    """transformers' _compute_llama3_parameters: high frequencies kept, low
    ones divided by the factor, the band between blended."""
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old_context = scaling["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old_context / low, old_context / high
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_context / wavelen - low) / (high - low)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return torch.where(medium, blended, scaled)


def rope_cos_sin(seq_len, head_dim, theta, dtype, scaling=None):
    """cos/sin tables [S, D]; angle(s, i) = s * theta^(-2i/D), halves repeated."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).to(dtype) / head_dim))
    if scaling:
        inv_freq = llama3_inv_freq(inv_freq, scaling)
    angles = torch.outer(torch.arange(seq_len, dtype=dtype), inv_freq)
    emb = torch.cat((angles, angles), dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    """HF rotate_half: [x1, x2] -> [-x2, x1] on the last dim."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x, cos, sin):
    """Rotates pairs (x[i], x[i + D/2]) by the position's angle; x [B, H, S, D]."""
    return x * cos + rotate_half(x) * sin


def repeat_kv(x, groups):
    """HF repeat_kv: kv head j serves query heads j*groups .. j*groups+groups-1."""
    return x.repeat_interleave(groups, dim=1)


def llama_attention(x, p, prefix, hp, cos, sin, drop):
    d, h, kvh = hp["head_dim"], hp["heads"], hp["kv_heads"]
    q = split_heads(F.linear(x, p[prefix + "q_proj.weight"]), h, d)
    k = split_heads(F.linear(x, p[prefix + "k_proj.weight"]), kvh, d)
    v = split_heads(F.linear(x, p[prefix + "v_proj.weight"]), kvh, d)
    q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    out = causal_attention(q, repeat_kv(k, h // kvh), repeat_kv(v, h // kvh), drop)
    return F.linear(merge_heads(out), p[prefix + "o_proj.weight"])


def llama_mlp(x, p, prefix):
    gate = F.silu(F.linear(x, p[prefix + "gate_proj.weight"]))
    return F.linear(gate * F.linear(x, p[prefix + "up_proj.weight"]), p[prefix + "down_proj.weight"])


def llama_logits(p, tokens, hp, drop=no_dropout):
    """tokens [B, S] -> logits [B, S, vocab]."""
    embed = p["model.embed_tokens.weight"]
    h = F.embedding(tokens, embed)
    cos, sin = rope_cos_sin(tokens.shape[1], hp["head_dim"], hp["theta"], h.dtype,
                            hp.get("rope_scaling"))
    for i in range(hp["layers"]):
        pre = f"model.layers.{i}."
        x = rms_norm(h, p[pre + "input_layernorm.weight"], hp["eps"])
        h = h + llama_attention(x, p, pre + "self_attn.", hp, cos, sin, drop)
        x = rms_norm(h, p[pre + "post_attention_layernorm.weight"], hp["eps"])
        h = h + llama_mlp(x, p, pre + "mlp.")
    h = rms_norm(h, p["model.norm.weight"], hp["eps"])
    return F.linear(h, p.get("lm_head.weight", embed))


# --------------------------------------------------------------------------
# Training step
# --------------------------------------------------------------------------


def logits_fn(cfg, params, tokens, dropout=None):
    """Logits of the model; `dropout` (a Dropout, or None for none) draws
    fresh site keys from 0 on every call."""
    hp = hparams(cfg)
    model = gpt2_logits if cfg["model_type"] == "gpt2" else llama_logits
    return model(params, tokens, hp, dropout.sites() if dropout else no_dropout)


def loss_fn(cfg, params, tokens, labels, dropout=None):
    """Mean cross-entropy over all B*S positions (labels already shifted)."""
    vocab = hparams(cfg)["vocab"]
    for name, ids in (("token", tokens), ("label", labels)):
        if int(ids.min()) < 0 or int(ids.max()) >= vocab:
            raise ValueError(f"{name} ids must lie in [0, {vocab})")
    logits = logits_fn(cfg, params, tokens, dropout)
    return F.cross_entropy(logits.reshape(-1, vocab), labels.reshape(-1))


def forward_backward(cfg, params, tokens, labels, dropout=None):
    """Returns (loss float, OrderedDict of gradients); also sets .grad."""
    for p in params.values():
        p.grad = None
    loss = loss_fn(cfg, params, tokens, labels, dropout)
    loss.backward()
    for p in params.values():
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    return loss.item(), OrderedDict((n, p.grad.detach().clone()) for n, p in params.items())


def make_optimizer(params, settings):
    """torch.optim.AdamW / SGD over ALL parameters (biases and norms too)."""
    plist = list(params.values())
    if settings["optimizer"] == "adamw":
        return torch.optim.AdamW(plist, lr=settings["lr"], betas=(settings["beta1"], settings["beta2"]),
                                 eps=settings["eps"], weight_decay=settings["weight_decay"],
                                 amsgrad=False, foreach=False)
    if settings["optimizer"] == "sgd":
        return torch.optim.SGD(plist, lr=settings["lr"], weight_decay=settings["weight_decay"],
                               foreach=False)
    raise ValueError(f"unknown optimizer {settings['optimizer']!r}")


def global_grad_norm(grads):
    """Global L2 norm of all gradients (accumulated in float64)."""
    return math.sqrt(sum(float(g.double().pow(2).sum()) for g in grads.values()))


def grads_sha256(grads):
    """sha256 of the gradients as float32 little-endian bytes, HF order."""
    digest = hashlib.sha256()
    for g in grads.values():
        digest.update(g.detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes())
    return digest.hexdigest()


def train_step(cfg, params, tokens, labels, settings, dropout=None):
    """One step in place on `params`; returns (loss, grads)."""
    loss, grads = forward_backward(cfg, params, tokens, labels, dropout)
    make_optimizer(params, settings).step()
    return loss, grads


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True, help="HF config.json (gpt2 or llama)")
    ap.add_argument("--weights", required=True, help="input safetensors (HF names)")
    ap.add_argument("--tokens", required=True, help="Loom LOOMTOKS token file")
    ap.add_argument("--micro-batch", type=int, required=True)
    ap.add_argument("--seq-len", type=int, required=True)
    ap.add_argument("--step", type=int, default=0,
                    help="selects the batch (optimizer state is fresh); dropout uses Loom's 1-based step + 1")
    ap.add_argument("--optimizer", choices=("adamw", "sgd"), default="adamw")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.999)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    ap.add_argument("--embd-pdrop", type=float, help="override the config's embd_pdrop")
    ap.add_argument("--resid-pdrop", type=float, help="override the config's resid_pdrop")
    ap.add_argument("--attn-pdrop", type=float, help="override attn_pdrop / attention_dropout")
    ap.add_argument("--seed", type=int, default=0, help="seed of the dropout masks (loom-import --seed)")
    ap.add_argument("--out-weights", required=True, help="updated parameters, F32 safetensors")
    ap.add_argument("--out-json", required=True, help='{"loss", "grad_norm", "grads_sha"}')
    ap.add_argument("--out-grads", help="optional: gradients as F32 safetensors")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    with open(args.config) as f:
        cfg = json.load(f)
    params = load_params(cfg, args.weights, DTYPES[args.dtype])
    ids = read_tokens(args.tokens)
    tokens, labels = (torch.from_numpy(a) for a in
                      batch_for_step(ids, args.step, args.micro_batch, args.seq_len))
    settings = {k: getattr(args, k) for k in ("optimizer", "lr", "beta1", "beta2", "eps", "weight_decay")}
    # loom-run's step s (1-based) trains on batch s - 1 and keys dropout by s.
    dropout = Dropout(dropout_rates(cfg, args.embd_pdrop, args.resid_pdrop, args.attn_pdrop),
                      args.seed, args.step + 1)
    loss, grads = train_step(cfg, params, tokens, labels, settings, dropout)
    result = {"loss": loss, "grad_norm": global_grad_norm(grads), "grads_sha": grads_sha256(grads)}
    write_safetensors(args.out_weights, OrderedDict((n, p.detach()) for n, p in params.items()))
    if args.out_grads:
        write_safetensors(args.out_grads, grads)
    with open(args.out_json, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(f"loss {loss:.9g}  grad_norm {result['grad_norm']:.9g}")


if __name__ == "__main__":
    main()
