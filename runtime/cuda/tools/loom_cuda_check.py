#!/usr/bin/env python3
"""One GPU training check: train an artifact, compare its losses with a log.

usage: loom_cuda_check.py devices --lib libloom_runtime.so [--min N]
       loom_cuda_check.py train --lib libloom_runtime.so --artifact MODEL.loom
           --init INIT.safetensors --data CORPUS.tokens --steps K
           --reference REF.jsonl --rtol R [--mean-rtol M]
           [--ranks N --comm staged|nccl [--mpirun MPIEXEC]] [--min-devices N]
           --log-json OUT.jsonl

What the standalone project's `train/` tests run (runtime/cuda/standalone,
-DLOOM_GPU_ARTIFACTS): `train` trains MODEL.loom with loom_cuda_train.py
(under `MPIEXEC -np N ... --comm C` for --ranks, Open MPI told to run as
root where the user is root), then compares its losses with REF.jsonl (the
CPU or reference interpreter's `--log-json`) step by step: every step
within R relative (|a - b| <= R * max(|a|, |b|), as
test/reference/compare_logs.py), and the mean of the steps' relative
differences within M when given. It prints one line, NAME PASS|FAIL with
the largest and the mean difference, and exits 0, 1 (a difference past the
tolerance, or the training failed: its output's last lines are printed),
or 77 when the runtime library sees fewer than --min-devices devices
(default 1): ctest's skip. A library that does not load is a failure.

`devices` asks the same question alone: exit 0 when the library sees at
least N devices, 77 when it sees fewer, 1 when it does not load. The
devices are counted by the CUDA runtime that the runtime's CUDA driver is
linked against ($LOOM_CUDA_DRIVER, else libloom_cuda_driver.so next to
--lib, as libloom_runtime.so finds it; cudaGetDeviceCount, looked up
through the driver), so the driver linked against Loom's fake device
(LOOM_CUDA_DRIVER=libloom_cuda_driver_fake.so, docs/cuda.md) counts the
fake one.
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys

TOOLS = os.path.dirname(os.path.abspath(__file__))


def cuda_driver(lib):
    """The CUDA driver libloom_runtime.so at `lib` opens (loom_runtime.h)."""
    named = os.environ.get("LOOM_CUDA_DRIVER")
    if named:
        return named
    return os.path.join(os.path.dirname(os.path.abspath(lib)), "libloom_cuda_driver.so")


def device_count(lib):
    """(devices, why) as the CUDA runtime under `lib`'s CUDA driver sees
    them; devices is None when the driver does not load."""
    driver = cuda_driver(lib)
    try:
        runtime = ctypes.CDLL(driver)
    except OSError as error:
        return None, f"{driver} does not load: {error}"
    count = ctypes.c_int(0)
    status = runtime.cudaGetDeviceCount(ctypes.byref(count))
    if status != 0:
        return 0, f"cudaGetDeviceCount failed with CUDA error {status} (no driver, or no device)"
    return count.value, f"{count.value} visible"


def losses(path):
    with open(path) as f:
        return [(r["step"], r["loss"]) for r in map(json.loads, f) if r]


def compare(reference, got, rtol, mean_rtol):
    """(passed, one line saying how far apart the two logs are)."""
    if [s for s, _ in reference] != [s for s, _ in got] or not got:
        return False, f"steps differ: {len(reference)} in the reference, {len(got)} trained"
    diffs = [abs(a - b) / max(abs(a), abs(b)) if a != b else 0.0
             for (_, a), (_, b) in zip(reference, got)]
    worst = max(range(len(diffs)), key=diffs.__getitem__)
    mean = statistics.mean(diffs)
    line = (f"max relative difference {diffs[worst]:.3e} at step {got[worst][0]} "
            f"({reference[worst][1]:.6f} vs {got[worst][1]:.6f}), mean {mean:.3e}, "
            f"last step {reference[-1][1]:.6f} vs {got[-1][1]:.6f}")
    failed = [f"step {got[i][0]} over {rtol}" for i, d in enumerate(diffs) if d > rtol][:1]
    if mean_rtol is not None and mean > mean_rtol:
        failed.append(f"mean over {mean_rtol}")
    return not failed, line + (f"; {', '.join(failed)}" if failed else "")


def train(args):
    devices, why = device_count(args.lib)
    if devices is None:
        print(f"{args.name} FAIL: {why}")
        return 1
    if devices < args.min_devices:
        print(f"{args.name} SKIP: needs {args.min_devices} CUDA device(s), {why}")
        return 77
    log = args.log_json
    command = [sys.executable, os.path.join(TOOLS, "loom_cuda_train.py"), args.artifact, "--lib", args.lib,
               "--init", args.init, "--data", args.data, "--steps", str(args.steps), "--log-json", log]
    env = dict(os.environ)
    if args.ranks:
        command = [args.mpirun, "--oversubscribe", "-np", str(args.ranks)] + command
        command += ["--comm", args.comm, "--timeout", "60"]
        if os.geteuid() == 0:  # Open MPI refuses root unless told twice
            env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    print("$ " + " ".join(command), flush=True)
    if os.path.exists(log):
        os.remove(log)  # a failed run must not be compared with an old log
    done = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(done.stdout, end="")
    if done.returncode or not os.path.exists(log):
        print(f"{args.name} FAIL: training failed (exit {done.returncode})")
        return 1
    # The communication the session reports, from the driver's first line.
    comm = next((line.split("(")[1].split(" ")[0] for line in done.stdout.splitlines()
                 if line.startswith("loom_cuda_train: CUDA backend") and "communication)" in line), "none")
    passed, line = compare(losses(args.reference), losses(log), args.rtol, args.mean_rtol)
    print(f"{args.name} {'PASS' if passed else 'FAIL'} ({comm} communication): {line}")
    return 0 if passed else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    devices = commands.add_parser("devices")
    devices.add_argument("--lib", required=True)
    devices.add_argument("--min", type=int, default=1)
    check = commands.add_parser("train")
    check.add_argument("--lib", required=True)
    check.add_argument("--artifact", required=True)
    check.add_argument("--name", help="what the result line starts with (default: the artifact's name)")
    check.add_argument("--init", required=True)
    check.add_argument("--data", required=True)
    check.add_argument("--steps", type=int, required=True)
    check.add_argument("--reference", required=True)
    check.add_argument("--rtol", type=float, required=True)
    check.add_argument("--mean-rtol", type=float)
    check.add_argument("--ranks", type=int, help="run under MPIEXEC with this many ranks")
    check.add_argument("--comm", choices=["staged", "nccl"], default="staged")
    check.add_argument("--mpirun", default="mpirun")
    check.add_argument("--min-devices", type=int, default=1)
    check.add_argument("--log-json", required=True, help="where the trained losses go")
    args = parser.parse_args()
    if args.command == "devices":
        count, why = device_count(args.lib)
        if count is None:
            print(f"loom_cuda_check: error: {why}", file=sys.stderr)
            return 1
        print(f"CUDA devices: {why}")
        return 0 if count >= args.min else 77
    args.name = args.name or os.path.basename(args.artifact.rstrip("/"))
    return train(args)


if __name__ == "__main__":
    sys.exit(main())
