#!/usr/bin/env python3
"""Kills one MPI rank of a running loom-run job and reports how the job ends.

usage: kill_rank.py --rank R --after FILE --within SECONDS -- loom-run --np N ...

Starts the command (loom-run --np N, which runs mpirun, which runs the
ranks), waits until FILE exists (a checkpoint the job saved) and the job has
printed one more step line after that, so that the ranks are mid-step, then
sends SIGKILL to the process of rank R (a loom-run under mpirun whose
environment says OMPI_COMM_WORLD_RANK=R). Prints the job's output, then
"job exited with status X, N s after the kill". Exits 0 when the job ended
with a non-zero status within SECONDS of the kill, else 1 (a job still
running then is killed).
"""
import argparse
import os
import signal
import subprocess
import sys
import threading
import time

# How long the job may take to save its first checkpoint.
START_LIMIT = 300


def descendants(root):
    """Process ids below `root`, from /proc."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                # The command name is in parentheses and may hold spaces.
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def rank_of(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for item in f.read().split(b"\0"):
                if item.startswith(b"OMPI_COMM_WORLD_RANK="):
                    return int(item.split(b"=", 1)[1])
    except OSError:
        pass
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--after", required=True)
    parser.add_argument("--within", type=float, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command

    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           start_new_session=True)
    lines = []

    def read():
        for line in job.stdout:
            lines.append(line.decode(errors="replace"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def fail(message):
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
        job.wait()
        reader.join(5)
        sys.stdout.write("".join(lines))
        print(f"FAIL: {message}")
        return 1

    # Mid-run: the checkpoint is there and a step has begun after it.
    deadline = time.monotonic() + START_LIMIT
    steps_seen = None
    while True:
        if job.poll() is not None:
            return fail(f"the job ended (status {job.returncode}) before the kill")
        if time.monotonic() > deadline:
            return fail(f"no {args.after} and step after it within {START_LIMIT} s")
        steps = sum(line.startswith("step ") for line in lines)
        if steps_seen is None and os.path.exists(args.after):
            steps_seen = steps
        if steps_seen is not None and steps > steps_seen:
            break
        time.sleep(0.05)

    victims = [pid for pid in descendants(job.pid) if rank_of(pid) == args.rank]
    if len(victims) != 1:
        return fail(f"found {len(victims)} processes of rank {args.rank}")
    killed = time.monotonic()
    os.kill(victims[0], signal.SIGKILL)
    try:
        status = job.wait(timeout=args.within)
    except subprocess.TimeoutExpired:
        return fail(f"the job still runs {args.within} s after rank {args.rank} was killed")
    elapsed = time.monotonic() - killed
    reader.join(5)
    sys.stdout.write("".join(lines))
    print(f"job exited with status {status}, {elapsed:.1f} s after the kill")
    if status == 0:
        print("FAIL: the job exited with status 0 after losing a rank")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
