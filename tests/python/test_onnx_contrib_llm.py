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


# ---- a tiny decoder as onnxruntime-genai's model builder writes it, int4 by ORT's own quantizer -------

V, HID, LAYERS, FF = 96, NQ * HD, 2, 128


def _decoder(tmp_path):
    """Embedding, per layer RMS norm → q/k/v MatMuls → GroupQueryAttention (rotary caches, seqlens_k
    and total_sequence_length computed from attention_mask as the model builder does) → o MatMul →
    residual → RMS norm → SwiGLU MLP → residual; final norm and lm_head; then every MatMul weight
    block-wise int4 by onnxruntime.quantization.matmul_nbits_quantizer.MatMulNBitsQuantizer."""
    f, rng = TensorProto.FLOAT, np.random.default_rng(1)
    nodes, inits = [], []

    def w(name, shape, scale=0.15):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def gamma(name):
        inits.append(numpy_helper.from_array((1 + 0.1 * rng.standard_normal(HID)).astype(np.float32), name))
        return name

    theta = np.arange(MAXPOS)[:, None] * (10000.0 ** (-np.arange(HD // 2) / (HD // 2)))[None, :]
    inits += [numpy_helper.from_array(np.cos(theta).astype(np.float32), "cos_cache"),
              numpy_helper.from_array(np.sin(theta).astype(np.float32), "sin_cache"),
              numpy_helper.from_array(np.array([1], np.int64), "axes1"),
              numpy_helper.from_array(np.array(1, np.int64), "one"),
              numpy_helper.from_array(np.array(1, np.int64), "idx1")]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch_size", "total_sequence_length"])]
    outputs = [helper.make_tensor_value_info("logits", f, ["batch_size", "sequence_length", V])]
    nodes += [helper.make_node("Gather", [w("embed", [V, HID], 0.5), "input_ids"], ["x0"]),
              helper.make_node("ReduceSum", ["attention_mask", "axes1"], ["mask_sum"], keepdims=0),
              helper.make_node("Sub", ["mask_sum", "one"], ["seqlens_i64"]),
              helper.make_node("Cast", ["seqlens_i64"], ["seqlens_k"], to=TensorProto.INT32),
              helper.make_node("Shape", ["attention_mask"], ["mask_shape"]),
              helper.make_node("Gather", ["mask_shape", "idx1"], ["total_i64"]),
              helper.make_node("Cast", ["total_i64"], ["total_seq_len"], to=TensorProto.INT32)]
    x = "x0"
    for i in range(LAYERS):
        L = f"layers.{i}"
        pk, pv = f"past_key_values.{i}.key", f"past_key_values.{i}.value"
        inputs += [helper.make_tensor_value_info(n, f, ["batch_size", NKV, "past_sequence_length", HD]) for n in (pk, pv)]
        outputs += [helper.make_tensor_value_info(n, f, ["batch_size", NKV, "total_sequence_length", HD])
                    for n in (f"present.{i}.key", f"present.{i}.value")]
        nodes += [helper.make_node("SimplifiedLayerNormalization", [x, gamma(f"{L}.ln1")], [f"{L}.h"], epsilon=1e-5),
                  helper.make_node("MatMul", [f"{L}.h", w(f"{L}.q.weight", [HID, NQ * HD])], [f"{L}.q"]),
                  helper.make_node("MatMul", [f"{L}.h", w(f"{L}.k.weight", [HID, NKV * HD])], [f"{L}.k"]),
                  helper.make_node("MatMul", [f"{L}.h", w(f"{L}.v.weight", [HID, NKV * HD])], [f"{L}.v"]),
                  helper.make_node("GroupQueryAttention", [f"{L}.q", f"{L}.k", f"{L}.v", pk, pv, "seqlens_k",
                                                           "total_seq_len", "cos_cache", "sin_cache"],
                                   [f"{L}.attn", f"present.{i}.key", f"present.{i}.value"], name=f"{L}.attn.GQA",
                                   domain=MS, num_heads=NQ, kv_num_heads=NKV, do_rotary=1),
                  helper.make_node("MatMul", [f"{L}.attn", w(f"{L}.o.weight", [NQ * HD, HID])], [f"{L}.o"]),
                  helper.make_node("Add", [x, f"{L}.o"], [f"{L}.r1"]),
                  helper.make_node("SimplifiedLayerNormalization", [f"{L}.r1", gamma(f"{L}.ln2")], [f"{L}.h2"],
                                   epsilon=1e-5),
                  helper.make_node("MatMul", [f"{L}.h2", w(f"{L}.gate.weight", [HID, FF])], [f"{L}.gate"]),
                  helper.make_node("MatMul", [f"{L}.h2", w(f"{L}.up.weight", [HID, FF])], [f"{L}.up"]),
                  helper.make_node("Sigmoid", [f"{L}.gate"], [f"{L}.sig"]),
                  helper.make_node("Mul", [f"{L}.gate", f"{L}.sig"], [f"{L}.silu"]),
                  helper.make_node("Mul", [f"{L}.silu", f"{L}.up"], [f"{L}.act"]),
                  helper.make_node("MatMul", [f"{L}.act", w(f"{L}.down.weight", [FF, HID])], [f"{L}.down"]),
                  helper.make_node("Add", [f"{L}.r1", f"{L}.down"], [f"{L}.out"])]
        x = f"{L}.out"
    nodes += [helper.make_node("SimplifiedLayerNormalization", [x, gamma("norm")], ["xn"], epsilon=1e-5),
              helper.make_node("MatMul", ["xn", w("lm_head.weight", [HID, V])], ["logits"])]
    graph = helper.make_graph(nodes, "tiny_decoder", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    model.ir_version = 10
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    q = MatMulNBitsQuantizer(model, bits=4, block_size=32, is_symmetric=False)
    q.process()
    path = str(tmp_path / "tiny_decoder_int4.onnx")
    onnx.save(q.model.model, path)
    return path


def test_tiny_int4_decoder_quantized_by_onnx_runtime_matches_it(tmp_path):
    path = _decoder(tmp_path)
    ops = [(n.domain, n.op_type) for n in onnx.load(path).graph.node]
    assert ops.count((MS, "MatMulNBits")) == 7 * LAYERS + 1 and ops.count((MS, "GroupQueryAttention")) == LAYERS, ops
    sess = _compile(path, tmp_path, dims={"batch_size": (1, 4), "sequence_length": (1, 16),
                                          "past_sequence_length": (1, 32), "total_sequence_length": (1, 48)})
    ref = _ort(path)
    names = [o.name for o in ref.get_outputs()]

    def past_of(outs, b=None):
        return {f"past_key_values.{i}.{kv}": outs[names.index(f"present.{i}.{kv}")] for i in range(LAYERS)
                for kv in ("key", "value")}

    def check(got, want, valid, what):
        np.testing.assert_allclose(got["logits"], want[0], rtol=RTOL, atol=1e-4, err_msg=f"{what} logits")
        for k, n in enumerate(names[1:], 1):
            for b, t in enumerate(valid):
                np.testing.assert_allclose(got[n][b, :, :t], want[k][b, :, :t], rtol=RTOL, atol=ATOL, err_msg=f"{what} {n}")

    # The first prompt: ORT with an empty past; DinoML (whose dims are >= 1) with one ignored past row
    # and an attention_mask with one trailing 0, so seqlens_k says no token was cached: the logits are
    # ORT's, and the presents' first 6 rows (the rest is unspecified in ORT too) are the cache.
    ids = np.array([[5, 17, 42, 8, 63, 2]], np.int64)
    n = ids.shape[1]
    empty = {f"past_key_values.{i}.{kv}": np.zeros((1, NKV, 0, HD), np.float32) for i in range(LAYERS)
             for kv in ("key", "value")}
    first = ref.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids), **empty})
    dummy = {k: RNG.standard_normal((1, NKV, 1, HD)).astype(np.float32) for k in empty}
    got = sess.run_numpy({"input_ids": ids, "attention_mask": np.concatenate([np.ones_like(ids), [[0]]], 1), **dummy})
    check(got, first, [n], "first prompt")
    ours_past, theirs_past = past_of([got[k][:, :, :n] if k != "logits" else got[k] for k in names]), past_of(first)
    tok = int(first[0][0, -1].argmax())
    for step in range(4):
        feed = {"input_ids": np.array([[tok]], np.int64), "attention_mask": np.ones((1, n + 1), np.int64)}
        want = ref.run(None, {**feed, **theirs_past})
        got = sess.run_numpy({**feed, **ours_past})
        check(got, want, [n + 1], f"decode step {step}")
        ours_past, theirs_past = past_of([got[k] for k in names]), past_of(want)
        n, tok = n + 1, int(want[0][0, -1].argmax())
    chunk = {"input_ids": np.array([[tok, 3, 77, 21]], np.int64), "attention_mask": np.ones((1, n + 4), np.int64)}
    check(sess.run_numpy({**chunk, **ours_past}), ref.run(None, {**chunk, **theirs_past}), [n + 4], "chunk")

    # A right-padded batch of 3 (prompts of 6, 3 and 5 tokens) decoding one token each.
    lens = [6, 3, 5]
    ids = RNG.integers(0, V, (3, 6)).astype(np.int64)
    mask = (np.arange(6)[None] < np.array(lens)[:, None]).astype(np.int64)
    empty3 = {k: np.zeros((3, NKV, 0, HD), np.float32) for k in empty}
    past = past_of(ref.run(None, {"input_ids": ids, "attention_mask": mask, **empty3}))
    feed = {"input_ids": RNG.integers(0, V, (3, 1)).astype(np.int64),
            "attention_mask": (np.arange(7)[None] < np.array(lens)[:, None] + 1).astype(np.int64), **past}
    check(sess.run_numpy(feed), ref.run(None, feed), [t + 1 for t in lens], "padded batch decode")


def test_matmul_nbits_float16_matches_onnx_runtime(tmp_path):
    """A float16 model (float16 A and scales) stays float16: W is dequantized in float32 and rounded once."""
    K, N, bs = 64, 32, 32
    B, scale, zp, _ = _quantize(RNG.standard_normal((N, K)).astype(np.float32), 4, bs, "packed")
    inits = [numpy_helper.from_array(B, "B"), numpy_helper.from_array(scale.astype(np.float16), "scales"),
             numpy_helper.from_array(zp, "zp")]
    node = helper.make_node("MatMulNBits", ["A", "B", "scales", "zp"], ["Y"], domain=MS, K=K, N=N, bits=4, block_size=bs)
    path = _save(tmp_path, [node], [helper.make_tensor_value_info("A", TensorProto.FLOAT16, ["batch", K])],
                 [helper.make_tensor_value_info("Y", TensorProto.FLOAT16, None)], inits, "nbits_f16")
    sess, ref = _compile(path, tmp_path, dims={"batch": (1, 8)}), _ort(path)
    for b in (1, 5):
        a = RNG.standard_normal((b, K)).astype(np.float16)
        got, want = sess.run_numpy({"A": a})["Y"], ref.run(None, {"A": a})[0]
        assert got.dtype == np.float16
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=0,
                                   atol=2e-3 * float(np.abs(want).max()))


def test_group_query_attention_float16_matches_onnx_runtime(tmp_path):
    """A float16 GroupQueryAttention (interleaved rotary, local window) stays float16."""
    path = _gqa_model(tmp_path, "gqa_f16", rotary=(HD, 1), local_window_size=4)
    m = onnx.load(path)
    for v in list(m.graph.input) + list(m.graph.output):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.FLOAT16
    for t in m.graph.initializer:
        t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))
    onnx.save(m, path)
    sess = _compile(path, tmp_path, dims={"batch": (1, 4), "seq": (1, 16), "past": (1, 32)})
    ref = _ort(path)
    for b, s, p, seqlens in STEPS:
        feed = {k: v.astype(np.float16) if v.dtype == np.float32 else v
                for k, v in _gqa_feed(b, s, p, seqlens, False).items()}
        got, want = sess.run_numpy(feed), ref.run(None, feed)
        assert got["output"].dtype == np.float16
        for bi, t in enumerate(seqlens):
            q = min(s, t)
            np.testing.assert_allclose(got["output"][bi, :q].astype(np.float32), want[0][bi, :q].astype(np.float32),
                                       rtol=0, atol=2e-3 * float(np.abs(want[0]).max()))
            for k, name in ((1, "present_key"), (2, "present_value")):
                np.testing.assert_allclose(got[name][bi, :, :t].astype(np.float32), want[k][bi, :, :t].astype(np.float32),
                                           rtol=0, atol=2e-3 * float(np.abs(want[k]).max()))
