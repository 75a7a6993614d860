"""Attention and the transformer encoder layer, with torch.nn's parameter names and shapes
(MultiheadAttention(batch_first=True), TransformerEncoderLayer) so state_dicts load by name."""
from __future__ import annotations

import math

from .. import ops
from ..module import Module, Parameter
from .layers import GELU, Dropout, LayerNorm, Linear, ReLU, linear


class MultiheadAttention(Module):
    """Scaled dot-product multi-head attention on [batch, seq, embed] tensors.

    Parameters: in_proj_weight [3E, E], in_proj_bias [3E], out_proj.weight [E, E], out_proj.bias [E].
    forward(query, key=None, value=None, attn_mask=None) returns (output, None) like PyTorch with
    need_weights=False. attn_mask: an additive float mask [S, L] (or broadcastable to
    [B, H, S, L]), or a bool mask where True means "not allowed" (PyTorch's convention).
    """

    def __init__(self, embed_dim: int, num_heads: int, bias: bool = True, batch_first: bool = True, dtype="float32"):
        if embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})")
        if not batch_first:
            raise ValueError("MultiheadAttention: only batch_first=True ([batch, seq, embed]) is supported")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.in_proj_weight = Parameter([3 * embed_dim, embed_dim], dtype)
        self.in_proj_bias = Parameter([3 * embed_dim], dtype) if bias else None
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)

    def _heads(self, t, batch, seq):
        # [B, S, E] -> [B, H, S, D]
        return t.reshape(batch, seq, self.num_heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, query, key=None, value=None, attn_mask=None, need_weights: bool = False):
        if need_weights:
            raise ValueError("MultiheadAttention: need_weights=True is not supported (weights are not materialised)")
        E, H, D = self.embed_dim, self.num_heads, self.head_dim
        batch, seq = query.shape[0], query.shape[1]
        key = query if key is None else key
        value = key if value is None else value
        if key is query and value is query:
            # Self-attention: one [B,S,E]x[3E,E] GEMM, then heads split without per-tensor copies:
            # [B,S,3E] -> [B,S,3,H,D] -> [3,B,H,S,D] -> three [B,H,S,D].
            qkv = linear(query, self.in_proj_weight, self.in_proj_bias)
            qkv = qkv.reshape(batch, seq, 3, H, D).permute(2, 0, 3, 1, 4)
            q, k, v = (t.squeeze(0) for t in ops.split(qkv, [1, 1, 1], axis=0))
        else:
            # Cross-attention: slices of the packed weights are constants (folded at compile time).
            ws = ops.split(self.in_proj_weight, [E, E, E], axis=0)
            bs = ops.split(self.in_proj_bias, [E, E, E], axis=0) if self.in_proj_bias is not None else (None,) * 3
            kv_seq = key.shape[1]
            q = self._heads(linear(query, ws[0], bs[0]), batch, seq)
            k = self._heads(linear(key, ws[1], bs[1]), batch, kv_seq)
            v = self._heads(linear(value, ws[2], bs[2]), batch, kv_seq)
        mask = None
        if attn_mask is not None:
            # PyTorch's bool attn_mask marks forbidden keys; the fused op's bool mask marks allowed
            # ones, so a bool mask becomes the equivalent additive one (0 / -inf).
            mask = ops.where(attn_mask, float("-inf"), 0.0) if attn_mask.dtype == "bool" else attn_mask
        # One fused op: scores are streamed over key blocks, never stored as [B, H, S, L].
        args = (q, k, v) if mask is None else (q, k, v, mask)
        out = ops.scaled_dot_product_attention(*args, scale=1.0 / math.sqrt(D))  # [B, H, S, D]
        out = out.permute(0, 2, 1, 3).reshape(batch, seq, E)
        return self.out_proj(out), None


class TransformerEncoderLayer(Module):
    """torch.nn.TransformerEncoderLayer (batch_first=True) in inference mode: dropout is identity.

    Post-norm (default): x = norm1(x + sa(x)); x = norm2(x + ff(x)).
    Pre-norm (norm_first=True): x = x + sa(norm1(x)); x = x + ff(norm2(x)).
    ff(x) = linear2(activation(linear1(x))).
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation="gelu", layer_norm_eps: float = 1e-5, batch_first: bool = True,
                 norm_first: bool = False, bias: bool = True, dtype="float32"):
        self.self_attn = MultiheadAttention(d_model, nhead, bias=bias, batch_first=batch_first, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        if isinstance(activation, str):
            acts = {"relu": ReLU, "gelu": GELU}
            if activation not in acts:
                raise ValueError(f"TransformerEncoderLayer: activation must be 'relu', 'gelu' or a Module, "
                                 f"got {activation!r}")
            activation = acts[activation]()
        self.activation = activation

    def _sa(self, x, mask):
        return self.self_attn(x, x, x, attn_mask=mask)[0]

    def _ff(self, x):
        return self.linear2(self.activation(self.linear1(x)))

    def forward(self, src, src_mask=None):
        x = src
        if self.norm_first:
            x = x + self._sa(self.norm1(x), src_mask)
            x = x + self._ff(self.norm2(x))
        else:
            x = self.norm1(x + self._sa(x, src_mask))
            x = self.norm2(x + self._ff(x))
        return x
