#!/usr/bin/python3
"""Compares one training step of Loom with the PyTorch reference.

Inputs: the initial weights, the weights each side wrote after the step,
Loom's --log-json line and the reference's JSON (or, for several steps,
the reference's log of one {"loss", "step"} line per step, --torch-log:
every step's loss is compared, and the weights after the last). Relative errors are
|a - b| / |b| for the loss and ||a - b|| / ||b|| (Frobenius norm) per
parameter tensor, with b from PyTorch:

  * the loss (before the update) within --rtol;
  * every updated parameter p' within --rtol;
  * the update itself, p' - p, within --update-rtol: p' is dominated by
    p, so this is the check that sees the gradient.

An element-wise bound is not meaningful in float32: where an updated
weight lands near zero, or a gradient is rounding noise around an exact
zero (GPT-2's key bias: softmax ignores it), the last bits differ between
any two implementations. The maximum absolute difference is printed.

Prints one line per parameter and exits 1 if any check fails. --loom and
--loom-log may be repeated: several Loom runs against one reference.

Usage:
  compare_step.py --init W0 --loom W1 --loom-log LOG.jsonl --torch W1'
                  (--torch-json OUT.json | --torch-log LOG'.jsonl)
                  [--rtol 1e-5] [--update-rtol 1e-4]
"""

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_io import read_safetensors  # noqa: E402


def compare(init, loom, loom_log, ref, torch_losses, single, args):
    """One Loom run against the reference; True when every check passes."""
    with open(loom_log) as f:
        loom_losses = [json.loads(line)["loss"] for line in f if line.strip()]
    if single:
        loom_losses = loom_losses[:1]
    ok = len(loom_losses) == len(torch_losses) and bool(torch_losses)
    if not ok:
        print(f"FAIL: {len(loom_losses)} logged steps vs {len(torch_losses)}")
    for step, (loom_loss, torch_loss) in enumerate(zip(loom_losses, torch_losses), 1):
        loss_err = abs(loom_loss - torch_loss) / abs(torch_loss)
        label = "loss" if single else f"loss step {step}"
        print(f"{label}: loom {loom_loss:.8f} torch {torch_loss:.8f} rel err {loss_err:.2e}")
        ok &= loss_err <= args.rtol

    if set(loom) != set(ref):
        print(f"FAIL parameter names differ: {sorted(set(loom) ^ set(ref))}")
        return False
    worst = 0.0

    def rel(a, b):
        return (a - b).norm().item() / max(b.norm().item(), 1e-30)

    for name, expected in ref.items():
        got = loom[name].double()
        expected = expected.double()
        before = init.get(name, init.get(name.removeprefix("transformer."))).double()
        param_err = rel(got, expected)
        update_err = rel(got - before, expected - before)
        max_abs = (got - expected).abs().max().item()
        good = param_err <= args.rtol and update_err <= args.update_rtol
        worst = max(worst, param_err)
        print(f"{'ok  ' if good else 'FAIL'} {name:48s} rel err {param_err:.2e}"
              f"  update rel err {update_err:.2e}  max abs diff {max_abs:.1e}")
        ok &= good
    print(f"{'PASS' if ok else 'FAIL'}: {len(ref)} parameters, worst rel err {worst:.2e}")
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--init", required=True)
    parser.add_argument("--loom", required=True, action="append")
    parser.add_argument("--loom-log", required=True, action="append")
    parser.add_argument("--torch", required=True)
    losses = parser.add_mutually_exclusive_group(required=True)
    losses.add_argument("--torch-json")
    losses.add_argument("--torch-log")
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--update-rtol", type=float, default=1e-4)
    args = parser.parse_args()
    if len(args.loom) != len(args.loom_log):
        parser.error("give one --loom-log per --loom")

    init, _ = read_safetensors(args.init)
    ref, _ = read_safetensors(args.torch)
    if args.torch_json:
        with open(args.torch_json) as f:
            torch_losses = [json.load(f)["loss"]]
    else:
        with open(args.torch_log) as f:
            torch_losses = [json.loads(line)["loss"] for line in f if line.strip()]
    ok = True
    for weights, log in zip(args.loom, args.loom_log):
        if len(args.loom) > 1:
            print(f"run {log}:")
        loom, _ = read_safetensors(weights)
        ok &= compare(init, loom, log, ref, torch_losses, bool(args.torch_json), args)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
