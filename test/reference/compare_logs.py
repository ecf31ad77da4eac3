#!/usr/bin/env python3
"""Compares the losses of two loom-run --log-json files step by step.

usage: compare_logs.py A.jsonl B.jsonl [--rtol R]
Prints PASS when both have the same steps and every loss agrees within the
relative tolerance R (default 1e-9), else the first step that differs and
exits 1.
"""
import argparse
import json
import sys


def losses(path):
    with open(path) as f:
        return [(r["step"], r["loss"]) for r in map(json.loads, f) if r]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--rtol", type=float, default=1e-9)
    args = parser.parse_args()
    a, b = losses(args.a), losses(args.b)
    if [s for s, _ in a] != [s for s, _ in b] or not a:
        print(f"FAIL: steps differ: {len(a)} vs {len(b)}")
        return 1
    for (step, x), (_, y) in zip(a, b):
        if abs(x - y) > args.rtol * max(abs(x), abs(y)):
            print(f"FAIL: step {step}: loss {x!r} vs {y!r}")
            return 1
    print(f"PASS: {len(a)} steps agree within {args.rtol}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
