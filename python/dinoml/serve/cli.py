"""Command line of `dinoml serve` (python -m dinoml.cli serve ...; the C++ `dinoml` forwards it)."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Dict, List

from .app import ServeConfig, serve


def _codecs(items: List[str], models: List[str], chat_format=None) -> Dict[str, object]:
    """--tokenizer NAME=FILE.gguf (or FILE.gguf when exactly one model is served); a model without one
    uses DIR/tokenizer.gguf, the vocabulary `dinoml compile MODEL.gguf` writes."""
    from .codec import codec_from_gguf
    from .models import ModelSpec
    out: Dict[str, object] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep:
            if len(models) != 1:
                raise ValueError(f"--tokenizer {item}: several models are served, name one: --tokenizer NAME=FILE.gguf")
            name, path = ModelSpec.parse(models[0]).name, item
        out[name] = codec_from_gguf(path, chat_format)
    for m in models:
        spec = ModelSpec.parse(m)
        linked = os.path.join(spec.path, "tokenizer.gguf")
        if spec.name not in out and os.path.isfile(linked):
            out[spec.name] = codec_from_gguf(linked, chat_format)
    return out


def main(argv: List[str]) -> int:
    d = ServeConfig()
    p = argparse.ArgumentParser(prog="dinoml serve", description=(
        "Serve artifacts: KServe v2 (/v2) for tensor models, the OpenAI API (/v1) for LLM artifacts, "
        "Prometheus /metrics. Stops gracefully on SIGTERM / SIGINT."))
    p.add_argument("models", nargs="+", metavar="DIR|NAME=DIR", help="artifact directories; the name defaults to "
                   "the directory's name")
    p.add_argument("--host", default=d.host, help=f"address to bind (default {d.host}: this machine only)")
    p.add_argument("--port", type=int, default=d.port, help=f"TCP port (default {d.port})")
    p.add_argument("--threads", type=int, default=d.threads, help="sessions per model and the runtime's CPU thread "
                   "budget shared by all runs (default: the CPUs this process may use)")
    p.add_argument("--max-queue", type=int, default=d.max_queue, help="requests that may wait per model beyond the "
                   f"running ones; more get 503 (default {d.max_queue})")
    p.add_argument("--timeout-ms", type=int, default=d.timeout_ms, help="per-request deadline in ms, queue wait "
                   "included; past it the request gets 504 (default 0: none; KServe requests may set a shorter "
                   "parameters.timeout in microseconds)")
    p.add_argument("--max-body-bytes", type=int, default=d.max_body_bytes,
                   help=f"largest request body accepted; larger ones get 413 (default {d.max_body_bytes})")
    p.add_argument("--tokenizer", action="append", default=[], metavar="NAME=FILE.gguf",
                   help="tokenizer and chat template of an LLM model, read from its GGUF file (repeatable; default: "
                   "DIR/tokenizer.gguf, written by `dinoml compile MODEL.gguf`)")
    p.add_argument("--chat-template", default=None, choices=["chatml", "llama3", "gemma"],
                   help="chat format for the --tokenizer models instead of the one recognised in the GGUF file")
    p.add_argument("--graceful-timeout-s", type=float, default=d.graceful_timeout_s,
                   help=f"on SIGTERM, how long in-flight requests may still run (default {d.graceful_timeout_s})")
    p.add_argument("--log-level", default=d.log_level, choices=["critical", "error", "warning", "info", "debug"])
    a = p.parse_args(argv)
    for flag, v in (("--port", a.port), ("--max-queue", a.max_queue), ("--timeout-ms", a.timeout_ms),
                    ("--threads", a.threads)):
        if v < 0:
            p.error(f"{flag} must be >= 0, got {v}")
    if a.max_body_bytes < 1:
        p.error(f"--max-body-bytes must be >= 1, got {a.max_body_bytes}")
    cfg = ServeConfig(host=a.host, port=a.port, threads=a.threads, max_queue=a.max_queue, timeout_ms=a.timeout_ms,
                      max_body_bytes=a.max_body_bytes, graceful_timeout_s=a.graceful_timeout_s,
                      log_level=a.log_level)
    from ..errors import DinoMLRuntimeError
    try:
        codecs = _codecs(a.tokenizer, a.models, a.chat_template)
        if a.chat_template and not codecs:
            p.error("--chat-template applies to LLM models with a tokenizer (--tokenizer, or DIR/tokenizer.gguf)")
        return serve(a.models, cfg, codecs)
    except (ValueError, OSError, DinoMLRuntimeError) as e:
        print(f"dinoml serve: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
