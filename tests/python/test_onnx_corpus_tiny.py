"""A few tiny-config models of the ONNX corpus (tests/models/): built with random weights,
exported by PyTorch's exporters, imported, compiled for the CPU and compared with ONNX Runtime at
two sizes each (one between buckets). The full corpus has its own command:

    python tests/models/build_corpus.py && python tests/models/run_corpus.py
"""
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
import build_corpus  # noqa: E402
import run_corpus  # noqa: E402

CASES = [
    ("bert", "torchscript", "float32"),      # BERT: attention with a padding mask, LayerNorm, GELU
    ("llama", "torchscript", "float16"),     # Llama-style: GQA, RoPE, RMSNorm, SwiGLU; float16 end to end
    ("resnet_small", "dynamo", "float32"),   # torch.export-based exporter on a CNN
]


@pytest.mark.parametrize("model,exporter,dtype", CASES, ids=[".".join(c) for c in CASES])
def test_tiny_corpus_model_matches_onnxruntime(model, exporter, dtype, tmp_path):
    if exporter == "dynamo":
        pytest.importorskip("onnxscript")
    import json
    path = tmp_path / f"{model}.{exporter}.{dtype}.onnx"
    build_corpus.export(build_corpus.MODELS[model], exporter, dtype, "tiny", path)
    meta = json.loads(path.with_suffix(".json").read_text())
    r = run_corpus.run_one(path, meta, tmp_path)
    assert r["status"] == "ok", r
    if dtype == "float16":
        assert r["out_dtypes"] == ["float16"], r
