#!/usr/bin/env python3
"""One AdamW step of a GPT-2-small block: kiln against torch eager, torch.compile and jax.jit.

    ~/.cache/peers-venv/bin/python benchmarks/train_peers.py --kiln build-release/bin/kiln_train_bench
    ~/.cache/peers-venv/bin/python benchmarks/train_peers.py --check DIR   # after kiln_train_bench --dump DIR

The block is the one benchmarks/train_bench.cpp builds: GPT-2's (pre-norm, 12 heads of 64,
width 768, GELU with tanh, causal), nn.Linear layouts, loss mean(block(x)^2), batch 4 of 128
tokens. A step is the forward, the backward and AdamW's update (lr 1e-4, weight decay 0.01)
of its 12 parameters. Every runner is its own process, run in alternation, `--rounds` times;
each reports the median of `--steps` steps after its warm-up, and its peak resident memory.

--check compares the gradients kiln wrote (kiln_train_bench --dump) with torch's, computed
in float64 from the same parameters and input.
"""
import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

NAMES = ["ln1_w", "ln1_b", "qkv_w", "qkv_b", "proj_w", "proj_b", "ln2_w", "ln2_b", "fc_w", "fc_b", "out_w", "out_b"]
WIDTH, HEADS = 768, 12


def shapes(c=WIDTH):
    return dict(ln1_w=(c,), ln1_b=(c,), qkv_w=(3 * c, c), qkv_b=(3 * c,), proj_w=(c, c), proj_b=(c,),
                ln2_w=(c,), ln2_b=(c,), fc_w=(4 * c, c), fc_b=(4 * c,), out_w=(c, 4 * c), out_b=(c,))


def random_params(rng):
    out = {}
    for k, s in shapes().items():
        out[k] = (1.0 if k.startswith("ln") and k.endswith("_w") else 0.0) + 0.02 * rng.standard_normal(s)
    return {k: v.astype(np.float32) for k, v in out.items()}


def peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---- torch ------------------------------------------------------------------------------

def torch_block(torch, p, x):
    F = torch.nn.functional
    b, t, c = x.shape
    qkv = F.linear(F.layer_norm(x, (c,), p["ln1_w"], p["ln1_b"], 1e-5), p["qkv_w"], p["qkv_b"])
    q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in qkv.split(c, -1))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, c)
    h = x + F.linear(y, p["proj_w"], p["proj_b"])
    m = F.gelu(F.linear(F.layer_norm(h, (c,), p["ln2_w"], p["ln2_b"], 1e-5), p["fc_w"], p["fc_b"]), approximate="tanh")
    return h + F.linear(m, p["out_w"], p["out_b"])


def run_torch(args, compiled):
    import torch
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    p = {k: torch.nn.Parameter(torch.from_numpy(v)) for k, v in random_params(rng).items()}
    x = torch.from_numpy(rng.standard_normal((args.batch, args.tokens, WIDTH)).astype(np.float32))
    opt = torch.optim.AdamW(list(p.values()), lr=1e-4, weight_decay=0.01)

    def loss_fn():
        return torch_block(torch, p, x).pow(2).mean()

    fwd = torch.compile(loss_fn) if compiled else loss_fn

    def step():
        loss = fwd()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    if compiled:
        step_fn = step
        opt.step = torch.compile(opt.step)  # the update compiled too, as a fused optimizer
    else:
        step_fn = step
    return timed(args, lambda: float(step_fn().detach()), warmup=3 if compiled else 2)


# ---- jax --------------------------------------------------------------------------------

def run_jax(args):
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(0)
    params = {k: jnp.asarray(v) for k, v in random_params(rng).items()}
    x = jnp.asarray(rng.standard_normal((args.batch, args.tokens, WIDTH)).astype(np.float32))
    t_ = args.tokens
    causal = jnp.tril(jnp.ones((t_, t_), bool))

    def layer_norm(z, w, b):
        mu = z.mean(-1, keepdims=True)
        var = ((z - mu) ** 2).mean(-1, keepdims=True)
        return (z - mu) / jnp.sqrt(var + 1e-5) * w + b

    def block(p, z):
        b, t, c = z.shape
        qkv = layer_norm(z, p["ln1_w"], p["ln1_b"]) @ p["qkv_w"].T + p["qkv_b"]
        q, k, v = (a.reshape(b, t, HEADS, c // HEADS).transpose(0, 2, 1, 3) for a in jnp.split(qkv, 3, -1))
        s = (q @ k.transpose(0, 1, 3, 2)) / np.sqrt(c // HEADS)
        s = jnp.where(causal, s, -jnp.inf)
        y = (jax.nn.softmax(s, -1) @ v).transpose(0, 2, 1, 3).reshape(b, t, c)
        h = z + y @ p["proj_w"].T + p["proj_b"]
        m = jax.nn.gelu(layer_norm(h, p["ln2_w"], p["ln2_b"]) @ p["fc_w"].T + p["fc_b"], approximate=True)
        return h + m @ p["out_w"].T + p["out_b"]

    def loss_fn(p):
        return (block(p, x) ** 2).mean()

    @jax.jit
    def step(p, m, v, t):
        loss, g = jax.value_and_grad(loss_fn)(p)
        t = t + 1
        lr, b1, b2, eps, wd = 1e-4, 0.9, 0.999, 1e-8, 0.01
        new_p, new_m, new_v = {}, {}, {}
        for k in p:
            new_m[k] = b1 * m[k] + (1 - b1) * g[k]
            new_v[k] = b2 * v[k] + (1 - b2) * g[k] * g[k]
            mhat = new_m[k] / (1 - b1 ** t)
            vhat = new_v[k] / (1 - b2 ** t)
            new_p[k] = p[k] * (1 - lr * wd) - lr * mhat / (jnp.sqrt(vhat) + eps)
        return new_p, new_m, new_v, t, loss

    state = [params, {k: jnp.zeros_like(a) for k, a in params.items()},
             {k: jnp.zeros_like(a) for k, a in params.items()}, jnp.float32(0)]

    def one():
        p, m, v, t, loss = step(*state)
        state[:] = [p, m, v, t]
        return float(loss.block_until_ready())

    return timed(args, one, warmup=2)


def timed(args, fn, warmup):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return dict(median_ms=statistics.median(times), min_ms=min(times), peak_mib=peak_mib())


# ---- the gradient check --------------------------------------------------------------------

def check(directory):
    import torch
    torch.set_num_threads(2)
    p = {k: torch.nn.Parameter(torch.from_numpy(np.load(f"{directory}/{k}.npy")).double()) for k in NAMES}
    x = torch.from_numpy(np.load(f"{directory}/x.npy")).double()
    loss = torch_block(torch, p, x).pow(2).mean()
    loss.backward()
    kiln_loss = float(np.load(f"{directory}/loss.npy"))
    print(f"loss: kiln {kiln_loss:.7f}, torch (f64) {float(loss.detach()):.7f}")
    worst = 0.0
    for k in NAMES:
        ref = p[k].grad.numpy()
        got = np.load(f"{directory}/grad_{k}.npy").astype(np.float64)
        err = np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30)
        worst = max(worst, err)
        print(f"  d loss / d {k:7s} {str(ref.shape):12s} max |kiln - torch| / max |torch| = {err:.2e}")
    ok = worst < 1e-3
    print(f"worst relative difference {worst:.2e}: {'OK' if ok else 'FAILED'} (f32 against f64, limit 1e-3)")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", metavar="DIR", help="compare the gradients kiln_train_bench --dump wrote with torch's")
    ap.add_argument("--kiln", help="path of kiln_train_bench (its row is skipped without it)")
    ap.add_argument("--peer", choices=["torch", "torch-compile", "jax"], help="run one runner in this process")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    if args.check:
        return check(args.check)
    if args.peer:
        r = run_jax(args) if args.peer == "jax" else run_torch(args, args.peer == "torch-compile")
        print(json.dumps(r))
        return 0
    runners = []
    if args.kiln:
        runners.append(("kiln", [args.kiln, "--steps", str(args.steps), "--batch", str(args.batch), "--tokens",
                                 str(args.tokens)]))
    for peer in ("torch", "torch-compile", "jax"):
        runners.append((peer, [sys.executable, __file__, "--peer", peer, "--steps", str(args.steps), "--batch",
                               str(args.batch), "--tokens", str(args.tokens), "--threads", str(args.threads)]))
    results = {name: [] for name, _ in runners}
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    for rnd in range(args.rounds):
        for name, cmd in runners:
            out = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if out.returncode != 0:
                print(f"{name}: failed\n{out.stderr[-2000:]}", file=sys.stderr)
                continue
            if name == "kiln":
                m = re.search(r"median ([0-9.]+) ms.*peak RSS ([0-9.]+) MiB; a step's peak device memory ([0-9.]+) MiB",
                              out.stdout)
                r = dict(median_ms=float(m.group(1)), peak_mib=float(m.group(2)), step_mib=float(m.group(3)))
            else:
                r = json.loads(out.stdout.strip().splitlines()[-1])
            results[name].append(r)
            print(f"round {rnd + 1} {name:14s} {r['median_ms']:9.2f} ms  peak RSS {r['peak_mib']:7.0f} MiB", flush=True)
    print(f"\nGPT-2 block AdamW step, batch {args.batch} x {args.tokens} tokens, {args.threads} threads: "
          f"median of {args.rounds} rounds (each the median of {args.steps} steps)")
    best = min(statistics.median(r["median_ms"] for r in rs) for n, rs in results.items() if rs and n != "kiln")
    print("| runner | step | x fastest peer | peak RSS | a step's peak tensor memory |")
    print("|---|---|---|---|---|")
    for name, rs in results.items():
        if not rs:
            continue
        ms = statistics.median(r["median_ms"] for r in rs)
        step = f"{statistics.median(r['step_mib'] for r in rs):.0f} MiB" if "step_mib" in rs[0] else "-"
        print(f"| {name} | {ms:.1f} ms | {ms / best:.2f}x | {statistics.median(r['peak_mib'] for r in rs):.0f} MiB | {step} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
