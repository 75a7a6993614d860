"""dml.from_onnx: PyTorch → ONNX (torch.onnx.export, dynamic batch) → DinoML artifact, compared
with PyTorch at every batch bucket bound; error reporting of the importer."""
from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest

import dinoml as dml

torch = pytest.importorskip("torch")


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(12, 32)
        self.fc2 = torch.nn.Linear(32, 5)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        return torch.softmax(self.fc2(h), dim=-1), h.reshape(h.shape[0], 4, 8).sum(dim=1)


@pytest.fixture(scope="module")
def mlp_onnx(tmp_path_factory):
    torch.manual_seed(0)
    m = Mlp().eval()
    path = str(tmp_path_factory.mktemp("onnx") / "mlp.onnx")
    with torch.no_grad():
        torch.onnx.export(m, (torch.randn(2, 12),), path, input_names=["x"], output_names=["p", "s"],
                          dynamic_axes={"x": {0: "batch"}, "p": {0: "batch"}, "s": {0: "batch"}}, opset_version=13)
    return m, path


def test_from_onnx_matches_torch_across_buckets(mlp_onnx, tmp_path):
    m, path = mlp_onnx
    spec = dml.from_onnx(path, dims={"batch": (1, 8, [2, 8])})
    assert [d.name for d in spec.dims] == ["batch"]
    art = dml.compile(spec, target="cpu", out=str(tmp_path / "a"))
    sess = dml.runtime.load(art.path).create_session()
    for b in (1, 2, 5, 8):
        x = torch.randn(b, 12)
        with torch.no_grad():
            p, s = m(x)
        out = sess.run_numpy({"x": x.numpy()})
        np.testing.assert_allclose(out["p"], p.numpy(), atol=1e-5, rtol=1e-4)
        np.testing.assert_allclose(out["s"], s.numpy(), atol=1e-4, rtol=1e-4)


def test_matmul_add_fuses_into_gemm_bias(mlp_onnx, tmp_path):
    _, path = mlp_onnx
    art = dml.compile(dml.from_onnx(path, dims={"batch": (1, 4)}), target="cpu", out=str(tmp_path / "a"))
    graph = json.load(open(os.path.join(art.path, "graph.dinoir.json")))
    ops = [n["op"] for n in graph["nodes"]]
    assert any(op.startswith("gemm_r") and "bias" in op for op in ops), ops


def test_missing_dim_bound_and_malformed_file(mlp_onnx, tmp_path):
    _, path = mlp_onnx
    with pytest.raises(dml.OnnxImportError, match="--dim batch="):
        dml.from_onnx(path)
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(open(path, "rb").read()[:100])
    with pytest.raises(dml.OnnxImportError, match="bad.onnx"):
        dml.from_onnx(str(bad), dims={"batch": (1, 4)})


def test_cli_compile_and_validate_against_onnx(mlp_onnx, tmp_path):
    _, path = mlp_onnx
    exe = os.path.join(os.environ.get("DINOML_BUILD_DIR", "build"), "dinoml")
    if not os.path.exists(exe):
        pytest.skip("dinoml executable not built")
    out = str(tmp_path / "cli")
    r = subprocess.run([exe, "compile", path, "--target", "cpu", "--dim", "batch=1:8:4,8", "--out", out],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([exe, "validate", out, "--against", path], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "validation passed" in r.stdout
    r = subprocess.run([exe, "compile", path, "--target", "cpu", "--out", out], capture_output=True, text=True)
    assert r.returncode != 0 and "--dim batch=" in r.stderr


NODE_DATA = "/usr/share/libonnx-testdata/data/node"


@pytest.mark.skipif(not os.path.isdir(NODE_DATA), reason="libonnx-testdata not installed")
def test_truncated_and_corrupted_models_give_clear_errors(tmp_path, capfd):
    """Every mutation of real models either imports or raises OnnxImportError with a message;
    nothing crashes and protobuf never reports an internal CHECK failure."""
    import glob
    import random

    rng = random.Random(5)
    files = sorted(glob.glob(os.path.join(NODE_DATA, "*", "model.onnx")))[::7]
    errors = 0
    for f in files:
        data = open(f, "rb").read()
        for trial in range(3):
            b = bytearray(data)
            if trial == 0:
                b = b[: rng.randrange(1, len(b))]
            else:
                for _ in range(rng.randint(1, 8)):
                    b[rng.randrange(len(b))] = rng.randrange(256)
            p = tmp_path / "m.onnx"
            p.write_bytes(bytes(b))
            try:
                dml.from_onnx(str(p))
            except dml.OnnxImportError as e:
                assert str(e).strip()
                errors += 1
    assert errors > len(files)
    assert "FATAL" not in capfd.readouterr().err
