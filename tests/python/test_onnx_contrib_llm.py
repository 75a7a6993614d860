"""ONNX Runtime's int4 LLM contrib operators (com.microsoft MatMulNBits and GroupQueryAttention), as
onnxruntime-genai's model builder, Olive and onnxruntime.quantization.matmul_nbits_quantizer write
them: one-node models built with onnx.helper and a tiny decoder quantized by ORT's own
MatMulNBitsQuantizer, compiled for the CPU with symbolic batch / sequence / past dims and compared
with ONNX Runtime at several sizes."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import dinoml as dml  # noqa: E402

MS = "com.microsoft"
RNG = np.random.default_rng(0)
RTOL, ATOL = 1e-4, 1e-5


def _save(tmp_path, nodes, inputs, outputs, inits, name, opset=17):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)])
    model.ir_version = 10
    p = tmp_path / f"{name}.onnx"
    p.write_bytes(model.SerializeToString())
    return str(p)


def _compile(path, tmp_path, dims=None):
    spec = dml.from_onnx(path, dims=dims)
    return dml.runtime.load(dml.compile(spec, target="cpu", out=str(tmp_path / "art")).path).create_session()


def _ort(path):
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"])


# ---- MatMulNBits ------------------------------------------------------------------------------------

def _pack(vals, bits):
    """Packs the last axis of uint values LSB first, `8 // bits` values a byte."""
    per = 8 // bits
    vals = vals.astype(np.uint8)
    pad = (-vals.shape[-1]) % per
    if pad:
        vals = np.concatenate([vals, np.zeros(vals.shape[:-1] + (pad,), np.uint8)], -1)
    v = vals.reshape(vals.shape[:-1] + (-1, per))
    out = np.zeros(v.shape[:-1], np.uint8)
    for i in range(per):
        out |= (v[..., i] << (i * bits)).astype(np.uint8)
    return out


def _quantize(w, bits, bs, zp_mode):
    """Block-wise quantization of w [N, K] along K: B [N, kb, blob], scales [N, kb], zero points
    (packed uint8, float, or None for the default 2^(bits-1)), and the reference dequantized w."""
    N, K = w.shape
    kb = -(-K // bs)
    wp = np.zeros((N, kb * bs), np.float32)
    wp[:, :K] = w
    blocks = wp.reshape(N, kb, bs)
    qmax = (1 << bits) - 1
    if zp_mode is None:
        scale = (np.abs(blocks).max(-1) / (1 << (bits - 1))).astype(np.float32) + np.float32(1e-3)
        zp = np.full((N, kb), 1 << (bits - 1), np.float32)
    else:
        lo, hi = np.minimum(blocks.min(-1), 0), np.maximum(blocks.max(-1), 0)
        scale = ((hi - lo) / qmax).astype(np.float32) + np.float32(1e-3)
        zp = np.clip(np.round(-lo / scale), 0, qmax).astype(np.float32)
        if zp_mode == "float":
            zp = zp + RNG.uniform(-0.4, 0.4, zp.shape).astype(np.float32)
    q = np.clip(np.round(blocks / scale[..., None] + zp[..., None]), 0, qmax).astype(np.uint8)
    B = _pack(q, bits)  # [N, kb, blob]
    deq = ((q.astype(np.float32) - zp[..., None]) * scale[..., None]).reshape(N, kb * bs)[:, :K]
    zp_t = None
    if zp_mode == "packed":
        zp_t = _pack(zp.astype(np.uint8), bits)  # [N, ceil(kb * bits / 8)]
    elif zp_mode == "float":
        zp_t = zp
    return B, scale, zp_t, deq


NBITS = {
    # name: (bits, K, N, block_size, zero points, bias, accuracy_level)
    "int4_zp": (4, 64, 48, 32, "packed", False, None),
    "int4_symmetric_bias": (4, 64, 40, 16, None, True, None),
    "int4_k_padded": (4, 72, 24, 32, "packed", False, None),
    "int4_odd_blocks_zp": (4, 96, 24, 32, "packed", True, 0),
    "int4_float_zp": (4, 64, 24, 32, "float", False, None),
    "int8_zp": (8, 64, 24, 32, "packed", True, None),
    "int2_zp": (2, 64, 24, 16, "packed", False, None),
}


@pytest.mark.parametrize("case", sorted(NBITS))
def test_matmul_nbits_matches_onnx_runtime(case, tmp_path):
    bits, K, N, bs, zp_mode, bias, acc = NBITS[case]
    w = RNG.standard_normal((N, K)).astype(np.float32)
    B, scale, zp, deq = _quantize(w, bits, bs, zp_mode)
    inits = [numpy_helper.from_array(B, "B"), numpy_helper.from_array(scale, "scales")]
    ins = ["A", "B", "scales"]
    if zp is not None:
        inits.append(numpy_helper.from_array(zp, "zp"))
        ins.append("zp")
    if bias:
        inits.append(numpy_helper.from_array(RNG.standard_normal(N).astype(np.float32), "bias"))
        ins += [""] * (5 - len(ins)) + ["bias"]
    attrs = dict(K=K, N=N, bits=bits, block_size=bs)
    if acc is not None:
        attrs["accuracy_level"] = acc
    node = helper.make_node("MatMulNBits", ins, ["Y"], domain=MS, **attrs)
    path = _save(tmp_path, [node], [helper.make_tensor_value_info("A", TensorProto.FLOAT, ["batch", "seq", K])],
                 [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], inits, case)
    sess = _compile(path, tmp_path, dims={"batch": (1, 4), "seq": (1, 16)})
    ref = _ort(path)
    for b, s in ((1, 1), (2, 7), (4, 16)):
        a = RNG.standard_normal((b, s, K)).astype(np.float32)
        want = ref.run(None, {"A": a})[0]
        got = sess.run_numpy({"A": a})["Y"]
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=f"{case} {b}x{s}")
        if zp_mode != "float":  # the test's own dequantization agrees (float zero points: ORT's rule)
            np.testing.assert_allclose(got - (np.float32(0) if not bias else numpy_helper.to_array(inits[-1])),
                                       a @ deq.T, rtol=RTOL, atol=1e-4)


def _nbits_error(tmp_path, name, node, inits, inputs=()):
    path = _save(tmp_path, [node], [helper.make_tensor_value_info("A", TensorProto.FLOAT, [2, 32]), *inputs],
                 [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], inits, name)
    with pytest.raises(dml.OnnxImportError) as e:
        dml.from_onnx(path)
    return str(e.value)


def test_matmul_nbits_unsupported_variants_are_named(tmp_path):
    B, scale, zp, _ = _quantize(RNG.standard_normal((8, 32)).astype(np.float32), 4, 16, "packed")
    base = [numpy_helper.from_array(B, "B"), numpy_helper.from_array(scale, "scales")]
    act_order = np.array([(k * 7) % 2 for k in range(32)], np.int32)
    msg = _nbits_error(tmp_path, "gidx", helper.make_node("MatMulNBits", ["A", "B", "scales", "", "g_idx"], ["Y"],
                                                           name="q_proj", domain=MS, K=32, N=8, bits=4, block_size=16),
                       base + [numpy_helper.from_array(act_order, "g_idx")])
    assert "q_proj" in msg and "act-order" in msg
    msg = _nbits_error(tmp_path, "runtime_b", helper.make_node("MatMulNBits", ["A", "Bx", "scales"], ["Y"],
                                                                name="k_proj", domain=MS, K=32, N=8, bits=4,
                                                                block_size=16),
                       base[1:], [helper.make_tensor_value_info("Bx", TensorProto.UINT8, [8, 2, 8])])
    assert "k_proj" in msg and "must be an initializer" in msg
    msg = _nbits_error(tmp_path, "bits3", helper.make_node("MatMulNBits", ["A", "B", "scales"], ["Y"], name="v_proj",
                                                            domain=MS, K=32, N=8, bits=3, block_size=16), base)
    assert "v_proj" in msg and "bits = 3" in msg


def test_matmul_nbits_plain_g_idx_is_accepted(tmp_path):
    K, N, bs = 64, 16, 32
    B, scale, zp, deq = _quantize(RNG.standard_normal((N, K)).astype(np.float32), 4, bs, "packed")
    inits = [numpy_helper.from_array(B, "B"), numpy_helper.from_array(scale, "scales"), numpy_helper.from_array(zp, "zp"),
             numpy_helper.from_array((np.arange(K) // bs).astype(np.int32), "g_idx")]
    node = helper.make_node("MatMulNBits", ["A", "B", "scales", "zp", "g_idx"], ["Y"], domain=MS, K=K, N=N, bits=4,
                            block_size=bs)
    path = _save(tmp_path, [node], [helper.make_tensor_value_info("A", TensorProto.FLOAT, [3, K])],
                 [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], inits, "gidx_plain")
    a = RNG.standard_normal((3, K)).astype(np.float32)
    np.testing.assert_allclose(_compile(path, tmp_path).run_numpy({"A": a})["Y"], a @ deq.T, rtol=RTOL, atol=1e-4)


# ---- GroupQueryAttention ----------------------------------------------------------------------------

NQ, NKV, HD = 4, 2, 16  # hidden 64, 4 heads, 2 KV heads
MAXPOS = 64


def _gqa_model(tmp_path, name, past=True, packed=False, rotary=None, heads=(NQ, NKV, HD), **attrs):
    """One GroupQueryAttention node with symbolic batch / seq / past dims; rotary = (rotary_dim,
    interleaved) or None; heads = (num_heads, kv_num_heads, head_size)."""
    f = TensorProto.FLOAT
    NQ, NKV, HD = heads
    inputs, ins = [], []
    if packed:
        inputs.append(helper.make_tensor_value_info("qkv", f, ["batch", "seq", (NQ + 2 * NKV) * HD]))
        ins += ["qkv", "", ""]
    else:
        inputs += [helper.make_tensor_value_info("query", f, ["batch", "seq", NQ * HD]),
                   helper.make_tensor_value_info("key", f, ["batch", "seq", NKV * HD]),
                   helper.make_tensor_value_info("value", f, ["batch", "seq", NKV * HD])]
        ins += ["query", "key", "value"]
    if past:
        inputs += [helper.make_tensor_value_info(n, f, ["batch", NKV, "past", HD]) for n in ("past_key", "past_value")]
        ins += ["past_key", "past_value"]
    else:
        ins += ["", ""]
    inputs += [helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, ["batch"]),
               helper.make_tensor_value_info("total_sequence_length", TensorProto.INT32, [])]
    ins += ["seqlens_k", "total_sequence_length"]
    inits = []
    if rotary:
        rd, inter = rotary
        theta = np.arange(MAXPOS)[:, None] * (10000.0 ** (-np.arange(rd // 2) / (rd // 2)))[None, :]
        inits = [numpy_helper.from_array(np.cos(theta).astype(np.float32), "cos_cache"),
                 numpy_helper.from_array(np.sin(theta).astype(np.float32), "sin_cache")]
        ins += ["cos_cache", "sin_cache"]
        attrs.update(do_rotary=1, rotary_interleaved=inter)
    outs = ["output", "present_key", "present_value"]
    node = helper.make_node("GroupQueryAttention", ins, outs, name="attn", domain=MS, num_heads=NQ,
                            kv_num_heads=NKV, **attrs)
    ys = [helper.make_tensor_value_info(o, f, None) for o in outs]
    return _save(tmp_path, [node], inputs, ys, inits, name)


def _gqa_feed(b, s, p, seqlens, packed, past=True, heads=(NQ, NKV, HD)):
    NQ, NKV, HD = heads
    feed = {}
    if packed:
        feed["qkv"] = RNG.standard_normal((b, s, (NQ + 2 * NKV) * HD)).astype(np.float32)
    else:
        feed["query"] = RNG.standard_normal((b, s, NQ * HD)).astype(np.float32)
        feed["key"] = RNG.standard_normal((b, s, NKV * HD)).astype(np.float32)
        feed["value"] = RNG.standard_normal((b, s, NKV * HD)).astype(np.float32)
    if past:
        feed["past_key"] = RNG.standard_normal((b, NKV, p, HD)).astype(np.float32)
        feed["past_value"] = RNG.standard_normal((b, NKV, p, HD)).astype(np.float32)
    feed["seqlens_k"] = np.asarray(seqlens, np.int32) - 1
    feed["total_sequence_length"] = np.asarray(max(seqlens) if not past else p + s, np.int32)
    return feed


def _compare_gqa(got, want, seqlens, s, what):
    """Rows ORT specifies: output rows s < Q_b, present rows j < T_b (T_b = seqlens_k[b] + 1)."""
    out, pk, pv = want
    for b, t in enumerate(seqlens):
        q = min(s, t)
        np.testing.assert_allclose(got["output"][b, :q], out[b, :q], rtol=RTOL, atol=ATOL, err_msg=f"{what} out b{b}")
        for name, ref in (("present_key", pk), ("present_value", pv)):
            assert got[name].shape == ref.shape, (what, name, got[name].shape, ref.shape)
            np.testing.assert_allclose(got[name][b, :, :t], ref[b, :, :t], rtol=RTOL, atol=ATOL,
                                       err_msg=f"{what} {name} b{b}")


GQA = {
    # name: (model kwargs)
    "plain": {},
    "rotary": dict(rotary=(HD, 0)),
    "rotary_interleaved": dict(rotary=(HD, 1)),
    "rotary_partial_heads_2_1": dict(rotary=(16, 0), heads=(2, 1, 32)),
    "packed_qkv_rotary": dict(packed=True, rotary=(HD, 1)),
    "local_window": dict(local_window_size=3, rotary=(HD, 0)),
    "softcap_scale": dict(softcap=2.0, scale=0.4),
    "bidirectional": dict(causal=0, rotary=(HD, 0)),
}
# (batch, new tokens, past rows, total tokens per batch entry after the step)
STEPS = [(1, 5, 3, [8]), (1, 1, 9, [10]), (1, 11, 2, [13]), (3, 1, 6, [7, 4, 5])]


@pytest.mark.parametrize("case", sorted(GQA))
def test_group_query_attention_matches_onnx_runtime(case, tmp_path):
    kw = GQA[case]
    path = _gqa_model(tmp_path, case, **kw)
    sess = _compile(path, tmp_path, dims={"batch": (1, 4), "seq": (1, 16), "past": (1, 32)})
    ref = _ort(path)
    for b, s, p, seqlens in STEPS:
        feed = _gqa_feed(b, s, p, seqlens, kw.get("packed", False), heads=kw.get("heads", (NQ, NKV, HD)))
        _compare_gqa(sess.run_numpy(feed), ref.run(None, feed), seqlens, s, f"{case} b{b} s{s} p{p}")


def test_group_query_attention_prompt_without_past_right_padded(tmp_path):
    """The first prompt of a right-padded batch (no past inputs): entry b has seqlens_k[b] + 1 real tokens."""
    path = _gqa_model(tmp_path, "prompt", past=False, rotary=(HD, 0))
    sess = _compile(path, tmp_path, dims={"batch": (1, 4), "seq": (1, 16)})
    ref = _ort(path)
    for b, s, seqlens in ((1, 6, [6]), (3, 7, [7, 3, 5])):
        feed = _gqa_feed(b, s, 0, seqlens, False, past=False)
        _compare_gqa(sess.run_numpy(feed), ref.run(None, feed), seqlens, s, f"prompt b{b} s{s}")


def test_group_query_attention_unsupported_inputs_are_named(tmp_path):
    f = TensorProto.FLOAT
    node = helper.make_node("GroupQueryAttention", ["q", "k", "v", "", "", "sl", "tot", "", "", "", "bias"], ["o"],
                            name="layers.0.attn", domain=MS, num_heads=NQ, kv_num_heads=NKV)
    inputs = [helper.make_tensor_value_info("q", f, [1, 3, NQ * HD]),
              helper.make_tensor_value_info("k", f, [1, 3, NKV * HD]),
              helper.make_tensor_value_info("v", f, [1, 3, NKV * HD]),
              helper.make_tensor_value_info("sl", TensorProto.INT32, [1]),
              helper.make_tensor_value_info("tot", TensorProto.INT32, []),
              helper.make_tensor_value_info("bias", f, [1, 1, 3, 3])]
    path = _save(tmp_path, [node], inputs, [helper.make_tensor_value_info("o", f, None)], [], "gqa_bias")
    with pytest.raises(dml.OnnxImportError, match=r"layers\.0\.attn.*attention_bias"):
        dml.from_onnx(path)
