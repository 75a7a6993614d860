#!/usr/bin/env python3
"""End-to-end model benchmark (issue 3): DinoML vs PyTorch CPU vs ONNX Runtime CPU, one script,
same machine, same threads, same inputs; outputs are checked against PyTorch.

    /usr/bin/python3 bench/models/run.py [--models tb,bert6,resnet18] [--batch 1,8] [--threads 2]
                                         [--profile] [--seconds 3] [--rounds 3] [--from-onnx]
                                         [--plot out.png] [--json out.json]

Models (random weights, eval mode):
  tb        transformer encoder block: d_model 768, 12 heads, FFN 3072, GELU, post-norm, seq 128
  bert6     6 such layers (a BERT-base-sized encoder; torch.nn.TransformerEncoder)
  resnet18  torchvision resnet18(weights=None), 224x224 (needs DinoML's conv ops)
For each model and batch: per-inference latency of DinoML session.run, PyTorch (torch.no_grad,
torch.set_num_threads) and ONNX Runtime (npm onnxruntime-node, graph optimisation "all",
intra-op threads = --threads), each the median of repeated runs after warm-up. With --rounds R the
three are measured in turn R times and each keeps its fastest round's median (on a shared VM a
round can be slowed by other tenants; the per-round ORT/DinoML ratios are printed). Ratios > 1 mean
DinoML is faster. ONNX Runtime comes from scripts/fetch-ort (installed into .cache/ort).
With --from-onnx DinoML also compiles the exported ONNX file (opset 14, the one ONNX Runtime runs)
through its importer, so the two compilers are compared on the very same graph.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))
import dinoml as dml  # noqa: E402
import machine  # noqa: E402
import torch  # noqa: E402

ORT_DIR = ROOT / ".cache" / "ort"


# ---- models ----------------------------------------------------------------------------------

class _Encoder(dml.Module):
    def __init__(self, layers: int, d: int, heads: int, ff: int):
        super().__init__()
        self.layers = dml.nn.ModuleList([
            dml.nn.TransformerEncoderLayer(d, heads, dim_feedforward=ff, activation="gelu", batch_first=True)
            for _ in range(layers)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def transformer(layers: int, seq: int = 128, d: int = 768, heads: int = 12, ff: int = 3072):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d, heads, dim_feedforward=ff, activation="gelu", batch_first=True,
                                             dropout=0.0)
    tmodel = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).eval()
    consts = {k: v.detach().numpy() for k, v in tmodel.state_dict().items()}
    dmodel = _Encoder(layers, d, heads, ff)

    def spec(batch_dim):
        return dml.trace(dmodel, inputs={"x": dml.TensorSpec([batch_dim, seq, d], "float32")}, constants=consts,
                         name=f"encoder{layers}")

    return tmodel, spec, lambda b: {"x": np.random.default_rng(b).standard_normal((b, seq, d)).astype(np.float32)}


def resnet18():
    sys.path.insert(0, str(ROOT / "examples"))
    import resnet18 as ex  # examples/resnet18.py: dml.nn ResNet-18 with torchvision's names
    tmodel = ex.torch_model(0)  # torchvision resnet18(weights=None), eval, randomised BN statistics
    consts = {k: v.detach().numpy() for k, v in tmodel.state_dict().items()}

    def spec(batch_dim):
        return dml.trace(ex.ResNet(), inputs={"x": dml.TensorSpec([batch_dim, 3, 224, 224], "float32")},
                         constants=consts, name="resnet18")

    return tmodel, spec, lambda b: {"x": np.random.default_rng(b).standard_normal((b, 3, 224, 224)).astype(np.float32)}


MODELS = {"tb": lambda: transformer(1), "bert6": lambda: transformer(6), "resnet18": resnet18}


# ---- timing ----------------------------------------------------------------------------------

def timed(fn, runs: int, seconds: float):
    for _ in range(3):
        fn()
    times = []
    end = time.perf_counter() + seconds
    while len(times) < runs and (len(times) < 5 or time.perf_counter() < end):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), len(times)


def ort_available() -> bool:
    return (ORT_DIR / "node_modules" / "onnxruntime-node").is_dir()


def run_ort(onnx_path: Path, feeds: dict, threads: int, runs: int, seconds: float, work: Path):
    inputs = []
    for name, arr in feeds.items():
        f = work / f"in_{name}.bin"
        np.ascontiguousarray(arr, dtype=np.float32).tofile(f)
        inputs.append({"name": name, "file": str(f), "shape": list(arr.shape)})
    spec = work / "ort_spec.json"
    spec.write_text(json.dumps({"threads": threads, "runs": runs, "seconds": seconds, "inputs": inputs,
                                "out_dir": str(work)}))
    env = dict(os.environ, NODE_PATH=str(ORT_DIR / "node_modules"))
    r = subprocess.run(["node", str(Path(__file__).with_name("ort_bench.js")), str(onnx_path), str(spec)],
                       capture_output=True, text=True, env=env, timeout=900)
    if r.returncode != 0:
        raise RuntimeError(f"onnxruntime-node failed: {r.stderr.strip()[-2000:]}")
    res = json.loads(r.stdout.strip().splitlines()[-1])
    outs = [np.fromfile(o["file"], dtype=np.float32).reshape(o["shape"]) for o in res["outputs"]]
    return res["median_ms"], res["runs"], outs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="tb,bert6,resnet18")
    ap.add_argument("--batch", default="1,8")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=3.0, help="time budget per measurement (min 5 runs)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="alternate the frameworks' measurements this many times and keep each one's fastest "
                         "round (a shared or noisy machine disturbs rounds, not frameworks); the per-round "
                         "ratios are printed too")
    ap.add_argument("--profile", action="store_true", help="compile DinoML with --profile (kernel selection by measurement)")
    ap.add_argument("--fp32-matmul-precision", choices=("highest", "bf16"), default="highest",
                    help="bf16: DinoML's float32 GEMMs multiply in bfloat16 (AMX / AVX512_BF16); outputs then differ "
                         "from PyTorch by ~1e-2, so such runs are not acceptance numbers")
    ap.add_argument("--no-ort", action="store_true")
    ap.add_argument("--from-onnx", action="store_true",
                    help="also time DinoML on the exported ONNX file (dml.from_onnx: the same graph ONNX Runtime "
                         "runs), as a column 'DinoML (ONNX)'")
    ap.add_argument("--plot", help="write a PNG bar chart of the latencies")
    ap.add_argument("--json", help="write the results as JSON")
    ap.add_argument("--work", help="directory for artifacts and ONNX files (default: a temp dir)")
    args = ap.parse_args()

    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    torch.set_num_threads(args.threads)
    batches = [int(b) for b in args.batch.split(",")]
    use_ort = not args.no_ort and ort_available()
    if not args.no_ort and not use_ort:
        print("[bench] onnxruntime-node not installed: run scripts/fetch-ort (skipping ONNX Runtime)", file=sys.stderr)
    work = Path(args.work or tempfile.mkdtemp(prefix="dinoml_bench_models_"))
    work.mkdir(parents=True, exist_ok=True)
    results = []
    for key in args.models.split(","):
        try:
            tmodel, spec_fn, make_feeds = MODELS[key]()
        except Exception as e:  # e.g. resnet18 before the conv ops exist
            print(f"[bench] {key}: skipped ({type(e).__name__}: {e})", file=sys.stderr)
            continue
        batch = dml.Dim("batch", min=1, max=max(batches), buckets=tuple(sorted(set(batches))))
        art = work / f"{key}_dinoml"
        t0 = time.perf_counter()
        dml.compile(spec_fn(batch), target="cpu", out=str(art), profile=args.profile,
                    fp32_matmul_precision=args.fp32_matmul_precision)
        compile_s = time.perf_counter() - t0
        sess = dml.runtime.load(str(art)).create_session()
        onnx_path = work / f"{key}.onnx"
        if (use_ort or args.from_onnx) and not onnx_path.exists():
            x0 = {k: torch.from_numpy(v) for k, v in make_feeds(1).items()}
            # Outside no_grad: PyTorch's fused encoder fast path (aten::_transformer_encoder_layer_fwd)
            # is only taken without autograd and has no ONNX export; the exported graph is the
            # same computation in standard ops.
            if True:
                torch.onnx.export(tmodel, tuple(x0.values()), str(onnx_path), input_names=list(x0), output_names=["y"],
                                  dynamic_axes={k: {0: "batch"} for k in x0}, opset_version=14)
        onnx_sess = None
        if args.from_onnx:
            onnx_art = work / f"{key}_dinoml_onnx"
            dml.compile(dml.from_onnx(str(onnx_path), dims={"batch": batch}), target="cpu", out=str(onnx_art),
                        profile=args.profile, fp32_matmul_precision=args.fp32_matmul_precision)
            onnx_sess = dml.runtime.load(str(onnx_art)).create_session()
        for b in batches:
            feeds = make_feeds(b)
            tfeeds = [torch.from_numpy(v) for v in feeds.values()]
            with torch.no_grad():
                ref = tmodel(*tfeeds).numpy()
            out = sess.run(feeds)
            got = next(iter(out.values()))
            err = float(np.max(np.abs(got - ref)))
            rounds = []  # per round: (torch, dinoml, ort, dinoml from onnx) medians
            ort_err = None
            onnx_err = None
            if onnx_sess is not None:
                onnx_err = float(np.max(np.abs(next(iter(onnx_sess.run(feeds).values())) - ref)))
            for _ in range(max(1, args.rounds)):
                with torch.no_grad():
                    torch_ms, torch_n = timed(lambda: tmodel(*tfeeds), args.runs, args.seconds)
                dml_ms, dml_n = timed(lambda: sess.run(feeds), args.runs, args.seconds)
                ort_ms = None
                if use_ort:
                    ort_ms, ort_n, ort_outs = run_ort(onnx_path, feeds, args.threads, args.runs, args.seconds, work)
                    ort_err = float(np.max(np.abs(ort_outs[0] - ref)))
                onnx_ms = timed(lambda: onnx_sess.run(feeds), args.runs, args.seconds)[0] if onnx_sess else None
                rounds.append((torch_ms, dml_ms, ort_ms, onnx_ms))
            torch_ms = min(r[0] for r in rounds)
            dml_ms = min(r[1] for r in rounds)
            row = {"model": key, "batch": b, "dinoml_ms": dml_ms, "torch_ms": torch_ms, "max_abs_err_vs_torch": err,
                   "dinoml_runs": dml_n, "torch_runs": torch_n, "compile_s": compile_s,
                   "rounds_ms": [{"torch": r[0], "dinoml": r[1], "ort": r[2], "dinoml_onnx": r[3]} for r in rounds]}
            if onnx_sess is not None:
                row.update(dinoml_onnx_ms=min(r[3] for r in rounds), dinoml_onnx_max_abs_err_vs_torch=onnx_err)
            if use_ort:
                ort_ms = min(r[2] for r in rounds)
                row.update(ort_ms=ort_ms, ort_runs=ort_n, ort_max_abs_err_vs_torch=ort_err)
            results.append(row)
            line = (f"{key:9s} batch {b}: DinoML {dml_ms:8.2f} ms | PyTorch {torch_ms:8.2f} ms ({torch_ms / dml_ms:.2f}x)")
            if use_ort:
                line += f" | ORT {row['ort_ms']:8.2f} ms ({row['ort_ms'] / dml_ms:.2f}x)"
            if onnx_sess is not None:
                line += f" | DinoML (ONNX) {row['dinoml_onnx_ms']:8.2f} ms"
                if use_ort:
                    line += f" ({row['ort_ms'] / row['dinoml_onnx_ms']:.2f}x ORT)"
            line += f" | max|err| vs torch {err:.1e}"
            if onnx_sess is not None:
                line += f" (ONNX {onnx_err:.1e})"
            if len(rounds) > 1 and use_ort:
                line += " | ORT/DinoML per round " + " ".join(f"{r[2] / r[1]:.2f}" for r in rounds)
            print(line, flush=True)
    meta = {"machine": platform.processor() or platform.machine(), "cpu": machine.cpu_description(),
            "threads": args.threads, "profile": args.profile, "fp32_matmul_precision": args.fp32_matmul_precision,
            "commit": machine.commit(), "torch": torch.__version__,
            "command": "bench/models/run.py " + " ".join(sys.argv[1:])}
    print(json.dumps(meta))
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    if args.plot:
        _plot(results, args.plot, meta)
    return 0


def _plot(results, path, meta):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("[bench] --plot needs matplotlib (apt-get install python3-matplotlib)", file=sys.stderr)
        return
    labels = [f"{r['model']}\nb={r['batch']}" for r in results]
    series = [("DinoML", "dinoml_ms"), ("DinoML (ONNX)", "dinoml_onnx_ms"), ("PyTorch", "torch_ms"), ("ONNX Runtime", "ort_ms")]
    series = [s for s in series if all(s[1] in r for r in results)]
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(results)), 4))
    w = 0.8 / len(series)
    for i, (name, key) in enumerate(series):
        ax.bar([j + i * w for j in range(len(results))], [r[key] for r in results], w, label=name)
    ax.set_xticks([j + w * (len(series) - 1) / 2 for j in range(len(results))], labels)
    ax.set_ylabel("latency per inference (ms, lower is better)")
    ax.set_title(f"{meta['cpu']}, {meta['threads']} threads, commit {meta['commit']}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"[bench] wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
