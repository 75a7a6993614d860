"""The ONNX importer on graphs as real exporters write them (issue 37): names that are not C
identifiers kept at the user's boundary, unnamed axes, unsorted nodes, unused initializers,
initializers listed as inputs, subgraphs reading the enclosing scope, float64 at the boundary,
opset-6 broadcasting, and clear errors for bad files. Small graphs: seconds in total."""
import json
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import dinoml as dml  # noqa: E402


def _save(tmp_path, graph, opset=17, name="m.onnx", ir_version=8):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version
    p = tmp_path / name
    p.write_bytes(model.SerializeToString())
    return str(p)


def _import_error(path, **kw):
    with pytest.raises(dml.OnnxImportError) as e:
        dml.from_onnx(path, **kw)
    return str(e.value)


def test_exporter_names_are_kept_at_the_boundary(tmp_path):
    """Inputs 'x.1' (dim_param 'p2o.DynamicDimension.0' and an axis with neither size nor name)
    and '0', outputs 'onnx::Flatten_0' and 'add_0' (a name DinoML also generates): the
    artifact's signature, run_numpy and the CLI metadata use the ONNX names."""
    x = helper.make_tensor_value_info("x.1", TensorProto.FLOAT, ["p2o.DynamicDimension.0", None])
    x.type.tensor_type.shape.dim[1].Clear()
    y = helper.make_tensor_value_info("0", TensorProto.FLOAT, [1])
    out_a = helper.make_tensor_value_info("onnx::Flatten_0", TensorProto.FLOAT, None)
    out_b = helper.make_tensor_value_info("add_0", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Add", ["x.1", "0"], ["onnx::Flatten_0"], name="/layer/Add"),
             helper.make_node("Mul", ["onnx::Flatten_0", "x.1"], ["add_0"], name="/layer/Mul")]
    path = _save(tmp_path, helper.make_graph(nodes, "g", [x, y], [out_a, out_b]))

    msg = _import_error(path, dims={"p2o.DynamicDimension.0": (1, 4)})
    assert "'x.1_dim1'" in msg and "--dim" in msg, msg

    spec = dml.from_onnx(path, dims={"p2o.DynamicDimension.0": (1, 4), "x.1_dim1": (1, 8, [4, 8])})
    assert spec.input_names == ["x.1", "0"]
    art = dml.compile(spec, target="cpu", out=str(tmp_path / "art"))
    meta = json.load(open(os.path.join(art.path, "metadata.json")))
    assert [i["name"] for i in meta["inputs"]] == ["x.1", "0"]
    assert [o["name"] for o in meta["outputs"]] == ["onnx::Flatten_0", "add_0"]
    assert {d["name"] for d in meta["dims"]} == {"p2o_DynamicDimension_0", "x_1_dim1"}
    sess = dml.runtime.load(art.path).create_session()
    for b, n in [(1, 3), (3, 8), (4, 5)]:
        a = np.random.default_rng(b).standard_normal((b, n)).astype(np.float32)
        c = np.array([0.5], np.float32)
        got = sess.run_numpy({"x.1": a, "0": c})
        np.testing.assert_allclose(got["onnx::Flatten_0"], a + c, rtol=1e-6)
        np.testing.assert_allclose(got["add_0"], (a + c) * a, rtol=1e-6)
    with pytest.raises(ValueError, match="x_1"):
        sess.run_numpy({"x_1": a, "0": c})


def test_graphs_as_stored_unsorted_unused_initializers_defaults_and_outer_scope(tmp_path):
    """Nodes in reverse order, an unused initializer of a type DinoML lacks, an initializer that is
    also a graph input (a default: folded as a constant), and an If whose branches read a value of
    the enclosing graph."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    w_in = helper.make_tensor_value_info("w", TensorProto.FLOAT, [3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    w = numpy_helper.from_array(np.array([1.0, 2.0, 3.0], np.float32), "w")
    unused = helper.make_tensor("unused_u64", TensorProto.UINT64, [2], [1, 2])
    cond = numpy_helper.from_array(np.array(True), "cond")
    then_g = helper.make_graph([helper.make_node("Mul", ["h", "w"], ["t_out"])], "then", [],
                               [helper.make_tensor_value_info("t_out", TensorProto.FLOAT, [2, 3])])
    else_g = helper.make_graph([helper.make_node("Sub", ["h", "w"], ["e_out"])], "else", [],
                               [helper.make_tensor_value_info("e_out", TensorProto.FLOAT, [2, 3])])
    nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g, name="if"),
             helper.make_node("Relu", ["g"], ["h"], name="relu"),
             helper.make_node("Add", ["x", "w"], ["g"], name="add")]
    path = _save(tmp_path, helper.make_graph(nodes, "g", [x, w_in], [y], initializer=[w, unused, cond]))
    spec = dml.from_onnx(path)
    assert spec.input_names == ["x"]  # w is a default folded as a constant
    a = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    want = np.maximum(a + [1, 2, 3], 0) * [1, 2, 3]
    np.testing.assert_allclose(spec.reference({"x": a})["y"], want, rtol=1e-6)


def test_sequence_dims_reach_slice_and_range_bounds(tmp_path):
    """What transformer exports write for position ids and causal masks: seq = Shape(ids)[1], then
    Range(0, seq, 1) and Slice(buffer, 0, seq) of a fixed-size buffer, and the mask's
    [seq - seq : seq] window. Compiled once with a symbolic seq, run at sizes between buckets,
    compared with ONNX Runtime."""
    ort = pytest.importorskip("onnxruntime")
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])
    out = helper.make_tensor_value_info("pos", TensorProto.INT64, None)
    mask_out = helper.make_tensor_value_info("mask", TensorProto.FLOAT, None)
    buf = numpy_helper.from_array((np.arange(64, dtype=np.int64) * 3)[None, :], "position_buffer")
    tri = numpy_helper.from_array(np.tril(np.ones((64, 64), np.float32))[None, None], "causal")
    c = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)  # noqa: E731
    nodes = [helper.make_node("Shape", ["input_ids"], ["shape"]),
             helper.make_node("Gather", ["shape", "one"], ["seq"], axis=0),
             helper.make_node("Unsqueeze", ["seq", "zero_axes"], ["seq1"]),
             helper.make_node("Range", ["zero", "seq", "one"], ["range"]),
             helper.make_node("Slice", ["position_buffer", "zero1", "seq1", "one1"], ["sliced"]),
             helper.make_node("Add", ["sliced", "range"], ["pos_row"]),
             helper.make_node("Add", ["pos_row", "input_ids"], ["pos"]),
             helper.make_node("Sub", ["seq1", "seq1"], ["start"]),
             helper.make_node("Slice", ["causal", "start", "seq1", "two1"], ["rows"]),
             helper.make_node("Slice", ["rows", "zero1", "seq1", "three1"], ["mask"])]
    inits = [buf, tri, c("one", 1), c("zero", 0), c("zero_axes", [0]), c("zero1", [0]), c("one1", [1]),
             c("two1", [2]), c("three1", [3])]
    path = _save(tmp_path, helper.make_graph(nodes, "g", [ids], [out, mask_out], initializer=inits))
    spec = dml.from_onnx(path, dims={"batch": (1, 4), "seq": (1, 48, [16, 48])})
    sess = dml.runtime.load(dml.compile(spec, target="cpu", out=str(tmp_path / "art")).path).create_session()
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for b, n in ((1, 1), (2, 7), (3, 16), (1, 33)):
        x = np.random.default_rng(n).integers(0, 100, (b, n)).astype(np.int64)
        got = sess.run_numpy({"input_ids": x})
        want = dict(zip(["pos", "mask"], ref.run(None, {"input_ids": x})))
        np.testing.assert_array_equal(got["pos"], want["pos"])
        np.testing.assert_array_equal(got["mask"], want["mask"])


def test_positions_after_a_kv_cache(tmp_path):
    """A decoder export with a cache: past = Shape(past_key)[1], positions Range(past, past + seq)
    and the key window Slice(keys, past, past + seq) of the concatenated cache; two symbolic dims."""
    ort = pytest.importorskip("onnxruntime")
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "seq"])
    past = helper.make_tensor_value_info("past_key", TensorProto.FLOAT, [1, "past", 4])
    new = helper.make_tensor_value_info("new_key", TensorProto.FLOAT, [1, "seq", 4])
    outs = [helper.make_tensor_value_info("positions", TensorProto.INT64, None),
            helper.make_tensor_value_info("window", TensorProto.FLOAT, None)]
    c = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)  # noqa: E731
    nodes = [helper.make_node("Shape", ["past_key"], ["ps"]),
             helper.make_node("Gather", ["ps", "one"], ["past_len"], axis=0),
             helper.make_node("Shape", ["input_ids"], ["is"]),
             helper.make_node("Gather", ["is", "one"], ["seq_len"], axis=0),
             helper.make_node("Add", ["past_len", "seq_len"], ["total"]),
             helper.make_node("Range", ["past_len", "total", "one"], ["positions"]),
             helper.make_node("Concat", ["past_key", "new_key"], ["keys"], axis=1),
             helper.make_node("Unsqueeze", ["past_len", "zero1"], ["p1"]),
             helper.make_node("Unsqueeze", ["total", "zero1"], ["t1"]),
             helper.make_node("Slice", ["keys", "p1", "t1", "one1"], ["window"])]
    inits = [c("one", 1), c("zero1", [0]), c("one1", [1])]
    path = _save(tmp_path, helper.make_graph(nodes, "g", [ids, past, new], outs, initializer=inits))
    spec = dml.from_onnx(path, dims={"seq": (1, 16, [1, 16]), "past": (1, 32, [8, 32])})
    sess = dml.runtime.load(dml.compile(spec, target="cpu", out=str(tmp_path / "art")).path).create_session()
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    for p, n in ((1, 1), (5, 3), (32, 16)):
        feed = {"input_ids": rng.integers(0, 9, (1, n)).astype(np.int64),
                "past_key": rng.standard_normal((1, p, 4)).astype(np.float32),
                "new_key": rng.standard_normal((1, n, 4)).astype(np.float32)}
        got = sess.run_numpy(feed)
        want = dict(zip(["positions", "window"], ref.run(None, feed)))
        np.testing.assert_array_equal(got["positions"], want["positions"])
        np.testing.assert_array_equal(got["window"], want["window"])


def test_symbolic_slice_end_past_the_buffer_is_a_clear_error(tmp_path):
    """Slice(buffer[1, 8], 0, seq) with seq allowed up to 16: NumPy would clamp at 8, which no
    symbolic extent expresses; the error names the node's bound and the extent."""
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])
    out = helper.make_tensor_value_info("y", TensorProto.INT64, None)
    c = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)  # noqa: E731
    nodes = [helper.make_node("Shape", ["input_ids"], ["shape"]),
             helper.make_node("Slice", ["shape", "one1", "two1"], ["seq1"]),
             helper.make_node("Slice", ["buf", "zero1", "seq1", "one1"], ["y"], name="slice_pos")]
    inits = [numpy_helper.from_array(np.zeros((1, 8), np.int64), "buf"), c("zero1", [0]), c("one1", [1]),
             c("two1", [2])]
    path = _save(tmp_path, helper.make_graph(nodes, "g", [ids], [out], initializer=inits))
    msg = _import_error(path, dims={"batch": (1, 2), "seq": (1, 16)})
    assert "slice end 'seq'" in msg and "[0, 8]" in msg, msg


def test_cycle_is_reported(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="first"),
             helper.make_node("Relu", ["a"], ["b"], name="second"),
             helper.make_node("Neg", ["a"], ["y"], name="third")]
    msg = _import_error(_save(tmp_path, helper.make_graph(nodes, "g", [x], [y])))
    assert "cycle" in msg and "'first' (Add)" in msg and "'second' (Relu)" in msg, msg


def test_float64_inputs_and_outputs_compute_in_float32(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.DOUBLE, [4])
    y = helper.make_tensor_value_info("y", TensorProto.DOUBLE, [4])
    k = numpy_helper.from_array(np.array([0.5, 1.5, 2.5, 3.5]), "k")  # float64 initializer
    path = _save(tmp_path, helper.make_graph([helper.make_node("Mul", ["x", "k"], ["y"])], "g", [x], [y],
                                             initializer=[k]))
    art = dml.compile(dml.from_onnx(path), target="cpu", out=str(tmp_path / "art"))
    meta = json.load(open(os.path.join(art.path, "metadata.json")))
    assert meta["inputs"][0]["dtype"] == "float32" and meta["inputs"][0]["source_dtype"] == "float64"
    assert any("float32" in n for n in meta["notes"])
    a = np.array([1.0, -2.0, 3.25, 1e-3])
    got = dml.runtime.load(art.path).create_session().run_numpy({"x": a})["y"]
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, a * [0.5, 1.5, 2.5, 3.5], rtol=1e-6)


def test_opset6_broadcast_axis_and_per_channel_prelu(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4, 5])
    b = numpy_helper.from_array(np.array([1.0, -2.0, 3.0], np.float32), "b")
    s = numpy_helper.from_array(np.array([0.1, 0.2, 0.3], np.float32), "s")
    nodes = [helper.make_node("Add", ["x", "b"], ["t"], broadcast=1, axis=1, consumed_inputs=[0, 0]),
             helper.make_node("PRelu", ["t", "s"], ["y"])]
    path = _save(tmp_path, helper.make_graph(nodes, "g", [x], [y], initializer=[b, s]), opset=6, ir_version=3)
    a = np.random.default_rng(1).standard_normal((2, 3, 4, 5)).astype(np.float32)
    t = a + np.array([1, -2, 3], np.float32)[None, :, None, None]
    want = np.where(t < 0, t * np.array([0.1, 0.2, 0.3], np.float32)[None, :, None, None], t)
    np.testing.assert_allclose(dml.from_onnx(path).reference({"x": a})["y"], want, rtol=1e-6)


def test_bad_files_give_one_clear_error(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    good = _save(tmp_path, helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g", [x], [y]))
    data = open(good, "rb").read()
    trunc = tmp_path / "trunc.onnx"
    trunc.write_bytes(data[: len(data) // 2])
    msg = _import_error(str(trunc))
    assert "truncated or corrupt" in msg and "re-export" in msg, msg

    future = _save(tmp_path, helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]), opset=99,
                   name="future.onnx")
    msg = _import_error(future)
    assert "opset 99" in msg and "opset_version" in msg, msg

    custom = helper.make_graph([helper.make_node("FusedGelu", ["x"], ["y"], name="gelu_1", domain="com.microsoft")],
                               "g", [x], [y])
    model = helper.make_model(custom, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    p = tmp_path / "custom.onnx"
    p.write_bytes(model.SerializeToString())
    msg = _import_error(str(p))
    assert "node 'gelu_1' (FusedGelu)" in msg and "com.microsoft" in msg and "before ONNX Runtime's optimizations" in msg, msg

    unknown = _save(tmp_path, helper.make_graph([helper.make_node("Unique", ["x"], ["y"], name="uniq")], "g", [x], [y]),
                    name="unsupported.onnx")
    msg = _import_error(unknown)
    assert "node 'uniq' (Unique)" in msg and "dinoml onnx-ops" in msg, msg
