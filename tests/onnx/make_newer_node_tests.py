#!/usr/bin/env python3
"""ONNX's own node tests for the op versions of opsets 18 to 21, for kiln's conformance gate.

    make_newer_node_tests.py OUT_DIR      # with onnx >= 1.16 (the peers' venv has 1.23)

Debian 12's libonnx-testdata stops at opset 17. Newer onnx packages carry the node test
cases as code (onnx.backend.test.case.node: each builds a model and computes its outputs
with ONNX's reference implementation), written at the newest opset the package knows. This
script keeps the tests that exercise an op version of opsets 18 to 21 and writes each at
the lowest of those opsets where every node's version in force has the same semantics as
the version the outputs were computed with (only type constraints differ in between, as
onnx/op_history.py classifies them). A test is kept when, at that opset, some node's
version is newer than at opset 17; its folder is OUT_DIR/node-opset18to21/<test> in the
layout of ONNX's test data, so kiln_onnx_conformance runs it. The output is committed
(tests/onnx/data/); rerun this only to change the selection.
"""
import os
import shutil
import sys
from collections import defaultdict

import onnx
import onnx.defs as defs
from onnx import numpy_helper
from onnx.backend.test.case import node as node_cases

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "onnx"))
from op_history import NOT_TYPES_ONLY, signature  # noqa: E402  (the table's Types-only rule)

GROUP = "node-opset18to21"
TARGETS = (18, 19, 20, 21)
MAX_TEST_BYTES = 256 * 1024  # a few 3-D pooling tests hold ~1 MB of data: smaller ones cover the same


def history():
    h = defaultdict(dict)
    for s in defs.get_all_schemas_with_history():
        if s.domain in ("", "ai.onnx"):
            h[s.name][s.since_version] = s
    return h


def in_force(h, op, opset):
    vs = [v for v in h[op] if v <= opset]
    return max(vs) if vs else 0


def same_semantics(h, op, lo, hi):
    # Every version after `lo` up to `hi` changes only type constraints.
    versions = sorted(h[op])
    chain = [v for v in versions if lo < v <= hi]
    prev = lo
    for v in chain:
        if (op, v) in NOT_TYPES_ONLY or signature(h[op][v]) != signature(h[op][prev]):
            return False
        prev = v
    return True


def all_nodes(graph):
    for n in graph.node:
        yield n
        for a in n.attribute:
            if a.g.node:
                yield from all_nodes(a.g)
            for g in a.graphs:
                yield from all_nodes(g)


def target_opset(h, model):
    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)
    if any(o.domain not in ("", "ai.onnx") for o in model.opset_import):
        return None
    ops = {n.op_type for n in all_nodes(model.graph) if n.domain in ("", "ai.onnx")}
    if not ops or any(op not in h for op in ops):
        return None
    for t in TARGETS:
        if t > opset:
            break
        fits = all(in_force(h, op, t) and same_semantics(h, op, in_force(h, op, t), in_force(h, op, opset)) for op in ops)
        if not fits:
            continue
        newer = any(in_force(h, op, t) > in_force(h, op, 17) for op in ops)
        return t if newer else None
    return None


def write(case, out, opset):
    d = os.path.join(out, GROUP, case.name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    model = case.model
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = opset
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    for i, (inputs, outputs) in enumerate(case.data_sets):
        s = os.path.join(d, f"test_data_set_{i}")
        os.makedirs(s)
        for kind, values, infos in (("input", inputs, model.graph.input), ("output", outputs, model.graph.output)):
            for j, (v, info) in enumerate(zip(values, infos)):
                t = v if isinstance(v, onnx.TensorProto) else numpy_helper.from_array(v, info.name)
                with open(os.path.join(s, f"{kind}_{j}.pb"), "wb") as f:
                    f.write(t.SerializeToString())


def main():
    out = sys.argv[1]
    h = history()
    kept = 0
    for case in node_cases.collect_testcases():
        if case.model is None or not case.data_sets:
            continue
        # Sequences, maps and optionals are not tensors: kiln's gate reads TensorProto files.
        if any(not vi.type.HasField("tensor_type") for vi in list(case.model.graph.input) + list(case.model.graph.output)):
            continue
        t = target_opset(h, case.model)
        if t is None:
            continue
        if sum(len(v.tobytes()) if hasattr(v, "tobytes") else 0 for io in case.data_sets for vs in io for v in vs) > MAX_TEST_BYTES:
            continue
        write(case, out, t)
        kept += 1
    print(f"{kept} node tests written to {os.path.join(out, GROUP)} (onnx {onnx.__version__})")


if __name__ == "__main__":
    main()
