"""Load test of `dinoml serve` (not in CI): N concurrent KServe v2 clients for T seconds against
one model, then the same input through one in-process session for comparison.

    python bench/serve/load.py [--clients 64] [--seconds 30] [--threads 2] [--model mlp|gemm8] [--artifact DIR]

Models (compiled into a temporary directory): `--model mlp` (default), examples/mlp.py (Linear
32->64, GELU, Linear 64->16) at batch 4, seq 16; `--model gemm8`, eight 512x512 layers at 64 rows. The server runs as its own process (`python -m dinoml.cli serve`);
the clients are tritonclient's asyncio HTTP client (binary tensor data) on one event loop in this
process, each sending its next request when the previous answer arrives. Every answer is checked
against the in-process result. Timing surfaces: client-side request latency (send to parsed
answer) and server throughput (answers / wall seconds) vs `session.run_numpy` calls/s of one
session in this process. Prints one JSON line; exits 1 on any error.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import dinoml as dml  # noqa: E402
from serve_harness import free_port, wait_live  # noqa: E402

import machine  # noqa: E402


def build_artifact(which: str, tmp: str) -> str:
    """mlp: examples/mlp.py (~0.03 ms per run: the HTTP path dominates); gemm8: eight 512x512
    layers with ReLU on [rows, 512] (~1-3 ms per run at 64 rows: the model dominates)."""
    if which == "mlp":
        sys.path.insert(0, os.path.join(ROOT, "examples"))
        import mlp
        return dml.compile(mlp.build_spec(), target="cpu", out=os.path.join(tmp, "mlp")).path
    rng = np.random.default_rng(1)
    sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
    from testkit import Gemm8  # the model the server tests use
    rows = dml.Dim("rows", min=1, max=256, buckets=(1, 64, 256))
    w = {f"w{i}": (rng.standard_normal((512, 512)) / 512 ** 0.5).astype(np.float32) for i in range(8)}
    spec = dml.trace(Gemm8(), inputs={"x": dml.TensorSpec([rows, 512])}, constants=w, name="gemm8")
    return dml.compile(spec, target="cpu", out=os.path.join(tmp, "gemm8")).path


def in_process(artifact: str, feeds, seconds: float):
    s = dml.runtime.load(artifact).create_session()
    for _ in range(20):
        s.run_numpy(feeds)
    lat, end = [], time.perf_counter() + seconds
    t0 = time.perf_counter()
    while time.perf_counter() < end:
        t = time.perf_counter()
        s.run_numpy(feeds)
        lat.append(time.perf_counter() - t)
    return len(lat) / (time.perf_counter() - t0), np.asarray(lat)


async def load(port: int, model: str, name: str, x: np.ndarray, want: dict, clients: int, seconds: float):
    import tritonclient.http.aio as aioclient
    c = aioclient.InferenceServerClient(url=f"127.0.0.1:{port}", conn_limit=clients)
    lat, errors = [], []
    end = time.perf_counter() + seconds

    async def worker():
        while time.perf_counter() < end:
            inp = aioclient.InferInput(name, list(x.shape), "FP32")
            inp.set_data_from_numpy(x, binary_data=True)
            t = time.perf_counter()
            try:
                r = await c.infer(model, [inp])
                for k, v in want.items():
                    if not np.allclose(r.as_numpy(k), v, rtol=1e-5, atol=1e-5):
                        errors.append(f"output {k} differs")
            except Exception as e:  # counted and reported
                errors.append(str(e)[:200])
                continue
            lat.append(time.perf_counter() - t)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(clients)))
    wall = time.perf_counter() - t0
    await c.close()
    return np.asarray(lat), errors, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--threads", type=int, default=0, help="dinoml serve --threads (default: its default)")
    ap.add_argument("--max-queue", type=int, default=128)
    ap.add_argument("--model", choices=["mlp", "gemm8"], default="mlp", help="built-in model (see build_artifact)")
    ap.add_argument("--artifact", default=None, help="serve this artifact (one float32 input) instead")
    ap.add_argument("--shape", default=None, help="input shape (default 4,16,32 for mlp, 64,512 for gemm8)")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="dinoml-serve-load-")
    art = a.artifact or build_artifact(a.model, tmp)
    shape = a.shape or {"mlp": "4,16,32", "gemm8": "64,512"}[a.model]
    module = dml.runtime.load(art)
    (inp,) = module.inputs
    x = np.random.default_rng(0).standard_normal([int(d) for d in shape.split(",")]).astype(np.float32)
    want = module.create_session().run_numpy({inp.name: x})
    # One in-process session before and after the server phase (the better of the two is reported:
    # on a shared machine either may be disturbed).
    before = in_process(art, {inp.name: x}, min(a.seconds, 10.0))
    model = "m"
    port = free_port()
    cmd = [sys.executable, "-m", "dinoml.cli", "serve", f"{model}={art}", "--port", str(port),
           "--max-queue", str(a.max_queue)] + (["--threads", str(a.threads)] if a.threads else [])
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_live(port, proc=proc)
        lat, errors, wall = asyncio.run(load(port, model, inp.name, x, want, a.clients, a.seconds))
    finally:
        proc.terminate()
        rc = proc.wait(60)
    after = in_process(art, {inp.name: x}, min(a.seconds, 10.0))
    ips, ilat = max(before, after, key=lambda r: r[0])
    ms = lambda v: round(float(v) * 1e3, 3)  # noqa: E731
    res = {"clients": a.clients, "seconds": round(wall, 2), "requests": int(len(lat)), "errors": len(errors),
           "first_errors": errors[:3], "server_rps": round(len(lat) / wall, 1),
           "p50_ms": ms(np.percentile(lat, 50)) if len(lat) else None,
           "p99_ms": ms(np.percentile(lat, 99)) if len(lat) else None,
           "in_process_runs_per_s": round(ips, 1),
           "in_process_runs_per_s_before_after": [round(before[0], 1), round(after[0], 1)], "in_process_p50_ms": ms(np.percentile(ilat, 50)),
           "server_vs_in_process": round(len(lat) / wall / ips, 3), "server_exit": rc,
           "input_shape": list(x.shape), "model": os.path.basename(os.path.normpath(art)),
           "cpu": machine.cpu_description(), "cores": len(os.sched_getaffinity(0))}
    print(json.dumps(res))
    return 0 if not errors and rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
