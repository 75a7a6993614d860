"""safetensors files from numpy, without the `safetensors` package (a runtime-only install has
numpy only): the format is an 8-byte little-endian header length, a JSON header
{name: {"dtype", "shape", "data_offsets"}} and the raw little-endian bytes.

    dinoml.weights.save({"weight": w, "bias": b}, "model.safetensors")
    module = dinoml.runtime.load("artifact", weights="model.safetensors")
"""
from __future__ import annotations

import json
import os
import struct
from typing import Dict, Mapping, Optional, Union

import numpy as np

_DTYPES = {"float32": "F32", "float16": "F16", "int8": "I8", "uint8": "U8", "int32": "I32", "int64": "I64",
           "bool": "BOOL"}
_NUMPY = {v: k for k, v in _DTYPES.items()}


def save(tensors: Mapping[str, np.ndarray], path: Union[str, os.PathLike],
         metadata: Optional[Mapping[str, str]] = None) -> None:
    """Writes {name: array} in C order. numpy has no bfloat16: bfloat16 constants are written by
    `Module.export_weights` / `dinoml export-weights`, or by the `safetensors` package from torch."""
    header: Dict[str, dict] = {}
    blobs = []
    offset = 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        dt = _DTYPES.get(str(a.dtype))
        if dt is None:
            raise ValueError(f"tensor '{name}': numpy dtype {a.dtype} has no safetensors dtype DinoML reads")
        raw = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = dict(metadata)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load(path: Union[str, os.PathLike]) -> Dict[str, np.ndarray]:
    """Reads a safetensors file into {name: array} (BF16 tensors come back as uint16 bit arrays)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"'{path}' is not a safetensors file: {len(data)} bytes")
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    base = 8 + n
    for name, e in header.items():
        if name == "__metadata__":
            continue
        dt = np.uint16 if e["dtype"] == "BF16" else np.dtype(_NUMPY[e["dtype"]])
        b, end = e["data_offsets"]
        out[name] = np.frombuffer(data[base + b:base + end], dtype=np.dtype(dt).newbyteorder("<")).reshape(e["shape"])
    return out
