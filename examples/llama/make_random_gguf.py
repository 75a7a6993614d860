"""Writes a decoder GGUF file with random weights and a minimal vocabulary (enough for llama.cpp
to load it), with DinoML's GGUF writer and reference quantizers (dml.gguf.write). llama by
default; `--arch` writes the other architectures DinoML's GGUF decoder reads (ARCH_PRESETS).

    python examples/llama/make_random_gguf.py out/tiny.gguf --quant q4_k_m
    python examples/llama/make_random_gguf.py out/gemma2.gguf --arch gemma2 --quant f32
    python examples/llama/make_random_gguf.py out/llama-0.5b-q4_0.gguf --preset 0.5b --quant q4_0

Presets: "tiny" (4 layers, d 256, 8 heads / 2 KV heads, FFN 512, vocab 1000) and "0.5b" (8 layers,
d 2048, 16 heads / 4 KV heads, FFN 5632, vocab 32000). Quant mixes: "f32"; "q4_k_m" (llama.cpp's
Q4_K_M recipe: q6_K for attn_v, ffn_down and output, q4_K for the other matrices and the
embedding); "q4_0" (every matrix q4_0, output q6_K, as llama-quantize does); "f16". Norms,
biases and MoE routers stay f32.

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


def _dml():
    """dinoml, imported when a writer or reader needs it: the recipe and vocabulary helpers below
    (tensor_type, vocabulary) also serve scripts on machines without the DinoML extension
    (tests/gpu/llm7b_plan.py)."""
    try:
        import dinoml
    except ImportError:  # running from a source checkout
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                        "python"))
        import dinoml
    return dinoml


PRESETS = {
    "tiny": dict(n_layers=4, dim=256, n_heads=8, n_kv_heads=2, ffn=512, vocab=1000, ctx=2048),
    "0.5b": dict(n_layers=8, dim=2048, n_heads=16, n_kv_heads=4, ffn=5632, vocab=32000, ctx=2048),
}
FILE_TYPE = {"f32": 0, "f16": 1, "q4_0": 2, "q4_k_m": 15}  # llama_ftype numbers (general.file_type)


def tensor_type(name: str, quant: str, tied: bool = False) -> str:
    if quant == "f32" or name.endswith(("norm.weight", ".bias", "ffn_gate_inp.weight", "rope_freqs.weight",
                                        "ffn_gate_inp_shexp.weight")):
        return "f32"
    if quant == "f16":
        return "f16"
    out = name == "output.weight" or (tied and name == "token_embd.weight")  # the output head
    if quant == "q4_0":
        return "q6_K" if out else "q4_0"
    if quant == "q4_k_m":
        six = out or name.endswith("attn_v.weight") or name.endswith("ffn_down.weight") or \
            name.endswith("ffn_down_exps.weight")
        return "q6_K" if six else "q4_K"
    raise ValueError(f"unknown quant mix {quant!r} (f32, f16, q4_0, q4_k_m)")


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
    info = _dml().gguf.read(path)
    md = [(k, info["metadata_types"][k], v) for k, v in info["metadata"].items() if k.startswith("tokenizer.")]
    return md, len(info["metadata"]["tokenizer.ggml.tokens"])


# Architecture presets for tests/python/test_llm_architectures.py: tiny shapes that exercise what
# each architecture does differently (head size != dim/heads, sliding windows shorter than the
# test's 44 tokens, soft caps small enough to bend the scores, tied output embeddings).
ARCH_PRESETS = {
    "llama": dict(arch="llama"),
    "llama-rope": dict(arch="llama", n_layers=2, rope_linear=4.0, rope_freqs=True),
    "mixtral": dict(arch="llama", n_layers=2, n_expert=4, n_expert_used=2, ffn=256),
    "qwen2": dict(arch="qwen2", qkv_bias=True, tied=True, rope_base=1e6, ffn_gain=3.0),
    "qwen3": dict(arch="qwen3", head_dim=64, rope_base=1e6),
    "gemma2": dict(arch="gemma2", n_heads=4, head_dim=64, tied=True, swa=8, attn_softcap=2.0, final_softcap=5.0),
    "gemma3": dict(arch="gemma3", n_layers=6, n_heads=4, head_dim=64, tied=True, swa=8, rope_base=1e6,
                   final_softcap=10.0),
    "phi3": dict(arch="phi3", n_layers=2, fused=True),
    "qwen2moe": dict(arch="qwen2moe", n_layers=2, n_expert=4, n_expert_used=2, ffn=128, shexp_ffn=256,
                     qkv_bias=True),
    "qwen3moe": dict(arch="qwen3moe", n_layers=2, n_expert=4, n_expert_used=2, ffn=128, head_dim=64),
}


def make(path: str, preset: str = "tiny", quant: str = "q4_k_m", seed: int = 0, rope_base: float = 10000.0,
         eps: float = 1e-5, out_gain: float = 0.1, vocab_from: str = None, arch: str = "llama", **overrides) -> dict:
    """overrides: preset fields (n_layers, dim, vocab = the vocabulary size, ...). vocab_from: a GGUF
    file whose tokenizer (and chat template) the model takes; the vocabulary size follows it.
    Default: a synthetic SentencePiece-style vocabulary of the preset's size.

    arch: general.architecture (llama, qwen2, qwen2moe, qwen3, qwen3moe, gemma2, gemma3, phi3), written with the
    tensor names and shapes llama.cpp loads for it. Architecture fields (overrides): head_dim
    (attention.key_length; default dim/heads), qkv_bias (q/k/v biases; qwen2 always has them),
    tied (no output.weight; gemma always), fused (phi3: attn_qkv and a [2*ffn] ffn_up), swa
    (attention.sliding_window), attn_softcap / final_softcap (gemma2), n_expert / n_expert_used
    (llama: Mixtral-style experts; qwen2moe, qwen3moe), shexp_ffn (qwen2moe's shared expert),
    rope_base, rope_linear (linear rope scaling factor), rope_freqs (a rope_freqs.weight tensor),
    ffn_gain (ffn_down's gain, default out_gain), attn_post_gain (gemma's post-attention norm
    scale). ARCH_PRESETS names tested combinations."""
    h = dict(PRESETS[preset])
    h.update(overrides)
    if vocab_from:
        vocab_md, h["vocab"] = vocab_metadata(vocab_from)
    rng = np.random.default_rng(seed)
    d, ff, V = h["dim"], h["ffn"], h["vocab"]
    hd = h.get("head_dim") or d // h["n_heads"]
    qd, kvd = hd * h["n_heads"], hd * h["n_kv_heads"]
    gemma = arch in ("gemma2", "gemma3")
    tied = h.get("tied", False) or gemma
    n_expert = h.get("n_expert", 0)
    rope_base = h.get("rope_base", rope_base)
    ffn_gain = h.get("ffn_gain", out_gain)

    def mat(rows, cols, gain=1.0):
        return (rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(gain / np.sqrt(cols))).astype(np.float32)

    def norm(n=d):
        return (1.0 + 0.1 * rng.standard_normal(n, dtype=np.float32)).astype(np.float32)

    def vec(n):
        return (0.1 * rng.standard_normal(n, dtype=np.float32)).astype(np.float32)

    # A tied output reuses the embedding. Rows of norm 0.15 let the blocks, not the token's own
    # embedding (x sqrt(dim) in gemma), dominate the last hidden state (else every step predicts
    # its input token), and an output norm of gain 20 gives the logits an untied head's spread (std ~3).
    embd = rng.standard_normal((V, d), dtype=np.float32) * np.float32(0.15 / np.sqrt(d) if tied else 1.0)
    tensors = [("token_embd.weight", embd.astype(np.float32))]
    for i in range(h["n_layers"]):
        p = f"blk.{i}."
        tensors.append((p + "attn_norm.weight", norm()))
        if h.get("fused"):
            tensors.append((p + "attn_qkv.weight", mat(qd + 2 * kvd, d)))
        else:
            tensors += [(p + "attn_q.weight", mat(qd, d)), (p + "attn_k.weight", mat(kvd, d)),
                        (p + "attn_v.weight", mat(kvd, d))]
        if h.get("qkv_bias") or arch == "qwen2":
            tensors += [(p + "attn_q.bias", vec(qd)), (p + "attn_k.bias", vec(kvd)), (p + "attn_v.bias", vec(kvd))]
        if arch in ("qwen3", "qwen3moe", "gemma3"):
            tensors += [(p + "attn_q_norm.weight", norm(hd)), (p + "attn_k_norm.weight", norm(hd))]
        tensors.append((p + "attn_output.weight", mat(d, qd, out_gain)))
        if gemma:
            attn_post_gain = np.float32(h.get("attn_post_gain", 1.0))
            tensors.append((p + "post_attention_norm.weight", norm() * attn_post_gain))
        tensors.append((p + "ffn_norm.weight", norm()))
        if n_expert:
            # Router logits of spread ~2 so the top-k choice is clear-cut; ggml ne [d, ff, E] = [E, ff, d].
            tensors += [(p + "ffn_gate_inp.weight", mat(n_expert, d, 2.0)),
                        (p + "ffn_gate_exps.weight", np.stack([mat(ff, d) for _ in range(n_expert)])),
                        (p + "ffn_up_exps.weight", np.stack([mat(ff, d) for _ in range(n_expert)])),
                        (p + "ffn_down_exps.weight", np.stack([mat(d, ff, ffn_gain) for _ in range(n_expert)]))]
            if h.get("shexp_ffn"):  # qwen2moe's shared expert and its sigmoid gate
                fs = h["shexp_ffn"]
                tensors += [(p + "ffn_gate_inp_shexp.weight", (rng.standard_normal(d, dtype=np.float32)
                                                                / np.float32(np.sqrt(d))).astype(np.float32)),
                            (p + "ffn_gate_shexp.weight", mat(fs, d)), (p + "ffn_up_shexp.weight", mat(fs, d)),
                            (p + "ffn_down_shexp.weight", mat(d, fs, ffn_gain))]
        elif h.get("fused"):
            tensors += [(p + "ffn_up.weight", mat(2 * ff, d)), (p + "ffn_down.weight", mat(d, ff, ffn_gain))]
        else:
            tensors += [(p + "ffn_gate.weight", mat(ff, d)), (p + "ffn_up.weight", mat(ff, d)),
                        (p + "ffn_down.weight", mat(d, ff, ffn_gain))]
        if gemma:
            tensors.append((p + "post_ffw_norm.weight", norm()))
    if h.get("rope_freqs"):  # llama 3.x-style per-frequency divisors of the rope angles
        tensors.append(("rope_freqs.weight", (1.0 + 7.0 * rng.random(hd // 2)).astype(np.float32)))
    tensors.append(("output_norm.weight", norm() * np.float32(20.0 if tied else 1.0)))
    if not tied:
        tensors.append(("output.weight", mat(V, d, 3.0)))
    a = arch
    md = [("general.architecture", "str", arch), ("general.name", "str", f"dinoml-random-{arch}-{preset}-{quant}"),
          ("general.file_type", "u32", FILE_TYPE[quant]),
          (f"{a}.context_length", "u32", h["ctx"]), (f"{a}.embedding_length", "u32", d),
          (f"{a}.block_count", "u32", h["n_layers"]), (f"{a}.feed_forward_length", "u32", ff),
          (f"{a}.rope.dimension_count", "u32", hd), (f"{a}.attention.head_count", "u32", h["n_heads"]),
          (f"{a}.attention.head_count_kv", "u32", h["n_kv_heads"]),
          (f"{a}.attention.layer_norm_rms_epsilon", "f32", eps), (f"{a}.rope.freq_base", "f32", rope_base),
          (f"{a}.vocab_size", "u32", V)]
    if h.get("head_dim"):
        md += [(f"{a}.attention.key_length", "u32", hd), (f"{a}.attention.value_length", "u32", hd)]
    if h.get("rope_linear"):
        md += [(f"{a}.rope.scaling.type", "str", "linear"), (f"{a}.rope.scaling.factor", "f32", h["rope_linear"])]
    if h.get("swa"):
        md.append((f"{a}.attention.sliding_window", "u32", h["swa"]))
    if h.get("attn_softcap"):
        md.append((f"{a}.attn_logit_softcapping", "f32", h["attn_softcap"]))
    if h.get("final_softcap"):
        md.append((f"{a}.final_logit_softcapping", "f32", h["final_softcap"]))
    if n_expert:
        md += [(f"{a}.expert_count", "u32", n_expert), (f"{a}.expert_used_count", "u32", h["n_expert_used"]),
               (f"{a}.expert_feed_forward_length", "u32", ff)]
        if h.get("shexp_ffn"):
            md.append((f"{a}.expert_shared_feed_forward_length", "u32", h["shexp_ffn"]))
    if vocab_from:
        md += vocab_md
    else:
        tokens, scores, types = vocabulary(V)
        if arch == "phi3":  # llama.cpp's vocabulary loader sets attributes of this phi-3 token by its text
            tokens[259], types[259] = "<|endoftext|>", 3
        md += [("tokenizer.ggml.model", "str", "llama"), ("tokenizer.ggml.tokens", "arr[str]", tokens),
               ("tokenizer.ggml.scores", "arr[f32]", scores), ("tokenizer.ggml.token_type", "arr[i32]", types),
               ("tokenizer.ggml.bos_token_id", "u32", 1), ("tokenizer.ggml.eos_token_id", "u32", 2),
               ("tokenizer.ggml.unknown_token_id", "u32", 0), ("tokenizer.ggml.add_bos_token", "bool", False)]
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    _dml().gguf.write(path, md, [(n, a, tensor_type(n, quant, tied)) for n, a in tensors])
    return h


def make_arch(path: str, name: str, quant: str = "f32", seed: int = 0, **overrides) -> dict:
    """make() with ARCH_PRESETS[name] (tiny shapes)."""
    kw = dict(ARCH_PRESETS[name])
    kw.update(overrides)
    return make(path, "tiny", quant, seed, **kw)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="GGUF file to write")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    ap.add_argument("--quant", choices=sorted(FILE_TYPE), default="q4_k_m")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out-gain", type=float, default=0.1, help="gain of attn_output / ffn_down (default 0.1)")
    ap.add_argument("--vocab", default=None, help="take the tokenizer (and chat template) of this GGUF file")
    ap.add_argument("--layers", type=int, default=None, help="override the preset's layer count")
    ap.add_argument("--arch", choices=sorted(ARCH_PRESETS), default="llama",
                    help="architecture preset (ARCH_PRESETS: tiny test shapes of llama, llama-rope, mixtral, qwen2, "
                         "qwen3, gemma2, gemma3, phi3, qwen2moe, qwen3moe); other than llama, the preset's shape "
                         "fields replace --preset's")
    a = ap.parse_args(argv)
    kw = {"n_layers": a.layers} if a.layers else {}
    if a.arch != "llama":
        kw = dict(ARCH_PRESETS[a.arch], **kw)
    make(a.out, a.preset, a.quant, a.seed, out_gain=a.out_gain, vocab_from=a.vocab, **kw)
    print(f"wrote {a.out} ({a.preset}, {a.quant}, {os.path.getsize(a.out) / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
