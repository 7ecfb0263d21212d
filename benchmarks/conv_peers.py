#!/usr/bin/env python3
"""torch's conv2d (oneDNN on the CPU) on the convolution workloads of kiln_conv_bench.

W9: relu(conv3x3(x[4,64,56,56], w[64,64,3,3], pad 1) + bias); W10: depthwise
conv3x3(x[1,96,112,112], w[96,1,3,3], pad 1). Inputs from the peers' generator (the same
bits as benchmarks/peer_inputs.h), so the checksum is comparable with kiln's. Eager and
torch.compile'd (Inductor), two threads, no grad; median of --runs calls after 3 warm-ups.
Run with the peers' venv: ~/.cache/peers-venv/bin/python benchmarks/conv_peers.py
"""
import argparse
import time

import numpy as np
import torch


def peer_input(seed, n, lo, hi):
    i = np.arange(n, dtype=np.uint64)
    with np.errstate(over='ignore'):
        z = (np.uint64(seed) << np.uint64(32)) + np.uint64(0x9E3779B97F4A7C15) + i
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = ((z >> np.uint64(40)).astype(np.float64) + 0.5) * (1.0 / 16777216.0)
    return (lo + (hi - lo) * u).astype(np.float32)


def bench(fn, runs):
    for _ in range(3):
        fn()
    ms = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - t0) * 1e3)
    ms.sort()
    return ms[len(ms) // 2], ms[0], ms[-1]


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--only', default='W9,W10')
    p.add_argument('--runs', type=int, default=21)
    p.add_argument('--threads', type=int, default=2)
    p.add_argument('--no-compile', action='store_true')
    o = p.parse_args()
    torch.set_num_threads(o.threads)
    work = {
        'W9': (4, 64, 56, 64, 1, True),
        'W10': (1, 96, 112, 96, 96, False),
    }
    for name in o.only.split(','):
        n, c, hw, m, groups, bias_relu = work[name]
        x = torch.from_numpy(peer_input(40, n * c * hw * hw, -1, 1).reshape(n, c, hw, hw))
        w = torch.from_numpy(peer_input(41, m * (c // groups) * 9, -0.25, 0.25).reshape(m, c // groups, 3, 3))
        b = torch.from_numpy(peer_input(42, m, -1, 1))

        def f(x, w, b):
            y = torch.nn.functional.conv2d(x, w, b if bias_relu else None, padding=1, groups=groups)
            return torch.relu(y) if bias_relu else y

        flops = 2.0 * n * m * hw * hw * (c // groups) * 9
        impls = [('torch', f)]
        if not o.no_compile:
            impls.append(('torch-compile', torch.compile(f)))
        with torch.no_grad():
            for impl, fn in impls:
                med, lo, hi = bench(lambda: fn(x, w, b), o.runs)
                s = float(fn(x, w, b).double().sum())
                print(f'{name:<4} {impl:<13} median {med:8.3f} ms  min {lo:8.3f}  max {hi:8.3f}  '
                      f'{flops / med / 1e6:6.1f} GFLOP/s  checksum {s:.6g}', flush=True)


if __name__ == '__main__':
    main()
