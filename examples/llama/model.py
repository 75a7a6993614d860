"""A decoder LLM read from a GGUF file: `dinoml compile` of this file is the same as compiling the
GGUF file itself, kept so scripts that name this file keep working. The model code is the
package's metadata-driven decoder, dinoml.models.decoder (llama/mistral/mixtral, qwen2, qwen2moe,
qwen3, qwen3moe, gemma2, gemma3, phi3; docs/architecture.md, "GGUF decoder").

    dinoml compile examples/llama/model.py --gguf model.gguf --target cpu --out out/llama
    dinoml compile model.gguf --target cpu --out out/llama          # the same
    dinoml generate out/llama --tokens 1,2,3 --n 32

One artifact serves prefill and decode. Inputs: `tokens` int64 [seq] and `positions` int64 [seq]
(the absolute position of each token; the caller counts). `seq` has buckets (1 = decode, then
prefill sizes), so each is planned and dispatched separately. Output: `logits` float32
[1, vocab] of the last token. States: `cache_k.N` / `cache_v.N` float32 [n_kv_heads, ctx,
head_dim] per layer.
"""
from __future__ import annotations

import os
import sys

try:
    import dinoml as dml
except ImportError:  # running from a source checkout: the package lives in python/
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                    "python"))
    import dinoml as dml

from dinoml.models import decoder


def build_spec(gguf: str = None, ctx: int = None, max_seq: int = None, policy: str = "auto", name: str = None,
               slots: int = 1, kv_dtype: str = "float32"):
    """The decoder for GGUF file `gguf` (or $DINOML_LLAMA_GGUF) with a KV cache of `ctx` positions
    (default min(context_length, 512)) and prompts of up to `max_seq` tokens per run (default
    min(ctx, 128)); slots=S batches S sequences per run; kv_dtype float32|float16|bfloat16 is the
    cache's dtype (dinoml.models.decoder)."""
    gguf = gguf or os.environ.get("DINOML_LLAMA_GGUF")
    if not gguf:
        raise ValueError("examples/llama/model.py needs a GGUF file: dinoml compile examples/llama/model.py "
                         "--gguf FILE (or DINOML_LLAMA_GGUF=FILE), or dinoml compile FILE.gguf")
    return decoder.build_spec(gguf, ctx=ctx, max_seq=max_seq, policy=policy, name=name, slots=slots,
                               kv_dtype=kv_dtype)


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description="compile a decoder GGUF file for the CPU")
    ap.add_argument("gguf")
    ap.add_argument("--out", default=os.path.join("out", "llama"))
    ap.add_argument("--ctx", type=int, default=None)
    a = ap.parse_args()
    art = dml.compile(build_spec(a.gguf, ctx=a.ctx), target="cpu", out=a.out)
    print(f"compiled -> {art.path}")
