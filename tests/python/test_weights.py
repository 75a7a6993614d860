"""Weights without recompiling (docs/deploy.md): a model compiled once runs with weights A, is
swapped to B in place and from a safetensors file, and then gives the outputs of the model compiled
with B bit for bit, also while 8 threads keep running it; external weights; export-weights; folded
constants refused with the reason."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import dinoml as dml
import dinoml.weights

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def weights(seed):
    rng = np.random.default_rng(seed)
    return {"w1": rng.standard_normal((16, 32)).astype(np.float32),  # gemm_rrr: prepacked at init
            "b1": rng.standard_normal(32).astype(np.float32),
            "w2": rng.standard_normal((8, 32)).astype(np.float32)}   # gemm_rcr: [N, K]


class Mlp(dml.Module):
    def __init__(self):
        self.w1 = dml.Parameter([16, 32])
        self.b1 = dml.Parameter([32])
        self.w2 = dml.Parameter([8, 32])

    def forward(self, x):
        h = dml.ops.relu(dml.ops.gemm_rrr_bias(x, self.w1, self.b1))
        return dml.ops.output(dml.ops.gemm_rcr(h, self.w2), "y")


def spec(w):
    batch = dml.Dim("batch", min=1, max=8, typical=4, buckets=(4, 8))
    return dml.trace(Mlp(), inputs={"x": dml.TensorSpec([batch, 16])}, constants=w, name="mlp")


A, B = weights(1), weights(2)
X = np.random.default_rng(3).standard_normal((8, 16)).astype(np.float32)


@pytest.fixture(scope="module")
def arts(tmp_path_factory):
    d = tmp_path_factory.mktemp("weights")
    return {"a": dml.compile(spec(A), target="cpu", out=str(d / "a")).path,
            "b": dml.compile(spec(B), target="cpu", out=str(d / "b")).path,
            "ext": dml.compile(spec(A), target="cpu", out=str(d / "ext"), weights="external").path,
            "dir": d}


def run(module, x=X):
    return module.create_session().run_numpy({"x": x})["y"]


def test_swap_in_place_and_from_file_equals_compiled_with_b(arts):
    want_a, want_b = run(dml.runtime.load(arts["a"])), run(dml.runtime.load(arts["b"]))
    assert not np.array_equal(want_a, want_b)
    m = dml.runtime.load(arts["a"])
    assert m.weights_policy == "embedded"
    assert m.swappable_constants() == ["b1", "w1", "w2"]
    np.testing.assert_array_equal(run(m), want_a)
    m.set_constants(B)
    np.testing.assert_array_equal(run(m), want_b)
    np.testing.assert_array_equal(m.get_constant("w1"), B["w1"])
    m.set_constant("w1", A["w1"])  # one constant: w1 from A, the rest from B
    mixed = run(m)
    assert not np.array_equal(mixed, want_a) and not np.array_equal(mixed, want_b)
    # From a safetensors file written by the `safetensors` package (an independent writer) when it
    # is installed, else by dinoml.weights.
    fb = str(arts["dir"] / "b.safetensors")
    try:
        from safetensors.numpy import save_file
        save_file(B, fb)
    except ImportError:
        dinoml.weights.save(B, fb)
    m.load_weights(fb)
    np.testing.assert_array_equal(run(m), want_b)
    np.testing.assert_array_equal(run(dml.runtime.load(arts["a"], weights=fb)), want_b)


def test_swap_is_atomic_for_eight_running_threads(arts):
    want_a, want_b = run(dml.runtime.load(arts["a"])), run(dml.runtime.load(arts["b"]))
    m = dml.runtime.load(arts["a"])
    stop = threading.Event()
    seen = {"a": 0, "b": 0, "torn": 0}
    lock = threading.Lock()

    def worker():
        s = m.create_session()
        while not stop.is_set():
            y = s.run_numpy({"x": X})["y"]
            k = "a" if np.array_equal(y, want_a) else "b" if np.array_equal(y, want_b) else "torn"
            with lock:
                seen[k] += 1

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for i in range(40):
        m.set_constants(B if i % 2 == 0 else A)
    stop.set()
    for t in threads:
        t.join()
    assert seen["torn"] == 0, seen
    assert seen["a"] + seen["b"] > 8
    np.testing.assert_array_equal(run(m), want_a)  # the last swap (i = 39) set A


def test_external_weights_and_export(arts, tmp_path):
    ext = arts["ext"]
    assert not os.path.exists(os.path.join(ext, "constants.bin"))
    with pytest.raises(dml.InvalidArgumentError, match="--weights external"):
        dml.runtime.load(ext)
    fa = str(tmp_path / "a.safetensors")
    r = subprocess.run([sys.executable, "-m", "dinoml.cli", "export-weights", arts["a"], fa], capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")))
    assert r.returncode == 0, r.stderr
    assert {k: v.tolist() for k, v in dinoml.weights.load(fa).items()} == {k: v.tolist() for k, v in A.items()}
    m = dml.runtime.load(ext, weights=fa)
    assert m.weights_policy == "external"
    np.testing.assert_array_equal(run(m), run(dml.runtime.load(arts["a"])))
    fb = str(tmp_path / "b.safetensors")
    dinoml.weights.save(B, fb)
    m.load_weights(fb)
    np.testing.assert_array_equal(run(m), run(dml.runtime.load(arts["b"])))
    bad = dict(B, w1=B["w1"][:8])
    dinoml.weights.save(bad, fb)
    with pytest.raises(dml.InvalidArgumentError, match=r"constant 'w1' is float32\[16, 32\]"):
        dml.runtime.load(ext, weights=fb)
    dinoml.weights.save({k: v for k, v in B.items() if k != "b1"}, fb)
    with pytest.raises(dml.InvalidArgumentError, match="lacks 1 constant"):
        dml.runtime.load(ext, weights=fb)


class Folded(dml.Module):
    def __init__(self):
        self.wt = dml.Parameter([32, 16])

    def forward(self, x):
        return dml.ops.output(dml.ops.gemm_rrr(x, dml.ops.transpose(self.wt, 0, 1)), "y")


def test_folded_constants_are_refused_unless_swappable(tmp_path):
    batch = dml.Dim("batch", min=1, max=4, typical=2, buckets=(4,))
    wt = np.random.default_rng(4).standard_normal((32, 16)).astype(np.float32)
    s = dml.trace(Folded(), inputs={"x": dml.TensorSpec([batch, 16])}, constants={"wt": wt}, name="folded")
    m = dml.runtime.load(dml.compile(s, target="cpu", out=str(tmp_path / "f")).path)
    assert m.swappable_constants() == []
    with pytest.raises(dml.InvalidArgumentError, match="folded into other constants at compile time"):
        m.set_constant("wt", wt * 2)
    ms = dml.runtime.load(dml.compile(s, target="cpu", out=str(tmp_path / "s"), weights="swappable").path)
    assert ms.weights_policy == "swappable" and ms.swappable_constants() == ["wt"]
    x = np.random.default_rng(5).standard_normal((3, 16)).astype(np.float32)
    ms.set_constant("wt", wt * 2)
    np.testing.assert_allclose(run(ms, x), x @ (wt * 2).T, rtol=1e-5, atol=1e-5)
