"""Hand-written op signatures (the generated ones take `*inputs, **attrs`). Each wrapper only
arranges arguments; semantics, defaults and errors stay in the C++ registry. So every attribute
can still be given by keyword, an attribute left out (None) is not sent (the op's default
applies, or the registry reports a missing required attribute by name), and unknown keywords
pass through for the registry to reject."""
from __future__ import annotations

from typing import Optional, Sequence

from .. import dtypes
from ..tensor import Tensor, TensorLike
from ..tracer import current_tracer
from ._core import call, first_dtype


def _axes(a):
    """An int or a sequence of ints -> list (None stays None: the op's default)."""
    if a is None:
        return None
    if isinstance(a, (list, tuple)):
        return [int(x) for x in a]
    return [int(a)]


def output(x, name: str) -> Tensor:
    """Marks `x` as graph output `name`; returns the output tensor."""
    tr = current_tracer("dml.ops.output()")
    t = tr.as_tensor(x)
    return Tensor(tr, tr.builder.output(t.name, name))


def concatenate(tensors: Sequence, axis: int = 0, **attrs) -> Tensor:
    """Joins `tensors` along `axis`."""
    if isinstance(tensors, TensorLike):
        raise TypeError("concatenate takes a list of tensors: concatenate([a, b], axis=0)")
    return call("concatenate", list(tensors), dict(attrs, axis=axis))


def split(x, sizes: Optional[Sequence[int]] = None, axis: int = 0, **attrs) -> tuple:
    """Splits `x` along `axis` into pieces of `sizes`; always returns a tuple."""
    r = call("split", [x], dict(attrs, sizes=_axes(sizes), axis=axis))
    return r if isinstance(r, tuple) else (r,)


def cast(x, dtype=None, **attrs) -> Tensor:
    """Converts `x` to `dtype` ("float16", np.float16, ...)."""
    if dtype is None:
        raise TypeError("cast() needs a dtype: cast(x, 'float16') or cast(x, dtype='float16')")
    return call("cast", [x], dict(attrs, dtype=dtype if isinstance(dtype, str) else dtypes.canonical(dtype)))


def reshape(x, shape: Optional[Sequence] = None, **attrs) -> Tensor:
    """Reshapes `x`; extents may be ints, one -1, Dims, symbolic dims (x.shape[0]) or their
    arithmetic (x.shape[1] // heads)."""
    return call("reshape", [x], dict(attrs, shape=None if shape is None else list(shape)))


def expand(x, shape: Optional[Sequence] = None, **attrs) -> Tensor:
    """Broadcast copy of `x` to `shape` (-1 keeps the extent; symbolic extents allowed)."""
    return call("expand", [x], dict(attrs, shape=None if shape is None else list(shape)))


def full(shape: Optional[Sequence] = None, value: Optional[float] = None, dtype="float32", **attrs) -> Tensor:
    """A tensor of `shape` filled with `value`."""
    return call("full", [], dict(attrs, shape=None if shape is None else list(shape), value=value,
                                 dtype=dtype if isinstance(dtype, str) else dtypes.canonical(dtype)))


def arange(start=None, end=None, step=None, dtype="int64", length=None, **attrs) -> Tensor:
    """arange(end), arange(start, end[, step]) or by keyword (start defaults to 0, step to 1);
    `length=[n]` (n may be symbolic, e.g. x.shape[0]) gives the element count instead of end."""
    if end is None and start is not None and length is None:  # arange(5): NumPy's one-argument form
        start, end = None, start
    return call("arange", [], dict(attrs, start=start, end=end, step=step, length=length,
                                   dtype=dtype if isinstance(dtype, str) else dtypes.canonical(dtype)))


def clamp(x, min: Optional[float] = None, max: Optional[float] = None, **attrs) -> Tensor:  # noqa: A002
    """Clamps `x` to [min, max]; either bound may be omitted."""
    return call("clamp", [x], dict(attrs, min=min, max=max))


def where(cond, a, b) -> Tensor:
    """cond ? a : b; a Python scalar takes the dtype of the other branch."""
    return call("where", [cond, a, b], like=first_dtype([a, b]))


def layer_norm(x, gamma=None, beta=None, eps: float = 1e-5, **attrs) -> Tensor:
    """Layer norm over the trailing dims (`normalized_ndim`, default 1 or gamma's rank)."""
    if beta is not None and gamma is None:
        raise ValueError("layer_norm: beta given without gamma (pass gamma=ones to use only a bias)")
    inputs = [x] + [t for t in (gamma, beta) if t is not None]
    return call("layer_norm", inputs, dict(attrs, eps=eps))


def rms_norm(x, weight=None, eps: float = 1e-6, **attrs) -> Tensor:
    """x / sqrt(mean(x²) + eps) · weight over the last dim."""
    return call("rms_norm", [x] + ([weight] if weight is not None else []), dict(attrs, eps=eps))


def group_norm(x, *args, num_groups: Optional[int] = None, gamma=None, beta=None, eps: float = 1e-5,
               **attrs) -> Tensor:
    """Group norm of x[N, C, ...]: group_norm(x, [gamma, [beta]], num_groups=G). As a shorthand an
    int right after x is taken as num_groups: group_norm(x, G, gamma, beta)."""
    args = list(args)
    if args and not isinstance(args[0], TensorLike) and num_groups is None:
        num_groups = args.pop(0)
    if any(t is None for t in args[:-1]) and args[-1] is not None or (beta is not None and gamma is None and not args):
        raise ValueError("group_norm: beta given without gamma")
    tensors = [t for t in args + [gamma, beta] if t is not None]
    return call("group_norm", [x] + tensors, dict(attrs, num_groups=num_groups, eps=eps))


def softmax(x, axis: int = -1, dim: Optional[int] = None, **attrs) -> Tensor:
    """Softmax along `axis` (`dim` is accepted as PyTorch's name for it)."""
    return call("softmax", [x], dict(attrs, axis=dim if dim is not None else axis))


def log_softmax(x, axis: int = -1, dim: Optional[int] = None, **attrs) -> Tensor:
    return call("log_softmax", [x], dict(attrs, axis=dim if dim is not None else axis))


def permute(x, dims: Optional[Sequence[int]] = None, **attrs) -> Tensor:
    return call("permute", [x], dict(attrs, dims=_axes(dims)))


def transpose(x, dim0: Optional[int] = None, dim1: Optional[int] = None, **attrs) -> Tensor:
    return call("transpose", [x], dict(attrs, dim0=dim0, dim1=dim1))


def squeeze(x, axes=None, **attrs) -> Tensor:
    """Removes the given size-1 axes (default: every static size-1 axis)."""
    return call("squeeze", [x], dict(attrs, axes=_axes(axes)))


def unsqueeze(x, axes=None, **attrs) -> Tensor:
    """Inserts size-1 axes at `axes` (positions in the output)."""
    return call("unsqueeze", [x], dict(attrs, axes=_axes(axes)))


def flatten(x, start_dim: int = 0, end_dim: int = -1, **attrs) -> Tensor:
    return call("flatten", [x], dict(attrs, start_dim=start_dim, end_dim=end_dim))


def _reduce(op):
    def fn(x, axes=None, keepdim: bool = False, **attrs) -> Tensor:
        if "axis" in attrs:  # NumPy's spelling
            axes = attrs.pop("axis")
        if "dim" in attrs:  # PyTorch's spelling
            axes = attrs.pop("dim")
        return call(op, [x], dict(attrs, axes=_axes(axes), keepdim=keepdim))

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"{op} over `axes` (an int or a list; default: all axes)."
    return fn


reduce_sum = _reduce("reduce_sum")
reduce_mean = _reduce("reduce_mean")
reduce_max = _reduce("reduce_max")
reduce_min = _reduce("reduce_min")


def argmax(x, axis: Optional[int] = None, keepdim: bool = False, **attrs) -> Tensor:
    return call("argmax", [x], dict(attrs, axis=axis, keepdim=keepdim))


def _bounds(a):
    """Slice bounds: ints, or symbolic extents (x.shape[1], a Dim, their arithmetic)."""
    if a is None:
        return None
    return [x if not isinstance(x, int) else int(x) for x in (a if isinstance(a, (list, tuple)) else [a])]


def slice(x, starts=None, ends=None, axes=None, steps=None, **attrs) -> Tensor:  # noqa: A001
    """NumPy-style slicing with clamping; an end >= 2**31 means "to the end". Bounds may be
    symbolic (`ops.slice(pos, [0], [x.shape[1]], [1])`) when they provably stay within the extent."""
    return call("slice", [x], dict(attrs, starts=_bounds(starts), ends=_bounds(ends), axes=_axes(axes),
                                   steps=_axes(steps)))


def pad(x, pads=None, mode: Optional[str] = None, value: Optional[float] = None, **attrs) -> Tensor:
    """Pads `x`; `pads` in ONNX order (all begins, then all ends); mode "constant" (default),
    "reflect" or "edge"; value 0.0 by default."""
    return call("pad", [x], dict(attrs, pads=_axes(pads), mode=mode, value=value))


def embedding(indices, weight, **attrs) -> Tensor:
    """Rows of weight[V, D] selected by integer `indices` -> [..., D]."""
    return call("embedding", [indices, weight], attrs)


def gather(x, indices, axis: int = 0, **attrs) -> Tensor:
    return call("gather", [x, indices], dict(attrs, axis=axis))


def state_assign(state, value) -> None:
    """After the run, `state` holds `value` (same dtype and shape)."""
    call("state_assign", [state, value])


__all__ = ["output", "concatenate", "split", "cast", "reshape", "expand", "full", "arange", "clamp", "where",
           "layer_norm", "rms_norm", "group_norm", "softmax", "log_softmax", "permute", "transpose", "squeeze",
           "unsqueeze", "flatten", "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "argmax", "slice",
           "pad", "embedding", "gather", "state_assign"]
