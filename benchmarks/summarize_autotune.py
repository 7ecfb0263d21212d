#!/usr/bin/env python3
"""Summarizes benchmarks/autotune_bench.sh: default (KILN_AUTOTUNE=off) against tuned
(KILN_AUTOTUNE=cached after a warmup) per workload.

Reads DIR/off.N.jsonl and DIR/cached.N.jsonl (kiln_workload_bench --json, run N of each mode
in alternating processes). Prints a markdown table: the median over runs of kiln's median
time in each mode, the median over runs of tuned / default within run N, and each mode's
ratio to the hand-written loop measured in the same process.
"""
import glob
import json
import os
import statistics
import sys

runs = {}  # (mode, run) -> {workload: {impl: record}}
for path in glob.glob(os.path.join(sys.argv[1], "*.jsonl")):
    mode, run, _ = os.path.basename(path).split(".")
    table = runs.setdefault((mode, int(run)), {})
    for line in open(path):
        if line.strip():
            r = json.loads(line)
            table.setdefault(r["workload"], {})[r["impl"]] = r

indices = sorted({run for (_, run) in runs})
print(f"Runs: {len(indices)} per mode. Times: median over runs; tuned/default: median over runs of the ratio "
      "within run N; x hand: kiln / the hand-written loop in the same process.\n")
print("| workload | default | tuned | tuned / default | ratios per run | default x hand | tuned x hand |")
print("|---|---|---|---|---|---|---|")
for w in ["W1", "W2", "W3", "W4", "W5a", "W5b", "W8"]:
    def figure(mode, run):
        r = runs.get((mode, run), {}).get(w, {}).get("kiln")
        if r is None:
            return None, None
        return (r["us_per_op"] if r["us_per_op"] is not None else r["median_ms"]), r["ratio_to_hand"]
    off = [figure("off", i) for i in indices]
    on = [figure("cached", i) for i in indices]
    if any(t is None for t, _ in off + on):
        continue
    unit = "µs/op" if w == "W8" else "ms"
    ratios = [b[0] / a[0] for a, b in zip(off, on)]
    hand_off = [h for _, h in off if h is not None]
    hand_on = [h for _, h in on if h is not None]
    med = lambda xs: f"{statistics.median(xs):.2f}" if xs else "-"
    print(f"| {w} | {statistics.median(t for t, _ in off):.4g} {unit} | {statistics.median(t for t, _ in on):.4g} {unit} | "
          f"{statistics.median(ratios):.2f} | {', '.join(f'{r:.2f}' for r in ratios)} | {med(hand_off)} | {med(hand_on)} |")
