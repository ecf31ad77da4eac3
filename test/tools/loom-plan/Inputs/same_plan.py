#!/usr/bin/env python3
"""Checks that two `loom-plan --json` searches chose the same plan.

usage: same_plan.py A.json B.json
Everything but the planning time must be equal: the plan, its estimate
and the alternatives. Prints "same plan: D= T= P=" or the difference.
"""
import json
import sys


def main():
    a, b = (json.load(open(path)) for path in sys.argv[1:3])
    for result in (a, b):
        result.pop("planning_time_s", None)
    if a != b:
        keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        print(f"FAIL: the searches differ in {keys}")
        return 1
    plan = a["plan"]
    print(f"same plan: D={plan['dp']} T={plan['tp']} P={plan['pp']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
