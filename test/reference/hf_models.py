#!/usr/bin/python3
"""Tiny causal language models written after the Hugging Face definitions.

GPT2LMHeadModel, LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM and
GPTNeoXForCausalLM as torch.nn.Modules, module for module and op for op as
transformers writes them in eager mode (attention as matmul, scale, causal
mask, softmax, matmul; rotary embeddings with rotate_half; GPT-2's Conv1D
and torch.where mask, Llama's additive mask built with triu; grouped-query
heads by repeat_kv; GPT-NeoX's fused query_key_value, partial rotary and
parallel residual), so that their state dicts carry Hugging Face's names
and torch.onnx.export writes the graphs a user's Hugging Face model gives.
They are built from a config.json (the keys loom-import reads) and are
independent of Loom's code: the reference the ONNX importer and the config
importer are checked against.

Commands:
  init    --config C.json --seed N --out-weights W.safetensors
      random weights (see build()) in state-dict order, a shared weight once.
  export  --config C.json --weights W.safetensors --out M.onnx [--dynamic]
          [--no-fold] [--loss] [--opset 17] --micro-batch B --seq-len S
      torch.onnx.export of the model with the weights W. Debian's torch 1.13
      has the TorchScript exporter only (torch.onnx.dynamo_export and
      torch.export came with 2.0): opset 17 by default. --dynamic marks
      batch and sequence dynamic axes; --no-fold turns off the exporter's
      constant folding; --loss exports the mean cross-entropy (labels as a
      second input) instead of logits.
  train   --config C.json (--weights W.safetensors | --seed N --out-init W)
          --tokens T.tokens --micro-batch B --seq-len S --steps K
          [AdamW settings] --out-json L.jsonl --out-weights W2.safetensors
          [--export M.onnx] [--export-dynamic MD.onnx] [--dynamic]
          [--no-fold] [--loss]
      K AdamW steps (torch.optim.AdamW, one optimizer across the steps) on
      Loom's batches of the token file, from the weights W (or random ones
      drawn from --seed and written to --out-init); writes one {"loss",
      "step"} line per step and the final parameters. --export also exports
      the initial model as `export` does, --export-dynamic with dynamic axes
      (one Python start for the lot).
"""

import argparse
import json
import math
import os
import sys
from collections import OrderedDict

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_io import read_safetensors, write_safetensors  # noqa: E402
from token_io import batch_for_step, read_tokens  # noqa: E402

# --------------------------------------------------------------------------
# Shared pieces (transformers' activations.py, modeling_llama.py)
# --------------------------------------------------------------------------


class NewGELUActivation(nn.Module):
    """GPT-2's gelu_new: the tanh approximation, written out."""

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class GELUActivation(nn.Module):
    """GPT-NeoX's gelu: the exact GELU."""

    def forward(self, x):
        return F.gelu(x)


ACTIVATIONS = {"gelu_new": NewGELUActivation, "gelu_pytorch_tanh": NewGELUActivation,
               "gelu": GELUActivation, "silu": nn.SiLU}


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    """Rotates the leading cos.shape[-1] dims of every head (GPT-NeoX's
    partial rotary passes the rest through), q and k [B, H, S, D]."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    rotary_dim = cos.shape[-1]
    q_rot, q_pass = q[..., :rotary_dim], q[..., rotary_dim:]
    k_rot, k_pass = k[..., :rotary_dim], k[..., rotary_dim:]
    q_embed = (q_rot * cos) + (rotate_half(q_rot) * sin)
    k_embed = (k_rot * cos) + (rotate_half(k_rot) * sin)
    if q_pass.shape[-1] == 0:
        return q_embed, k_embed
    return torch.cat([q_embed, q_pass], dim=-1), torch.cat([k_embed, k_pass], dim=-1)


class RotaryEmbedding(nn.Module):
    """LlamaRotaryEmbedding: cos/sin [B, S, dim] of the positions."""

    def __init__(self, dim, base):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def eager_attention(query, key, value, attention_mask, scaling):
    """transformers' eager_attention_forward (no dropout in eval)."""
    attn_weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    causal_mask = attention_mask[:, :, :, : key.shape[-2]]
    attn_weights = attn_weights + causal_mask
    attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
    attn_output = torch.matmul(attn_weights, value)
    return attn_output.transpose(1, 2).contiguous()


def causal_mask(input_tensor, sliding_window=None):
    """LlamaModel._update_causal_mask without a padding mask: 0 where a
    query may attend, the dtype's minimum elsewhere; [B, 1, S, S]. With a
    sliding window (Mistral, Qwen2), keys `window` or more positions back
    are masked too."""
    dtype = input_tensor.dtype
    batch, sequence_length = input_tensor.shape[0], input_tensor.shape[1]
    min_dtype = torch.finfo(dtype).min
    cache_position = torch.arange(0, sequence_length)
    mask = torch.full((sequence_length, sequence_length), fill_value=min_dtype, dtype=dtype)
    diagonal_attend_mask = torch.arange(sequence_length) > cache_position.reshape(-1, 1)
    if sliding_window is not None:
        diagonal_attend_mask = diagonal_attend_mask | (torch.arange(sequence_length) <= (cache_position.reshape(-1, 1) - sliding_window))
    mask *= diagonal_attend_mask
    return mask[None, None, :, :].expand(batch, 1, -1, -1), cache_position.unsqueeze(0)


def cross_entropy(logits, labels):
    """Mean next-token cross-entropy (labels already shifted)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


# --------------------------------------------------------------------------
# GPT-2 (modeling_gpt2.py)
# --------------------------------------------------------------------------


class Conv1D(nn.Module):
    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


class GPT2Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        n_pos, self.embed_dim = cfg["n_positions"], cfg["n_embd"]
        self.register_buffer("bias", torch.tril(torch.ones((n_pos, n_pos), dtype=torch.bool)).view(1, 1, n_pos, n_pos),
                             persistent=False)
        self.num_heads = cfg["n_head"]
        self.head_dim = self.embed_dim // self.num_heads
        self.split_size = self.embed_dim
        self.c_attn = Conv1D(3 * self.embed_dim, self.embed_dim)
        self.c_proj = Conv1D(self.embed_dim, self.embed_dim)

    def _attn(self, query, key, value):
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        attn_weights = attn_weights / torch.full([], value.size(-1) ** 0.5, dtype=attn_weights.dtype)
        query_length, key_length = query.size(-2), key.size(-2)
        causal = self.bias[:, :, key_length - query_length: key_length, :key_length]
        mask_value = torch.full([], torch.finfo(attn_weights.dtype).min, dtype=attn_weights.dtype)
        attn_weights = torch.where(causal, attn_weights.to(attn_weights.dtype), mask_value)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        return torch.matmul(attn_weights.type(value.dtype), value)

    def _split_heads(self, tensor):
        new_shape = tensor.size()[:-1] + (self.num_heads, self.head_dim)
        return tensor.view(new_shape).permute(0, 2, 1, 3)

    def _merge_heads(self, tensor):
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        return tensor.view(tensor.size()[:-2] + (self.num_heads * self.head_dim,))

    def forward(self, hidden_states):
        query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2)
        query, key, value = self._split_heads(query), self._split_heads(key), self._split_heads(value)
        return self.c_proj(self._merge_heads(self._attn(query, key, value)))


class GPT2MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        embed, inner = cfg["n_embd"], cfg.get("n_inner") or 4 * cfg["n_embd"]
        self.c_fc = Conv1D(inner, embed)
        self.c_proj = Conv1D(embed, inner)
        self.act = ACTIVATIONS[cfg.get("activation_function", "gelu_new")]()

    def forward(self, x):
        return self.c_proj(self.act(self.c_fc(x)))


class GPT2Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        eps = cfg.get("layer_norm_epsilon", 1e-5)
        self.ln_1 = nn.LayerNorm(cfg["n_embd"], eps=eps)
        self.attn = GPT2Attention(cfg)
        self.ln_2 = nn.LayerNorm(cfg["n_embd"], eps=eps)
        self.mlp = GPT2MLP(cfg)

    def forward(self, hidden_states):
        hidden_states = self.attn(self.ln_1(hidden_states)) + hidden_states
        return hidden_states + self.mlp(self.ln_2(hidden_states))


class GPT2Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.wte = nn.Embedding(cfg["vocab_size"], cfg["n_embd"])
        self.wpe = nn.Embedding(cfg["n_positions"], cfg["n_embd"])
        self.h = nn.ModuleList([GPT2Block(cfg) for _ in range(cfg["n_layer"])])
        self.ln_f = nn.LayerNorm(cfg["n_embd"], eps=cfg.get("layer_norm_epsilon", 1e-5))

    def forward(self, input_ids):
        position_ids = torch.arange(0, input_ids.size(-1), dtype=torch.long).unsqueeze(0)
        hidden_states = self.wte(input_ids) + self.wpe(position_ids)
        for block in self.h:
            hidden_states = block(hidden_states)
        return self.ln_f(hidden_states)


class GPT2LMHeadModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.transformer = GPT2Model(cfg)
        self.lm_head = nn.Linear(cfg["n_embd"], cfg["vocab_size"], bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied

    def forward(self, input_ids):
        return self.lm_head(self.transformer(input_ids))


# --------------------------------------------------------------------------
# Llama, Qwen2, Mistral (modeling_llama.py, modeling_qwen2.py,
# modeling_mistral.py: one decoder, q/k/v biases for Qwen2, a sliding
# window for Mistral)
# --------------------------------------------------------------------------


class RMSNorm(nn.Module):
    def __init__(self, hidden_size, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


def llama_head_dim(cfg):
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


class LlamaAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        hidden = cfg["hidden_size"]
        self.head_dim = llama_head_dim(cfg)
        self.num_heads = cfg["num_attention_heads"]
        self.num_key_value_heads = cfg.get("num_key_value_heads") or self.num_heads
        self.num_key_value_groups = self.num_heads // self.num_key_value_heads
        self.scaling = self.head_dim ** -0.5
        bias = cfg["model_type"] == "qwen2"
        self.q_proj = nn.Linear(hidden, self.num_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(hidden, self.num_key_value_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(hidden, self.num_key_value_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, hidden, bias=False)

    def forward(self, hidden_states, position_embeddings, attention_mask):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        attn_output = eager_attention(query_states, key_states, value_states, attention_mask, self.scaling)
        return self.o_proj(attn_output.reshape(*input_shape, -1).contiguous())


class LlamaMLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        hidden, inter = cfg["hidden_size"], cfg["intermediate_size"]
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)
        self.act_fn = ACTIVATIONS[cfg.get("hidden_act", "silu")]()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        eps = cfg.get("rms_norm_eps", 1e-6)
        self.self_attn = LlamaAttention(cfg)
        self.mlp = LlamaMLP(cfg)
        self.input_layernorm = RMSNorm(cfg["hidden_size"], eps)
        self.post_attention_layernorm = RMSNorm(cfg["hidden_size"], eps)

    def forward(self, hidden_states, position_embeddings, attention_mask):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states = self.self_attn(hidden_states, position_embeddings, attention_mask)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        return residual + hidden_states


def sliding_window(cfg):
    if cfg["model_type"] == "mistral":
        return cfg.get("sliding_window", 4096)
    if cfg["model_type"] == "qwen2" and cfg.get("use_sliding_window", False):
        return cfg.get("sliding_window", 4096)
    return None


class LlamaModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = nn.ModuleList([LlamaDecoderLayer(cfg) for _ in range(cfg["num_hidden_layers"])])
        self.norm = RMSNorm(cfg["hidden_size"], cfg.get("rms_norm_eps", 1e-6))
        self.rotary_emb = RotaryEmbedding(llama_head_dim(cfg), cfg.get("rope_theta", 10000.0))
        self.sliding_window = sliding_window(cfg)

    def forward(self, input_ids):
        hidden_states = self.embed_tokens(input_ids)
        mask, position_ids = causal_mask(hidden_states, self.sliding_window)
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        for layer in self.layers:
            hidden_states = layer(hidden_states, position_embeddings, mask)
        return self.norm(hidden_states)


class LlamaForCausalLM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.model = LlamaModel(cfg)
        self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)
        if cfg.get("tie_word_embeddings", False):
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, input_ids):
        return self.lm_head(self.model(input_ids)).float()


# --------------------------------------------------------------------------
# GPT-NeoX (modeling_gpt_neox.py)
# --------------------------------------------------------------------------


class GPTNeoXAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        hidden = cfg["hidden_size"]
        self.num_attention_heads = cfg["num_attention_heads"]
        self.head_size = hidden // self.num_attention_heads
        self.scaling = self.head_size ** -0.5
        bias = cfg.get("attention_bias", True)
        self.query_key_value = nn.Linear(hidden, 3 * hidden, bias=bias)
        self.dense = nn.Linear(hidden, hidden, bias=bias)

    def forward(self, hidden_states, attention_mask, position_embeddings):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, 3 * self.head_size)
        qkv = self.query_key_value(hidden_states).view(hidden_shape).transpose(1, 2)
        query_states, key_states, value_states = qkv.chunk(3, dim=-1)
        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        attn_output = eager_attention(query_states, key_states, value_states, attention_mask, self.scaling)
        return self.dense(attn_output.reshape(*input_shape, -1).contiguous())


class GPTNeoXMLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.dense_h_to_4h = nn.Linear(cfg["hidden_size"], cfg["intermediate_size"])
        self.dense_4h_to_h = nn.Linear(cfg["intermediate_size"], cfg["hidden_size"])
        self.act = ACTIVATIONS[cfg.get("hidden_act", "gelu")]()

    def forward(self, hidden_states):
        return self.dense_4h_to_h(self.act(self.dense_h_to_4h(hidden_states)))


class GPTNeoXLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        eps = cfg.get("layer_norm_eps", 1e-5)
        self.use_parallel_residual = cfg.get("use_parallel_residual", True)
        self.input_layernorm = nn.LayerNorm(cfg["hidden_size"], eps=eps)
        self.post_attention_layernorm = nn.LayerNorm(cfg["hidden_size"], eps=eps)
        self.attention = GPTNeoXAttention(cfg)
        self.mlp = GPTNeoXMLP(cfg)

    def forward(self, hidden_states, attention_mask, position_embeddings):
        attn_output = self.attention(self.input_layernorm(hidden_states), attention_mask, position_embeddings)
        if self.use_parallel_residual:
            mlp_output = self.mlp(self.post_attention_layernorm(hidden_states))
            return mlp_output + attn_output + hidden_states
        attn_output = attn_output + hidden_states
        mlp_output = self.mlp(self.post_attention_layernorm(attn_output))
        return mlp_output + attn_output


class GPTNeoXModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_in = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = nn.ModuleList([GPTNeoXLayer(cfg) for _ in range(cfg["num_hidden_layers"])])
        self.final_layer_norm = nn.LayerNorm(cfg["hidden_size"], eps=cfg.get("layer_norm_eps", 1e-5))
        head_size = cfg["hidden_size"] // cfg["num_attention_heads"]
        rotary_ndims = int(head_size * cfg.get("rotary_pct", 0.25))
        base = cfg.get("rope_theta", cfg.get("rotary_emb_base", 10000))
        self.rotary_emb = RotaryEmbedding(rotary_ndims, base)

    def forward(self, input_ids):
        hidden_states = self.embed_in(input_ids)
        mask, position_ids = causal_mask(hidden_states)
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        for layer in self.layers:
            hidden_states = layer(hidden_states, mask, position_embeddings)
        return self.final_layer_norm(hidden_states)


class GPTNeoXForCausalLM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.gpt_neox = GPTNeoXModel(cfg)
        self.embed_out = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)
        if cfg.get("tie_word_embeddings", False):
            self.embed_out.weight = self.gpt_neox.embed_in.weight

    def forward(self, input_ids):
        return self.embed_out(self.gpt_neox(input_ids))


# --------------------------------------------------------------------------
# Building, weights, export, training
# --------------------------------------------------------------------------

MODELS = {"gpt2": GPT2LMHeadModel, "llama": LlamaForCausalLM, "qwen2": LlamaForCausalLM,
          "mistral": LlamaForCausalLM, "gpt_neox": GPTNeoXForCausalLM}


class WithLoss(nn.Module):
    """The model's mean cross-entropy against labels, as one graph."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, labels):
        return cross_entropy(self.model(input_ids), labels)


def parameters(model):
    """{state-dict name: parameter}, each shared parameter once under its
    first name (GPT-2's lm_head is wte)."""
    seen, named = set(), OrderedDict()
    for name, param in model.named_parameters():
        if id(param) not in seen:
            seen.add(id(param))
            named[name] = param
    return named


def build(cfg, weights=None, seed=0):
    """The model of `cfg` with `weights` (a {name: tensor} dict) or random
    weights drawn from `seed`: linear weights and embeddings N(0, 0.02),
    biases 0.02 N(0, 1), norm weights 1 + 0.1 N(0, 1), norm biases
    0.1 N(0, 1), so that every parameter matters."""
    torch.manual_seed(seed)
    model = MODELS[cfg["model_type"]](cfg).float().eval()
    with torch.no_grad():
        for name, param in parameters(model).items():
            if weights is not None:
                if name not in weights:
                    raise ValueError(f"weights lack {name}")
                param.copy_(weights[name].to(torch.float32))
            elif "norm" in name or name.split(".")[-2].startswith("ln_"):
                param.copy_((1.0 if name.endswith("weight") else 0.0) + 0.1 * torch.randn(param.shape))
            elif name.endswith("bias"):
                param.copy_(0.02 * torch.randn(param.shape))
            else:
                param.copy_(0.02 * torch.randn(param.shape))
    return model


def load_weights(path):
    tensors, _ = read_safetensors(path)
    return tensors


def init(args):
    model = build(json.load(open(args.config)), seed=args.seed)
    write_safetensors(args.out_weights, OrderedDict(
        (name, param.detach()) for name, param in parameters(model).items()))


def export_model(model, out, micro_batch, seq_len, dynamic=False, no_fold=False, loss=False,
                 opset=17):
    """torch.onnx.export of `model` for [micro_batch, seq_len] token ids."""
    ids = torch.zeros(micro_batch, seq_len, dtype=torch.long)
    names, inputs = ["input_ids"], (ids,)
    if loss:
        model, names, inputs = WithLoss(model), ["input_ids", "labels"], (ids, ids)
    axes = {name: {0: "batch", 1: "sequence"} for name in names} if dynamic else None
    with torch.no_grad():
        torch.onnx.export(model, inputs, out, opset_version=opset, input_names=names,
                          output_names=["loss" if loss else "logits"], dynamic_axes=axes,
                          do_constant_folding=not no_fold)


def export(args):
    model = build(json.load(open(args.config)), load_weights(args.weights))
    export_model(model, args.out, args.micro_batch, args.seq_len, args.dynamic, args.no_fold,
                 args.loss, args.opset)


def train(args):
    cfg = json.load(open(args.config))
    model = build(cfg, load_weights(args.weights) if args.weights else None, args.seed)
    params = parameters(model)
    if args.out_init:
        write_safetensors(args.out_init, OrderedDict((n, p.detach().clone()) for n, p in params.items()))
    if args.export:
        export_model(model, args.export, args.micro_batch, args.seq_len, args.dynamic,
                     args.no_fold, args.loss, args.opset)
    if args.export_dynamic:
        export_model(model, args.export_dynamic, args.micro_batch, args.seq_len, True,
                     args.no_fold, args.loss, args.opset)
    optimizer = torch.optim.AdamW(list(params.values()), lr=args.lr, betas=(args.beta1, args.beta2),
                                  eps=args.eps, weight_decay=args.weight_decay, foreach=False)
    ids = read_tokens(args.tokens)
    with open(args.out_json, "w") as log:
        for step in range(args.steps):
            tokens, labels = batch_for_step(ids, step, args.micro_batch, args.seq_len)
            tokens = torch.as_tensor(np.asarray(tokens), dtype=torch.long)
            labels = torch.as_tensor(np.asarray(labels), dtype=torch.long)
            optimizer.zero_grad()
            loss = cross_entropy(model(tokens), labels)
            loss.backward()
            optimizer.step()
            log.write(json.dumps({"loss": loss.item(), "step": step + 1}) + "\n")
    write_safetensors(args.out_weights, OrderedDict((n, p.detach()) for n, p in params.items()))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    it = sub.add_parser("init")
    it.add_argument("--config", required=True)
    it.add_argument("--seed", type=int, default=0)
    it.add_argument("--out-weights", required=True)
    ex = sub.add_parser("export")
    ex.add_argument("--config", required=True)
    ex.add_argument("--out", required=True)
    ex.add_argument("--weights", required=True)
    ex.add_argument("--micro-batch", type=int, default=2)
    ex.add_argument("--seq-len", type=int, default=16)
    tr = sub.add_parser("train")
    tr.add_argument("--config", required=True)
    tr.add_argument("--weights")
    tr.add_argument("--seed", type=int, default=0)
    tr.add_argument("--out-init")
    tr.add_argument("--export")
    tr.add_argument("--export-dynamic")
    tr.add_argument("--tokens", required=True)
    tr.add_argument("--micro-batch", type=int, required=True)
    tr.add_argument("--seq-len", type=int, required=True)
    tr.add_argument("--steps", type=int, default=3)
    tr.add_argument("--lr", type=float, default=1e-3)
    tr.add_argument("--beta1", type=float, default=0.9)
    tr.add_argument("--beta2", type=float, default=0.999)
    tr.add_argument("--eps", type=float, default=1e-8)
    tr.add_argument("--weight-decay", type=float, default=0.01)
    tr.add_argument("--out-json", required=True)
    tr.add_argument("--out-weights", required=True)
    for parser in (ex, tr):
        parser.add_argument("--dynamic", action="store_true")
        parser.add_argument("--no-fold", action="store_true")
        parser.add_argument("--loss", action="store_true")
        parser.add_argument("--opset", type=int, default=17)
    args = ap.parse_args(argv)
    if args.command == "train" and not args.weights and not args.out_init:
        ap.error("train needs --weights, or --seed and --out-init")
    {"init": init, "export": export, "train": train}[args.command](args)


if __name__ == "__main__":
    main()
