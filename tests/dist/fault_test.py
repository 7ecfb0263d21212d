#!/usr/bin/env python3
"""A rank that hangs or exits mid-training: the job must end with an error, never hang.

    fault_test.py MPIRUN DIST_FAULT hang|exit

Runs `DIST_FAULT` on two ranks (rank 1 stops before the second all-reduce; rank 0 waits in
it) with a timeout of 3 s for the collectives, and checks that mpirun exits non-zero within
60 s, saying why: kiln's timeout message for a hang, mpirun's for a rank that exited.
"""
import os
import subprocess
import sys
import time

mpirun, program, mode = sys.argv[1:4]
start = time.monotonic()
env = dict(os.environ, KILN_DIST_TIMEOUT="3")
try:
    run = subprocess.run([mpirun, "-np", "2", "--oversubscribe", program, mode], env=env,
                         capture_output=True, text=True, timeout=120)
except subprocess.TimeoutExpired:
    sys.exit(f"fault_test {mode}: the job was still running after 120 s (a silent hang)")
took = time.monotonic() - start
out = run.stdout + run.stderr
print(out)
print(f"fault_test {mode}: mpirun exited {run.returncode} after {took:.1f} s")
assert run.returncode != 0, "the job ended as if nothing had happened"
assert took < 60, f"took {took:.0f} s to stop"
assert "rank 0 step 0" in out, "the first step did not run"
assert "rank 0 step 1" not in out, "rank 0 finished a step without rank 1"
if mode == "hang":
    assert "kiln::dist: rank 0 of 2: all_reduce of f32[1024,256] (1.0 MiB) waited" in out, "no timeout message"
    assert "Ending every rank" in out
else:
    # mpirun names the rank that exited without finalizing.
    assert "exited" in out or "exiting" in out, "mpirun said nothing of the exit"
print(f"fault_test {mode}: ok")
