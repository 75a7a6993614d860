"""The 7B-shaped llama of the CUDA decode benchmark (issue 39: decode tok/s of a 7B-shaped Q4_K_M
model against the bound set by the weight bytes read per token and the device-to-device copy
bandwidth): Llama-2-7B's shape (32 layers, d 4096, 32 heads, FFN 11008, vocab 32000) in the
Q4_K_M recipe of examples/llama/make_random_gguf.py (q6_K for attn_v, ffn_down and the output
head, q4_K for the other matrices and the embedding, f32 norms), with random quantized blocks.

The file is written by the `gguf` package (PyPI; llama.cpp's own GGUF writer) from numpy alone, so
the GPU machine, which has no DinoML extension and cannot hold a 4 GB carried file, writes the very
bytes this machine wrote for the same seed: every tensor is drawn from its own generator seeded by
(seed, crc32(name)).

Random blocks are valid blocks: the quants and sub-block scales are uniform random bytes, and the
fp16 super-block scales are fixed so that the weights have about the spread of a trained model's
(standard deviation ~1/sqrt(4096)); the norms are 1 + 0.1·N(0, 1).

    python3 tests/gpu/llm7b_plan.py OUT.gguf [--seed 7] [--layers N]     # needs numpy and gguf
"""
from __future__ import annotations

import argparse
import os
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "llama"))
import make_random_gguf as R  # noqa: E402  (tensor_type, vocabulary: numpy only)

SHAPE = dict(n_layers=32, dim=4096, n_heads=32, n_kv_heads=32, ffn=11008, vocab=32000, ctx=4096)
QUANT = "q4_k_m"
# (block elements, block bytes, [(byte offset of an fp16 scale, its value)]) per block type.
BLOCKS = {
    # q4_K: w = d·sc·q − dmin·m, sc, m ∈ 0..63 and q ∈ 0..15: dmin = 7.5·d centres w, sd ≈ 260·d.
    "q4_K": (256, 144, [(0, 2.0 ** -14), (2, 7.5 * 2.0 ** -14)]),
    # q6_K: w = d·sc·(q − 32), sc ∈ int8 and q ∈ 0..63: sd ≈ 1370·d.
    "q6_K": (256, 210, [(208, 1.15e-5)]),
}


def tensors(shape=SHAPE, quant=QUANT):
    """[(GGUF name, row-major shape, ggml type name)] in file order."""
    d, ff, V = shape["dim"], shape["ffn"], shape["vocab"]
    hd = d // shape["n_heads"]
    kvd = hd * shape["n_kv_heads"]
    out = [("token_embd.weight", (V, d))]
    for i in range(shape["n_layers"]):
        p = f"blk.{i}."
        out += [(p + "attn_norm.weight", (d,)), (p + "attn_q.weight", (d, d)), (p + "attn_k.weight", (kvd, d)),
                (p + "attn_v.weight", (kvd, d)), (p + "attn_output.weight", (d, d)), (p + "ffn_norm.weight", (d,)),
                (p + "ffn_gate.weight", (ff, d)), (p + "ffn_up.weight", (ff, d)), (p + "ffn_down.weight", (d, ff))]
    out += [("output_norm.weight", (d,)), ("output.weight", (V, d))]
    return [(n, s, R.tensor_type(n, quant)) for n, s in out]


def tensor_data(name: str, shape, ttype: str, seed: int) -> np.ndarray:
    """float32 values, or the raw blocks as uint8 [rows, bytes per row]."""
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    if ttype == "f32":
        return (1.0 + 0.1 * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)
    bs, bb, scales = BLOCKS[ttype]
    rows, cols = shape
    if cols % bs:
        raise ValueError(f"{name}: {cols} columns are not whole {ttype} blocks of {bs}")
    blocks = rng.integers(0, 256, (rows, cols // bs, bb), dtype=np.uint8)
    for off, value in scales:
        blocks[:, :, off:off + 2] = np.frombuffer(np.float16(value).tobytes(), np.uint8)
    return blocks.reshape(rows, cols // bs * bb)


def write(path: str, seed: int = 7, shape=SHAPE, quant=QUANT) -> dict:
    """Writes the GGUF; returns {"bytes": file size, "tensors": {name: (type, nbytes)}}."""
    import gguf
    a = "llama"
    w = gguf.GGUFWriter(path, a)
    hd = shape["dim"] // shape["n_heads"]
    w.add_name(f"dinoml-random-llama-7b-shape-{quant}")
    w.add_file_type(R.FILE_TYPE[quant])
    w.add_context_length(shape["ctx"])
    w.add_embedding_length(shape["dim"])
    w.add_block_count(shape["n_layers"])
    w.add_feed_forward_length(shape["ffn"])
    w.add_rope_dimension_count(hd)
    w.add_head_count(shape["n_heads"])
    w.add_head_count_kv(shape["n_kv_heads"])
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_vocab_size(shape["vocab"])
    toks, scores, types = R.vocabulary(shape["vocab"])
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(False)
    info = {}
    qt = gguf.GGMLQuantizationType
    for name, shp, t in tensors(shape, quant):
        data = tensor_data(name, shp, t, seed)
        if t == "f32":
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, data, raw_dtype={"q4_K": qt.Q4_K, "q6_K": qt.Q6_K}[t])
        info[name] = (t, int(data.nbytes))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return {"bytes": os.path.getsize(path), "tensors": info}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--layers", type=int, default=SHAPE["n_layers"])
    a = ap.parse_args(argv)
    r = write(a.out, a.seed, dict(SHAPE, n_layers=a.layers))
    print(f"{a.out}: {r['bytes'] / 2**30:.2f} GiB, {len(r['tensors'])} tensors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
