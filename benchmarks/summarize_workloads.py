#!/usr/bin/env python3
"""Summarizes several runs of kiln_workload_bench (one JSON-lines file per run).

For each workload and implementation: the median over runs of each run's median time, and
the median over runs of the ratio to the hand-written loop measured *within* that run (the
machine is shared and noisy: a ratio taken inside one run is worth more than a ratio of
medians taken minutes apart). Prints a markdown table.

  benchmarks/summarize_workloads.py build-release/workload_bench.*.jsonl
"""
import json
import statistics
import sys
from collections import defaultdict

rows = defaultdict(list)  # (workload, impl) -> [record per run]
for path in sys.argv[1:]:
    for line in open(path):
        if line.strip():
            r = json.loads(line)
            rows[(r["workload"], r["impl"])].append(r)

order = ["W1", "W2", "W3", "W4", "W5a", "W5b", "W8"]
impls = ["kiln", "hand-2t", "hand-1t", "eigen-array", "eigen-tensor-tp2"]
print(f"Runs: {len(sys.argv) - 1}. Time: median over runs of each run's median; "
      "x hand: median over runs of the ratio to hand-2t (hand-1t for W8) within the run.\n")
print("| workload | impl | median | runs (median each) | x hand | ratios per run | GB/s | checksum |")
print("|---|---|---|---|---|---|---|---|")
for w in order:
    for impl in impls:
        rs = rows.get((w, impl))
        if not rs:
            continue
        per_op = rs[0]["us_per_op"] is not None
        vals = [r["us_per_op"] if per_op else r["median_ms"] for r in rs]
        unit = "µs/op" if per_op else "ms"
        ratios = [r["ratio_to_hand"] for r in rs if r["ratio_to_hand"] is not None]
        gb = [r["gbps"] for r in rs if r["gbps"] is not None]
        ok = all(r["chk_ok"] for r in rs)
        ratio = f"{statistics.median(ratios):.2f}" if ratios else "-"
        ratio_runs = ", ".join(f"{x:.2f}" for x in ratios) if ratios else "-"
        gbps = f"{statistics.median(gb):.1f}" if gb else "-"
        runs = ", ".join(f"{v:.4g}" for v in vals)
        print(f"| {w} | {impl} | {statistics.median(vals):.4g} {unit} | {runs} | {ratio} | {ratio_runs} | "
              f"{gbps} | {'ok' if ok else 'MISMATCH'} |")
