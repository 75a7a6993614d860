"""PyTorch-style signatures for the convolution / pooling / resampling ops (torch.nn.functional
names and defaults). Each wrapper only normalises arguments into the registry's attributes:
stride/dilation pairs, padding as (top, left, bottom, right), PyTorch's pooling stride default
(= kernel_size) and interpolate's coordinate conventions. Semantics and errors stay in C++."""
from __future__ import annotations

from typing import Optional, Sequence, Union

from ._core import call
from ._wrappers import reshape as reshape_

__all__ = ["conv1d", "conv2d", "conv3d", "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d",
           "avg_pool3d", "adaptive_avg_pool2d", "global_avg_pool2d", "interpolate", "batch_norm"]

IntPair = Union[int, Sequence[int]]


def _pair(v: IntPair, what: str):
    if isinstance(v, (list, tuple)):
        if len(v) != 2:
            raise ValueError(f"{what} must be an int or a pair, got {v!r}")
        return [int(v[0]), int(v[1])]
    return [int(v), int(v)]


def _padding(p, what: str = "padding"):
    """int | (ph, pw) | (top, left, bottom, right) -> the op's (top, left, bottom, right)."""
    if isinstance(p, (list, tuple)):
        if len(p) == 4:
            return [int(v) for v in p]
        ph, pw = _pair(p, what)
        return [ph, pw, ph, pw]
    return [int(p)] * 4


def conv2d(x, weight, bias=None, stride: IntPair = 1, padding=0, dilation: IntPair = 1, groups: int = 1, **attrs):
    """torch.nn.functional.conv2d: x[N, C, H, W], weight[O, C/groups, kH, kW], bias[O] or None.
    padding: int, (ph, pw), (top, left, bottom, right), "valid" or "same" (stride 1; the odd pad
    goes to the bottom/right like PyTorch)."""
    dil = _pair(dilation, "dilation")
    if isinstance(padding, str):
        if padding == "valid":
            pads = [0, 0, 0, 0]
        elif padding == "same":
            if _pair(stride, "stride") != [1, 1]:
                raise ValueError("conv2d: padding='same' needs stride 1")
            kh, kw = int(weight.shape[2]), int(weight.shape[3])
            th, tw = dil[0] * (kh - 1), dil[1] * (kw - 1)
            pads = [th // 2, tw // 2, th - th // 2, tw - tw // 2]
        else:
            raise ValueError(f"conv2d: padding must be an int, a tuple, 'valid' or 'same', got {padding!r}")
    else:
        pads = _padding(padding)
    a = dict(attrs, stride=_pair(stride, "stride"), padding=pads, dilation=dil, groups=int(groups))
    if bias is None:
        return call("conv2d", [x, weight], a)
    return call("conv2d_bias", [x, weight, bias], a)


def _tuple(v, n: int, what: str):
    if isinstance(v, (list, tuple)):
        if len(v) != n:
            raise ValueError(f"{what} must be an int or {n} values, got {v!r}")
        return [int(e) for e in v]
    return [int(v)] * n


def _same_pads(k, dil, stride, what: str):
    """PyTorch's padding='same' (stride 1): total (k-1)·d per axis, the odd element at the end.
    Returns (begins, ends)."""
    if any(s != 1 for s in stride):
        raise ValueError(f"{what}: padding='same' needs stride 1")
    tot = [d * (kk - 1) for kk, d in zip(k, dil)]
    return [t // 2 for t in tot], [t - t // 2 for t in tot]


def conv1d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1, **attrs):
    """torch.nn.functional.conv1d: x[N, C, L], weight[O, C/groups, k], bias[O] or None; padding an
    int, (left, right), 'valid' or 'same'. Runs as conv2d on [N, C, 1, L] (exact for every
    attribute: the unit height has one window row)."""
    s, d = _tuple(stride, 1, "stride"), _tuple(dilation, 1, "dilation")
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise ValueError(f"conv1d: padding must be an int, a pair, 'valid' or 'same', got {padding!r}")
        b, e = _same_pads([int(weight.shape[2])], d, s, "conv1d") if padding == "same" else ([0], [0])
        pl, pr = b[0], e[0]
    elif isinstance(padding, (list, tuple)) and len(padding) == 2:
        pl, pr = int(padding[0]), int(padding[1])
    else:
        pl = pr = _tuple(padding, 1, "padding")[0]
    a = dict(attrs, stride=[1, s[0]], padding=[0, pl, 0, pr], dilation=[1, d[0]], groups=int(groups))
    x4 = call("unsqueeze", [x], {"axes": [2]})
    w4 = call("unsqueeze", [weight], {"axes": [2]})
    y = call("conv2d", [x4, w4], a) if bias is None else call("conv2d_bias", [x4, w4, bias], a)
    return call("squeeze", [y], {"axes": [2]})


def conv3d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1, **attrs):
    """torch.nn.functional.conv3d: x[N, C, D, H, W], weight[O, C/groups, kD, kH, kW], bias[O] or None;
    padding an int, (pd, ph, pw), the 6 ONNX-order pads (d0, h0, w0, d1, h1, w1), 'valid' or 'same'."""
    s, d = _tuple(stride, 3, "stride"), _tuple(dilation, 3, "dilation")
    if isinstance(padding, str):
        if padding == "valid":
            pads = [0] * 6
        elif padding == "same":
            b, e = _same_pads([int(v) for v in weight.shape[2:]], d, s, "conv3d")
            pads = b + e
        else:
            raise ValueError(f"conv3d: padding must be an int, a tuple, 'valid' or 'same', got {padding!r}")
    elif isinstance(padding, (list, tuple)) and len(padding) == 6:
        pads = [int(v) for v in padding]
    else:
        pads = _tuple(padding, 3, "padding") * 2
    a = dict(attrs, stride=s, padding=pads, dilation=d, groups=int(groups))
    if bias is None:
        return call("conv3d", [x, weight], a)
    return call("conv3d_bias", [x, weight, bias], a)


def _pool1d(op, x, k, stride, padding, extra):
    """A 1-d pool as the 2-d op on [N, C, 1, L] with a (1, k) window."""
    kk = _tuple(k, 1, "kernel_size")[0]
    s = kk if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else _tuple(stride, 1, "stride")[0]
    p = _tuple(padding, 1, "padding")[0]
    y = call(op, [call("unsqueeze", [x], {"axes": [2]})], dict(extra, kernel=[1, kk], stride=[1, s], padding=[0, p, 0, p]))
    return call("squeeze", [y], {"axes": [2]})


def max_pool1d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False, **attrs):
    """torch.nn.functional.max_pool1d on x[N, C, L] (stride defaults to kernel_size)."""
    return _pool1d("max_pool2d", x, kernel_size, stride, padding,
                   dict(attrs, dilation=[1, _tuple(dilation, 1, "dilation")[0]], ceil_mode=bool(ceil_mode)))


def avg_pool1d(x, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True, **attrs):
    """torch.nn.functional.avg_pool1d on x[N, C, L] (stride defaults to kernel_size)."""
    return _pool1d("avg_pool2d", x, kernel_size, stride, padding,
                   dict(attrs, ceil_mode=bool(ceil_mode), count_include_pad=bool(count_include_pad)))


def _pool3d(op, x, kernel_size, stride, padding, dilation, extra):
    """A 3-d pool as two exact separable passes of the 2-d op: (H, W) windows on [N, C·D, H, W],
    then (1, kD) windows on [N, C, Ho·Wo, D]. Max of maxes is the max; the average's divisor
    (valid count, or window clipped to the padded input) is a product of per-axis factors."""
    k = _tuple(kernel_size, 3, "kernel_size")
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else _tuple(stride, 3, "stride")
    p = _tuple(padding, 3, "padding")
    d = _tuple(dilation, 3, "dilation")
    n, c, dd, h, w = x.shape
    a = dict(extra)
    if op == "max_pool2d":
        a["dilation"] = [d[1], d[2]]
    y = call(op, [reshape_(x, [n, c * dd, h, w])], dict(a, kernel=[k[1], k[2]], stride=[s[1], s[2]],
                                                         padding=[p[1], p[2], p[1], p[2]]))
    ho, wo = y.shape[2], y.shape[3]
    y = call("permute", [reshape_(y, [n, c, dd, ho * wo])], {"dims": [0, 1, 3, 2]})
    if op == "max_pool2d":
        a["dilation"] = [1, d[0]]
    y = call(op, [y], dict(a, kernel=[1, k[0]], stride=[1, s[0]], padding=[0, p[0], 0, p[0]]))
    do = y.shape[3]
    y = call("permute", [y], {"dims": [0, 1, 3, 2]})
    return reshape_(y, [n, c, do, ho, wo])


def max_pool3d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False, **attrs):
    """torch.nn.functional.max_pool3d on x[N, C, D, H, W] (stride defaults to kernel_size)."""
    return _pool3d("max_pool2d", x, kernel_size, stride, padding, dilation, dict(attrs, ceil_mode=bool(ceil_mode)))


def avg_pool3d(x, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override=None, **attrs):
    """torch.nn.functional.avg_pool3d on x[N, C, D, H, W] (stride defaults to kernel_size)."""
    if divisor_override is not None:
        raise ValueError("avg_pool3d: divisor_override is not supported")
    return _pool3d("avg_pool2d", x, kernel_size, stride, padding, 1,
                   dict(attrs, ceil_mode=bool(ceil_mode), count_include_pad=bool(count_include_pad)))


def max_pool2d(x, kernel_size: IntPair, stride: Optional[IntPair] = None, padding=0, dilation: IntPair = 1,
               ceil_mode: bool = False, **attrs):
    """torch.nn.functional.max_pool2d (stride defaults to kernel_size)."""
    k = _pair(kernel_size, "kernel_size")
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else _pair(stride, "stride")
    return call("max_pool2d", [x], dict(attrs, kernel=k, stride=s, padding=_padding(padding),
                                        dilation=_pair(dilation, "dilation"), ceil_mode=bool(ceil_mode)))


def avg_pool2d(x, kernel_size: IntPair, stride: Optional[IntPair] = None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override=None, **attrs):
    """torch.nn.functional.avg_pool2d (stride defaults to kernel_size; no divisor_override)."""
    if divisor_override is not None:
        raise ValueError("avg_pool2d: divisor_override is not supported")
    k = _pair(kernel_size, "kernel_size")
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else _pair(stride, "stride")
    return call("avg_pool2d", [x], dict(attrs, kernel=k, stride=s, padding=_padding(padding),
                                        ceil_mode=bool(ceil_mode), count_include_pad=bool(count_include_pad)))


def global_avg_pool2d(x, **attrs):
    """Mean over H and W: [N, C, H, W] -> [N, C, 1, 1]."""
    return call("global_avg_pool2d", [x], attrs)


def adaptive_avg_pool2d(x, output_size: IntPair):
    """torch.nn.functional.adaptive_avg_pool2d; output_size 1 / (1, 1) only (global pooling)."""
    if _pair(output_size, "output_size") != [1, 1]:
        raise ValueError(f"adaptive_avg_pool2d: only output_size (1, 1) is supported, got {output_size!r}")
    return call("global_avg_pool2d", [x], {})


def interpolate(x, size: Optional[IntPair] = None, scale_factor=None, mode: str = "nearest",
                align_corners: Optional[bool] = None, **attrs):
    """torch.nn.functional.interpolate for 4-d x, mode 'nearest' or 'bilinear'. Nearest uses
    PyTorch's asymmetric + floor rule; bilinear uses pytorch_half_pixel (align_corners=False) or
    align_corners. Extra keywords (coordinate_transformation_mode, nearest_mode) override."""
    if mode not in ("nearest", "bilinear"):
        raise ValueError(f"interpolate: mode must be 'nearest' or 'bilinear', got {mode!r}")
    if mode == "nearest" and align_corners is not None:
        raise ValueError("interpolate: align_corners only applies to bilinear mode")
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate: give exactly one of size and scale_factor")
    a = {"mode": mode}
    if mode == "nearest":
        a.update(coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    else:
        a["coordinate_transformation_mode"] = "align_corners" if align_corners else "pytorch_half_pixel"
    if size is not None:
        a["size"] = _pair(size, "size")
    else:
        sf = list(scale_factor) if isinstance(scale_factor, (list, tuple)) else [scale_factor, scale_factor]
        if len(sf) != 2:
            raise ValueError(f"interpolate: scale_factor must be a number or a pair, got {scale_factor!r}")
        a["scales"] = [float(v) for v in sf]
        # Static extents: the output size is fixed here exactly as PyTorch computes it.
        hw = x.shape[2:]
        if all(isinstance(e, int) for e in hw):
            import math
            a["size"] = [int(math.floor(hw[0] * a["scales"][0])), int(math.floor(hw[1] * a["scales"][1]))]
    a.update(attrs)
    return call("interpolate", [x], a)


def batch_norm(x, running_mean, running_var, weight=None, bias=None, training: bool = False, momentum=0.1,
               eps: float = 1e-5, **attrs):
    """torch.nn.functional.batch_norm in inference form (training must be False); weight/bias of
    None mean 1 and 0."""
    if training:
        raise ValueError("batch_norm: only inference (training=False) is supported")
    import numpy as np
    c = running_mean.shape[0]
    dt = running_mean.dtype
    if weight is None:
        weight = np.ones([c], dtype=np.float32 if dt == "float32" else np.float16 if dt == "float16" else np.float32)
    if bias is None:
        bias = np.zeros([c], dtype=np.float32 if dt == "float32" else np.float16 if dt == "float16" else np.float32)
    return call("batch_norm", [x, running_mean, running_var, weight, bias], dict(attrs, eps=float(eps)))
