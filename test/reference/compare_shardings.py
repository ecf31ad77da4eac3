#!/usr/bin/env python3
"""Compares the plans --loom-auto-shard chose for two training steps.

usage: compare_shardings.py A.mlir B.mlir
Both files are @train_step after --loom-auto-shard (and before
--loom-partition). Two plans are the same when every argument (by its
loom.name and loom.role) gets the same sharding, and the op results get the
same shardings: the multiset of (op, sharding) over every annotated result
is equal, whatever order the ops stand in (and so is the multiset of the
layouts operands are resharded to, annotate_for_users). Reshapes are views
(free in the cost model), so where a resharding sits around one (gather,
then reshape; or reshape, then gather the same bytes) is a tie the solver
breaks by op order: the layouts of reshape results, reshardings only
reshapes read, and reshardings back to the layout a value was produced in
are left out. Prints "same plan: ..." or the first difference and exits 1.
"""
import collections
import re
import sys

SHARDING = re.compile(r"(%[\w.]+) = shard\.sharding (.*?) : !shard\.sharding")
ANNOTATE = re.compile(r"(%[\w.]+) = shard\.shard (%[\w.#]+) to (%[\w.]+)(?![\w.])( annotate_for_users)?")
ARG = re.compile(r"(%arg\d+): [^{]*?\{([^}]*)\}")
DEFINE = re.compile(r"^\s*(%[\w.]+)(?::\d+)?(?:, (%[\w.]+))* = ([\w.]+)")


def plan(path):
    text = open(path).read()
    shardings = dict(SHARDING.findall(text))
    signature = text[text.index("func.func @train_step"):]
    signature = signature[:signature.index("{\n")]
    args = {}
    for arg, attrs in ARG.findall(signature):
        name = re.search(r'loom\.name = "([^"]*)"', attrs)
        role = re.search(r'loom\.role = "([^"]*)"', attrs)
        args[arg] = (name.group(1) if name else "", role.group(1) if role else "")
    producers, readers = {}, collections.defaultdict(set)
    for line in text.splitlines():
        match = DEFINE.match(line)
        if match:
            lhs, rhs = line.split("=", 1)
            for value in re.findall(r"%[\w.]+", lhs):
                producers[value] = match.group(3)
            if match.group(3) != "shard.shard":
                for operand in re.findall(r"%[\w.]+", rhs):
                    readers[operand].add(match.group(3))
    annotations = ANNOTATE.findall(text)
    source = {result: value.split("#")[0] for result, value, _, _ in annotations}
    layout_of = {result: shardings[sharding] for result, _, sharding, _ in annotations}

    def root(value):
        while value in source:
            value = source[value]
        return value

    produced = {value.split("#")[0]: shardings[sharding]
                for _, value, sharding, for_users in annotations if not for_users}
    by_argument, by_op = {}, collections.Counter()
    for result, value, sharding, for_users in annotations:
        layout = shardings[sharding]
        if value in args and not for_users:
            by_argument[args[value]] = layout
            continue
        origin = root(value)
        if producers.get(origin) == "loom.reshape":
            continue
        if for_users and (readers[result] and readers[result] <= {"loom.reshape"}
                          or layout == produced.get(origin)):
            continue
        by_op[(producers.get(value.split("#")[0], "?"), layout, bool(for_users))] += 1
    return by_argument, by_op


def main():
    a_args, a_ops = plan(sys.argv[1])
    b_args, b_ops = plan(sys.argv[2])
    if set(a_args) != set(b_args):
        print(f"FAIL: arguments differ: {sorted(set(a_args) ^ set(b_args))}")
        return 1
    for key in sorted(a_args):
        if a_args[key] != b_args[key]:
            print(f"FAIL: {key[0]} ({key[1]}): {a_args[key]} vs {b_args[key]}")
            return 1
    if a_ops != b_ops:
        print(f"FAIL: op shardings differ: {sorted((a_ops - b_ops).items())[:3]} vs "
              f"{sorted((b_ops - a_ops).items())[:3]}")
        return 1
    split = sum(1 for layout in a_args.values() if re.search(r"\[\d", layout))
    print(f"same plan: {len(a_args)} arguments ({split} split), "
          f"{sum(a_ops.values())} op results")
    return 0


if __name__ == "__main__":
    sys.exit(main())
