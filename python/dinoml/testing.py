"""Small helpers for examples and tests: deterministic data, the bucket boundaries of Dims
(where memory plans and kernels change) and session.run timing."""
from __future__ import annotations

import itertools
import statistics
import time
from typing import Dict, Iterator

import numpy as np


def deterministic(shape, seed: int, scale: float = 1.0, dtype=np.float32) -> np.ndarray:
    """Reproducible values in [-scale, scale)."""
    rng = np.random.default_rng(seed)
    return ((rng.random(shape, dtype=np.float32) * 2 - 1) * scale).astype(dtype)


def bucket_boundaries(dim) -> list:
    """Both ends of every bucket of a dml.Dim, ascending."""
    vals = set()
    for lo, hi in dim.bucket_bounds():
        vals.update((lo, hi))
    return sorted(vals)


def dim_grid(*dims) -> Iterator[Dict[str, int]]:
    """Every combination of the dims' bucket boundaries, as {dim name: value}."""
    names = [d.name for d in dims]
    for combo in itertools.product(*(bucket_boundaries(d) for d in dims)):
        yield dict(zip(names, combo))


def median_latency_ms(session, feeds, runs: int = 100) -> float:
    """Median wall time of session.run_numpy(feeds) over `runs` runs, after one warm-up run."""
    session.run_numpy(feeds)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        session.run_numpy(feeds)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def init_constants(model, seed: int = 0, norm_prefixes=()) -> dict:
    """Deterministic weights for every parameter of `model`, by PyTorch-style name: linear-style
    weights scaled by 1/sqrt(fan_in); parameters under `norm_prefixes` start near (1, 0) like
    PyTorch's norm layers."""
    consts = {}
    for i, (name, (shape, _)) in enumerate(sorted(model.state_dict_shapes().items())):
        if any(name.startswith(p) for p in norm_prefixes):
            base = 1.0 if name.endswith("weight") else 0.0
            consts[name] = (base + deterministic(shape, seed + i, scale=0.1)).astype(np.float32)
        else:
            fan_in = shape[-1] if len(shape) > 1 else shape[0]
            consts[name] = deterministic(shape, seed + i, scale=1.0 / np.sqrt(fan_in))
    return consts


def compile_and_check(spec, out_dir: str, dims, features: int, atol: float = 1e-4) -> int:
    """The examples' main: compiles `spec` (one input "x" of shape [*dims, features], one output
    "output"), runs every bucket boundary against the reference interpreter, prints the errors and
    the median session.run latency at the typical dims. Returns a process exit code."""
    from . import compiler, reference, runtime

    print(spec)
    art = compiler.compile(spec, target="cpu", out=out_dir)
    print(f"compiled -> {art.path}")
    session = runtime.load(art.path).create_session()
    worst = 0.0
    for i, values in enumerate(dim_grid(*dims)):
        x = deterministic([values[d.name] for d in dims] + [features], seed=1000 + i)
        y = session.run_numpy({"x": x})["output"]
        want = reference(spec, {"x": x})["output"]
        err = float(np.max(np.abs(y - want)))
        worst = max(worst, err)
        where = " ".join(f"{d.name}={values[d.name]:<3}" for d in dims)
        print(f"{where} y{list(y.shape)} max|err vs reference|={err:.2e}")
    x = deterministic([d.typical for d in dims] + [features], seed=7)
    typical = ", ".join(f"{d.name}={d.typical}" for d in dims)
    print(f"median session.run at {typical}: {median_latency_ms(session, {'x': x}):.3f} ms")
    ok = worst <= atol
    print("OK" if ok else f"MISMATCH: worst error {worst:.2e}")
    return 0 if ok else 1
