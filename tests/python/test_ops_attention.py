"""Parity of scaled_dot_product_attention (docs/ops.md "Attention"): batch/head dims (dynamic B),
query/key lengths that cross the kernel's 32-row and 64-key blocks and their tails, head dims
that are not multiples of 16, causal masking (Lq == Lk and Lq != Lk), bool and additive masks
with broadcasting, an explicit scale, float32/16/bf16.  Oracle: float64 NumPy (softmax of the
full score matrix).  Plus: a long sequence (4096 × 4096) runs with no score buffer in the arena.
"""
import numpy as np
import pytest

import dinoml as dml
import op_harness as H
from op_harness import Batch, Case, Gen, Inp

B_DIM = {"B": dict(min=1, max=3, typical=2, buckets=[1, 3])}
B_RUNS = [{"B": b} for b in (1, 2, 3)]


def np_sdpa(q, k, v, mask=None, causal=False, scale=None):
    d = q.shape[-1]
    s = (q @ np.swapaxes(k, -1, -2)) * (1.0 / np.sqrt(d) if scale is None else scale)
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == np.bool_ else s + mask
    if causal:
        lq, lk = s.shape[-2:]
        s = np.where(np.tril(np.ones((lq, lk), dtype=bool)), s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def sdpa_case(name, dtype, lq, lk, d, dv, heads=(2,), mask=None, causal=False, scale=None, kv_dtype=None):
    """One attention case over [B, *heads, L, D]: q, a float mask and the output of `dtype`, k and v
    of `kv_dtype` (default: `dtype`; float16 / bfloat16 with float32 q is the mixed form)."""
    kv_dtype = kv_dtype or dtype
    lead = ("B",) + tuple(heads)
    inputs = {"q": Inp(lead + (lq, d), dtype, Gen(-1, 1)), "k": Inp(lead + (lk, d), kv_dtype, Gen(-1, 1)),
              "v": Inp(lead + (lk, dv), kv_dtype, Gen(-1, 1))}
    if mask is not None:
        mshape, mdtype = mask
        inputs["m"] = Inp(mshape, dtype if mdtype == "float" else "bool", Gen(-2, 0) if mdtype == "float" else H.U)
    kw = {}
    if causal:
        kw["causal"] = True
    if scale is not None:
        kw["scale"] = scale

    def build(ops, t):
        args = [t["q"], t["k"], t["v"]] + ([t["m"]] if "m" in t else [])
        return ops.scaled_dot_product_attention(*args, **kw)

    def oracle(x):
        return np_sdpa(x["q"], x["k"], x["v"], x.get("m"), causal, scale)

    tol = (2e-5, 2e-5) if dtype == "float32" else None
    return Case(name, inputs, build, oracle, dtype, tol=tol)


def _case(tag, dtype, *args, **kw):
    return sdpa_case(f"sdpa-{tag}-{dtype}", dtype, *args, **kw)


# The shapes both the float forms and the mixed form (test_ops_attention_mixed.py) run:
# (tag, Lq, Lk, D, Dv, options).
SHARED_SHAPES = [
    ("small", 5, 7, 8, 8, {}),
    ("tails", 33, 70, 12, 20, {}),         # 2 query blocks, 2 key blocks, odd head dims
    ("decode", 1, 130, 64, 64, {}),        # one query row, 3 key blocks
    ("causal", 70, 70, 16, 16, dict(causal=True)),
    ("rank3", 9, 11, 8, 8, dict(heads=())),
    ("boolmask", 6, 40, 8, 8, dict(mask=((6, 40), "bool"))),
    ("padmask", 6, 67, 8, 8, dict(mask=(("B", 1, 1, 67), "float"))),
]


def attention_batch(dtype):
    cases = [_case(tag, dtype, *dims, **kw) for tag, *dims, kw in SHARED_SHAPES] + [
        _case("causal-rect", dtype, 40, 90, 16, 8, causal=True),  # top-left aligned, Lq < Lk
        _case("fullmask", dtype, 6, 20, 8, 8, mask=(("B", 2, 6, 20), "float"), scale=0.3),
        _case("causal+mask", dtype, 35, 35, 8, 8, mask=((35, 35), "float"), causal=True),
    ]
    return Batch(f"attention-{dtype}", cases, dims=B_DIM, runs=B_RUNS)


BATCHES = [attention_batch(dt) for dt in H.FLOAT_DTYPES]
XFAIL = {}


@pytest.mark.parametrize("batch,case,run", H.params(BATCHES, XFAIL))
def test_attention_parity(batch, case, run, tmp_path_factory):
    H.check(batch, case, run, "compiled", tmp_path_factory)


@pytest.mark.parametrize("batch,case,run", H.params(BATCHES[:1], XFAIL))
def test_attention_reference_interpreter(batch, case, run, tmp_path_factory):
    H.check(batch, case, run, "reference", tmp_path_factory)


def test_long_sequence_streams_without_a_score_buffer(tmp_path):
    L, D = 4096, 64
    spec = dml.trace(lambda q, k, v: dml.ops.scaled_dot_product_attention(q, k, v, causal=True),
                     inputs={n: dml.TensorSpec([1, L, D], "float32") for n in "qkv"}, name="long_sdpa")
    art = dml.compile(spec, target="cpu", out=str(tmp_path / "art"))
    import json
    meta = json.loads((tmp_path / "art" / "metadata.json").read_text())
    # The only node writes the caller's output: nothing (in particular no L×L scores) is planned.
    assert all(b["arena_bytes"] == 0 for b in meta["memory_plan"]["buckets"]), meta["memory_plan"]
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, L, D)).astype(np.float32) for _ in range(3))
    y = dml.runtime.load(str(tmp_path / "art")).create_session().run({"q": q, "k": k, "v": v})["output"]
    rows = [0, 1, 63, 64, 2047, 4095]  # oracle on a few rows (the full L×L float64 matrix is 128 MiB)
    for i in rows:
        s = (q[0, i].astype(np.float64) @ k[0, : i + 1].T.astype(np.float64)) / np.sqrt(D)
        p = np.exp(s - s.max())
        want = (p / p.sum()) @ v[0, : i + 1].astype(np.float64)
        np.testing.assert_allclose(y[0, i], want, rtol=1e-4, atol=1e-5, err_msg=f"row {i}")
    del art


def sdpa_trace_error(inputs):
    """The message of the error that tracing scaled_dot_product_attention of `inputs` (q, k, v and
    optionally the mask m, each (shape, dtype)) raises."""
    def sdpa(ops, t):
        return ops.scaled_dot_product_attention(*[t[n] for n in ("q", "k", "v", "m") if n in t])
    with pytest.raises(Exception) as ei:
        H.api_trace(lambda ops, t: ops.output(sdpa(ops, t), "y"), inputs)
    return str(ei.value)


def test_head_dim_mismatch_is_named():
    msg = sdpa_trace_error({"q": ((2, 4, 8), "float32"), "k": ((2, 5, 7), "float32"), "v": ((2, 5, 8), "float32")})
    assert "scaled_dot_product_attention" in msg and "head dim" in msg, msg


def test_mask_must_broadcast_to_the_scores():
    msg = sdpa_trace_error({"q": ((2, 4, 8), "float32"), "k": ((2, 5, 8), "float32"), "v": ((2, 5, 8), "float32"),
                            "m": ((4, 6), "float32")})
    assert "mask" in msg and "broadcast" in msg, msg


def test_int_mask_is_rejected():
    msg = sdpa_trace_error({"q": ((2, 4, 8), "float32"), "k": ((2, 5, 8), "float32"), "v": ((2, 5, 8), "float32"),
                            "m": ((4, 5), "int32")})
    assert "mask" in msg and "bool" in msg, msg


def test_bool_mask_hiding_whole_key_blocks(tmp_path):
    """A decoder's cache mask: each query row sees keys up to its position, so key blocks past
    the filled part are hidden from every row (the CPU kernel skips them unread) while other rows
    of the same query block see part of a block; compared with NumPy in float64."""
    Lq, Lk, D = 5, 300, 16
    spec = dml.trace(lambda q, k, v, m: dml.ops.scaled_dot_product_attention(q, k, v, m),
                     inputs={"q": dml.TensorSpec([2, Lq, D], "float32"), "k": dml.TensorSpec([2, Lk, D], "float32"),
                             "v": dml.TensorSpec([2, Lk, D], "float32"), "m": dml.TensorSpec([Lq, Lk], "bool")},
                     name="cache_mask")
    sess = dml.runtime.load(dml.compile(spec, target="cpu", out=str(tmp_path / "art")).path).create_session()
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((2, Lq, D), (2, Lk, D), (2, Lk, D)))
    for positions in ([3, 4, 5, 6, 7], [60, 61, 62, 63, 64], [129, 130, 131, 132, 200]):
        m = np.arange(Lk)[None, :] <= np.array(positions)[:, None]
        y = sess.run({"q": q, "k": k, "v": v, "m": m})["output"]
        np.testing.assert_allclose(y, np_sdpa(q, k, v, m), rtol=1e-4, atol=1e-5, err_msg=str(positions))
