"""`dinoml generate DIR --tokens 1,2,3 --n 32`: greedy decoding with a compiled decoder artifact
(examples/llama/model.py: inputs `tokens`/`positions` int64 [seq], output `logits` [1, vocab] of
the last token, KV cache in session states).

The prompt is run in chunks of at most the artifact's `seq` maximum (prefill), then one token per
run (decode). Prints the generated token ids and tokens/s of both phases (timing surface:
session.run calls from Python, argmax included).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Dict, List, Optional, Sequence

import numpy as np

from .. import runtime


class Decoder:
    """A session of a decoder artifact and its position counter."""

    def __init__(self, artifact: str):
        self.module = runtime.load(artifact)
        with open(os.path.join(artifact, "metadata.json")) as f:
            md = json.load(f)
        names = {t.name for t in self.module.inputs}
        if names != {"tokens", "positions"} or [o.name for o in self.module.outputs] != ["logits"]:
            raise ValueError(f"{artifact}: not a decoder artifact (needs inputs tokens, positions and output logits; "
                             f"has inputs {sorted(names)}, outputs {[o.name for o in self.module.outputs]})")
        seq = [d for d in md["dims"] if d["name"] == "seq"]
        self.max_seq = int(seq[0]["max"]) if seq else 1
        caches = [s for s in md["states"] if s["name"].startswith("cache_k.")]
        self.ctx = int(caches[0]["shape"][1]) if caches else 0
        self.session = self.module.create_session()
        self.pos = 0

    def reset(self):
        self.session.reset_states()
        self.pos = 0

    def feed(self, tokens: Sequence[int]) -> np.ndarray:
        """Runs `tokens` at the next positions (in chunks of max_seq); logits [vocab] of the last one."""
        if not len(tokens):
            raise ValueError("feed() needs at least one token")
        if self.pos + len(tokens) > self.ctx:
            raise ValueError(f"the KV cache holds {self.ctx} positions: {self.pos} used + {len(tokens)} new is too many "
                             "(compile with --model-arg ctx=N)")
        logits = None
        for i in range(0, len(tokens), self.max_seq):
            chunk = np.asarray(tokens[i:i + self.max_seq], dtype=np.int64)
            pos = np.arange(self.pos, self.pos + len(chunk), dtype=np.int64)
            logits = self.session.run({"tokens": chunk, "positions": pos})["logits"]
            self.pos += len(chunk)
        return logits[0]


def generate(artifact: str, prompt: Sequence[int], n: int, decoder: Optional[Decoder] = None) -> Dict:
    """Greedy decoding: {"tokens": n new ids, "logits": [n, vocab] (the logits each id was chosen
    from), "prefill_s", "decode_s", "prefill_tok_s", "decode_tok_s"}."""
    dec = decoder or Decoder(artifact)
    dec.reset()
    t0 = time.perf_counter()
    logits = dec.feed(list(prompt))
    t1 = time.perf_counter()
    out: List[int] = []
    all_logits = [logits]
    for i in range(n):
        tok = int(np.argmax(logits))
        out.append(tok)
        if i + 1 < n:
            logits = dec.feed([tok])
            all_logits.append(logits)
    t2 = time.perf_counter()
    return {"tokens": out, "logits": np.stack(all_logits), "prefill_s": t1 - t0, "decode_s": t2 - t1,
            "prefill_tok_s": len(prompt) / (t1 - t0), "decode_tok_s": (n - 1) / (t2 - t1) if n > 1 else 0.0}


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(prog="dinoml generate", description=__doc__.split("\n\n")[0])
    p.add_argument("artifact", help="artifact directory compiled from examples/llama/model.py")
    p.add_argument("--tokens", required=True, help="prompt token ids, comma-separated")
    p.add_argument("--n", type=int, default=32, help="tokens to generate (default 32)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs first (page-in of constants, thread start)")
    a = p.parse_args(argv)
    try:
        prompt = [int(t) for t in a.tokens.split(",") if t.strip()]
        if not prompt or a.n < 1:
            raise ValueError("--tokens needs at least one id and --n must be >= 1")
        dec = Decoder(a.artifact)
        for _ in range(max(0, a.warmup)):
            generate(a.artifact, prompt, min(a.n, 2), dec)
        r = generate(a.artifact, prompt, a.n, dec)
    except (ValueError, OSError) as e:
        print(f"dinoml generate: error: {e}", file=sys.stderr)
        return 1
    if a.json:
        print(json.dumps({k: v for k, v in r.items() if k != "logits"}))
    else:
        print("tokens:", ",".join(str(t) for t in r["tokens"]))
        print(f"prefill: {len(prompt)} tokens in {r['prefill_s'] * 1e3:.1f} ms = {r['prefill_tok_s']:.1f} tok/s")
        print(f"decode:  {a.n - 1} tokens in {r['decode_s'] * 1e3:.1f} ms = {r['decode_tok_s']:.1f} tok/s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
