"""The llama decoder for the CUDA target (issue 6; no GPU needed): the tiny random llama in F32
and in the Q4_K/Q6_K mix compiles with --target cuda, the quantized matrices stay GGUF blocks and
lower to dml_cuda_qgemm (GEMV / dequantize + GEMM candidates), and the embedding, rotary-table
gather and KV-cache writes lower to their CUDA kernels (a quantized token embedding to the kernel
that decodes the selected rows of its blocks). Running it (logits and greedy tokens
against the CPU artifact, GEMV bandwidth) is tests/gpu/quant_run.py on the GPU machine
(scripts/gpu-check quant-prepare / quant-run; results in docs/benchmarks.md)."""
import json
import os
import shutil
import sys

import pytest

import dinoml as dml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "llama"))

import make_random_gguf  # noqa: E402
import model as llama_model  # noqa: E402

pytestmark = pytest.mark.skipif(not (shutil.which("nvcc") or os.path.exists("/usr/local/cuda/bin/nvcc")),
                                reason="nvcc is needed to build a CUDA artifact")


@pytest.mark.parametrize("quant", ["f32", "q4_k_m"])
def test_llama_compiles_for_cuda(tmp_path, quant):
    path = tmp_path / f"tiny-{quant}.gguf"
    make_random_gguf.make(str(path), "tiny", quant, seed=7, n_layers=2)
    art = dml.compile(llama_model.build_spec(str(path), ctx=64, max_seq=16), target="cuda", arch="sm_90a",
                      out=str(tmp_path / "art"))
    man = art.kernel_manifest
    by_op = {}
    for k in man:
        by_op.setdefault(k["op"], []).append(k)
    # The token embedding is read from the file's blocks in the quantized file (q4_K rows decoded
    # on the device); the rope tables are dense.
    assert by_op["embedding"][0]["selected"] == ("dml_cuda_embedding.rows" if quant == "f32"
                                                 else "dml_cuda_embedding_quant.dequantize_rows")
    assert by_op["gather"][0]["selected"] == "dml_cuda_gather.rows"
    assert {k["selected"] for k in by_op["kv_cache_write"]} == {"dml_cuda_kv_cache_write.in_place"}
    src = open(os.path.join(art.path, "debug", "module.cu")).read()
    graph = json.load(open(os.path.join(art.path, "graph.dinoir.json")))
    quant_types = {t["quant"]["type"] for t in graph["tensors"] if "quant" in t}
    if quant == "f32":
        assert not quant_types and "dml_cuda_qgemm(" not in src
    else:
        assert quant_types == {"q4_K", "q6_K"}
        # 2 layers x 7 matrices + the output head
        assert src.count("dml_cuda_qgemm(") == 15
        q = [k for k in man if k["candidates"][0] == "qgemv.dequant_in_registers"]
        assert len(q) == 15 and all("qgemv.int8_dp4a" in k["candidates"] for k in q)


def test_qgemm_forced_path_and_errors(tmp_path, monkeypatch):
    path = tmp_path / "w.gguf"
    import numpy as np
    w = np.random.default_rng(0).standard_normal((16, 256)).astype(np.float32)
    dml.gguf.write(str(path), [("general.architecture", "str", "t")], [("w", w, "q4_K")])

    class M(dml.Module):
        def __init__(self):
            self.w = dml.Parameter([16, 256])

        def forward(self, x):
            return {"y": dml.ops.gemm_rcr(x, self.w)}

    def build(out):
        spec = dml.trace(M(), inputs={"x": dml.TensorSpec([4, 256], "float32")},
                         constants={"w": dml.gguf_constant(str(path), "w", "keep")}, name="qg")
        return dml.compile(spec, target="cuda", arch="sm_90a", out=str(out))

    monkeypatch.setenv("DINOML_CUDA_QGEMM", "dequant_gemm")
    art = build(tmp_path / "a")
    k = [k for k in art.kernel_manifest if k["op"] == "gemm_rcr"][0]
    assert k["selected"].startswith("dequant_f32.cublaslt") and "forced" in k["reason"]
    assert "DML_CUDA_QGEMM_DEQUANT_GEMM" in open(os.path.join(art.path, "debug", "module.cu")).read()
    monkeypatch.setenv("DINOML_CUDA_QGEMM", "fast")
    with pytest.raises(Exception, match="DINOML_CUDA_QGEMM must be gemv, int8 or dequant_gemm"):
        build(tmp_path / "b")
