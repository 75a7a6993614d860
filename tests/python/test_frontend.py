"""The Python front end: tracing, parameter discovery and naming, Dims and symbolic shapes,
tensor operators, error messages. Everything here runs through the C++ builder and reference
interpreter; nothing needs a compiler toolchain."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import dinoml as dml
from testkit import run_threads

RNG = np.random.default_rng(0)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# ---- the seed example -----------------------------------------------------------------------

class SeedLinear(dml.Module):
    def __init__(self):
        self.weight = dml.Parameter([8, 6], dtype="float32")
        self.bias = dml.Parameter([6], dtype="float32")

    def forward(self, x):
        y = dml.ops.gemm_rrr_bias(x, self.weight, self.bias)
        return dml.ops.output(y, "y")


SEED_CONSTANTS = {"weight": rand(8, 6), "bias": rand(6)}


def seed_spec():
    batch = dml.Dim("batch", min=1, max=4, typical=3, buckets=(1, 3, 4))
    return dml.trace(SeedLinear(), inputs={"x": dml.TensorSpec([batch, 8], "float32")},
                     constants=SEED_CONSTANTS, name="linear")


def test_seed_example_traces():
    spec = seed_spec()
    assert spec.name == "linear"
    assert spec.input_names == ["x"] and spec.output_names == ["y"]
    y = spec.outputs[0]
    assert y["dtype"] == "float32"
    assert [str(e) for e in y["shape"]] == ["batch", "6"]
    ops = [n["op"] for n in spec.nodes()]
    assert ops == ["gemm_rrr_bias", "output"]
    text = repr(spec)
    assert "linear" in text and "x: float32[batch, 8]" in text and "y: float32[batch, 6]" in text
    doc = json.loads(spec.graph_json())
    assert doc["schema_version"] == 1 and doc["name"] == "linear"
    assert doc["dims"][0]["buckets"] == [1, 3, 4]


def test_seed_example_from_examples_dir_is_verbatim_and_builds():
    import linear  # examples/linear.py (conftest puts examples/ on sys.path)
    spec = linear.build_spec()
    assert spec.output_names == ["y"]
    assert [d.name for d in spec.dims] == ["batch"]


def test_reference_matches_numpy():
    spec = seed_spec()
    for b in (1, 3, 4):
        x = rand(b, 8)
        y = dml.reference(spec, {"x": x})["y"]
        np.testing.assert_allclose(y, x @ SEED_CONSTANTS["weight"] + SEED_CONSTANTS["bias"], rtol=1e-5, atol=1e-5)


def test_spec_save_and_load_round_trip(tmp_path):
    spec = seed_spec()
    path = spec.save(str(tmp_path / "linear.dinoir.json"))
    assert os.path.exists(path) and os.path.exists(tmp_path / "linear.constants.bin")
    again = dml.Spec.load(path)
    assert again.hash() == spec.hash()
    x = rand(2, 8)
    np.testing.assert_array_equal(again.reference({"x": x})["y"], spec.reference({"x": x})["y"])


# ---- parameters ----------------------------------------------------------------------------------

class Block(dml.Module):
    def __init__(self, n):
        self.proj = dml.nn.Linear(n, n)
        self.scale = dml.Parameter([n])

    def forward(self, x):
        return self.proj(x) * self.scale


class Net(dml.Module):
    # No super().__init__() call on purpose: discovery walks __dict__ at trace time.
    def __init__(self):
        self.layers = [Block(4), Block(4)]
        self.heads = {"main": dml.nn.Linear(4, 2, bias=False)}
        self.seq = dml.nn.Sequential(dml.nn.Linear(4, 4), dml.nn.ReLU(), dml.nn.Linear(4, 4))
        self.shared = self.layers[0].scale  # the same Parameter twice: named once

    def forward(self, x):
        for blk in self.layers:
            x = blk(x)
        x = self.seq(x)
        return self.heads["main"](x)


NET_NAMES = ["layers.0.proj.weight", "layers.0.proj.bias", "layers.0.scale",
             "layers.1.proj.weight", "layers.1.proj.bias", "layers.1.scale",
             "heads.main.weight", "seq.0.weight", "seq.0.bias", "seq.2.weight", "seq.2.bias"]


def net_constants():
    return {n: rand(*shape) for n, (shape, _) in Net().state_dict_shapes().items()}


def test_nested_parameter_names():
    names = [n for n, _ in Net().named_parameters()]
    assert names == NET_NAMES
    shapes = Net().state_dict_shapes()
    assert shapes["layers.0.proj.weight"] == ((4, 4), "float32")
    assert shapes["heads.main.weight"] == ((2, 4), "float32")


def test_nested_model_traces_and_matches_numpy():
    c = net_constants()
    spec = dml.trace(Net(), inputs={"x": dml.TensorSpec([3, 4])}, constants=c)
    x = rand(3, 4)
    y = dml.reference(spec, {"x": x})["output"]
    h = x
    for i in range(2):
        h = (h @ c[f"layers.{i}.proj.weight"].T + c[f"layers.{i}.proj.bias"]) * c[f"layers.{i}.scale"]
    h = np.maximum(h @ c["seq.0.weight"].T + c["seq.0.bias"], 0) @ c["seq.2.weight"].T + c["seq.2.bias"]
    np.testing.assert_allclose(y, h @ c["heads.main.weight"].T, rtol=1e-4, atol=1e-5)
    assert set(spec.graph.constant_names()) >= set(NET_NAMES)


def test_missing_parameter_names_it_and_lists_provided_keys():
    c = net_constants()
    del c["layers.1.proj.bias"]
    with pytest.raises(ValueError) as ei:
        dml.trace(Net(), inputs={"x": dml.TensorSpec([3, 4])}, constants=c)
    msg = str(ei.value)
    assert "'layers.1.proj.bias'" in msg and "provided keys" in msg and "layers.0.proj.bias" in msg


def test_parameter_value_shape_and_dtype_mismatch():
    c = net_constants()
    c["layers.0.scale"] = rand(5)
    with pytest.raises(ValueError, match=r"constant 'layers.0.scale'.*shape \[5\].*\[4\]"):
        dml.trace(Net(), inputs={"x": dml.TensorSpec([3, 4])}, constants=c)
    c = net_constants()
    c["seq.0.bias"] = c["seq.0.bias"].astype(np.float64)
    with pytest.raises(ValueError, match=r"constant 'seq.0.bias'.*float64.*float32"):
        dml.trace(Net(), inputs={"x": dml.TensorSpec([3, 4])}, constants=c)


def test_unexpected_constant_key_is_an_error_unless_not_strict():
    c = net_constants()
    c["layers.7.weight"] = rand(4)
    with pytest.raises(ValueError, match="layers.7.weight"):
        dml.trace(Net(), inputs={"x": dml.TensorSpec([3, 4])}, constants=c)
    dml.trace(Net(), inputs={"x": dml.TensorSpec([3, 4])}, constants=c, strict=False)


def test_parameter_data_and_torch_values():
    torch = pytest.importorskip("torch")

    class M(dml.Module):
        def __init__(self):
            self.w = dml.Parameter([2, 2], data=np.eye(2, dtype=np.float32))
            self.b = dml.Parameter([2])

        def forward(self, x):
            return x @ self.w + self.b

    spec = dml.trace(M(), inputs={"x": dml.TensorSpec([1, 2])}, constants={"b": torch.ones(2)})
    y = dml.reference(spec, {"x": np.array([[1, 2]], np.float32)})["output"]
    np.testing.assert_array_equal(y, [[2, 3]])


def test_parameter_outside_trace_is_a_trace_error():
    p = dml.Parameter([2])
    with pytest.raises(dml.TraceError):
        p + 1
    with pytest.raises(dml.TraceError):
        dml.state("s", [2])


# ---- errors at trace time ------------------------------------------------------------------------

def test_shape_error_names_op_and_extents_and_user_line():
    class Bad(dml.Module):
        def __init__(self):
            self.w = dml.Parameter([7, 6])

        def forward(self, x):
            return dml.ops.gemm_rrr(x, self.w)  # K: 8 vs 7

    with pytest.raises(dml.ShapeError) as ei:
        dml.trace(Bad(), inputs={"x": dml.TensorSpec([2, 8])}, constants={"w": rand(7, 6)})
    msg = str(ei.value)
    assert isinstance(ei.value, ValueError)
    assert "gemm_rrr" in msg and "8" in msg and "7" in msg
    assert "test_frontend.py" in msg  # the model line that made the bad node


def test_dtype_rule_and_unknown_attribute_errors():
    spec_in = {"a": dml.TensorSpec([3], "float32"), "b": dml.TensorSpec([3], "int32")}
    with pytest.raises(dml.ShapeError, match="add"):
        dml.trace(lambda a, b: a + b, inputs=spec_in)
    with pytest.raises(dml.ShapeError, match="minimum"):
        dml.trace(lambda a, b: dml.ops.clamp(a, minimum=0.0), inputs=spec_in)


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(min=4, max=2), "max (2) must be >= min (4)"),
    (dict(min=0, max=2), "min must be >= 1"),
    (dict(min=1, max=8, typical=9), "typical (9)"),
    (dict(min=1, max=8, buckets=(4, 2)), "strictly ascending"),
    (dict(min=1, max=8, buckets=(4, 16)), "bucket 16"),
    (dict(min=2, max=9, divisible_by=2), "divisible_by"),
])
def test_dim_validation_errors(kwargs, fragment):
    with pytest.raises(ValueError) as ei:
        dml.Dim("batch", **kwargs)
    assert fragment in str(ei.value) and "batch" in str(ei.value)


def test_dim_defaults_and_buckets():
    d = dml.Dim("seq", min=1, max=64, buckets=(16,))
    assert d.buckets == (16, 64) and d.typical == 64
    assert d.bucket_bounds() == [(1, 16), (17, 64)]
    with pytest.raises(ValueError, match="letters, digits"):
        dml.Dim("bad name", min=1, max=2)


def test_conflicting_dims_with_same_name():
    a = dml.Dim("n", min=1, max=4)
    b = dml.Dim("n", min=1, max=8)
    with pytest.raises(ValueError, match="'n'"):
        dml.trace(lambda x, y: x, inputs={"x": dml.TensorSpec([a]), "y": dml.TensorSpec([b])})


# ---- shapes while tracing --------------------------------------------------------------------------

def test_shape_while_tracing():
    seen = {}

    class M(dml.Module):
        def __init__(self):
            self.w = dml.Parameter([8, 6])

        def forward(self, x):
            seen["x"] = x.shape
            y = x @ self.w
            seen["y"] = y.shape
            seen["ndim"] = y.ndim
            seen["dtype"] = y.dtype
            return y

    batch = dml.Dim("batch", min=1, max=4)
    dml.trace(M(), inputs={"x": dml.TensorSpec([batch, 8])}, constants={"w": rand(8, 6)})
    b, k = seen["x"]
    assert isinstance(b, dml.SymDim) and str(b) == "batch" and k == 8
    assert seen["y"][1] == 6 and seen["y"][0] == b
    assert seen["ndim"] == 2 and seen["dtype"] == "float32"
    with pytest.raises(TypeError, match="no value at trace time"):
        int(b)


def test_symdim_arithmetic_in_reshape():
    batch = dml.Dim("batch", min=1, max=4)
    seq = dml.Dim("seq", min=1, max=16)
    seen = {}

    def fwd(x):
        b, s, f = x.shape
        flat = x.reshape(b * s, f)
        seen["flat"] = flat.shape
        heads = flat.reshape([b, s, 2, f // 2])
        seen["heads"] = heads.shape
        back = dml.ops.reshape(heads.permute(0, 2, 1, 3), [b * 2, -1, f // 2])
        seen["back"] = back.shape
        return back

    spec = dml.trace(fwd, inputs={"x": dml.TensorSpec([batch, seq, 8])})
    assert seen["flat"][0] == seen["heads"][0] * seen["heads"][1]
    assert seen["flat"][1] == 8 and seen["heads"][3] == 4
    assert seen["back"][0] == 2 * batch
    x = rand(3, 5, 8)
    y = dml.reference(spec, {"x": x})["output"]
    np.testing.assert_array_equal(y, x.reshape(3, 5, 2, 4).transpose(0, 2, 1, 3).reshape(6, 5, 4))


def test_symdim_values():
    n = dml.Dim("n", min=1, max=8)
    s = n * 2
    assert isinstance(s, dml.SymDim) and s == 2 * n and s != n
    assert (s - s) == 0 and isinstance(s - s, int)
    assert sorted(s.dims) == ["n"]


# ---- tensor operators ------------------------------------------------------------------------------

def test_operators_with_scalars_and_comparisons():
    def fwd(x, y):
        a = (x + 1.0) * 2 - y / 4 + x ** 2
        b = -a
        c = dml.ops.where(x > y, a, b)
        d = dml.ops.where(x.eq(y) , 0.0, c)
        return {"a": a, "c": c, "d": d, "le": x <= y}

    spec = dml.trace(fwd, inputs={"x": dml.TensorSpec([2, 3]), "y": dml.TensorSpec([2, 3])})
    assert spec.output_names == ["a", "c", "d", "le"]
    x, y = rand(2, 3), rand(2, 3)
    out = dml.reference(spec, {"x": x, "y": y})
    a = (x + 1.0) * 2 - y / 4 + x ** 2
    np.testing.assert_allclose(out["a"], a, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["c"], np.where(x > y, a, -a), rtol=1e-5, atol=1e-5)
    assert out["le"].dtype == np.bool_ and (out["le"] == (x <= y)).all()


def test_scalar_takes_the_tensor_dtype():
    def fwd(x):
        return x * 3 + 1

    spec = dml.trace(fwd, inputs={"x": dml.TensorSpec([4], "int32")})
    assert spec.outputs[0]["dtype"] == "int32"
    x = np.arange(4, dtype=np.int32)
    np.testing.assert_array_equal(dml.reference(spec, {"x": x})["output"], x * 3 + 1)
    with pytest.raises(ValueError, match="fraction"):
        dml.trace(lambda x: x * 0.5, inputs={"x": dml.TensorSpec([4], "int32")})


def test_matmul_variants():
    shapes = {}

    def fwd(a, w, b3):
        shapes["2x2"] = (a @ w).shape
        shapes["3x3"] = (b3 @ b3.transpose(1, 2)).shape
        shapes["3x2"] = (b3 @ w).shape
        return a @ w, b3 @ b3.transpose(1, 2)

    spec = dml.trace(fwd, inputs={"a": dml.TensorSpec([2, 4]), "w": dml.TensorSpec([4, 5]),
                                  "b3": dml.TensorSpec([3, 2, 4])})
    assert shapes == {"2x2": (2, 5), "3x3": (3, 2, 2), "3x2": (3, 2, 5)}
    ops = [n["op"] for n in spec.nodes()]
    assert "gemm_rrr" in ops and "bmm_rrr" in ops
    a, w, b3 = rand(2, 4), rand(4, 5), rand(3, 2, 4)
    out = dml.reference(spec, {"a": a, "w": w, "b3": b3})
    np.testing.assert_allclose(out["output0"], a @ w, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["output1"], b3 @ b3.transpose(0, 2, 1), rtol=1e-5, atol=1e-5)


def test_basic_indexing():
    def fwd(x):
        return {"s": x[:, 1:3], "i": x[0], "last": x[..., -1], "new": x[:, None, 2], "step": x[:, ::2]}

    spec = dml.trace(fwd, inputs={"x": dml.TensorSpec([3, 5])})
    x = rand(3, 5)
    out = dml.reference(spec, {"x": x})
    np.testing.assert_array_equal(out["s"], x[:, 1:3])
    np.testing.assert_array_equal(out["i"], x[0])
    np.testing.assert_array_equal(out["last"], x[..., -1])
    np.testing.assert_array_equal(out["new"], x[:, None, 2])
    np.testing.assert_array_equal(out["step"], x[:, ::2])
    with pytest.raises(IndexError, match="out of range"):
        dml.trace(lambda x: x[7], inputs={"x": dml.TensorSpec([3, 5])})


def test_wrappers_split_concat_cast_clamp():
    def fwd(x):
        a, b = dml.ops.split(x, sizes=[2, 3], axis=1)
        c = dml.ops.concatenate([b, a], axis=1)
        h = dml.ops.cast(c, np.float16)
        return {"c": c, "h": h, "k": dml.ops.clamp(x, min=-0.5), "r": dml.ops.reduce_sum(x, 1, keepdim=True)}

    spec = dml.trace(fwd, inputs={"x": dml.TensorSpec([2, 5])})
    x = rand(2, 5)
    out = dml.reference(spec, {"x": x})
    want = np.concatenate([x[:, 2:], x[:, :2]], axis=1)
    np.testing.assert_array_equal(out["c"], want)
    assert out["h"].dtype == np.float16
    np.testing.assert_array_equal(out["h"], want.astype(np.float16))
    np.testing.assert_array_equal(out["k"], np.maximum(x, -0.5))
    np.testing.assert_allclose(out["r"], x.sum(1, keepdims=True), rtol=1e-5)


def test_generated_ops_have_registry_docs():
    for name in dml.ops.names():
        fn = getattr(dml.ops, name)
        assert callable(fn) and fn.__doc__, name
    assert "gemm" in dml.ops.gemm_rcr_bias.__doc__.lower() or dml.ops.gemm_rcr_bias.__doc__
    assert "axis" in dml.ops.softmax.__doc__


def test_states_in_trace():
    def fwd(x):
        acc = dml.state("acc", [4])
        total = acc + x
        dml.ops.state_assign(acc, total)
        return dml.ops.output(total, "total")

    spec = dml.trace(fwd, inputs={"x": dml.TensorSpec([4])})
    assert [s["name"] for s in spec.states] == ["acc"]
    x = np.arange(4, dtype=np.float32)
    outs, states = dml.reference(spec, {"x": x}, states={"acc": np.ones(4, np.float32)}, return_states=True)
    np.testing.assert_array_equal(outs["total"], x + 1)
    np.testing.assert_array_equal(states["acc"], x + 1)


def test_bfloat16_reference_accepts_float32_and_returns_float32():
    spec = dml.trace(lambda x: x * 2, inputs={"x": dml.TensorSpec([3], "bfloat16")})
    y = dml.reference(spec, {"x": np.array([1.0, 1.00390625, 3.0], np.float32)})["output"]
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, [2.0, 2.0, 6.0])  # 1.00390625 rounds to 1.0 (ties to even)
    with pytest.raises(ValueError, match="float64"):
        dml.reference(spec, {"x": np.ones(3)})


def test_no_outputs_is_an_error():
    with pytest.raises(ValueError, match="no outputs"):
        dml.trace(lambda x: None, inputs={"x": dml.TensorSpec([3])})


def test_traces_in_parallel_threads_are_independent():
    errors, specs = [], {}

    def work(i):
        try:
            specs[i] = dml.trace(lambda x: x * float(i), inputs={"x": dml.TensorSpec([2])}, name=f"m{i}")
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    run_threads(work, 4)
    assert not errors
    for i, s in specs.items():
        np.testing.assert_array_equal(dml.reference(s, {"x": np.ones(2, np.float32)})["output"], [i, i])


def test_nn_layers_trace_with_torch_names():
    mha = dml.nn.MultiheadAttention(8, 2)
    assert dict(mha.state_dict_shapes()) == {
        "in_proj_weight": ((24, 8), "float32"), "in_proj_bias": ((24,), "float32"),
        "out_proj.weight": ((8, 8), "float32"), "out_proj.bias": ((8,), "float32")}
    layer = dml.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16)
    assert sorted(n for n, _ in layer.named_parameters()) == sorted([
        "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
        "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias",
        "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"])
