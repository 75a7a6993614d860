"""Python syntax mapped onto registered ops: `a @ b` (gemm_rrr / bmm_rrr) and `x[...]`
(slice + squeeze + unsqueeze). These compose ops; they are not ops of their own."""
from __future__ import annotations

import builtins

from ..tensor import TensorLike
from ._core import call

_TO_END = 2**62  # slice's "to the end" (docs/ops.md: any end >= 2^31)


def matmul(a, b):
    """a @ b with NumPy rank rules: rhs 2-D -> gemm_rrr (lhs leading dims folded into M); both
    rank >= 3 -> bmm_rrr (batch dims broadcast); rank-1 operands are unsqueezed then squeezed."""
    ra, rb = a.ndim, b.ndim
    if ra == 0 or rb == 0:
        raise ValueError("matmul: operands must have rank >= 1 (use * for scalars)")
    if rb == 1:
        return call("squeeze", [matmul(a, call("unsqueeze", [b], {"axes": [1]}))], {"axes": [-1]})
    if ra == 1:
        return call("squeeze", [matmul(call("unsqueeze", [a], {"axes": [0]}), b)], {"axes": [-2]})
    if rb == 2:
        return call("gemm_rrr", [a, b])
    if ra == 2:
        a = call("unsqueeze", [a], {"axes": [0]})
    return call("bmm_rrr", [a, b])


def _static_index(i: int, extent, axis: int) -> None:
    if isinstance(extent, int) and not (-extent <= i < extent):
        raise IndexError(f"index {i} is out of range for axis {axis} of size {extent}")


def getitem(x, index):
    """Basic indexing: ints, slices with positive steps, Ellipsis and None."""
    if not isinstance(index, tuple):
        index = (index,)
    shape = x.shape
    n_real = sum(1 for i in index if i is not None and i is not Ellipsis)
    if sum(1 for i in index if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if n_real > len(shape):
        raise IndexError(f"too many indices for a tensor of rank {len(shape)}: {n_real}")
    expanded = []
    for i in index:
        if i is Ellipsis:
            expanded.extend([builtins.slice(None)] * (len(shape) - n_real))
        else:
            expanded.append(i)
    starts, ends, axes, steps, drop, new_axes = [], [], [], [], [], []
    axis = 0  # axis of x
    out_pos = 0  # position in the result (after dropping indexed axes)
    for i in expanded:
        if i is None:
            new_axes.append(out_pos)
            out_pos += 1
            continue
        if isinstance(i, builtins.slice):
            if i != builtins.slice(None):
                step = 1 if i.step is None else int(i.step)
                if step <= 0:
                    raise IndexError("slice steps must be positive")
                starts.append(0 if i.start is None else int(i.start))
                ends.append(_TO_END if i.stop is None else int(i.stop))
                axes.append(axis)
                steps.append(step)
            axis += 1
            out_pos += 1
        elif isinstance(i, TensorLike):
            raise IndexError("indexing with a tensor is not basic indexing: use dml.ops.gather(x, idx, axis=...)")
        elif hasattr(i, "__index__") and not isinstance(i, bool):
            k = int(i)
            _static_index(k, shape[axis], axis)
            starts.append(k)
            ends.append(_TO_END if k == -1 else k + 1)
            axes.append(axis)
            steps.append(1)
            drop.append(axis)
            axis += 1
        else:
            raise IndexError(f"unsupported index {i!r}: use ints, slices, ..., None")
    y = x
    if starts:
        y = call("slice", [y], {"starts": starts, "ends": ends, "axes": axes, "steps": steps})
    if drop:
        y = call("squeeze", [y], {"axes": drop})
    if new_axes:
        y = call("unsqueeze", [y], {"axes": new_axes})
    if y is x:
        # x[:] / x[...]: still a Tensor, not a Parameter (so it can be used like any result)
        y = x._t()
    return y
