#!/usr/bin/python3
"""Checks that two safetensors files hold the same tensors, bit for bit.

usage: same_tensors.py A.safetensors B.safetensors
Prints "same: N tensors", or the first difference and exits 1.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "reference"))
from safetensors_io import read_safetensors  # noqa: E402


def main():
    a, _ = read_safetensors(sys.argv[1])
    b, _ = read_safetensors(sys.argv[2])
    if set(a) != set(b):
        print(f"names differ: {sorted(set(a) ^ set(b))}")
        return 1
    for name in a:
        if tuple(a[name].shape) != tuple(b[name].shape) or not bool((a[name] == b[name]).all()):
            print(f"{name} differs")
            return 1
    print(f"same: {len(a)} tensors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
