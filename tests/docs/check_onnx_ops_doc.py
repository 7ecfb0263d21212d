#!/usr/bin/env python3
"""docs/onnx.md's table of converters and their versions is `kiln import --list-ops`'s output.

    check_onnx_ops_doc.py KILN DOCS/onnx.md
"""
import subprocess
import sys

BEGIN, END = "<!-- kiln import --list-ops -->\n", "<!-- end of kiln import --list-ops -->"


def main():
    kiln, doc = sys.argv[1], sys.argv[2]
    want = subprocess.run([kiln, "import", "--list-ops"], capture_output=True, text=True, check=True).stdout
    text = open(doc).read()
    if BEGIN not in text or END not in text:
        sys.exit(f"{doc}: the markers around the ops table are missing")
    have = text[text.index(BEGIN) + len(BEGIN):text.index(END)]
    if have != want:
        import difflib
        sys.stdout.writelines(difflib.unified_diff(have.splitlines(True), want.splitlines(True), doc, "kiln import --list-ops"))
        sys.exit(f"{doc}: the ops table differs from `kiln import --list-ops`; paste its output between the markers")
    print(f"{doc}: the ops table matches kiln import --list-ops ({want.count(chr(10)) - 2} ops)")


if __name__ == "__main__":
    main()
