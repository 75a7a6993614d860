"""The conversion table, continued: views, data movement, indexing and tensor factories (the same
`CONVERTERS` dict as `_torch_ops`; the contract is described there).

Symbolic sizes (`SymDim`) flow into reshape/expand/full and slice bounds unchanged
(`position_ids[:, :seq]` is one slice whose end is the dim).
"""
from __future__ import annotations

from .. import ops
from ..dims import SymDim
from ..ops import call
from ._torch_ops import _TO_END, CONVERTERS, Unsupported, _axis, _is_t, _static, converter


@converter("aten.view", "aten._unsafe_view", "aten.reshape", "aten.view_copy")
def _reshape(cx, node, x, shape):
    # The output shape torch inferred (its sympy-simplified sizes), not the argument's -1 / exprs.
    return ops.reshape(x, cx.out_shape(node))


@converter("aten.flatten.using_ints")
def _flatten(cx, node, x, start=0, end=-1):
    if x.ndim == 0:
        return ops.reshape(x, [1])
    return ops.flatten(x, start_dim=start, end_dim=end)


@converter("aten.permute", "aten.permute_copy")
def _permute(cx, node, x, dims):
    return ops.permute(x, [_axis(d, x.ndim) for d in dims])


@converter("aten.transpose.int")
def _transpose(cx, node, x, d0, d1):
    d0, d1 = _axis(d0, x.ndim), _axis(d1, x.ndim)
    if d0 == d1:
        return x
    perm = list(range(x.ndim))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return ops.permute(x, perm)


@converter("aten.t.default")
def _t(cx, node, x):
    return x if x.ndim < 2 else ops.permute(x, [1, 0])


@converter("aten.unsqueeze", "aten.unsqueeze_copy")
def _unsqueeze(cx, node, x, dim):
    return ops.unsqueeze(x, [_axis(dim, x.ndim + 1)])


@converter("aten.squeeze", "aten.squeeze_copy")
def _squeeze(cx, node, x, dims=None):
    if dims is None:
        dims = [i for i, s in enumerate(x.shape) if s == 1]
    elif isinstance(dims, int):
        dims = [dims]
    dims = [_axis(d, x.ndim) for d in dims if x.shape[_axis(d, x.ndim)] == 1]  # torch ignores non-1 axes
    return ops.squeeze(x, dims) if dims else x


@converter("aten.expand", "aten.expand_copy")
def _expand(cx, node, x, size, *, implicit=False):
    lead = len(size) - x.ndim
    out = cx.out_shape(node)
    if lead == 0 and all(_same(a, b) for a, b in zip(out, x.shape)):
        return x
    return ops.expand(x, out)


def _same(a, b) -> bool:
    if isinstance(a, SymDim) or isinstance(b, SymDim):
        return isinstance(a, SymDim) and isinstance(b, SymDim) and a == b
    return int(a) == int(b)


@converter("aten.repeat.default")
def _repeat(cx, node, x, reps):
    reps = [_static(r, "repeat count") for r in reps]
    lead = len(reps) - x.ndim
    if lead:
        x = ops.reshape(x, [1] * lead + list(x.shape))
    shape = list(x.shape)
    # repeat = tile: interleave a new axis of size r before each axis, expand it, merge.
    inter, exp = [], []
    for r, s in zip(reps, shape):
        inter += [1, s]
        exp += [r, s]
    y = ops.expand(ops.reshape(x, inter), exp)
    return ops.reshape(y, [r * s for r, s in zip(reps, shape)])


def _arange_sym(cx, start, length, step=1, dtype="int64"):
    return call("arange", [], {"start": float(start), "step": float(step), "length": [length], "dtype": dtype})


@converter("aten.slice.Tensor", "aten.slice_copy.Tensor")
def _slice(cx, node, x, dim=0, start=None, end=None, step=1):
    dim = _axis(dim, x.ndim)
    ext = x.shape[dim]
    start = 0 if start is None else start
    end = _TO_END if end is None else end
    if isinstance(end, int) and end >= 2**31:
        end = _TO_END
    if isinstance(start, int) and isinstance(end, int):
        if start == 0 and end == _TO_END and step == 1:
            return x
        return ops.slice(x, [start], [end], [dim], [step])
    # Symbolic bounds go to the slice op as they are: it proves them within the extent (export has
    # proven or guarded the same) and the kernel applies them at run time. The result is viewed with
    # the extents torch inferred, so equal sizes stay the same expressions downstream.
    if isinstance(start, int) and start == 0 and isinstance(end, SymDim) and isinstance(ext, SymDim) \
            and end == ext and step == 1:
        return x
    return ops.reshape(ops.slice(x, [start], [end], [dim], [step]), cx.out_shape(node))


@converter("aten.select.int", "aten.select_copy.int")
def _select(cx, node, x, dim, index):
    dim = _axis(dim, x.ndim)
    if isinstance(index, SymDim):
        raise Unsupported("select with a symbolic index")
    end = _TO_END if index == -1 else index + 1
    return ops.squeeze(ops.slice(x, [index], [end], [dim], [1]), [dim])


@converter("aten.cat.default", "aten.concat.default")
def _cat(cx, node, tensors, dim=0):
    dt = cx.dtype(node)
    ts = [cx.operand(t, dt) for t in tensors if not (_is_t(t) and t.ndim == 1 and t.shape[0] == 0)]
    if len(ts) == 1:
        return ts[0]
    return ops.concatenate(ts, axis=_axis(dim, ts[0].ndim))


@converter("aten.stack.default")
def _stack(cx, node, tensors, dim=0):
    dim = _axis(dim, tensors[0].ndim + 1)
    return ops.concatenate([ops.unsqueeze(cx.operand(t, cx.dtype(node)), [dim]) for t in tensors], axis=dim)


@converter("aten.split.Tensor", "aten.split_with_sizes.default", "aten.split_with_sizes_copy.default",
           "aten.split_copy.Tensor")
def _split(cx, node, x, size, dim=0):
    dim = _axis(dim, x.ndim)
    ext = _static(x.shape[dim], "split's extent")
    if isinstance(size, int):
        sizes = [size] * (ext // size) + ([ext % size] if ext % size else [])
    else:
        sizes = [_static(s, "split size") for s in size]
    if len(sizes) == 1:
        return [x]
    return list(ops.split(x, sizes, axis=dim))


@converter("aten.chunk.default")
def _chunk(cx, node, x, chunks, dim=0):
    ext = _static(x.shape[_axis(dim, x.ndim)], "chunk's extent")
    return _split(cx, node, x, -(-ext // chunks), dim)


@converter("aten.unbind.int", "aten.unbind_copy.int")
def _unbind(cx, node, x, dim=0):
    dim = _axis(dim, x.ndim)
    n = _static(x.shape[dim], "unbind's extent")
    parts = ops.split(x, [1] * n, axis=dim) if n > 1 else (x,)
    return [ops.squeeze(p, [dim]) for p in parts]


@converter("aten.embedding.default")
def _embedding(cx, node, weight, indices, padding_idx=-1, *args):
    return ops.embedding(indices, weight)


@converter("aten.index_select.default")
def _index_select(cx, node, x, dim, index):
    return ops.gather(x, index, axis=_axis(dim, x.ndim))


@converter("aten.index.Tensor")
def _index(cx, node, x, indices):
    real = [(i, t) for i, t in enumerate(indices) if t is not None]
    if len(real) == 1:
        axis, idx = real[0]
        if idx.dtype == "bool":
            raise Unsupported("indexing with a boolean mask (a data-dependent size)")
        return ops.gather(x, idx, axis=axis)
    # x[i0, i1, ..., ik-1] on the leading axes: one take on the flattened leading axes with the
    # row-major linear index sum(i_a * stride_a) (indices broadcast together, negatives wrapped).
    k = len(real)
    if [a for a, _ in real] != list(range(k)) or any(t.dtype == "bool" for _, t in real):
        raise Unsupported("advanced indexing with several index tensors that are not the leading axes")
    lin = None
    for a, idx in real:
        ext = x.shape[a]
        idx = cx.operand(idx, "int64")
        zero, size = cx.operand(0, "int64"), cx.operand(ext, "int64")
        idx = call("where", [call("lt", [idx, zero]), call("add", [idx, size]), idx])
        lin = idx if lin is None else call("add", [call("mul", [lin, size]), idx])
    rest = list(x.shape[k:])
    flat = ops.reshape(x, [-1] + rest) if k > 1 else x
    return ops.gather(flat, lin, axis=0)


@converter("aten.cumsum.default")
def _cumsum(cx, node, x, dim, *, dtype=None):
    # cumsum(x)[..., i] = sum_j x[..., j] * (j <= i): a broadcast multiply with a triangular mask
    # and a sum, O(n^2) along `dim` - exact for integers, meant for the short index/mask
    # computations of attention masks (transformers' packed-sequence check), not long float scans.
    dt = cx.dtype(node)
    x = cx.operand(x, dt)
    dim = _axis(dim, x.ndim)
    if dim != x.ndim - 1:
        perm = list(range(x.ndim))
        perm[dim], perm[-1] = perm[-1], perm[dim]
        return ops.permute(_cumsum(cx, node, ops.permute(x, perm), -1), perm)
    n = x.shape[-1]
    i = _arange_sym(cx, 0, n) if isinstance(n, SymDim) else ops.arange(0, n, 1)
    tri = call("le", [ops.unsqueeze(i, [0]), ops.unsqueeze(i, [1])])  # [i, j]: j <= i
    masked = call("where", [tri, ops.unsqueeze(x, [x.ndim - 1]), cx.operand(0, dt)])  # [..., i, j]
    return ops.reduce_sum(masked, [-1])


@converter("aten.gather.default")
def _torch_gather(cx, node, x, dim, index, sparse_grad=False):
    # torch.gather picks x[..., index[i], ...] per position; DinoML's gather is NumPy's take.
    # They agree when every other axis of x and index has extent 1 (e.g. BERT's token-type
    # buffer): squeeze those axes, take along `dim`, restore index's shape.
    dim = _axis(dim, x.ndim)
    others = [a for a in range(x.ndim) if a != dim]
    if any(x.shape[a] != 1 or index.shape[a] != 1 for a in others):
        raise Unsupported("torch.gather where the non-gathered axes are not all of extent 1")
    row = ops.reshape(x, [-1])
    flat = ops.reshape(index, [-1])
    return ops.reshape(ops.gather(row, flat, axis=0), list(index.shape))


# ---- factories --------------------------------------------------------------------------------------
def _full(cx, node, shape, value):
    dt = cx.dtype(node)
    if _is_t(value):
        return ops.expand(value if value.dtype == dt else ops.cast(value, dt), cx.out_shape(node))
    if isinstance(value, SymDim):
        raise Unsupported("a tensor filled with a symbolic size")
    return ops.full(cx.out_shape(node), float(value), dtype=dt)


@converter("aten.full.default")
def _full_default(cx, node, size, value, **kwargs):
    return _full(cx, node, size, value)


@converter("aten.zeros.default", "aten.ones.default")
def _zeros(cx, node, size, **kwargs):
    return _full(cx, node, size, 1 if "ones" in str(node.target) else 0)


@converter("aten.full_like.default", "aten.zeros_like.default", "aten.ones_like.default")
def _full_like(cx, node, x, *args, **kwargs):
    name = node.target._overloadpacket.__name__
    value = args[0] if name == "full_like" else (1 if name == "ones_like" else 0)
    return _full(cx, node, x.shape, value)


@converter("aten.new_zeros.default", "aten.new_ones.default", "aten.new_full.default")
def _new_full(cx, node, x, size, *args, **kwargs):
    name = node.target._overloadpacket.__name__
    value = args[0] if name == "new_full" else (1 if name == "new_ones" else 0)
    return _full(cx, node, size, value)


@converter("aten.scalar_tensor.default")
def _scalar_tensor(cx, node, value, **kwargs):
    return _full(cx, node, [], value)


@converter("aten.arange.default", "aten.arange.start", "aten.arange.start_step")
def _arange(cx, node, *args, **kwargs):
    dt = cx.dtype(node)
    args = list(args)
    if str(node.target) == "aten.arange.default":
        args = [0] + args
    start, end = args[0], args[1]
    step = args[2] if len(args) > 2 else 1
    if isinstance(start, SymDim) or isinstance(step, SymDim):
        raise Unsupported("arange with a symbolic start or step")
    if isinstance(end, SymDim):
        if step != 1:
            raise Unsupported("arange with a symbolic end and a step other than 1")
        return _arange_sym(cx, start, end - start, 1, dt)
    return ops.arange(start, end, step, dtype=dt)


# ---- writes (in-place ops as export functionalizes them: buffer updates, KV caches) ----------------
@converter("aten.copy.default")
def _copy(cx, node, dst, src, non_blocking=False):
    # copy(dst, src): src cast to dst's dtype and broadcast to dst's shape.
    y = cx.operand(src, cx.dtype(node))
    if list(y.shape) != list(dst.shape):
        y = ops.expand(y, cx.out_shape(node))
    return y


def _write_rows(cx, node, x, axis, idx, values):
    """x with x[:, ..., idx, ...] (idx on `axis`, any rank) replaced by `values` (broadcast to
    x.shape[:axis] + idx.shape + x.shape[axis+1:]), negative indices wrapped: one kv_cache_write
    on x viewed as [*x.shape[:axis], S, prod(x.shape[axis+1:])]. When `axis` is the second-to-last
    axis no view is needed, so a session state written back by state_assign is updated in place."""
    dt = x.dtype
    pre, n_rows, post = list(x.shape[:axis]), x.shape[axis], list(x.shape[axis + 1:])
    idx = cx.operand(idx, "int64")
    t_shape = list(idx.shape)
    zero, size = cx.operand(0, "int64"), cx.operand(n_rows, "int64")
    idx = call("where", [call("lt", [idx, zero]), call("add", [idx, size]), idx])
    if len(t_shape) != 1:
        idx = ops.reshape(idx, [_prod(t_shape)])
    values = cx.operand(values, dt)
    full = pre + t_shape + post
    if list(values.shape) != full:
        values = ops.expand(values, full)
    width = _prod(post)
    if len(post) == 1 and len(t_shape) == 1:
        return call("kv_cache_write", [x, values, idx])
    cache = ops.reshape(x, pre + [n_rows, width])
    rows = ops.reshape(values, pre + [_prod(t_shape), width])
    return ops.reshape(call("kv_cache_write", [cache, rows, idx]), list(x.shape))


def _prod(extents):
    p = 1
    for e in extents:
        p = p * e
    return p


@converter("aten.index_put")
def _index_put(cx, node, x, indices, values, accumulate=False):
    # x[..., idx, ...] = values (index_copy_, index_put_, `buf[:, pos] = v` with a tensor pos):
    # one index tensor on one axis -> a row write; a boolean mask -> where(mask, values, x).
    if accumulate:
        raise Unsupported("index_put with accumulate=True (index_add_ / x[idx] += v with repeated indices)")
    real = [(i, t) for i, t in enumerate(indices) if t is not None]
    if len(real) != 1:
        raise Unsupported("index_put with several index tensors (write through one index tensor on one axis)")
    axis, idx = real[0]
    if not _is_t(idx):
        raise Unsupported(f"index_put with an index of type {type(idx).__name__}")
    if idx.dtype == "bool":
        # x[mask] = v: v broadcasts to [nnz, *rest]; only a v that is the same for every selected
        # element (it broadcasts against `rest`) avoids the data-dependent nnz.
        rest = list(x.shape[axis + idx.ndim:])
        v = cx.operand(values, x.dtype)
        if v.ndim > len(rest):
            lead = list(v.shape[:v.ndim - len(rest)])
            if any(not (isinstance(e, int) and e == 1) for e in lead):
                raise Unsupported("x[mask] = values with one value per selected element (a data-dependent count); "
                                  "use torch.where(mask, values, x)")
            v = ops.reshape(v, list(v.shape[v.ndim - len(rest):]))
        mask = ops.reshape(idx, list(idx.shape) + [1] * len(rest)) if rest else idx
        return call("where", [mask, v, x])
    return _write_rows(cx, node, x, axis, idx, values)


@converter("aten.slice_scatter.default")
def _slice_scatter(cx, node, x, src, dim=0, start=None, end=None, step=1):
    # x[..., start:end:step, ...] = src: a row write at positions arange(start, end, step).
    dim = _axis(dim, x.ndim)
    n_rows = x.shape[dim]
    start = 0 if start is None else start
    end = n_rows if end is None or (isinstance(end, int) and end >= 2**31) else end
    if isinstance(start, SymDim) or isinstance(step, SymDim):
        raise Unsupported("slice assignment with a symbolic start or step")
    if isinstance(end, int) and isinstance(n_rows, int):
        start, end = _clip(start, n_rows), _clip(end, n_rows)
        if len(range(start, end, step)) == 0:
            return x
        pos = ops.arange(start, end, step, dtype="int64")
    else:
        if start < 0 or step != 1:
            raise Unsupported("slice assignment with a symbolic end and a negative start or a step other than 1")
        pos = _arange_sym(cx, start, end - start)
    return _write_rows(cx, node, x, dim, pos, src)


def _clip(i: int, n: int) -> int:
    i = i + n if i < 0 else i
    return min(max(i, 0), n)


@converter("aten.select_scatter.default")
def _select_scatter(cx, node, x, src, dim, index):
    # x[..., index, ...] = src (src lacks axis `dim`): a one-row write.
    dim = _axis(dim, x.ndim)
    if isinstance(index, SymDim):
        raise Unsupported("select assignment with a symbolic index")
    pos = ops.arange(index, index + 1, 1, dtype="int64")
    return _write_rows(cx, node, x, dim, pos, ops.unsqueeze(cx.operand(src, x.dtype), [dim]))
