"""Checks that every launch in a kiln profile trace counts the FLOPs given on the command line."""
import json
import sys

slices = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
assert slices, "no launches"
want = int(sys.argv[2])
assert all(e["args"]["flops"] == want for e in slices), [(e["name"], e["args"]["flops"]) for e in slices]
print(f"ok: {len(slices)} launches of {want} FLOPs")
