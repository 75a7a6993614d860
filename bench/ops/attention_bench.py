#!/usr/bin/env python3
"""Fused attention benchmark (issue 3): DinoML's streamed scaled_dot_product_attention against
DinoML's unfused form (bmm_rcr · scale → softmax → bmm_rrr, which materialises [L, L] scores)
and PyTorch CPU (matmul → softmax → matmul; torch 1.13 has no fused SDPA), same threads.

    /usr/bin/python3 bench/ops/attention_bench.py [--threads 2] [--seconds 1.5] [--lengths 128,512,2048]
"""
import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
import dinoml as dml  # noqa: E402
import torch  # noqa: E402


def timed(fn, seconds):
    for _ in range(2):
        fn()
    ts, end = [], time.perf_counter() + seconds
    while len(ts) < 5 or time.perf_counter() < end:
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--lengths", default="128,512,2048")
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--dim", type=int, default=64)
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    torch.set_num_threads(args.threads)
    H, D = args.heads, args.dim
    work = Path(tempfile.mkdtemp(prefix="dinoml_attn_"))
    print(f"{'L':>6} {'causal':>6} | {'fused ms':>9} {'unfused ms':>10} {'torch ms':>9} | fused vs unfused, vs torch | max err")
    for L in (int(x) for x in args.lengths.split(",")):
        for causal in (False, True):
            specs = {n: dml.TensorSpec([1, H, L, D], "float32") for n in "qkv"}
            fused = dml.trace(lambda q, k, v: dml.ops.scaled_dot_product_attention(q, k, v, causal=causal),
                              inputs=specs, name="fused")

            def unfused_fn(q, k, v):
                s = dml.ops.bmm_rcr(q, k) * (1.0 / math.sqrt(D))  # (the unfused form is timed non-causal only)
                return dml.ops.bmm_rrr(dml.ops.softmax(s, axis=-1), v)

            unfused = dml.trace(unfused_fn, inputs=specs, name="unfused")
            sf = dml.runtime.load(dml.compile(fused, out=str(work / f"f{L}{causal}")).path).create_session()
            su = dml.runtime.load(dml.compile(unfused, out=str(work / f"u{L}{causal}")).path).create_session()
            rng = np.random.default_rng(L)
            feeds = {n: rng.standard_normal((1, H, L, D)).astype(np.float32) for n in "qkv"}
            tq, tk, tv = (torch.from_numpy(feeds[n]) for n in "qkv")
            mask = torch.triu(torch.full((L, L), float("-inf")), 1) if causal else None

            def torch_fn():
                s = torch.matmul(tq, tk.transpose(-1, -2)) * (1.0 / math.sqrt(D))
                if mask is not None:
                    s = s + mask
                return torch.matmul(torch.softmax(s, dim=-1), tv)

            with torch.no_grad():
                ref = torch_fn().numpy()
                t_torch = timed(torch_fn, args.seconds)
            y = sf.run(feeds)["output"]
            err = float(np.max(np.abs(y - ref)))
            t_f = timed(lambda: sf.run(feeds), args.seconds)
            t_u = timed(lambda: su.run(feeds), args.seconds) if not causal else float("nan")
            print(f"{L:>6} {str(causal):>6} | {t_f:9.3f} {t_u:10.3f} {t_torch:9.3f} | "
                  f"{t_u / t_f:5.2f}x {t_torch / t_f:11.2f}x | {err:.1e}", flush=True)


if __name__ == "__main__":
    main()
