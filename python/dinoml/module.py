"""`Module` and `Parameter`: the PyTorch-like model-building surface.

A Module needs no `super().__init__()` call: parameters and sub-modules are discovered at trace
time by walking the instance's `__dict__` (lists, tuples and dicts included), and get PyTorch's
dotted names ("layers.0.weight"), so a PyTorch state_dict can be passed as `constants`.
"""
from __future__ import annotations

from typing import Iterator, Sequence, Tuple

import numpy as np

from . import dtypes
from .errors import TraceError
from .tensor import TensorLike


class Parameter(TensorLike):
    """A constant weight of static shape; its value comes from `trace(constants=...)` (by dotted
    name) or from `data` given here. Inside forward it behaves like a Tensor."""

    __slots__ = ("_shape", "_dtype", "data")

    def __init__(self, shape: Sequence[int], dtype="float32", data=None):
        shp = []
        for s in shape:
            if isinstance(s, bool) or not hasattr(s, "__index__"):
                raise TypeError(f"Parameter shapes are static: extents must be ints, got {s!r}")
            if int(s) < 0:
                raise ValueError(f"Parameter extent must be >= 0, got {s}")
            shp.append(int(s))
        self._shape = tuple(shp)
        self._dtype = dtypes.canonical(dtype)
        self.data = data

    @property
    def shape(self) -> Tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> str:
        return self._dtype

    def numel(self) -> int:
        return int(np.prod(self._shape, dtype=np.int64))

    def _t(self):
        from .tracer import current_tracer  # late: tracer imports this module
        tr = current_tracer(None)
        if tr is None:
            raise TraceError("a dml.Parameter was used outside of dml.trace(); parameters become graph "
                             "constants only while a model is traced")
        return tr.parameter_tensor(self)

    def __repr__(self):
        return f"Parameter({list(self._shape)}, {self._dtype!r})"


class Module:
    """Base class of models. Subclasses define `forward`; calling the module calls forward."""

    def forward(self, *args, **kwargs):  # pragma: no cover - abstract
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # ---- discovery ---------------------------------------------------------------------------
    def _children_items(self) -> Iterator[Tuple[str, object]]:
        """(name, value) pairs to walk for parameters/sub-modules; containers override this."""
        return iter(vars(self).items())

    def named_parameters(self, prefix: str = "") -> Iterator[Tuple[str, Parameter]]:
        """Every Parameter reachable from this module, once each, with its dotted name."""
        seen = set()
        for name, p in _walk(self, prefix, set()):
            if id(p) not in seen:
                seen.add(id(p))
                yield name, p

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    def named_modules(self, prefix: str = "") -> Iterator[Tuple[str, "Module"]]:
        yield prefix, self
        for name, value in self._children_items():
            yield from _named_modules(value, _join(prefix, name))

    def state_dict_shapes(self):
        """{dotted name: (shape, dtype)}: what `trace(constants=...)` expects."""
        return {n: (p.shape, p.dtype) for n, p in self.named_parameters()}

    def __repr__(self):
        return f"{type(self).__name__}()"


def _join(prefix: str, name) -> str:
    return f"{prefix}.{name}" if prefix else str(name)


def _walk(value, prefix: str, visiting: set) -> Iterator[Tuple[str, Parameter]]:
    if isinstance(value, Parameter):
        yield prefix, value
        return
    if isinstance(value, Module):
        if id(value) in visiting:  # a module referencing an ancestor: don't loop
            return
        visiting.add(id(value))
        for name, v in value._children_items():
            yield from _walk(v, _join(prefix, name), visiting)
        visiting.discard(id(value))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _walk(v, _join(prefix, i), visiting)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, _join(prefix, k), visiting)


def _named_modules(value, prefix: str):
    if isinstance(value, Module):
        yield from value.named_modules(prefix)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _named_modules(v, _join(prefix, i))
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _named_modules(v, _join(prefix, k))


__all__ = ["Module", "Parameter"]
