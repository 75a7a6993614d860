"""dml.nn conv layers vs torch.nn with the torch module's state_dict (parameter names must match),
dynamic batch; ResNet-18 (examples/resnet18.py) vs torchvision; front-end errors name the problem."""
import os
import sys

import numpy as np
import pytest

import dinoml as dml
from dinoml import nn

torch = pytest.importorskip("torch")

_KEEP = []


def _run(spec, tmp_path, feeds_list):
    art = dml.compile(spec, target="cpu", out=str(tmp_path / "art"))
    a = dml.runtime.load(art.path)
    s = a.create_session()
    _KEEP.append((a, s))
    return [s.run_numpy(f)["output"] for f in feeds_list]


def _add_layers(m, T):
    """The same layers from dml.nn or torch.nn (T), so both modules have the same parameter names."""
    m.conv = T.Conv2d(3, 8, 3, stride=2, padding=1)
    m.bn = T.BatchNorm2d(8)
    m.relu = T.ReLU()
    m.dw = T.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)
    m.pool = T.MaxPool2d(3, stride=2, padding=1, ceil_mode=True)
    m.avg = T.AvgPool2d(2, count_include_pad=False)
    m.up = T.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
    m.pw = T.Conv2d(8, 6, 1)
    m.gap = T.AdaptiveAvgPool2d((1, 1))
    m.flat = T.Flatten()
    m.fc = T.Linear(6, 4)


def _forward(m, x):
    y = m.relu(m.bn(m.conv(x)))
    y = m.pool(m.dw(y) + y)
    y = m.pw(m.up(m.avg(y)))
    return m.fc(m.flat(m.gap(y)))


class Net(dml.Module):
    def __init__(self):
        _add_layers(self, nn)

    forward = _forward


class TorchNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        _add_layers(self, torch.nn)

    forward = _forward


def test_nn_layers_load_torch_state_dict(tmp_path):
    torch.manual_seed(0)
    tm = TorchNet().eval()
    with torch.no_grad():
        tm.bn.running_mean.uniform_(-0.2, 0.2)
        tm.bn.running_var.uniform_(0.5, 1.5)
    b = dml.Dim("b", 1, 6, buckets=(2, 6))
    spec = dml.trace(Net(), inputs={"x": dml.TensorSpec([b, 3, 21, 19], "float32")},
                     constants={k: v.numpy() for k, v in tm.state_dict().items()}, name="convnet")
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((n, 3, 21, 19)).astype(np.float32) for n in (1, 2, 5)]
    for x, y in zip(xs, _run(spec, tmp_path, [{"x": x} for x in xs])):
        with torch.no_grad():
            want = tm(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)


def test_resnet18_matches_torchvision(tmp_path):
    pytest.importorskip("torchvision")
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
    import resnet18 as ex
    tm = ex.torch_model()
    spec = ex.build_spec(tm.state_dict())
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal((n, 3, 224, 224)).astype(np.float32) for n in (1, 3)]
    for x, y in zip(xs, _run(spec, tmp_path, [{"x": x} for x in xs])):
        with torch.no_grad():
            want = tm(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


def _trace_one(fn, shape=(1, 4, 8, 8)):
    class M(dml.Module):
        def forward(self, x):
            return fn(x)
    return dml.trace(M(), inputs={"x": dml.TensorSpec(list(shape), "float32")})


def test_errors_name_the_problem():
    w = np.zeros((6, 3, 3, 3), np.float32)
    with pytest.raises(ValueError, match="conv2d.*channels of x"):
        _trace_one(lambda x: dml.ops.conv2d(x, w))  # x has 4 channels
    with pytest.raises(ValueError, match="does not fit"):
        _trace_one(lambda x: dml.ops.conv2d(x, np.zeros((2, 4, 9, 9), np.float32)))
    with pytest.raises(ValueError, match="padding must hold 4 values"):
        _trace_one(lambda x: dml.ops.call("conv2d", [x, np.zeros((2, 4, 3, 3), np.float32)], {"padding": [1, 1, 1]}))
    with pytest.raises(ValueError, match="groups"):
        _trace_one(lambda x: dml.ops.conv2d(x, np.zeros((5, 2, 3, 3), np.float32), groups=2))
    with pytest.raises(ValueError, match="mode must be"):
        _trace_one(lambda x: dml.ops.call("interpolate", [x], {"mode": "cubic", "size": [4, 4]}))
    with pytest.raises(ValueError, match="needs `size`"):
        _trace_one(lambda x: dml.ops.call("interpolate", [x], {}))
    with pytest.raises(ValueError, match="only output_size"):
        nn.AdaptiveAvgPool2d((2, 2))
