"""The one path from Python op calls to the C++ GraphBuilder: operand conversion, attribute
clean-up (symbolic extents -> IntExpr) and result wrapping."""
from __future__ import annotations

from typing import Iterable, Optional, Sequence

from .. import dtypes
from .._ext import ext
from ..dims import Dim, SymDim, _to_expr
from ..tensor import Tensor, TensorLike
from ..tracer import current_tracer


def _attr(key: str, v):
    """Python attribute value -> what the extension converts (by the op's schema) to a typed attr."""
    if isinstance(v, (SymDim, Dim)):
        return _to_expr(v)
    if isinstance(v, (list, tuple)):
        return [_to_expr(e) if isinstance(e, (SymDim, Dim)) else e for e in v]
    if key == "dtype" and v is not None and not isinstance(v, str):
        return dtypes.canonical(v)
    return v


def first_dtype(values: Iterable) -> Optional[str]:
    for v in values:
        if isinstance(v, TensorLike):
            return v.dtype
    return None


def call(op: str, inputs: Sequence, attrs: Optional[dict] = None, output_names: Sequence[str] = (),
         like: Optional[str] = None):
    """Adds one `op` node. Python scalars among `inputs` become rank-0 constants of `like` (default:
    the dtype of the first tensor operand). Returns a Tensor, a tuple of Tensors (several
    outputs) or None (no outputs)."""
    tr = current_tracer(f"dml.ops.{op}()")
    if like is None:
        like = first_dtype(inputs)
    names = [tr.as_tensor(v, like).name for v in inputs]
    clean = {k: _attr(k, v) for k, v in (attrs or {}).items() if v is not None}
    outs = tr.builder.op(op, names, clean, list(output_names))
    if not outs:
        return None
    if len(outs) == 1:
        return Tensor(tr, outs[0])
    return tuple(Tensor(tr, n) for n in outs)


def op_doc(d: dict) -> str:
    lines = [d["doc"] or d["name"], ""]
    mx = d["max_inputs"]
    arity = (f"{d['min_inputs']}+" if mx < 0 else
             str(mx) if d["min_inputs"] == mx else f"{d['min_inputs']}..{mx}")
    lines.append(f"Inputs: {arity} tensor(s) (positional). Family: {d['family']}.")
    if d["attrs"]:
        lines.append("Attributes (keyword):")
        for a in d["attrs"]:
            req = ", required" if a["required"] else ""
            lines.append(f"  {a['name']} ({a['kind']}{req}){': ' + a['doc'] if a['doc'] else ''}")
    return "\n".join(lines)


def make_op(d: dict):
    name = d["name"]

    def fn(*inputs, **attrs):
        return call(name, inputs, attrs)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = op_doc(d)
    return fn


def registry():
    return ext.op_defs()
