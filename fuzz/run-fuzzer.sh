#!/bin/sh
# Runs one fuzz target as ctest does: every input in REGRESSIONS once (each
# crashed a tool once), then SECONDS of fuzzing from the seeds in CORPUS.
# New inputs and crash reproducers go to a temporary directory, never into
# the source tree; a crash prints the reproducer's path and fails the test.
#
# usage: run-fuzzer.sh FUZZER CORPUS REGRESSIONS SECONDS
set -eu
fuzzer=$1 corpus=$2 regressions=$3 seconds=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -d "$regressions" ] && [ -n "$(ls -A "$regressions")" ]; then
  "$fuzzer" -rss_limit_mb=4096 -timeout=30 "$regressions"/*
fi
mkdir "$work/new" "$work/crashes"
# One job: ctest already runs targets side by side.
if ! "$fuzzer" -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=30 \
     -print_final_stats=1 -artifact_prefix="$work/crashes/" \
     "$work/new" "$corpus"; then
  for crash in "$work"/crashes/*; do
    echo "fuzz: reproducer ($(wc -c < "$crash") bytes, base64):"
    base64 "$crash"
  done
  exit 1
fi
