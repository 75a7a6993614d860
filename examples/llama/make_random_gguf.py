"""Writes a llama-architecture GGUF file with random weights and a minimal vocabulary (enough for
llama.cpp to load it), with DinoML's GGUF writer and reference quantizers (dml.gguf.write).

    python examples/llama/make_random_gguf.py out/tiny.gguf --quant q4_k_m
    python examples/llama/make_random_gguf.py out/llama-0.5b-q4_0.gguf --preset 0.5b --quant q4_0

Presets: "tiny" (4 layers, d 256, 8 heads / 2 KV heads, FFN 512, vocab 1000) and "0.5b" (8 layers,
d 2048, 16 heads / 4 KV heads, FFN 5632, vocab 32000). Quant mixes: "f32"; "q4_k_m" (llama.cpp's
Q4_K_M recipe: q6_K for attn_v, ffn_down and output, q4_K for the other matrices and the
embedding); "q4_0" (every matrix q4_0, output q6_K, as llama-quantize does). Norms stay f32.

Weights are scaled so activations stay O(1) and the logits spread (std ≈ 3): greedy decoding then
has clear winners, which is what a comparison of two implementations needs. The output projections
of each block (attn_output, ffn_down) have gain `out_gain` (default 0.1, `--out-gain`): the residual
stream dominates, as in a trained model, instead of every layer rewriting it. With 0.25 the tiny
model's logits move by ~1.3e-2 of max |logit| when llama.cpp only switches its KV cache between F16
and F32 (activation-quantization noise); with 0.1 that self-difference is 0.74e-2..0.89e-2 (5 seeds),
below the 1e-2 that tests/python/test_llama.py checks.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

try:
    import dinoml as dml
except ImportError:  # running from a source checkout
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                    "python"))
    import dinoml as dml

PRESETS = {
    "tiny": dict(n_layers=4, dim=256, n_heads=8, n_kv_heads=2, ffn=512, vocab=1000, ctx=2048),
    "0.5b": dict(n_layers=8, dim=2048, n_heads=16, n_kv_heads=4, ffn=5632, vocab=32000, ctx=2048),
}
FILE_TYPE = {"f32": 0, "q4_0": 2, "q4_k_m": 15}  # llama_ftype numbers (general.file_type)


def tensor_type(name: str, quant: str) -> str:
    if quant == "f32" or name.endswith("norm.weight"):
        return "f32"
    if quant == "q4_0":
        return "q6_K" if name == "output.weight" else "q4_0"
    if quant == "q4_k_m":
        six = name == "output.weight" or name.endswith("attn_v.weight") or name.endswith("ffn_down.weight")
        return "q6_K" if six else "q4_K"
    raise ValueError(f"unknown quant mix {quant!r} (f32, q4_0, q4_k_m)")


def vocabulary(n: int):
    """<unk>, <s>, </s>, the 256 byte tokens, then plain pieces: llama.cpp's SPM vocab layout."""
    if n < 259 + 1:
        raise ValueError(f"vocab {n} is too small: 3 special + 256 byte tokens + at least one piece")
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    for i in range(n - len(tokens)):
        tokens.append(f"\u2581t{i}")
        types.append(1)
    scores = [0.0] * 259 + [-float(i) for i in range(n - 259)]
    return tokens, scores, types


def vocab_metadata(path: str):
    """The `tokenizer.*` keys of another GGUF file (e.g. a vocab-only one from
    dinoml.tools.tokenizer_json_to_gguf), as (key, type, value) for dml.gguf.write, and its size."""
    info = dml.gguf.read(path)
    md = [(k, info["metadata_types"][k], v) for k, v in info["metadata"].items() if k.startswith("tokenizer.")]
    return md, len(info["metadata"]["tokenizer.ggml.tokens"])


def make(path: str, preset: str = "tiny", quant: str = "q4_k_m", seed: int = 0, rope_base: float = 10000.0,
         eps: float = 1e-5, out_gain: float = 0.1, vocab_from: str = None, **overrides) -> dict:
    """overrides: preset fields (n_layers, dim, vocab = the vocabulary size, ...). vocab_from: a GGUF
    file whose tokenizer (and chat template) the model takes; the vocabulary size follows it.
    Default: a synthetic SentencePiece-style vocabulary of the preset's size."""
    h = dict(PRESETS[preset])
    h.update(overrides)
    if vocab_from:
        vocab_md, h["vocab"] = vocab_metadata(vocab_from)
    rng = np.random.default_rng(seed)
    d, ff, V = h["dim"], h["ffn"], h["vocab"]
    hd = d // h["n_heads"]
    kvd = hd * h["n_kv_heads"]

    def mat(rows, cols, gain=1.0):
        return (rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(gain / np.sqrt(cols))).astype(np.float32)

    def norm():
        return (1.0 + 0.1 * rng.standard_normal(d, dtype=np.float32)).astype(np.float32)

    tensors = [("token_embd.weight", rng.standard_normal((V, d), dtype=np.float32))]
    for i in range(h["n_layers"]):
        p = f"blk.{i}."
        tensors += [(p + "attn_norm.weight", norm()), (p + "attn_q.weight", mat(d, d)),
                    (p + "attn_k.weight", mat(kvd, d)), (p + "attn_v.weight", mat(kvd, d)),
                    (p + "attn_output.weight", mat(d, d, out_gain)), (p + "ffn_norm.weight", norm()),
                    (p + "ffn_gate.weight", mat(ff, d)), (p + "ffn_up.weight", mat(ff, d)),
                    (p + "ffn_down.weight", mat(d, ff, out_gain))]
    tensors += [("output_norm.weight", norm()), ("output.weight", mat(V, d, 3.0))]
    md = [("general.architecture", "str", "llama"), ("general.name", "str", f"dinoml-random-{preset}-{quant}"),
          ("general.file_type", "u32", FILE_TYPE[quant]),
          ("llama.context_length", "u32", h["ctx"]), ("llama.embedding_length", "u32", d),
          ("llama.block_count", "u32", h["n_layers"]), ("llama.feed_forward_length", "u32", ff),
          ("llama.rope.dimension_count", "u32", hd), ("llama.attention.head_count", "u32", h["n_heads"]),
          ("llama.attention.head_count_kv", "u32", h["n_kv_heads"]),
          ("llama.attention.layer_norm_rms_epsilon", "f32", eps), ("llama.rope.freq_base", "f32", rope_base),
          ("llama.vocab_size", "u32", V)]
    if vocab_from:
        md += vocab_md
    else:
        tokens, scores, types = vocabulary(V)
        md += [("tokenizer.ggml.model", "str", "llama"), ("tokenizer.ggml.tokens", "arr[str]", tokens),
               ("tokenizer.ggml.scores", "arr[f32]", scores), ("tokenizer.ggml.token_type", "arr[i32]", types),
               ("tokenizer.ggml.bos_token_id", "u32", 1), ("tokenizer.ggml.eos_token_id", "u32", 2),
               ("tokenizer.ggml.unknown_token_id", "u32", 0), ("tokenizer.ggml.add_bos_token", "bool", False)]
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    dml.gguf.write(path, md, [(n, a, tensor_type(n, quant)) for n, a in tensors])
    return h


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="GGUF file to write")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    ap.add_argument("--quant", choices=sorted(FILE_TYPE), default="q4_k_m")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out-gain", type=float, default=0.1, help="gain of attn_output / ffn_down (default 0.1)")
    ap.add_argument("--vocab", default=None, help="take the tokenizer (and chat template) of this GGUF file")
    ap.add_argument("--layers", type=int, default=None, help="override the preset's layer count")
    a = ap.parse_args(argv)
    kw = {"n_layers": a.layers} if a.layers else {}
    make(a.out, a.preset, a.quant, a.seed, out_gain=a.out_gain, vocab_from=a.vocab, **kw)
    print(f"wrote {a.out} ({a.preset}, {a.quant}, {os.path.getsize(a.out) / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
