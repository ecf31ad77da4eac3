"""Compares what two sharded steps cost, op by op.

usage: compare_costs.py A.txt B.txt
Both files are tables of --loom-explain-sharding. Two plans cost the same
when the multiset of (op, compute, communication, collectives) rows is
equal, whatever order the ops stand in and whatever their layouts, and the
totals are equal. Where compare_shardings.py finds two plans different,
this tells a tie the solver broke by op order (two layouts of one value
that cost exactly the same) from a different optimum. Prints "same costs:
..." or the first difference and exits 1.
"""
import collections
import re
import sys


TIMES = re.compile(r"(\d[\d.]*(?:e[-+]?\d+)? [mun]?s)\s+(\d[\d.]*(?:e[-+]?\d+)? [mun]?s)\s*(.*)$")


def rows(path):
    table, total, seen_header = collections.Counter(), None, False
    for line in open(path).read().splitlines():
        if line.startswith("op "):
            seen_header = True
            continue
        if line.startswith("total:"):
            total = line
            continue
        if not seen_header or not line.strip():
            continue
        # Layouts are bracketed lists; the first two times are the op's
        # compute and communication, the rest its collectives.
        match = TIMES.search(line)
        if not match:
            sys.exit(f"{path}: cannot read the costs of: {line.strip()[:80]}")
        table[(line.split()[0],) + match.groups()] += 1
    if total is None:
        sys.exit(f"{path}: no 'total:' line; not a --loom-explain-sharding table")
    return table, total


def main():
    a, a_total = rows(sys.argv[1])
    b, b_total = rows(sys.argv[2])
    if a_total != b_total:
        print(f"FAIL: totals differ:\n  {a_total}\n  {b_total}")
        return 1
    for key in sorted(set(a) | set(b)):
        if a[key] != b[key]:
            print(f"FAIL: {a[key]} vs {b[key]} ops costing {key}")
            return 1
    print(f"same costs: {sum(a.values())} ops, {a_total[len('total: '):]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
