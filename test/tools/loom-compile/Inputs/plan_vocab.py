#!/usr/bin/env python3
"""Prints plan.json's vocab_size ("none" without one) and the local and
global rows of the token embedding's table, as the first function taking
it declares them."""
import json
import sys

plan = json.load(open(sys.argv[1]))
print("vocab_size", plan.get("vocab_size", "none"))
for fn in plan["functions"]:
    for arg in fn["args"]:
        if arg.get("role") == "param" and arg.get("name") == "transformer.wte.weight":
            print(arg["name"], "rows", arg["shape"][0], "of", arg["global_shape"][0])
            sys.exit(0)
