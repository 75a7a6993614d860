"""ONNX features beyond DinoML's own dtypes and static tensors, each compared with ONNX Runtime:
int16 / uint16 / uint32 / uint64 computed in int32 / int64 (wraparound, unsigned order, division,
shifts, casts to float; values at the types' edges, uint64 above 2^63), and sequence / optional
inputs and outputs whose structure is fixed at compile time."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP, helper  # noqa: E402

import dinoml as dml  # noqa: E402


def _save(tmp_path, nodes, inputs, outputs, name, opset=17):
    model = helper.make_model(helper.make_graph(nodes, name, inputs, outputs),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    p = tmp_path / f"{name}.onnx"
    p.write_bytes(model.SerializeToString())
    return str(p)


def _session(path, tmp_path, **kw):
    art = dml.compile(dml.from_onnx(path, **kw), target="cpu", out=str(tmp_path / "art"))
    return dml.runtime.load(art.path).create_session()


EDGES = {
    # a, b: edge values (wraparound in Add / Sub / Mul, the top bit, division by larger values)
    "uint16": (np.array([65535, 40000, 7, 0, 1, 65535], np.uint16), np.array([1, 40000, 3, 5, 65535, 2], np.uint16)),
    "int16": (np.array([32767, -32768, -7, 7, -1, 100], np.int16), np.array([1, -1, 2, -2, 32767, -3], np.int16)),
    "uint32": (np.array([2**32 - 1, 3_000_000_000, 7, 0, 1, 2**31], np.uint32),
               np.array([1, 3_000_000_001, 3, 5, 2**32 - 1, 2], np.uint32)),
    "uint64": (np.array([2**64 - 1, 2**63 + 12345, 2**63, 7, 1, 2**63 - 1], np.uint64),
               np.array([2, 2**63 + 1, 3, 2**63, 2**64 - 1, 2**62 + 3], np.uint64)),
}
ONNX_TYPE = {"uint16": TP.UINT16, "int16": TP.INT16, "uint32": TP.UINT32, "uint64": TP.UINT64}


@pytest.mark.parametrize("type_name", sorted(EDGES))
def test_widened_integers_match_onnx_runtime(type_name, tmp_path):
    a, b = EDGES[type_name]
    t = ONNX_TYPE[type_name]
    ops = [("Add", t), ("Sub", t), ("Mul", t), ("Div", t), ("Mod", t), ("Less", TP.BOOL), ("Greater", TP.BOOL),
           ("Equal", TP.BOOL)]
    if type_name != "int16":
        ops += [("BitShift_RIGHT", t), ("BitShift_LEFT", t)]
    if type_name in ("uint32", "uint64"):
        ops += [("Max", t), ("Min", t)]
    nodes, outs = [], []
    for op, ot in ops:
        o = f"y_{op}"
        if op.startswith("BitShift"):
            # shift counts: b modulo the bit width (ONNX leaves larger shifts undefined)
            nodes.append(helper.make_node("BitShift", ["a", "s"], [o], direction=op.split("_")[1]))
        else:
            nodes.append(helper.make_node(op, ["a", "b"], [o]))
        outs.append(helper.make_tensor_value_info(o, ot, [6]))
    nodes.append(helper.make_node("Cast", ["a"], ["y_float"], to=TP.FLOAT))
    outs.append(helper.make_tensor_value_info("y_float", TP.FLOAT, [6]))
    ins = [helper.make_tensor_value_info(n, t, [6]) for n in ("a", "b", "s")]
    if type_name == "int16":
        ins = ins[:2]
    path = _save(tmp_path, nodes, ins, outs, f"widened_{type_name}")
    bits = a.dtype.itemsize * 8
    feed = {"a": a, "b": b}
    if type_name != "int16":
        feed["s"] = (np.arange(6) * (bits // 6 + 1) % bits).astype(a.dtype)
    names = [o.name for o in outs]
    want = dict(zip(names, ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(names, feed)))
    got = _session(path, tmp_path).run_numpy(feed)
    for n in names:
        assert got[n].dtype == want[n].dtype, n
        np.testing.assert_array_equal(got[n], want[n], err_msg=f"{type_name} {n}")


def test_unsupported_operator_on_widened_type_is_named(tmp_path):
    node = helper.make_node("ReduceSum", ["a"], ["y"], keepdims=0)
    path = _save(tmp_path, [node], [helper.make_tensor_value_info("a", TP.UINT32, [4])],
                 [helper.make_tensor_value_info("y", TP.UINT32, [])], "reduce_u32")
    with pytest.raises(dml.OnnxImportError, match=r"ReduceSum on uint32 tensors is not supported.*cast to int32"):
        dml.from_onnx(path)


def test_sequences_and_optionals_match_onnx_runtime(tmp_path):
    f = TP.FLOAT
    seq_t = helper.make_sequence_type_proto(helper.make_tensor_type_proto(f, None))
    opt_t = helper.make_optional_type_proto(helper.make_tensor_type_proto(f, [3]))
    nodes = [
        helper.make_node("SequenceInsert", ["xs", "t"], ["s2"]),                        # [x0, x1, t]
        helper.make_node("SequenceErase", ["s2", "zero"], ["s3"]),                       # [x1, t]
        helper.make_node("ConcatFromSequence", ["s2"], ["cat"], axis=0),                 # [2+4+1, 3]
        helper.make_node("SplitToSequence", ["cat", "split"], ["parts"], axis=0),        # sizes 3, 4
        helper.make_node("SequenceLength", ["s3"], ["n"]),
        helper.make_node("SequenceAt", ["s2", "minus_one"], ["last"]),
        helper.make_node("OptionalHasElement", ["opt"], ["has"]),
        helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("zero", TP.INT64, [], [0])),
        helper.make_node("Constant", [], ["minus_one"], value=helper.make_tensor("m1", TP.INT64, [], [-1])),
        helper.make_node("Constant", [], ["split"], value=helper.make_tensor("sp", TP.INT64, [2], [3, 4])),
    ]
    ins = [helper.make_value_info("xs", seq_t), helper.make_tensor_value_info("t", f, [1, 3]),
           helper.make_value_info("opt", opt_t)]
    outs = [helper.make_value_info("parts", seq_t), helper.make_tensor_value_info("n", TP.INT64, []),
            helper.make_tensor_value_info("last", f, [1, 3]), helper.make_tensor_value_info("has", TP.BOOL, [])]
    path = _save(tmp_path, nodes, ins, outs, "sequences", opset=18)
    sess = _session(path, tmp_path, sequences={"xs": [(2, 3), (4, 3)]}, absent=["opt"])
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)]
    t = rng.standard_normal((1, 3)).astype(np.float32)
    got = sess.run_numpy({"xs": xs, "t": t})
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
        ["parts", "n", "last", "has"], {"xs": xs, "t": t, "opt": None})
    assert isinstance(got["parts"], list) and len(got["parts"]) == 2
    for g, w in zip(got["parts"], want[0]):
        np.testing.assert_array_equal(g, w)
    for name, w in zip(["n", "last", "has"], want[1:]):
        np.testing.assert_array_equal(got[name], w)


def test_sequence_input_needs_its_structure(tmp_path):
    seq_t = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TP.FLOAT, None))
    node = helper.make_node("ConcatFromSequence", ["xs"], ["y"], axis=0)
    path = _save(tmp_path, [node], [helper.make_value_info("xs", seq_t)],
                 [helper.make_tensor_value_info("y", TP.FLOAT, None)], "seq_missing")
    with pytest.raises(dml.OnnxImportError, match=r"graph input 'xs' is a sequence: give its length and element shapes"):
        dml.from_onnx(path)
