# lit configuration for kiln's IR tests: every *.kir file under tests/ir runs its RUN lines
# with `kiln`, `FileCheck` and `not` from this build and LLVM 19.
import os
import lit.formats

config.name = "kiln-ir"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".kir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(os.path.dirname(config.kiln_bin_dir), "tests", "ir")
config.excludes = ["lit.cfg.py", "lit.site.cfg.py.in"]
config.substitutions.append(("%kiln", os.path.join(config.kiln_bin_dir, "kiln")))
config.substitutions.append(("FileCheck", config.filecheck))
# For tests that build their inputs with a script (ONNX models with python3-onnx).
config.substitutions.append(("%python", config.python))
config.substitutions.insert(0, ("%kiln_src", config.kiln_source_dir))  # before %kiln
config.environment["FILECHECK_OPTS"] = "--dump-input=fail"
# Compiled kernels go to a cache of the test tree's own, never the user's ~/.cache/kiln.
config.environment["KILN_CACHE_DIR"] = os.environ.get("KILN_CACHE_DIR",
                                                      os.path.join(config.test_exec_root, "kiln-cache"))
