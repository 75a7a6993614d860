"""Operators of newer opsets (Gelu 20, GroupNormalization 18 and 21, RMSNormalization 23, Swish 24)
and the ONNX Runtime contrib operators its transformer optimizer writes (com.microsoft Gelu,
FastGelu, BiasGelu, QuickGelu, SkipLayerNormalization, SkipSimplifiedLayerNormalization;
SimplifiedLayerNormalization): each one-node model compiled for the CPU with a symbolic batch and
compared with ONNX Runtime, which implements all of them."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import dinoml as dml  # noqa: E402

MS = "com.microsoft"
RNG = np.random.default_rng(0)


def _model(tmp_path, nodes, inputs, outputs, inits, opset, name):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    imports = [helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)]
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = 10
    p = tmp_path / f"{name}.onnx"
    p.write_bytes(model.SerializeToString())
    return str(p)


def _init(name, shape):
    return numpy_helper.from_array((RNG.standard_normal(shape) * 0.5 + (1.0 if "gamma" in name else 0.0))
                                   .astype(np.float32), name)


D = 16
CASES = {
    # name: (node kwargs builder, extra input names with shapes [batch, 5, D] / initializers, opset, n_outputs)
    "gelu_none": (lambda: helper.make_node("Gelu", ["x"], ["y0"]), [], [], 20),
    "gelu_tanh": (lambda: helper.make_node("Gelu", ["x"], ["y0"], approximate="tanh"), [], [], 20),
    "swish": (lambda: helper.make_node("Swish", ["x"], ["y0"], alpha=0.8), [], [], 24),
    "rms_normalization": (lambda: helper.make_node("RMSNormalization", ["x", "gamma"], ["y0"], epsilon=1e-6), [],
                          [("gamma", [D])], 23),
    "rms_normalization_axis1": (lambda: helper.make_node("RMSNormalization", ["x", "gamma2"], ["y0"], axis=1), [],
                                [("gamma2", [5, D])], 23),
    "simplified_layer_norm": (lambda: helper.make_node("SimplifiedLayerNormalization", ["x", "gamma"], ["y0"],
                                                       epsilon=1e-6), [], [("gamma", [D])], 17),
    "ms_gelu": (lambda: helper.make_node("Gelu", ["x"], ["y0"], domain=MS), [], [], 17),
    "fast_gelu": (lambda: helper.make_node("FastGelu", ["x", "bias"], ["y0"], domain=MS), [], [("bias", [D])], 17),
    "bias_gelu": (lambda: helper.make_node("BiasGelu", ["x", "bias"], ["y0"], domain=MS), [], [("bias", [D])], 17),
    "quick_gelu": (lambda: helper.make_node("QuickGelu", ["x"], ["y0"], domain=MS, alpha=1.5), [], [], 17),
    "skip_layer_norm": (lambda: helper.make_node("SkipLayerNormalization", ["x", "skip", "gamma", "beta", "bias"],
                                                 ["y0", "", "", "y3"], domain=MS, epsilon=1e-5), ["skip"],
                        [("gamma", [D]), ("beta", [D]), ("bias", [D])], 17),
    "skip_simplified_layer_norm": (lambda: helper.make_node("SkipSimplifiedLayerNormalization",
                                                            ["x", "skip", "gamma"], ["y0", "", "", "y3"], domain=MS,
                                                            epsilon=1e-6), ["skip"], [("gamma", [D])], 17),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_operator_matches_onnx_runtime(case, tmp_path):
    make, extra, inits, opset = CASES[case]
    node = make()
    outs = [o for o in node.output if o]
    xs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 5, D]) for n in ["x", *extra]]
    ys = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs]
    path = _model(tmp_path, [node], xs, ys, [_init(n, s) for n, s in inits], opset, case)
    spec = dml.from_onnx(path, dims={"batch": (1, 4)})
    sess = dml.runtime.load(dml.compile(spec, target="cpu", out=str(tmp_path / "art")).path).create_session()
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for b in (1, 3):
        feed = {n: RNG.standard_normal((b, 5, D)).astype(np.float32) for n in ["x", *extra]}
        got = sess.run_numpy(feed)
        for o, want in zip(outs, ref.run(outs, feed)):
            np.testing.assert_allclose(got[o], want, rtol=1e-4, atol=1e-5, err_msg=f"{case} {o} batch {b}")


@pytest.mark.parametrize("opset,per", [(18, "group"), (21, "channel")])
def test_group_normalization_matches_onnx_runtime(opset, per, tmp_path):
    C, G = 8, 4
    n_par = G if per == "group" else C
    node = helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["y"], num_groups=G, epsilon=1e-5)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", C, 6, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    path = _model(tmp_path, [node], [x], [y], [_init("scale", [n_par]), _init("bias", [n_par])], opset, "gn")
    sess = dml.runtime.load(dml.compile(dml.from_onnx(path, dims={"batch": (1, 2)}), target="cpu",
                                        out=str(tmp_path / "art")).path).create_session()
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    a = RNG.standard_normal((2, C, 6, 5)).astype(np.float32)
    np.testing.assert_allclose(sess.run_numpy({"x": a})["y"], ref.run(None, {"x": a})[0], rtol=1e-4, atol=1e-5)


def test_unconverted_contrib_operator_is_named(tmp_path):
    node = helper.make_node("Attention", ["x"], ["y"], domain=MS, num_heads=2)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 5, D])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    path = _model(tmp_path, [node], [x], [y], [], 17, "attn")
    with pytest.raises(dml.OnnxImportError, match=r"Attention is an ONNX Runtime contrib operator .*onnx-ops"):
        dml.from_onnx(path)


ATTN = {
    # name: (Q shape, K shape, attrs, mask (shape, dtype) or None, past (Skv_past) or 0)
    "causal": ([2, 4, 7, 16], [2, 4, 7, 16], dict(is_causal=1), None, 0),
    "bool_mask_gqa": ([2, 4, 5, 16], [2, 2, 9, 16], dict(scale=0.2), ([2, 1, 5, 9], TensorProto.BOOL), 0),
    "float_mask": ([1, 2, 6, 8], [1, 2, 6, 8], {}, ([6, 6], TensorProto.FLOAT), 0),
    "3d_heads": ([2, 5, 32], [2, 5, 16], dict(q_num_heads=4, kv_num_heads=2), None, 0),
    "past_kv": ([1, 2, 3, 8], [1, 2, 3, 8], {}, None, 4),
}


@pytest.mark.parametrize("case", sorted(ATTN))
def test_attention_opset23_matches_onnx_runtime(case, tmp_path):
    """opset-23 Attention (torch.onnx.export's form of scaled_dot_product_attention at opset 23)."""
    qs, ks, attrs, mask, past = ATTN[case]
    names = ["Q", "K", "V"]
    inputs = [helper.make_tensor_value_info("Q", TensorProto.FLOAT, qs),
              helper.make_tensor_value_info("K", TensorProto.FLOAT, ks),
              helper.make_tensor_value_info("V", TensorProto.FLOAT, ks)]
    feed = {"Q": RNG.standard_normal(qs).astype(np.float32), "K": RNG.standard_normal(ks).astype(np.float32),
            "V": RNG.standard_normal(ks).astype(np.float32)}
    node_in = list(names)
    if mask is not None:
        mshape, mtype = mask
        inputs.append(helper.make_tensor_value_info("M", mtype, mshape))
        feed["M"] = (RNG.random(mshape) > 0.3) if mtype == TensorProto.BOOL else \
            (RNG.standard_normal(mshape) * 2).astype(np.float32)
        if mtype == TensorProto.BOOL:
            feed["M"][..., 0] = True  # no row with every key masked (NaN in both, but not comparable)
        node_in.append("M")
    outs = ["Y"]
    if past:
        node_in += [""] * (4 - len(node_in)) + ["PK", "PV"]
        pshape = ks[:2] + [past] + ks[3:]
        inputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, pshape) for n in ("PK", "PV")]
        feed.update(PK=RNG.standard_normal(pshape).astype(np.float32), PV=RNG.standard_normal(pshape).astype(np.float32))
        outs += ["present_key", "present_value"]
    node = helper.make_node("Attention", node_in, outs, **attrs)
    ys = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs]
    path = _model(tmp_path, [node], inputs, ys, [], 23, case)
    sess = dml.runtime.load(dml.compile(dml.from_onnx(path), target="cpu", out=str(tmp_path / "art")).path) \
        .create_session()
    got = sess.run_numpy(feed)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for o, want in zip(outs, ref.run(outs, feed)):
        np.testing.assert_allclose(got[o], want, rtol=1e-4, atol=1e-5, err_msg=f"{case} {o}")


@pytest.mark.parametrize("layout,interleaved,rot", [("4d", 0, 0), ("4d", 1, 0), ("3d", 0, 8), ("3d", 1, 8)])
def test_rotary_embedding_opset23_matches_onnx_runtime(layout, interleaved, rot, tmp_path):
    """opset-23 RotaryEmbedding (the torch exporter fuses a transformer's rope into it): caches
    gathered by position_ids, halves or interleaved pairs, full or partial rotary dim."""
    B, H, S, D, P = 2, 3, 5, 16, 32
    xshape = [B, H, S, D] if layout == "4d" else [B, S, H * D]
    R = rot or D
    attrs = dict(interleaved=interleaved)
    if layout == "3d":
        attrs["num_heads"] = H
    if rot:
        attrs["rotary_embedding_dim"] = rot
    node = helper.make_node("RotaryEmbedding", ["X", "cos", "sin", "pos"], ["Y"], **attrs)
    theta = np.arange(P)[:, None] * (10000.0 ** (-np.arange(R // 2) / (R // 2)))[None, :]
    inits = [numpy_helper.from_array(np.cos(theta).astype(np.float32), "cos"),
             numpy_helper.from_array(np.sin(theta).astype(np.float32), "sin")]
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, xshape),
              helper.make_tensor_value_info("pos", TensorProto.INT64, [B, S])]
    path = _model(tmp_path, [node], inputs, [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], inits,
                  23, f"rope_{layout}_{interleaved}")
    sess = dml.runtime.load(dml.compile(dml.from_onnx(path), target="cpu", out=str(tmp_path / "art")).path) \
        .create_session()
    feed = {"X": RNG.standard_normal(xshape).astype(np.float32),
            "pos": RNG.integers(0, P, (B, S)).astype(np.int64)}
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feed)[0]
    np.testing.assert_allclose(sess.run_numpy(feed)["Y"], want, rtol=1e-5, atol=1e-5)


def test_bert_as_onnx_runtimes_transformer_optimizer_writes_it(tmp_path):
    """The contrib operators as ONNX Runtime itself writes them: a BERT exported by torch, then
    `onnxruntime.transformers.optimizer.optimize_model` (BiasGelu, SkipLayerNormalization), imported
    with symbolic batch and sequence and compared with ONNX Runtime on the optimized file."""
    torch = pytest.importorskip("torch")
    tf = pytest.importorskip("transformers")
    from onnxruntime.transformers import optimizer
    torch.manual_seed(0)
    m = tf.BertModel(tf.BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                                   vocab_size=96, max_position_embeddings=32)).eval()
    ids = torch.randint(0, 96, (2, 8))
    raw = str(tmp_path / "bert.onnx")

    class Bert(torch.nn.Module):  # keyword arguments: BertModel's positional order differs by version
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask):
            r = self.m(input_ids=input_ids, attention_mask=attention_mask)
            return r.last_hidden_state, r.pooler_output

    with torch.no_grad():
        torch.onnx.export(Bert().eval(), (ids, torch.ones_like(ids)), raw, input_names=["input_ids", "attention_mask"],
                          output_names=["last_hidden_state", "pooler_output"], opset_version=17, dynamo=False,
                          dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}})
    opt = optimizer.optimize_model(raw, model_type="bert", num_heads=2, hidden_size=32, opt_level=0)
    path = str(tmp_path / "bert_opt.onnx")
    opt.save_model_to_file(path)
    contrib = {n.op_type for n in onnx.load(path).graph.node if n.domain == MS}
    assert {"SkipLayerNormalization"} <= contrib, contrib
    spec = dml.from_onnx(path, dims={"batch": (1, 4), "seq": (1, 32, [16, 32])})
    sess = dml.runtime.load(dml.compile(spec, target="cpu", out=str(tmp_path / "art")).path).create_session()
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for b, n in ((1, 5), (3, 27)):
        feed = {"input_ids": RNG.integers(0, 96, (b, n)).astype(np.int64), "attention_mask": np.ones((b, n), np.int64)}
        got = sess.run_numpy(feed)
        for o, want in zip(ref.get_outputs(), ref.run(None, feed)):
            np.testing.assert_allclose(got[o.name], want, rtol=1e-4, atol=1e-5, err_msg=f"{o.name} {b}x{n}")
