"""Convolution beyond 2-d and symbolic spatial extents (docs/ops.md "Convolution, pooling, resampling").

* ONNX Conv / ConvTranspose / MaxPool / AveragePool / GlobalAveragePool on 1-d inputs (strided
  STFT-like conv, depthwise with dilation, groups, auto_pad SAME_UPPER / SAME_LOWER, ceil_mode,
  count_include_pad) and 3-d inputs (conv3d with strides, asymmetric pads, dilation, groups), each
  graph compiled once, vs ONNX Runtime.
* dml.nn Conv1d / Conv3d / MaxPool1d / AvgPool1d / MaxPool3d / AvgPool3d vs torch.nn with the torch
  module's state_dict.
* A conv / pool / Resize / Reshape / Flatten net with symbolic H and W (buckets), compiled once and
  run at three sizes (between and at bucket bounds) vs ONNX Runtime; the same file with
  dims={"h": int, "w": int} gives the graph of the static model (same hash); a symbolic extent
  that cannot work (SAME padding with stride 2) is a clear error.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import dinoml as dml

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

_KEEP = []
RNG = np.random.default_rng(7)


def _w(*shape, rng=RNG):
    return (rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32)


def _model(path, nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _compile_run(path, dims, feeds_list, tmp_path):
    art = dml.compile(dml.from_onnx(path, dims=dims), target="cpu", out=str(tmp_path / "art"))
    a = dml.runtime.load(art.path)
    s = a.create_session()
    _KEEP.append((a, s))
    return art, [s.run_numpy(f) for f in feeds_list]


def _check_vs_ort(path, outs, feeds_list, got_list, tol=(1e-4, 1e-5)):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for feeds, got in zip(feeds_list, got_list):
        want = dict(zip(outs, sess.run(outs, feeds)))
        for k in outs:
            assert got[k].shape == want[k].shape, (k, got[k].shape, want[k].shape)
            np.testing.assert_allclose(got[k], want[k], rtol=tol[0], atol=tol[1], err_msg=k)


def test_onnx_1d_conv_pool_family_vs_ort(tmp_path):
    C, L = 8, 57
    inits = {"wstft": _w(18, 1, 16), "bstft": _w(18), "wdw": _w(8, 1, 5), "wg": _w(12, 4, 3), "bg": _w(12),
             "wsame": _w(6, 8, 4), "wt": _w(8, 3, 4)}
    N = helper.make_node
    nodes = [
        N("Conv", ["audio", "wstft", "bstft"], ["stft"], strides=[4], pads=[8, 8]),  # STFT as a strided conv
        N("Conv", ["x", "wdw"], ["dw"], group=8, dilations=[2], pads=[4, 3]),
        N("Conv", ["x", "wg", "bg"], ["grouped"], group=2, strides=[3], pads=[0, 2]),
        N("Conv", ["x", "wsame"], ["same_up"], auto_pad="SAME_UPPER", strides=[2]),
        N("Conv", ["x", "wsame"], ["same_lo"], auto_pad="SAME_LOWER", strides=[3]),
        N("ConvTranspose", ["x", "wt"], ["convt"], strides=[2], pads=[1, 0], output_padding=[1]),
        N("MaxPool", ["x"], ["maxp"], kernel_shape=[3], strides=[2], pads=[1, 1], ceil_mode=1),
        N("AveragePool", ["x"], ["avgp"], kernel_shape=[4], strides=[3], pads=[2, 1], count_include_pad=1),
        N("AveragePool", ["x"], ["avgp_same"], kernel_shape=[3], strides=[2], auto_pad="SAME_UPPER"),
        N("GlobalAveragePool", ["x"], ["gap"]),
    ]
    outs = ["stft", "dw", "grouped", "same_up", "same_lo", "convt", "maxp", "avgp", "avgp_same", "gap"]
    path = _model(tmp_path / "m1d.onnx", nodes, [_vi("audio", ["n", 1, 400]), _vi("x", ["n", C, L])],
                  [_vi(o, None) for o in outs], inits)
    feeds = [{"audio": RNG.standard_normal((b, 1, 400)).astype(np.float32),
              "x": RNG.standard_normal((b, C, L)).astype(np.float32)} for b in (1, 3)]
    art, got = _compile_run(path, {"n": (1, 4)}, feeds, tmp_path)
    _check_vs_ort(path, outs, feeds, got)
    graph = json.load(open(os.path.join(art.path, "graph.dinoir.json")))
    assert "conv2d_bias" in {n["op"] for n in graph["nodes"]}


def test_onnx_3d_conv_pool_family_vs_ort(tmp_path):
    inits = {"w": _w(10, 6, 3, 3, 3), "b": _w(10), "wg": _w(8, 3, 1, 3, 2), "wt": _w(6, 4, 2, 3, 3)}
    N = helper.make_node
    nodes = [
        N("Conv", ["v", "w", "b"], ["conv"], strides=[1, 2, 2], pads=[1, 1, 0, 0, 1, 2]),
        N("Conv", ["v", "wg"], ["grouped"], group=2, dilations=[1, 2, 1], pads=[0, 2, 1, 0, 2, 1]),
        N("Conv", ["v", "w"], ["same"], auto_pad="SAME_UPPER", strides=[2, 2, 1]),
        N("ConvTranspose", ["v", "wt"], ["convt"], strides=[1, 2, 2], pads=[0, 1, 1, 0, 1, 0]),
        N("MaxPool", ["v"], ["maxp"], kernel_shape=[2, 3, 3], strides=[1, 2, 2], pads=[0, 1, 1, 1, 1, 1]),
        N("AveragePool", ["v"], ["avgp"], kernel_shape=[2, 2, 3], strides=[2, 2, 2], ceil_mode=1),
        N("GlobalAveragePool", ["v"], ["gap"]),
        N("GlobalMaxPool", ["v"], ["gmp"]),
    ]
    outs = ["conv", "grouped", "same", "convt", "maxp", "avgp", "gap", "gmp"]
    path = _model(tmp_path / "m3d.onnx", nodes, [_vi("v", [2, 6, 5, 9, 11])], [_vi(o, None) for o in outs], inits)
    feeds = [{"v": RNG.standard_normal((2, 6, 5, 9, 11)).astype(np.float32)}]
    art, got = _compile_run(path, {}, feeds, tmp_path)
    _check_vs_ort(path, outs, feeds, got)
    graph = json.load(open(os.path.join(art.path, "graph.dinoir.json")))
    assert {"conv3d", "conv3d_bias"} <= {n["op"] for n in graph["nodes"]}


def test_nn_conv1d_conv3d_pools_vs_torch(tmp_path):
    torch = pytest.importorskip("torch")
    from dinoml import nn
    T = torch.nn

    def add_layers(m, L):  # the same layers from dml.nn or torch.nn (L): the same parameter names
        m.c1 = L.Conv1d(4, 6, 5, stride=2, padding=2)
        m.c1s = L.Conv1d(6, 6, 3, padding="same", dilation=2, groups=3, bias=False)
        m.mp1 = L.MaxPool1d(3, stride=2, padding=1, ceil_mode=True)
        m.ap1 = L.AvgPool1d(2)
        m.c3 = L.Conv3d(3, 5, (2, 3, 3), stride=(1, 2, 1), padding=(1, 0, 1), dilation=(2, 1, 1))
        m.mp3 = L.MaxPool3d(2, stride=(1, 2, 2), padding=1)
        m.ap3 = L.AvgPool3d((1, 2, 2), count_include_pad=False, padding=(0, 1, 1))

    def forward(self, a, v):
        return self.ap1(self.mp1(self.c1s(self.c1(a)))), self.ap3(self.mp3(self.c3(v)))

    class Net(dml.Module):
        def __init__(self):
            add_layers(self, nn)

    class TNet(T.Module):
        def __init__(self):
            super().__init__()
            add_layers(self, T)

    Net.forward = TNet.forward = forward

    torch.manual_seed(0)
    tm = TNet().eval()
    b = dml.Dim("b", 1, 3)
    spec = dml.trace(Net(), inputs={"a": dml.TensorSpec([b, 4, 41], "float32"),
                                    "v": dml.TensorSpec([b, 3, 6, 10, 9], "float32")},
                     constants={k: v.numpy() for k, v in tm.state_dict().items()}, name="convnd")
    art = dml.compile(spec, target="cpu", out=str(tmp_path / "art"))
    rt = dml.runtime.load(art.path)
    sess = rt.create_session()
    for n in (1, 3):
        a = RNG.standard_normal((n, 4, 41)).astype(np.float32)
        v = RNG.standard_normal((n, 3, 6, 10, 9)).astype(np.float32)
        got = sess.run_numpy({"a": a, "v": v})
        with torch.no_grad():
            want = [t.numpy() for t in tm(torch.from_numpy(a), torch.from_numpy(v))]
        got = [got[k] for k in sorted(got)]
        for g_, w_ in zip(got, want):
            np.testing.assert_allclose(g_, w_, rtol=1e-4, atol=1e-5)


def _sym_net(path, h, w):
    """conv s2 → relu → maxpool s2 → conv (SAME, stride 1) → Resize ×2 (nearest) → conv → Resize ×2
    (linear) ; outputs: the map, Reshape [n, C, -1] of it, and Flatten(axis 2) → ReduceMean."""
    r = np.random.default_rng(3)  # the same weights on every call (the static / fixed-dim graphs must match)
    inits = {"w1": _w(8, 3, 3, 3, rng=r), "b1": _w(8, rng=r), "w2": _w(8, 8, 3, 3, rng=r), "w3": _w(4, 8, 1, 1, rng=r),
             "b3": _w(4, rng=r),
             "sc": np.array([1, 1, 2, 2], np.float32), "roi": np.zeros([0], np.float32),
             "shp": np.array([0, 0, -1], np.int64)}
    N = helper.make_node
    nodes = [
        N("Conv", ["img", "w1", "b1"], ["c1"], strides=[2, 2], pads=[1, 1, 1, 1]),
        N("Relu", ["c1"], ["r1"]),
        N("MaxPool", ["r1"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        N("Conv", ["p1", "w2"], ["c2"], auto_pad="SAME_UPPER"),
        N("Resize", ["c2", "roi", "sc"], ["u1"], mode="nearest", coordinate_transformation_mode="asymmetric",
          nearest_mode="floor"),
        N("Conv", ["u1", "w3", "b3"], ["c3"]),
        N("Resize", ["c3", "roi", "sc"], ["map"], mode="linear", coordinate_transformation_mode="half_pixel"),
        N("Reshape", ["map", "shp"], ["seq"]),
        N("Flatten", ["map"], ["flat"], axis=2),
        N("ReduceMean", ["flat"], ["mean"], axes=[1], keepdims=0),
    ]
    outs = ["map", "seq", "mean"]
    return _model(path, nodes, [_vi("img", ["n", 3, h, w])], [_vi(o, None) for o in outs], inits), outs


def test_symbolic_hw_conv_resize_reshape_vs_ort(tmp_path):
    path, outs = _sym_net(tmp_path / "sym.onnx", "h", "w")
    dims = {"n": (1, 2), "h": (16, 96, [48, 96]), "w": (16, 96, [40, 96])}
    sizes = [(1, 16, 16), (2, 37, 61), (1, 96, 73)]  # a bucket's lower bound, between buckets, the max
    feeds = [{"img": RNG.standard_normal((n, 3, h, w)).astype(np.float32)} for n, h, w in sizes]
    art, got = _compile_run(path, dims, feeds, tmp_path)
    _check_vs_ort(path, outs, feeds, got)
    meta = json.load(open(os.path.join(art.path, "metadata.json")))
    assert "h" in json.dumps(meta["inputs"]) and "w" in json.dumps(meta["inputs"])


def test_int_for_a_symbolic_dim_is_a_static_size(tmp_path):
    sym, outs = _sym_net(tmp_path / "sym.onnx", "h", "w")
    static, _ = _sym_net(tmp_path / "static.onnx", 40, 52)
    a = dml.from_onnx(sym, dims={"n": 2, "h": 40, "w": 52}, name="m")
    b = dml.from_onnx(static, dims={"n": 2}, name="m")
    assert a.hash() == b.hash()
    feeds = [{"img": RNG.standard_normal((2, 3, 40, 52)).astype(np.float32)}]
    _, got = _compile_run(sym, {"n": 2, "h": 40, "w": 52}, feeds, tmp_path)
    _check_vs_ort(sym, outs, feeds, got)
    with pytest.raises(RuntimeError, match="img"):
        _KEEP[-1][1].run_numpy({"img": RNG.standard_normal((2, 3, 41, 52)).astype(np.float32)})


def test_symbolic_extent_errors_name_node_and_fix(tmp_path):
    N = helper.make_node
    path = _model(tmp_path / "bad.onnx", [N("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2])],
                  [_vi("x", [1, 3, "h", "w"])], [_vi("y", None)], {"w": _w(4, 3, 3, 3)})
    with pytest.raises(dml.OnnxImportError, match=r"stride 2 on the symbolic spatial extent 'h'.*dims="):
        dml.from_onnx(path, dims={"h": (8, 64), "w": (8, 64)})
    with pytest.raises(dml.OnnxImportError, match="extent 'w'"):
        dml.from_onnx(path, dims={"h": 32, "w": (8, 64)})  # h fixed is fine; w is still symbolic
    dml.from_onnx(path, dims={"h": 32, "w": 30})


def test_conv3d_float16_vs_torch(tmp_path):
    torch = pytest.importorskip("torch")
    w = _w(8, 2, 3, 2, 3).astype(np.float16)
    b = _w(8).astype(np.float16)

    class M(dml.Module):
        def __init__(self):
            self.w = dml.Parameter([8, 2, 3, 2, 3], "float16")
            self.b = dml.Parameter([8], "float16")

        def forward(self, v):
            return dml.ops.conv3d(v, self.w, self.b, stride=(2, 1, 2), padding=(1, 0, 1, 0, 1, 2), groups=2)

    h = dml.Dim("h", 4, 20, buckets=(10, 20))
    spec = dml.trace(M(), inputs={"v": dml.TensorSpec([1, 4, 7, h, 9], "float16")}, constants={"w": w, "b": b})
    art = dml.compile(spec, target="cpu", out=str(tmp_path / "art"))
    rt = dml.runtime.load(art.path)
    sess = rt.create_session()
    for hh in (4, 13):
        v = RNG.standard_normal((1, 4, 7, hh, 9)).astype(np.float16)
        got = list(sess.run_numpy({"v": v}).values())[0]
        F = torch.nn.functional
        want = F.conv3d(F.pad(torch.from_numpy(v).double(), (1, 2, 0, 1, 1, 0)), torch.from_numpy(w).double(),
                        torch.from_numpy(b).double(), stride=(2, 1, 2), groups=2).numpy()
        assert got.dtype == np.float16 and got.shape == want.shape
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-2, atol=1e-2)
