#!/usr/bin/env python3
"""The real-model suite through kiln on each device, against onnxruntime.

    run.py [--out DIR] [--devices cpu,opencl:0,vulkan:0] [--only name,name] [--rounds 2]
           [--kiln-bench build/bin/kiln_model_bench] [--json results.json] [--capture]

For every exported model (export.py's OUT/<model>-<exporter>/) and device: kiln imports it
with its inputs' shapes only, runs it once (the first call compiles), then ten times, and
compares with onnxruntime's outputs (kiln_model_bench: rtol 1e-3, atol 1e-4 of the output's
largest magnitude). onnxruntime is timed in this process between kiln's processes (session
creation, median of ten runs after two, two threads), so both see the same machine; each
model's files are read once before, so both import from the page cache. Prints
a Markdown table: imports?, correct per device, import time beside onnxruntime's session
creation, steady time beside onnxruntime's run.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnx import numpy_helper, TensorProto

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


def load_pb(path: Path) -> np.ndarray:
    t = TensorProto()
    t.ParseFromString(path.read_bytes())
    return numpy_helper.to_array(t)


def time_ort(model_dir: Path) -> tuple[float, float]:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    opts.inter_op_num_threads = 1
    t0 = time.perf_counter()
    sess = ort.InferenceSession(str(model_dir / "model.onnx"), opts, providers=["CPUExecutionProvider"])
    session_s = time.perf_counter() - t0
    names = [i.name for i in sess.get_inputs()]
    feeds = {n: load_pb(model_dir / "test_data_set_0" / f"input_{k}.pb") for k, n in enumerate(names)}
    for _ in range(2):
        sess.run(None, feeds)
    runs = []
    for _ in range(10):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        runs.append(time.perf_counter() - t0)
    return session_s, statistics.median(runs)


def time_kiln(bench: Path, model_dir: Path, device: str, captured: bool) -> dict:
    cmd = [str(bench), str(model_dir), "--device", device] + (["--capture"] if captured else [])
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    line = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return {"status": "crash", "detail": (p.stderr or p.stdout)[-300:]}


def ms(s: float) -> str:
    return f"{s * 1e3:,.1f} ms" if s < 10 else f"{s:,.1f} s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=HERE / "out")
    ap.add_argument("--devices", default="cpu,opencl:0,vulkan:0")
    ap.add_argument("--only", default="")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--kiln-bench", type=Path, default=REPO / "build" / "bin" / "kiln_model_bench")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--capture", action="store_true",
                    help="call each model through kiln::capture (calls after the first replay its plan)")
    args = ap.parse_args()
    devices = args.devices.split(",")
    only = set(filter(None, args.only.split(",")))
    models = sorted(d for d in args.out.iterdir() if (d / "model.onnx").exists())
    if only:
        models = [d for d in models if d.name in only or d.name.rsplit("-", 1)[0] in only]
    rows = []
    for d in models:
        # Both read the model from the page cache: the first reader of a 500 MB file would
        # otherwise pay the disk for the other.
        for f in d.iterdir():
            if f.is_file():
                f.read_bytes()
        ort_times, kiln = [], {dev: [] for dev in devices}
        for _ in range(args.rounds):
            for dev in devices:
                kiln[dev].append(time_kiln(args.kiln_bench, d, dev, args.capture))
            ort_times.append(time_ort(d))
        row = {"model": d.name, "ort_session_s": statistics.median(t[0] for t in ort_times),
               "ort_run_s": statistics.median(t[1] for t in ort_times), "kiln": {}}
        for dev in devices:
            results = kiln[dev]
            ok = [r for r in results if r.get("status") == "ok"]
            row["kiln"][dev] = {
                "status": results[-1].get("status"),
                "detail": results[-1].get("detail", ""),
                "import_s": statistics.median(r["import_s"] for r in ok) if ok else None,
                "first_call_s": statistics.median(r["first_call_s"] for r in ok) if ok else None,
                "steady_s": statistics.median(r["steady_s"] for r in ok) if ok else None,
                "max_abs_error": max((r["max_abs_error"] for r in ok), default=None),
            }
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    head = "| model | ORT session / run |" + "".join(f" {dev}: import / steady (x ORT) |" for dev in devices)
    print("\n" + head + "\n|" + "---|" * (2 + len(devices)))
    for r in rows:
        cells = [r["model"], f"{ms(r['ort_session_s'])} / {ms(r['ort_run_s'])}"]
        for dev in devices:
            k = r["kiln"][dev]
            if k["status"] != "ok":
                cells.append(f"**{k['status']}**")
                continue
            cells.append(f"ok, {ms(k['import_s'])} / {ms(k['steady_s'])} ({k['steady_s'] / r['ort_run_s']:.1f}x)")
        print("| " + " | ".join(cells) + " |")
    failed = [f"{r['model']} on {dev}" for r in rows for dev in devices if r["kiln"][dev]["status"] != "ok"]
    if failed:
        print("\nnot ok: " + ", ".join(failed))
        sys.exit(1)


if __name__ == "__main__":
    main()
