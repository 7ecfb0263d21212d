#!/usr/bin/env python3
"""Where each model of the suite spends its time in kiln: `kiln run --profile` on every
model's export, then a markdown table from its Chrome traces.

  benchmarks/models/profile_models.py [--out DIR] [--only name,...] [--device cpu] [--repeat 5]

For each model: launches per call, time per call, the GEMM steps' share of it and the rate
they reach (GFLOP/s, share of the device's multiply-add peak), the other kernels' share and
the rate they move bytes at, and the three slowest kernels (with their share of the call).
The traces stay in DIR/<model>.<device>.json (Perfetto opens them).

(Not named profile.py: Python puts this folder first on sys.path for export.py and run.py,
where a profile.py hides the standard library's, which torch's exporter imports.)
"""
import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=HERE / "out")
    ap.add_argument("--only", default="")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--kiln", type=Path, default=REPO / "build" / "bin" / "kiln")
    a = ap.parse_args()
    only = [x for x in a.only.split(",") if x]
    print("| model | launches / call | ms / call | GEMM: share, GFLOP/s, of peak | other kernels: share, GB/s | slowest kernels |")
    print("|---|---|---|---|---|---|")
    for d in sorted(p for p in a.out.iterdir() if (p / "model.onnx").exists()):
        if only and d.name not in only:
            continue
        meta = json.loads((d / "meta.json").read_text())
        shapes = [f"--input-shape={i['name']}={'x'.join(str(s) for s in i['shape'])}" for i in meta["inputs"]]
        trace = a.out / f"{d.name}.{a.device.replace(':', '')}.json"
        r = subprocess.run([str(a.kiln), "run", str(d / "model.onnx"), *shapes, "--device", a.device, "--profile",
                            "--repeat", str(a.repeat), "--trace", str(trace)], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"| {d.name} | failed: {r.stderr.strip().splitlines()[-1][:80]} | | | | |")
            continue
        peak = re.search(r"multiply-add ([0-9.]+) GFLOP/s", r.stderr)
        fma = float(peak.group(1)) if peak else 0
        events = [e for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "X"]
        total = sum(e["dur"] for e in events) / a.repeat  # us per call
        gemm = [e for e in events if e["cat"] == "gemm"]
        other = [e for e in events if e["cat"] != "gemm"]
        g_us = sum(e["dur"] for e in gemm) / a.repeat
        o_us = sum(e["dur"] for e in other) / a.repeat
        g_rate = sum(e["args"]["flops"] for e in gemm) / max(1e-9, sum(e["dur"] for e in gemm)) / 1e3
        o_rate = sum(e["args"]["bytes"] for e in other) / max(1e-9, sum(e["dur"] for e in other)) / 1e3
        by_kernel = {}
        for e in events:
            by_kernel[e["name"]] = by_kernel.get(e["name"], 0) + e["dur"] / a.repeat
        slowest = sorted(by_kernel.items(), key=lambda kv: -kv[1])[:3]
        names = ", ".join(f"{n.split(' ')[0]} {100 * t / total:.0f}%" for n, t in slowest)
        print(f"| {d.name} | {len(events) // a.repeat} | {total / 1e3:.1f} | {100 * g_us / total:.0f}%, "
              f"{g_rate:.0f}, {100 * g_rate / fma if fma else 0:.0f}% | {100 * o_us / total:.0f}%, {o_rate:.1f} | {names} |",
              flush=True)


if __name__ == "__main__":
    sys.exit(main())
