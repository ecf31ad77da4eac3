#!/usr/bin/env python3
"""Pins a parallelism scheme on @train_step's arguments (loom.split_axes),
which --loom-auto-shard keeps, so that a test runs a named plan rather
than the one the solver picks.

  pin.py SCHEME AXIS0_SIZE < train.mlir > pinned.mlir

Schemes (mesh axes as --loom-auto-shard's mesh= names them):
  dp         batch over axis 0, parameters and moments replicated
  tp         Megatron tensor parallelism over axis 0 (column-parallel
             input projections, row-parallel output projections)
  tp-sp      tp, with the tokens split by position over axis 0 (sequence
             parallelism)
  zero3      batch over axis 0, parameters and moments split by rows over
             axis 0 where that divides (ZeRO-3)
  dp-tp      batch over axis 0, Megatron over axis 1
  tp-vocab   tp, with the token embedding (and the output layer tied to
             it) split by vocabulary rows over axis 0
  cp         the tokens split by position over axis 0, parameters and
             moments replicated (context parallelism; plan it with
             context-axis=0)
"""
import re
import sys

COLUMN = ("c_attn.weight", "c_fc.weight", "o_proj.weight", "down_proj.weight")
EMBEDDING = ("wte.weight", "embed_tokens.weight")
ROW = ("c_proj.weight", "q_proj.weight", "k_proj.weight", "v_proj.weight",
       "gate_proj.weight", "up_proj.weight")


def megatron(name, shape, axis):
    """GPT-2's Conv1D weights are [in, out]; Llama's Linear [out, in]."""
    if len(shape) != 2:
        return None
    if name.endswith(COLUMN):
        return [[], [axis]]
    if name.endswith(ROW):
        return [[axis], []]
    return None


def pin(scheme, role, name, shape, mesh0):
    whole = [[] for _ in shape]
    state = role in ("param", "m", "v")
    if scheme == "dp":
        return [[0], []] if role == "data" else whole if state else None
    if scheme == "tp-vocab":
        if role == "data":
            return whole
        if state and name.endswith(EMBEDDING):
            return [[0]] + whole[1:]
        return (megatron(name, shape, 0) or whole) if state else None
    if scheme in ("tp", "tp-sp"):
        if role == "data":
            return [[], [0]] if scheme == "tp-sp" else whole
        return (megatron(name, shape, 0) or whole) if state else None
    if scheme == "zero3":
        if role == "data":
            return [[0], []]
        if state:
            return [[0]] + whole[1:] if shape and shape[0] % mesh0 == 0 else whole
        return None
    if scheme == "cp":
        return [[], [0]] if role == "data" else whole if state else None
    if scheme == "dp-tp":
        if role == "data":
            return [[0], []]
        return (megatron(name, shape, 1) or whole) if state else None
    sys.exit(f"pin.py: unknown scheme '{scheme}'")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: pin.py SCHEME AXIS0_SIZE < in.mlir > out.mlir")
    scheme, mesh0 = sys.argv[1], int(sys.argv[2])
    text = sys.stdin.read()
    arg = re.compile(r'(%arg\d+: tensor<([0-9x]*)x?[a-z0-9]+> \{)([^}]*)\}')

    def rewrite(line):
        if "func.func @train_step(" not in line:
            return line

        def one(m):
            attrs = m.group(3)
            role = re.search(r'loom\.role = "([^"]*)"', attrs)
            name = re.search(r'loom\.name = "([^"]*)"', attrs)
            shape = [int(d) for d in m.group(2).split("x") if d]
            axes = pin(scheme, role.group(1) if role else "",
                       name.group(1) if name else "", shape, mesh0)
            if axes is None:
                return m.group(0)
            # Trailing empty lists may be left out; a rank-0 tensor has none.
            while axes and not axes[-1]:
                axes.pop()
            text = "[" + ", ".join("[" + ", ".join(map(str, a)) + "]"
                                   for a in axes) + "]"
            return f"{m.group(1)}{attrs}, loom.split_axes = {text}}}"
        return arg.sub(one, line)

    sys.stdout.write("\n".join(rewrite(l) for l in text.split("\n")))


if __name__ == "__main__":
    main()
