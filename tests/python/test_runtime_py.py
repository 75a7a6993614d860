"""dinoml.runtime from Python: running artifacts, input validation messages, threads, states,
fp16 / bf16 handling, torch interop and the CLI."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import dinoml as dml
from testkit import Linear, run_threads

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
W = np.random.default_rng(1).standard_normal((8, 6)).astype(np.float32)
B = np.random.default_rng(2).standard_normal(6).astype(np.float32)


@pytest.fixture(scope="module")
def linear_artifact(tmp_path_factory):
    batch = dml.Dim("batch", min=1, max=4, typical=3, buckets=(1, 3, 4))
    spec = dml.trace(Linear(), inputs={"x": dml.TensorSpec([batch, 8])}, constants={"weight": W, "bias": B},
                     name="linear")
    return dml.compile(spec, target="cpu", out=str(tmp_path_factory.mktemp("rt") / "linear"))


@pytest.fixture
def session(linear_artifact):
    return dml.runtime.load(linear_artifact.path).create_session()


def x_of(b, seed=0):
    return np.random.default_rng(seed).standard_normal((b, 8)).astype(np.float32)


def test_run_numpy_every_bucket(session):
    for b in (1, 2, 3, 4):
        x = x_of(b, b)
        y = session.run_numpy({"x": x})["y"]
        assert y.dtype == np.float32 and y.shape == (b, 6)
        np.testing.assert_allclose(y, x @ W + B, rtol=1e-5, atol=1e-5)
    assert session.arena_bytes >= 0
    np.testing.assert_allclose(session.run_numpy(x=x_of(2))["y"], x_of(2) @ W + B, rtol=1e-5, atol=1e-5)


def test_module_info(linear_artifact):
    m = dml.runtime.load(linear_artifact.path)
    assert m.name == "linear" and len(m.graph_hash) == 64
    (x,) = m.inputs
    assert x.name == "x" and x.dtype == "float32" and x.shape == ("batch", 8)
    assert x.axes == (("batch", 1, 4), (None, 8, 8))
    assert [o.name for o in m.outputs] == ["y"] and m.states == []
    assert "linear" in repr(m)


def test_artifact_files(linear_artifact):
    assert linear_artifact.manifest["graph_hash"] == linear_artifact.graph_hash
    assert linear_artifact.metadata["inputs"][0]["name"] == "x"
    assert isinstance(linear_artifact.kernel_manifest, list)


def test_non_contiguous_input_is_accepted(session):
    x = np.asfortranarray(x_of(3))
    assert not x.flags.c_contiguous
    np.testing.assert_allclose(session.run_numpy({"x": x})["y"], x @ W + B, rtol=1e-5, atol=1e-5)
    wide = np.random.default_rng(3).standard_normal((3, 16)).astype(np.float32)
    np.testing.assert_allclose(session.run_numpy({"x": wide[:, ::2]})["y"], wide[:, ::2] @ W + B, rtol=1e-5,
                               atol=1e-5)


def test_wrong_input_name(session):
    with pytest.raises(ValueError) as ei:
        session.run_numpy({"z": x_of(2)})
    assert "z" in str(ei.value) or "x" in str(ei.value)
    assert isinstance(ei.value, dml.DinoMLRuntimeError)


def test_wrong_dtype(session):
    with pytest.raises(ValueError) as ei:
        session.run_numpy({"x": x_of(2).astype(np.float16)})
    msg = str(ei.value)
    assert "'x'" in msg or "x" in msg
    assert "float16" in msg or "float32" in msg
    with pytest.raises(ValueError, match="float64"):
        session.run_numpy({"x": x_of(2).astype(np.float64)})


def test_wrong_rank(session):
    with pytest.raises(ValueError) as ei:
        session.run_numpy({"x": x_of(2).reshape(2, 2, 4)})
    assert "x" in str(ei.value) and "rank" in str(ei.value).lower()


def test_dim_out_of_bounds(session):
    with pytest.raises(ValueError) as ei:
        session.run_numpy({"x": x_of(5)})
    msg = str(ei.value)
    assert "batch" in msg and "5" in msg


def test_static_extent_mismatch(session):
    with pytest.raises(ValueError) as ei:
        session.run_numpy({"x": np.zeros((2, 7), np.float32)})
    assert "x" in str(ei.value) and "7" in str(ei.value)


def test_load_missing_artifact(tmp_path):
    with pytest.raises(dml.DinoMLRuntimeError) as ei:
        dml.runtime.load(str(tmp_path / "nope"))
    assert "nope" in str(ei.value)
    assert ei.value.status


def test_threads_share_one_module(linear_artifact):
    module = dml.runtime.load(linear_artifact.path)
    feeds = [x_of(1 + i % 4, seed=i) for i in range(8)]
    want = [module.create_session().run_numpy({"x": f})["y"] for f in feeds]
    results = [[] for _ in feeds]
    errors = []
    start = threading.Barrier(8)

    def work(i):
        try:
            s = module.create_session()
            start.wait()
            for _ in range(50):
                results[i].append(s.run_numpy({"x": feeds[i]})["y"])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    run_threads(work, 8)
    assert not errors, errors
    for i in range(8):
        assert len(results[i]) == 50
        for r in results[i]:
            np.testing.assert_array_equal(r, want[i])


def test_one_session_shared_by_threads_is_serialised(session):
    feeds = [x_of(1 + i % 4, seed=i) for i in range(4)]
    want = [session.run_numpy({"x": f})["y"] for f in feeds]
    bad = []

    def work(i):
        for _ in range(30):
            if not np.array_equal(session.run_numpy({"x": feeds[i]})["y"], want[i]):
                bad.append(i)

    run_threads(work, 4)
    assert not bad


# ---- states ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def counter_artifact(tmp_path_factory):
    def fwd(x):
        acc = dml.state("acc", [4])
        total = acc + x
        dml.ops.state_assign(acc, total)
        return dml.ops.output(total, "total")

    spec = dml.trace(fwd, inputs={"x": dml.TensorSpec([4])}, name="counter")
    return dml.compile(spec, target="cpu", out=str(tmp_path_factory.mktemp("rt") / "counter"))


def test_states(counter_artifact):
    m = dml.runtime.load(counter_artifact.path)
    assert [s.name for s in m.states] == ["acc"] and m.states[0].shape == (4,)
    s = m.create_session()
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(s.get_state("acc"), np.zeros(4))
    s.run_numpy({"x": x})
    out = s.run_numpy({"x": x})["total"]
    np.testing.assert_array_equal(out, 2 * x)
    np.testing.assert_array_equal(s.get_state("acc"), 2 * x)
    s.set_state("acc", np.full(4, 10, np.float32))
    np.testing.assert_array_equal(s.run_numpy({"x": x})["total"], 10 + x)
    s.reset_states()
    np.testing.assert_array_equal(s.get_state("acc"), np.zeros(4))
    # A second session has its own states.
    np.testing.assert_array_equal(m.create_session().get_state("acc"), np.zeros(4))
    with pytest.raises(ValueError, match="acc"):
        s.set_state("acc", np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="nope"):
        s.get_state("nope")


# ---- fp16 / bf16 / torch -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def halves_artifact(tmp_path_factory):
    def fwd(h, b):
        return {"h2": h * 2, "b2": b * 2, "bf": dml.ops.cast(h, "float32")}

    spec = dml.trace(fwd, inputs={"h": dml.TensorSpec([3], "float16"), "b": dml.TensorSpec([3], "bfloat16")},
                     name="halves")
    return dml.compile(spec, target="cpu", out=str(tmp_path_factory.mktemp("rt") / "halves"))


def test_fp16_and_bf16(halves_artifact):
    s = dml.runtime.load(halves_artifact.path).create_session()
    h = np.array([0.5, 1.5, -2.0], np.float16)
    b = np.array([1.0, 1.00390625, -3.0], np.float32)
    out = s.run_numpy({"h": h, "b": b})
    assert out["h2"].dtype == np.float16 and out["b2"].dtype == np.float32
    np.testing.assert_array_equal(out["h2"], h * 2)
    np.testing.assert_array_equal(out["b2"], [2.0, 2.0, -6.0])  # bf16 rounding to nearest even
    bits = (np.array([1.0, 2.0, 3.0], np.float32).view(np.uint32) >> 16).astype(np.uint16)
    out = s.run_numpy({"h": h, "b": bits})
    np.testing.assert_array_equal(out["b2"], [2.0, 4.0, 6.0])
    with pytest.raises(ValueError):
        s.run_numpy({"h": h.astype(np.float32), "b": b})  # no silent fp32 -> fp16 conversion


def test_run_torch(halves_artifact):
    torch = pytest.importorskip("torch")
    s = dml.runtime.load(halves_artifact.path).create_session()
    out = s.run_torch({"h": torch.tensor([1.0, 2.0, 3.0], dtype=torch.float16),
                       "b": torch.tensor([1.0, 2.0, 3.0], dtype=torch.bfloat16)})
    assert out["h2"].dtype == torch.float16 and out["b2"].dtype == torch.bfloat16
    assert torch.equal(out["b2"], torch.tensor([2.0, 4.0, 6.0], dtype=torch.bfloat16))
    assert torch.equal(out["bf"], torch.tensor([1.0, 2.0, 3.0]))


def test_run_torch_zero_copy_cpu(linear_artifact):
    """Inputs are read in place and outputs written straight into the tensors run_torch returns:
    the session allocates no output memory of its own (a run_numpy does)."""
    torch = pytest.importorskip("torch")
    m = dml.runtime.load(linear_artifact.path)
    s = m.create_session()
    for b in (1, 3, 4):
        x = torch.from_numpy(x_of(b, b))
        y = s.run_torch(x=x)["y"]
        assert y.dtype == torch.float32 and tuple(y.shape) == (b, 6) and y.device.type == "cpu"
        np.testing.assert_allclose(y.numpy(), x_of(b, b) @ W + B, rtol=1e-5, atol=1e-5)
    assert s.memory()["output_bytes"] == 0
    s2 = m.create_session()
    s2.run_numpy(x=x_of(4))
    assert s2.memory()["output_bytes"] > 0
    # a non-contiguous view is made contiguous first
    xt = torch.from_numpy(np.ascontiguousarray(x_of(3, 7).T)).t()
    assert not xt.is_contiguous()
    np.testing.assert_allclose(s.run_torch(x=xt)["y"].numpy(), x_of(3, 7) @ W + B, rtol=1e-5, atol=1e-5)
    # run_dlpack: any DLPack producer (here a torch tensor's capsule consumer path via numpy)
    y = s.run_dlpack(x=np.ascontiguousarray(x_of(2, 9)))["y"] if hasattr(np.ndarray, "__dlpack__") else None
    if y is not None:
        np.testing.assert_allclose(y.numpy(), x_of(2, 9) @ W + B, rtol=1e-5, atol=1e-5)


def test_run_torch_errors(linear_artifact, halves_artifact):
    torch = pytest.importorskip("torch")
    s = dml.runtime.load(linear_artifact.path).create_session()
    with pytest.raises(dml.InvalidArgumentError, match="'x' has dtype float16 but the model expects float32"):
        s.run_torch(x=torch.zeros(2, 8, dtype=torch.float16))
    with pytest.raises(dml.InvalidArgumentError, match="float64, which DinoML does not have; the model expects float32"):
        s.run_torch(x=torch.zeros(2, 8, dtype=torch.float64))
    with pytest.raises(dml.InvalidArgumentError, match="not a torch.Tensor"):
        s.run_torch(x=x_of(2))
    with pytest.raises(dml.InvalidArgumentError, match="complex64, which DinoML does not have"):
        s.run_torch(x=torch.zeros(2, 8, dtype=torch.complex64))
    with pytest.raises(dml.InvalidArgumentError, match="batch"):  # out of the Dim's range: the runtime's message
        s.run_torch(x=torch.zeros(5, 8))
    with pytest.raises(dml.InvalidArgumentError, match="nope"):
        s.run_torch(x=torch.zeros(2, 8), nope=torch.zeros(1))
    with pytest.raises(dml.InvalidArgumentError, match="CPU artifact"):
        s._s.run_pointers([("x", 1 << 20, 64, "float32", [2, 8], 1)], [])
    with pytest.raises(dml.InvalidArgumentError, match="unknown dtype 'float128'"):
        s._s.plan_outputs([("x", 0, 0, "float128", [2, 8], 0)])
    h = dml.runtime.load(halves_artifact.path).create_session()
    with pytest.raises(dml.InvalidArgumentError, match="bfloat16"):
        h.run_torch(h=torch.zeros(3, dtype=torch.float16), b=torch.zeros(3))


def test_plan_outputs(linear_artifact):
    s = dml.runtime.load(linear_artifact.path).create_session()
    x = x_of(3)
    (out,) = s._s.plan_outputs([("x", x.ctypes.data, x.nbytes, "float32", [3, 8], 0)])
    assert out == ("y", "float32", [3, 6], 3 * 6 * 4)
    with pytest.raises(dml.InvalidArgumentError, match="rank"):
        s._s.plan_outputs([("x", x.ctypes.data, x.nbytes, "float32", [24], 0)])


def test_runtime_only_install(linear_artifact, tmp_path):
    """The runtime extension built alone from its sources (the command scripts/gpu-check's
    interop run uses on the GPU machine, tests/gpu/interop_prepare.py) into a copy of the package
    without the compiler extension: dinoml.runtime runs artifacts (run_numpy and zero-copy
    run_torch); using the compiler says which extension is missing."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))
    try:
        from interop_prepare import build_runtime_extension, copy_package, copy_sources
    finally:
        sys.path.pop(0)
    copy_sources(ROOT, str(tmp_path / "src"))
    copy_package(ROOT, str(tmp_path / "pkg"))
    build = os.environ.get("DINOML_BUILD_DIR", os.path.join(ROOT, "build"))
    build_runtime_extension(str(tmp_path / "src"), build, str(tmp_path / "pkg"))
    code = ("import numpy as np, torch, dinoml as dml\n"
            "assert dml._ext.ext is None\n"
            f"s = dml.runtime.load({linear_artifact.path!r}).create_session()\n"
            "print(s.run_numpy(x=np.ones((2, 8), np.float32))['y'].shape, tuple(s.run_torch(x=torch.ones(3, 8))['y'].shape))\n"
            "try:\n    dml.trace\nexcept ImportError as e:\n    print('ERR', e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(tmp_path / "pkg")))
    assert r.returncode == 0, r.stderr
    assert "(2, 6) (3, 6)" in r.stdout, r.stdout
    assert "ERR" in r.stdout and "`_dinoml` is not installed (a runtime-only install" in r.stdout, r.stdout


# ---- CLI -------------------------------------------------------------------------------------------

def _cli(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "dinoml.cli", *args], capture_output=True, text=True, env=env,
                          cwd=cwd or ROOT, timeout=600)


def test_cli_compile_model_py_then_inspect(tmp_path):
    out = tmp_path / "linear"
    r = _cli("compile", os.path.join(ROOT, "examples", "linear.py"), "--target", "cpu", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert (out / "manifest.json").exists()
    y = dml.runtime.load(str(out)).create_session().run_numpy({"x": np.ones((3, 8), np.float32)})["y"]
    assert y.shape == (3, 6)
    from dinoml._ext import ext
    if not ext.HAVE_CLI:
        pytest.skip("extension built without the C++ CLI")
    r = _cli("inspect", str(out))
    assert r.returncode == 0, r.stderr
    assert "linear" in r.stdout


def test_cli_compile_errors_are_reported(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("x = 1\n")
    r = _cli("compile", str(bad), "--out", str(tmp_path / "o"))
    assert r.returncode != 0 and "build_spec" in r.stderr
