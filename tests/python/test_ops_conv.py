"""Parity of the convolution family (docs/ops.md "Convolution, pooling, resampling").

conv2d / conv2d_bias / conv2d_bias_relu / conv2d_bias_add_relu over odd sizes, strides, asymmetric
padding, dilation, groups, depthwise (groups == C), 1x1 convs, every epilogue, dynamic batch and
dynamic height; max_pool2d (padding, dilation, ceil_mode), avg_pool2d (count_include_pad,
ceil_mode), global_avg_pool2d, interpolate (nearest / bilinear, PyTorch conventions and the ONNX
coordinate / rounding modes), batch_norm. float32 everywhere, float16 / bfloat16 for a few.
Oracle: torch.nn.functional in float64 (ONNX-only interpolate modes: a NumPy implementation of
the ONNX Resize formulas).
"""
import math

import numpy as np
import pytest

import op_harness as H
from op_harness import Batch, Case, Gen, Inp

B_DIM = {"B": dict(min=1, max=8, typical=4, buckets=[2, 8])}
B_RUNS = [{"B": b} for b in (1, 3, 8)]
HW_DIM = {"B": dict(min=1, max=4, typical=2, buckets=[4]), "H": dict(min=5, max=40, typical=16, buckets=[16, 40])}
HW_RUNS = [{"B": 1, "H": 5}, {"B": 3, "H": 17}, {"B": 4, "H": 40}]

CONV_TOL = {"float32": (1e-4, 1e-4), "float16": (2e-2, 2e-2), "bfloat16": (5e-2, 5e-2)}


def _t():
    import torch
    return torch


def _tt(a):
    return _t().from_numpy(np.ascontiguousarray(a, dtype=np.float64))


def _pads(p):
    return [p] * 4 if isinstance(p, int) else list(p)


def _torch_conv(x, w, b, stride, pads, dil, groups):
    F = _t().nn.functional
    t, l, bo, r = pads
    xt = F.pad(_tt(x), (l, r, t, bo))
    return F.conv2d(xt, _tt(w), None if b is None else _tt(b), stride=stride, dilation=dil, groups=groups).numpy()


def _conv_case(name, dtype, C, Hs, W, O, k, stride=(1, 1), pad=0, dil=(1, 1), groups=1, epi="conv2d",
               batch="B", dims_h=None):
    pads = _pads(pad)
    kh, kw = (k, k) if isinstance(k, int) else k
    h_ext = dims_h or Hs
    inputs = {"x": Inp((batch, C, h_ext, W), dtype), "w": Inp((O, C // groups, kh, kw), dtype, Gen(-0.5, 0.5))}
    if epi != "conv2d":
        inputs["b"] = Inp((O,), dtype)
    if epi == "conv2d_bias_add_relu":
        # residual has y's shape; computed by a plain conv of the same geometry from x
        pass

    def build(ops, t):
        attrs = dict(stride=list(stride), padding=pads, dilation=list(dil), groups=groups)
        if epi == "conv2d":
            return ops.call("conv2d", [t["x"], t["w"]], attrs)
        if epi == "conv2d_bias_add_relu":
            r = ops.call("conv2d", [t["x"], t["w"]], attrs)
            return ops.call(epi, [t["x"], t["w"], t["b"], ops.sigmoid(r)], attrs)
        return ops.call(epi, [t["x"], t["w"], t["b"]], attrs)

    def oracle(x):
        y = _torch_conv(x["x"], x["w"], None if epi == "conv2d" else x["b"], stride, pads, dil, groups)
        if epi == "conv2d_bias_add_relu":
            r = _torch_conv(x["x"], x["w"], None, stride, pads, dil, groups)
            y = y + 1.0 / (1.0 + np.exp(-r))
        if epi in ("conv2d_bias_relu", "conv2d_bias_add_relu"):
            y = np.maximum(y, 0)
        return y

    tol = CONV_TOL[dtype]
    if dtype != "float32" and epi == "conv2d_bias_add_relu":
        tol = (tol[0] * 2, tol[1] * 2)
    return Case(f"{name}-{epi}-{dtype}", inputs, build, oracle, dtype, tol=tol)


CONV_SHAPES = [
    # name, C, H, W, O, k, stride, pad, dil, groups
    ("3x3s1p1", 5, 9, 7, 6, 3, (1, 1), 1, (1, 1), 1),
    ("3x3s2p1-odd", 3, 11, 13, 7, 3, (2, 2), 1, (1, 1), 1),
    ("7x7s2p3", 3, 17, 15, 8, 7, (2, 2), 3, (1, 1), 1),
    ("1x1", 16, 5, 6, 20, 1, (1, 1), 0, (1, 1), 1),
    ("1x1s2", 9, 7, 8, 13, 1, (2, 2), 0, (1, 1), 1),
    ("5x3-asym-pad", 4, 8, 9, 5, (5, 3), (1, 2), (2, 0, 1, 1), (1, 1), 1),
    ("dil2", 4, 12, 11, 6, 3, (1, 1), 2, (2, 2), 1),
    ("dil-s2", 3, 13, 12, 5, 3, (2, 1), (1, 2, 0, 2), (2, 3), 1),
    ("groups2", 6, 8, 9, 10, 3, (1, 1), 1, (1, 1), 2),
    ("groups3-s2", 9, 10, 7, 6, 3, (2, 2), 1, (1, 1), 3),
    ("depthwise3x3", 8, 9, 10, 8, 3, (1, 1), 1, (1, 1), 8),
    ("depthwise5x5s2", 7, 13, 11, 7, 5, (2, 2), 2, (1, 1), 7),
    ("depthwise-mult2", 4, 9, 8, 8, 3, (1, 1), 1, (1, 1), 4),
    ("wide-K", 40, 6, 5, 70, 3, (1, 1), 1, (1, 1), 1),  # K = 360 > one 256 k-block, O not a multiple of 6
    ("many-cols", 3, 23, 21, 4, 3, (1, 1), 1, (1, 1), 1),  # P = 483 > one 128-column block
]

EPIS = ["conv2d", "conv2d_bias", "conv2d_bias_relu", "conv2d_bias_add_relu"]

CONV_CASES = [_conv_case(n, "float32", C, Hh, W, O, k, s, p, d, g, epi)
              for (n, C, Hh, W, O, k, s, p, d, g) in CONV_SHAPES for epi in EPIS]
CONV_HALF = [_conv_case(n, dt, C, Hh, W, O, k, s, p, d, g, epi)
             for dt in ("float16", "bfloat16")
             for (n, C, Hh, W, O, k, s, p, d, g) in (CONV_SHAPES[1], CONV_SHAPES[3], CONV_SHAPES[10])
             for epi in ("conv2d_bias", "conv2d_bias_add_relu")]
CONV_DYN_H = [_conv_case(n, "float32", C, None, W, O, k, s, p, d, g, epi, dims_h="H")
              for (n, C, _, W, O, k, s, p, d, g) in (CONV_SHAPES[1], CONV_SHAPES[3], CONV_SHAPES[10])
              for epi in ("conv2d_bias_relu",)]


# ---- pooling -------------------------------------------------------------------------------

def _pool_case(kind, k, stride, pad, dil=(1, 1), ceil=False, cip=True, C=3, Hh=11, W=10, dtype="float32"):
    pads = _pads(pad)
    sym = pads[0] == pads[2] and pads[1] == pads[3]
    assert sym, "torch pools take symmetric padding"

    def build(ops, t):
        a = dict(kernel=list(k), stride=list(stride), padding=pads, ceil_mode=ceil)
        if kind == "max":
            a["dilation"] = list(dil)
            return ops.call("max_pool2d", [t["x"]], a)
        a["count_include_pad"] = cip
        return ops.call("avg_pool2d", [t["x"]], a)

    def oracle(x):
        F = _t().nn.functional
        if kind == "max":
            return F.max_pool2d(_tt(x["x"]), k, stride, (pads[0], pads[1]), dil, ceil_mode=ceil).numpy()
        return F.avg_pool2d(_tt(x["x"]), k, stride, (pads[0], pads[1]), ceil_mode=ceil,
                            count_include_pad=cip).numpy()

    tag = f"{kind}-k{k[0]}x{k[1]}-s{stride[0]}{stride[1]}-p{pads[0]}{pads[1]}-d{dil[0]}{dil[1]}" \
          f"{'-ceil' if ceil else ''}{'' if cip else '-nopad'}-{dtype}" + ("" if (Hh, W) == (11, 10) else f"-{Hh}x{W}")
    return Case(tag, {"x": Inp(("B", C, Hh, W), dtype)}, build, oracle, dtype,
                tol=(1e-5, 1e-5) if dtype == "float32" else None)


POOL_CASES = [
    _pool_case("max", (3, 3), (2, 2), 1),
    _pool_case("max", (2, 2), (2, 2), 0),
    _pool_case("max", (3, 2), (2, 1), (1, 1, 1, 1), ceil=True),
    _pool_case("max", (3, 3), (2, 2), 0, ceil=True, Hh=12, W=13),
    _pool_case("max", (3, 3), (1, 2), 1, dil=(2, 1)),
    _pool_case("max", (2, 2), (3, 3), 1, dil=(2, 2), ceil=True, Hh=10, W=9),
    _pool_case("max", (3, 3), (2, 2), 1, dtype="float16"),
    # rows wide enough for the kernel's vector loops (separable vertical / horizontal passes)
    _pool_case("max", (3, 3), (2, 2), 1, C=2, Hh=23, W=45),
    _pool_case("max", (3, 3), (1, 1), 1, C=2, Hh=9, W=40),
    _pool_case("max", (2, 3), (3, 3), (1, 1, 1, 1), dil=(2, 2), C=2, Hh=20, W=50),
    _pool_case("max", (3, 3), (2, 2), 1, C=2, Hh=17, W=36, dtype="bfloat16"),
    _pool_case("avg", (3, 3), (2, 2), 1),
    _pool_case("avg", (3, 3), (2, 2), 1, cip=False),
    _pool_case("avg", (2, 3), (2, 2), (1, 1, 1, 1), ceil=True),
    _pool_case("avg", (3, 3), (2, 2), (1, 1, 1, 1), ceil=True, cip=False, Hh=12, W=10),
    _pool_case("avg", (5, 5), (3, 3), 2, ceil=True, Hh=14, W=13),
    _pool_case("avg", (2, 2), (2, 2), 0, dtype="bfloat16"),
]


def _gap_case(dtype, C=5, Hh=7, W=9):
    return Case(f"global_avg-{C}x{Hh}x{W}-{dtype}", {"x": Inp(("B", C, Hh, W), dtype)},
                lambda ops, t: ops.global_avg_pool2d(t["x"]),
                lambda x: x["x"].mean(axis=(2, 3), keepdims=True), dtype,
                tol=(1e-5, 1e-5) if dtype == "float32" else None)


GAP_CASES = [_gap_case("float32"), _gap_case("float16"), _gap_case("float32", C=64, Hh=1, W=1)]


# ---- interpolate ------------------------------------------------------------------------------

def _torch_interp(x, size=None, scale=None, mode="nearest", align_corners=None):
    F = _t().nn.functional
    return F.interpolate(_tt(x), size=size, scale_factor=scale, mode=mode, align_corners=align_corners).numpy()


def _np_resize(x, out_hw, mode, ctm, nm, scales=None):
    """ONNX Resize (2-d, nearest / linear) written from the operator spec."""
    n, c, h, w = x.shape
    coords = []
    for axis, (i_len, o_len) in enumerate(zip((h, w), out_hw)):
        sc = scales[axis] if scales else o_len / i_len
        o = np.arange(o_len, dtype=np.float64)
        if ctm == "half_pixel":
            src = (o + 0.5) / sc - 0.5
        elif ctm == "pytorch_half_pixel":
            src = (o + 0.5) / sc - 0.5 if o_len > 1 else np.zeros_like(o)
        elif ctm == "asymmetric":
            src = o / sc
        else:
            src = o * (i_len - 1) / (o_len - 1) if o_len > 1 else np.zeros_like(o)
        coords.append(src)
    if mode == "nearest":
        def rnd(v):
            if nm == "floor":
                return np.floor(v)
            if nm == "ceil":
                return np.ceil(v)
            if nm == "round_prefer_ceil":
                return np.floor(v + 0.5)
            return np.ceil(v - 0.5)
        iy = np.clip(rnd(coords[0]).astype(np.int64), 0, h - 1)
        ix = np.clip(rnd(coords[1]).astype(np.int64), 0, w - 1)
        return x[:, :, iy][:, :, :, ix]
    cy = np.clip(coords[0], 0, h - 1)
    cx = np.clip(coords[1], 0, w - 1)
    y0 = np.floor(cy).astype(np.int64)
    x0 = np.floor(cx).astype(np.int64)
    y1 = np.minimum(y0 + 1, h - 1)
    x1 = np.minimum(x0 + 1, w - 1)
    ly = (cy - y0)[:, None]
    lx = (cx - x0)[None, :]
    g = lambda yy, xx: x[:, :, yy][:, :, :, xx]  # noqa: E731
    return (1 - ly) * ((1 - lx) * g(y0, x0) + lx * g(y0, x1)) + ly * ((1 - lx) * g(y1, x0) + lx * g(y1, x1))


def _interp_torch_case(tag, in_hw, size=None, scale=None, mode="nearest", align_corners=None, dtype="float32"):
    def build(ops, t):
        return ops.interpolate(t["x"], size=size, scale_factor=scale, mode=mode, align_corners=align_corners)

    return Case(f"interp-{tag}-{dtype}", {"x": Inp(("B", 3, *in_hw), dtype)}, build,
                lambda x: _torch_interp(x["x"], size, scale, mode, align_corners), dtype,
                tol=(1e-5, 1e-5) if dtype == "float32" else None)


def _interp_onnx_case(tag, in_hw, size, mode, ctm, nm="round_prefer_floor"):
    def build(ops, t):
        return ops.call("interpolate", [t["x"]], dict(mode=mode, size=list(size), coordinate_transformation_mode=ctm,
                                                      nearest_mode=nm))

    return Case(f"interp-onnx-{tag}", {"x": Inp(("B", 2, *in_hw), "float32")}, build,
                lambda x: _np_resize(x["x"], size, mode, ctm, nm), "float32", tol=(1e-5, 1e-5))


INTERP_CASES = [
    _interp_torch_case("nearest-up2", (5, 7), scale=2),
    _interp_torch_case("nearest-size", (5, 7), size=(11, 4)),
    _interp_torch_case("nearest-down", (9, 8), size=(4, 3)),
    _interp_torch_case("bilinear-up", (5, 7), size=(12, 9), mode="bilinear", align_corners=False),
    _interp_torch_case("bilinear-down", (9, 11), size=(4, 5), mode="bilinear", align_corners=False),
    _interp_torch_case("bilinear-ac", (5, 7), size=(12, 9), mode="bilinear", align_corners=True),
    _interp_torch_case("bilinear-scale", (6, 5), scale=1.5, mode="bilinear", align_corners=False),
    _interp_torch_case("bilinear-up-f16", (5, 7), size=(10, 14), mode="bilinear", align_corners=False,
                       dtype="float16"),
    _interp_onnx_case("nearest-half-pixel", (5, 6), (9, 4), "nearest", "half_pixel"),
    _interp_onnx_case("nearest-round-ceil", (5, 6), (8, 9), "nearest", "asymmetric", "round_prefer_ceil"),
    _interp_onnx_case("nearest-ceil-ac", (5, 6), (9, 11), "nearest", "align_corners", "ceil"),
    _interp_onnx_case("linear-half-pixel", (5, 6), (9, 4), "bilinear", "half_pixel"),
    _interp_onnx_case("linear-asym", (5, 6), (8, 13), "bilinear", "asymmetric"),
]


def _bn_case(dtype, C=6, spatial=(5, 4)):
    inputs = {"x": Inp(("B", C, *spatial), dtype), "mean": Inp((C,), dtype), "var": Inp((C,), dtype, Gen(0.2, 2.0)),
              "gamma": Inp((C,), dtype), "beta": Inp((C,), dtype)}

    def build(ops, t):
        return ops.call("batch_norm", [t["x"], t["mean"], t["var"], t["gamma"], t["beta"]], {"eps": 1e-3})

    def oracle(x):
        F = _t().nn.functional
        return F.batch_norm(_tt(x["x"]), _tt(x["mean"]), _tt(x["var"]), _tt(x["gamma"]), _tt(x["beta"]),
                            training=False, eps=1e-3).numpy()

    return Case(f"batch_norm-{dtype}", inputs, build, oracle, dtype, tol=(1e-5, 1e-5) if dtype == "float32" else None)


BN_CASES = [_bn_case("float32"), _bn_case("float16"), _bn_case("bfloat16")]

BATCHES = [
    Batch("conv_f32", CONV_CASES, B_DIM, B_RUNS),
    Batch("conv_half", CONV_HALF, B_DIM, [{"B": 2}]),
    Batch("conv_dyn_h", CONV_DYN_H, HW_DIM, HW_RUNS),
    Batch("pool", POOL_CASES + GAP_CASES, B_DIM, B_RUNS),
    Batch("interp_bn", INTERP_CASES + BN_CASES, B_DIM, [{"B": 1}, {"B": 5}]),
]


@pytest.mark.parametrize("batch,case,ri", H.params(BATCHES))
def test_conv_compiled(batch, case, ri, tmp_path_factory):
    H.check(batch, case, ri, "compiled", tmp_path_factory)


@pytest.mark.parametrize("batch,case,ri", H.params([BATCHES[2], BATCHES[3], BATCHES[4]]))
def test_conv_reference(batch, case, ri):
    H.check(batch, case, ri, "reference")


# ---- constant weights: the prepacked paths (Winograd F(2x2,3x3) for 3x3/1 with C, O >= 16) -----

def _const_conv_case(name, dtype, C, Hh, W, O, k, stride=(1, 1), pad=1, dil=(1, 1), groups=1, epi="conv2d_bias"):
    pads = _pads(pad)
    kh, kw = (k, k) if isinstance(k, int) else k
    rng = np.random.default_rng(len(name) * 7919 + C * 31 + O)
    wnp = H.to_runtime(rng.uniform(-0.3, 0.3, (O, C // groups, kh, kw)), dtype)
    inputs = {"x": Inp(("B", C, Hh, W), dtype), "b": Inp((O,), dtype)}
    if epi == "conv2d_bias_add_relu":
        inputs["r"] = Inp(("B", O, (Hh + pads[0] + pads[2] - dil[0] * (kh - 1) - 1) // stride[0] + 1,
                           (W + pads[1] + pads[3] - dil[1] * (kw - 1) - 1) // stride[1] + 1), dtype)

    def build(ops, t):
        attrs = dict(stride=list(stride), padding=pads, dilation=list(dil), groups=groups)
        # bf16 has no numpy dtype: the constant is cast at trace time and folded into a bf16 constant.
        w = ops.cast(wnp.astype(np.float32), "bfloat16") if dtype == "bfloat16" else wnp
        ins = [t["x"], w, t["b"]] + ([t["r"]] if "r" in t else [])
        return ops.call(epi, ins, attrs)

    def oracle(x):
        y = _torch_conv(x["x"], H.to_oracle(wnp, dtype), x["b"], stride, pads, dil, groups)
        if "r" in x:
            y = y + x["r"]
        return np.maximum(y, 0) if epi != "conv2d_bias" else y

    tol = CONV_TOL[dtype]
    f4 = kh == kw == 3 and tuple(stride) == (1, 1) and tuple(dil) == (1, 1) and groups == 1 and C >= 16 and O >= 16 \
        and C <= 128 and O * C <= 128 * 256
    if f4 and dtype == "float32":
        # Winograd F(4x4, 3x3) rounds more than direct summation: its error scales with the input
        # magnitudes (inputs here span [-2, 2] un-normalised), ~1e-4 absolute at C = 128.
        tol = (1e-4, 5e-4)
    return Case(f"const-{name}-{epi}-{dtype}", inputs, build, oracle, dtype, tol=tol)


# 3x3/1 with C, O >= 16 use Winograd: F(4x4, 3x3) for C <= 128 and O*C <= 128*256, else F(2x2, 3x3).
CONST_SHAPES = [
    # name, C, H, W, O, k, stride, pad, dil, groups
    ("wino-16x16", 16, 9, 7, 16, 3, (1, 1), 1, (1, 1), 1),
    ("wino-odd", 24, 13, 11, 37, 3, (1, 1), 1, (1, 1), 1),
    ("wino-pad0", 17, 8, 10, 20, 3, (1, 1), 0, (1, 1), 1),
    ("wino-asym", 20, 7, 9, 18, 3, (1, 1), (0, 2, 1, 0), (1, 1), 1),
    ("wino-pad2", 16, 5, 6, 16, 3, (1, 1), 2, (1, 1), 1),
    ("wino-bigC", 300, 6, 5, 40, 3, (1, 1), 1, (1, 1), 1),  # C > one 256 k-block: F(2x2)
    ("wino-f2-wide", 192, 7, 6, 160, 3, (1, 1), 1, (1, 1), 1),  # O·C > 128·256: F(2x2)
    ("wino-f4-C128", 128, 9, 10, 32, 3, (1, 1), 1, (1, 1), 1),  # largest C on F(4x4)
    ("wino-many-tiles", 16, 30, 34, 22, 3, (1, 1), 1, (1, 1), 1),
    ("gemm-3x3s2", 20, 11, 9, 24, 3, (2, 2), 1, (1, 1), 1),
    ("gemm-1x1", 32, 6, 7, 40, 1, (1, 1), 0, (1, 1), 1),
    ("gemm-7x7s2", 3, 19, 17, 16, 7, (2, 2), 3, (1, 1), 1),
    ("gemm-small-C", 8, 9, 9, 12, 3, (1, 1), 1, (1, 1), 1),
    ("gemm-dil", 16, 12, 11, 16, 3, (1, 1), 2, (2, 2), 1),
    ("gemm-groups", 16, 8, 9, 24, 3, (1, 1), 1, (1, 1), 4),
    ("depthwise", 16, 9, 8, 16, 3, (2, 1), 1, (1, 1), 16),
    ("wino-f4-wide-rows", 16, 6, 75, 20, 3, (1, 1), (1, 0, 1, 2), (1, 1), 1),  # 8-tile vector gathers
]
CONST_CASES = [_const_conv_case(n, "float32", C, Hh, W, O, k, s, p, d, g, epi)
               for (n, C, Hh, W, O, k, s, p, d, g) in CONST_SHAPES
               for epi in ("conv2d_bias", "conv2d_bias_relu", "conv2d_bias_add_relu")]
CONST_HALF = [_const_conv_case(n, dt, C, Hh, W, O, k, s, p, d, g, "conv2d_bias_add_relu")
              for dt in ("float16", "bfloat16")
              for (n, C, Hh, W, O, k, s, p, d, g) in (CONST_SHAPES[1], CONST_SHAPES[9])]
BATCHES.append(Batch("conv_const", CONST_CASES + CONST_HALF, B_DIM, B_RUNS))
# Prepacked paths (F(4x4), F(2x2), GEMM panels) with a dynamic height as well as batch.
CONST_DYN_H = [_const_conv_case(n, "float32", C, "H", W, O, k, s, p, d, g, "conv2d_bias_relu")
               for (n, C, _, W, O, k, s, p, d, g) in (CONST_SHAPES[1], CONST_SHAPES[6], CONST_SHAPES[9],
                                                      CONST_SHAPES[10])]
BATCHES.append(Batch("conv_const_dyn_h", CONST_DYN_H, HW_DIM, HW_RUNS))


@pytest.mark.parametrize("batch,case,ri", H.params(BATCHES[-2:]))
def test_conv_const_compiled(batch, case, ri, tmp_path_factory):
    H.check(batch, case, ri, "compiled", tmp_path_factory)


@pytest.mark.parametrize("mode", ["0", "2"])
def test_conv_const_forced_paths(mode):
    """The constant-weight cases again with DINOML_CONV_WINOGRAD=0 (GEMM panels everywhere) and =2
    (F(2x2, 3x3) instead of F(4x4)); the runtime sets the kernel knob from the variable when it loads
    a module (include/dinoml/kernel_knobs.h), hence a fresh process."""
    import os
    import subprocess
    import sys
    if os.environ.get("DINOML_CONV_WINOGRAD"):
        pytest.skip("already running under a forced mode")
    env = dict(os.environ, DINOML_CONV_WINOGRAD=mode)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__, "-k",
                        "test_conv_const_compiled"], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
