#!/usr/bin/env python3
"""Markdown tables for docs/benchmarks.md from the JSON the benchmark scripts write.

    python3 bench/report.py RESULT.json [RESULT.json ...]

Reads, by shape:
  * bench/models/run.py --json OUT   ({"meta", "results": [{"model", "batch", "dinoml_ms", "torch_ms", "ort_ms"?, ...}]})
  * bench/llama/bench.py --json OUT  ({"meta", "results": [{"quant", "dinoml_prefill_tok_s", ...}]})
and prints one table per file in the layout of docs/benchmarks.md: what, DinoML, peers from the same
run, ratio (peer time / DinoML time, or DinoML rate / peer rate: > 1 means DinoML is faster), then the
command, commit and machine the JSON records. Paste the output into the area's section.
"""
from __future__ import annotations

import json
import sys


def _ratio(x: float | None, y: float | None) -> str:
    return f"{x / y:.2f}×" if x and y else "—"


def _ms(x: float | None) -> str:
    return f"{x:.2f}" if x is not None else "—"


def _footer(meta: dict) -> list[str]:
    cmd = meta.get("command", "?")
    machine = meta.get("cpu") or meta.get("device") or meta.get("machine", "?")
    threads = meta.get("threads")
    where = f"{machine}, {threads} threads" if threads else machine
    return ["", f"Command: `{cmd}` · commit {meta.get('commit', '?')} · {where}"]


def models_table(doc: dict) -> list[str]:
    rows = doc["results"]
    has_ort = any(r.get("ort_ms") is not None for r in rows)
    has_onnx = any(r.get("dinoml_onnx_ms") is not None for r in rows)
    head = "| model | batch | DinoML ms | PyTorch ms | ×PyTorch |"
    sep = "|---|---|---|---|---|"
    if has_onnx:
        head += " DinoML from ONNX ms |"
        sep += "---|"
    if has_ort:
        head += " ORT ms | ×ORT |"
        sep += "---|---|"
    head += " max abs err vs PyTorch |"
    sep += "---|"
    out = [head, sep]
    for r in rows:
        line = f"| {r['model']} | {r['batch']} | {_ms(r['dinoml_ms'])} | {_ms(r['torch_ms'])} | {_ratio(r['torch_ms'], r['dinoml_ms'])} |"
        if has_onnx:
            line += f" {_ms(r.get('dinoml_onnx_ms'))} |"
        if has_ort:
            line += f" {_ms(r.get('ort_ms'))} | {_ratio(r.get('ort_ms'), r['dinoml_ms'])} |"
        line += f" {r['max_abs_err_vs_torch']:.1e} |"
        out.append(line)
    return out + _footer(doc["meta"])


def llama_table(doc: dict) -> list[str]:
    out = ["| quant | DinoML KV cache | DinoML prefill tok/s | llama.cpp prefill tok/s | ratio | DinoML decode tok/s | "
           "llama.cpp decode tok/s | ratio | same greedy tokens |", "|---|---|---|---|---|---|---|---|---|"]
    for r in doc["results"]:
        dp, lp, dd, ld = (r["dinoml_prefill_tok_s"], r["llama_cpp_prefill_tok_s"], r["dinoml_decode_tok_s"],
                          r["llama_cpp_decode_tok_s"])
        kv = r.get("kv_dtype", "float32") + (f" {r['kv_cache_bytes'] / 2**20:.1f} MiB" if "kv_cache_bytes" in r else "")
        out.append(f"| {r['quant']} | {kv} | {dp:.1f} | {lp:.1f} | {_ratio(dp, lp)} | {dd:.1f} | {ld:.1f} | "
                   f"{_ratio(dd, ld)} | {r['same_greedy_tokens']} |")
    return out + _footer(doc["meta"])


def table(doc: dict, path: str) -> list[str]:
    rows = doc.get("results") if isinstance(doc, dict) else None
    if not rows:
        raise ValueError(f"{path}: no 'results' list (expected the JSON of bench/models/run.py or bench/llama/bench.py)")
    if "model" in rows[0] and "dinoml_ms" in rows[0]:
        return models_table(doc)
    if "quant" in rows[0] and "dinoml_decode_tok_s" in rows[0]:
        return llama_table(doc)
    raise ValueError(f"{path}: unknown result shape (keys {sorted(rows[0])}); bench/report.py reads the JSON of "
                     "bench/models/run.py --json and bench/llama/bench.py --json")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for i, path in enumerate(argv):
        try:
            with open(path) as f:
                doc = json.load(f)
            lines = table(doc, path)
        except (OSError, ValueError) as e:
            print(f"bench/report.py: {e}", file=sys.stderr)
            return 1
        if i:
            print()
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
