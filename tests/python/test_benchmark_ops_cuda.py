"""`dinoml benchmark-ops cuda` without a GPU: the sweep's graphs (written as IR JSON by
python/dinoml/tools/ir_json.py, no extension involved) must compile into CUDA artifacts for sm_90a
(`--compile-only`, what CI can check), and bad arguments must give clear errors. The timed run
itself needs the GPU machine: `scripts/gpu-check bench-ops` (docs/benchmarks.md)."""
from __future__ import annotations

import json
import os
import sys
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("DINOML_BUILD_DIR", ROOT / "build"))
DINOML = BUILD / "dinoml"

needs_nvcc = pytest.mark.skipif(not (shutil.which("nvcc") or os.path.exists("/usr/local/cuda/bin/nvcc")),
                                reason="nvcc is needed to build a CUDA artifact")


def run(*args, timeout=600):
    env = dict(os.environ, DINOML_PYTHON=os.environ.get("DINOML_PYTHON", sys.executable))
    return subprocess.run([str(DINOML), *args], capture_output=True, text=True, timeout=timeout, env=env)


@needs_nvcc
def test_compile_only_builds_every_case(tmp_path):
    work = tmp_path / "work"
    p = run("benchmark-ops", "cuda", "--compile-only", "--quick", "--only", "gelu", "scaled_dot_product_attention",
            "--jobs", "2", "--work", str(work))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "3/3 artifacts compiled for sm_90a" in p.stdout
    arts = sorted(work.glob("*/artifact"))
    assert [a.parent.name for a in arts] == ["gelu_8192x1024", "scaled_dot_product_attention_8x32x1024x128x0",
                                             "scaled_dot_product_attention_8x32x1024x128x1"]
    for a in arts:
        manifest = json.loads((a / "manifest.json").read_text())
        assert manifest["target"] == "cuda" and "sm_90a" in json.dumps(manifest)
        assert (a / "module.so").exists()
    causal = json.loads((work / "scaled_dot_product_attention_8x32x1024x128x1" / "graph" / "graph.dinoir.json").read_text())
    node = next(n for n in causal["nodes"] if n["op"] == "scaled_dot_product_attention")
    assert node["attrs"]["causal"] == {"bool": True}


def test_unknown_op_is_named():
    p = run("benchmark-ops", "cuda", "--only", "no_such_op")
    assert p.returncode == 2
    assert "unknown op(s) no_such_op" in p.stderr and "gemm_rcr" in p.stderr


def test_torch_ops_on_cuda_use_the_gpu_sweep():
    p = run("benchmark-torch-ops", "--device", "cuda", "--only", "no_such_op")
    assert p.returncode == 2
    assert "dinoml benchmark-torch-ops" in p.stderr and "unknown op(s) no_such_op" in p.stderr


def test_bad_dtype_is_named():
    p = run("benchmark-ops", "cuda", "--dtype", "int8", "--compile-only")
    assert p.returncode == 2 and "--dtype int8" in p.stderr


def test_timing_without_a_gpu_says_so():
    pytest.importorskip("torch")
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the timed run is exercised by scripts/gpu-check bench-ops")
    p = run("benchmark-ops", "cuda", "--only", "gelu", "--quick")
    assert p.returncode == 2 and "sees no CUDA device" in p.stderr
