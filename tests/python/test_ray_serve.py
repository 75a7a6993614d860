"""examples/serving/ray_serve.py on a local Ray instance: two replicas, @serve.batch, 48 concurrent
HTTP requests, each answer checked against NumPy. Slow (Ray starts in ~10-30 s), so it runs only
with DINOML_TEST_RAY=1:

    DINOML_TEST_RAY=1 .venv/bin/python -m pytest tests/python/test_ray_serve.py -q
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import sys
import urllib.request

import numpy as np
import pytest

if os.environ.get("DINOML_TEST_RAY") != "1":
    pytest.skip("Ray Serve test: set DINOML_TEST_RAY=1 to run it", allow_module_level=True)
ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")

import dinoml as dml  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "serving"))
W = np.random.default_rng(3).standard_normal((8, 6)).astype(np.float32)


class Linear(dml.Module):
    def __init__(self):
        self.w = dml.Parameter([8, 6])

    def forward(self, x):
        return dml.ops.output(dml.ops.gemm_rrr(x, self.w), "y")


def test_two_replicas_batch_concurrent_requests(tmp_path):
    from serve_harness import free_port
    import ray_serve
    batch = dml.Dim("batch", min=1, max=64, buckets=(1, 16, 64))
    art = dml.compile(dml.trace(Linear(), inputs={"x": dml.TensorSpec([batch, 8])}, constants={"w": W},
                                name="linear"), target="cpu", out=str(tmp_path / "linear")).path
    port = free_port()
    ray.init(num_cpus=2, include_dashboard=False, runtime_env={"env_vars": {
        "PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "python"), os.path.join(ROOT, "examples", "serving")])}})
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        handle = serve.run(ray_serve.DinoMLDeployment.options(autoscaling_config=None, num_replicas=2)
                           .bind(art), route_prefix="/", name="dinoml")
        xs = [np.random.default_rng(i).standard_normal((1 + i % 3, 8)).astype(np.float32) for i in range(48)]

        def call(x):
            req = urllib.request.Request(f"http://127.0.0.1:{port}/", data=json.dumps({"x": x.tolist()}).encode())
            with urllib.request.urlopen(req, timeout=120) as r:
                return np.asarray(json.loads(r.read())["y"], np.float32)

        with concurrent.futures.ThreadPoolExecutor(16) as ex:
            ys = list(ex.map(call, xs))
        for x, y in zip(xs, ys):
            np.testing.assert_allclose(y, x @ W, rtol=1e-5, atol=1e-5)
        # Both replicas served, and some calls were batched together.
        pids, sizes = set(), []
        for _ in range(40):
            pids.add(handle.pid.remote().result())
            sizes += handle.batch_sizes.remote().result()
        assert len(pids) == 2, pids
        assert max(sizes) > 1, sizes
        print(f"replicas: {sorted(pids)}; batch sizes seen: {sorted(sizes, reverse=True)[:10]}")
    finally:
        serve.shutdown()
        ray.shutdown()
