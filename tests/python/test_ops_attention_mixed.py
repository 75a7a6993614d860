"""The mixed form of scaled_dot_product_attention (docs/ops.md "Attention"): float32 q (and mask,
output) with float16 / bfloat16 k and v, a low-precision KV cache. Compiled CPU kernel and the
reference interpreter against float64 NumPy on the rounded k/v values (so float32 tolerances hold):
key/query tails, one decode row over several key blocks, causal, bool / additive / broadcast masks,
a grouped-query decoder layout ([n_kv, T·group, hd] rows against an [n_kv, ctx, hd] cache with a
cache mask that hides whole key blocks), strided q/k/v/output views (stride_attention_operands), and
the dtype rule's errors (the CUDA lowering's refusal: tests/cpp/cuda/test_cuda_artifact.cpp).
"""
import json

import numpy as np
import pytest

import dinoml as dml
import op_harness as H
from op_harness import Batch
from test_ops_attention import SHARED_SHAPES, np_sdpa, sdpa_case, sdpa_trace_error

B_DIM = {"B": dict(min=1, max=3, typical=2, buckets=[1, 3])}
B_RUNS = [{"B": b} for b in (1, 3)]
KV_DTYPES = ("float16", "bfloat16")


def _case(tag, kv, *args, **kw):
    return sdpa_case(f"sdpa-mixed-{tag}-{kv}", "float32", *args, kv_dtype=kv, **kw)


def mixed_batch(kv):
    cases = [_case(tag, kv, *dims, **kw) for tag, *dims, kw in SHARED_SHAPES] + [
        _case("fullmask", kv, 6, 20, 24, 8, mask=(("B", 2, 6, 20), "float"), scale=0.3),
        # GQA decoder layout: 4 kv heads, group 3, T = 2 tokens -> 6 query rows per kv head.
        _case("gqa", kv, 6, 200, 64, 64, heads=(4,), mask=((6, 200), "bool")),
    ]
    return Batch(f"attention-mixed-{kv}", cases, dims=B_DIM, runs=B_RUNS)


BATCHES = [mixed_batch(kv) for kv in KV_DTYPES]


@pytest.mark.parametrize("batch,case,run", H.params(BATCHES))
def test_mixed_attention_parity(batch, case, run, tmp_path_factory):
    H.check(batch, case, run, "compiled", tmp_path_factory)


@pytest.mark.parametrize("batch,case,run", H.params(BATCHES))
def test_mixed_attention_reference_interpreter(batch, case, run, tmp_path_factory):
    H.check(batch, case, run, "reference", tmp_path_factory)


def _round(a, kv):
    return a.astype(np.float16).astype(np.float64) if kv == "float16" else \
        (a.astype(np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32).astype(np.float64)


@pytest.mark.parametrize("kv", KV_DTYPES)
def test_decoder_cache_layout(kv, tmp_path):
    """The GGUF decoder's attention: q [n_kv, T·group, hd] float32 against a [n_kv, ctx, hd] cache,
    the mask key_position <= query_position hiding the unfilled blocks; against float64 NumPy on
    the cache's values, and against the float32 kernel on the same (widened) values."""
    nkv, group, T, hd, ctx = 2, 7, 3, 64, 320
    spec = dml.trace(lambda q, k, v, m: dml.ops.scaled_dot_product_attention(q, k, v, m),
                     inputs={"q": dml.TensorSpec([nkv, T * group, hd], "float32"),
                             "k": dml.TensorSpec([nkv, ctx, hd], kv), "v": dml.TensorSpec([nkv, ctx, hd], kv),
                             "m": dml.TensorSpec([T * group, ctx], "bool")}, name="kv_mixed")
    art = dml.compile(spec, target="cpu", out=str(tmp_path / "art"))
    sel = [e.get("selected") for e in art.kernel_manifest if e.get("op") == "scaled_dot_product_attention"]
    assert sel == ["dml_cpu_sdpa_mixed.streamed"], sel
    spec32 = dml.trace(lambda q, k, v, m: dml.ops.scaled_dot_product_attention(q, k, v, m),
                       inputs={"q": dml.TensorSpec([nkv, T * group, hd], "float32"),
                               "k": dml.TensorSpec([nkv, ctx, hd], "float32"),
                               "v": dml.TensorSpec([nkv, ctx, hd], "float32"),
                               "m": dml.TensorSpec([T * group, ctx], "bool")}, name="kv_f32")
    s16 = dml.runtime.load(art.path).create_session()
    s32 = dml.runtime.load(dml.compile(spec32, target="cpu", out=str(tmp_path / "art32")).path).create_session()
    rng = np.random.default_rng(3)
    q = rng.standard_normal((nkv, T * group, hd)).astype(np.float32)
    k64 = _round(rng.standard_normal((nkv, ctx, hd)), kv)
    v64 = _round(rng.standard_normal((nkv, ctx, hd)), kv)
    if kv == "float16":
        k, v = k64.astype(np.float16), v64.astype(np.float16)
    else:  # bfloat16 goes in as float32 values that bf16 holds exactly
        k, v = k64.astype(np.float32), v64.astype(np.float32)
    for pos0 in (0, 63, 130, ctx - T):
        pos = np.repeat(np.arange(pos0, pos0 + T), group)
        m = np.arange(ctx)[None, :] <= pos[:, None]
        y = s16.run({"q": q, "k": k, "v": v, "m": m})["output"]
        np.testing.assert_allclose(y, np_sdpa(q.astype(np.float64), k64, v64, m), rtol=1e-4, atol=1e-5,
                                   err_msg=f"positions from {pos0}")
        # Same arithmetic as the float32 kernel once k/v are widened: identical results.
        y32 = s32.run({"q": q, "k": k64.astype(np.float32), "v": v64.astype(np.float32), "m": m})["output"]
        np.testing.assert_array_equal(y, y32, err_msg=f"positions from {pos0}")


def test_strided_operands(tmp_path):
    """stride_attention_operands turns the head permutes into views: the mixed kernel reads a
    float32 q and float16 k/v through strides."""
    B, S, Hh, D = 2, 70, 3, 16

    def f(x, kx, vx):
        q = dml.ops.permute(x * np.float32(2.0), dims=[0, 2, 1, 3])
        k = dml.ops.permute(dml.ops.cast(kx, "float16"), dims=[0, 2, 1, 3])
        v = dml.ops.permute(dml.ops.cast(vx, "float16"), dims=[0, 2, 1, 3])
        return dml.ops.permute(dml.ops.scaled_dot_product_attention(q, k, v, causal=True), dims=[0, 2, 1, 3])

    spec = dml.trace(f, inputs={n: dml.TensorSpec([B, S, Hh, D], "float32") for n in ("x", "kx", "vx")},
                     name="strided_mixed")
    art = dml.compile(spec, target="cpu", out=str(tmp_path / "art"))
    ops = [(e.get("op"), e.get("selected")) for e in art.kernel_manifest]
    assert ("scaled_dot_product_attention", "dml_cpu_sdpa_strided_mixed.streamed") in ops, ops
    # q/k/v heads read in place (the output permute is the graph output's and stays a copy).
    assert [sel for op, sel in ops if op == "permute"][:3] == ["alias"] * 3, ops
    rng = np.random.default_rng(5)
    x, kx, vx = (rng.standard_normal((B, S, Hh, D)).astype(np.float32) for _ in range(3))
    y = dml.runtime.load(art.path).create_session().run({"x": x, "kx": kx, "vx": vx})["output"]
    t = lambda a: np.transpose(a, (0, 2, 1, 3)).astype(np.float64)  # noqa: E731
    want = np.transpose(np_sdpa(t(2 * x), t(kx.astype(np.float16)), t(vx.astype(np.float16)), causal=True),
                        (0, 2, 1, 3))
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("q,k,v", [("float16", "float32", "float32"), ("float32", "float16", "bfloat16"),
                                   ("float32", "float16", "float32"), ("bfloat16", "float16", "float16")])
def test_other_dtype_mixes_are_rejected(q, k, v):
    msg = sdpa_trace_error({"q": ((2, 4, 8), q), "k": ((2, 5, 8), k), "v": ((2, 5, 8), v)})
    assert "scaled_dot_product_attention" in msg and "q float32 with k and v both float16" in msg, msg


def test_float_mask_has_q_dtype():
    msg = sdpa_trace_error({"q": ((2, 4, 8), "float32"), "k": ((2, 5, 8), "float16"), "v": ((2, 5, 8), "float16"),
                            "m": ((4, 5), "float16")})
    assert "mask" in msg and "float32" in msg, msg
