"""Symbolic dimensions: `Dim` (a named run-time size with bounds and shape buckets),
`TensorSpec` (an input's shape and dtype) and `SymDim` (a symbolic extent seen while tracing).

All rules live in C++ (`ir::Dim::normalize_and_validate`, `ir::IntExpr`): Python only wraps them,
so a Dim rejected here is rejected with the same message by the compiler and the runtime.
"""
from __future__ import annotations

from typing import Iterable, Optional, Sequence, Union

from . import dtypes
from ._ext import ext


class Dim:
    """A named dynamic dimension: `Dim("batch", min=1, max=8, typical=4, buckets=(1, 4, 8))`.

    Buckets are upper bounds (ascending, the last equals max and is added when missing); memory
    is planned and kernels are picked per bucket. Invalid bounds raise ValueError with the C++
    validator's message.
    """

    __slots__ = ("_dim",)

    def __init__(self, name: str, min: int, max: int, typical: Optional[int] = None,  # noqa: A002
                 buckets: Optional[Iterable[int]] = None, divisible_by: int = 1):
        self._dim = ext.Dim(name, int(min), int(max), int(typical or 0),
                            [int(b) for b in (buckets or ())], int(divisible_by))

    @classmethod
    def _wrap(cls, d) -> "Dim":
        obj = cls.__new__(cls)
        obj._dim = d
        return obj

    name = property(lambda self: self._dim.name)
    min = property(lambda self: self._dim.min)
    max = property(lambda self: self._dim.max)
    typical = property(lambda self: self._dim.typical)
    buckets = property(lambda self: tuple(self._dim.buckets))
    divisible_by = property(lambda self: self._dim.divisible_by)

    def bucket_bounds(self):
        """[(lo, hi)] of every bucket, inclusive."""
        return [(self._dim.bucket_lo(k), b) for k, b in enumerate(self._dim.buckets)]

    def expr(self):
        return ext.IntExpr.dim(self.name)

    # A Dim can be used in shape arithmetic directly (e.g. reshape([batch * 2, -1])).
    def _sym(self) -> "SymDim":
        return SymDim(self.expr())

    def __add__(self, o): return self._sym() + o
    def __radd__(self, o): return o + self._sym()
    def __sub__(self, o): return self._sym() - o
    def __rsub__(self, o): return o - self._sym()
    def __mul__(self, o): return self._sym() * o
    def __rmul__(self, o): return o * self._sym()
    def __floordiv__(self, o): return self._sym() // o

    def __eq__(self, other):
        return isinstance(other, Dim) and self._dim == other._dim

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        extra = f", divisible_by={self.divisible_by}" if self.divisible_by != 1 else ""
        return (f"Dim({self.name!r}, min={self.min}, max={self.max}, typical={self.typical}, "
                f"buckets={self.buckets}{extra})")


def _to_expr(v):
    """int / SymDim / Dim / IntExpr -> ext.IntExpr (TypeError otherwise)."""
    if isinstance(v, SymDim):
        return v.expr
    if isinstance(v, Dim):
        return v.expr()
    if isinstance(v, ext.IntExpr):
        return v
    if isinstance(v, bool):
        raise TypeError("a shape extent must be an int, Dim or symbolic dim, not bool")
    if hasattr(v, "__index__"):
        return ext.IntExpr(int(v.__index__()))
    raise TypeError(f"a shape extent must be an int, Dim or symbolic dim, not {type(v).__name__}")


def extent(e):
    """ext.IntExpr -> int when constant, SymDim otherwise (what Tensor.shape holds)."""
    return e.value if e.is_const else SymDim(e)


class SymDim:
    """A symbolic extent while tracing (`x.shape[0]` when axis 0 is a Dim or an expression).

    Supports + - * // (and / as exact division, mapped to floor division) with ints and other
    SymDims; the result is an int again when it simplifies to a constant. Use it in reshape,
    expand or full shapes. It has no integer value at trace time.
    """

    __slots__ = ("expr",)

    def __init__(self, expr):
        self.expr = expr

    def _bin(self, other, fn, reverse=False):
        try:
            o = _to_expr(other)
        except TypeError:
            return NotImplemented
        r = fn(o, self.expr) if reverse else fn(self.expr, o)
        return extent(r)

    def __add__(self, o): return self._bin(o, lambda a, b: a + b)
    def __radd__(self, o): return self._bin(o, lambda a, b: a + b, True)
    def __sub__(self, o): return self._bin(o, lambda a, b: a - b)
    def __rsub__(self, o): return self._bin(o, lambda a, b: a - b, True)
    def __mul__(self, o): return self._bin(o, lambda a, b: a * b)
    def __rmul__(self, o): return self._bin(o, lambda a, b: a * b, True)
    def __floordiv__(self, o): return self._bin(o, lambda a, b: a // b)
    def __rfloordiv__(self, o): return self._bin(o, lambda a, b: a // b, True)
    # Shapes are integers: `/` on a symbolic extent means the (floor) division of sizes.
    __truediv__ = __floordiv__
    __rtruediv__ = __rfloordiv__

    def __eq__(self, other):
        try:
            return self.expr == _to_expr(other)
        except TypeError:
            return NotImplemented

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    def __hash__(self):
        return hash(str(self.expr))

    @property
    def dims(self):
        """Names of the Dims this extent depends on."""
        return self.expr.dims()

    def __index__(self):
        raise TypeError(f"symbolic dim '{self.expr}' has no value at trace time; "
                        "use it in reshape/expand shapes or arithmetic instead of int()")

    __int__ = __index__

    def __str__(self):
        return str(self.expr)

    def __repr__(self):
        return f"SymDim({self.expr})"


Extent = Union[int, Dim, SymDim]


class TensorSpec:
    """Shape (ints and Dims) and dtype of a model input."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: Sequence[Extent], dtype="float32"):
        shp = []
        for s in shape:
            if isinstance(s, (Dim, int)) and not isinstance(s, bool):
                shp.append(s)
            elif hasattr(s, "__index__") and not isinstance(s, bool):
                shp.append(int(s))
            else:
                raise TypeError(f"TensorSpec extents must be ints or dml.Dim, got {s!r}")
        self.shape = tuple(shp)
        self.dtype = dtypes.canonical(dtype)

    @property
    def dims(self):
        return [s for s in self.shape if isinstance(s, Dim)]

    def __repr__(self):
        return f"TensorSpec([{', '.join(s.name if isinstance(s, Dim) else str(s) for s in self.shape)}], {self.dtype!r})"
