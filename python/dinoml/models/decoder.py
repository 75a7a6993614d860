"""One decoder-only transformer built from a GGUF file's metadata (issue 39, item 2).

    spec = dml.models.build_spec("model.gguf", ctx=512, max_seq=128)
    dinoml compile model.gguf --target cpu --out out/model --model-arg ctx=512

`general.architecture` names the architecture; its `<arch>.*` keys give the hyper-parameters and
the tensor table the optional parts (biases, fused projections, tied output). What differs between
architectures is data (`ARCHS`): the rope layout, QK-norm, post-norms, the FFN activation, the
embedding scale, logit soft-capping, the sliding-window pattern, the rope base of local layers,
mixture-of-experts routing. Each rule follows what llama.cpp computes for that architecture
(llama.cpp is the oracle of tests/python/test_llm_architectures.py).

Artifact interface (shared with dinoml.tools.generate and dinoml.serve): inputs `tokens`,
`positions` int64 [seq] (seq buckets 1, 16, 64, ..., max_seq), output `logits` float32 [1, vocab]
of the last token, states `cache_k.N` / `cache_v.N` [n_kv_heads, ctx, head_dim] per layer in the KV
dtype (`kv_dtype=`, `--model-arg kv_dtype=float16`: float32 (default), float16 or bfloat16; a 16-bit
cache halves its memory and the bytes attention reads, and the fused attention widens it as it reads).

With `slots=S` (S > 1; `--model-arg slots=S`) one artifact holds the KV caches of S sequences and
one run takes tokens of any of them (batched decoding, continuous batching): inputs `tokens`,
`positions`, `slots` int64 [seq] (token t is at position positions[t] of the sequence in slot
slots[t]; seq buckets also hold S, a decode step of every slot) and `logit_rows` int64 [rows]
(1..S rows of the run whose logits are wanted), output `logits` float32 [rows, vocab], states
`[n_kv_heads, S * ctx, head_dim]` where slot s owns cache rows s*ctx .. s*ctx + ctx - 1 (ctx is
rounded up to a multiple of the attention's 64-row key blocks). A token attends to its own slot's
rows at positions <= its own. Positions outside 0..ctx-1, slots outside 0..S-1 and logit rows outside the run are
errors of the run.
"""
from __future__ import annotations

import math
import os
from typing import Dict, Optional

import numpy as np

from .. import gguf as _gguf
from .. import ops
from ..dims import Dim, TensorSpec
from ..module import Module, Parameter
from ..tracer import state, trace

TO_END = 2 ** 31


class Arch:
    """What one architecture does differently. rope: "norm" (adjacent pairs x[2i], x[2i+1]) or
    "neox" (halves x[i], x[i + n_rot/2]), as llama.cpp's llama_model_rope_type; qk_norm: per-head
    RMSNorm of q and k before rope (attn_q_norm / attn_k_norm); post_norms: RMSNorm of the attention
    and FFN outputs before the residual add (attn_post_norm / ffn_post_norm); act: the gated FFN's
    activation ("silu" or "gelu" = ggml_gelu, the tanh form); embed_scale: token embeddings times
    sqrt(dim); swa_pattern: every swa_pattern-th layer (il % p == p - 1) is global, the others
    attend to a sliding window (0: none); swa_default: window when the file has no
    `attention.sliding_window`; swa_rope_base: rope base of sliding-window layers (None: the file's);
    softcap: attention / final logit soft-capping with these defaults (llama.cpp's hparams);
    big_scale_layers: layer counts whose attention scale is 1/sqrt(dim/heads) instead of
    1/sqrt(head_dim) (gemma 27B); moe: expert routing allowed ("softmax_norm": softmax, top-k,
    weights renormalized; "softmax": the top-k probabilities as they are); moe_required: the
    architecture has experts in every layer; shared_expert: a SwiGLU expert every token takes,
    scaled by sigmoid(ffn_gate_inp_shexp · x) (qwen2moe)."""

    def __init__(self, rope="norm", qk_norm=False, post_norms=False, act="silu", embed_scale=False,
                 swa_pattern=0, swa_default=None, swa_rope_base=None, attn_softcap=None, final_softcap=None,
                 big_scale_layers=(), moe=None, moe_required=False, shared_expert=False):
        self.__dict__.update(locals())
        del self.__dict__["self"]


ARCHS: Dict[str, Arch] = {
    # llama also covers Mistral and Mixtral files (general.architecture "llama"; llama.cpp's llama
    # graph ignores attention.sliding_window) and expert_count > 0 (Mixtral-style MoE).
    "llama": Arch(rope="norm", moe="softmax_norm"),
    "qwen2": Arch(rope="neox"),
    "qwen3": Arch(rope="neox", qk_norm=True),
    "gemma2": Arch(rope="neox", post_norms=True, act="gelu", embed_scale=True, swa_pattern=2, swa_default=4096,
                   attn_softcap=50.0, final_softcap=30.0, big_scale_layers=(46,)),
    "gemma3": Arch(rope="neox", qk_norm=True, post_norms=True, act="gelu", embed_scale=True, swa_pattern=6,
                   swa_rope_base=10000.0, big_scale_layers=(62,)),
    "phi3": Arch(rope="neox"),
    "qwen2moe": Arch(rope="neox", moe="softmax", moe_required=True, shared_expert=True),
    "qwen3moe": Arch(rope="neox", qk_norm=True, moe="softmax_norm", moe_required=True),
}


class DecoderConfig:
    """Hyper-parameters read from a GGUF file (see from_gguf). A plain class: model files are
    imported without a sys.modules entry, which dataclasses need."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def __repr__(self):
        return "DecoderConfig(" + ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items()
                                            if k not in ("tensor_names", "arch_rules")) + ")"

    @staticmethod
    def from_gguf(path: str) -> "DecoderConfig":
        path = str(path)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"GGUF file '{path}' does not exist")
        info = _gguf.read(path)
        md = info["metadata"]
        arch = md.get("general.architecture")
        if arch not in ARCHS:
            raise ValueError(f"{path}: general.architecture is {arch!r}, which DinoML's GGUF decoder does not "
                             f"support (supported: {', '.join(sorted(ARCHS))})")
        rules = ARCHS[arch]
        tensors = {t["name"]: t for t in info["tensors"]}

        def key(name, default=None, required=None):
            k = f"{arch}.{name}"
            if k not in md:
                if default is None or required:
                    raise ValueError(f"{path}: metadata key '{k}' is missing (needed by the {arch} decoder)")
                return default
            v = md[k]
            if isinstance(v, (list, tuple)):  # per-layer arrays: only uniform ones
                if len(set(v)) != 1:
                    raise ValueError(f"{path}: metadata key '{k}' varies per layer ({list(v)[:8]}...), which DinoML's "
                                     "GGUF decoder does not support")
                v = v[0]
            return v

        def need(name):
            if name not in tensors:
                raise ValueError(f"{path}: tensor '{name}' is missing (needed by the {arch} decoder)")
            return tensors[name]

        dim = int(key("embedding_length"))
        n_layers = int(key("block_count"))
        n_heads = int(key("attention.head_count"))
        n_kv = int(key("attention.head_count_kv", n_heads))
        if n_heads % n_kv:
            raise ValueError(f"{path}: {arch}.attention.head_count {n_heads} is not a multiple of "
                             f"{arch}.attention.head_count_kv {n_kv}")
        if f"{arch}.attention.key_length" not in md and dim % n_heads:
            raise ValueError(f"{path}: {arch}.embedding_length {dim} is not a multiple of {arch}.attention.head_count "
                             f"{n_heads} and {arch}.attention.key_length is missing")
        head_dim = int(key("attention.key_length", dim // n_heads))
        v_dim = int(key("attention.value_length", head_dim))
        if v_dim != head_dim:
            raise ValueError(f"{path}: {arch}.attention.value_length {v_dim} != key_length {head_dim} (different K "
                             "and V head sizes are not supported)")
        rope_dims = int(key("rope.dimension_count", head_dim))
        if rope_dims != head_dim:
            raise ValueError(f"{path}: {arch}.rope.dimension_count {rope_dims} != head size {head_dim} (partial rotary "
                             "embeddings are not supported)")
        rope_base = float(key("rope.freq_base", 10000.0))
        scaling = str(key("rope.scaling.type", "none"))
        if scaling not in ("none", "linear"):
            raise ValueError(f"{path}: {arch}.rope.scaling.type '{scaling}' is not supported (none, linear)")
        # llama.cpp: freq_scale = 1 / (rope.scale_linear, else rope.scaling.factor), 0 meaning none
        factor = float(key("rope.scale_linear", 0.0) or key("rope.scaling.factor", 0.0) or 0.0)
        freq_scale = 1.0 / factor if factor else 1.0
        rope_freqs = None
        if "rope_freqs.weight" in tensors:  # llama 3.x frequency factors: theta_i / f_i
            rope_freqs = np.asarray(_gguf.tensor(path, "rope_freqs.weight"), np.float32).reshape(-1)
            if rope_freqs.size != rope_dims // 2:
                raise ValueError(f"{path}: rope_freqs.weight has {rope_freqs.size} factors, expected {rope_dims // 2}")

        swa = 0
        if rules.swa_pattern:
            swa = int(key("attention.sliding_window", rules.swa_default or 0))
        swa_layers = [bool(swa) and rules.swa_pattern > 0 and (i % rules.swa_pattern < rules.swa_pattern - 1)
                      for i in range(n_layers)]
        swa_base = rope_base
        if any(swa_layers) and rules.swa_rope_base is not None:
            swa_base = float(key("rope.freq_base_swa", rules.swa_rope_base))
        attn_softcap = float(key("attn_logit_softcapping", rules.attn_softcap)) if rules.attn_softcap else None
        final_softcap = None
        if rules.final_softcap:
            final_softcap = float(key("final_logit_softcapping", rules.final_softcap))
        elif arch == "gemma3" and f"{arch}.final_logit_softcapping" in md:
            final_softcap = float(md[f"{arch}.final_logit_softcapping"]) or None  # gemma3: only when the key says
        attn_scale = 1.0 / math.sqrt(head_dim)
        if n_layers in rules.big_scale_layers:
            attn_scale = 1.0 / math.sqrt(dim // n_heads)

        need("token_embd.weight")
        need("output_norm.weight")
        vocab = int(tensors["token_embd.weight"]["shape"][0])
        n_expert = int(key("expert_count", 0))
        n_used = int(key("expert_used_count", 0)) if n_expert else 0
        if n_expert and not rules.moe:
            raise ValueError(f"{path}: {arch}.expert_count is {n_expert}; mixture-of-experts is supported for "
                             f"{[a for a, r in ARCHS.items() if r.moe]} only")
        if rules.moe_required and not n_expert:
            raise ValueError(f"{path}: {arch}.expert_count is missing or 0; {arch} needs experts")
        if n_expert and not 0 < n_used <= n_expert:
            raise ValueError(f"{path}: {arch}.expert_used_count {n_used} must be in 1..expert_count {n_expert}")

        qd, kvd = n_heads * head_dim, n_kv * head_dim
        fused_qkv = "blk.0.attn_qkv.weight" in tensors
        layer = "blk.{i}."
        names = ["attn_norm.weight", "attn_output.weight", "ffn_norm.weight"]
        names += ["attn_qkv.weight"] if fused_qkv else ["attn_q.weight", "attn_k.weight", "attn_v.weight"]
        if rules.qk_norm:
            names += ["attn_q_norm.weight", "attn_k_norm.weight"]
        if rules.post_norms:
            names += ["post_attention_norm.weight", "post_ffw_norm.weight"]
        if n_expert:
            names += ["ffn_gate_inp.weight", "ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"]
            ffn = int(need("blk.0.ffn_up_exps.weight")["shape"][1])
            fused_up = False
            if rules.shared_expert:
                names += ["ffn_gate_inp_shexp.weight", "ffn_gate_shexp.weight", "ffn_up_shexp.weight",
                          "ffn_down_shexp.weight"]
                ffn_shexp = int(need("blk.0.ffn_up_shexp.weight")["shape"][0])
        if not n_expert or not rules.shared_expert:
            ffn_shexp = 0
        if not n_expert:
            ffn = int(key("feed_forward_length"))
            fused_up = "blk.0.ffn_gate.weight" not in tensors
            names += ["ffn_up.weight", "ffn_down.weight"] + ([] if fused_up else ["ffn_gate.weight"])
        for i in range(n_layers):
            for n in names:
                need(layer.format(i=i) + n)
        shape = lambda n: list(tensors[n]["shape"])  # noqa: E731
        want = {"attn_output.weight": [dim, qd]}
        if fused_qkv:
            want["attn_qkv.weight"] = [qd + 2 * kvd, dim]
        else:
            want.update({"attn_q.weight": [qd, dim], "attn_k.weight": [kvd, dim], "attn_v.weight": [kvd, dim]})
        if not n_expert:
            want.update({"ffn_up.weight": [2 * ffn if fused_up else ffn, dim], "ffn_down.weight": [dim, ffn]})
        for n, s in want.items():
            if shape("blk.0." + n) != s:
                raise ValueError(f"{path}: tensor 'blk.0.{n}' has shape {shape('blk.0.' + n)}, expected {s} from the "
                                 f"{arch}.* hyper-parameters")
        biases = {b: f"blk.0.{b}.bias" in tensors for b in ("attn_q", "attn_k", "attn_v", "attn_qkv", "attn_output")}
        return DecoderConfig(
            path=path, arch=arch, arch_rules=rules, vocab=vocab, dim=dim, n_layers=n_layers, n_heads=n_heads,
            n_kv_heads=n_kv, head_dim=head_dim, ffn=ffn, rope_dims=rope_dims, rope_base=rope_base,
            freq_scale=freq_scale, rope_freqs=rope_freqs, swa=swa, swa_layers=swa_layers, swa_rope_base=swa_base,
            eps=float(key("attention.layer_norm_rms_epsilon", 1e-5)), attn_scale=attn_scale,
            attn_softcap=attn_softcap, final_softcap=final_softcap, n_expert=n_expert, n_expert_used=n_used,
            ffn_shexp=ffn_shexp,
            fused_qkv=fused_qkv, fused_up=fused_up, biases=biases, ctx_train=int(key("context_length", 2048)),
            has_output="output.weight" in tensors, output_bias="output.bias" in tensors, tensor_names=sorted(tensors))


def rope_tables(cfg: DecoderConfig, ctx: int, base: float):
    """cos/sin [ctx, rope_dims/2] as ggml computes them: theta_i = pos * base^(-2i/n_rot) by the
    float32 recurrence theta_{i+1} = theta_i * base^(-2/n_rot), divided by rope_freqs factors,
    times freq_scale (linear scaling)."""
    half = cfg.rope_dims // 2
    scale = np.float32(np.power(np.float32(base), np.float32(-2.0 / cfg.rope_dims), dtype=np.float32))
    theta = np.zeros((ctx, half), np.float32)
    cur = np.arange(ctx, dtype=np.float32)
    for i in range(half):
        t = cur if cfg.rope_freqs is None else (cur / cfg.rope_freqs[i]).astype(np.float32)
        theta[:, i] = t if cfg.freq_scale == 1.0 else (np.float32(cfg.freq_scale) * t).astype(np.float32)
        cur = (cur * scale).astype(np.float32)
    return np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32)


def rope(x, heads: int, cfg: DecoderConfig, cos, sin):
    """Rotates each head of x [T, heads*head_dim] by the position's angles (cos/sin
    [T, head_dim/2], gathered by position)."""
    T, nr = x.shape[0], cfg.rope_dims
    half = nr // 2
    if cfg.arch_rules.rope == "norm":  # adjacent pairs (x[2i], x[2i+1])
        x = ops.reshape(x, [T, heads, half, 2])
        c, s = ops.reshape(cos, [T, 1, half, 1]), ops.reshape(sin, [T, 1, half, 1])
        x0 = ops.slice(x, starts=[0], ends=[1], axes=[3])
        x1 = ops.slice(x, starts=[1], ends=[2], axes=[3])
        y = ops.concatenate([x0 * c - x1 * s, x0 * s + x1 * c], axis=3)
    else:  # neox: halves (x[i], x[i + n_rot/2])
        x = ops.reshape(x, [T, heads, nr])
        c, s = ops.reshape(cos, [T, 1, half]), ops.reshape(sin, [T, 1, half])
        x0 = ops.slice(x, starts=[0], ends=[half], axes=[2])
        x1 = ops.slice(x, starts=[half], ends=[nr], axes=[2])
        y = ops.concatenate([x0 * c - x1 * s, x0 * s + x1 * c], axis=2)
    return ops.reshape(y, [T, heads * nr])


class Block(Module):
    def __init__(self, cfg: DecoderConfig, index: int, ctx: int, cache_rows: Optional[int] = None,
                 kv_dtype: str = "float32"):
        self.cfg, self.index, self.ctx = cfg, index, ctx
        self.cache_rows = cache_rows or ctx
        self.kv_dtype = kv_dtype
        self.swa = cfg.swa_layers[index]
        d, hd, r = cfg.dim, cfg.head_dim, cfg.arch_rules
        qd, kvd = cfg.n_heads * hd, cfg.n_kv_heads * hd
        self.attn_norm = Parameter([d])
        if cfg.fused_qkv:
            self.wqkv = Parameter([qd + 2 * kvd, d])
            if cfg.biases["attn_qkv"]:
                self.bqkv = Parameter([qd + 2 * kvd])
        else:
            self.wq, self.wk, self.wv = Parameter([qd, d]), Parameter([kvd, d]), Parameter([kvd, d])
            for b, n in (("bq", "attn_q"), ("bk", "attn_k"), ("bv", "attn_v")):
                if cfg.biases[n]:
                    setattr(self, b, Parameter([qd if b == "bq" else kvd]))
        if r.qk_norm:
            self.q_norm, self.k_norm = Parameter([hd]), Parameter([hd])
        self.wo = Parameter([d, qd])
        if cfg.biases["attn_output"]:
            self.bo = Parameter([d])
        if r.post_norms:
            self.attn_post_norm, self.ffn_post_norm = Parameter([d]), Parameter([d])
        self.ffn_norm = Parameter([d])
        if cfg.n_expert:
            E = cfg.n_expert
            self.w_router = Parameter([E, d])
            self.w_gate_exps = Parameter([E, cfg.ffn, d])
            self.w_up_exps = Parameter([E, cfg.ffn, d])
            self.w_down_exps = Parameter([E, d, cfg.ffn])
            if cfg.ffn_shexp:
                self.w_shexp_inp = Parameter([d])
                self.w_gate_shexp = Parameter([cfg.ffn_shexp, d])
                self.w_up_shexp = Parameter([cfg.ffn_shexp, d])
                self.w_down_shexp = Parameter([d, cfg.ffn_shexp])
        else:
            if not cfg.fused_up:
                self.w_gate = Parameter([cfg.ffn, d])
            self.w_up = Parameter([2 * cfg.ffn if cfg.fused_up else cfg.ffn, d])
            self.w_down = Parameter([d, cfg.ffn])

    def _proj(self, h, w, b):
        y = ops.gemm_rcr(h, getattr(self, w))
        return y + getattr(self, b) if hasattr(self, b) else y

    def attention(self, x, rows, tables, masks):
        cfg = self.cfg
        T = x.shape[0]
        H, nkv, hd = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        group = H // nkv
        h = ops.rms_norm(x, self.attn_norm, eps=cfg.eps)
        if cfg.fused_qkv:
            qkv = self._proj(h, "wqkv", "bqkv")
            q = ops.slice(qkv, starts=[0], ends=[H * hd], axes=[1])
            k = ops.slice(qkv, starts=[H * hd], ends=[(H + nkv) * hd], axes=[1])
            v = ops.slice(qkv, starts=[(H + nkv) * hd], ends=[(H + 2 * nkv) * hd], axes=[1])
        else:
            q, k, v = self._proj(h, "wq", "bq"), self._proj(h, "wk", "bk"), self._proj(h, "wv", "bv")
        if cfg.arch_rules.qk_norm:  # per-head RMSNorm over head_dim
            q = ops.reshape(ops.rms_norm(ops.reshape(q, [T, H, hd]), self.q_norm, eps=cfg.eps), [T, H * hd])
            k = ops.reshape(ops.rms_norm(ops.reshape(k, [T, nkv, hd]), self.k_norm, eps=cfg.eps), [T, nkv * hd])
        cos, sin = tables[self.swa]
        q = rope(q, H, cfg, cos, sin)
        k = rope(k, nkv, cfg, cos, sin)
        kv_dt = self.kv_dtype
        if kv_dt != "float32":  # the new rows rounded to the cache's dtype (as llama.cpp's F16 cache)
            k, v = ops.cast(k, kv_dt), ops.cast(v, kv_dt)
        # Cache rows [nkv, T, hd] written at the tokens' cache rows (their positions; with slots,
        # slot * ctx + position), in place in the state.
        k = ops.permute(ops.reshape(k, [T, nkv, hd]), dims=[1, 0, 2])
        v = ops.permute(ops.reshape(v, [T, nkv, hd]), dims=[1, 0, 2])
        cache_k = state(f"cache_k.{self.index}", [nkv, self.cache_rows, hd], dtype=kv_dt)
        cache_v = state(f"cache_v.{self.index}", [nkv, self.cache_rows, hd], dtype=kv_dt)
        k_all = ops.kv_cache_write(cache_k, k, rows)
        v_all = ops.kv_cache_write(cache_v, v, rows)
        ops.state_assign(cache_k, k_all)
        ops.state_assign(cache_v, v_all)
        # Grouped-query attention: query head h = kv*group + g reads kv head `kv`; the group's
        # queries become rows (t, g) of one [nkv, T*group, hd] batch entry per kv head.
        q = ops.reshape(ops.permute(ops.reshape(q, [T, nkv, group, hd]), dims=[1, 0, 2, 3]), [nkv, T * group, hd])
        mask = masks[self.swa]
        default_scale = abs(cfg.attn_scale - 1.0 / math.sqrt(hd)) < 1e-12
        if cfg.attn_softcap:
            # softcap·tanh(scale·q·kᵀ / softcap), masked, softmax, ·v (llama.cpp scales q first).
            # The composed form reads float32: a 16-bit cache is widened whole (O(ctx) per step).
            if kv_dt != "float32":
                k_all, v_all = ops.cast(k_all, "float32"), ops.cast(v_all, "float32")
            q = q * np.float32(cfg.attn_scale)
            s = ops.bmm_rcr(q, k_all) * np.float32(1.0 / cfg.attn_softcap)
            s = ops.tanh(s) * np.float32(cfg.attn_softcap)
            p = ops.softmax(ops.where(mask, s, -float("inf")), axis=-1)
            a = ops.bmm_rrr(p, v_all)
        elif default_scale:  # float32 q with a 16-bit cache: the op's mixed form
            a = ops.scaled_dot_product_attention(q, k_all, v_all, mask)
        else:
            a = ops.scaled_dot_product_attention(q, k_all, v_all, mask, scale=float(cfg.attn_scale))
        a = ops.reshape(ops.permute(ops.reshape(a, [nkv, T, group, hd]), dims=[1, 0, 2, 3]), [T, H * hd])
        o = self._proj(a, "wo", "bo")
        if cfg.arch_rules.post_norms:
            o = ops.rms_norm(o, self.attn_post_norm, eps=cfg.eps)
        return x + o

    def act(self, g):
        return ops.silu(g) if self.cfg.arch_rules.act == "silu" else ops.fast_gelu(g)

    def ffn(self, h):
        cfg = self.cfg
        if cfg.n_expert:
            return self.moe(h)
        if cfg.fused_up:  # one [2*ffn] projection: gate half first, then up (ggml_swiglu)
            gu = ops.gemm_rcr(h, self.w_up)
            g = ops.slice(gu, starts=[0], ends=[cfg.ffn], axes=[1])
            u = ops.slice(gu, starts=[cfg.ffn], ends=[2 * cfg.ffn], axes=[1])
            return ops.gemm_rcr(self.act(g) * u, self.w_down)
        g = self.act(ops.gemm_rcr(h, self.w_gate)) * ops.gemm_rcr(h, self.w_up)
        return ops.gemm_rcr(g, self.w_down)

    def moe(self, h):
        """Softmax router, top-k experts per token, their weights renormalized to sum 1 where the
        architecture says so (llama.cpp's build_moe_ffn, norm_w), plus a sigmoid-gated shared expert
        (qwen2moe). Every expert runs on every token (batched GEMMs) and the unselected ones get
        weight 0: exact, E/k times the FLOPs of a gathered implementation."""
        cfg = self.cfg
        T, E, d = h.shape[0], cfg.n_expert, cfg.dim
        probs = ops.softmax(ops.gemm_rcr(h, self.w_router), axis=-1)                        # [T, E]
        # rank[t, e] = number of experts j with probs[t, j] > probs[t, e]; selected: rank < k.
        beats = ops.gt(ops.reshape(probs, [T, 1, E]), ops.reshape(probs, [T, E, 1]))           # [T, e, j]
        rank = ops.reduce_sum(ops.cast(beats, "float32"), axes=[2])
        w = probs * ops.cast(ops.lt(rank, np.float32(cfg.n_expert_used)), "float32")
        if cfg.arch_rules.moe == "softmax_norm":
            w = w / ops.reduce_sum(w, axes=[1], keepdim=True)
        xe = ops.expand(ops.reshape(h, [1, T, d]), shape=[E, T, d])
        g = self.act(ops.bmm_rcr(xe, self.w_gate_exps)) * ops.bmm_rcr(xe, self.w_up_exps)    # [E, T, ffn]
        y = ops.bmm_rcr(g, self.w_down_exps)                                                  # [E, T, d]
        out = ops.reduce_sum(y * ops.reshape(ops.permute(w, dims=[1, 0]), [E, T, 1]), axes=[0])
        if cfg.ffn_shexp:
            gate = ops.sigmoid(ops.gemm_rcr(h, ops.reshape(self.w_shexp_inp, [1, d])))            # [T, 1]
            s = self.act(ops.gemm_rcr(h, self.w_gate_shexp)) * ops.gemm_rcr(h, self.w_up_shexp)
            out = out + ops.gemm_rcr(s, self.w_down_shexp) * gate
        return out

    def forward(self, x, rows, tables, masks):
        x = self.attention(x, rows, tables, masks)
        h = ops.rms_norm(x, self.ffn_norm, eps=self.cfg.eps)
        f = self.ffn(h)
        if self.cfg.arch_rules.post_norms:
            f = ops.rms_norm(f, self.ffn_post_norm, eps=self.cfg.eps)
        return x + f


# Key rows of the fused CPU attention's blocks (kernels/cpu/attention_isa.h, kBK). With slots, ctx
# is rounded up to a multiple of it: every slot's cache region starts on a block boundary, so a
# block masked for every query row of a task is skipped unread and a token reads only its own
# slot's filled rows.
KEY_BLOCK = 64


class Decoder(Module):
    def __init__(self, cfg: DecoderConfig, ctx: int, slots: int = 1, kv_dtype: str = "float32"):
        self.cfg, self.ctx, self.slots = cfg, ctx, slots
        self.tok_embd = Parameter([cfg.vocab, cfg.dim])
        self.layers = [Block(cfg, i, ctx, slots * ctx, kv_dtype) for i in range(cfg.n_layers)]
        self.output_norm = Parameter([cfg.dim])
        # A file without output.weight ties the LM head to the embedding: one constant for both.
        self.output = Parameter([cfg.vocab, cfg.dim]) if cfg.has_output else self.tok_embd
        if cfg.output_bias:
            self.output_b = Parameter([cfg.vocab])
        # rope tables per distinct base (sliding-window layers of gemma3 use their own)
        self.cos, self.sin = rope_tables(cfg, ctx, cfg.rope_base)
        if any(cfg.swa_layers) and cfg.swa_rope_base != cfg.rope_base:
            self.cos_swa, self.sin_swa = rope_tables(cfg, ctx, cfg.swa_rope_base)

    def forward(self, tokens, positions, slots=None, logit_rows=None):
        """One artifact without slots: logits of the last token. With slots (slots > 1): token t
        belongs to sequence slot slots[t] at position positions[t]; logits of the rows
        logit_rows."""
        cfg = self.cfg
        T = tokens.shape[0]
        group = cfg.n_heads // cfg.n_kv_heads
        x = ops.embedding(tokens, self.tok_embd)                                   # [T, d]
        if cfg.arch_rules.embed_scale:
            x = x * np.float32(math.sqrt(cfg.dim))
        # With slots the tables are read by `embedding` (no negative wrap-around: a position
        # outside 0..ctx-1 is an error), which keeps the cache rows below inside the token's slot.
        take = ((lambda t, i: ops.gather(t, i, axis=0)) if slots is None else (lambda t, i: ops.embedding(i, t)))
        tables = {False: (take(self.cos, positions), take(self.sin, positions))}
        tables[True] = tables[False]
        if hasattr(self, "cos_swa"):
            tables[True] = (take(self.cos_swa, positions), take(self.sin_swa, positions))
        keys = ops.reshape(np.arange(self.slots * self.ctx, dtype=np.int64), [1, self.slots * self.ctx])

        def per_query(v):  # [T] -> [T*group, 1]: the value of each query row (t, g)
            return ops.reshape(ops.expand(ops.reshape(v, [T, 1]), shape=[-1, group]), [T * group, 1])

        if slots is None:
            # mask[(t, g), j] = j <= positions[t]: causal over absolute positions, and cache rows
            # not written yet (j > every position so far) are never attended. Sliding-window layers
            # also need j > positions[t] - window (llama.cpp's LLAMA_SWA_TYPE_STANDARD).
            rows = positions
            qrow = per_query(positions)
            masks = {False: ops.le(keys, qrow)}
        else:
            # Token t's cache row is slots[t] * ctx + positions[t] (kv_cache_write refuses a row
            # outside the cache, so a slot outside 0..slots-1 is an error). Key j is visible when
            # it lies in the token's slot at a position <= the token's: slots[t] * ctx <= j <= row[t].
            base = slots * np.int64(self.ctx)
            rows = base + positions
            qrow = per_query(rows)
            visible = ops.le(keys, qrow)
            masks = {False: ops.where(visible, ops.ge(keys, per_query(base)), visible)}
        masks[True] = masks[False]
        if any(cfg.swa_layers):
            masks[True] = ops.where(masks[False], ops.gt(keys, qrow - np.int64(cfg.swa)), masks[False])
        for layer in self.layers:
            x = layer(x, rows, tables, masks)
        if logit_rows is None:
            x = ops.slice(x, starts=[-1], ends=[TO_END], axes=[0])                # last token [1, d]
        else:
            x = ops.embedding(logit_rows, x)                                       # [B, d], no wrap-around
        x = ops.rms_norm(x, self.output_norm, eps=cfg.eps)
        logits = ops.gemm_rcr(x, self.output)
        if cfg.output_bias:
            logits = logits + self.output_b
        if cfg.final_softcap:
            logits = ops.tanh(logits * np.float32(1.0 / cfg.final_softcap)) * np.float32(cfg.final_softcap)
        return {"logits": logits}


def gguf_constants(cfg: DecoderConfig, policy: str = "auto") -> dict:
    """Parameter name -> dml.gguf_constant. `policy` applies to the 2-d weights, the token
    embedding included (auto: quantized types stay blocks, for the qgemm kernels and for
    `embedding`, which decodes only the gathered rows); norms, biases and the 3-d expert tensors
    are dequantized. A tied LM head (no output.weight) is the embedding's constant itself
    (Decoder.output is Decoder.tok_embd), so the file's blocks are stored once."""
    path = cfg.path
    g = _gguf.gguf_constant
    c = {"tok_embd": g(path, "token_embd.weight", policy),
         "output_norm": g(path, "output_norm.weight", "dequantize")}
    if cfg.has_output:
        c["output"] = g(path, "output.weight", policy)
    if cfg.output_bias:
        c["output_b"] = g(path, "output.bias", "dequantize")
    names = {"attn_norm": "attn_norm.weight", "wq": "attn_q.weight", "wk": "attn_k.weight", "wv": "attn_v.weight",
             "wqkv": "attn_qkv.weight", "bq": "attn_q.bias", "bk": "attn_k.bias", "bv": "attn_v.bias",
             "bqkv": "attn_qkv.bias", "q_norm": "attn_q_norm.weight", "k_norm": "attn_k_norm.weight",
             "wo": "attn_output.weight", "bo": "attn_output.bias", "attn_post_norm": "post_attention_norm.weight",
             "ffn_post_norm": "post_ffw_norm.weight", "ffn_norm": "ffn_norm.weight", "w_gate": "ffn_gate.weight",
             "w_up": "ffn_up.weight", "w_down": "ffn_down.weight", "w_router": "ffn_gate_inp.weight",
             "w_gate_exps": "ffn_gate_exps.weight", "w_up_exps": "ffn_up_exps.weight",
             "w_down_exps": "ffn_down_exps.weight", "w_shexp_inp": "ffn_gate_inp_shexp.weight",
             "w_gate_shexp": "ffn_gate_shexp.weight", "w_up_shexp": "ffn_up_shexp.weight",
             "w_down_shexp": "ffn_down_shexp.weight"}
    dense = {"wq", "wk", "wv", "wqkv", "wo", "w_gate", "w_up", "w_down", "w_router", "w_gate_shexp", "w_up_shexp",
             "w_down_shexp"}
    for i in range(cfg.n_layers):
        block = Block(cfg, i, 1)
        for p in names:
            if isinstance(getattr(block, p, None), Parameter):
                c[f"layers.{i}.{p}"] = g(path, f"blk.{i}.{names[p]}", policy if p in dense else "dequantize")
    return c


def default_buckets(max_seq: int, slots: int = 1):
    b = [1] + [s for s in (16, 64, 128, 256, 512) if s < max_seq] + [max_seq]
    if 1 < slots < max_seq:  # a decode step of every slot is its own bucket
        b.append(slots)
    return tuple(sorted(set(b)))


# KV cache dtypes of build_spec(kv_dtype=...) and their short spellings.
KV_DTYPES = {"float32": "float32", "f32": "float32", "float16": "float16", "f16": "float16",
             "bfloat16": "bfloat16", "bf16": "bfloat16"}


def build_spec(gguf: Optional[str] = None, ctx: Optional[int] = None, max_seq: Optional[int] = None,
               policy: str = "auto", name: Optional[str] = None, slots: int = 1, kv_dtype: str = "float32"):
    """The decoder of GGUF file `gguf` with a KV cache of `ctx` positions (default
    min(context_length, 512)) and prompts of up to `max_seq` tokens per run (default min(ctx, 128)).
    slots > 1: a KV cache of `ctx` positions for each of `slots` sequences, and one run takes
    tokens of any of them (inputs `slots`, `logit_rows`; module docstring). kv_dtype: the cache's
    dtype, float32 (f32, default), float16 (f16: llama.cpp's default cache type) or bfloat16 (bf16)."""
    if not gguf:
        raise ValueError("build_spec needs a GGUF file")
    if str(kv_dtype) not in KV_DTYPES:
        raise ValueError(f"kv_dtype {kv_dtype!r} is not a KV cache dtype: use float32 (f32), float16 (f16) or "
                         "bfloat16 (bf16)")
    kv_dtype = KV_DTYPES[str(kv_dtype)]
    cfg = DecoderConfig.from_gguf(gguf)
    ctx = int(ctx or min(cfg.ctx_train, 512))
    slots = int(slots)
    if slots < 1:
        raise ValueError(f"slots {slots} must be >= 1")
    if slots > 1:  # whole attention key blocks per slot (KEY_BLOCK)
        ctx = -(-ctx // KEY_BLOCK) * KEY_BLOCK
    max_seq = int(max_seq or max(min(ctx, 128), slots))
    if slots == 1 and not 1 <= max_seq <= ctx:
        raise ValueError(f"max_seq {max_seq} must be in 1..ctx {ctx}")
    if slots > 1 and not slots <= max_seq <= slots * ctx:
        raise ValueError(f"max_seq {max_seq} must be in slots {slots}..slots*ctx {slots * ctx} (a run holds a decode "
                         "token of every slot)")
    seq = Dim("seq", min=1, max=max_seq, typical=1 if slots == 1 else slots, buckets=default_buckets(max_seq, slots))
    model = Decoder(cfg, ctx, slots, kv_dtype)
    constants = gguf_constants(cfg, policy)
    # Every tensor of the file must be used (llama.cpp refuses files with extra tensors too): one
    # left over means a variant this builder does not know, e.g. phi3's LongRoPE rope_factors_*.
    used = {c.tensor for c in constants.values()} | ({"rope_freqs.weight"} if cfg.rope_freqs is not None else set())
    extra = [t for t in cfg.tensor_names if t not in used]
    if extra:
        raise ValueError(f"{cfg.path}: {len(extra)} tensor(s) that DinoML's {cfg.arch} decoder does not use: "
                         f"{extra[:6]}{' ...' if len(extra) > 6 else ''} (a variant of the architecture it does not "
                         "support)")
    inputs = {"tokens": TensorSpec([seq], "int64"), "positions": TensorSpec([seq], "int64")}
    if slots > 1:
        rows = Dim("rows", min=1, max=slots, typical=slots, buckets=(1, slots))
        inputs.update({"slots": TensorSpec([seq], "int64"), "logit_rows": TensorSpec([rows], "int64")})
    return trace(model, inputs=inputs, constants=constants, name=name or cfg.arch)
