"""PyTorch front end: `torch.nn.Module` → `torch.export` → DinoML `Spec`.

    spec = dml.from_torch(model, (ids,), dynamic_shapes={"input_ids": {0: batch, 1: seq}})
    mod = dml.compile_torch(model, (ids,), target="cpu", out="out/bert", dynamic_shapes=...)
    out = mod.create_session().run_torch({"input_ids": ids})

The module is exported (`torch.export.export`, under `torch.no_grad()` in eval mode), its graph
is decomposed to core ATen except the ops DinoML converts whole (linear, layer_norm, attention,
conv, batch norm, softmax, gelu, ...: `KEEP`), and every node goes through one converter of the
table in `_torch_ops` / `_torch_shape_ops`, which adds registered DinoML ops through the same
`GraphBuilder` as `dml.trace`.

Names: graph inputs keep the forward's argument names; parameters and buffers become constants
named by their state_dict keys, except buffers the forward writes (a counter, a running mean, a
KV cache), which become session states of the same names (`_Converter._state`); outputs are
flattened from the forward's return structure: "out" for a lone tensor, "out.0", "out.1" for
tuples, the keys for dicts and ModelOutputs ("logits", "last_hidden_state"), dotted for nesting.
Symbolic sizes: each `torch.export.Dim` becomes a `dml.Dim` with its min/max;
`dims={"batch": [1, 4, 8]}` sets its buckets (and max when the Dim has none), `dims={"batch": 4}`
fixes it.
"""
from __future__ import annotations

import inspect
import os
from typing import Any, Dict, Mapping, Optional, Sequence, Union

import numpy as np
import torch

from .. import dtypes
from .._ext import ext
from ..dims import Dim, SymDim, extent
from ..errors import IrError, ShapeError, TraceError
from ..spec import Spec
from ..tensor import Tensor
from ..tracer import Tracer
from . import _torch_shape_ops  # noqa: F401  (registers the shape converters)
from ._torch_ops import CONVERTERS, Unsupported

_DTYPES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16", torch.int64: "int64",
           torch.int32: "int32", torch.int8: "int8", torch.uint8: "uint8", torch.bool: "bool"}

# Ops that keep their own converter instead of being decomposed into core ATen (a fused DinoML op
# or a cheaper composition exists for each).
KEEP = ("linear", "layer_norm", "native_layer_norm", "scaled_dot_product_attention", "gelu", "silu", "hardswish",
        "hardsigmoid", "hardtanh", "relu6", "rms_norm", "group_norm", "native_group_norm", "softmax", "_softmax",
        "log_softmax", "_log_softmax", "matmul", "conv1d", "conv2d", "convolution", "embedding",
        "_native_batch_norm_legit_no_training", "batch_norm", "upsample_nearest2d", "upsample_bilinear2d",
        "adaptive_avg_pool2d", "_adaptive_avg_pool2d", "avg_pool2d", "max_pool2d", "mean", "addmm", "t", "transpose",
        "flatten", "squeeze", "unsqueeze", "select", "split", "split_with_sizes", "chunk", "unbind", "masked_fill",
        "clamp", "clamp_min", "clamp_max", "where", "full", "zeros", "ones", "full_like", "zeros_like", "ones_like",
        "arange", "rsub", "reciprocal", "index_select", "constant_pad_nd", "gather", "stack", "repeat", "square",
        "var", "var_mean", "pow", "erf", "select_scatter")


class TorchConversionError(ValueError):
    """The exported program uses ops (or arguments) that DinoML cannot convert; the message lists
    each one once with the user's source line and module path."""


class TorchExportError(TraceError):
    """torch.export could not capture the module (data-dependent control flow, unsupported Python)."""


def decomposition_table():
    """The core-ATen decompositions minus the ops of KEEP (converted whole)."""
    table = torch.export.default_decompositions()
    for op in list(table.keys()):
        if op._overloadpacket.__name__ in KEEP:
            del table[op]
    return table


# ---- source locations ---------------------------------------------------------------------------------
def _user_frame(node) -> str:
    """The last frame of node.meta["stack_trace"] outside torch/transformers internals' plumbing."""
    st = node.meta.get("stack_trace") or ""
    frames = []
    lines = st.strip().splitlines()
    for i, ln in enumerate(lines):
        s = ln.strip()
        if s.startswith("File "):
            code = lines[i + 1].strip() if i + 1 < len(lines) and not lines[i + 1].strip().startswith("File ") else ""
            frames.append((s, code))
    if not frames:
        return "(no source location recorded)"
    internal = (os.sep + "torch" + os.sep, os.sep + "dinoml" + os.sep)
    user = [f for f in frames if not any(p in f[0] for p in internal)]
    loc, code = (user or frames)[-1]
    return f"{loc}{': ' + code if code else ''}"


def _module_path(node) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return "(top level)"
    path, cls = list(stack.values())[-1]
    cls = getattr(cls, "__name__", str(cls)).split(".")[-1].rstrip("'>")
    return f"{path or '(root)'} ({cls})"


def _where(node) -> str:
    return f"at {_user_frame(node)}, module {_module_path(node)}"


# ---- the converter ----------------------------------------------------------------------------------
class _Converter:
    def __init__(self, ep, name: str, dim_names: Mapping, dims: Mapping):
        self.ep = ep
        self.tr = Tracer(name)
        self.env: Dict[Any, Any] = {}
        self.sym: Dict[Any, Any] = {}  # sympy symbol -> ext.IntExpr
        self.dim_names = dim_names
        self.dims = dict(dims or {})
        self._consts: Dict[tuple, Tensor] = {}
        sig = ep.graph_signature
        self.params = dict(sig.inputs_to_parameters)
        self.params.update(sig.inputs_to_buffers)
        self.params.update(getattr(sig, "inputs_to_lifted_tensor_constants", {}) or {})
        # Non-tensor arguments (use_cache=False, a float) are specialised by export: the signature
        # lists their values, not placeholder names.
        self.user_inputs = [u for u in sig.user_inputs if isinstance(u, str)]
        self.constants = dict(ep.state_dict)
        self.constants.update(getattr(ep, "constants", {}) or {})
        self.states: Dict[str, str] = {}  # placeholder name -> name of a buffer the forward writes
        self.state_tensors: Dict[str, Tensor] = {}  # buffer name -> its DinoML state
        self.state_writes: list = []  # (buffer name, graph value of its new contents)
        self.user_values: list = []  # the graph values of the user outputs
        self._initialized: Optional[Tensor] = None
        self._classify_outputs()

    def _classify_outputs(self):
        """Splits the graph's outputs into user outputs and buffer writes (-> states); every other
        write (to an input or a parameter, or one that changes a buffer's shape or dtype) is
        reported in one TorchConversionError."""
        from torch.export.graph_signature import OutputKind
        sig = self.ep.graph_signature
        out_node = next(n for n in self.ep.graph.nodes if n.op == "output")
        placeholder_of = {b: p for p, b in sig.inputs_to_buffers.items()}
        problems = []
        for spec, v in zip(sig.output_specs, out_node.args[0]):
            kind, target = spec.kind, spec.target
            where = _where(v) if isinstance(v, torch.fx.Node) else "(a constant value)"
            if kind == OutputKind.USER_OUTPUT:
                self.user_values.append(v)
            elif kind == OutputKind.BUFFER_MUTATION:
                t = self.constants.get(target)
                val = v.meta.get("val") if isinstance(v, torch.fx.Node) else None
                new = _describe(val)
                if t is None or not isinstance(val, torch.Tensor):
                    problems.append(f"  buffer {target!r}{_owner(target)}: written with {new}, which DinoML cannot "
                                    f"keep as session state\n    {where}")
                elif val.dtype != t.dtype or not _same_static_shape(val.shape, t.shape):
                    problems.append(f"  buffer {target!r}{_owner(target)}, {_describe(t)}, is written with {new}: a "
                                    "session state keeps its shape and dtype; preallocate the buffer at its full "
                                    "size and dtype and write into it (index_copy_, slice assignment, copy_)"
                                    f"\n    {where}")
                else:
                    self.states[placeholder_of[target]] = target
                    self.state_writes.append((target, v))
            elif kind == OutputKind.USER_INPUT_MUTATION:
                problems.append(f"  input {target!r} is written in place: DinoML inputs are read-only; return the "
                                f"new value as an output instead\n    {where}")
            elif kind == OutputKind.PARAMETER_MUTATION:
                problems.append(f"  parameter {target!r}{_owner(target)} is written in place: parameters become "
                                "constants; register it as a buffer (register_buffer) to keep it as session "
                                f"state\n    {where}")
            elif kind != OutputKind.TOKEN:
                problems.append(f"  output {spec.arg.name!r} of kind {kind.name} (training outputs are not "
                                f"supported)\n    {where}")
        if problems:
            raise TorchConversionError("the forward writes to tensors DinoML cannot keep between runs:\n"
                                       + "\n".join(problems))

    # -- helpers used by the converters --
    def dtype(self, node) -> str:
        v = node.meta.get("val")
        if isinstance(v, (list, tuple)):
            v = v[0]
        return _dtype_name(v.dtype)

    def torch_dtype(self, node):
        return node.meta["val"].dtype

    def extent(self, node, axis: int):
        """Axis `axis` of the node's output as torch inferred it (int or SymDim)."""
        v = node.meta["val"]
        return self.symint((v[0] if isinstance(v, (list, tuple)) else v).shape[axis])

    def out_shape(self, node):
        v = node.meta["val"]
        return [self.symint(e) for e in (v[0] if isinstance(v, (list, tuple)) else v).shape]

    def promoted(self, node) -> str:
        vals = [a.meta.get("val") if isinstance(a, torch.fx.Node) else a for a in node.args[:2]]
        return _dtype_name(torch.result_type(*vals))

    def operand(self, v, dt: str):
        if isinstance(v, Tensor):
            return v if v.dtype == dt else ext_cast(v, dt)
        if isinstance(v, SymDim):  # a size used as a value: sum of ones over a [size] tensor
            from .. import ops
            return ops.reduce_sum(ops.full([v], 1.0, dtype=dt), None)
        if isinstance(v, (bool, int, float)):
            return self.tr.scalar(v if dt != "bool" else bool(v), dt)
        raise Unsupported(f"operand of type {type(v).__name__}")

    def ones(self, shape, dt):
        return self._const_fill(shape, dt, 1)

    def zeros(self, shape, dt):
        return self._const_fill(shape, dt, 0)

    def _const_fill(self, shape, dt, v):
        key = (tuple(shape), dt, v)
        if key not in self._consts:
            self._consts[key] = self.tr.constant(self.tr.builder.unique_name("const"), dt, shape,
                                                 np.full(shape, v, dtype=dtypes.NUMPY_DTYPE[dt]))
        return self._consts[key]

    # -- symbolic sizes --
    def expr(self, e):
        import sympy
        from torch.utils._sympy.functions import CleanDiv, FloorDiv, Mod, PythonMod
        if isinstance(e, (int, np.integer)) or getattr(e, "is_Integer", False):
            return ext.IntExpr(int(e))
        if isinstance(e, sympy.Symbol):
            if e not in self.sym:
                raise Unsupported(f"the size {e} depends on tensor data (a data-dependent shape, e.g. from "
                                  "nonzero() or .item()); DinoML needs sizes that follow from the input shapes")
            return self.sym[e]
        if isinstance(e, sympy.Add):
            acc = self.expr(e.args[0])
            for a in e.args[1:]:
                acc = acc + self.expr(a)
            return acc
        if isinstance(e, sympy.Mul):
            acc = None
            for a in e.args:
                if isinstance(a, sympy.Rational) and not a.is_Integer:
                    raise Unsupported(f"the size {e} has a fractional coefficient")
                x = self.expr(a)
                acc = x if acc is None else acc * x
            return acc
        if isinstance(e, (FloorDiv, CleanDiv)):
            return self.expr(e.args[0]) // self.expr(e.args[1])
        if isinstance(e, (Mod, PythonMod)):
            a, b = self.expr(e.args[0]), self.expr(e.args[1])
            return a - (a // b) * b
        if isinstance(e, sympy.Pow) and e.args[1].is_Integer and int(e.args[1]) > 0:
            b = self.expr(e.args[0])
            acc = b
            for _ in range(int(e.args[1]) - 1):
                acc = acc * b
            return acc
        raise Unsupported(f"the size expression {e} ({type(e).__name__})")

    def symint(self, v):
        if isinstance(v, torch.SymInt):
            return extent(self.expr(v.node.expr))
        return v

    def _declare_dims(self):
        """torch symbols of the user inputs' sizes -> dml Dims (or fixed ints)."""
        rc = self.ep.range_constraints
        phs = {n.name: n for n in self.ep.graph.nodes if n.op == "placeholder"}
        import sympy
        for inp in self.user_inputs:
            val = phs[inp].meta.get("val")
            if not isinstance(val, torch.Tensor):
                continue
            for axis, s in enumerate(val.shape):
                if not isinstance(s, torch.SymInt):
                    continue
                e = s.node.expr
                if not isinstance(e, sympy.Symbol) or e in self.sym:
                    continue
                name = self.dim_names.get((inp, axis)) or f"{inp}_{axis}"
                rng = rc.get(e)
                lo = _bound(rng.lower) if rng is not None else None
                hi = _bound(rng.upper) if rng is not None else None
                lo = 1 if lo is None else lo
                self.sym[e] = self._make_dim(name, lo, hi, inp, axis)

    def _make_dim(self, name, lo, hi, inp, axis):
        want = self.dims.pop(name, None)
        if isinstance(want, Dim):
            d = want
        elif isinstance(want, int) and not isinstance(want, bool):
            if (hi is not None and want > hi) or want < lo:
                raise ValueError(f"dims[{name!r}] = {want} is outside the exported range [{lo}, {hi}]")
            return ext.IntExpr(want)
        else:
            buckets = list(want) if want is not None else None
            if hi is None:
                if not buckets:
                    raise ValueError(f"dim {name!r} (input {inp!r}, axis {axis}) has no upper bound: give "
                                     f"torch.export.Dim({name!r}, max=N), or dims={{{name!r}: N or [bucket sizes]}}")
                hi = max(buckets)
            d = Dim(name, lo, hi, buckets=buckets)
        self.tr.add_dim(d)
        return d.expr()

    # -- conversion --
    def run(self, module_for_names=None):
        self._declare_dims()
        if self.dims:
            raise ValueError(f"dims {sorted(self.dims)} name no dynamic dim of the exported program (its dims: "
                             f"{sorted(self.dim_names.values()) or 'none'})")
        graph = self.ep.graph
        self._check_supported(graph)
        constants = self.constants
        failures = []
        with self.tr:
            for node in graph.nodes:
                try:
                    self._node(node, constants)
                except (Unsupported, ShapeError, IrError, ValueError, TypeError) as e:
                    if isinstance(e, (TorchConversionError,)):
                        raise
                    failures.append(f"  {_node_label(node)}: {e}\n    {_where(node)}")
                    break  # later nodes depend on this one
        if failures:
            raise TorchConversionError("cannot convert the exported program to DinoML:\n" + "\n".join(failures))
        return Spec(self.tr.builder.finish())

    def _check_supported(self, graph):
        missing: Dict[str, Any] = {}
        for node in graph.nodes:
            if node.op != "call_function" or _is_sym(node) or node.target is _getitem:
                continue
            if _lookup(node) is None and str(node.target) not in missing:
                missing[str(node.target)] = node
        if missing:
            lines = [f"  {op}\n    {_where(n)}" for op, n in missing.items()]
            raise TorchConversionError(
                f"{len(missing)} op(s) of the exported program have no DinoML conversion (each listed once, at its "
                "first use):\n" + "\n".join(lines) + "\nRewrite these lines with supported operations, or file an "
                "issue naming the op (python -c 'import dinoml.frontends.torch as t; print(t.supported_ops())' "
                "lists the supported ones).")

    def _node(self, node, constants):
        if node.op == "placeholder":
            self.env[node] = self._placeholder(node, constants)
        elif node.op == "call_function":
            if _is_sym(node):
                self.env[node] = self.symint(node.meta["val"])
                return
            args = torch.fx.node.map_arg(node.args, lambda n: self.env[n])
            kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: self.env[n])
            if node.target is _getitem:
                self.env[node] = args[0][args[1]]
                return
            args = _map_sym(args, self.symint)
            kwargs = {k: _map_sym(v, self.symint) for k, v in kwargs.items() if k not in ("device", "layout",
                                                                                           "pin_memory",
                                                                                           "memory_format",
                                                                                           "non_blocking")}
            kwargs.pop("dtype", None) if str(node.target).split(".")[1] not in ("sum", "mean") else None
            self.env[node] = _lookup(node)(self, node, *args, **kwargs)
        elif node.op == "output":
            self._outputs(node.args[0])
        elif node.op == "get_attr":
            raise Unsupported(f"get_attr node {node.target} (a nested graph): not supported")

    def _placeholder(self, node, constants):
        val = node.meta.get("val")
        if node.name in self.states:
            return self._state(self.states[node.name])
        if node.name in self.params:
            key = self.params[node.name]
            if not node.users:
                return None
            t = constants.get(key)
            if t is None:
                raise Unsupported(f"constant {key!r} has no value in the exported program")
            return self.tr.constant(key, _dtype_name(t.dtype), list(t.shape), _numpy(t))
        if isinstance(val, torch.Tensor):
            shape = [self.symint(s) for s in val.shape]
            shape = [s.expr if isinstance(s, SymDim) else s for s in shape]
            return Tensor(self.tr, self.tr.builder.input(node.name, _dtype_name(val.dtype),
                                                         [e if isinstance(e, ext.IntExpr) else ext.IntExpr(int(e))
                                                          for e in shape]))
        if isinstance(val, torch.SymInt):
            raise Unsupported(f"input {node.name!r} is a symbolic int; pass sizes as tensor shapes instead")
        return val  # a constant Python value specialised by export

    def _state(self, key: str):
        """The session state of buffer `key` (written by the forward). The runtime zeroes states at
        session creation and reset_states; a buffer whose export-time value is not all zero bytes
        reads `where(initialized, state, <that value as a constant>)`, with `initialized` a bool
        state the run sets, so the first run after creation or a reset starts from that value."""
        from .. import ops
        from ..tracer import state
        t = self.constants[key]
        dt = _dtype_name(t.dtype)
        st = state(key, list(t.shape), dt)
        self.state_tensors[key] = st
        arr = _numpy(t)
        if not np.ascontiguousarray(arr).reshape(-1).view(np.uint8).any():
            return st
        init = self.tr.constant(self.tr.builder.unique_name(key + ".initial"), dt, list(t.shape), arr)
        if self._initialized is None:
            names = set(self.constants) | set(self.params.values())
            flag = "dinoml.initialized"
            while flag in names:
                flag += "_"
            self._initialized = state(flag, [], "bool")
        return ops.where(self._initialized, st, init)

    def _state_writes(self):
        from .. import ops
        for key, v in self.state_writes:
            st = self.state_tensors[key]
            val = self.env[v]
            if val is st:
                continue
            if not isinstance(val, Tensor):
                val = self.operand(val, st.dtype)
            if val.dtype != st.dtype:
                val = ops.cast(val, st.dtype)
            if [_int_or_none(e) for e in val.shape] != list(st.shape):
                val = ops.expand(val, list(st.shape)) if val.ndim < st.ndim else ops.reshape(val, list(st.shape))
            ops.state_assign(st, val)
        if self._initialized is not None:
            ops.state_assign(self._initialized, self.tr.scalar(True, "bool"))

    def _outputs(self, _values):
        self._state_writes()
        values = self.user_values
        spec = self.ep.call_spec.out_spec
        names = _output_names(spec, len(values))
        seen = set()
        for v, name in zip(values, names):
            if v is None:
                continue
            t = self.env[v]
            if not isinstance(t, Tensor):
                raise TorchConversionError(f"output {name!r} is not a tensor ({type(t).__name__}); DinoML outputs "
                                           "are tensors")
            if t.kind in ("input", "constant", "state", "output") or t.name in seen:
                from .. import ops
                t = ops.reshape(t, list(t.shape))  # a distinct tensor for the output name
            seen.add(t.name)
            self.tr.builder.output(t.name, name)


_getitem = __import__("operator").getitem


def ext_cast(t, dt):
    from .. import ops
    return ops.cast(t, dt)


def _bound(v):
    """A range bound as an int, None when unbounded (torch's int_oo / sympy oo)."""
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError, AttributeError):
        return None


def _int_or_none(e):
    try:
        return int(e)
    except (TypeError, ValueError):
        return None


def _same_static_shape(a, b) -> bool:
    return len(a) == len(b) and all(isinstance(x, int) and int(x) == int(y) for x, y in zip(a, b))


def _describe(v) -> str:
    if isinstance(v, torch.Tensor):
        return f"{str(v.dtype).replace('torch.', '')}{list(v.shape)}"
    return type(v).__name__


def _owner(name: str) -> str:
    """' of module <path>' for a dotted state_dict key (the module that registered it)."""
    path = name.rpartition(".")[0]
    return f" of module {path}" if path else " of the root module"


def _is_sym(node) -> bool:
    return isinstance(node.meta.get("val"), (torch.SymInt, torch.SymFloat, torch.SymBool))


def _map_sym(v, fn):
    if isinstance(v, (list, tuple)):
        return type(v)(_map_sym(x, fn) for x in v)
    return fn(v)


def _lookup(node):
    t = node.target
    key = str(t)
    if key in CONVERTERS:
        return CONVERTERS[key]
    packet = getattr(t, "_overloadpacket", None)
    if packet is not None:
        return CONVERTERS.get(str(packet))
    return None


def _node_label(node) -> str:
    return f"{node.target} ({node.name})" if node.op == "call_function" else node.name


def _dtype_name(dt) -> str:
    if dt not in _DTYPES:
        raise Unsupported(f"dtype {dt} (DinoML has {', '.join(_DTYPES.values())})")
    return _DTYPES[dt]


def _numpy(t: torch.Tensor) -> np.ndarray:
    """A numpy view of a CPU tensor (bfloat16 as its bits); copies only non-contiguous or non-CPU ones."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if not t.is_contiguous():
        t = t.contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def _output_names(spec, n: int):
    from torch.utils import _pytree as pytree
    tree = pytree.tree_unflatten(list(range(n)), spec)
    flat, _ = pytree.tree_flatten_with_path(tree)
    names = [None] * n
    for path, idx in flat:
        parts = []
        for k in path:
            if isinstance(k, pytree.SequenceKey):
                parts.append(str(k.idx))
            elif isinstance(k, pytree.MappingKey):
                parts.append(str(k.key))
            elif isinstance(k, pytree.GetAttrKey):
                parts.append(str(k.name))
            else:
                parts.append(str(k).strip(".[]'\""))
        if not parts:
            names[idx] = "out"
        elif isinstance(path[0], pytree.SequenceKey):
            names[idx] = "out." + ".".join(parts)
        else:
            names[idx] = ".".join(parts)
    return names


# ---- dims from dynamic_shapes ------------------------------------------------------------------------
def _dim_names(module, args, kwargs, dynamic_shapes) -> Dict[tuple, str]:
    """(placeholder name, axis) -> the torch.export.Dim's name, for top-level tensor arguments."""
    if dynamic_shapes is None:
        return {}
    try:
        bound = inspect.signature(module.forward).bind(*args, **(kwargs or {}))
        arg_names = list(bound.arguments)
    except (TypeError, ValueError):
        arg_names = [f"args_{i}" for i in range(len(args))] + list(kwargs or {})
    if isinstance(dynamic_shapes, Mapping):
        per_arg = dict(dynamic_shapes)
    else:
        per_arg = dict(zip(arg_names, dynamic_shapes))
    out = {}
    for arg, spec in per_arg.items():
        if isinstance(spec, Mapping):
            items = spec.items()
        elif isinstance(spec, (list, tuple)):
            items = enumerate(spec)
        else:
            continue
        for axis, d in items:
            name = getattr(d, "__name__", None)
            if name and isinstance(axis, int):
                out[(arg, axis)] = name
    return out


# ---- entry points ----------------------------------------------------------------------------------
def export(module, args: Sequence = (), kwargs: Optional[Mapping] = None, dynamic_shapes=None):
    """torch.export.export in eval mode under no_grad, with DinoML's error for what export rejects."""
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"from_torch expects a torch.nn.Module, got {type(module).__name__}")
    if not isinstance(args, tuple):
        args = tuple(args) if isinstance(args, list) else (args,)
    was_training = module.training
    module.eval()
    reassigned: Dict[str, str] = {}
    hook = _watch_submodule_buffer_assignments(module, reassigned)
    try:
        with torch.no_grad():
            ep = torch.export.export(module, args, kwargs=dict(kwargs or {}), dynamic_shapes=dynamic_shapes)
    except Exception as e:  # torch raises many types; all mean "could not capture"
        raise TorchExportError(_export_message(module, e)) from e
    finally:
        hook.remove()
        module.train(was_training)
    if reassigned:
        lines = [f"  buffer {k!r}{_owner(k)} is rebound (self.<buffer> = new tensor) inside a submodule: "
                 "torch.export drops such writes; write it in place instead (self.<buffer>.copy_(new), +=, "
                 f"index_copy_)\n    at {w}" for k, w in reassigned.items()]
        raise TorchConversionError("the forward writes to tensors DinoML cannot keep between runs:\n"
                                   + "\n".join(lines))
    return ep


def _watch_submodule_buffer_assignments(module, found: Dict[str, str]):
    """A buffer registration hook that records `self.buf = <new tensor>` inside a submodule while
    export traces (torch.export turns the root module's rebinding into a buffer write but loses
    a submodule's); the tracer's own swaps assign real tensors, the forward's assign fake ones."""
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.nn.modules.module import register_module_buffer_registration_hook
    paths = {id(m): p for p, m in module.named_modules() if p}

    def hook(mod, name, value):
        if id(mod) in paths and isinstance(value, FakeTensor) and value is not mod._buffers.get(name):
            found.setdefault(f"{paths[id(mod)]}.{name}", _python_user_frame())
        return None

    return register_module_buffer_registration_hook(hook)


def _python_user_frame() -> str:
    import traceback
    internal = (os.sep + "torch" + os.sep, os.sep + "dinoml" + os.sep)
    frames = [f for f in traceback.extract_stack() if not any(p in f.filename for p in internal)]
    if not frames:
        return "(no source location recorded)"
    f = frames[-1]
    return f'File "{f.filename}", line {f.lineno}, in {f.name}{": " + f.line if f.line else ""}'


def _export_message(module, e: Exception) -> str:
    text = str(e)
    kind = type(e).__name__
    data_dep = ("data-dependent" in text or "GuardOnDataDependent" in kind or "data dependent" in text
                or "Could not guard on data-dependent" in text)
    lines = text.strip().splitlines()
    head = "\n".join(lines[:3])
    # torch names the user's line after this marker; keep it even when the message is long.
    for i, ln in enumerate(lines):
        if "The following call raised this error" in ln:
            head += "\n" + "\n".join(lines[i:i + 3])
            break
    else:
        head = "\n".join(lines[:12])
    name = type(module).__name__
    if data_dep:
        advice = ("The forward branches or sizes a tensor by its values (data-dependent control flow: "
                  "`if x.sum() > 0`, `.item()`, `nonzero()`). An ahead-of-time graph cannot branch on data: "
                  "compute both sides and select with torch.where, or use torch.cond, or move the decision "
                  "out of the module.")
    elif "Constraints violated" in text or "specialized" in text or "dynamic_shapes" in text:
        advice = ("The dynamic_shapes given do not hold for this forward (torch specialised or related a dim): "
                  "follow torch's suggested fixes above (e.g. a different min/max, or a derived Dim).")
    else:
        advice = "torch.export must capture the module in one graph; see torch's message above for the line."
    return f"torch.export could not capture {name} ({kind}):\n{head}\n{advice}"


def _check_reassignments(ep):
    """A forward that rebinds a buffer to a tensor of another shape (`self.buf = torch.cat(...)`)
    exports as `copy_(buffer, value)` with a value that does not broadcast to the buffer;
    functionalization would fail on it with a bare expand error, so it is reported here."""
    sig = ep.graph_signature
    names = {p: ("buffer", b) for p, b in sig.inputs_to_buffers.items()}
    names.update({p: ("parameter", b) for p, b in sig.inputs_to_parameters.items()})
    names.update({u: ("input", u) for u in sig.user_inputs})
    problems = []
    for n in ep.graph.nodes:
        if n.op != "call_function" or str(n.target) != "aten.copy_.default" or len(n.args) < 2:
            continue
        dst, src = n.args[0], n.args[1]
        if not isinstance(dst, torch.fx.Node) or dst.name not in names or not isinstance(src, torch.fx.Node):
            continue
        d, v = dst.meta.get("val"), src.meta.get("val")
        if not isinstance(d, torch.Tensor) or not isinstance(v, torch.Tensor):
            continue
        try:
            ok = tuple(torch.broadcast_shapes(tuple(v.shape), tuple(d.shape))) == tuple(d.shape)
        except (RuntimeError, ValueError, TypeError):
            ok = False
        if not ok:
            what, key = names[dst.name]
            owner = _owner(key) if what != "input" else ""
            problems.append(f"  {what} {key!r}{owner}, {_describe(d)}, is assigned a tensor of shape {list(v.shape)}:"
                            " a session state keeps its shape; preallocate the buffer at its full size and write "
                            f"into it (index_copy_, slice assignment)\n    {_where(n)}")
    if problems:
        raise TorchConversionError("the forward writes to tensors DinoML cannot keep between runs:\n"
                                   + "\n".join(problems))


def from_exported_program(ep, name: Optional[str] = None, dims: Optional[Mapping] = None,
                          dim_names: Optional[Mapping] = None) -> Spec:
    """Converts a `torch.export.ExportedProgram` (e.g. from `torch.export.load("model.pt2")`).
    Dims are named after the torch.export.Dim when known (`from_torch` passes them), else
    `<input>_<axis>`; `dims` as in from_torch."""
    _check_reassignments(ep)
    ep = ep.run_decompositions(decomposition_table())
    name = name or "model"
    return _Converter(ep, name, dim_names or {}, dims or {}).run()


def from_torch(module, args: Sequence = (), kwargs: Optional[Mapping] = None, dynamic_shapes=None,
               name: Optional[str] = None, dims: Optional[Mapping[str, Union[int, Sequence[int], Dim]]] = None) -> Spec:
    """Exports `module` with `torch.export` and converts it to a DinoML Spec (see the module doc).

    args/kwargs: example inputs (their dtypes become the inputs' dtypes). dynamic_shapes: as
    torch.export takes it ({arg name: {axis: torch.export.Dim}} or a tuple per argument).
    dims: {dim name: int (fixes it) | [bucket sizes] | dml.Dim}."""
    if not isinstance(args, tuple):
        args = tuple(args) if isinstance(args, list) else (args,)
    ep = export(module, args, kwargs, dynamic_shapes)
    names = _dim_names(module, args, kwargs, dynamic_shapes)
    return from_exported_program(ep, name=name or type(module).__name__.lower(), dims=dims, dim_names=names)


def compile_torch(module, example_inputs, target: str = "cpu", out: Optional[str] = None, dynamic_shapes=None,
                  dims=None, kwargs: Optional[Mapping] = None, name: Optional[str] = None, **compile_options):
    """from_torch + dml.compile + runtime.load: returns the loaded runtime Module."""
    from ..compiler import compile as dml_compile
    spec = from_torch(module, example_inputs, kwargs=kwargs, dynamic_shapes=dynamic_shapes, name=name, dims=dims)
    return dml_compile(spec, target=target, out=out, **compile_options).load()


def supported_ops():
    """The ATen ops (or op families) with a converter."""
    return sorted(CONVERTERS)


__all__ = ["from_torch", "from_exported_program", "compile_torch", "export", "decomposition_table",
           "supported_ops", "TorchConversionError", "TorchExportError", "KEEP"]
