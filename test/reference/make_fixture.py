#!/usr/bin/python3
"""Random fixtures for Loom's independent PyTorch reference.

Writes random weights in Hugging Face layout/names for a gpt2 or llama
config.json, and optionally a random Loom token file.

Weight init (GPT-2 style, perturbed so every parameter matters in tests):
  embeddings and linear weights  N(0, 0.02^2)
  linear biases                  0.02 * N(0, 1)
  norm weights                   1 + 0.1 * N(0, 1)
  norm biases                    0.1 * N(0, 1)
Token ids are uniform in [0, vocab).  Randomness: numpy's default_rng, with
two independent streams spawned from SeedSequence(seed) for weights and tokens.

Usage:
  /usr/bin/python3 make_fixture.py --config CONFIG.json --seed N --out-weights W.safetensors
      [--out-tokens T.tokens --num-tokens 4096 --vocab V]
"""

import argparse
import json
import os
import sys
from collections import OrderedDict

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_io import write_safetensors  # noqa: E402
from token_io import write_tokens  # noqa: E402
from torch_reference import hparams, param_specs  # noqa: E402


def init_tensor(rng, shape, kind):
    """One parameter drawn according to its kind (see module docstring)."""
    noise = rng.standard_normal(shape)
    if kind in ("embedding", "linear", "bias"):
        return 0.02 * noise
    if kind == "norm_weight":
        return 1.0 + 0.1 * noise
    if kind == "norm_bias":
        return 0.1 * noise
    raise ValueError(f"unknown parameter kind {kind}")


def random_weights(cfg, rng):
    """OrderedDict {HF name: float32 tensor} in HF state-dict order."""
    return OrderedDict((name, torch.from_numpy(init_tensor(rng, shape, kind).astype(np.float32)))
                       for name, shape, kind in param_specs(cfg))


def random_tokens(rng, count, vocab):
    return rng.integers(0, vocab, size=count, dtype=np.int64)


def rngs(seed):
    """(weights rng, tokens rng), independent streams of one seed."""
    weights_seq, tokens_seq = np.random.SeedSequence(seed).spawn(2)
    return np.random.default_rng(weights_seq), np.random.default_rng(tokens_seq)


def main(argv=None):
    ap = argparse.ArgumentParser(description="random HF-layout weights and Loom tokens")
    ap.add_argument("--config", required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--out-weights", required=True)
    ap.add_argument("--out-tokens")
    ap.add_argument("--num-tokens", type=int, default=4096)
    ap.add_argument("--vocab", type=int, help="token ids < VOCAB (default: config vocab_size)")
    args = ap.parse_args(argv)
    with open(args.config) as f:
        cfg = json.load(f)
    weights_rng, tokens_rng = rngs(args.seed)
    write_safetensors(args.out_weights, random_weights(cfg, weights_rng),
                      metadata={"format": "pt", "generator": "loom make_fixture.py", "seed": args.seed})
    if args.out_tokens:
        vocab = args.vocab or hparams(cfg)["vocab"]
        write_tokens(args.out_tokens, random_tokens(tokens_rng, args.num_tokens, vocab))


if __name__ == "__main__":
    main()
