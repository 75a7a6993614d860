"""`dinoml generate DIR --prompt "..." --gguf MODEL.gguf`: text in, text out with a compiled
decoder artifact (dinoml.models.decoder: inputs `tokens`/`positions` int64 [seq], output
`logits` [1, vocab] of the last token, KV cache in session states; an artifact compiled with
slots=S runs its sequence in slot 0, and `BatchDecoder` runs several). `--tokens 1,2,3` feeds ids
instead of text (and prints ids).

The prompt is run in chunks of at most the artifact's `seq` maximum (prefill), then one token per
run (decode). The tokenizer is the GGUF file's (dinoml.llm.Tokenizer, C++), the next token comes
from dinoml.llm.Sampler (greedy with --temperature 0); generation stops at an end-of-generation
token, a --stop string or --n tokens. Text is streamed as it is generated. The report gives
prefill/decode tokens/s (timing surface: session.run calls from Python, sampling included) and the
process's peak RSS.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from .. import runtime


def decoder_layout(module: runtime.Module, artifact: str) -> Dict:
    """{"max_seq", "ctx" (positions per sequence), "slots" (sequences per run; 1 without the
    `slots` input), "vocab"} of a decoder artifact (dinoml.models.decoder); ValueError otherwise."""
    names = {t.name for t in module.inputs}
    outs = [o.name for o in module.outputs]
    if names not in ({"tokens", "positions"}, {"tokens", "positions", "slots", "logit_rows"}) or outs != ["logits"]:
        raise ValueError(f"{artifact}: not a decoder artifact (needs inputs tokens, positions [, slots, logit_rows] and "
                         f"output logits; has inputs {sorted(names)}, outputs {outs})")
    with open(os.path.join(artifact, "metadata.json")) as f:
        md = json.load(f)
    dims = {d["name"]: d for d in md["dims"]}
    slots = int(dims["rows"]["max"]) if "slots" in names else 1
    caches = [s for s in md["states"] if s["name"].startswith("cache_k.")]
    rows = int(caches[0]["shape"][1]) if caches else 0
    vocab = module.outputs[0].shape[-1]
    return {"max_seq": int(dims["seq"]["max"]) if "seq" in dims else 1, "ctx": rows // slots, "slots": slots,
            "vocab": int(vocab) if isinstance(vocab, int) else None}


class BatchDecoder:
    """A session of a decoder artifact compiled with slots=S: S sequences, each with its own
    position counter and cache region. `step([(slot, tokens), ...])` runs the tokens of several
    sequences in one run (prefill chunks and decode tokens mixed; at most max_seq tokens in all) and
    returns each entry's last-token logits."""

    def __init__(self, artifact: str, module: Optional[runtime.Module] = None):
        self.module = module or runtime.load(artifact)
        lay = decoder_layout(self.module, artifact)
        if lay["slots"] < 2:
            raise ValueError(f"{artifact}: compiled without slots (one sequence per session): use Decoder, or compile "
                             "with --model-arg slots=S")
        self.max_seq, self.ctx, self.slots, self.vocab = lay["max_seq"], lay["ctx"], lay["slots"], lay["vocab"]
        self.session = self.module.create_session()
        self.pos = [0] * self.slots

    def reset(self, slot: Optional[int] = None):
        """Starts slot `slot` (all slots: None) over at position 0. The old rows need no clearing:
        a token attends only to its slot's positions <= its own, all written before it reads them."""
        if slot is None:
            self.pos = [0] * self.slots
        else:
            self._check_slot(slot)
            self.pos[slot] = 0

    def _check_slot(self, slot: int) -> None:
        if not (isinstance(slot, (int, np.integer)) and 0 <= slot < self.slots):
            raise ValueError(f"slot {slot!r} is out of range: this artifact has slots 0..{self.slots - 1}")

    def step(self, batch: Sequence) -> np.ndarray:
        """batch: [(slot, token ids)], each slot at most once, each with at least one token; the
        tokens go to positions pos[slot], pos[slot] + 1, ... Returns logits [len(batch), vocab]."""
        if not batch:
            raise ValueError("step() needs at least one (slot, tokens) entry")
        if len(batch) > self.slots:
            raise ValueError(f"step() got {len(batch)} entries; this artifact runs at most {self.slots} sequences")
        toks: List[int] = []
        pos: List[int] = []
        slot_of: List[int] = []
        last: List[int] = []
        seen = set()
        for slot, ids in batch:
            self._check_slot(slot)
            if slot in seen:
                raise ValueError(f"slot {slot} appears twice in one step")
            seen.add(slot)
            n = len(ids)
            if n < 1:
                raise ValueError(f"slot {slot}: an entry needs at least one token")
            if self.pos[slot] + n > self.ctx:
                raise ValueError(f"slot {slot}: the KV cache holds {self.ctx} positions per sequence: {self.pos[slot]} "
                                 f"used + {n} new is too many (compile with --model-arg ctx=N)")
            toks.extend(int(t) for t in ids)
            pos.extend(range(self.pos[slot], self.pos[slot] + n))
            slot_of.extend([slot] * n)
            last.append(len(toks) - 1)
        if len(toks) > self.max_seq:
            raise ValueError(f"step() got {len(toks)} tokens; this artifact runs at most {self.max_seq} per step "
                             "(--model-arg max_seq=M)")
        out = self.session.run({"tokens": np.asarray(toks, np.int64), "positions": np.asarray(pos, np.int64),
                                "slots": np.asarray(slot_of, np.int64), "logit_rows": np.asarray(last, np.int64)})
        for slot, ids in batch:
            self.pos[slot] += len(ids)
        return out["logits"]


class Decoder:
    """A session of a decoder artifact and its position counter. An artifact compiled with slots
    runs its one sequence in slot 0."""

    def __init__(self, artifact: str):
        self.module = runtime.load(artifact)
        lay = decoder_layout(self.module, artifact)
        self.max_seq, self.ctx, self.vocab, self.slots = lay["max_seq"], lay["ctx"], lay["vocab"], lay["slots"]
        # A tensor-parallel artifact runs all its ranks together (the group has the session's run/reset).
        self.session = runtime.load_group(artifact) if self.module.world_size > 1 else self.module.create_session()
        self.pos = 0

    def reset(self):
        self.session.reset_states()
        self.pos = 0

    def rewind(self, pos: int):
        """Continues from position `pos`: the cache rows after it are overwritten by the next
        feed, and the attention mask (by absolute position) never reads them before that."""
        if not 0 <= pos <= self.pos:
            raise ValueError(f"cannot rewind to position {pos} (at {self.pos})")
        self.pos = pos

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
            feeds = {"tokens": chunk, "positions": np.arange(self.pos, self.pos + len(chunk), dtype=np.int64)}
            if self.slots > 1:
                feeds["slots"] = np.zeros(len(chunk), np.int64)
                feeds["logit_rows"] = np.array([len(chunk) - 1], np.int64)
            logits = self.session.run(feeds)["logits"]
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


class StopMatcher:
    """Holds back streamed text that may be the start of a stop string; reports a full match."""

    def __init__(self, stops: Sequence[str]):
        self.stops = [s for s in stops if s]
        self.pending = ""
        self.hit = False

    def push(self, text: str) -> str:
        self.pending += text
        for s in self.stops:
            i = self.pending.find(s)
            if i >= 0:
                out, self.pending, self.hit = self.pending[:i], "", True
                return out
        keep = 0
        for s in self.stops:
            for k in range(min(len(s) - 1, len(self.pending)), 0, -1):
                if self.pending.endswith(s[:k]):
                    keep = max(keep, k)
                    break
        out = self.pending[:len(self.pending) - keep]
        self.pending = self.pending[len(self.pending) - keep:]
        return out

    def flush(self) -> str:
        out, self.pending = self.pending, ""
        return out


def run_text(dec: Decoder, tokenizer, sampler, prompt_ids: List[int], max_new: int, stops: Sequence[str] = (),
             on_text: Optional[Callable[[str], None]] = None, reuse_prefix: Optional[List[int]] = None) -> Dict:
    """Prefill `prompt_ids` (after the part of `reuse_prefix`, the ids already in the cache, that it
    starts with), then sample up to `max_new` tokens. Streams text through on_text. Returns
    {"ids": prompt + fed generated ids (what the cache holds), "new": generated ids, "text",
    "stop": "eog"|"stop"|"length"|"context", timings}."""
    from ..llm import StreamDecoder
    common = 0
    if reuse_prefix:
        while common < min(len(reuse_prefix), len(prompt_ids) - 1) and reuse_prefix[common] == prompt_ids[common]:
            common += 1
    if common:
        dec.rewind(common)
    else:
        dec.reset()
    sampler.accept(prompt_ids)
    t0 = time.perf_counter()
    logits = dec.feed(prompt_ids[common:])
    t1 = time.perf_counter()
    stream, stop = StreamDecoder(tokenizer), StopMatcher(stops)
    fed = list(prompt_ids)
    new: List[int] = []
    text, reason = "", "length"
    while len(new) < max_new:
        tok = sampler.sample(logits)
        if tokenizer.is_eog(tok):
            reason = "eog"
            break
        new.append(tok)
        piece = stop.push(stream.push(tok))
        text += piece
        if on_text and piece:
            on_text(piece)
        if stop.hit:
            reason = "stop"
            break
        if len(new) == max_new:
            break
        if dec.pos >= dec.ctx:
            reason = "context"
            break
        logits = dec.feed([tok])
        fed.append(tok)
    if reason != "stop":
        tail = stop.push(stream.flush()) + stop.flush()
        text += tail
        if on_text and tail:
            on_text(tail)
    t2 = time.perf_counter()
    return {"ids": fed, "new": new, "text": text, "stop": reason,
            "prompt_tokens": len(prompt_ids), "reused_tokens": common,
            "prefill_s": t1 - t0, "decode_s": t2 - t1,
            "prefill_tok_s": (len(prompt_ids) - common) / max(t1 - t0, 1e-9),
            "decode_tok_s": max(len(new) - 1, 0) / max(t2 - t1, 1e-9)}


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def add_sampling_args(p: argparse.ArgumentParser, temperature: float) -> None:
    g = p.add_argument_group("sampling (dinoml.llm.Sampler)")
    g.add_argument("--temperature", type=float, default=temperature, help=f"0 = greedy (default {temperature})")
    g.add_argument("--top-k", type=int, default=40, help="keep the k most likely tokens (0 = off; default 40)")
    g.add_argument("--top-p", type=float, default=0.95, help="nucleus mass (1 = off; default 0.95)")
    g.add_argument("--min-p", type=float, default=0.05, help="drop tokens below min_p x the best (0 = off; default 0.05)")
    g.add_argument("--repeat-penalty", type=float, default=1.0, help="1 = off (default)")
    g.add_argument("--repeat-last-n", type=int, default=64, help="tokens the penalties look at (default 64)")
    g.add_argument("--frequency-penalty", type=float, default=0.0, help="minus count x this per seen token (default 0)")
    g.add_argument("--presence-penalty", type=float, default=0.0, help="minus this per seen token (default 0)")
    g.add_argument("--seed", type=int, default=0, help="random seed (default 0)")


def make_sampler(a):
    from ..llm import Sampler
    return Sampler(a.temperature, a.top_k, a.top_p, a.min_p, a.repeat_penalty, a.repeat_last_n, a.seed,
                   a.frequency_penalty, a.presence_penalty)


def find_tokenizer(artifact: str, gguf: Optional[str]):
    """The tokenizer of --gguf FILE, else of ARTIFACT/tokenizer.gguf."""
    from ..llm import Tokenizer
    path = gguf or os.path.join(artifact, "tokenizer.gguf")
    if not os.path.isfile(path):
        raise ValueError("text prompts need the model's GGUF file for its tokenizer: pass --gguf MODEL.gguf "
                         f"(the file the artifact was compiled from); {path} does not exist")
    return Tokenizer.from_gguf(path)


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(prog="dinoml generate", description=__doc__.split("\n\n")[0])
    p.add_argument("artifact", help="artifact directory compiled from examples/llama/model.py")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", "-p", help="prompt text (tokenized with the GGUF file's tokenizer)")
    src.add_argument("--tokens", help="prompt token ids, comma-separated (greedy, prints ids)")
    p.add_argument("--gguf", help="the model's GGUF file (its tokenizer); default ARTIFACT/tokenizer.gguf")
    p.add_argument("--n", type=int, default=None, help="tokens to generate at most (default 128; 32 with --tokens)")
    p.add_argument("--stop", action="append", default=[], help="stop when this string is generated (repeatable)")
    p.add_argument("--chat-template", choices=("auto", "chatml", "llama3", "gemma"), default=None,
                   help="wrap the prompt as one user turn of this chat format (auto: the GGUF file's template)")
    p.add_argument("--system", default=None, help="system message (with --chat-template)")
    p.add_argument("--no-stream", action="store_true", help="print the text at the end instead of as it comes")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--warmup", type=int, default=None, help="untimed runs first (default 1 with --tokens, else 0)")
    add_sampling_args(p, temperature=0.8)
    a = p.parse_args(argv)
    try:
        if a.tokens is not None:
            return _main_tokens(a)
        return _main_text(a)
    except (ValueError, OSError) as e:
        print(f"dinoml generate: error: {e}", file=sys.stderr)
        return 1


def _main_tokens(a) -> int:
    prompt = [int(t) for t in a.tokens.split(",") if t.strip()]
    n = 32 if a.n is None else a.n
    if not prompt or n < 1:
        raise ValueError("--tokens needs at least one id and --n must be >= 1")
    dec = Decoder(a.artifact)
    for _ in range(max(0, 1 if a.warmup is None else a.warmup)):
        generate(a.artifact, prompt, min(n, 2), dec)
    r = generate(a.artifact, prompt, n, dec)
    if a.json:
        print(json.dumps({**{k: v for k, v in r.items() if k != "logits"}, "peak_rss_mib": peak_rss_mib()}))
    else:
        print("tokens:", ",".join(str(t) for t in r["tokens"]))
        print(f"prefill: {len(prompt)} tokens in {r['prefill_s'] * 1e3:.1f} ms = {r['prefill_tok_s']:.1f} tok/s")
        print(f"decode:  {n - 1} tokens in {r['decode_s'] * 1e3:.1f} ms = {r['decode_tok_s']:.1f} tok/s")
        print(f"peak RSS: {peak_rss_mib():.1f} MiB")
    return 0


def chat_prompt(tok, fmt: str, messages) -> List[int]:
    from ..llm import encode_chat
    return encode_chat(tok, fmt, messages)


def _main_text(a) -> int:
    n = 128 if a.n is None else a.n
    if n < 1:
        raise ValueError("--n must be >= 1")
    tok = find_tokenizer(a.artifact, a.gguf)
    dec = Decoder(a.artifact)
    if dec.vocab is not None and dec.vocab != len(tok):
        raise ValueError(f"the tokenizer has {len(tok)} tokens but the artifact's logits have {dec.vocab}: "
                         "--gguf must be the file the artifact was compiled from")
    if a.chat_template:
        msgs = ([("system", a.system)] if a.system else []) + [("user", a.prompt)]
        ids = chat_prompt(tok, a.chat_template, msgs)
    else:
        if a.system:
            raise ValueError("--system needs --chat-template")
        ids = tok.encode(a.prompt, add_special=True, parse_special=False)
    sampler = make_sampler(a)
    for _ in range(max(0, a.warmup or 0)):
        run_text(dec, tok, make_sampler(a), ids, 2)
    stream = not a.no_stream and not a.json
    if stream:
        sys.stdout.write(a.prompt if not a.chat_template else "")
        sys.stdout.flush()

    def emit(t: str):
        sys.stdout.write(t)
        sys.stdout.flush()

    r = run_text(dec, tok, sampler, ids, n, a.stop, emit if stream else None)
    rss = peak_rss_mib()
    if a.json:
        print(json.dumps({"text": r["text"], "tokens": r["new"], "stop": r["stop"], "prompt_tokens": r["prompt_tokens"],
                          "prefill_tok_s": r["prefill_tok_s"], "decode_tok_s": r["decode_tok_s"], "peak_rss_mib": rss},
                         ensure_ascii=False))
        return 0
    if not stream:
        print(r["text"], end="")
    print()
    print(f"[{len(r['new'])} tokens, stop: {r['stop']}; prefill {r['prompt_tokens']} tokens at {r['prefill_tok_s']:.1f} "
          f"tok/s, decode {r['decode_tok_s']:.1f} tok/s; peak RSS {rss:.1f} MiB]", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
