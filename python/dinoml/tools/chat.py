"""`dinoml chat DIR --gguf MODEL.gguf`: an interactive chat with a compiled decoder artifact.

Each turn renders the whole conversation with the model's chat format (recognised from the GGUF
file's `tokenizer.chat_template`, or --chat-template chatml|llama3|gemma) and feeds only what the
KV cache does not hold yet. The reply streams as it is generated and ends at an end-of-generation
token, a --stop string or --n tokens. Lines: `/reset` starts over, `/exit` (or end of input)
quits. Reads plain lines from stdin, so it works in any terminal (tmux too) and from pipes.
"""
from __future__ import annotations

import argparse
import sys
from typing import List

from .generate import Decoder, add_sampling_args, chat_prompt, find_tokenizer, make_sampler, peak_rss_mib, run_text


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(prog="dinoml chat", description=__doc__.split("\n\n")[0])
    p.add_argument("artifact", help="artifact directory compiled from examples/llama/model.py")
    p.add_argument("--gguf", help="the model's GGUF file (its tokenizer and chat template); default ARTIFACT/tokenizer.gguf")
    p.add_argument("--chat-template", choices=("auto", "chatml", "llama3", "gemma"), default="auto",
                   help="chat format (auto: recognised from the GGUF file's template)")
    p.add_argument("--system", default=None, help="system message")
    p.add_argument("--n", type=int, default=256, help="tokens per reply at most (default 256)")
    p.add_argument("--stop", action="append", default=[], help="end a reply at this string (repeatable)")
    p.add_argument("--prompt-prefix", default="> ", help="input prompt shown before each line (default '> ')")
    add_sampling_args(p, temperature=0.8)
    a = p.parse_args(argv)
    try:
        tok = find_tokenizer(a.artifact, a.gguf)
        dec = Decoder(a.artifact)
        sampler = make_sampler(a)
        if a.chat_template == "auto":
            from ..llm import detect_chat_format
            a.chat_template = detect_chat_format(tok.chat_template)
    except (ValueError, OSError) as e:
        print(f"dinoml chat: error: {e}", file=sys.stderr)
        return 1
    print(f"[dinoml chat: {a.chat_template} format, {dec.ctx} positions of context; /reset, /exit]", flush=True)
    messages = [("system", a.system)] if a.system else []
    cached: List[int] = []
    while True:
        # The prompt goes to stdout (input() would send it to stderr when stdin is a terminal).
        sys.stdout.write(a.prompt_prefix)
        sys.stdout.flush()
        line = sys.stdin.readline()
        if not line:  # end of input
            print()
            break
        line = line.strip()
        if not line:
            continue
        if line == "/exit":
            break
        if line == "/reset":
            messages = [("system", a.system)] if a.system else []
            cached = []
            sampler.reset()
            print("[conversation reset]", flush=True)
            continue
        messages.append(("user", line))
        try:
            ids = chat_prompt(tok, a.chat_template, messages)
            if len(ids) >= dec.ctx:
                raise ValueError(f"the conversation ({len(ids)} tokens) no longer fits the {dec.ctx}-position "
                                 "KV cache: /reset, or compile with a larger --model-arg ctx=N")
            r = run_text(dec, tok, sampler, ids, min(a.n, dec.ctx - len(ids)), a.stop,
                         lambda t: (sys.stdout.write(t), sys.stdout.flush()), reuse_prefix=cached)
        except ValueError as e:
            messages.pop()
            print(f"[error: {e}]", flush=True)
            continue
        cached = r["ids"]
        messages.append(("assistant", r["text"]))
        print(f"\n[{len(r['new'])} tokens, {r['decode_tok_s']:.1f} tok/s, stop: {r['stop']}]", flush=True)
    print(f"[peak RSS {peak_rss_mib():.1f} MiB]", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
