"""Imports every model of the ONNX corpus with DinoML, compiles it for the CPU, runs it and
compares with ONNX Runtime (CPU); prints one status line per model and a table.

    python tests/models/build_corpus.py [--size tiny|full]          # fills the cache first
    python tests/models/run_corpus.py [--size tiny|full] [--only REGEX] [--markdown]
    python tests/models/fetch_shipped.py && python tests/models/run_corpus.py --size shipped

Each model runs in its own subprocess (a crash or a hang is a result, not the end of the run).
The error is max|DinoML - ORT| / max(max|ORT|, 1) over every output and every test size: relative
for outputs of order 1 and above, absolute below. float32 passes within 1e-4, float16 within 2e-2
(ORT computes float16 models with float32 accumulation where DinoML may not).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from build_corpus import DEFAULT_CACHE  # noqa: E402

TOL = {"float32": 1e-4, "float16": 2e-2}
NP = {"float32": np.float32, "float16": np.float16, "int64": np.int64, "int32": np.int32, "float64": np.float64,
      "bool": np.bool_, "uint8": np.uint8, "int8": np.int8}


def _onnx_inputs(path):
    """[(name, elem dtype name, [int size | dim_param | None])] of the model's real inputs."""
    import onnx
    from onnx import helper
    m = onnx.load(str(path), load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    out = []
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        shape = []
        for d in tt.shape.dim:
            shape.append(d.dim_value if d.HasField("dim_value") else (d.dim_param if d.HasField("dim_param") else None))
        out.append((vi.name, helper.tensor_dtype_to_np_dtype(tt.elem_type).name, shape))
    return out


def _dims_for(meta, onnx_inputs):
    """Maps the model's dim_params to the corpus bounds: a dim_param is bound to the corpus dim
    that its (input, axis) carries in the corpus metadata (exporters name dims their own way)."""
    corpus = {i["name"]: i["shape"] for i in meta["inputs"]}
    dims, which = {}, {}
    for k, (name, _, shape) in enumerate(onnx_inputs):
        cshape = corpus[name] if name in corpus else (meta["inputs"][k]["shape"] if k < len(meta["inputs"]) else None)
        for a, d in enumerate(shape):
            if isinstance(d, int) and d > 0:
                continue
            cd = cshape[a] if cshape and a < len(cshape) else None
            key = d if isinstance(d, str) and d and d != "?" else f"{name}_dim{a}"
            if isinstance(cd, int):  # a fixed size for a symbolic axis (the shipped models)
                dims[key] = cd
                continue
            if not isinstance(cd, str):
                continue
            lo, hi, buckets = meta["dims"][cd]
            dims[key] = (lo, hi, buckets)
            which[key] = cd
    return dims, which


def _make_inputs(meta, onnx_inputs, size, rng):
    corpus = {i["name"]: i["shape"] for i in meta["inputs"]}
    feeds = {}
    for k, (name, dt, shape) in enumerate(onnx_inputs):
        cshape = corpus[name] if name in corpus else meta["inputs"][k]["shape"]
        concrete = [size[d] if isinstance(d, str) else int(d) for d in cshape]
        if name in meta.get("values", {}):
            v = np.full(concrete, meta["values"][name], dtype=NP[dt])
        elif dt.startswith("int"):
            if "mask" in name:
                v = np.ones(concrete, dtype=NP[dt])
                if v.ndim == 2 and v.shape[0] > 1:
                    v[-1, v.shape[1] // 2:] = 0
            else:
                v = rng.integers(0, max(meta.get("vocab") or 2, 2), size=concrete).astype(NP[dt])
        else:
            v = rng.standard_normal(concrete).astype(NP[dt])
        feeds[name] = v
    return feeds


def run_one(path: Path, meta: dict, work: Path) -> dict:
    import onnxruntime as ort

    import dinoml as dml

    res = {"model": path.stem, "stage": "import"}
    onnx_inputs = _onnx_inputs(path)
    dims, which = _dims_for(meta, onnx_inputs)
    bound = {}
    static = False

    def build(dims, tag):
        nonlocal bound
        t0 = time.time()
        try:
            spec = dml.from_onnx(str(path), dims=dims, bind=bound)
        except dml.OnnxImportError as e:
            if not meta.get("values") or bound:
                raise
            # Inputs that select a code path (a sample rate feeding an If) fixed at compile time.
            bound = dict(meta["values"])
            spec = dml.from_onnx(str(path), dims=dims, bind=bound)
            res["note"] = (f"bound at compile time: {', '.join(bound)} "
                           f"(as runtime inputs: {str(e).splitlines()[-1].strip()[:160]})")
        res["stage"] = "compile"
        art = dml.compile(spec, target="cpu", out=str(work / (path.stem + tag)))
        res["compile_s"] = round(res.get("compile_s", 0) + time.time() - t0, 1)
        return dml.runtime.load(art.path).create_session()

    session = None
    try:
        session = build(dims, "")
    except dml.OnnxImportError as e:
        if not which:
            raise
        # The symbolic model does not import: compile once per test size with every dim fixed
        # (an int bound is a static size), so the numerics are still checked; reported as "static".
        static = True
        res["dynamic_error"] = str(e).splitlines()[-1].strip()[:300]
    res["stage"] = "run"
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    ref = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    worst = 0.0
    out_dtypes = set()
    for k, size in enumerate(meta["sizes"]):
        if static:
            session = build({key: size[cd] for key, cd in which.items()}, f".static{k}")
            res["stage"] = "run"
        feeds = _make_inputs(meta, onnx_inputs, size, rng)
        want = ref.run(None, feeds)
        got = session.run_numpy({k: v for k, v in feeds.items() if k not in bound})
        for o, w in zip(ref.get_outputs(), want):
            g = got[o.name]
            out_dtypes.add(str(g.dtype))
            if g.shape != w.shape:
                raise AssertionError(f"output '{o.name}' at {size}: shape {g.shape}, ONNX Runtime {w.shape}")
            if g.dtype != w.dtype:
                raise AssertionError(f"output '{o.name}': dtype {g.dtype}, ONNX Runtime {w.dtype}")
            wf, gf = w.astype(np.float64), g.astype(np.float64)
            err = float(np.max(np.abs(gf - wf))) / max(float(np.max(np.abs(wf))), 1.0) if w.size else 0.0
            worst = max(worst, err)
    res["stage"] = "done"
    res["max_err"] = worst
    res["out_dtypes"] = sorted(out_dtypes)
    tol = TOL.get(meta.get("dtype", "float32"), 1e-4)
    res["status"] = ("ok" if worst <= tol else "mismatch") + (" (static)" if static else "")
    if static:
        res["note"] = "symbolic dims: " + res["dynamic_error"]
    return res


def _child(path, work):
    meta = json.loads(Path(path).with_suffix(".json").read_text())
    try:
        r = run_one(Path(path), meta, Path(work))
    except Exception as e:  # noqa: BLE001 - reported as the model's status
        stage = "import" if type(e).__name__ == "OnnxImportError" else "error"
        r = {"model": Path(path).stem, "status": f"{stage} failed", "error": f"{type(e).__name__}: {e}"}
    r.update(name=meta["model"], exporter=meta["exporter"], dtype=meta["dtype"])
    print("CORPUS_RESULT " + json.dumps(r), flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", default=DEFAULT_CACHE)
    ap.add_argument("--size", choices=("tiny", "full", "shipped"), default="tiny",
                    help="shipped: the package-shipped models of fetch_shipped.py")
    ap.add_argument("--only", default="")
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown (docs/models.md)")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        _child(*a.child)
        return 0
    cache = Path(a.cache) / a.size
    work = cache / "artifacts"
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for meta_path in sorted(cache.glob("*.json")):
        onnx_path = meta_path.with_suffix(".onnx")
        if not onnx_path.exists() or (a.only and not re.search(a.only, meta_path.stem)):
            continue
        t0 = time.time()
        try:
            p = subprocess.run([sys.executable, __file__, "--child", str(onnx_path), str(work)], capture_output=True,
                               text=True, timeout=a.timeout)
            line = [ln for ln in p.stdout.splitlines() if ln.startswith("CORPUS_RESULT ")]
            r = json.loads(line[-1][len("CORPUS_RESULT "):]) if line else {
                "model": meta_path.stem, "status": "crashed", "error": f"exit {p.returncode}: {p.stderr.strip()[-300:]}"}
        except subprocess.TimeoutExpired:
            r = {"model": meta_path.stem, "status": "timeout", "error": f"> {a.timeout} s"}
        r["wall_s"] = round(time.time() - t0, 1)
        rows.append(r)
        err = r.get("error", "").replace("\n", " | ")
        print(f"{r['model']:45s} {r['status']:14s} {r.get('max_err', float('nan')):9.2e} {err[:400]}", flush=True)
    for exported in sorted(cache.glob("*.export_error.txt")):
        key = exported.name[: -len(".export_error.txt")]
        if not a.only or re.search(a.only, key):
            rows.append({"model": key, "status": "export failed", "error": exported.read_text().strip()})
    if a.markdown:
        print("\n| model | exporter | dtype | status | max error vs ORT | compile s | note |\n|---|---|---|---|---|---|---|")
        for r in sorted(rows, key=lambda r: r["model"]):
            name, ex, dt = (r["model"].split(".") + ["", "", ""])[:3]
            name, ex, dt = r.get("name", name), r.get("exporter", ex), r.get("dtype", dt)
            e = f"{r['max_err']:.1e}" if "max_err" in r else ""
            note = (r.get("error", "") or r.get("note", "")).replace("|", "\\|").replace("\n", " ")[:240]
            print(f"| {name} | {ex} | {dt} | {r['status']} | {e} | {r.get('compile_s', '')} | {note} |")
    ok = sum(r["status"] == "ok" for r in rows)
    ok_static = sum(r["status"] == "ok (static)" for r in rows)
    print(f"\n{ok} / {len(rows)} ok with symbolic dims, {ok_static} more ok with fixed sizes")
    return 0 if ok == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
