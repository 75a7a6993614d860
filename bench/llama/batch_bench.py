"""Batched decoding on CPU (issue 39: "8 concurrent sequences decode at >= 4x the tokens/s of one
sequence"): the ~0.5B llama of bench/llama/bench.py (Q4_0 by default), decode tokens/s of one
sequence against 8 sequences decoding together, same thread count (default 2), one script run.

    OMP_NUM_THREADS=2 .venv/bin/python bench/llama/batch_bench.py [--quant q4_0] [--slots 8] [--sweep] [--json OUT]

One sequence: the plain artifact (`dinoml compile MODEL.gguf --model-arg ctx=256`), one token per
session.run (dinoml.tools.generate.Decoder), greedy. 8 sequences: the artifact compiled with
`--model-arg slots=8` (one session holds 8 KV caches), each step one session.run with the next
token of every sequence (dinoml.tools.generate.BatchDecoder.step), greedy per sequence; decode
tokens/s = 8 x steps / time. The slots artifact running one sequence is reported too. Every
sequence has its own 128-token prompt (prefilled first, untimed), then 32 decode steps are timed;
best of --repeat rounds, each round measuring all three (a busy spell of a shared machine hits all
of them). Timing surface: session.run calls from Python, argmax included. The GGUF file is
bench.py's (.cache/llama-bench/, written once); the artifacts are compiled there too.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "bench", "llama"))

import bench as llama_bench  # noqa: E402  (bench/llama/bench.py: the model file)
import machine  # noqa: E402


def prompts(n: int, length: int):
    return [[1] + [(7 * i + 300 + 977 * s) % 32000 for i in range(length - 1)] for s in range(n)]


def one_sequence(dec, prompt, steps: int) -> float:
    """decode tok/s of one sequence (Decoder or BatchDecoder slot 0)."""
    from dinoml.tools.generate import BatchDecoder
    batched = isinstance(dec, BatchDecoder)
    dec.reset()
    if batched:
        logits = None
        for i in range(0, len(prompt), dec.max_seq):
            logits = dec.step([(0, prompt[i:i + dec.max_seq])])[0]
    else:
        logits = dec.feed(prompt)
    t = time.perf_counter()
    for _ in range(steps):
        tok = int(np.argmax(logits))
        logits = dec.step([(0, [tok])])[0] if batched else dec.feed([tok])
    return steps / (time.perf_counter() - t)


def many_sequences(dec, prompts_, steps: int) -> float:
    """decode tok/s of len(prompts_) sequences decoding together (one run per step)."""
    dec.reset()
    last = []
    for s, p in enumerate(prompts_):  # prefill: one slot per run (max_seq tokens a run)
        for i in range(0, len(p), dec.max_seq):
            logits = dec.step([(s, p[i:i + dec.max_seq])])[0]
        last.append(logits)
    logits = np.stack(last)
    t = time.perf_counter()
    for _ in range(steps):
        logits = dec.step([(s, [int(np.argmax(logits[s]))]) for s in range(len(prompts_))])
    return steps * len(prompts_) / (time.perf_counter() - t)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quant", default="q4_0")
    ap.add_argument("--slots", type=int, default=8)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "2")))
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--steps", type=int, default=32, help="timed decode steps")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--reuse", action="store_true", help="reuse artifacts already in .cache/llama-bench/")
    ap.add_argument("--sweep", action="store_true", help="also: step time for 1..slots sequences decoding together")
    ap.add_argument("--json", help="write the results as JSON")
    a = ap.parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    import dinoml as dml
    from dinoml.models import build_spec
    from dinoml.tools.generate import BatchDecoder, Decoder
    path = llama_bench.model_file(a.quant)
    cache = os.path.dirname(path)
    arts = {}
    for slots in (1, a.slots):
        out = os.path.join(cache, f"art-{a.quant}-slots{slots}")
        if not (a.reuse and os.path.exists(os.path.join(out, "manifest.json"))):
            t = time.perf_counter()
            dml.compile(build_spec(path, ctx=256, max_seq=128, slots=slots), target="cpu", out=out)
            print(f"compiled {os.path.basename(out)} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
        arts[slots] = out
    load0 = os.getloadavg()[0]
    ps = prompts(a.slots, a.prompt)
    single, batch = Decoder(arts[1]), BatchDecoder(arts[a.slots])
    one = one_b = many = 0.0
    for _ in range(a.repeat):  # rounds alternate the three, so a busy spell of the machine hits all of them
        one = max(one, one_sequence(single, ps[0], a.steps))
        one_b = max(one_b, one_sequence(batch, ps[0], a.steps))
        many = max(many, many_sequences(batch, ps, a.steps))
    load = os.getloadavg()[0]
    print(f"\nllama 0.5B {a.quant}, {a.threads} threads, {a.prompt}-token prompts, {a.steps} decode steps, best of "
          f"{a.repeat}; 1-minute load average {load0:.2f} before, {load:.2f} after (this script's own threads add "
          f"{a.threads})")
    print(f"| machine | commit | threads | quant | 1 sequence tok/s | 1 sequence, slots={a.slots} artifact tok/s | "
          f"{a.slots} sequences tok/s (total) | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {machine.cpu_description()} | {machine.commit()} | {a.threads} | {a.quant} | {one:.1f} | {one_b:.1f} | "
          f"{many:.1f} | **{many / one:.2f}×** |")
    sweep = {}
    if a.sweep:
        for _ in range(a.repeat):
            for n in range(1, a.slots + 1):
                sweep[n] = max(sweep.get(n, 0.0), many_sequences(batch, ps[:n], a.steps))
        print("\n| sequences per step | step ms | tok/s (total) | vs 1 sequence, plain artifact |\n|---|---|---|---|")
        for n, r in sweep.items():
            print(f"| {n} | {n / r * 1e3:.2f} | {r:.1f} | {r / one:.2f}× |")
    if a.json:
        meta = {"machine": platform.machine(), "cpu": machine.cpu_description(), "threads": a.threads,
                "commit": machine.commit(), "prompt": a.prompt, "steps": a.steps, "repeat": a.repeat, "load_before": load0,
                "load_after": load,
                "command": "bench/llama/batch_bench.py " + " ".join(sys.argv[1:] if argv is None else argv)}
        with open(a.json, "w") as f:
            json.dump({"meta": meta, "results": {"quant": a.quant, "slots": a.slots, "one_tok_s": one,
                                                 "one_in_slots_artifact_tok_s": one_b, "many_tok_s": many,
                                                 "ratio": many / one,
                                                 "sweep_tok_s": sweep}}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
