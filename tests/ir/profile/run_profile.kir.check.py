"""Checks a kiln profile trace: valid JSON in Chrome's trace-event format, one thread-name
record per device, and complete events with a duration, kernel names and their facts."""
import json
import sys

trace = json.load(open(sys.argv[1]))
events = trace["traceEvents"]
names = [e for e in events if e["ph"] == "M"]
slices = [e for e in events if e["ph"] == "X"]
assert [n["args"]["name"] for n in names] == ["cpu"], names
assert slices, "no launches"
for e in slices:
    assert e["dur"] >= 0 and e["ts"] >= 0, e
    assert e["cat"] in ("gemm", "kernel"), e
    assert e["args"]["graph"].startswith("@profiled "), e
    assert e["args"]["bytes"] > 0, e
gemm = [e for e in slices if e["cat"] == "gemm"]
# 2mnk of the conv (2 images x 16 filters x 64 positions x 27 products), then its epilogue's
# add and relu at each of the 2048 outputs.
assert gemm and all(e["args"]["flops"] == 2 * 2 * 16 * 64 * 27 + 2 * 2048 for e in gemm), gemm
assert all(e["name"].startswith("k0 + k0 %y") for e in gemm), gemm
print(f"ok: {len(slices)} launches")
