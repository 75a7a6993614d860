"""GGUF files in the front end: read a file's metadata and tensor table, and bind Parameters to
GGUF tensors with `gguf_constant`.

    w = dml.gguf_constant("model.gguf", "blk.0.attn_q.weight")               # policy "auto"
    spec = dml.trace(model, inputs=..., constants={"layers.0.wq": w})

Policies (recorded per constant in the artifact's graph.dinoir.json, `source.policy`):
  "dequantize"  dense float32 at compile time (bit-identical to ggml's dequantization);
  "keep"        the blocks go into constants.bin as they are and the quantized GEMM kernels read
                them (only as the weight `b` of gemm_rcr*, i.e. nn.Linear / ops.gemm_rcr*);
  "auto"        keep for 2-d tensors of a quantized type, else dequantize.
A GGUF tensor with ggml extents ne = [K, N] is the row-major [N, K] parameter (a Linear weight).
"""
from __future__ import annotations

from dataclasses import dataclass

from ._ext import ext

POLICIES = ("auto", "dequantize", "keep")


@dataclass(frozen=True)
class GgufConstant:
    """A reference to one tensor of a GGUF file; pass it as a constant's value to dml.trace."""

    path: str
    tensor: str
    policy: str = "auto"


def gguf_constant(path, tensor_name: str, policy: str = "auto") -> GgufConstant:
    if policy not in POLICIES:
        raise ValueError(f"gguf_constant policy must be one of {POLICIES}, got {policy!r}")
    return GgufConstant(str(path), str(tensor_name), policy)


def read(path) -> dict:
    """{"version", "alignment", "metadata": {key: value}, "metadata_types": {key: type},
    "tensors": [{"name", "type", "shape", "ne", "offset", "nbytes"}]}."""
    return ext.gguf_read(str(path))


def tensor(path, name: str):
    """A GGUF tensor dequantized to a float32 numpy array (row-major shape)."""
    return ext.gguf_tensor_dequantized(str(path), name)


def write(path, metadata, tensors, version: int = 3) -> None:
    """Writes a GGUF file with DinoML's writer (the layout ggml writes).

    metadata: [(key, type, value)] with type one of u8 i8 u16 i16 u32 i32 u64 i64 f32 f64 bool
    str, or "arr[<type>]" with a list value. tensors: [(name, array, ggml type name)]; the array's
    row-major shape [.., N, K] becomes ggml extents ne = [K, N, ..]; quantized types are produced
    by DinoML's reference quantizers (bit-identical to ggml's quantize_row_*_ref)."""
    ext.gguf_write(str(path), list(metadata), list(tensors), int(version))


__all__ = ["GgufConstant", "gguf_constant", "read", "tensor", "write", "POLICIES"]
