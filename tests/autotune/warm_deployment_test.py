#!/usr/bin/env python3
"""A warm deployment compiles and tunes nothing, and tuning survives concurrency and shipping.

  1. With an empty cache, `KILN_NO_COMPILE=1 kiln run` fails: the proof below can fail.
  2. Four `kiln autotune warmup` processes tune the same folder of IR files into one cache at
     once; all succeed, and the database is intact: no row left Running, no claim left, every
     kernel has its default measured, `PRAGMA integrity_check` is ok.
  3. Every file then runs with KILN_NO_COMPILE=1 KILN_AUTOTUNE=cached: nothing is compiled.
  4. `kiln cache export` of the device, `kiln cache import` into an empty cache elsewhere: the
     same runs compile nothing there either; with `--tuning-only` the rows come and no code.
  5. `kiln cache list|show|stats` describe what is there; `kiln cache clear` empties it.

Usage: warm_deployment_test.py KILN WORKLOAD_DIR SCRATCH_DIR [DEVICE]
"""
import os
import pathlib
import shutil
import sqlite3
import subprocess
import sys


def run(kiln, args, cache, extra_env=None, check=True):
    env = dict(os.environ, KILN_CACHE_DIR=str(cache))
    env.pop("KILN_AUTOTUNE", None)
    env.pop("KILN_NO_COMPILE", None)
    env.update(extra_env or {})
    p = subprocess.run([kiln] + args, env=env, capture_output=True, text=True)
    if check and p.returncode != 0:
        sys.exit(f"FAIL: kiln {' '.join(args)} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def cold_runs_fail(kiln, files, cache, device):
    for f in files:
        p = run(kiln, ["run", str(f), "--device", device], cache, {"KILN_NO_COMPILE": "1"}, check=False)
        if p.returncode == 0 or "KILN_NO_COMPILE" not in p.stderr:
            sys.exit(f"FAIL: {f.name} ran with KILN_NO_COMPILE=1 on an empty cache:\n{p.stderr}")


def warm_runs_compile_nothing(kiln, files, cache, device, where):
    for f in files:
        p = run(kiln, ["run", str(f), "--device", device], cache,
                {"KILN_NO_COMPILE": "1", "KILN_AUTOTUNE": "cached"}, check=False)
        if p.returncode != 0:
            sys.exit(f"FAIL: {f.name} compiled something in the {where} cache:\n{p.stderr}")


def main():
    kiln, workloads, scratch = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
    device = sys.argv[4] if len(sys.argv) > 4 else "cpu"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    files = sorted(workloads.glob("*.kir"))
    cache = scratch / "cache"

    cold_runs_fail(kiln, files, cache, device)

    env = dict(os.environ, KILN_CACHE_DIR=str(cache))
    env.pop("KILN_AUTOTUNE", None)
    procs = [subprocess.Popen([kiln, "autotune", "warmup", str(workloads), "--device", device, "--budget-ms", "400"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    for p in procs:
        out, err = p.communicate()
        if p.returncode != 0:
            sys.exit(f"FAIL: a concurrent warmup exited {p.returncode}\n{out}\n{err}")
    print(out)

    db = sqlite3.connect(cache / "autotune.sqlite")
    if db.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
        sys.exit("FAIL: the database is damaged after concurrent tuning")
    running = db.execute("SELECT count(*) FROM measurements WHERE status = 'running'").fetchone()[0]
    claims = db.execute("SELECT count(*) FROM claims").fetchone()[0]
    keys = db.execute("SELECT count(*) FROM kernels").fetchone()[0]
    defaults = db.execute("SELECT count(*) FROM measurements WHERE variant = 'default' AND status = 'ok'").fetchone()[0]
    rows = db.execute("SELECT count(*) FROM measurements").fetchone()[0]
    db.close()
    if running or claims:
        sys.exit(f"FAIL: {running} rows left running and {claims} claims left after the warmups")
    if keys == 0 or defaults != keys:
        sys.exit(f"FAIL: {keys} tuned kernels but {defaults} measured defaults")
    print(f"{keys} kernels, {rows} variants measured by 4 concurrent warmups")

    warm_runs_compile_nothing(kiln, files, cache, device, "warmed")

    listing = run(kiln, ["cache", "list", "--device", device], cache).stdout
    if f"{keys} tuned kernels" not in listing:
        sys.exit(f"FAIL: kiln cache list does not list {keys} kernels:\n{listing}")
    first_key = listing.splitlines()[1].split()[0]
    shown = run(kiln, ["cache", "show", first_key], cache).stdout
    if "default" not in shown or "ok" not in shown:
        sys.exit(f"FAIL: kiln cache show {first_key} lacks the default's row:\n{shown}")
    run(kiln, ["cache", "stats"], cache)

    bundle = scratch / "tuned.kiln"
    run(kiln, ["cache", "export", str(bundle), "--device", device], cache)
    # --tuning-only takes the rows and no code: the same runs then compile (and fail here).
    rows_only = scratch / "rows-only"
    out = run(kiln, ["cache", "import", "--tuning-only", str(bundle)], rows_only).stdout
    if "compiled kernels left out" not in out:
        sys.exit(f"FAIL: kiln cache import --tuning-only says:\n{out}")
    if len(run(kiln, ["cache", "list", "--device", device], rows_only).stdout.splitlines()) != len(listing.splitlines()):
        sys.exit("FAIL: kiln cache import --tuning-only did not merge the tuning rows")
    cold_runs_fail(kiln, files, rows_only, device)
    shipped = scratch / "shipped"
    run(kiln, ["cache", "import", str(bundle)], shipped)
    warm_runs_compile_nothing(kiln, files, shipped, device, "imported")

    run(kiln, ["cache", "clear", "--device", device], shipped)
    cold_runs_fail(kiln, files, shipped, device)
    print("ok: warm runs compile nothing, here and after export/import")
    return 0


if __name__ == "__main__":
    sys.exit(main())
