"""Per-node timing: dinoml_session_run_timed through Python (Session.profile_nodes) and the CLI
(`dinoml benchmark --per-node`), against the untimed run and the artifact's node list."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import dinoml as dml

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("DINOML_BUILD_DIR", ROOT / "build"))
rng = np.random.default_rng(7)
W1 = rng.standard_normal((64, 256)).astype(np.float32) * 0.1
B1 = rng.standard_normal(256).astype(np.float32)
W2 = rng.standard_normal((256, 32)).astype(np.float32) * 0.1
B2 = rng.standard_normal(32).astype(np.float32)


class Mlp(dml.Module):
    def __init__(self):
        self.w1, self.b1 = dml.Parameter([64, 256]), dml.Parameter([256])
        self.w2, self.b2 = dml.Parameter([256, 32]), dml.Parameter([32])

    def forward(self, x):
        h = dml.ops.relu(dml.ops.gemm_rrr_bias(x, self.w1, self.b1))
        y = dml.ops.softmax(dml.ops.gemm_rrr_bias(h, self.w2, self.b2), -1)
        return dml.ops.output(y, "y")


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    batch = dml.Dim("batch", min=1, max=64, typical=32, buckets=(8, 64))
    spec = dml.trace(Mlp(), inputs={"x": dml.TensorSpec([batch, 64])},
                     constants={"w1": W1, "b1": B1, "w2": W2, "b2": B2}, name="mlp_timing")
    return dml.compile(spec, target="cpu", out=str(tmp_path_factory.mktemp("timing") / "mlp"))


def test_profile_nodes_matches_graph_and_untimed_run(mlp):
    s = dml.runtime.load(mlp.path).create_session()
    x = rng.standard_normal((32, 64)).astype(np.float32)
    want = s.run_numpy(x=x)["y"]
    got, seconds = s._s.run_timed({"x": x}, 3)
    np.testing.assert_array_equal(got["y"], want)  # timing does not change the results
    with open(os.path.join(mlp.path, "kernel_manifest.json")) as f:
        nodes = json.load(f)
    assert len(seconds) == len(nodes) >= 3
    rows = s.profile_nodes(x=x, runs=5)
    assert [r["node"] for r in rows] == [n["node"] for n in nodes]
    assert all(r["seconds"] >= 0.0 for r in rows)
    gemms = [r for r in rows if r["op"].startswith("gemm")]
    assert len(gemms) == 2 and all(r["seconds"] > 0.0 for r in gemms)
    assert all(r["kernel"] for r in gemms)


def test_profile_nodes_argument_errors(mlp):
    s = dml.runtime.load(mlp.path).create_session()
    with pytest.raises(ValueError, match="runs must be >= 1"):
        s._s.run_timed({"x": np.zeros((8, 64), np.float32)}, 0)
    with pytest.raises(ValueError, match="batch"):  # the usual input validation still applies
        s.profile_nodes(x=np.zeros((65, 64), np.float32))


@pytest.mark.skipif(not (BUILD / "dinoml").exists(), reason="C++ CLI not built")
def test_cli_benchmark_per_node(mlp):
    r = subprocess.run([str(BUILD / "dinoml"), "benchmark", mlp.path, "-n", "5", "--per-node", "--top", "0"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "per node (5 timed runs" in r.stdout and "by op" in r.stdout
    with open(os.path.join(mlp.path, "kernel_manifest.json")) as f:
        for n in json.load(f):
            assert n["node"] in r.stdout
