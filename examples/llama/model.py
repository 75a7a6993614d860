"""A llama-architecture decoder read from a GGUF file (issue 6): token embedding, RMSNorm,
rotary embeddings (llama.cpp's "normal" rope: adjacent element pairs), grouped-query attention
over a KV cache held as session state, SwiGLU MLP, output head.

    dinoml compile examples/llama/model.py --gguf model.gguf --target cpu --out out/llama
    dinoml generate out/llama --tokens 1,2,3 --n 32

One artifact serves prefill and decode. Inputs: `tokens` int64 [seq] and `positions` int64 [seq]
(the absolute position of each token; the caller counts). `seq` has buckets (1 = decode, then
prefill sizes), so each is planned and dispatched separately. Output: `logits` float32
[1, vocab] of the last token. States: `cache_k.N` / `cache_v.N` float32 [n_kv_heads, ctx,
head_dim] per layer. Each run writes its tokens' K/V rows at their positions into the cache
(`kv_cache_write`, in place) and attends over the whole cache with the mask
key_position <= query_position, so rows not written yet are never read.

Hyper-parameters come from the file's `llama.*` keys; every weight is a dml.gguf_constant
(quantized matrices stay quantized: policy "auto" keeps them as blocks for the qgemm kernels;
the token embedding is dequantized, since it is gathered, not multiplied).
"""
from __future__ import annotations

import os
import sys

import numpy as np

try:
    import dinoml as dml
except ImportError:  # running from a source checkout: the package lives in python/
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                    "python"))
    import dinoml as dml

ops = dml.ops
TO_END = 2 ** 31


class LlamaConfig:
    """Hyper-parameters: vocab, dim, n_layers, n_heads, n_kv_heads, ffn, head_dim, rope_dims, eps,
    rope_base, ctx_train, has_output. (A plain class: `dinoml compile` imports model files
    without registering them in sys.modules, which dataclasses need.)"""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    @staticmethod
    def from_gguf(path: str) -> "LlamaConfig":
        info = dml.gguf.read(path)
        md = info["metadata"]
        arch = md.get("general.architecture")
        if arch != "llama":
            raise ValueError(f"{path}: general.architecture is {arch!r}, this model reads 'llama' files only")

        def key(name, default=None):
            k = "llama." + name
            if k not in md:
                if default is None:
                    raise ValueError(f"{path}: metadata key '{k}' is missing")
                return default
            return md[k]

        tensors = {t["name"]: t for t in info["tensors"]}
        if "token_embd.weight" not in tensors:
            raise ValueError(f"{path}: tensor 'token_embd.weight' is missing")
        dim = int(key("embedding_length"))
        n_heads = int(key("attention.head_count"))
        vocab = int(tensors["token_embd.weight"]["shape"][0])
        if dim % n_heads:
            raise ValueError(f"{path}: embedding_length {dim} is not a multiple of head_count {n_heads}")
        head_dim = dim // n_heads
        n_kv = int(key("attention.head_count_kv", n_heads))
        if n_heads % n_kv:
            raise ValueError(f"{path}: head_count {n_heads} is not a multiple of head_count_kv {n_kv}")
        rope_dims = int(key("rope.dimension_count", head_dim))
        if rope_dims != head_dim:
            raise ValueError(f"{path}: rope.dimension_count {rope_dims} != head dim {head_dim} (partial rotary "
                             "embeddings are not supported)")
        return LlamaConfig(vocab=vocab, dim=dim, n_layers=int(key("block_count")), n_heads=n_heads, n_kv_heads=n_kv,
                           ffn=int(key("feed_forward_length")), head_dim=head_dim, rope_dims=rope_dims,
                           eps=float(key("attention.layer_norm_rms_epsilon", 1e-5)),
                           rope_base=float(key("rope.freq_base", 10000.0)),
                           ctx_train=int(key("context_length", 2048)), has_output="output.weight" in tensors)


def rope_tables(cfg: LlamaConfig, ctx: int):
    """cos/sin [ctx, head_dim/2] with ggml's float32 recurrence theta_{i+1} = theta_i * base^(-2/d)."""
    half = cfg.head_dim // 2
    scale = np.float32(np.power(np.float32(cfg.rope_base), np.float32(-2.0 / cfg.head_dim), dtype=np.float32))
    theta = np.zeros((ctx, half), np.float32)
    cur = np.arange(ctx, dtype=np.float32)
    for i in range(half):
        theta[:, i] = cur
        cur = (cur * scale).astype(np.float32)
    return np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32)


class Block(dml.Module):
    def __init__(self, cfg: LlamaConfig, index: int, ctx: int):
        self.cfg, self.index, self.ctx = cfg, index, ctx
        d, hd = cfg.dim, cfg.head_dim
        self.attn_norm = dml.Parameter([d])
        self.wq = dml.Parameter([cfg.n_heads * hd, d])
        self.wk = dml.Parameter([cfg.n_kv_heads * hd, d])
        self.wv = dml.Parameter([cfg.n_kv_heads * hd, d])
        self.wo = dml.Parameter([d, cfg.n_heads * hd])
        self.ffn_norm = dml.Parameter([d])
        self.w_gate = dml.Parameter([cfg.ffn, d])
        self.w_up = dml.Parameter([cfg.ffn, d])
        self.w_down = dml.Parameter([d, cfg.ffn])

    def forward(self, x, positions, cos, sin, mask):
        cfg = self.cfg
        T = x.shape[0]
        nkv, hd, group = cfg.n_kv_heads, cfg.head_dim, cfg.n_heads // cfg.n_kv_heads
        h = ops.rms_norm(x, self.attn_norm, eps=cfg.eps)
        q = rope(ops.gemm_rcr(h, self.wq), cfg.n_heads, hd, cos, sin)        # [T, H*hd]
        k = rope(ops.gemm_rcr(h, self.wk), nkv, hd, cos, sin)                # [T, nkv*hd]
        v = ops.gemm_rcr(h, self.wv)
        # Cache rows [nkv, T, hd] written at the tokens' positions (in place in the state).
        k = ops.permute(ops.reshape(k, [T, nkv, hd]), dims=[1, 0, 2])
        v = ops.permute(ops.reshape(v, [T, nkv, hd]), dims=[1, 0, 2])
        cache_k = dml.state(f"cache_k.{self.index}", [nkv, self.ctx, hd])
        cache_v = dml.state(f"cache_v.{self.index}", [nkv, self.ctx, hd])
        k_all = ops.kv_cache_write(cache_k, k, positions)
        v_all = ops.kv_cache_write(cache_v, v, positions)
        ops.state_assign(cache_k, k_all)
        ops.state_assign(cache_v, v_all)
        # Grouped-query attention: query head h = kv*group + g reads kv head `kv`; the group's
        # queries become rows (t, g) of one [nkv, T*group, hd] batch entry per kv head.
        q = ops.reshape(ops.permute(ops.reshape(q, [T, nkv, group, hd]), dims=[1, 0, 2, 3]), [nkv, T * group, hd])
        a = ops.scaled_dot_product_attention(q, k_all, v_all, mask)
        a = ops.reshape(ops.permute(ops.reshape(a, [nkv, T, group, hd]), dims=[1, 0, 2, 3]), [T, cfg.n_heads * hd])
        x = x + ops.gemm_rcr(a, self.wo)
        h = ops.rms_norm(x, self.ffn_norm, eps=cfg.eps)
        g = ops.silu(ops.gemm_rcr(h, self.w_gate)) * ops.gemm_rcr(h, self.w_up)
        return x + ops.gemm_rcr(g, self.w_down)


def rope(x, heads: int, hd: int, cos, sin):
    """Rotates adjacent pairs (x[2i], x[2i+1]) of each head by the position's angles. x [T, heads*hd]."""
    T = x.shape[0]
    x = ops.reshape(x, [T, heads, hd // 2, 2])
    x0 = ops.slice(x, starts=[0], ends=[1], axes=[3])
    x1 = ops.slice(x, starts=[1], ends=[2], axes=[3])
    y = ops.concatenate([x0 * cos - x1 * sin, x0 * sin + x1 * cos], axis=3)
    return ops.reshape(y, [T, heads * hd])


class Llama(dml.Module):
    def __init__(self, cfg: LlamaConfig, ctx: int):
        self.cfg, self.ctx = cfg, ctx
        self.tok_embd = dml.Parameter([cfg.vocab, cfg.dim])
        self.layers = [Block(cfg, i, ctx) for i in range(cfg.n_layers)]
        self.output_norm = dml.Parameter([cfg.dim])
        self.output = dml.Parameter([cfg.vocab, cfg.dim])
        self.cos, self.sin = rope_tables(cfg, ctx)

    def forward(self, tokens, positions):
        cfg = self.cfg
        T = tokens.shape[0]
        group = cfg.n_heads // cfg.n_kv_heads
        x = ops.embedding(tokens, self.tok_embd)                                   # [T, d]
        half = cfg.head_dim // 2
        cos = ops.reshape(ops.gather(self.cos, positions, axis=0), [T, 1, half, 1])
        sin = ops.reshape(ops.gather(self.sin, positions, axis=0), [T, 1, half, 1])
        # mask[(t, g), j] = j <= positions[t]: causal over absolute positions, and cache rows not
        # written yet (j > every position so far) are never attended.
        qpos = ops.reshape(ops.expand(ops.reshape(positions, [T, 1]), shape=[-1, group]), [T * group, 1])
        mask = ops.le(ops.reshape(np.arange(self.ctx, dtype=np.int64), [1, self.ctx]), qpos)
        for layer in self.layers:
            x = layer(x, positions, cos, sin, mask)
        x = ops.slice(x, starts=[-1], ends=[TO_END], axes=[0])                    # last token [1, d]
        x = ops.rms_norm(x, self.output_norm, eps=cfg.eps)
        return {"logits": ops.gemm_rcr(x, self.output)}


def gguf_constants(path: str, cfg: LlamaConfig, policy: str = "auto"):
    """Parameter name -> dml.gguf_constant. `policy` applies to the 2-d weights (auto: quantized
    types stay as blocks); norms and the embedding are dequantized."""
    c = {"tok_embd": dml.gguf_constant(path, "token_embd.weight", "dequantize"),
         "output_norm": dml.gguf_constant(path, "output_norm.weight", "dequantize"),
         "output": dml.gguf_constant(path, "output.weight" if cfg.has_output else "token_embd.weight", policy)}
    names = {"attn_norm": "attn_norm", "wq": "attn_q", "wk": "attn_k", "wv": "attn_v", "wo": "attn_output",
             "ffn_norm": "ffn_norm", "w_gate": "ffn_gate", "w_up": "ffn_up", "w_down": "ffn_down"}
    for i in range(cfg.n_layers):
        for p, t in names.items():
            pol = "dequantize" if p.endswith("norm") else policy
            c[f"layers.{i}.{p}"] = dml.gguf_constant(path, f"blk.{i}.{t}.weight", pol)
    return c


def default_buckets(max_seq: int):
    b = [1] + [s for s in (16, 64, 128, 256, 512) if s < max_seq] + [max_seq]
    return tuple(sorted(set(b)))


def build_spec(gguf: str = None, ctx: int = None, max_seq: int = None, policy: str = "auto", name: str = "llama"):
    """The decoder for GGUF file `gguf` (or $DINOML_LLAMA_GGUF) with a KV cache of `ctx` positions
    (default min(context_length, 512)) and prompts of up to `max_seq` tokens per run (default
    min(ctx, 128))."""
    gguf = gguf or os.environ.get("DINOML_LLAMA_GGUF")
    if not gguf:
        raise ValueError("examples/llama/model.py needs a GGUF file: dinoml compile examples/llama/model.py "
                         "--gguf FILE (or DINOML_LLAMA_GGUF=FILE)")
    cfg = LlamaConfig.from_gguf(gguf)
    ctx = int(ctx or min(cfg.ctx_train, 512))
    max_seq = int(max_seq or min(ctx, 128))
    seq = dml.Dim("seq", min=1, max=max_seq, typical=1, buckets=default_buckets(max_seq))
    model = Llama(cfg, ctx)
    return dml.trace(model, inputs={"tokens": dml.TensorSpec([seq], "int64"),
                                    "positions": dml.TensorSpec([seq], "int64")},
                     constants=gguf_constants(gguf, cfg, policy), name=name)


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description="compile a llama GGUF file for the CPU")
    ap.add_argument("gguf")
    ap.add_argument("--out", default=os.path.join("out", "llama"))
    ap.add_argument("--ctx", type=int, default=None)
    a = ap.parse_args()
    art = dml.compile(build_spec(a.gguf, ctx=a.ctx), target="cpu", out=a.out)
    print(f"compiled -> {art.path}")
