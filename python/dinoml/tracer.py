"""Tracing: runs a model's forward on `Tensor` proxies while a C++ GraphBuilder records every op.

The tracer of the current thread is found through a thread-local stack, so `dml.state()` and
Parameters work inside forward without being passed around, and independent traces may run on
different threads at the same time.
"""
from __future__ import annotations

import inspect
import os
import threading
from typing import Dict, Mapping, Optional

import numpy as np

from . import dtypes
from ._ext import ext
from .dims import Dim, TensorSpec, _to_expr
from .errors import IrError, ShapeError, TraceError
from .gguf import GgufConstant
from .module import Module, Parameter
from .spec import Spec
from .tensor import Tensor, TensorLike

_local = threading.local()
_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


def _stack():
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


def current_tracer(what: Optional[str] = "this call"):
    """The innermost active tracer of this thread; TraceError naming `what` if none (or None
    when `what` is None)."""
    st = _stack()
    if st:
        return st[-1]
    if what is None:
        return None
    raise TraceError(f"{what} is only valid while tracing a model (inside forward, under dml.trace())")


def _numpy_value(value, what: str) -> np.ndarray:
    """numpy view of a constant value: numpy arrays, torch tensors (bfloat16 as raw bits), lists."""
    mod = type(value).__module__
    if mod.startswith("torch"):
        import torch  # only when the caller already uses torch
        t = value.detach().cpu().contiguous()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().view(np.uint16)
        return t.numpy()
    if isinstance(value, np.ndarray):
        return value
    try:
        return np.asarray(value)
    except Exception as e:  # pragma: no cover - exotic inputs
        raise ValueError(f"{what}: cannot convert {type(value).__name__} to an array: {e}") from e


class Tracer:
    def __init__(self, name: str):
        self.builder = ext.GraphBuilder(name)
        self._params: Dict[int, Tensor] = {}
        self._scalars: Dict[tuple, Tensor] = {}

    # ---- graph leaves --------------------------------------------------------------------------
    def add_dim(self, d: Dim):
        self.builder.add_dim(d._dim)

    def input(self, name: str, spec: TensorSpec) -> Tensor:
        shape = []
        for s in spec.shape:
            if isinstance(s, Dim):
                self.add_dim(s)
            shape.append(_to_expr(s))
        return Tensor(self, self.builder.input(name, spec.dtype, shape))

    def constant(self, name: str, dtype: str, shape, arr: np.ndarray) -> Tensor:
        return Tensor(self, self.builder.constant(name, dtype, [int(s) for s in shape], arr))

    def bind_parameter(self, p: Parameter, name: str, arr: np.ndarray):
        self._params[id(p)] = self.constant(name, p.dtype, p.shape, arr)

    def bind_gguf_parameter(self, p: Parameter, name: str, g: "GgufConstant"):
        self._params[id(p)] = Tensor(self, ext.gguf_constant(self.builder, name, g.path, g.tensor, g.policy,
                                                             [int(s) for s in p.shape]))

    def parameter_tensor(self, p: Parameter) -> Tensor:
        t = self._params.get(id(p))
        if t is None:
            raise TraceError(f"{p!r} is not reachable from the traced model: assign it to an attribute of the "
                             "model or of one of its sub-modules (lists/dicts of modules count) so it gets a name")
        return t

    def scalar(self, value, dtype: str) -> Tensor:
        """A rank-0 constant of `dtype` (Python scalars in binary ops), shared per value."""
        if isinstance(value, float) and not dtypes.is_float(dtype) and dtype != "bool" and not value.is_integer():
            raise ValueError(f"the scalar {value!r} cannot be combined with a {dtype} tensor without losing its "
                             "fraction; cast the tensor to a float dtype first")
        key = (dtype, type(value).__name__, repr(value))
        t = self._scalars.get(key)
        if t is None:
            arr = np.array(value, dtype=dtypes.NUMPY_DTYPE[dtype])
            name = self.builder.unique_name("scalar")
            t = self.constant(name, dtype, (), arr)
            self._scalars[key] = t
        return t

    def array(self, arr: np.ndarray) -> Tensor:
        dt = dtypes.of_numpy(arr)
        if dt is None:
            raise ValueError(f"numpy arrays of dtype {arr.dtype} cannot become DinoML constants; convert to one of "
                             f"{', '.join(dtypes.NUMPY_DTYPE)} first")
        return self.constant(self.builder.unique_name("const"), dt, arr.shape, np.ascontiguousarray(arr))

    def as_tensor(self, v, like_dtype: Optional[str] = None) -> Tensor:
        """Tensor for an op operand: tensors, parameters, Python scalars (rank-0 constants of the
        other operand's dtype), numpy arrays (anonymous constants)."""
        if isinstance(v, Tensor):
            if v._tracer is not self:
                raise TraceError(f"tensor {v.name!r} belongs to another (or a finished) trace")
            return v
        if isinstance(v, TensorLike):
            return v._t()
        if isinstance(v, (bool, np.bool_)):
            return self.scalar(bool(v), like_dtype or "bool")
        if isinstance(v, (int, np.integer)):
            return self.scalar(int(v), like_dtype or "int64")
        if isinstance(v, (float, np.floating)):
            return self.scalar(float(v), like_dtype or "float32")
        if isinstance(v, np.ndarray):
            return self.array(v)
        raise TypeError(f"expected a dml Tensor, Parameter, Python scalar or numpy array as op operand, "
                        f"got {type(v).__name__}")

    # ---- thread-local activation -------------------------------------------------------------------
    def __enter__(self):
        _stack().append(self)
        return self

    def __exit__(self, *exc):
        _stack().pop()
        return False


def state(name: str, shape, dtype="float32") -> Tensor:
    """A persistent per-session tensor (static shape, zero at session creation). Write it with
    `dml.ops.state_assign(state, value)`; only valid while tracing."""
    tr = current_tracer("dml.state()")
    shp = [int(s) for s in shape]
    return Tensor(tr, tr.builder.state(name, dtypes.canonical(dtype), shp))


def _user_location(tb) -> Optional[str]:
    """file:line of the innermost frame outside the dinoml package (the user's model line)."""
    loc = None
    while tb is not None:
        fn = tb.tb_frame.f_code.co_filename
        if not os.path.abspath(fn).startswith(_PKG_DIR + os.sep):
            loc = f"{fn}:{tb.tb_lineno} in {tb.tb_frame.f_code.co_name}"
        tb = tb.tb_next
    return loc


def _bind_parameters(tr: Tracer, model, constants: Mapping, strict: bool):
    params = list(model.named_parameters()) if isinstance(model, Module) else []
    provided = dict(constants or {})
    missing = [(n, p) for n, p in params if n not in provided and p.data is None]
    if missing:
        desc = ", ".join(f"'{n}' ({p.dtype}{list(p.shape)})" for n, p in missing)
        keys = sorted(provided)
        raise ValueError(f"parameter {desc} has no value: pass it in trace(constants={{name: array}}) or as "
                         f"Parameter(data=...); provided keys: {keys if keys else 'none'}")
    if strict:
        known = {n for n, _ in params}
        extra = sorted(k for k in provided if k not in known)
        if extra:
            raise ValueError(f"constants {extra} match no Parameter of the model (parameters: {sorted(known)}); "
                             "pass strict=False to ignore them")
    for n, p in params:
        value = provided[n] if n in provided else p.data
        if isinstance(value, GgufConstant):  # bound to a GGUF tensor (dml.gguf_constant)
            if p.dtype != "float32":
                raise ValueError(f"constant '{n}': a GGUF tensor becomes a float32 parameter (dequantized or kept "
                                 f"as blocks), the Parameter is declared {p.dtype}")
            tr.bind_gguf_parameter(p, n, value)
            continue
        arr = _numpy_value(value, f"constant '{n}'")
        if tuple(arr.shape) != p.shape:
            raise ValueError(f"constant '{n}': value has shape {list(arr.shape)}, the Parameter is declared "
                             f"{list(p.shape)}")
        got = dtypes.of_numpy(arr)
        ok = got == p.dtype or (p.dtype == "bfloat16" and arr.dtype in (np.float32, np.uint16))
        if not ok:
            raise ValueError(f"constant '{n}': value has dtype {arr.dtype}, the Parameter is declared {p.dtype} "
                             f"(convert it, e.g. value.astype('{dtypes.NUMPY_DTYPE[p.dtype]}'))")
        tr.bind_parameter(p, n, np.ascontiguousarray(arr))


def _call_forward(model, tensors: Dict[str, Tensor]):
    fn = model.forward if isinstance(model, Module) else model
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return model(*tensors.values())
    params = sig.parameters.values()
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    if any(p.kind == p.VAR_KEYWORD for p in params) or set(tensors) <= names:
        return model(**tensors)
    return model(*tensors.values())


def _mark_outputs(tr: Tracer, result):
    def mark(v, name):
        t = tr.as_tensor(v)
        if t.kind == "output":
            return
        if tr.builder.has_tensor(name):
            name = tr.builder.unique_name(name)
        tr.builder.output(t.name, name)

    if result is None:
        return
    if isinstance(result, TensorLike):
        mark(result, "output")
    elif isinstance(result, (list, tuple)):
        for i, r in enumerate(result):
            if r is not None:
                mark(r, f"output{i}")
    elif isinstance(result, dict):
        for k, r in result.items():
            mark(r, str(k))
    else:
        raise TypeError(f"forward returned {type(result).__name__}; return a Tensor, a tuple/list/dict of "
                        "Tensors, or None after naming outputs with dml.ops.output")


def trace(model, inputs: Mapping[str, TensorSpec], constants: Optional[Mapping] = None, name: str = "model",
          strict: bool = True) -> Spec:
    """Traces `model` (a dml.Module, or any callable without parameters) into a Spec.

    inputs: {input name: TensorSpec}, passed to forward by keyword when forward has parameters of
    those names, else positionally in dict order. constants: {dotted parameter name: array}
    (numpy or torch); with strict=True a key matching no Parameter is an error.
    Returned tensors that were not named with dml.ops.output become outputs "output" (single),
    "output<i>" (tuple/list) or the dict's keys.
    """
    for n, s in inputs.items():
        if not isinstance(s, TensorSpec):
            raise TypeError(f"input '{n}': expected a dml.TensorSpec, got {type(s).__name__}")
    tr = Tracer(name)
    tensors = {n: tr.input(n, s) for n, s in inputs.items()}
    _bind_parameters(tr, model, constants, strict)
    with tr:
        try:
            result = _call_forward(model, tensors)
            _mark_outputs(tr, result)
        except (ShapeError, IrError) as e:
            loc = _user_location(e.__traceback__)
            if loc is None:
                raise
            raise type(e)(f"{e}\n  (traced at {loc})").with_traceback(e.__traceback__) from None
    graph = tr.builder.finish()
    if not graph.outputs:
        raise ValueError(f"model '{name}' produced no outputs: return tensors from forward or name them with "
                         "dml.ops.output(x, 'name')")
    return Spec(graph)


__all__ = ["trace", "state", "current_tracer", "Tracer"]
