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
