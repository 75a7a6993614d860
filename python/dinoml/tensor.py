"""`Tensor`: the proxy a model's forward sees while tracing. It names a tensor of the graph being
built; its shape and dtype come from C++ shape inference (never recomputed here), and its
operators add nodes through `dinoml.ops`.
"""
from __future__ import annotations

from typing import Tuple

from . import dims as _dims


class TensorLike:
    """Operators and shape helpers shared by `Tensor` and `Parameter` (resolved via `_t()`)."""

    __slots__ = ()

    def _t(self) -> "Tensor":  # pragma: no cover - overridden
        raise NotImplementedError

    # ---- type -----------------------------------------------------------------------------
    @property
    def shape(self) -> Tuple:
        return self._t().shape

    @property
    def dtype(self) -> str:
        return self._t().dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def size(self, axis=None):
        return self.shape if axis is None else self.shape[axis]

    # ---- arithmetic -------------------------------------------------------------------------
    def __add__(self, o): return _ops().add(self, o)
    def __radd__(self, o): return _ops().add(o, self)
    def __sub__(self, o): return _ops().sub(self, o)
    def __rsub__(self, o): return _ops().sub(o, self)
    def __mul__(self, o): return _ops().mul(self, o)
    def __rmul__(self, o): return _ops().mul(o, self)
    # `div` is true division for floats and floor division for ints (docs/ops.md).
    def __truediv__(self, o): return _ops().div(self, o)
    def __rtruediv__(self, o): return _ops().div(o, self)
    def __floordiv__(self, o): return _ops().div(self, o)
    def __rfloordiv__(self, o): return _ops().div(o, self)
    def __pow__(self, o): return _ops().pow(self, o)
    def __rpow__(self, o): return _ops().pow(o, self)
    def __neg__(self): return _ops().neg(self)
    def __pos__(self): return self
    def __abs__(self): return _ops().abs(self)
    def __lt__(self, o): return _ops().lt(self, o)
    def __le__(self, o): return _ops().le(self, o)
    def __gt__(self, o): return _ops().gt(self, o)
    def __ge__(self, o): return _ops().ge(self, o)
    # == and != keep Python identity semantics (tensors are used as dict keys); use .eq()/.ne().
    def eq(self, o): return _ops().eq(self, o)
    def ne(self, o): return _ops().ne(self, o)

    def __matmul__(self, o): return _ops().matmul(self, o)
    def __rmatmul__(self, o): return _ops().matmul(o, self)

    def __bool__(self):
        raise TypeError("a traced tensor has no truth value at trace time (data-dependent control "
                        "flow cannot be traced); use dml.ops.where")

    # ---- shape / data movement -----------------------------------------------------------------
    def reshape(self, *shape): return _ops().reshape(self, _varargs(shape))
    view = reshape
    def permute(self, *dims): return _ops().permute(self, _varargs(dims))
    def transpose(self, dim0, dim1): return _ops().transpose(self, dim0, dim1)
    def flatten(self, start_dim=0, end_dim=-1): return _ops().flatten(self, start_dim=start_dim, end_dim=end_dim)
    def squeeze(self, *axes): return _ops().squeeze(self, _varargs(axes) or None)
    def unsqueeze(self, axis): return _ops().unsqueeze(self, axis)
    def expand(self, *shape): return _ops().expand(self, _varargs(shape))
    def cast(self, dtype): return _ops().cast(self, dtype)
    astype = cast
    to = cast

    def __getitem__(self, index): return _ops().getitem(self, index)

    # ---- reductions and common functions --------------------------------------------------------
    def sum(self, axis=None, keepdim=False): return _ops().reduce_sum(self, axis, keepdim=keepdim)
    def mean(self, axis=None, keepdim=False): return _ops().reduce_mean(self, axis, keepdim=keepdim)
    def max(self, axis=None, keepdim=False): return _ops().reduce_max(self, axis, keepdim=keepdim)
    def min(self, axis=None, keepdim=False): return _ops().reduce_min(self, axis, keepdim=keepdim)
    def argmax(self, axis, keepdim=False): return _ops().argmax(self, axis, keepdim=keepdim)
    def softmax(self, axis=-1): return _ops().softmax(self, axis)
    def relu(self): return _ops().relu(self)
    def sigmoid(self): return _ops().sigmoid(self)
    def tanh(self): return _ops().tanh(self)
    def exp(self): return _ops().exp(self)
    def log(self): return _ops().log(self)
    def sqrt(self): return _ops().sqrt(self)
    def rsqrt(self): return _ops().rsqrt(self)
    def clamp(self, min=None, max=None): return _ops().clamp(self, min=min, max=max)  # noqa: A002


def _varargs(args):
    """reshape(2, 3) and reshape((2, 3)) / reshape([2, 3]) both work."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        return list(args[0])
    return list(args)


def _ops():
    from . import ops  # late: ops imports this module
    return ops


class Tensor(TensorLike):
    """A tensor of the graph being traced (input, constant, state, intermediate or output)."""

    __slots__ = ("_tracer", "name", "_type")

    def __init__(self, tracer, name: str):
        self._tracer = tracer
        self.name = name
        self._type = None

    def _t(self) -> "Tensor":
        return self

    def _info(self):
        if self._type is None:
            # (dtype, [IntExpr], kind) straight from the builder: shapes are C++'s inference.
            self._type = self._tracer.builder.tensor(self.name)
        return self._type

    @property
    def shape(self) -> Tuple:
        return tuple(_dims.extent(e) for e in self._info()[1])

    @property
    def dtype(self) -> str:
        return self._info()[0]

    @property
    def kind(self) -> str:
        # Not cached: the builder turns a tensor into an output when ops.output names it.
        return self._tracer.builder.tensor(self.name)[2]

    def __repr__(self):
        shp = ", ".join(str(s) for s in self.shape)
        return f"Tensor({self.name!r}, [{shp}], {self.dtype})"
