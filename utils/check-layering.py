#!/usr/bin/env python3
"""Checks that no include or link runs back up a layer of Loom.

The compiler's layers, lowest first: dialects/ (the IR), lib/ with
include/loom/ (libraries that are not passes), passes/ (passes and
pipelines), tools/. A file may include, and a target may link, only what
lies in its own layer or below. runtime/ stands apart and is not checked
here. Prints one line per violation and exits 1 if there is any.

usage: check-layering.py SOURCE_ROOT
"""

import os
import re
import sys

LAYERS = ["dialects", "lib", "passes", "tools"]
SOURCE_SUFFIXES = (".h", ".cpp", ".td", ".inc", ".def")


def layer_of_path(path):
    """Layer index of a repository-relative path, or None."""
    first = path.split("/", 1)[0]
    if path.startswith("include/loom/"):
        return LAYERS.index("lib")
    return LAYERS.index(first) if first in LAYERS else None


def layer_of_include(name):
    """Layer index of what `#include "name"` names, or None (same folder,
    upstream, runtime)."""
    if name.startswith("loom/"):
        return LAYERS.index("lib")
    first = name.split("/", 1)[0]
    return LAYERS.index(first) if first in LAYERS else None


def walk(root, predicate):
    for layer in LAYERS + ["include"]:
        top = os.path.join(root, layer)
        for folder, _, files in os.walk(top):
            for name in sorted(files):
                if predicate(name):
                    path = os.path.join(folder, name)
                    yield os.path.relpath(path, root)


def check_includes(root):
    errors = []
    include = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
    for rel in walk(root, lambda n: n.endswith(SOURCE_SUFFIXES)):
        own = layer_of_path(rel)
        if own is None:
            continue
        with open(os.path.join(root, rel), errors="replace") as f:
            for number, line in enumerate(f, 1):
                match = include.match(line)
                if not match:
                    continue
                target = layer_of_include(match.group(1))
                if target is not None and target > own:
                    errors.append(
                        f"{rel}:{number}: includes {match.group(1)} "
                        f"({LAYERS[target]}/ is above {LAYERS[own]}/)")
    return errors


def cmake_commands(text, names):
    """(command, argument list) of each call of `names` in a CMake file."""
    text = re.sub(r"#[^\n]*", "", text)
    pattern = re.compile(r"\b(" + "|".join(names) + r")\s*\(([^)]*)\)")
    for match in pattern.finditer(text):
        yield match.group(1), match.group(2).split()


DEFINE = ["add_mlir_library", "add_mlir_dialect_library", "add_llvm_executable",
          "add_library", "add_executable"]
LINK = ["target_link_libraries", "mlir_target_link_libraries"]


def check_links(root):
    defined = {}  # target -> (layer, CMakeLists.txt)
    files = list(walk(root, lambda n: n == "CMakeLists.txt"))
    texts = {rel: open(os.path.join(root, rel)).read() for rel in files}
    for rel, text in texts.items():
        own = layer_of_path(rel)
        if own is None:
            continue
        for _, args in cmake_commands(text, DEFINE):
            if args:
                defined[args[0]] = (own, rel)
    errors = []
    for rel, text in texts.items():
        for _, args in cmake_commands(text, LINK):
            if not args or args[0] not in defined:
                continue
            own, _ = defined[args[0]]
            for library in args[1:]:
                if library in defined and defined[library][0] > own:
                    layer, where = defined[library]
                    errors.append(
                        f"{rel}: {args[0]} ({LAYERS[own]}/) links {library} "
                        f"({LAYERS[layer]}/, {where})")
    return errors


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    root = sys.argv[1]
    if not os.path.isdir(os.path.join(root, "lib")):
        print(f"check-layering: {root}: no lib/ folder", file=sys.stderr)
        return 2
    errors = check_includes(root) + check_links(root)
    for error in errors:
        print(f"check-layering: {error}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
