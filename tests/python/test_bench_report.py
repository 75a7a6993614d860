"""bench/report.py: the tables of docs/benchmarks.md from the JSON of bench/models/run.py and
bench/llama/bench.py (ratios peer / DinoML for times, DinoML / peer for rates; bad files named)."""
import importlib.util
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _report():
    spec = importlib.util.spec_from_file_location("bench_report", os.path.join(ROOT, "bench", "report.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_models_table_has_ratios_command_commit_and_cpu():
    doc = {"meta": {"cpu": "Test CPU", "threads": 2, "commit": "abc1234", "command": "bench/models/run.py --models tb"},
           "results": [{"model": "tb", "batch": 1, "dinoml_ms": 2.0, "torch_ms": 5.0, "ort_ms": 3.0,
                        "max_abs_err_vs_torch": 1e-6}]}
    out = "\n".join(_report().table(doc, "x.json"))
    assert "| tb | 1 | 2.00 | 5.00 | 2.50× | 3.00 | 1.50× | 1.0e-06 |" in out
    assert "`bench/models/run.py --models tb`" in out and "abc1234" in out and "Test CPU, 2 threads" in out


def test_llama_table_rates_are_dinoml_over_peer():
    doc = {"meta": {"cpu": "C", "commit": "c"},
           "results": [{"quant": "q4_0", "dinoml_prefill_tok_s": 200.0, "llama_cpp_prefill_tok_s": 100.0,
                        "dinoml_decode_tok_s": 40.0, "llama_cpp_decode_tok_s": 50.0, "same_greedy_tokens": True}]}
    out = "\n".join(_report().table(doc, "x.json"))
    assert "| q4_0 | float32 | 200.0 | 100.0 | 2.00× | 40.0 | 50.0 | 0.80× | True |" in out
    doc["results"][0].update(kv_dtype="float16", kv_cache_bytes=32 * 2**20)  # bench.py --kv float16
    out = "\n".join(_report().table(doc, "x.json"))
    assert "| q4_0 | float16 32.0 MiB | 200.0 | 100.0 | 2.00× | 40.0 | 50.0 | 0.80× | True |" in out


def test_unknown_json_is_named(tmp_path, capsys):
    p = tmp_path / "other.json"
    p.write_text(json.dumps({"results": [{"x": 1}]}))
    assert _report().main([str(p)]) == 1
    assert "other.json" in capsys.readouterr().err
    with pytest.raises(ValueError, match="no 'results'"):
        _report().table({}, "empty.json")
