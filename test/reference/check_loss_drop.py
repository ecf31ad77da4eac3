#!/usr/bin/env python3
"""Checks that a training run's loss fell: reads the JSON lines that
`loom-run --log-json` writes ({"step": s, "loss": x}), and passes when the
mean loss of the last 10 steps is below RATIO times the first step's loss
(the mean, not the minimum, so one lucky batch does not pass it).

Usage: check_loss_drop.py LOG.jsonl [--ratio 0.6] [--steps N]
  --steps N   also require exactly N lines, steps 1..N in order
"""

import argparse
import json
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log")
    parser.add_argument("--ratio", type=float, default=0.6)
    parser.add_argument("--steps", type=int)
    args = parser.parse_args()

    with open(args.log) as f:
        records = [json.loads(line) for line in f if line.strip()]
    steps = [r["step"] for r in records]
    if args.steps is not None and steps != list(range(1, args.steps + 1)):
        print(f"FAIL: expected steps 1..{args.steps}, got {len(steps)} lines")
        return 1
    first = records[0]["loss"]
    tail = [r["loss"] for r in records[-10:]]
    last = sum(tail) / len(tail)
    ratio = last / first
    verdict = "PASS" if ratio < args.ratio else "FAIL"
    print(f"{verdict}: first loss {first:.4f}, mean of the last {len(tail)} "
          f"{last:.4f}, ratio {ratio:.3f} (bar {args.ratio})")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
