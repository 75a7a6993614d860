"""DinoML vs llama.cpp on a ~0.5B llama (d 2048, 8 layers, FFN 5632, 16 heads / 4 KV heads,
vocab 32000, random weights) in Q4_0 and Q4_K_M: 128-token prefill and greedy decode tokens/s,
same thread count (default 2), measured in one run, ratios printed.

    OMP_NUM_THREADS=2 PYTHONPATH=python /usr/bin/python3 bench/llama/bench.py [--quants q4_0,q4_k_m] [--json OUT]
        [--ctx 256] [--prompt 128] [--kv float32,float16]

--kv: DinoML's KV cache dtypes (one artifact and one row each, with the cache's bytes; their repeats
interleaved); llama.cpp
runs once per quant with its default F16 cache. --ctx: the KV cache positions of both (a long
--prompt fills the cache, so decode reads it: e.g. --ctx 2048 --prompt 1984).

Timing surface: DinoML = session.run calls from Python (dinoml.tools.generate); llama.cpp =
llama_decode calls from Python (examples/llama/llama_cpp_ref.py, its own process; libllama from
npm @node-llama-cpp/linux-x64, which picks its zen4 CPU backend here). Best of --repeat runs on
each side; the prompt is 128 tokens, decode is 32 tokens after it. GGUF files are written once
into .cache/llama-bench/ (DinoML's writer and reference quantizers, about a minute each).
--json OUT writes {"meta": {cpu, threads, commit, ...}, "results": [...]} for bench/report.py.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "examples", "llama"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import dinoml as dml  # noqa: E402
import machine  # noqa: E402
import make_random_gguf  # noqa: E402
import model as llama_model  # noqa: E402
from dinoml.tools.generate import Decoder, generate  # noqa: E402


def model_file(quant: str) -> str:
    """The 0.5B llama in `quant`, written once into .cache/llama-bench/ (DinoML's writer and
    reference quantizers, about a minute)."""
    cache = os.path.join(ROOT, ".cache", "llama-bench")
    os.makedirs(cache, exist_ok=True)
    path = os.path.join(cache, f"llama-0.5b-{quant}.gguf")
    if not os.path.exists(path):
        t = time.perf_counter()
        make_random_gguf.make(path, "0.5b", quant, seed=0)
        print(f"wrote {path} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quants", default="q4_0,q4_k_m")
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "2")))
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--n", type=int, default=33, help="generated tokens (n-1 decode steps are timed)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="compile with --profile (kernel selection by timing)")
    ap.add_argument("--reuse", action="store_true", help="reuse artifacts already in .cache/llama-bench/")
    ap.add_argument("--json", help="write the results as JSON (bench/report.py reads it)")
    ap.add_argument("--ctx", type=int, default=256, help="KV cache positions (DinoML and llama.cpp)")
    ap.add_argument("--kv", default="float32", help="DinoML KV cache dtypes, comma-separated (float32, float16, bfloat16)")
    a = ap.parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    cache = os.path.join(ROOT, ".cache", "llama-bench")
    os.makedirs(cache, exist_ok=True)
    r = subprocess.run([os.path.join(ROOT, "scripts", "fetch-ggml-ref")], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"llama.cpp reference unavailable: {r.stderr.strip()}", file=sys.stderr)
        return 2
    libdir = r.stdout.strip().splitlines()[-1]
    prompt = [1] + [(7 * i + 300) % 32000 for i in range(a.prompt - 1)]
    if a.prompt + a.n > a.ctx:
        print(f"--prompt {a.prompt} + --n {a.n} does not fit --ctx {a.ctx}", file=sys.stderr)
        return 2
    kvs = [kv.strip() for kv in a.kv.split(",") if kv.strip()]
    rows = []
    for quant in a.quants.split(","):
        path = model_file(quant)
        env = dict(os.environ, DINOML_GGML_REF_LIBDIR=libdir)
        r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "llama", "llama_cpp_ref.py"), path,
                            "--tokens", ",".join(map(str, prompt)), "--n", str(a.n), "--threads", str(a.threads),
                            "--ctx", str(a.ctx), "--repeat", str(a.repeat)], capture_output=True, text=True, env=env)
        if r.returncode != 0:
            print(r.stderr, file=sys.stderr)
            return 1
        ref = json.loads(r.stdout.strip().splitlines()[-1])
        decs, cache_bytes, best = {}, {}, {}
        for kv in kvs:
            suffix = "" if (kv, a.ctx) == ("float32", 256) else f"-{kv}-ctx{a.ctx}"
            out = os.path.join(cache, f"art-{quant}{suffix}")
            if not (a.reuse and os.path.exists(os.path.join(out, "manifest.json"))):
                t = time.perf_counter()
                spec = llama_model.build_spec(path, ctx=a.ctx, max_seq=128, kv_dtype=kv)
                dml.compile(spec, target="cpu", out=out, profile=a.profile)
                print(f"compiled {quant} kv {kv} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
            decs[kv] = (out, Decoder(out))
            # The KV cache: every state of the artifact (cache_k.N / cache_v.N).
            cache_bytes[kv] = sum(int(np.prod(s.shape)) * {"float32": 4, "float16": 2, "bfloat16": 2}[s.dtype]
                                  for s in decs[kv][1].module.states)
        # Repeats interleaved over the KV dtypes, so a shared machine's load changes hit all alike.
        for _ in range(a.repeat):
            for kv, (out, dec) in decs.items():
                res = generate(out, prompt, a.n, dec)
                if kv not in best:
                    best[kv] = res
                best[kv]["prefill_tok_s"] = max(best[kv]["prefill_tok_s"], res["prefill_tok_s"])
                best[kv]["decode_tok_s"] = max(best[kv]["decode_tok_s"], res["decode_tok_s"])
        del decs
        for kv in kvs:
            b = best[kv]
            same = ref["tokens"] == b["tokens"]
            rows.append((quant, kv, cache_bytes[kv], b["prefill_tok_s"], ref["prefill_tok_s"], b["decode_tok_s"],
                         ref["decode_tok_s"], same))
            print(f"{quant} kv {kv}: DinoML prefill {b['prefill_tok_s']:.1f} decode {b['decode_tok_s']:.1f} tok/s "
                  f"(KV cache {cache_bytes[kv] / 2**20:.1f} MiB); llama.cpp prefill {ref['prefill_tok_s']:.1f} decode "
                  f"{ref['decode_tok_s']:.1f} tok/s", file=sys.stderr, flush=True)
    print(f"\nllama 0.5B (d 2048, 8 layers, FFN 5632, 16/4 heads, vocab 32000), {a.threads} threads, ctx {a.ctx}, "
          f"prefill {a.prompt} tokens, decode {a.n - 1} tokens, best of {a.repeat}; llama.cpp: its default F16 KV cache")
    print("| quant | DinoML KV cache | DinoML prefill tok/s | llama.cpp prefill tok/s | ratio | DinoML decode tok/s | "
          "llama.cpp decode tok/s | ratio | same greedy tokens |")
    print("|---|---|---|---|---|---|---|---|---|")
    for q, kv, cb, dp, lp, dd, ld, same in rows:
        print(f"| {q} | {kv} {cb / 2**20:.1f} MiB | {dp:.1f} | {lp:.1f} | {dp / lp:.2f}× | {dd:.1f} | {ld:.1f} | "
              f"{dd / ld:.2f}× | {same} |")
    if a.json:
        meta = {"machine": platform.machine(), "cpu": machine.cpu_description(), "threads": a.threads, "prompt": a.prompt,
                "decode_tokens": a.n - 1, "repeat": a.repeat, "profile": a.profile, "commit": machine.commit(),
                "ctx": a.ctx, "command": "bench/llama/bench.py " + " ".join(sys.argv[1:] if argv is None else argv)}
        results = [{"quant": q, "kv_dtype": kv, "kv_cache_bytes": cb, "dinoml_prefill_tok_s": dp,
                    "llama_cpp_prefill_tok_s": lp, "dinoml_decode_tok_s": dd, "llama_cpp_decode_tok_s": ld,
                    "same_greedy_tokens": same} for q, kv, cb, dp, lp, dd, ld, same in rows]
        with open(a.json, "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
