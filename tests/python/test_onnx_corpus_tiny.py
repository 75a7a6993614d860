"""A few tiny-config models of the ONNX corpus (tests/models/): built with random weights,
exported by PyTorch's exporters, imported, compiled for the CPU and compared with ONNX Runtime at
two sizes each (one between buckets). The full corpus has its own command:

    python tests/models/build_corpus.py && python tests/models/run_corpus.py
"""
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
import build_corpus  # noqa: E402
import run_corpus  # noqa: E402

SLOW = pytest.mark.skipif(os.environ.get("DINOML_SLOW_TESTS") != "1", reason="slow: set DINOML_SLOW_TESTS=1")
CASES = [
    ("bert", "torchscript", "float32"),                               # attention with a padding mask, LayerNorm, GELU
    pytest.param("llama", "torchscript", "float16", marks=SLOW),      # GQA, RoPE, RMSNorm, SwiGLU; float16 end to end
    pytest.param("resnet_small", "dynamo", "float32", marks=SLOW),    # the torch.export-based exporter on a CNN
]

# Transformers slice position tables to `seq` and build Range(0, seq): DinoML's slice / arange take
# integer bounds, so they import only with fixed sizes ("ok (static)": compiled per test size).
STATIC_ONLY = {"bert", "llama", "gpt2"}


@pytest.mark.parametrize("model,exporter,dtype", CASES)
def test_tiny_corpus_model_matches_onnxruntime(model, exporter, dtype, tmp_path):
    if exporter == "dynamo":
        pytest.importorskip("onnxscript")
    import json
    path = tmp_path / f"{model}.{exporter}.{dtype}.onnx"
    build_corpus.export(build_corpus.MODELS[model], exporter, dtype, "tiny", path)
    meta = json.loads(path.with_suffix(".json").read_text())
    r = run_corpus.run_one(path, meta, tmp_path)
    assert r["status"] in (("ok", "ok (static)") if model in STATIC_ONLY else ("ok",)), r
    if dtype == "float16":
        assert r["out_dtypes"] == ["float16"], r
