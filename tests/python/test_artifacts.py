"""Artifacts as deployed things: reproducible bytes, relocatable directories, refusal of
tampered or mismatched artifacts, the CLI commands and the standalone C program."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import dinoml as dml
import linear as linear_example  # examples/linear.py (conftest puts examples/ on sys.path)

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("DINOML_BUILD_DIR", ROOT / "build"))


def _files(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def linear_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("linear") / "art"
    dml.compile(linear_example.build_spec(), target="cpu", out=str(out))
    return out


def _x(batch: int) -> np.ndarray:
    return np.arange(batch * 8, dtype=np.float32).reshape(batch, 8) / 10


def _run(path, batch=3):
    return dml.runtime.load(str(path)).create_session().run_numpy({"x": _x(batch)})["y"]


def test_same_model_gives_byte_identical_artifacts_without_the_cache(tmp_path):
    spec = linear_example.build_spec()
    a = dml.compile(spec, target="cpu", out=str(tmp_path / "a"), use_cache=False)
    b = dml.compile(spec, target="cpu", out=str(tmp_path / "b"), use_cache=False,
                    cache_dir=str(tmp_path / "other-cache"))
    fa, fb = _files(Path(a.path)), _files(Path(b.path))
    assert fa.keys() == fb.keys()
    differing = [k for k in fa if fa[k] != fb[k]]
    assert not differing, f"files differ between two compiles: {differing}"


def test_unchanged_model_recompiles_from_the_cache_quickly(tmp_path):
    import time
    spec = linear_example.build_spec()
    dml.compile(spec, target="cpu", out=str(tmp_path / "warm"))
    t0 = time.perf_counter()
    art = dml.compile(spec, target="cpu", out=str(tmp_path / "again"))
    assert time.perf_counter() - t0 < 1.0
    assert art.cache_hit is True


def test_moved_artifact_still_runs(linear_dir, tmp_path):
    want = _run(linear_dir)
    moved = tmp_path / "elsewhere" / "renamed"
    shutil.copytree(linear_dir, moved)
    np.testing.assert_array_equal(_run(moved), want)


@pytest.mark.parametrize("victim", ["constants.bin", "module.so", "lib/libdinoml_cpu_kernels.so", "metadata.json"])
def test_altered_file_is_refused_naming_it(linear_dir, tmp_path, victim):
    bad = tmp_path / "bad"
    shutil.copytree(linear_dir, bad)
    p = bad / victim
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF
    p.write_bytes(bytes(data))
    with pytest.raises(dml.ArtifactError) as e:
        dml.runtime.load(str(bad))
    assert victim in str(e.value)


def test_truncated_constants_are_refused(linear_dir, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(linear_dir, bad)
    (bad / "constants.bin").write_bytes((bad / "constants.bin").read_bytes()[:10])
    with pytest.raises(dml.ArtifactError, match="constants.bin"):
        dml.runtime.load(str(bad))


def test_other_abi_version_is_refused_with_advice(linear_dir, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(linear_dir, bad)
    m = json.loads((bad / "manifest.json").read_text())
    m["runtime_abi_version"] = 999
    (bad / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(dml.ArtifactError) as e:
        dml.runtime.load(str(bad))
    msg = str(e.value)
    assert "999" in msg and "recompile" in msg.lower()


def _with_required_isa(linear_dir, tmp_path, isa):
    bad = tmp_path / "bad"
    shutil.copytree(linear_dir, bad)
    m = json.loads((bad / "manifest.json").read_text())
    m["required_isa"] = m["required_isa"] + [isa]
    (bad / "manifest.json").write_text(json.dumps(m))
    return bad


def _cpu_flags():
    for line in open("/proc/cpuinfo"):
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def test_missing_isa_is_refused_before_loading_code(linear_dir, tmp_path):
    # An ISA this CPU really lacks, when there is one (the CI machines differ: some have AMX).
    flags = _cpu_flags()
    lacking = [isa for isa, flag in (("avx512fp16", "avx512_fp16"), ("amx-tile", "amx_tile"),
                                     ("avx512f", "avx512f")) if flag not in flags]
    if not lacking:
        pytest.skip("this CPU has every ISA the test could require (test_isa_disabled_by_environment_is_refused covers the path)")
    bad = _with_required_isa(linear_dir, tmp_path, lacking[0])
    with pytest.raises(dml.ArtifactError, match=lacking[0]) as e:
        dml.runtime.load(str(bad))
    assert "does not support" in str(e.value)


def test_isa_disabled_by_environment_is_refused(linear_dir, tmp_path, monkeypatch):
    # DINOML_CPU_DISABLE_ISA makes the runtime act as a CPU without the named ISAs: avx2 is on
    # every machine DinoML runs on, so the refusal here comes from the variable alone.
    bad = _with_required_isa(linear_dir, tmp_path, "avx2")
    dml.runtime.load(str(bad))  # loads: this CPU has AVX2
    monkeypatch.setenv("DINOML_CPU_DISABLE_ISA", "avx512f,avx2")
    with pytest.raises(dml.ArtifactError, match="avx2") as e:
        dml.runtime.load(str(bad))
    assert "DINOML_CPU_DISABLE_ISA" in str(e.value)
    monkeypatch.setenv("DINOML_CPU_DISABLE_ISA", "avx")  # a prefix of avx2 must not match it
    dml.runtime.load(str(bad))


def test_malformed_ir_file_is_a_clear_error(tmp_path):
    p = tmp_path / "broken.dinoir.json"
    p.write_text('{"schema_version": 1, "name": "m", "inputs": ["x"], "outputs": []')
    with pytest.raises((dml.IrError, dml.CompileError)) as e:
        dml.compile(str(p), target="cpu", out=str(tmp_path / "o"))
    assert "not valid JSON" in str(e.value) and "broken.dinoir.json" in str(e.value)


def test_unknown_op_in_ir_file_names_it(linear_dir, tmp_path):
    g = json.loads((linear_dir / "graph.dinoir.json").read_text())
    g["nodes"][0]["op"] = "gemm_rrr_biass"
    shutil.copy(linear_dir / "constants.bin", tmp_path / "constants.bin")
    (tmp_path / "g.dinoir.json").write_text(json.dumps(g))
    with pytest.raises((dml.ShapeError, dml.IrError, dml.CompileError)) as e:
        dml.compile(str(tmp_path / "g.dinoir.json"), target="cpu", out=str(tmp_path / "o"))
    assert "unknown op 'gemm_rrr_biass'" in str(e.value) and "gemm_rrr_bias" in str(e.value)


def test_unknown_op_while_tracing():
    with pytest.raises(AttributeError, match="not_an_op"):
        dml.ops.not_an_op


def _cli(*args, check=True):
    r = subprocess.run([str(BUILD / "dinoml"), *map(str, args)], capture_output=True, text=True, timeout=300)
    if check:
        assert r.returncode == 0, r.stderr
    return r


@pytest.mark.skipif(not (BUILD / "dinoml").exists(), reason="C++ CLI not built")
def test_cli_inspect_run_validate_benchmark(linear_dir, tmp_path):
    out = _cli("inspect", linear_dir).stdout
    assert "gemm_rrr_bias" in out and "memory plan" in out and "batch in [1, 4]" in out
    np.save(tmp_path / "x.npy", _x(2))
    out = _cli("run", linear_dir, "--input", f"x={tmp_path / 'x.npy'}", "--save", tmp_path / "res").stdout
    assert "output y" in out
    np.testing.assert_allclose(np.load(tmp_path / "res" / "y.npy"), _run(linear_dir, 2), rtol=1e-6)
    assert "validation passed" in _cli("validate", linear_dir).stdout
    assert "p50" in _cli("benchmark", linear_dir, "-n", "20").stdout
    r = _cli("run", linear_dir, "--dim", "batch=9", check=False)
    assert r.returncode != 0 and "batch" in r.stderr and "[1, 4]" in r.stderr


@pytest.mark.skipif(not (BUILD / "dinoml").exists(), reason="C++ CLI not built")
def test_cli_compile_ir_file_and_dump_passes(linear_dir, tmp_path):
    spec = linear_example.build_spec()
    spec.save(str(tmp_path / "linear.dinoir.json"))
    _cli("compile", tmp_path / "linear.dinoir.json", "--target", "cpu", "--out", tmp_path / "a", "--dump-passes")
    dumps = sorted(p.name for p in (tmp_path / "a" / "debug" / "passes").glob("*.dinoir.json"))
    assert dumps[0].startswith("00_input") and any("fuse_gemm_epilogue" in d for d in dumps)
    np.testing.assert_allclose(_run(tmp_path / "a"), _run(linear_dir), rtol=1e-6)


@pytest.mark.skipif(not (BUILD / "c_app").exists(), reason="c_app not built")
def test_standalone_c_program_runs_the_artifact(linear_dir, tmp_path):
    # Only the artifact directory and the C program: no Python, no compiler libraries.
    moved = tmp_path / "deploy"
    shutil.copytree(linear_dir, moved)
    r = subprocess.run([str(BUILD / "c_app"), str(moved), "batch=2"], capture_output=True, text=True, timeout=60,
                       env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert "output y" in r.stdout and "[2, 6]" in r.stdout
    line = [l for l in r.stdout.splitlines() if l.startswith("output y float32 [2, 6]:")][0]
    first = [float(v) for v in line.split(":", 1)[1].split()[:6]]
    x = np.array([[float(v) for v in row] for row in _c_app_inputs(2)], np.float32)
    want = dml.runtime.load(str(moved)).create_session().run_numpy({"x": x})["y"][0]
    np.testing.assert_allclose(first, want, rtol=1e-3, atol=1e-3)


def _c_app_inputs(batch):
    # Mirrors the deterministic fill of examples/c_app/main.c (see fill_input there).
    out = []
    for b in range(batch):
        out.append([_c_app_value(b * 8 + j) for j in range(8)])
    return out


def _c_app_value(i):
    return ((i % 17) - 8) * 0.25
