"""`dinoml benchmark-ops cpu [--only OP ...]` and `dinoml benchmark-torch-ops --device cpu`.

Each op runs over a shape sweep as a one-op DinoML artifact (static shapes, compiled once per
shape, compile cache on), timed through `Session.run` (median of repeated runs after warm-up),
next to the peers that have the op, in the same process and with the same thread count:

  * PyTorch CPU (torch.nn.functional / torch ops; `torch.set_num_threads`),
  * oneDNN and OpenBLAS for the GEMMs, through DinoML's provider libraries
    (`libdinoml_cpu_onednn.so` / `libdinoml_cpu_openblas.so` of the build directory: the oneDNN
    primitive is created before timing, so only its execute call is timed).

A ratio is peer time / DinoML time: > 1 means DinoML is faster. `benchmark-torch-ops` is the same
sweep with PyTorch as the only peer (every op that PyTorch has). `--plot FILE.png` draws the
ratios (needs matplotlib), `--json FILE` keeps the numbers.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

import numpy as np

# (op, shapes, builder(ops, t, shape) -> tensor, torch fn(tensors, shape) or None, gemm (M, N, K) or None)
# builders receive the traced input tensors in the order of `inputs(shape)`.


def _gemm_inputs(s):
    M, N, K = s
    return {"a": (M, K), "w": (N, K), "bias": (N,)}


def _sweep(quick: bool):
    gemm_shapes = [(1, 768, 768), (8, 768, 3072), (16, 3072, 768), (128, 768, 768), (512, 768, 3072),
                   (256, 256, 256), (1024, 1024, 1024)] + ([] if quick else [(2048, 2048, 2048)])
    if quick:
        gemm_shapes = [(1, 768, 768), (16, 768, 768), (128, 768, 768), (256, 256, 256)]
    attn = [(1, 12, 128, 64), (8, 12, 128, 64), (1, 12, 512, 64)] + ([] if quick else [(1, 12, 2048, 64)])
    conv = [(1, 64, 56, 56, 64, 3, 1), (1, 128, 28, 28, 128, 3, 1), (1, 64, 56, 56, 128, 3, 2),
            (1, 256, 14, 14, 256, 3, 1), (1, 512, 7, 7, 512, 1, 1)]
    if quick:
        conv = conv[:2]
    rows = [(128, 768), (1024, 768), (96, 128)] if not quick else [(128, 768)]
    return [
        dict(op="gemm_rcr", shapes=gemm_shapes, inputs=lambda s: {"a": (s[0], s[2]), "w": (s[1], s[2])},
             build=lambda ops, t, s: ops.gemm_rcr(t["a"], t["w"]),
             torch=lambda T, x, s: T.nn.functional.linear(x["a"], x["w"]), gemm=lambda s: s, epi=0, bias=False),
        dict(op="gemm_rcr_bias_gelu", shapes=gemm_shapes[:5], inputs=_gemm_inputs,
             build=lambda ops, t, s: ops.gemm_rcr_bias_gelu(t["a"], t["w"], t["bias"]),
             torch=lambda T, x, s: T.nn.functional.gelu(T.nn.functional.linear(x["a"], x["w"], x["bias"])),
             gemm=lambda s: s, epi=2, bias=True),
        dict(op="bmm_rrr", shapes=[(12, 128, 64, 128), (96, 128, 128, 64)],
             inputs=lambda s: {"a": (s[0], s[1], s[2]), "b": (s[0], s[2], s[3])},
             build=lambda ops, t, s: ops.bmm_rrr(t["a"], t["b"]), torch=lambda T, x, s: T.bmm(x["a"], x["b"])),
        dict(op="softmax", shapes=rows, inputs=lambda s: {"x": s},
             build=lambda ops, t, s: ops.softmax(t["x"], axis=-1), torch=lambda T, x, s: T.softmax(x["x"], dim=-1)),
        dict(op="layer_norm", shapes=rows, inputs=lambda s: {"x": s, "g": (s[1],), "b": (s[1],)},
             build=lambda ops, t, s: ops.layer_norm(t["x"], t["g"], t["b"]),
             torch=lambda T, x, s: T.nn.functional.layer_norm(x["x"], (s[1],), x["g"], x["b"])),
        dict(op="gelu", shapes=[(128, 3072), (1024, 3072)], inputs=lambda s: {"x": s},
             build=lambda ops, t, s: ops.gelu(t["x"]), torch=lambda T, x, s: T.nn.functional.gelu(x["x"])),
        dict(op="reduce_sum", shapes=rows, inputs=lambda s: {"x": s},
             build=lambda ops, t, s: ops.reduce_sum(t["x"], axes=[-1]), torch=lambda T, x, s: T.sum(x["x"], dim=-1)),
        dict(op="scaled_dot_product_attention", shapes=attn,
             inputs=lambda s: {n: s for n in "qkv"},
             build=lambda ops, t, s: ops.scaled_dot_product_attention(t["q"], t["k"], t["v"]),
             torch=lambda T, x, s: T.matmul(T.softmax(T.matmul(x["q"], x["k"].transpose(-1, -2)) / math.sqrt(s[3]),
                                                      dim=-1), x["v"])),
        dict(op="conv2d_bias_relu", shapes=conv,
             inputs=lambda s: {"x": (s[0], s[1], s[2], s[3]), "w": (s[4], s[1], s[5], s[5]), "b": (s[4],)},
             build=lambda ops, t, s: ops.conv2d_bias_relu(t["x"], t["w"], t["b"], stride=[s[6], s[6]],
                                                          padding=[s[5] // 2] * 4),
             torch=lambda T, x, s: T.relu(T.nn.functional.conv2d(x["x"], x["w"], x["b"], stride=s[6], padding=s[5] // 2)),
             const=("w", "b")),
        dict(op="max_pool2d", shapes=[(1, 64, 112, 112), (8, 64, 112, 112)], inputs=lambda s: {"x": s},
             build=lambda ops, t, s: ops.max_pool2d(t["x"], 3, 2, 1),
             torch=lambda T, x, s: T.nn.functional.max_pool2d(x["x"], 3, 2, 1)),
    ]


def _timed(fn: Callable[[], object], seconds: float) -> float:
    for _ in range(2):
        fn()
    ts: List[float] = []
    end = time.perf_counter() + seconds
    while len(ts) < 5 or (time.perf_counter() < end and len(ts) < 2000):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


class _Provider:
    """A GEMM provider library with DinoML's GEMM signature (kernels/cpu/providers)."""

    def __init__(self, path: Path, prefix: str):
        self.name = prefix
        self.lib = ctypes.CDLL(str(path))
        self.gemm = getattr(self.lib, f"dml_cpu_{prefix}_gemm")
        self.gemm.restype = ctypes.c_int
        self.gemm.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64] + \
            [ctypes.c_void_p] * 5 + [ctypes.c_int]
        self.prepare = getattr(self.lib, f"dml_cpu_{prefix}_prepare", None)
        if self.prepare is not None:
            self.prepare.restype = ctypes.c_int
            self.prepare.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                     ctypes.c_int, ctypes.c_int]

    def timer(self, a, w, bias, out, epi):
        M, K = a.shape
        N = w.shape[0]
        ptr = lambda x: x.ctypes.data if x is not None else None  # noqa: E731
        if self.prepare is not None:
            self.prepare(0, 1, M, N, K, int(bias is not None), epi)
        args = (0, 1, M, N, K, ptr(a), ptr(w), ptr(bias), None, ptr(out), epi)  # b_layout 1 = rcr
        if self.gemm(*args) != 0:
            return None
        return lambda: self.gemm(*args)


def _providers(build_dir: Path) -> List[_Provider]:
    out = []
    for prefix in ("onednn", "openblas"):
        p = build_dir / f"libdinoml_cpu_{prefix}.so"
        if p.exists():
            try:
                out.append(_Provider(p, prefix))
            except OSError as e:
                print(f"[benchmark-ops] {p.name} not usable: {e}", file=sys.stderr)
    return out


def run(device: str, only: Optional[List[str]], torch_only: bool, quick: bool, threads: int, seconds: float,
        json_path: Optional[str], plot_path: Optional[str]) -> int:
    if device != "cpu":
        print(f"benchmark-ops: unknown device '{device}' (cpu or cuda)", file=sys.stderr)
        return 2
    os.environ["OMP_NUM_THREADS"] = str(threads)
    import dinoml as dml
    try:
        import torch
        torch.set_num_threads(threads)
    except ImportError:
        torch = None
        if torch_only:
            print("benchmark-torch-ops: PyTorch is not installed (apt-get install python3-torch)", file=sys.stderr)
            return 2
    sweep = _sweep(quick)
    known = [s["op"] for s in sweep]
    if only:
        bad = [o for o in only if o not in known]
        if bad:
            print(f"benchmark-ops: unknown op(s) {bad}; ops with a sweep: {', '.join(known)}", file=sys.stderr)
            return 2
        sweep = [s for s in sweep if s["op"] in only]
    build_dir = Path(os.environ.get("DINOML_BUILD_DIR", Path(__file__).resolve().parents[3] / "build"))
    providers = [] if torch_only else _providers(build_dir)
    work = Path(tempfile.mkdtemp(prefix="dinoml_benchmark_ops_"))
    rng = np.random.default_rng(0)
    results = []
    peers = (["torch"] if torch is not None else []) + [p.name for p in providers]
    print(f"# {'op':30s} {'shape':28s} {'DinoML us':>10s} " + " ".join(f"{p + ' us':>12s} {'ratio':>6s}" for p in peers))
    for entry in sweep:
        for shape in entry["shapes"]:
            specs = entry["inputs"](shape)
            feeds = {n: (rng.standard_normal(s) * 0.5).astype(np.float32) for n, s in specs.items()}
            consts = {n: feeds.pop(n) for n in entry.get("const", ())}
            names = list(feeds)

            class _Op(dml.Module):
                def __init__(self):
                    for n, v in consts.items():
                        setattr(self, n, dml.Parameter(list(v.shape), "float32"))

                def forward(self, *args):
                    t = dict(zip(names, args))  # trace passes the inputs positionally, in dict order
                    for n in consts:
                        t[n] = getattr(self, n)
                    return entry["build"](dml.ops, t, shape)

            spec = dml.trace(_Op(), inputs={n: dml.TensorSpec(list(v.shape), "float32") for n, v in feeds.items()},
                             constants=consts, name=entry["op"])
            tag = f"{entry['op']}_{'x'.join(map(str, shape))}"
            art = dml.compile(spec, target="cpu", out=str(work / tag), progress=False)
            sess = dml.runtime.load(art.path).create_session()
            got = sess.run(feeds)["output"]
            t_dml = _timed(lambda: sess.run(feeds), seconds)
            row = {"op": entry["op"], "shape": list(shape), "dinoml_s": t_dml, "peers": {}}
            if torch is not None and entry.get("torch") is not None:
                tx = {n: torch.from_numpy(v) for n, v in {**feeds, **consts}.items()}
                with torch.no_grad():
                    ref = entry["torch"](torch, tx, shape).numpy()
                    row["max_abs_err_vs_torch"] = float(np.max(np.abs(got - ref)))
                    row["peers"]["torch"] = _timed(lambda: entry["torch"](torch, tx, shape), seconds)
            if entry.get("gemm") and providers:
                a, w = feeds["a"], feeds["w"]
                bias = feeds.get("bias") if entry.get("bias") else None
                out = np.empty((a.shape[0], w.shape[0]), np.float32)
                for p in providers:
                    fn = p.timer(a, w, bias, out, entry.get("epi", 0))
                    if fn is not None:
                        row["peers"][p.name] = _timed(fn, seconds)
            results.append(row)
            cols = []
            for p in peers:
                t = row["peers"].get(p)
                cols.append(f"{t * 1e6:12.1f} {t / t_dml:5.2f}x" if t else f"{'-':>12s} {'':6s}")
            print(f"  {entry['op']:30s} {str(tuple(shape)):28s} {t_dml * 1e6:10.1f} " + " ".join(cols), flush=True)
    summary = {}
    for p in peers:
        ratios = [r["peers"][p] / r["dinoml_s"] for r in results if p in r["peers"]]
        if ratios:
            summary[p] = {"median_ratio": statistics.median(ratios), "min_ratio": min(ratios), "n": len(ratios)}
            print(f"# vs {p}: median {summary[p]['median_ratio']:.2f}x, min {summary[p]['min_ratio']:.2f}x over "
                  f"{len(ratios)} cases (> 1: DinoML faster)")
    if json_path:
        Path(json_path).write_text(json.dumps({"threads": threads, "results": results, "summary": summary}, indent=1))
    if plot_path:
        _plot(results, peers, plot_path)
    return 0


def _plot(results, peers, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("benchmark-ops: --plot needs matplotlib (apt-get install python3-matplotlib)", file=sys.stderr)
        return
    labels = [f"{r['op']}\n{'x'.join(map(str, r['shape']))}" for r in results]
    fig, ax = plt.subplots(figsize=(max(8, 0.5 * len(results)), 5))
    w = 0.8 / max(1, len(peers))
    for i, p in enumerate(peers):
        ax.bar([j + i * w for j in range(len(results))],
               [r["peers"][p] / r["dinoml_s"] if p in r["peers"] else 0 for r in results], w, label=f"{p} / DinoML")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(results)), labels, rotation=90, fontsize=6)
    ax.set_ylabel("time ratio (> 1: DinoML faster)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"[benchmark-ops] wrote {path}")


def _wants_cuda(argv: List[str], torch_only: bool) -> bool:
    if torch_only:
        return any(a in ("--device=cuda",) or (a == "--device" and argv[i + 1:i + 2] == ["cuda"]) for i, a in enumerate(argv))
    return bool(argv) and argv[0] == "cuda"


def main(argv: List[str], torch_only: bool = False) -> int:
    if _wants_cuda(argv, torch_only):  # the GPU sweep: one-op CUDA artifacts timed on the device
        from . import benchmark_ops_cuda
        return benchmark_ops_cuda.main(argv, torch_only=torch_only)
    name = "benchmark-torch-ops" if torch_only else "benchmark-ops"
    p = argparse.ArgumentParser(prog=f"dinoml {name}", description=__doc__.split("\n\n")[1])
    if torch_only:
        p.add_argument("--device", default="cpu")
    else:
        p.add_argument("device", nargs="?", default="cpu")
    p.add_argument("--only", nargs="+", help="ops to run (default: all with a sweep)")
    p.add_argument("--quick", action="store_true", help="fewer, smaller shapes")
    p.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", os.cpu_count() or 1)))
    p.add_argument("--seconds", type=float, default=0.3, help="timing budget per measurement")
    p.add_argument("--json")
    p.add_argument("--plot")
    a = p.parse_args(argv)
    return run(a.device, a.only, torch_only, a.quick, a.threads, a.seconds, a.json, a.plot)
