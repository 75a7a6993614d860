"""ONNX import: `dml.from_onnx(path, dims={...})` returns a `Spec` that `dml.compile` takes.

The importer is the C++ one (src/import/onnx/), the same as `dinoml compile model.onnx`.
"""
from __future__ import annotations

import os
import re
from typing import Mapping, Optional, Sequence, Union

from ._ext import ext
from .dims import Dim
from .spec import Spec

OnnxImportError = ext.OnnxImportError

DimBound = Union[Dim, int, tuple, list]


def dim_identifier(name: str) -> str:
    """The C identifier DinoML gives an ONNX dim name (`p2o.DynamicDimension.0` ->
    `p2o_DynamicDimension_0`); the importer's dim_identifier()."""
    ident = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return "d_" + ident if not ident or ident[0].isdigit() else ident


def _to_dim(name: str, b: DimBound):
    ident = dim_identifier(name)
    if isinstance(b, Dim):
        if b.name not in (name, ident):
            raise ValueError(f"dims[{name!r}] is a Dim named {b.name!r}")
        return b._dim
    if isinstance(b, int):
        return Dim(ident, b, b)._dim
    if isinstance(b, (tuple, list)) and len(b) in (2, 3):
        buckets = list(b[2]) if len(b) == 3 else None
        return Dim(ident, int(b[0]), int(b[1]), buckets=buckets)._dim
    if isinstance(b, Mapping):
        unknown = set(b) - {"min", "max", "buckets", "typical", "divisible_by"}
        if unknown or "min" not in b or "max" not in b:
            raise TypeError(f"dims[{name!r}]: a dict takes min, max and optionally buckets, typical, divisible_by; "
                            f"got {sorted(b)}")
        return Dim(ident, int(b["min"]), int(b["max"]), typical=b.get("typical"), buckets=b.get("buckets"),
                   divisible_by=int(b.get("divisible_by", 1)))._dim
    raise TypeError(f"dims[{name!r}]: expected a Dim, an int, (min, max), (min, max, buckets) or a dict "
                    f"{{'min', 'max', 'buckets', 'divisible_by'}}; got {b!r}")


def from_onnx(path: Union[str, os.PathLike], dims: Optional[Mapping[str, DimBound]] = None,
              name: Optional[str] = None, bind: Optional[Mapping[str, object]] = None,
              sequences: Optional[Mapping[str, Sequence[Sequence[Union[int, str]]]]] = None,
              absent: Optional[Sequence[str]] = None) -> Spec:
    """Imports the ONNX model at `path`. `dims` gives the bounds of its symbolic dims (ONNX
    `dim_param` names, any string: `{"batch": (1, 8)}`, `{"p2o.DynamicDimension.0": (1, 8)}`;
    an axis with neither size nor dim_param is named `<input>_dim<axis>`):
    `{"seq": (1, 512, [128, 256, 512])}` (buckets), a `dml.Dim`, an int for a fixed size, or a dict
    `{"min": 64, "max": 1024, "buckets": [...], "divisible_by": 32}` (a detector's input side that
    its preprocessing keeps a multiple of its stride).
    Inside the artifact a dim is named by `dim_identifier(name)`; inputs and outputs keep their
    ONNX names. Unsupported operators or attributes raise `OnnxImportError` (a ValueError)
    listing every problem with its node name.

    `bind={"sr": 16000}` fixes graph inputs to values at compile time: they leave the signature
    and everything computed from them folds (an `If` on a sample-rate input keeps one branch).

    Sequence-typed inputs have their length and element shapes fixed at compile time:
    `sequences={"frames": [(3, 224, 224), (3, 224, 224)]}` (an extent may name a dim of `dims`).
    The artifact takes element k as the input `"frames[k]"`; `run_numpy` accepts a list for
    `"frames"` and returns sequence outputs as lists. `absent=["opt"]` compiles optional inputs as
    empty (the others are present).
    int16 / uint16 / uint32 / uint64 inputs and outputs are int32 / int64 tensors of the artifact;
    `run_numpy` converts arrays of those types in and out."""
    import numpy as np
    dl = [_to_dim(k, v) for k, v in (dims or {}).items()]
    bound = {}
    for k, v in (bind or {}).items():
        a = np.asarray(v)
        bound[k] = a.astype(np.float32) if a.dtype == np.float64 else a
    seqs = {k: [[str(e) for e in shape] for shape in v] for k, v in (sequences or {}).items()}
    return Spec(ext.import_onnx(os.fspath(path), dl, name or "", bound, seqs, list(absent or [])))


def supported_ops():
    """ONNX op types the importer converts."""
    return list(ext.onnx_supported_ops())
