#!/usr/bin/env python3
"""The decoder-style step of benchmarks/shape_loop_bench.cpp in torch.compile and jax.jit.

    ~/.cache/peers-venv/bin/python benchmarks/shape_loop_peers.py [--max-t 64] [--threads 2]

y = softmax(q k^T / sqrt(d)) h with h = layer_norm(x), q = h Wq, k = h Wk, for x of [T, 768]
at T = 1..max-t, twice: the first pass compiles what each new shape needs, the second runs
what was compiled. torch.compile runs with dynamic=True (one graph for every T, guards on
sizes 0 and 1) and, for comparison, with its default automatic dynamic (a second size makes
the dim dynamic); jax.jit traces and compiles once per distinct shape. Prints each pass's
time and the compiles counted: torch's unique graphs (torch._dynamo's counters), jax's
traces (a Python side effect that runs only while tracing).
"""
import argparse
import math
import os
import time


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-t", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--only", default="torch-dynamic,torch-auto,jax")
    return p.parse_args()


WIDTH = 768


def run_torch(max_t, dynamic):
    import numpy as np
    import torch
    import torch._dynamo
    torch._dynamo.reset()
    torch._dynamo.config.cache_size_limit = 1024
    rng = np.random.default_rng(0)
    wq = torch.tensor(rng.standard_normal((WIDTH, WIDTH), dtype=np.float32) / math.sqrt(WIDTH))
    wk = torch.tensor(rng.standard_normal((WIDTH, WIDTH), dtype=np.float32) / math.sqrt(WIDTH))
    gamma, beta = torch.ones(WIDTH), torch.zeros(WIDTH)
    scale = 1.0 / math.sqrt(WIDTH)

    def step(x):
        h = torch.nn.functional.layer_norm(x, (WIDTH,), gamma, beta, 1e-5)
        q, k = h @ wq, h @ wk
        return torch.softmax((q @ k.T) * scale, dim=-1) @ h

    compiled = torch.compile(step, dynamic=dynamic)
    xs = [torch.tensor(rng.standard_normal((t, WIDTH), dtype=np.float32)) for t in range(1, max_t + 1)]
    name = "torch.compile (dynamic=True)" if dynamic else "torch.compile (automatic dynamic)"
    with torch.no_grad():
        for pass_ in (1, 2):
            before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
            t0 = time.perf_counter()
            for x in xs:
                compiled(x)
            ms = (time.perf_counter() - t0) * 1e3
            graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"] - before
            print(f"{name}, T = 1..{max_t}, pass {pass_}: {ms:.1f} ms; {graphs} graphs compiled")


def run_jax(max_t):
    import jax
    import jax.numpy as jnp
    import numpy as np
    rng = np.random.default_rng(0)
    wq = jnp.asarray(rng.standard_normal((WIDTH, WIDTH), dtype=np.float32) / math.sqrt(WIDTH))
    wk = jnp.asarray(rng.standard_normal((WIDTH, WIDTH), dtype=np.float32) / math.sqrt(WIDTH))
    scale = 1.0 / math.sqrt(WIDTH)
    traces = [0]

    @jax.jit
    def step(x):
        traces[0] += 1  # runs while tracing only: one per compiled shape
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        h = (x - mean) / jnp.sqrt(var + 1e-5)
        q, k = h @ wq, h @ wk
        return jax.nn.softmax((q @ k.T) * scale, axis=-1) @ h

    xs = [jax.device_put(rng.standard_normal((t, WIDTH), dtype=np.float32)) for t in range(1, max_t + 1)]
    for pass_ in (1, 2):
        before = traces[0]
        t0 = time.perf_counter()
        for x in xs:
            step(x).block_until_ready()
        ms = (time.perf_counter() - t0) * 1e3
        print(f"jax.jit, T = 1..{max_t}, pass {pass_}: {ms:.1f} ms; {traces[0] - before} shapes compiled")


def main():
    args = parse()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=true")
    only = set(args.only.split(","))
    if "torch-dynamic" in only or "torch-auto" in only:
        import torch
        torch.set_num_threads(args.threads)
    if "torch-dynamic" in only:
        run_torch(args.max_t, True)
    if "torch-auto" in only:
        run_torch(args.max_t, None)
    if "jax" in only:
        run_jax(args.max_t)


if __name__ == "__main__":
    main()
