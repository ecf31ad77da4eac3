#!/usr/bin/python3
"""How long --loom-auto-shard takes to plan GPT-3 175B as the depth grows.

For each depth, writes examples/configs/gpt3-175b.json with that many
layers, imports it (`loom-import`, bf16, micro-batch 1, 2048 tokens), builds
the training step (`loom-opt --loom-autodiff --loom-optimizer --inline`, so
@train_step is one block), and plans it on an 8x8 mesh of A100-80GB nodes
(`--loom-auto-shard="func=train_step mesh=8x8 cluster=a100-80g:8
report=true"`). Prints, per depth, the time of each phase, the problem's size
from the pass's report (nodes, tied nodes, ILP variables) and the planning
time (the pass's wall time from --mlir-timing) relative to the first depth.
Builds nothing: point it at a build tree (default build/).

usage: benchmarks/auto-shard-planning.py [--build DIR] [--layers 24,48,96]
                                         [--mesh 8x8] [--cluster a100-80g:8]
                                         [--no-reuse]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--build", default=os.path.join(root, "build"),
                        help="build tree holding bin/loom-opt (default build/)")
    parser.add_argument("--layers", default="24,48,96",
                        help="depths to plan, comma-separated (default 24,48,96)")
    parser.add_argument("--mesh", default="8x8", help="mesh (default 8x8)")
    parser.add_argument("--cluster", default="a100-80g:8",
                        help="cluster spec (default a100-80g:8)")
    parser.add_argument("--no-reuse", action="store_true",
                        help="plan every layer on its own (reuse-layers=false)")
    args = parser.parse_args()

    bin_dir = os.path.join(args.build, "bin")
    for tool in ("loom-import", "loom-opt"):
        if not os.access(os.path.join(bin_dir, tool), os.X_OK):
            sys.exit(f"auto-shard-planning.py: {bin_dir}/{tool} not found; "
                     "build Loom first (utils/run-tests.sh --build-only)")
    with open(os.path.join(root, "examples", "configs", "gpt3-175b.json")) as f:
        config = json.load(f)

    options = (f"func=train_step mesh={args.mesh} cluster={args.cluster} "
               f"report=true reuse-layers={'false' if args.no_reuse else 'true'}")
    print(f"GPT-3 175B, bf16, micro-batch 1, 2048 tokens; "
          f"--loom-auto-shard=\"{options}\"", flush=True)
    header = (f"{'layers':>6} {'ops':>7} {'tied':>7} {'ILP vars':>9} "
              f"{'import s':>9} {'train s':>8} {'build s':>8} {'solve s':>8} "
              f"{'plan s':>7} {'ratio':>6}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="loom-planning-") as tmp:
        for layers in [int(n) for n in args.layers.split(",")]:
            config["n_layer"] = layers
            cfg = os.path.join(tmp, f"gpt3-{layers}.json")
            with open(cfg, "w") as f:
                json.dump(config, f)
            model = os.path.join(tmp, f"gpt3-{layers}.mlir")
            train = os.path.join(tmp, f"gpt3-{layers}-train.mlir")
            import_s = run([os.path.join(bin_dir, "loom-import"), cfg,
                            "--micro-batch", "1", "--seq-len", "2048",
                            "--precision", "bf16", "-o", model])[0]
            train_s = run([os.path.join(bin_dir, "loom-opt"), model,
                           "--loom-autodiff", "--loom-optimizer", "--inline",
                           "-o", train])[0]
            _, output = run([os.path.join(bin_dir, "loom-opt"), train,
                             f"--loom-auto-shard={options}", "--mlir-timing",
                             "--mlir-print-op-on-diagnostic=false",
                             "-o", os.devnull])
            report = re.search(
                r"(\d+) nodes, (\d+) edges, (\d+) layers \((\d+) solved for, "
                r"(\d+) nodes tied\), ILP (\d+) variables.*built in ([\d.]+) s, "
                r"solved in ([\d.]+) s", output)
            timing = re.search(r"([\d.]+) \(\s*[\d.]+%\)\s+LoomAutoShard", output)
            if not report or not timing:
                sys.exit("auto-shard-planning.py: no report in:\n" + output)
            plan_s = float(timing.group(1))
            rows.append((layers, int(report.group(1)), int(report.group(5)),
                         int(report.group(6)), import_s, train_s,
                         float(report.group(7)), float(report.group(8)), plan_s))
            print(f"  {layers} layers planned in {plan_s:.2f} s", flush=True)

    print(header)
    for (layers, nodes, tied, variables, import_s, train_s, build_s, solve_s,
         plan_s) in rows:
        print(f"{layers:>6} {nodes:>7} {tied:>7} {variables:>9} {import_s:>9.2f} "
              f"{train_s:>8.2f} {build_s:>8.2f} {solve_s:>8.2f} {plan_s:>7.2f} "
              f"{plan_s / rows[0][-1]:>6.2f}")


def run(command):
    """Runs `command`; returns its wall time and its stderr (the remarks and
    the timing report). Exits on failure."""
    print("$ " + " ".join(command), flush=True)
    start = time.monotonic()
    result = subprocess.run(command, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    seconds = time.monotonic() - start
    if result.returncode != 0:
        sys.exit(f"auto-shard-planning.py: failed ({result.returncode}):\n"
                 + result.stderr)
    return seconds, result.stderr


if __name__ == "__main__":
    main()
