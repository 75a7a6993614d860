"""The conversion table of the PyTorch front end: one converter per ATen op family.

A converter is `fn(cx, node, *args, **kwargs)`: `args`/`kwargs` are the FX node's arguments with
every graph value replaced by what it converted to (a DinoML `Tensor`, a Python scalar, a
`SymDim` for a symbolic size, tuples of those, or None). It returns the node's value. `cx` (the
`_Converter` of dinoml.frontends.torch) gives the node's output dtype and operand helpers.
Converters only compose registered DinoML ops; a case an op cannot express exactly raises
`Unsupported` with the reason, and the front end reports it with the user's source line.

Keys are `"aten.<name>.<overload>"` (one overload) or `"aten.<name>"` (every overload).
"""
from __future__ import annotations

from typing import Callable, Dict

from .. import ops
from ..dims import SymDim
from ..ops import call
from ..tensor import TensorLike

CONVERTERS: Dict[str, Callable] = {}
_TO_END = 2**62  # slice's "to the end" (docs/ops.md)


class Unsupported(Exception):
    """This node's arguments are outside what the converter can express exactly."""


def converter(*names):
    def deco(fn):
        for n in names:
            CONVERTERS[n] = fn
        return fn
    return deco


def _is_t(v) -> bool:
    return isinstance(v, TensorLike)


def _static(v, what: str) -> int:
    if isinstance(v, SymDim):
        raise Unsupported(f"{what} must be a static size here, got the symbolic size {v}")
    return int(v)


def _axis(a: int, rank: int) -> int:
    return a + rank if a < 0 else a


# ---- values that pass through ---------------------------------------------------------------------
@converter("aten.clone", "aten.contiguous", "aten.alias", "aten.detach", "aten.lift_fresh_copy", "aten.dropout",
           "aten.feature_dropout", "aten.alpha_dropout", "aten.native_dropout.default")
def _identity(cx, node, x, *args, **kwargs):
    if str(node.target) == "aten.native_dropout.default":
        if args and args[1]:
            raise Unsupported("dropout in training mode: call module.eval() before exporting")
        return (x, None)
    return x


@converter("aten._assert_tensor_metadata", "aten._assert_scalar", "aten.sym_constrain_range_for_size",
           "aten.sym_constrain_range", "aten._assert_async", "aten._functional_assert_async")
def _no_op(cx, node, *args, **kwargs):
    return None


@converter("aten._to_copy", "aten.to", "aten._to_dtype", "aten.type_as")
def _to(cx, node, x, *args, **kwargs):
    dt = cx.dtype(node)
    return x if x.dtype == dt else ops.cast(x, dt)


# ---- elementwise ----------------------------------------------------------------------------------
def _binary(op: str, compare: bool = False):
    def fn(cx, node, a, b, alpha=1, **kwargs):
        dt = cx.promoted(node) if compare else cx.dtype(node)
        a, b = cx.operand(a, dt), cx.operand(b, dt)
        if alpha != 1:
            b = call("mul", [b, cx.operand(alpha, dt)])
        return call(op, [a, b])
    return fn


for _aten, _dml in (("add", "add"), ("sub", "sub"), ("mul", "mul"), ("maximum", "max"), ("minimum", "min"),
                    ("fmax", "max"), ("fmin", "min")):
    CONVERTERS[f"aten.{_aten}"] = _binary(_dml)
for _aten in ("eq", "ne", "lt", "le", "gt", "ge"):
    CONVERTERS[f"aten.{_aten}"] = _binary(_aten, compare=True)


@converter("aten.rsub")
def _rsub(cx, node, a, b, alpha=1):
    dt = cx.dtype(node)
    a, b = cx.operand(a, dt), cx.operand(b, dt)
    if alpha != 1:
        a = call("mul", [a, cx.operand(alpha, dt)])
    return call("sub", [b, a])


@converter("aten.div")
def _div(cx, node, a, b, rounding_mode=None):
    dt = cx.dtype(node)
    if rounding_mode is None:
        # True division: integer operands are promoted to the (float) result dtype first.
        return call("div", [cx.operand(a, dt), cx.operand(b, dt)])
    q = call("div", [cx.operand(a, dt), cx.operand(b, dt)])
    if dt in ("float32", "float16", "bfloat16"):
        if rounding_mode == "floor":
            return call("floor", [q])
        # trunc: floor for positive quotients, ceil for negative ones.
        return call("where", [call("lt", [q, cx.operand(0, dt)]), call("ceil", [q]), call("floor", [q])])
    if rounding_mode == "floor":
        return q  # DinoML's integer div is floor division (docs/ops.md)
    raise Unsupported("integer division with rounding_mode='trunc'")


@converter("aten.pow")
def _pow(cx, node, a, b):
    dt = cx.dtype(node)
    if not _is_t(b) and not _is_t(a):
        raise Unsupported("pow of two scalars")
    if _is_t(a) and not _is_t(b):
        a = cx.operand(a, dt)
        if b == 2:
            return call("mul", [a, a])  # exact and cheaper than pow
        if b == 1:
            return a
        if b == 0.5:
            return call("sqrt", [a])
    return call("pow", [cx.operand(a, dt), cx.operand(b, dt)])


def _unary(op: str):
    def fn(cx, node, x, *args, **kwargs):
        dt = cx.dtype(node)
        return call(op, [cx.operand(x, dt)])
    return fn


for _name in ("relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "erf", "neg", "abs", "floor",
              "ceil", "asin", "acos", "atan", "silu"):
    CONVERTERS[f"aten.{_name}"] = _unary(_name)
CONVERTERS["aten.round.default"] = _unary("round")


@converter("aten.gelu")
def _gelu(cx, node, x, approximate="none"):
    return call("gelu" if approximate == "none" else "fast_gelu", [x])


@converter("aten.reciprocal")
def _reciprocal(cx, node, x):
    return call("div", [cx.operand(1.0, x.dtype), x])


@converter("aten.square")
def _square(cx, node, x):
    return call("mul", [x, x])


@converter("aten.hardtanh")
def _hardtanh(cx, node, x, min_val=-1.0, max_val=1.0):
    return ops.clamp(x, min=float(min_val), max=float(max_val))


@converter("aten.relu6")
def _relu6(cx, node, x):
    return ops.clamp(x, min=0.0, max=6.0)


@converter("aten.hardsigmoid")
def _hardsigmoid(cx, node, x):
    # PyTorch's kernel: min(max(x + 3, 0), 6) / 6
    return call("div", [ops.clamp(call("add", [x, cx.operand(3.0, x.dtype)]), min=0.0, max=6.0),
                        cx.operand(6.0, x.dtype)])


@converter("aten.hardswish")
def _hardswish(cx, node, x):
    # PyTorch's kernel: x * min(max(x + 3, 0), 6) / 6
    r6 = ops.clamp(call("add", [x, cx.operand(3.0, x.dtype)]), min=0.0, max=6.0)
    return call("div", [call("mul", [x, r6]), cx.operand(6.0, x.dtype)])


@converter("aten.clamp", "aten.clamp_min", "aten.clamp_max")
def _clamp(cx, node, x, lo=None, hi=None):
    name = node.target._overloadpacket.__name__
    if name == "clamp_max":
        lo, hi = None, lo
    if _is_t(lo) or _is_t(hi):  # clamp.Tensor
        y = x
        if lo is not None:
            y = call("max", [y, cx.operand(lo, x.dtype)])
        if hi is not None:
            y = call("min", [y, cx.operand(hi, x.dtype)])
        return y
    return ops.clamp(x, min=None if lo is None else float(lo), max=None if hi is None else float(hi))


@converter("aten.where.self", "aten.where.ScalarSelf", "aten.where.ScalarOther", "aten.where.Scalar")
def _where(cx, node, c, a, b):
    dt = cx.dtype(node)
    return call("where", [cx.operand(c, "bool"), cx.operand(a, dt), cx.operand(b, dt)])


@converter("aten.masked_fill")
def _masked_fill(cx, node, x, mask, value):
    dt = cx.dtype(node)
    return call("where", [cx.operand(mask, "bool"), cx.operand(value, dt), x])


@converter("aten.logical_not", "aten.bitwise_not")
def _logical_not(cx, node, x):
    if x.dtype != "bool" and str(node.target).startswith("aten.bitwise_not"):
        raise Unsupported("bitwise_not of an integer tensor")
    return call("eq", [x, cx.operand(False if x.dtype == "bool" else 0, x.dtype)])


@converter("aten.logical_and", "aten.bitwise_and", "aten.logical_or", "aten.bitwise_or")
def _logical_bin(cx, node, a, b):
    a, b = cx.operand(a, "bool"), cx.operand(b, "bool")
    if "and" in str(node.target):
        return call("where", [a, b, cx.operand(False, "bool")])
    return call("where", [a, cx.operand(True, "bool"), b])


# ---- reductions and normalisation -------------------------------------------------------------------
def _reduce(op: str):
    def fn(cx, node, x, dims=None, keepdim=False, *, dtype=None):
        axes = None if dims is None else ([dims] if isinstance(dims, int) else list(dims))
        y = getattr(ops, op)(cx.operand(x, cx.dtype(node)), axes or None, keepdim=keepdim)
        return y
    return fn


CONVERTERS["aten.sum.dim_IntList"] = _reduce("reduce_sum")
CONVERTERS["aten.sum.default"] = _reduce("reduce_sum")
CONVERTERS["aten.mean.dim"] = _reduce("reduce_mean")
CONVERTERS["aten.mean.default"] = _reduce("reduce_mean")
CONVERTERS["aten.amax"] = _reduce("reduce_max")
CONVERTERS["aten.amin"] = _reduce("reduce_min")


@converter("aten.max.dim", "aten.min.dim")
def _max_dim(cx, node, x, dim, keepdim=False):
    if node.target._overloadpacket.__name__ == "min":
        raise Unsupported("min with indices")
    return (ops.reduce_max(x, [dim], keepdim=keepdim), ops.argmax(x, dim, keepdim=keepdim))


@converter("aten.argmax")
def _argmax(cx, node, x, dim=None, keepdim=False):
    if dim is None:
        x, dim = ops.reshape(x, [-1]), 0
    return ops.argmax(x, dim, keepdim=keepdim)


@converter("aten.var.correction", "aten.var_mean.correction")
def _var(cx, node, x, dims=None, *, correction=None, keepdim=False):
    axes = list(range(x.ndim)) if dims is None else list(dims)
    n = 1
    for a in axes:
        n *= _static(x.shape[a], "var's reduced extent")
    c = 1 if correction is None else correction
    mean = ops.reduce_mean(x, axes, keepdim=True)
    d = call("sub", [x, mean])
    var = ops.reduce_mean(call("mul", [d, d]), axes, keepdim=keepdim)
    if c != 0:
        var = call("mul", [var, cx.operand(n / (n - c), x.dtype)])
    if "var_mean" in str(node.target):
        return (var, mean if keepdim else ops.squeeze(mean, axes))
    return var


@converter("aten._softmax", "aten.softmax.int", "aten._log_softmax", "aten.log_softmax.int")
def _softmax(cx, node, x, dim, half_or_dtype=None):
    dt = cx.dtype(node)
    x = cx.operand(x, dt)
    op = "log_softmax" if "log_softmax" in str(node.target) else "softmax"
    return call(op, [x], {"axis": dim})


@converter("aten.layer_norm.default", "aten.native_layer_norm.default")
def _layer_norm(cx, node, x, shape, weight=None, bias=None, eps=1e-5, *args):
    ins = [x] + ([weight] if weight is not None else [])
    if bias is not None:
        if weight is None:
            raise Unsupported("layer_norm with a bias but no weight")
        ins.append(bias)
    y = call("layer_norm", ins, {"normalized_ndim": len(shape), "eps": float(eps)})
    return (y, None, None) if "native" in str(node.target) else y


@converter("aten.rms_norm.default")
def _rms_norm(cx, node, x, shape, weight=None, eps=None):
    if len(shape) != 1:
        raise Unsupported("rms_norm over more than the last dim")
    if eps is None:
        import torch
        eps = torch.finfo(cx.torch_dtype(node)).eps
    return call("rms_norm", [x] + ([weight] if weight is not None else []), {"eps": float(eps)})


@converter("aten.group_norm.default")
def _group_norm(cx, node, x, groups, weight=None, bias=None, eps=1e-5, *args):
    ins = [x] + ([weight, bias] if weight is not None and bias is not None else [])
    return call("group_norm", ins, {"num_groups": int(groups), "eps": float(eps)})


@converter("aten.native_group_norm.default")
def _native_group_norm(cx, node, x, weight, bias, n, c, hw, groups, eps):
    return (_group_norm(cx, node, x, groups, weight, bias, eps), None, None)


def _bn_params(cx, x, weight, bias, mean):
    c = _static(x.shape[1], "batch_norm's channel count")
    dt = mean.dtype
    if weight is None:
        weight = cx.ones([c], dt)
    if bias is None:
        bias = cx.zeros([c], dt)
    return weight, bias


@converter("aten._native_batch_norm_legit_no_training.default")
def _bn_no_training(cx, node, x, weight, bias, mean, var, momentum, eps):
    weight, bias = _bn_params(cx, x, weight, bias, mean)
    return (call("batch_norm", [x, mean, var, weight, bias], {"eps": float(eps)}), None, None)


@converter("aten.batch_norm.default", "aten._native_batch_norm_legit_functional.default",
           "aten.native_batch_norm.default")
def _batch_norm(cx, node, x, weight, bias, mean, var, training, momentum, eps, *args):
    if training:
        raise Unsupported("batch_norm in training mode: call module.eval() before exporting")
    weight, bias = _bn_params(cx, x, weight, bias, mean)
    y = call("batch_norm", [x, mean, var, weight, bias], {"eps": float(eps)})
    return y if str(node.target) == "aten.batch_norm.default" else (y, None, None, None, None)


# ---- matrix products and attention ------------------------------------------------------------------
@converter("aten.linear.default")
def _linear(cx, node, x, w, b=None):
    if w.ndim != 2:
        raise Unsupported("linear with a weight that is not 2-D")
    if b is None:
        return call("gemm_rcr", [x, w])
    return call("gemm_rcr_bias", [x, w, b])


@converter("aten.mm.default")
def _mm(cx, node, a, b):
    return call("gemm_rrr", [a, b])


@converter("aten.bmm.default")
def _bmm(cx, node, a, b):
    return call("bmm_rrr", [a, b])


@converter("aten.matmul.default")
def _matmul(cx, node, a, b):
    return ops.matmul(a, b)


def _scaled_plus_bias(cx, y, bias, beta, alpha):
    """alpha · y + beta · bias, the tail shared by addmm and baddbmm."""
    if alpha != 1:
        y = call("mul", [y, cx.operand(alpha, y.dtype)])
    if beta != 0:
        bias = bias if beta == 1 else call("mul", [bias, cx.operand(beta, bias.dtype)])
        y = call("add", [y, bias])
    return y


@converter("aten.addmm.default")
def _addmm(cx, node, bias, a, b, *, beta=1, alpha=1):
    if beta == 1 and alpha == 1 and bias.ndim == 1:
        return call("gemm_rrr_bias", [a, b, bias])
    return _scaled_plus_bias(cx, call("gemm_rrr", [a, b]), bias, beta, alpha)


@converter("aten.baddbmm.default")
def _baddbmm(cx, node, bias, a, b, *, beta=1, alpha=1):
    return _scaled_plus_bias(cx, call("bmm_rrr", [a, b]), bias, beta, alpha)


def _repeat_heads(kv, groups: int):
    """[B, Hkv, L, D] -> [B, Hkv*groups, L, D], each kv head repeated `groups` times (GQA)."""
    b, h, l, d = kv.shape
    e = ops.expand(ops.unsqueeze(kv, [2]), [b, h, groups, l, d])
    return ops.reshape(e, [b, h * groups, l, d])


@converter("aten.scaled_dot_product_attention.default", "aten._scaled_dot_product_flash_attention_for_cpu.default")
def _sdpa(cx, node, q, k, v, *args, **kwargs):
    flash = "flash" in str(node.target)
    names = (["dropout_p", "is_causal", "attn_mask", "scale"] if flash else
             ["attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"])
    a = dict(zip(names, args))
    a.update(kwargs)
    if a.get("dropout_p", 0.0):
        raise Unsupported("scaled_dot_product_attention with dropout_p > 0 (call module.eval())")
    hq, hk = q.shape[-3] if q.ndim >= 3 else 1, k.shape[-3] if k.ndim >= 3 else 1
    if isinstance(hq, int) and isinstance(hk, int) and hq != hk:
        if not a.get("enable_gqa", False) or q.ndim != 4 or hq % hk:
            raise Unsupported(f"attention with {hq} query heads and {hk} key heads without enable_gqa")
        k, v = _repeat_heads(k, hq // hk), _repeat_heads(v, hq // hk)
    ins = [q, k, v]
    mask = a.get("attn_mask")
    if mask is not None:
        ins.append(mask if mask.dtype == "bool" else cx.operand(mask, q.dtype))
    attrs = {"causal": bool(a.get("is_causal", False))}
    if a.get("scale") is not None:
        attrs["scale"] = float(a["scale"])
    y = call("scaled_dot_product_attention", ins, attrs)
    return (y, None) if flash else y


# ---- convolution and pooling ------------------------------------------------------------------------
def _conv(cx, x, w, b, stride, padding, dilation, groups):
    if x.ndim == 3:  # conv1d as a conv2d of height 1
        y = _conv(cx, ops.unsqueeze(x, [2]), ops.unsqueeze(w, [2]), b, [1] + list(stride), [0] + list(padding),
                  [1] + list(dilation), groups)
        return ops.squeeze(y, [2])
    if x.ndim != 4:
        raise Unsupported(f"{x.ndim - 2}-d convolution (1-d and 2-d are supported)")
    if isinstance(padding, str):
        return ops.conv2d(x, w, b, stride=list(stride), padding=padding, dilation=list(dilation), groups=groups)
    return ops.conv2d(x, w, b, stride=list(stride), padding=list(padding), dilation=list(dilation), groups=int(groups))


@converter("aten.convolution.default")
def _convolution(cx, node, x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    if transposed:
        raise Unsupported("transposed convolution")
    return _conv(cx, x, w, b, stride, padding, dilation, groups)


@converter("aten.conv1d", "aten.conv2d")
def _conv_nd(cx, node, x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    n = x.ndim - 2
    rep = (lambda v: [v] * n if isinstance(v, int) else list(v))
    return _conv(cx, x, w, b, rep(stride), padding if isinstance(padding, str) else rep(padding), rep(dilation),
                 groups)


@converter("aten.max_pool2d.default", "aten.max_pool2d_with_indices.default")
def _max_pool(cx, node, x, kernel, stride=(), padding=0, dilation=1, ceil_mode=False):
    y = ops.max_pool2d(x, list(kernel), list(stride) if stride else None, padding, dilation, ceil_mode)
    return (y, None) if "indices" in str(node.target) else y


@converter("aten.avg_pool2d.default")
def _avg_pool(cx, node, x, kernel, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
              divisor_override=None):
    return ops.avg_pool2d(x, list(kernel), list(stride) if stride else None, padding, ceil_mode, count_include_pad,
                          divisor_override)


@converter("aten.adaptive_avg_pool2d.default", "aten._adaptive_avg_pool2d.default")
def _adaptive_avg(cx, node, x, size):
    size = [int(s) for s in size] if isinstance(size, (list, tuple)) else [int(size)] * 2
    if size == [1, 1]:
        return call("global_avg_pool2d", [x])
    h, w = x.shape[2], x.shape[3]
    if isinstance(h, int) and isinstance(w, int) and h % size[0] == 0 and w % size[1] == 0:
        k = [h // size[0], w // size[1]]
        return ops.avg_pool2d(x, k, k)
    raise Unsupported(f"adaptive_avg_pool2d to {size} from a size it does not divide")


@converter("aten.upsample_nearest2d.vec", "aten.upsample_bilinear2d.vec")
def _upsample(cx, node, x, size, *rest):
    bilinear = "bilinear" in str(node.target)
    align = rest[0] if bilinear else None
    scales = rest[-1]
    if size is not None:
        return ops.interpolate(x, size=[_static(s, "upsample size") for s in size],
                               mode="bilinear" if bilinear else "nearest", align_corners=align)
    return ops.interpolate(x, scale_factor=list(scales), mode="bilinear" if bilinear else "nearest",
                           align_corners=align)


@converter("aten.constant_pad_nd.default")
def _constant_pad(cx, node, x, pad, value=0):
    r = x.ndim
    begins, ends = [0] * r, [0] * r
    for i in range(len(pad) // 2):  # PyTorch: (last-dim begin, last-dim end, previous dim, ...)
        begins[r - 1 - i], ends[r - 1 - i] = int(pad[2 * i]), int(pad[2 * i + 1])
    if min(begins + ends) < 0:
        raise Unsupported("negative padding (cropping)")
    return ops.pad(x, begins + ends, mode="constant", value=float(value))
