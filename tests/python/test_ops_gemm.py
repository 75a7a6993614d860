"""Parity of the GEMM family (docs/ops.md "GEMM family") on the CPU target.

Every gemm_{rcr,rrr} x 10 epilogues runs with a dynamic M (several sizes across its buckets) in
float32 / float16 / bfloat16, plus odd static shapes and folded leading dims; bmm_{rrr,rcr} with
batch broadcasting.  Oracle: float64 NumPy matmul; PyTorch (F.linear + activation) as a second
oracle.  One artifact per dtype (see op_harness for why).
"""
import numpy as np
import pytest

import op_harness as H
from op_harness import Batch, Case, Gen, Inp

# M is dynamic: buckets (.., 8], (8, 32], (32, 64]; the runs hit both edges of the buckets.
M_DIM = {"M": dict(min=1, max=64, typical=16, buckets=[8, 32, 64])}
M_RUNS = [{"M": m} for m in (1, 8, 13, 33, 64)]

K, N = 64, 24
A_GEN = Gen(-1.0, 1.0)
B_GEN = Gen(-0.25, 0.25)  # keeps |a·b| ~ 1 for K = 64 so fp16/bf16 tolerances mean something
BIAS_GEN = Gen(-1.0, 1.0)


def _torch_f():
    import torch.nn.functional as F
    return F


# epilogue suffix -> (has bias, has residual d, numpy activation, torch activation)
EPILOGUES = {
    "": (False, False, None, None),
    "_bias": (True, False, None, None),
    "_bias_relu": (True, False, lambda y: np.maximum(y, 0.0), lambda y: _torch_f().relu(y)),
    "_bias_gelu": (True, False, H.np_gelu, lambda y: _torch_f().gelu(y)),
    "_bias_fast_gelu": (True, False, H.np_fast_gelu, lambda y: _torch_f().gelu(y, approximate="tanh")),
    "_bias_swish": (True, False, H.np_silu, lambda y: _torch_f().silu(y)),
    "_bias_sigmoid": (True, False, H.np_sigmoid, lambda y: y.sigmoid()),
    "_bias_tanh": (True, False, np.tanh, lambda y: y.tanh()),
    "_bias_add": (True, True, None, None),
    "_bias_add_relu": (True, True, lambda y: np.maximum(y, 0.0), lambda y: _torch_f().relu(y)),
}


def _gemm_case(layout, epi, dtype, m, k, n, lead=(), cid=None, tol=None):
    has_bias, has_d, act_np, act_torch = EPILOGUES[epi]
    op = f"gemm_{layout}{epi}"
    b_shape = (n, k) if layout == "rcr" else (k, n)
    inputs = {"a": Inp(tuple(lead) + (m, k), dtype, A_GEN), "b": Inp(b_shape, dtype, B_GEN)}
    if has_bias:
        inputs["bias"] = Inp((n,), dtype, BIAS_GEN)
    if has_d:
        inputs["d"] = Inp(tuple(lead) + (m, n), dtype, BIAS_GEN)
    names = list(inputs)

    def build(ops, t):
        return getattr(ops, op)(*[t[nm] for nm in names])

    def oracle(x):
        bm = x["b"].T if layout == "rcr" else x["b"]
        y = x["a"] @ bm
        if has_bias:
            y = y + x["bias"]
        if has_d:
            y = y + x["d"]
        return act_np(y) if act_np else y

    def torch_oracle(x):
        import torch
        bm = x["b"].t() if layout == "rcr" else x["b"]
        y = torch.matmul(x["a"], bm)
        if has_bias:
            y = y + x["bias"]
        if has_d:
            y = y + x["d"]
        return act_torch(y) if act_torch else y

    if tol is None and dtype == "float32":
        tol = (1e-4, 1e-4) if k >= 64 else (1e-5, 1e-5)
    return Case(cid or f"{op}-{dtype}", inputs, build, oracle, dtype, tol=tol, torch=torch_oracle)


def _bmm_case(layout, dtype, a_shape, b_shape, cid):
    op = f"bmm_{layout}"
    inputs = {"a": Inp(a_shape, dtype, A_GEN), "b": Inp(b_shape, dtype, Gen(-0.5, 0.5))}

    def build(ops, t):
        return getattr(ops, op)(t["a"], t["b"])

    def oracle(x):
        bm = np.swapaxes(x["b"], -1, -2) if layout == "rcr" else x["b"]
        return np.matmul(x["a"], bm)

    def torch_oracle(x):
        import torch
        bm = x["b"].transpose(-1, -2) if layout == "rcr" else x["b"]
        return torch.matmul(x["a"], bm)

    return Case(f"{op}-{cid}-{dtype}", inputs, build, oracle, dtype, torch=torch_oracle)


def gemm_batch(dtype: str) -> Batch:
    cases = []
    for layout in ("rcr", "rrr"):
        for epi in EPILOGUES:
            cases.append(_gemm_case(layout, epi, dtype, "M", K, N))
        # Odd static sizes (no multiple of any vector width) and folded leading dims.
        cases.append(_gemm_case(layout, "_bias_add_relu", dtype, 3, 7, 5,
                                cid=f"gemm_{layout}_bias_add_relu-m3k7n5-{dtype}"))
        cases.append(_gemm_case(layout, "", dtype, 1, 1, 1, cid=f"gemm_{layout}-m1k1n1-{dtype}"))
        cases.append(_gemm_case(layout, "_bias", dtype, "M", 33, 17, lead=(2,),
                                cid=f"gemm_{layout}_bias-lead2xM-k33n17-{dtype}"))
        cases.append(_gemm_case(layout, "_bias_add", dtype, 4, K, N, lead=(2, 3),
                                cid=f"gemm_{layout}_bias_add-lead2x3-{dtype}"))
        # Large enough for the blocked / multi-threaded paths, with ragged edges in every dim.
        cases.append(_gemm_case(layout, "_bias_gelu", dtype, "M", 300, 70, cid=f"gemm_{layout}_bias_gelu-k300n70-{dtype}"))
        # bmm: same layout letter family, with the batch dims broadcasting both ways.
        cases.append(_bmm_case(layout, dtype, (4, "M", 16), (4, 16, 12) if layout == "rrr" else (4, 12, 16),
                               "b4-dynM"))
        cases.append(_bmm_case(layout, dtype, (2, 3, 5, 16), (3, 16, 7) if layout == "rrr" else (3, 7, 16),
                               "a2x3-b3"))
        cases.append(_bmm_case(layout, dtype, (1, 5, 9), (4, 9, 6) if layout == "rrr" else (4, 6, 9),
                               "a1-b4"))
        cases.append(_bmm_case(layout, dtype, (3, 1, 5, 9), (1, 2, 9, 6) if layout == "rrr" else (1, 2, 6, 9),
                               "a3x1-b1x2"))
    return Batch(f"gemm-{dtype}", cases, dims=M_DIM, runs=M_RUNS)


BATCHES = [gemm_batch(dt) for dt in H.FLOAT_DTYPES]

# Known failures: case id (or 'id@M=..') -> reason; see KNOWN_FAILURES.md.
XFAIL = {}


@pytest.mark.parametrize("batch,case,run", H.params(BATCHES, XFAIL))
def test_gemm_parity(batch, case, run, tmp_path_factory):
    H.check(batch, case, run, "compiled", tmp_path_factory)


# ---- trace-time errors: they must name the op and the offending extents -----------------------

def test_gemm_k_mismatch_is_a_trace_error():
    with pytest.raises(Exception) as ei:
        H.api_trace(lambda ops, t: ops.output(ops.gemm_rcr(t["a"], t["b"]), "y"),
                    {"a": ((4, 8), "float32"), "b": ((5, 7), "float32")})
    msg = str(ei.value)
    assert "gemm_rcr" in msg and "8" in msg and "7" in msg, msg


def test_gemm_bias_size_mismatch_is_a_trace_error():
    with pytest.raises(Exception) as ei:
        H.api_trace(lambda ops, t: ops.output(ops.gemm_rrr_bias(t["a"], t["b"], t["bias"]), "y"),
                    {"a": ((4, 8), "float32"), "b": ((8, 6), "float32"), "bias": ((5,), "float32")})
    msg = str(ei.value)
    assert "gemm_rrr_bias" in msg and "5" in msg and "6" in msg, msg


def test_bmm_batch_mismatch_is_a_trace_error():
    with pytest.raises(Exception) as ei:
        H.api_trace(lambda ops, t: ops.output(ops.bmm_rrr(t["a"], t["b"]), "y"),
                    {"a": ((3, 4, 8), "float32"), "b": ((2, 8, 6), "float32")})
    msg = str(ei.value)
    assert "bmm_rrr" in msg, msg


def test_gemm_rejects_int_inputs():
    with pytest.raises(Exception) as ei:
        H.api_trace(lambda ops, t: ops.output(ops.gemm_rcr(t["a"], t["b"]), "y"),
                    {"a": ((4, 8), "int32"), "b": ((6, 8), "int32")})
    assert "gemm_rcr" in str(ei.value), str(ei.value)

