#!/usr/bin/env python3
"""Checks that kiln's modules depend on each other in one direction only.

Every source file under a module folder, and every header under include/kiln/<module> (public,
installed) or internal/kiln/<module> (kiln's own), may include headers of its own module and
of the modules listed for it below, and nothing else of kiln's. A public header includes no
internal one: an installed header must compile where internal/ is not. The order is the one of DESIGN.md:

    support <- ir <- passes <- codegen <- runtime <- backends <- autotune <- engine <- frontend <- onnx <- train <- dist, tools

(runtime holds what compiled kernels live and run by: the kernel store and its disk cache,
the compile policy, counters, the profiler.)
Exits non-zero and lists every include that points the wrong way.
"""
import pathlib
import re
import sys

ORDER = ["support", "ir", "passes", "codegen", "runtime", "backends", "autotune", "engine", "frontend", "onnx", "train", "dist"]
# The folder of each module's sources (public headers live in include/kiln/<module>).
SOURCE_DIRS = {"support": "support", "ir": "ir", "passes": "passes", "codegen": "codegen",
               "runtime": "runtime", "backends": "backends", "autotune": "autotune", "engine": "engine", "frontend": "frontend", "onnx": "onnx", "train": "train", "dist": "dist"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"kiln/([a-z_]+)/', re.M)
HEADER = re.compile(r'^\s*#\s*include\s+"(kiln/[^"]+)"', re.M)


def allowed(module):
    return set(ORDER[: ORDER.index(module) + 1])


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    bad = []
    for module in ORDER:
        files = list((root / "include" / "kiln" / module).rglob("*.h"))
        files += list((root / "internal" / "kiln" / module).rglob("*.h"))
        for ext in ("*.h", "*.cpp"):
            files += list((root / SOURCE_DIRS[module]).rglob(ext))
        for f in files:
            for dep in INCLUDE.findall(f.read_text()):
                if dep not in ORDER:
                    continue  # kiln/version.h and generated headers
                if dep not in allowed(module):
                    bad.append(f"{f.relative_to(root)}: module '{module}' includes kiln/{dep}/ (a layer above it)")
    for f in (root / "include").rglob("*.h"):
        for h in HEADER.findall(f.read_text()):
            if (root / "internal" / h).exists():
                bad.append(f"{f.relative_to(root)}: a public header includes the internal {h}")
    for line in bad:
        print(line)
    print(f"layering: {len(bad)} include(s) against the layer order {' <- '.join(ORDER)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
