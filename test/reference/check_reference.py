#!/usr/bin/python3
"""Self-checks of Loom's independent PyTorch reference (torch_reference.py).

Run with /usr/bin/python3; exits non-zero if any check fails.  Checks:
  1. GPT-2 gradients vs float64 central finite differences (tiny config).
  2. Llama (GQA, 4 heads / 2 kv heads; untied and tied) gradients vs finite
     differences.
  3. safetensors write -> read round trip (F32/F64/F16/BF16), a hand-made
     file, header padding, GPT-2 name variants and ignored buffers.
  4. Token file round trip (exact bytes) and the batch rule with wrap-around
     on a hand-made example.
  5. AdamW (two steps) and SGD vs hand-written update formulas.
  6. Model conventions: GQA == MHA with duplicated kv heads, RoPE == explicit
     pair rotation, gelu_new == torch's tanh GELU, causality.
  7. One command-line step on examples/configs/{gpt2,llama}-tiny.json in
     float32 and float64 (loss ~ ln(vocab)).
  8. Dropout: Philox4x32-10 against Random123's known answers, the kept
     fraction, and the gradients with dropout at every site (GPT-2: embedding,
     attention probabilities, residuals; Llama: attention) vs finite
     differences.
"""

import json
import math
import os
import struct
import subprocess
import sys
import tempfile
from collections import OrderedDict

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import make_fixture  # noqa: E402
import torch_reference as ref  # noqa: E402
from safetensors_io import read_header, read_safetensors, write_safetensors  # noqa: E402
from token_io import batch_for_step, read_tokens, write_tokens  # noqa: E402

GPT2_TINY = {"model_type": "gpt2", "n_layer": 2, "n_embd": 16, "n_head": 2, "vocab_size": 32,
             "n_positions": 16, "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new"}
LLAMA_TINY = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 16, "intermediate_size": 24,
              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 32,
              "max_position_embeddings": 16, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
              "tie_word_embeddings": False}

FAILURES = []


def report(ok, name, detail):
    print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")
    if not ok:
        FAILURES.append(name)


# --------------------------------------------------------------------------
# Fixture helpers
# --------------------------------------------------------------------------


def fixture(tmp, cfg, seed, tag):
    """Writes config + random weights to tmp, loads them back in float64."""
    cfg_path = os.path.join(tmp, f"{tag}.json")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    with open(cfg_path) as f:
        cfg = json.load(f)
    weights_rng, tokens_rng = make_fixture.rngs(seed)
    w_path = os.path.join(tmp, f"{tag}.safetensors")
    write_safetensors(w_path, make_fixture.random_weights(cfg, weights_rng))
    params = ref.load_params(cfg, w_path, torch.float64)
    ids = make_fixture.random_tokens(tokens_rng, 200, cfg["vocab_size"])
    tokens, labels = (torch.from_numpy(a) for a in batch_for_step(ids, 1, 2, 8))
    return cfg, params, tokens, labels


def pick_entries(name, param, tokens, rng, count=2):
    """A few flat indices; embedding rows are taken from rows the batch uses."""
    if name.endswith(("wte.weight", "embed_tokens.weight")):
        rows = [int(tokens[0, 0]), int(tokens[1, -1])]
    elif name.endswith("wpe.weight"):
        rows = [0, tokens.shape[1] - 1]
    else:
        return [int(i) for i in rng.choice(param.numel(), size=count, replace=False)]
    cols = rng.integers(0, param.shape[1], size=len(rows))
    return [r * param.shape[1] + int(c) for r, c in zip(rows, cols)]


def finite_difference(cfg, params, tokens, labels, name, index, h=1e-5, dropout=None):
    """Central difference of the loss w.r.t. one flat entry of one parameter."""
    flat = params[name].data.view(-1)
    original = flat[index].item()
    values = []
    with torch.no_grad():
        for delta in (h, -h):
            flat[index] = original + delta
            values.append(ref.loss_fn(cfg, params, tokens, labels, dropout).item())
        flat[index] = original
    return (values[0] - values[1]) / (2 * h)


def gradient_check(title, cfg, params, tokens, labels, seed, dropout=None):
    """Check 1/2/8: autograd gradients vs finite differences, all parameters."""
    loss, grads = ref.forward_backward(cfg, params, tokens, labels, dropout)
    rng, worst, count = np.random.default_rng(seed), 0.0, 0
    for name in params:
        for index in pick_entries(name, params[name], labels if "lm_head" in name else tokens, rng):
            fd = finite_difference(cfg, params, tokens, labels, name, index, dropout=dropout)
            ad = grads[name].view(-1)[index].item()
            err = abs(fd - ad) / (1e-6 + abs(ad))
            worst, count = max(worst, err), count + 1
            if not abs(fd - ad) <= 1e-8 + 1e-5 * abs(ad):
                report(False, title, f"{name}[{index}] autograd {ad:.10g} vs FD {fd:.10g}")
    report(worst < 1e-4, title, f"loss {loss:.6f}, {count} entries over {len(params)} params, "
           f"max rel err {worst:.2e}")


# --------------------------------------------------------------------------
# 1, 2: gradients
# --------------------------------------------------------------------------


def check_gradients(tmp):
    gradient_check("1 gpt2 grads vs finite differences", *fixture(tmp, GPT2_TINY, 11, "g"), 1)
    gradient_check("2 llama GQA grads vs finite differences", *fixture(tmp, LLAMA_TINY, 12, "l"), 2)
    tied = dict(LLAMA_TINY, tie_word_embeddings=True)
    gradient_check("2b llama GQA tied grads vs finite differences", *fixture(tmp, tied, 13, "lt"), 3)


# --------------------------------------------------------------------------
# 3: safetensors
# --------------------------------------------------------------------------


def check_safetensors_roundtrip(tmp):
    gen = torch.Generator().manual_seed(0)
    tensors = OrderedDict([("b.weight", torch.randn(3, 5, generator=gen)),
                           ("a.bias", torch.randn(7, generator=gen) * 1e3),
                           ("scalar_like", torch.randn(1, generator=gen))])
    expect = {"F32": lambda t: t, "F64": lambda t: t.double(),
              "F16": lambda t: t.half().float(), "BF16": lambda t: t.bfloat16().float()}
    for dtype, convert in expect.items():
        path = os.path.join(tmp, f"rt_{dtype}.safetensors")
        write_safetensors(path, tensors, metadata={"format": "pt"}, dtype=dtype)
        back, meta = read_safetensors(path)
        header, _, start = read_header(path)
        same = all(torch.equal(back[n].double(), convert(t).double()) for n, t in tensors.items())
        ok = (same and list(back) == list(tensors) and meta == {"format": "pt"} and start % 8 == 0
              and all(header[n]["dtype"] == dtype for n in tensors))
        report(ok, f"3 safetensors round trip {dtype}", f"{len(tensors)} tensors, data starts at {start}")
    check_safetensors_by_hand(tmp)
    check_gpt2_name_variants(tmp)


def check_safetensors_by_hand(tmp):
    """A file assembled byte by byte (F64 + BF16) decodes to known values."""
    header = json.dumps({"x": {"dtype": "F64", "shape": [2], "data_offsets": [0, 16]},
                         "y": {"dtype": "BF16", "shape": [2], "data_offsets": [16, 20]}}).encode()
    data = struct.pack("<dd", 1.5, -2.25) + struct.pack("<HH", 0x3FC0, 0xC000)  # 1.5, -2.0
    path = os.path.join(tmp, "hand.safetensors")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + data)
    back, _ = read_safetensors(path)
    ok = back["x"].tolist() == [1.5, -2.25] and back["y"].tolist() == [1.5, -2.0]
    report(ok, "3 safetensors hand-made file", f"x={back['x'].tolist()} y={back['y'].tolist()}")


def check_gpt2_name_variants(tmp):
    """Unprefixed GPT-2 names, attn buffers and a tied lm_head copy load the same."""
    cfg = dict(GPT2_TINY)
    weights = make_fixture.random_weights(cfg, make_fixture.rngs(5)[0])
    variant = OrderedDict((n[len("transformer."):], t) for n, t in weights.items())
    variant["h.0.attn.bias"] = torch.ones(1, 1, 16, 16)
    variant["h.0.attn.masked_bias"] = torch.tensor(-1e4)
    variant["lm_head.weight"] = weights["transformer.wte.weight"]
    paths = [os.path.join(tmp, f"names{i}.safetensors") for i in (0, 1)]
    write_safetensors(paths[0], weights)
    write_safetensors(paths[1], variant)
    a, b = (ref.load_params(cfg, p, torch.float32) for p in paths)
    ok = list(a) == list(b) and all(torch.equal(a[n], b[n]) for n in a)
    report(ok, "3 gpt2 weight-name variants", "unprefixed names + .attn.bias/.attn.masked_bias/lm_head ignored")


# --------------------------------------------------------------------------
# 4: tokens
# --------------------------------------------------------------------------


def check_tokens(tmp):
    ids = [100 + i for i in range(10)]
    path = os.path.join(tmp, "t.tokens")
    write_tokens(path, ids)
    expected = b"LOOMTOKS" + struct.pack("<IIQ", 1, 2, 10) + struct.pack("<10H", *ids)
    with open(path, "rb") as f:
        exact = f.read() == expected
    report(exact and read_tokens(path).tolist() == ids, "4 token file round trip (u16)", "bytes match hand layout")
    wide = [0, 70000, 2 ** 32 - 1]
    write_tokens(path, wide)
    report(read_tokens(path).tolist() == wide and os.path.getsize(path) == 24 + 12,
           "4 token file round trip (u32)", f"{wide}")
    # N=10, S=3, B=2: start = ((s*2+b)*3) % 7.  step 2 -> 12%7=5, 15%7=1 (wraps).
    cases = {0: [[100, 101, 102], [103, 104, 105]], 1: [[106, 107, 108], [102, 103, 104]],
             2: [[105, 106, 107], [101, 102, 103]]}
    ok = True
    for step, rows in cases.items():
        tokens, labels = batch_for_step(np.array(ids), step, 2, 3)
        ok &= tokens.tolist() == rows and labels.tolist() == [[t + 1 for t in r] for r in rows]
    report(ok, "4 batch rule with wrap-around", f"N=10 B=2 S=3 steps 0..2 -> {cases}")


# --------------------------------------------------------------------------
# 5: optimizers
# --------------------------------------------------------------------------


def hand_adamw(p, grads, lr, b1, b2, eps, wd):
    """Decoupled-weight-decay Adam, float64, for a list of per-step grads."""
    m, v = np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        m_hat, v_hat = m / (1 - b1 ** t), v / (1 - b2 ** t)
        p = p - lr * (wd * p + m_hat / (np.sqrt(v_hat) + eps))
    return p


def check_optimizers():
    gen = torch.Generator().manual_seed(3)
    p0 = torch.randn(50, generator=gen)
    grads = [torch.randn(50, generator=gen) * s for s in (1e-3, 1.0)]
    settings = {"optimizer": "adamw", "lr": 1e-2, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": 0.1}
    params = OrderedDict(w=p0.clone().requires_grad_(True))
    opt = ref.make_optimizer(params, settings)
    errors = []
    for t in (1, 2):
        params["w"].grad = grads[t - 1].clone()
        opt.step()
        want = hand_adamw(p0.double().numpy(), [g.double().numpy() for g in grads[:t]], 1e-2, 0.9, 0.95, 1e-8, 0.1)
        errors.append(float(np.abs(params["w"].detach().double().numpy() - want).max()))
    report(max(errors) < 1e-6, "5 AdamW vs hand formula", f"max |diff| step1 {errors[0]:.1e}, step2 {errors[1]:.1e}")
    settings.update(optimizer="sgd")
    params = OrderedDict(w=p0.clone().requires_grad_(True))
    params["w"].grad = grads[1].clone()
    ref.make_optimizer(params, settings).step()
    want = p0.double() - 1e-2 * (grads[1].double() + 0.1 * p0.double())
    err = float((params["w"].detach().double() - want).abs().max())
    report(err < 1e-6, "5 SGD vs hand formula p - lr*(g + wd*p)", f"max |diff| {err:.1e}")


# --------------------------------------------------------------------------
# 6: model conventions
# --------------------------------------------------------------------------


def check_gqa_equals_mha(tmp):
    """kv head j must serve query heads j*g .. j*g+g-1 (HF repeat_kv)."""
    cfg, params, tokens, _ = fixture(tmp, LLAMA_TINY, 21, "gqa")
    mha_cfg = dict(cfg, num_key_value_heads=cfg["num_attention_heads"])
    groups, head_dim = 2, 4
    mha = OrderedDict()
    for name, p in params.items():
        if name.endswith(("k_proj.weight", "v_proj.weight")):
            p = p.view(-1, head_dim, p.shape[1]).repeat_interleave(groups, dim=0).reshape(-1, p.shape[1])
        mha[name] = p.detach()
    with torch.no_grad():
        diff = (ref.logits_fn(cfg, params, tokens) - ref.logits_fn(mha_cfg, mha, tokens)).abs().max().item()
    report(diff < 1e-12, "6 GQA == MHA with duplicated kv heads", f"max |logit diff| {diff:.1e}")


def check_rope():
    """Pair (x[i], x[i+D/2]) at position s rotates by s * theta^(-2i/D)."""
    s_len, d, theta = 7, 8, 10000.0
    x = torch.randn(1, 1, s_len, d, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    cos, sin = ref.rope_cos_sin(s_len, d, theta, torch.float64)
    got = ref.apply_rope(x, cos, sin)
    want = x.clone()
    for s in range(s_len):
        for i in range(d // 2):
            a = s * theta ** (-2.0 * i / d)
            x1, x2 = x[0, 0, s, i].item(), x[0, 0, s, i + d // 2].item()
            want[0, 0, s, i] = x1 * math.cos(a) - x2 * math.sin(a)
            want[0, 0, s, i + d // 2] = x2 * math.cos(a) + x1 * math.sin(a)
    diff = (got - want).abs().max().item()
    report(diff < 1e-12, "6 RoPE == explicit rotate_half pair rotation", f"max |diff| {diff:.1e}")


def check_gelu():
    x = torch.linspace(-6, 6, 101, dtype=torch.float64)
    diff = (ref.gelu_new(x) - torch.nn.functional.gelu(x, approximate="tanh")).abs().max().item()
    report(diff < 1e-12, "6 gelu_new == torch gelu(approximate='tanh')", f"max |diff| {diff:.1e}")


def check_causality(tmp):
    for tag, base in (("gpt2", GPT2_TINY), ("llama", LLAMA_TINY)):
        cfg, params, tokens, _ = fixture(tmp, base, 31, "causal" + tag)
        changed = tokens.clone()
        changed[:, -1] = (changed[:, -1] + 1) % cfg["vocab_size"]
        with torch.no_grad():
            a, b = ref.logits_fn(cfg, params, tokens), ref.logits_fn(cfg, params, changed)
        early = (a[:, :-1] - b[:, :-1]).abs().max().item()
        last = (a[:, -1] - b[:, -1]).abs().max().item()
        report(early == 0.0 and last > 0.0, f"6 {tag} causality",
               f"changing the last token moves earlier logits by {early:.1e}, the last by {last:.1e}")


# --------------------------------------------------------------------------
# 7: command line on the repository's example configs
# --------------------------------------------------------------------------


def run_cli(tmp, config, tag, dtype):
    w, t = os.path.join(tmp, f"{tag}.w.safetensors"), os.path.join(tmp, f"{tag}.tokens")
    subprocess.run([sys.executable, os.path.join(HERE, "make_fixture.py"), "--config", config, "--seed", "7",
                    "--out-weights", w, "--out-tokens", t, "--num-tokens", "4096"], check=True)
    out = {k: os.path.join(tmp, f"{tag}.{dtype}.{k}") for k in ("weights", "json", "grads")}
    cmd = [sys.executable, os.path.join(HERE, "torch_reference.py"), "--config", config, "--weights", w,
           "--tokens", t, "--micro-batch", "2", "--seq-len", "32", "--step", "70", "--optimizer", "adamw",
           "--lr", "1e-3", "--beta1", "0.9", "--beta2", "0.999", "--eps", "1e-8", "--weight-decay", "0.01",
           "--dtype", dtype, "--out-weights", out["weights"], "--out-json", out["json"], "--out-grads", out["grads"]]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(out["json"]) as f:
        result = json.load(f)
    return w, result, read_safetensors(out["weights"])[0], read_safetensors(out["grads"])[0]


def check_examples(tmp):
    for model in ("gpt2", "llama"):
        config = os.path.join(REPO, "examples", "configs", f"{model}-tiny.json")
        with open(config) as f:
            cfg = json.load(f)
        names = [n for n, _, _ in ref.param_specs(cfg)]
        runs = {d: run_cli(tmp, config, model, d) for d in ("float32", "float64")}
        w_in, r32, new32, g32 = runs["float32"]
        _, r64, new64, g64 = runs["float64"]
        before = read_safetensors(w_in)[0]
        norm = math.sqrt(sum(float(g.double().pow(2).sum()) for g in g32.values()))
        moved = max((new32[n] - before[n]).abs().max().item() for n in names)
        grad_diff = max((g32[n].double() - g64[n].double()).abs().max().item() for n in names)
        ok = (list(new32) == names and abs(r32["loss"] - math.log(cfg["vocab_size"])) < 0.2
              and abs(r32["loss"] - r64["loss"]) < 1e-5 and abs(norm - r32["grad_norm"]) < 1e-6 * norm
              and abs(r32["grad_norm"] - r64["grad_norm"]) < 1e-5 * norm and 0 < moved < 2e-3 and grad_diff < 1e-5)
        report(ok, f"7 {model}-tiny one CLI step",
               f"loss f32 {r32['loss']:.6f} f64 {r64['loss']:.6f} (ln V = {math.log(cfg['vocab_size']):.6f}), "
               f"grad_norm f32 {r32['grad_norm']:.6f} f64 {r64['grad_norm']:.6f}, max |f32-f64 grad| "
               f"{grad_diff:.1e}, max |update| {moved:.2e}, {len(names)} params")


# --------------------------------------------------------------------------
# 8: dropout
# --------------------------------------------------------------------------


def check_philox():
    """Random123's tests/kat_vectors (philox4x32 10), and the dropout bits of
    counter {step, index} and key {seed, site key} as Loom's DropoutMask.h."""
    vectors = [((0, 0, 0, 0), 0, 0, (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
               ((0xffffffff,) * 4, 0xffffffff, 0xffffffff, (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
               ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), 0xa4093822, 0x299f31d0,
                (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1))]
    ok = all(tuple(int(w) for w in ref.philox4x32_10(c, k0, k1)) == want for c, k0, k1, want in vectors)
    keep = ref.dropout_keeps(99, 1, 7, (200, 500), 0.25)
    kept = keep.double().mean().item()
    ok = ok and abs(kept - 0.75) < 0.01 and not torch.equal(keep, ref.dropout_keeps(99, 2, 7, (200, 500), 0.25))
    report(ok, "8 Philox4x32-10 known answers and dropout masks",
           f"{len(vectors)} vectors, kept fraction {kept:.4f} at rate 0.25")


def check_dropout_gradients(tmp):
    gpt2 = ref.Dropout({"embd": 0.1, "resid": 0.2, "attn": 0.3}, seed=5, step=3)
    gradient_check("8 gpt2 grads with dropout vs finite differences", *fixture(tmp, GPT2_TINY, 41, "dg"), 4,
                   dropout=gpt2)
    llama = ref.Dropout({"attn": 0.3}, seed=5, step=3)
    gradient_check("8 llama GQA grads with attention dropout vs finite differences",
                   *fixture(tmp, LLAMA_TINY, 42, "dl"), 5, dropout=llama)


def main():
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        check_gradients(tmp)
        check_safetensors_roundtrip(tmp)
        check_tokens(tmp)
        check_optimizers()
        check_gqa_equals_mha(tmp)
        check_rope()
        check_gelu()
        check_causality(tmp)
        check_examples(tmp)
        check_philox()
        check_dropout_gradients(tmp)
    if FAILURES:
        print(f"{len(FAILURES)} check(s) FAILED: {FAILURES}")
        return 1
    print("all reference self-checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
