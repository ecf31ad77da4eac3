#!/usr/bin/python3
"""loom-plan's search on Megatron-LM's 145.6B GPT against the published plan.

Runs `loom-plan examples/configs/gpt-145b.json --cluster a100-80g:192
--global-batch 2304 --json` (80 layers, hidden 12288, 96 heads, 2048 tokens,
1536 A100-80GB), times it, and estimates with the same cost model
(`--estimate`) the configuration Narayanan et al. (SC'21, Table 1) published
for it: tensor 8 x pipeline 8 x data 24, micro-batch 1, full activation
recomputation, under 1F1B and interleaved 1F1B (V = 2); and the same
degrees with sequence parallelism and no recomputation (Korthikanti et
al.'s setting). Prints a table of the
chosen plan, the plan chosen with the published degrees pinned, and the
published ones: tokens/s, MFU, peak memory per device,
and the planning time. Exits 1 if the search takes 60 s or more or chooses a
plan slower than a published one. Builds nothing: point it at a build tree
(default build/).

usage: benchmarks/plan-search.py [--build DIR]
"""

import argparse
import json
import os
import subprocess
import sys
import time

INTERLEAVED = ["--schedule", "interleaved-1f1b", "--virtual-stages", "2"]
PUBLISHED = [
    ("published, 1f1b, recompute full", ["--recompute", "full"]),
    ("published, interleaved V=2, rc full", ["--recompute", "full"] + INTERLEAVED),
    ("published degrees, 1f1b, SP", ["--sequence-parallel"]),
    ("published degrees, interleaved V=2, SP", ["--sequence-parallel"] + INTERLEAVED),
]


def describe(plan):
    text = (f"D={plan['dp']} T={plan['tp']} P={plan['pp']} "
            f"mb={plan['micro_batch']}x{plan['num_micro_batches']} "
            f"{plan['schedule']}")
    if plan.get("virtual_stages", 1) > 1:
        text += f" V={plan['virtual_stages']}"
    text += f" ZeRO-{plan['zero']} rc={plan['recompute']}"
    if plan["sequence_parallel"]:
        text += " SP"
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--build", default=os.path.join(root, "build"),
                        help="build tree holding bin/loom-plan (default build/)")
    args = parser.parse_args()
    tool = os.path.join(args.build, "bin", "loom-plan")
    if not os.access(tool, os.X_OK):
        sys.exit(f"plan-search.py: {tool} not found; build Loom first")
    base = [tool, os.path.join(root, "examples", "configs", "gpt-145b.json"),
            "--cluster", "a100-80g:192", "--global-batch", "2304", "--json"]

    start = time.monotonic()
    chosen = json.loads(subprocess.run(base, check=True, capture_output=True,
                                       text=True).stdout)
    wall = time.monotonic() - start
    pinned = json.loads(subprocess.run(
        base + ["--tp", "8", "--pp", "8", "--dp", "24"], check=True,
        capture_output=True, text=True).stdout)
    rows = [("chosen by loom-plan", chosen),
            ("loom-plan, degrees pinned 24x8x8", pinned)]
    for name, flags in PUBLISHED:
        out = subprocess.run(base + ["--estimate", "--dp", "24", "--tp", "8",
                                     "--pp", "8", "--micro-batch", "1"] + flags,
                             check=True, capture_output=True, text=True).stdout
        rows.append((name, json.loads(out)))

    print("GPT 145.6B (Megatron-LM), 1536 x A100-80GB (a100-80g:192), "
          "global batch 2304, 2048 tokens")
    print(f"search: {chosen['plans_considered']} plans, "
          f"{chosen['plans_pruned']} pruned by a bound, "
          f"{chosen['rejected_for_memory']} rejected for memory, "
          f"{chosen['planning_time_s']:.2f} s inside loom-plan, "
          f"{wall:.2f} s wall")
    print(f"{'':38} {'plan':60} {'step s':>8} {'tokens/s':>10} {'MFU':>6} "
          f"{'GiB/dev':>8}")
    for name, e in rows:
        print(f"{name:38} {describe(e['plan']):60} {e['step_time_s']:8.3f} "
              f"{e['tokens_per_s']:10.0f} {100 * e['mfu']:5.1f}% "
              f"{e['memory_bytes']['peak'] / 2**30:8.2f}")
    for name, e in rows[:2]:
        layers = e["plan"].get("stage_layers", [])
        if len(layers) > 1:
            print(f"{name}: layers per stage {layers}")
    best_published = max(e["tokens_per_s"] for _, e in rows[2:])
    ok = wall < 60 and chosen["tokens_per_s"] >= best_published
    print(f"chosen / best published: "
          f"{chosen['tokens_per_s'] / best_published:.3f}x; "
          f"{'OK' if ok else 'FAILED'} (needs >= 1 and < 60 s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
