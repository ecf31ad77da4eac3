#!/usr/bin/python3
"""How well the calibrated cost model predicts this machine.

Runs `loom-calibrate` under mpirun to measure this machine and write a
cluster spec, then `loom-calibrate --check` on that spec at GEMM shapes and
message sizes the fit never saw, and prints the predicted-vs-measured table
with, per kind of operation, the geometric mean and the worst of the ratios.
Builds nothing: point it at a build tree (default build/).

usage: benchmarks/cost-model.py [--build DIR] [--ranks N] [--quick] [--keep FILE]
"""

import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile

# The fit uses squares 32..1024 plus a few rectangles, and messages of 8 B
# times powers of 4; these lie in between.
CHECK_SIZES = "48,96,160,320,640,896,200x700x300,1500x100x400,80x2000x120"
CHECK_BYTES = "24,3000,100000,3000000"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--build", default=os.path.join(root, "build"),
                        help="build tree holding bin/loom-calibrate (default build/)")
    parser.add_argument("--ranks", type=int, default=2,
                        help="MPI ranks, one device each (default 2)")
    parser.add_argument("--quick", action="store_true",
                        help="calibrate with loom-calibrate --quick")
    parser.add_argument("--keep", metavar="FILE",
                        help="also copy the calibrated spec to FILE")
    args = parser.parse_args()

    tool = os.path.join(args.build, "bin", "loom-calibrate")
    if not os.access(tool, os.X_OK):
        sys.exit(f"cost-model.py: {tool} not found; build Loom first "
                 "(utils/run-tests.sh --build-only)")
    if not shutil.which("mpirun"):
        sys.exit("cost-model.py: mpirun not found (apt-get install openmpi-bin)")

    env = dict(os.environ)
    if os.geteuid() == 0:  # OpenMPI refuses root unless told twice
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    mpirun = ["mpirun", "-np", str(args.ranks)]
    if args.ranks > (os.cpu_count() or 1):
        mpirun.append("--oversubscribe")

    with tempfile.TemporaryDirectory(prefix="loom-cost-model-") as tmp:
        spec = os.path.join(tmp, "spec.json")
        calibrate = mpirun + [tool, "-o", spec, "--name", "cost-model-benchmark"]
        if args.quick:
            calibrate.append("--quick")
        print("$ " + " ".join(calibrate), flush=True)
        run(calibrate, env)
        if args.keep:
            shutil.copyfile(spec, args.keep)
        check = mpirun + [tool, "--check", spec, "--sizes", CHECK_SIZES,
                          "--bytes", CHECK_BYTES]
        print("\n$ " + " ".join(check), flush=True)
        table = run(check, env)
    summarize(table)


def run(command, env):
    result = subprocess.run(command, env=env, stdout=subprocess.PIPE, text=True)
    sys.stdout.write(result.stdout)
    if result.returncode != 0:
        sys.exit(f"cost-model.py: {command[3]} exited with {result.returncode}")
    return result.stdout


def summarize(table):
    """Geometric mean and worst predicted/measured ratio per operation kind."""
    ratios = {}
    for line in table.splitlines()[1:]:
        kind = line.split(" (")[0].split()[0]
        if line.startswith("send/recv across"):
            kind = "send/recv across nodes"
        ratios.setdefault(kind, []).append(float(line.split()[-1]))
    print("\npredicted/measured by kind (1.00 is a perfect prediction)")
    print(f"{'kind':<24} {'rows':>4} {'geo-mean':>9} {'worst':>9}")
    for kind, values in ratios.items():
        mean = math.exp(sum(math.log(v) for v in values) / len(values))
        worst = max(values, key=lambda v: abs(math.log(v)))
        print(f"{kind:<24} {len(values):>4} {mean:>9.2f} {worst:>9.2f}")


if __name__ == "__main__":
    main()
