"""Parity of reductions, softmax and norms (docs/ops.md "Reductions, softmax, norms").

reduce_{sum,mean,max,min} over all / single / multiple / negative axes with and without keepdim,
argmax (ties: first wins), softmax/log_softmax on several axes (including the dynamic one),
layer_norm (affine or not, normalized_ndim 1 and 2), rms_norm, group_norm; float32/16/bf16 and
int32/int64 where the op allows.  Oracles: float64 NumPy, plus torch.nn.functional where torch
has the op (torch 1.13 has no rms_norm).
"""
import numpy as np
import pytest

import op_harness as H
from op_harness import Batch, Case, Gen, Inp

B_DIM = {"B": dict(min=1, max=8, typical=4, buckets=[2, 8])}
B_RUNS = [{"B": b} for b in (1, 3, 8)]

# Sums of up to a few hundred fp32 terms carry ~1e-6 relative rounding; norms divide by a
# computed standard deviation.  Both get a slightly wider fp32 absolute tolerance.
FP32_REDUCE_TOL = (1e-5, 1e-4)
FP32_NORM_TOL = (1e-4, 1e-4)


def _torch():
    import torch
    return torch


def _tol(dtype, fp32):
    return fp32 if dtype == "float32" else None


REDUCE_NP = {"reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_max": np.max, "reduce_min": np.min}


def _torch_reduce(op, x, axes, keepdim):
    t = _torch()
    dims = list(range(x.dim())) if axes is None else list(axes)
    if op == "reduce_sum":
        return t.sum(x, dim=dims, keepdim=keepdim)
    if op == "reduce_mean":
        return t.mean(x, dim=dims, keepdim=keepdim)
    return (t.amax if op == "reduce_max" else t.amin)(x, dim=dims, keepdim=keepdim)


# (tag, axes or None for "all", keepdim)
AXES_VARIANTS = [
    ("all", None, False),
    ("all-keep", None, True),
    ("ax1", [1], False),
    ("axm1-keep", [-1], True),
    ("ax0dyn", [0], False),
    ("ax02", [0, 2], False),
    ("axm1m3-keep", [-1, -3], True),
]


def _reduce_case(op, dtype, tag, axes, keepdim):
    kw = {} if axes is None else {"axes": axes}
    if keepdim:
        kw["keepdim"] = True
    gen = Gen(-50, 50) if dtype in H.INT_DTYPES else H.U
    f = REDUCE_NP[op]
    np_axes = None if axes is None else tuple(axes)
    torch_oracle = None
    if dtype in H.FLOAT_DTYPES:
        torch_oracle = lambda x: _torch_reduce(op, x["x"], axes, keepdim)  # noqa: E731
    return Case(f"{op}-{tag}-{dtype}", {"x": Inp(("B", 6, 10), dtype, gen)},
                lambda ops, t: getattr(ops, op)(t["x"], **kw),
                lambda x: f(x["x"], axis=np_axes, keepdims=keepdim), dtype,
                tol=_tol(dtype, FP32_REDUCE_TOL), torch=torch_oracle)


def _argmax_cases(dtype):
    # Integer data on a tiny range makes ties common: the first maximum must win (NumPy's rule).
    gen = Gen(-3, 3) if dtype in H.INT_DTYPES else Gen(-2, 2, grid=0.25)
    out = []
    for tag, axis, keep in (("ax1", 1, False), ("axm1-keep", -1, True), ("ax0dyn", 0, False)):
        def oracle(x, axis=axis, keep=keep):
            r = np.argmax(x["x"], axis=axis)
            return np.expand_dims(r, axis) if keep else r

        kw = dict(axis=axis, keepdim=True) if keep else dict(axis=axis)
        out.append(Case(f"argmax-{tag}-{dtype}", {"x": Inp(("B", 6, 10), dtype, gen)},
                        lambda ops, t, kw=kw: ops.argmax(t["x"], **kw), oracle, "int64"))
    return out


def _softmax_cases(dtype):
    out = []
    for op, f, tf in (("softmax", H.np_softmax, "softmax"), ("log_softmax", H.np_log_softmax, "log_softmax")):
        for tag, axis in (("default", None), ("ax1", 1), ("ax0dyn", 0), ("axm2", -2)):
            kw = {} if axis is None else {"axis": axis}
            ax = -1 if axis is None else axis
            out.append(Case(f"{op}-{tag}-{dtype}", {"x": Inp(("B", 5, 9), dtype, Gen(-4, 4))},
                            lambda ops, t, op=op, kw=kw: getattr(ops, op)(t["x"], **kw),
                            lambda x, f=f, ax=ax: f(x["x"], ax), dtype,
                            torch=lambda x, tf=tf, ax=ax: getattr(_torch().nn.functional, tf)(x["x"], dim=ax)))
    return out


def _np_layer_norm(x, nd, gamma=None, beta=None, eps=1e-5):
    axes = tuple(range(x.ndim - nd, x.ndim))
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y


def _layer_norm_cases(dtype):
    xs = Inp(("B", 6, 16), dtype, Gen(-3, 3))
    g1, g2 = Inp((16,), dtype, Gen(0.5, 1.5)), Inp((6, 16), dtype, Gen(0.5, 1.5))
    b1, b2 = Inp((16,), dtype), Inp((6, 16), dtype)
    F = lambda: _torch().nn.functional  # noqa: E731
    tol = _tol(dtype, FP32_NORM_TOL)
    return [
        Case(f"layer_norm-affine-{dtype}", {"x": xs, "g": g1, "b": b1},
             lambda ops, t: ops.layer_norm(t["x"], t["g"], t["b"]),
             lambda x: _np_layer_norm(x["x"], 1, x["g"], x["b"]), dtype, tol=tol,
             torch=lambda x: F().layer_norm(x["x"], (16,), x["g"], x["b"])),
        Case(f"layer_norm-plain-{dtype}", {"x": xs},
             lambda ops, t: ops.layer_norm(t["x"]),
             lambda x: _np_layer_norm(x["x"], 1), dtype, tol=tol,
             torch=lambda x: F().layer_norm(x["x"], (16,))),
        Case(f"layer_norm-affine-nd2-{dtype}", {"x": xs, "g": g2, "b": b2},
             lambda ops, t: ops.layer_norm(t["x"], t["g"], t["b"]),
             lambda x: _np_layer_norm(x["x"], 2, x["g"], x["b"]), dtype, tol=tol,
             torch=lambda x: F().layer_norm(x["x"], (6, 16), x["g"], x["b"])),
        Case(f"layer_norm-plain-nd2-{dtype}", {"x": xs},
             lambda ops, t: ops.layer_norm(t["x"], normalized_ndim=2),
             lambda x: _np_layer_norm(x["x"], 2), dtype, tol=tol,
             torch=lambda x: F().layer_norm(x["x"], (6, 16))),
        Case(f"layer_norm-gamma_only-eps-{dtype}", {"x": xs, "g": g1},
             lambda ops, t: ops.layer_norm(t["x"], t["g"], eps=1e-2),
             lambda x: _np_layer_norm(x["x"], 1, x["g"], eps=1e-2), dtype, tol=tol,
             torch=lambda x: F().layer_norm(x["x"], (16,), x["g"], eps=1e-2)),
    ]


def _np_rms_norm(x, w=None, eps=1e-6):
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y * w if w is not None else y


def _rms_norm_cases(dtype):
    xs = Inp(("B", 5, 12), dtype, Gen(-3, 3))
    tol = _tol(dtype, FP32_NORM_TOL)
    return [
        Case(f"rms_norm-weight-{dtype}", {"x": xs, "w": Inp((12,), dtype, Gen(0.5, 1.5))},
             lambda ops, t: ops.rms_norm(t["x"], t["w"]), lambda x: _np_rms_norm(x["x"], x["w"]), dtype, tol=tol),
        Case(f"rms_norm-plain-{dtype}", {"x": xs},
             lambda ops, t: ops.rms_norm(t["x"]), lambda x: _np_rms_norm(x["x"]), dtype, tol=tol),
        Case(f"rms_norm-eps-{dtype}", {"x": Inp((3, 4), dtype, Gen(-0.1, 0.1))},
             lambda ops, t: ops.rms_norm(t["x"], eps=1e-2), lambda x: _np_rms_norm(x["x"], eps=1e-2), dtype, tol=tol),
    ]


def _np_group_norm(x, groups, gamma=None, beta=None, eps=1e-5):
    n, c = x.shape[:2]
    xg = x.reshape(n, groups, -1)
    mu = xg.mean(axis=-1, keepdims=True)
    var = ((xg - mu) ** 2).mean(axis=-1, keepdims=True)
    y = ((xg - mu) / np.sqrt(var + eps)).reshape(x.shape)
    bshape = (1, c) + (1,) * (x.ndim - 2)
    if gamma is not None:
        y = y * gamma.reshape(bshape)
    if beta is not None:
        y = y + beta.reshape(bshape)
    return y


def _group_norm_cases(dtype):
    tol = _tol(dtype, FP32_NORM_TOL)
    F = lambda: _torch().nn.functional  # noqa: E731
    out = []
    for tag, shape, groups, affine in (("4d-g3-affine", ("B", 6, 5, 4), 3, True),
                                       ("4d-g2-plain", ("B", 6, 5, 4), 2, False),
                                       ("3d-g4-affine", (2, 8, 10), 4, True),
                                       ("3d-g8-affine", (2, 8, 3), 8, True),
                                       ("3d-g1-plain", ("B", 4, 7), 1, False)):
        c = shape[1]
        ins = {"x": Inp(shape, dtype, Gen(-3, 3))}
        if affine:
            ins["g"] = Inp((c,), dtype, Gen(0.5, 1.5))
            ins["b"] = Inp((c,), dtype)

        def build(ops, t, groups=groups, affine=affine):
            # The ops contract: inputs positional, attributes by keyword.
            args = (t["x"], t["g"], t["b"]) if affine else (t["x"],)
            return ops.group_norm(*args, num_groups=groups)

        def build_kw(ops, t, groups=groups):
            # The keyword spelling the front end also offers must mean the same.
            return ops.group_norm(t["x"], num_groups=groups, gamma=t["g"], beta=t["b"])

        oracle = lambda x, g=groups: _np_group_norm(x["x"], g, x.get("g"), x.get("b"))  # noqa: E731
        torch_oracle = lambda x, g=groups: F().group_norm(x["x"], g, x.get("g"), x.get("b"))  # noqa: E731
        out.append(Case(f"group_norm-{tag}-{dtype}", ins, build, oracle, dtype, tol=tol, torch=torch_oracle))
        if affine:
            out.append(Case(f"group_norm-{tag}-kw-{dtype}", ins, build_kw, oracle, dtype, tol=tol,
                            torch=torch_oracle))
    return out


def _long_row_cases(dtype):
    """Rows long enough for the vectorised / blocked paths of the row kernels."""
    tol = _tol(dtype, FP32_NORM_TOL)
    F = lambda: _torch().nn.functional  # noqa: E731
    return [
        Case(f"softmax-long-{dtype}", {"x": Inp(("B", 3, 1000), dtype, Gen(-6, 6))},
             lambda ops, t: ops.softmax(t["x"]), lambda x: H.np_softmax(x["x"], -1), dtype, tol=tol,
             torch=lambda x: F().softmax(x["x"], dim=-1)),
        Case(f"layer_norm-long-{dtype}", {"x": Inp(("B", 1031), dtype, Gen(-3, 3)), "g": Inp((1031,), dtype),
                                          "b": Inp((1031,), dtype)},
             lambda ops, t: ops.layer_norm(t["x"], t["g"], t["b"]),
             lambda x: _np_layer_norm(x["x"], 1, x["g"], x["b"]), dtype, tol=tol,
             torch=lambda x: F().layer_norm(x["x"], (1031,), x["g"], x["b"])),
        Case(f"rms_norm-long-{dtype}", {"x": Inp(("B", 2048), dtype, Gen(-3, 3)), "w": Inp((2048,), dtype)},
             lambda ops, t: ops.rms_norm(t["x"], t["w"]), lambda x: _np_rms_norm(x["x"], x["w"]), dtype, tol=tol),
        Case(f"reduce_sum-long-{dtype}", {"x": Inp(("B", 4099), dtype, Gen(0, 1))},
             lambda ops, t: ops.reduce_sum(t["x"], axes=[-1]), lambda x: x["x"].sum(axis=-1), dtype,
             tol=(1e-5, 1e-3) if dtype == "float32" else None),
    ]


def float_batch(dtype):
    cases = [_reduce_case(op, dtype, *v) for op in REDUCE_NP for v in AXES_VARIANTS]
    cases += _argmax_cases(dtype) + _softmax_cases(dtype)
    cases += _layer_norm_cases(dtype) + _rms_norm_cases(dtype) + _group_norm_cases(dtype)
    cases += _long_row_cases(dtype)
    return Batch(f"reduce_norm-{dtype}", cases, dims=B_DIM, runs=B_RUNS)


def int_batch(dtype):
    cases = [_reduce_case(op, dtype, *v) for op in ("reduce_sum", "reduce_max", "reduce_min") for v in AXES_VARIANTS]
    cases += _argmax_cases(dtype)
    return Batch(f"reduce_norm-{dtype}", cases, dims=B_DIM, runs=B_RUNS)


BATCHES = [float_batch(dt) for dt in H.FLOAT_DTYPES] + [int_batch(dt) for dt in ("int32", "int64")]

# Known failures: case id (or 'id@B=..') -> reason; see KNOWN_FAILURES.md.
XFAIL = {}


@pytest.mark.parametrize("batch,case,run", H.params(BATCHES, XFAIL))
def test_reduce_norm_parity(batch, case, run, tmp_path_factory):
    H.check(batch, case, run, "compiled", tmp_path_factory)


# ---- trace-time errors --------------------------------------------------------------------------

def _trace_error(fn, inputs):
    with pytest.raises(Exception) as ei:
        H.api_trace(lambda ops, t: ops.output(fn(ops, t), "y"), inputs)
    return str(ei.value)


def test_softmax_unknown_attribute():
    msg = _trace_error(lambda ops, t: ops.softmax(t["x"], axsi=1), {"x": ((2, 3), "float32")})
    assert "axsi" in msg and "softmax" in msg, msg


def test_argmax_requires_axis():
    msg = _trace_error(lambda ops, t: ops.argmax(t["x"]), {"x": ((2, 3), "float32")})
    assert "axis" in msg and "argmax" in msg, msg


def test_reduce_axis_out_of_range():
    msg = _trace_error(lambda ops, t: ops.reduce_sum(t["x"], axes=[3]), {"x": ((2, 3), "float32")})
    assert "reduce_sum" in msg and "3" in msg, msg


def test_reduce_mean_rejects_int():
    msg = _trace_error(lambda ops, t: ops.reduce_mean(t["x"]), {"x": ((2, 3), "int32")})
    assert "reduce_mean" in msg, msg


def test_layer_norm_gamma_shape_mismatch():
    msg = _trace_error(lambda ops, t: ops.layer_norm(t["x"], t["g"]),
                       {"x": ((2, 8), "float32"), "g": ((7,), "float32")})
    assert "layer_norm" in msg and "7" in msg, msg


def test_group_norm_channels_not_divisible():
    msg = _trace_error(lambda ops, t: ops.group_norm(t["x"], num_groups=4), {"x": ((2, 6, 3), "float32")})
    assert "group_norm" in msg and "4" in msg, msg
